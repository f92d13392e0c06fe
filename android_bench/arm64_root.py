"""Builds the arm64 Debian user space `android_bench.arm64` runs models in.

    make arm64-root          # = python -m android_bench.arm64_root

Once, as root (debootstrap), outside the repository ($ARM64_ROOT or
~/.cache/compact-bert-pipeline/arm64-root), in about a minute (~70 MB
fetched, ~310 MB on disk) and without emulating a whole system:
1. `debootstrap --foreign --variant=minbase --include=python3` (its first
   stage only unpacks, so no chroot or binfmt is needed), then the .debs
   it fetched for python3 unpacked with dpkg-deb (the second stage would
   install them; nothing here needs their maintainer scripts); the .debs
   and apt's lists are then dropped; /proc becomes a directory holding a
   Cortex-A76 cpuinfo (`_fake_proc`: LiteRT crashes on the host's);
2. the host's pinned ai-edge-litert and numpy as aarch64 wheels (`pip
   install --target --platform`), the other dependencies at the host's
   versions too;
3. every .py compiled under emulation (the runs never write into the root);
4. the instruction-count plugin for qemu-user, compiled with the host's
   gcc against qemu's plugin API (Debian ships qemu-user with plugins on,
   but neither the plugin nor its header: the few declarations it uses are
   below). Without gcc the root is still built and says why it cannot count.
It is built into ROOT.partial and renamed into place once its record
(`arm64.STAMP`: versions, size, minutes) is written; an up-to-date root is
left alone (--force rebuilds).
"""

import contextlib
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from android_bench import arm64, arm64_runner
from tfmodels.command_options import define_flags, from_flags, option

FLAGS = flags.FLAGS

# qemu's TCG plugin API (QEMU_PLUGIN_VERSION 1, qemu 7.2's
# include/qemu/qemu-plugin.h), only what an instruction count needs. Each
# translated block gets an exec callback whose user data packs its
# instruction count and how many of them are SDOT / UDOT (vector or by
# element); counts are per vCPU (one per guest thread). The runner marks
# the inferences it repeats with a failing lseek(-1, MARK_OFFSET, 0 / 1)
# (`arm64_runner.mark`): the totals at each pair of marks give a section,
# so start-up and loading, which vary from run to run, are never counted.
PLUGIN_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*vcpu_udata_cb)(unsigned int, void *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
typedef void (*syscall_cb)(qemu_plugin_id_t, unsigned int, int64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t);
enum { CB_NO_REGS = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *,
                                          vcpu_udata_cb, int, void *);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t, syscall_cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(
    const struct qemu_plugin_tb *, size_t);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define SLOTS 1024
#define LSEEK 62  /* aarch64 */
#define MARK_OFFSET %(mark)dULL
struct slot { uint64_t insns, dot; char pad[48]; };
static struct slot slots[SLOTS];
static uint64_t mark_insns, mark_dot, section_insns, section_dot, sections;
static char out_path[4096];

static int is_dot(uint32_t insn) {
  return (insn & 0x9FE0FC00u) == 0x0E809400u     /* SDOT/UDOT vector */
      || (insn & 0x9FC0F400u) == 0x0F80E000u;    /* SDOT/UDOT element */
}

static void on_exec(unsigned int vcpu, void *udata) {
  uint64_t packed = (uint64_t)(uintptr_t)udata;
  struct slot *s = &slots[vcpu %% SLOTS];
  __atomic_fetch_add(&s->insns, packed & 0xFFFFFFFFu, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->dot, packed >> 32, __ATOMIC_RELAXED);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t n = qemu_plugin_tb_n_insns(tb), dot = 0;
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    uint32_t word = 0;
    if (qemu_plugin_insn_size(insn) == 4) {
      memcpy(&word, qemu_plugin_insn_data(insn), 4);
      dot += is_dot(word);
    }
  }
  qemu_plugin_register_vcpu_tb_exec_cb(
      tb, on_exec, CB_NO_REGS,
      (void *)(uintptr_t)(((uint64_t)dot << 32) | (uint64_t)n));
}

static void totals(uint64_t *insns, uint64_t *dot) {
  *insns = *dot = 0;
  for (int i = 0; i < SLOTS; i++) {
    *insns += __atomic_load_n(&slots[i].insns, __ATOMIC_RELAXED);
    *dot += __atomic_load_n(&slots[i].dot, __ATOMIC_RELAXED);
  }
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num,
                       uint64_t fd, uint64_t offset, uint64_t whence,
                       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7,
                       uint64_t a8) {
  uint64_t insns, dot;
  if (num != LSEEK || (uint32_t)fd != 0xFFFFFFFFu || offset != MARK_OFFSET)
    return;
  totals(&insns, &dot);
  if (whence == 0) {
    mark_insns = insns;
    mark_dot = dot;
  } else {
    section_insns += insns - mark_insns;
    section_dot += dot - mark_dot;
    sections++;
  }
}

static void on_exit(qemu_plugin_id_t id, void *udata) {
  uint64_t insns, dot;
  FILE *f = fopen(out_path, "w");
  totals(&insns, &dot);
  if (f) {
    fprintf(f, "insns %%llu\ndot %%llu\nsection_insns %%llu\n"
            "section_dot %%llu\nsections %%llu\n", (unsigned long long)insns,
            (unsigned long long)dot, (unsigned long long)section_insns,
            (unsigned long long)section_dot, (unsigned long long)sections);
    fclose(f);
  }
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                        int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strncmp(argv[i], "out=", 4) == 0)
      snprintf(out_path, sizeof out_path, "%%s", argv[i] + 4);
  if (!out_path[0]) {
    fprintf(stderr, "libinsn: give out=FILE\n");
    return 1;
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
  qemu_plugin_register_atexit_cb(id, on_exit, NULL);
  return 0;
}
""" % {"mark": arm64_runner.MARK_OFFSET}


class BuildError(Exception):
  """A step of the build failed; one line naming it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Arm64RootOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  root: str | None = option(None, "Where the root goes (default: "
                            f"${arm64.ROOT_ENV} or ~/.cache/"
                            "compact-bert-pipeline/arm64-root).")
  mirror: str = option(arm64.MIRROR, "The Debian mirror debootstrap "
                       "fetches from.")
  force: bool = option(False, "Rebuild even when the root is up to date.")


def define_command_flags():
  """Defines the flags, when run as a command only."""
  define_flags(Arm64RootOptions)


def _log(message):
  print(f"arm64-root: {message}", file=sys.stderr, flush=True)


def _run(command, step, **kwargs):
  """Runs a step's command; BuildError with its last lines on failure."""
  from tfmodels.process_lifetime import die_with_parent
  done = subprocess.run(command, capture_output=True, text=True,
                        preexec_fn=die_with_parent, check=False, **kwargs)
  if done.returncode != 0:
    tail = [l for l in (done.stderr + done.stdout).splitlines() if l.strip()]
    raise BuildError(f"{step} failed (exit {done.returncode}): "
                     + (" | ".join(tail[-3:]) or "no message"))
  return done.stdout


def _guest_python(root, stamp, code, **kwargs):
  return _run(arm64.qemu_command(root, stamp, ["-c", code]),
              "the emulated python3", env=arm64.guest_environment(root),
              **kwargs)


def _debootstrap(partial, mirror):
  """First stage (unpacks the required set), then python3's packages."""
  _log(f"debootstrap {arm64.SUITE} arm64 (minbase + python3) from {mirror}")
  _run(["debootstrap", "--arch=arm64", "--variant=minbase", "--foreign",
        "--include=python3", arm64.SUITE, partial, mirror], "debootstrap")
  # The first stage unpacked the `required` set; `base` (python3 and its
  # libraries) waits for the second. Unpacked through tar so the merged
  # /usr's /bin, /lib, /sbin links stay links.
  meta = os.path.join(partial, "debootstrap")
  with open(os.path.join(meta, "base"), encoding="utf-8") as f:
    base = f.read().split()
  with open(os.path.join(meta, "debpaths"), encoding="utf-8") as f:
    debs = dict(line.split() for line in f if line.strip())
  _log(f"unpacking the {len(base)} packages the first stage leaves to the "
       "second (python3 and its libraries)")
  for name in base:
    deb = os.path.join(partial, debs[name].lstrip("/"))
    _run(["sh", "-c", 'dpkg-deb --fsys-tarfile "$1" | tar -x '
          '--keep-directory-symlink -C "$2"', "sh", deb, partial],
         f"unpacking {os.path.basename(deb)}")
  # Nothing installs packages here later: the .debs and apt's lists go.
  for directory in (os.path.join("var", "cache", "apt", "archives"),
                    os.path.join("var", "lib", "apt", "lists")):
    for name in os.listdir(os.path.join(partial, directory)):
      path = os.path.join(partial, directory, name)
      if os.path.isfile(path) and not os.path.islink(path):
        os.unlink(path)
  python = os.path.join("/usr", "bin", "python3")
  target = os.path.realpath(os.path.join(partial, python.lstrip("/")))
  if not os.path.isfile(target):
    raise BuildError(f"{partial}: no {python} after unpacking")
  return "/" + os.path.relpath(target, partial)


# /proc/cpuinfo as Linux prints it on CPU cores (qemu 7.2 shows the guest
# the host's x86 file, and cpuinfo, which XNNPACK and ruy ask what the CPU
# is, crashes on it). The root's /proc holds only this file, so qemu's -L
# lookup finds it there and everything else in the host's /proc; cores
# listed beyond the present ones are ignored.
CPUINFO_FEATURES = ("fp asimd aes pmull sha1 sha2 crc32 atomics fphp "
                    "asimdhp cpuid asimdrdm lrcpc dcpop asimddp")
CPUINFO_MIDR = {"CPU implementer": "0x41", "CPU architecture": "8",
                "CPU variant": "0x4", "CPU part": "0xd0b",
                "CPU revision": "1"}  # Arm Cortex-A76 r4p1, as qemu's model
CPUINFO_CORES = 256


def _fake_proc(partial):
  """Replaces the first stage's /proc link (to the host's) with a
  directory holding only the Cortex-A76 cpuinfo."""
  proc = os.path.join(partial, "proc")
  if os.path.islink(proc):
    os.unlink(proc)
  os.makedirs(proc, exist_ok=True)
  blocks = []
  for core in range(CPUINFO_CORES):
    fields = {"processor": str(core), "BogoMIPS": "50.00",
              "Features": CPUINFO_FEATURES, **CPUINFO_MIDR}
    blocks.append("".join(f"{k}\t: {v}\n" for k, v in fields.items()))
  with open(os.path.join(proc, "cpuinfo"), "w", encoding="utf-8") as f:
    f.write("\n".join(blocks))


def _platforms(glibc):
  """pip --platform tags an aarch64 glibc `glibc` runs (manylinux_2_17
  up to it)."""
  major, minor = (int(x) for x in glibc.split(".")[:2])
  if major != 2:
    raise BuildError(f"unexpected glibc {glibc}")
  tags = []
  for m in range(17, minor + 1):
    tags += ["--platform", f"manylinux_2_{m}_aarch64"]
  return tags


def _host_constraints(directory):
  """A pip constraints file pinning ai-edge-litert's dependencies to the
  host's installed versions (those the host has)."""
  import re
  from importlib import metadata
  lines = []
  for requirement in metadata.requires("ai-edge-litert") or ():
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    with contextlib.suppress(metadata.PackageNotFoundError):
      lines.append(f"{name}=={metadata.version(name)}")
  path = os.path.join(directory, "constraints.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def _install_wheels(partial, guest, wanted, scratch):
  target = os.path.join(partial, arm64.PACKAGES_DIR)
  version = guest["python"].split(".")
  tag = f"{version[0]}{version[1]}"
  pins = [f"{n}=={v}" for n, v in wanted.items()]
  _log(f"pip: {' '.join(pins)} for cp{tag} aarch64 (glibc {guest['glibc']})")
  _run([sys.executable, "-m", "pip", "install", "--quiet",
        "--disable-pip-version-check", "--no-compile", "--target", target,
        "--only-binary=:all:", "--implementation", "cp",
        "--python-version", f"{version[0]}.{version[1]}", "--abi",
        f"cp{tag}", *_platforms(guest["glibc"]), "--constraint",
        _host_constraints(scratch), *pins], "pip install (aarch64 wheels)")


def _plugin(partial, stamp):
  """(plugin path, None) or (None, why there is none)."""
  gcc = shutil.which("gcc") or shutil.which("cc")
  if not gcc:
    return None, "no C compiler on the host to build the qemu plugin"
  source = os.path.join(partial, "opt", "qemu-plugins", "libinsn.c")
  os.makedirs(os.path.dirname(source), exist_ok=True)
  with open(source, "w", encoding="utf-8") as f:
    f.write(PLUGIN_SOURCE)
  output = os.path.join(partial, arm64.PLUGIN)
  try:
    _run([gcc, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o",
          output, source], "gcc (qemu plugin)")
    with tempfile.TemporaryDirectory() as scratch:
      counts = os.path.join(scratch, "counts.txt")
      marked = ("import arm64_runner as r\nr.mark(False)\n"
                "sum(range(1000))\nr.mark(True)\n")
      _run(arm64.qemu_command(partial, stamp, ["-c", marked], counts),
           "qemu-aarch64 -plugin", env=dict(
               arm64.guest_environment(partial),
               PYTHONPATH=os.pathsep.join((
                   os.path.dirname(arm64.RUNNER),
                   os.path.join(partial, arm64.PACKAGES_DIR)))))
      with open(counts, encoding="utf-8") as f:
        found = {k: int(v) for k, v in (l.split() for l in f if l.strip())}
    if not found["insns"] > found["section_insns"] > 0 or (
        found["sections"] != 1):
      return None, f"the plugin counted nothing sensible ({found})"
  except (BuildError, OSError, ValueError, KeyError) as e:
    return None, f"the qemu plugin does not work here: {e}"
  return "/" + arm64.PLUGIN, None


def _size_bytes(root):
  total = 0
  for directory, _, files in os.walk(root):
    for name in files:
      with contextlib.suppress(OSError):
        total += os.lstat(os.path.join(directory, name)).st_blocks * 512
  return total


def _qemu_version():
  out = _run([arm64.qemu_binary(), "--version"], "qemu-aarch64 --version")
  return out.splitlines()[0].split("version", 1)[-1].strip()


def build(root, mirror=arm64.MIRROR, force=False):
  """Builds (or keeps, when up to date) the root; returns its record."""
  from tfmodels.staging import output_lock
  wanted = arm64.wanted_versions()
  for tool, package in (("debootstrap", "debootstrap"),
                        ("qemu-aarch64", "qemu-user"),
                        ("dpkg-deb", "dpkg")):
    if not shutil.which(tool):
      raise BuildError(f"{tool} is not installed (apt-get install {package}; "
                       "make arm64-root does)")
  if os.geteuid() != 0:
    raise BuildError("debootstrap needs root (it makes device nodes and "
                     "owners): run make arm64-root as root; ARM64_ROOT "
                     "chooses where the root goes")
  with output_lock(root, f"${arm64.ROOT_ENV}"):
    stamp = arm64.read_stamp(root)
    if not force and stamp and stamp.get("packages") == wanted and (
        stamp.get("suite"), stamp.get("cpu")) == (arm64.SUITE, arm64.CPU):
      _log(f"{root} is up to date (built {stamp['built']}); --force "
           "rebuilds it")
      return stamp
    begin = time.time()
    partial, old = root + ".partial", root + ".old"
    for leftover in (partial, old):
      if os.path.lexists(leftover):
        shutil.rmtree(leftover)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    try:
      python = _debootstrap(partial, mirror)
      _fake_proc(partial)
      stamp = {"format": arm64.FORMAT, "suite": arm64.SUITE,
               "cpu": arm64.CPU, "python": python}
      guest = json.loads(_guest_python(partial, stamp, (
          "import json, platform, sys; print(json.dumps({'python': "
          "platform.python_version(), 'glibc': platform.libc_ver()[1], "
          "'machine': platform.machine()}))")).strip().splitlines()[-1])
      if guest["machine"] != "aarch64":
        raise BuildError(f"the root's python runs as {guest['machine']}")
      with tempfile.TemporaryDirectory() as scratch:
        _install_wheels(partial, guest, wanted, scratch)
      _log("compiling the .py files under emulation")
      _run(arm64.qemu_command(partial, stamp, [
          "-m", "compileall", "-q", "-j", "0",
          os.path.join(partial, "usr", "lib", f"python{guest['python'][:4]}"),
          os.path.join(partial, arm64.PACKAGES_DIR)]),
           "compileall", env=dict(arm64.guest_environment(partial),
                                  PYTHONDONTWRITEBYTECODE=""))
      held = json.loads(_guest_python(partial, stamp, (
          "import json, numpy; from importlib import metadata; "
          "from ai_edge_litert import interpreter; "
          f"print(json.dumps({{n: metadata.version(n) for n in "
          f"{list(wanted)!r}}}))")).strip().splitlines()[-1])
      if held != wanted:
        raise BuildError(f"the root holds {held}, not {wanted}")
      plugin, reason = _plugin(partial, stamp)
      _log("instruction counts: " + ("yes" if plugin else f"no ({reason})"))
      stamp.update(
          packages=held, guest=guest, qemu=_qemu_version(), plugin=plugin,
          plugin_reason=reason, mirror=mirror,
          host=f"{platform.machine()} {platform.python_version()}",
          built=time.strftime("%Y-%m-%d %H:%M:%S"),
          build_minutes=round((time.time() - begin) / 60, 1),
          size_mb=round(_size_bytes(partial) / 2**20))
      with open(os.path.join(partial, arm64.STAMP), "w",
                encoding="utf-8") as f:
        json.dump(stamp, f, indent=1)
      if os.path.lexists(root):
        os.rename(root, old)
      os.rename(partial, root)
      shutil.rmtree(old, ignore_errors=True)
    except BaseException:
      shutil.rmtree(partial, ignore_errors=True)
      raise
  _log(f"built {root}: {stamp['size_mb']} MB in {stamp['build_minutes']} "
       "min")
  return stamp


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(Arm64RootOptions, FLAGS)
  from tfmodels.staging import OutputError
  root = (os.path.abspath(os.path.expanduser(options.root)) if options.root
          else arm64.default_root())
  try:
    build(root, options.mirror, options.force)
  except (BuildError, OutputError) as e:
    sys.exit(f"error: {e}")


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
