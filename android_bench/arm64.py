"""Shipped .tflite files run on arm64 under qemu-user, beside the host.

An x86 host runs XNNPACK's x86 kernels; a phone runs its ARM ones (NEON,
the dot-product int8 kernels). This runs a model's ARM path in an arm64
Debian user space under qemu-user with a phone-class CPU (`CPU`, a
Cortex-A76: ARMv8.2 with the dot-product and fp16 extensions, the big
core of 2019-2021 phones) and compares its outputs with the host's. It
checks that the file computes the same on ARM; under emulation, times are
no latencies and are never reported as such.

    make arm64-root                    # once: the root, outside the repo
    python -m android_bench.arm64 --model student_int8.tflite [--samples 3]

    root, reason = arm64_root()        # (path, None) or (None, why not)
    outputs = run_on_arm64("m.tflite", [{"ids": ..., "mask": ...,
                                         "segment_ids": ...}])
    outputs[0]["start_logits"]; outputs.instructions_per_inference

The root lives in $ARM64_ROOT or ~/.cache/compact-bert-pipeline/arm64-root
(`android_bench/arm64_root.py` builds it). One qemu process runs all the
feeds of a call (Python and LiteRT take seconds to start under emulation),
its instruction count included; arrays go in and out through .npz
files (`arm64_runner.py`, which the host's Python runs too). The guest
sees host paths (qemu -L looks a path up in the root first, so a model
path that also exists inside the root would be the root's).
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option

FLAGS = flags.FLAGS

# qemu's model of a phone's big core: ARMv8.2-A with FEAT_DotProd (int8
# SDOT/UDOT, which XNNPACK's qs8 "neondot" kernels use) and FEAT_FP16; no
# i8mm (Armv8.6), like most phones in use.
CPU = "cortex-a76"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
ROOT_ENV = "ARM64_ROOT"
# The record of a finished root, written last: a root without it (or with
# another FORMAT) is half-built or stale.
STAMP = "arm64-root.json"
FORMAT = 2
PACKAGES_DIR = os.path.join("opt", "litert")
PLUGIN = os.path.join("opt", "qemu-plugins", "libinsn.so")
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "arm64_runner.py")
# What the root holds, pinned to the host's versions so both sides run the
# same LiteRT (requirements.txt pins ai-edge-litert; numpy is the venv's).
PINNED = ("ai-edge-litert", "numpy")


class Arm64Error(ValueError):
  """The arm64 path cannot run: a missing root, tool or model, or a failed
  emulated run; one line naming it."""


def default_root():
  """$ARM64_ROOT, or the user's cache (outside any repository)."""
  if os.environ.get(ROOT_ENV):
    return os.path.abspath(os.path.expanduser(os.environ[ROOT_ENV]))
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
      os.path.expanduser("~"), ".cache")
  return os.path.join(cache, "compact-bert-pipeline", "arm64-root")


def wanted_versions():
  """{package: host version} of PINNED: what the root must hold."""
  from importlib import metadata
  return {name: metadata.version(name) for name in PINNED}


def read_stamp(root):
  """The finished root's record, or None (half-built, or no root)."""
  try:
    with open(os.path.join(root, STAMP), encoding="utf-8") as f:
      stamp = json.load(f)
  except (OSError, ValueError):
    return None
  return stamp if isinstance(stamp, dict) and stamp.get(
      "format") == FORMAT else None


def qemu_binary():
  return shutil.which("qemu-aarch64")


def arm64_root(root=None):
  """(root path, None) when the root is built, matches the host's LiteRT
  and qemu-aarch64 is installed; (None, the reason) otherwise."""
  root = root or default_root()
  if not qemu_binary():
    return None, ("qemu-aarch64 is not installed (make arm64-root installs "
                  "qemu-user)")
  if not os.path.isdir(root):
    return None, f"no arm64 root at {root} (build it: make arm64-root)"
  stamp = read_stamp(root)
  if stamp is None:
    return None, (f"{root} is half-built or from another version (no "
                  f"usable {STAMP}; rebuild: make arm64-root)")
  held, wanted = stamp.get("packages", {}), wanted_versions()
  stale = [f"{n} {held.get(n)} (host {v})" for n, v in wanted.items()
           if held.get(n) != v]
  if stale:
    return None, (f"{root} holds {', '.join(stale)}; rebuild: make "
                  "arm64-root")
  if not os.path.isfile(os.path.join(root, stamp["python"].lstrip("/"))):
    return None, f"{root}: no {stamp['python']} (rebuild: make arm64-root)"
  return root, None


def _usable_root(root):
  path, reason = arm64_root(root)
  if path is None:
    raise Arm64Error(reason)
  return path, read_stamp(path)


def guest_environment(root):
  """The emulated Python's environment: the root's packages, no user
  site, nothing written into the root (its .pyc files are compiled)."""
  return {"PYTHONPATH": os.path.join(root, PACKAGES_DIR),
          "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
          "PYTHONHASHSEED": "0", "LANG": "C.UTF-8",
          "PATH": "/usr/bin:/bin", "HOME": os.path.expanduser("~"),
          "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
          "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}


def qemu_command(root, stamp, python_args, plugin_output=None):
  """argv of the root's Python under qemu-aarch64 on CPU; with
  `plugin_output`, the instruction-count plugin writes its totals there."""
  command = [qemu_binary(), "-cpu", stamp.get("cpu", CPU), "-L", root]
  if plugin_output:
    command += ["-plugin", f"{os.path.join(root, PLUGIN)},out={plugin_output}"]
  return command + [os.path.join(root, stamp["python"].lstrip("/")),
                    *python_args]


def instruction_counting(root=None):
  """(True, None) when the root has the instruction-count plugin; (False,
  why not) otherwise."""
  path, reason = arm64_root(root)
  if path is None:
    return False, reason
  stamp = read_stamp(path)
  if stamp.get("plugin") and os.path.isfile(
      os.path.join(path, stamp["plugin"].lstrip("/"))):
    return True, None
  return False, stamp.get("plugin_reason") or "the root has no plugin"


def counting_root(root=None):
  """The arm64 root that can count instructions (`root` or the default);
  Arm64Error, one line saying how to make it, when there is none."""
  path, why = arm64_root(root)
  if path is None:
    raise Arm64Error(why)
  counting, why = instruction_counting(path)
  if not counting:
    raise Arm64Error(f"{path} cannot count instructions ({why}; rebuild "
                     "it: make arm64-root)")
  return path


class Arm64Result(list):
  """The list of each feed's {output name: array}, with what ran:
  `info` (the runner's: machine, versions, XNNPACK coverage, invokes),
  `emulated_s` (the qemu process's wall time: emulation, not a latency),
  `feeds` and `instruction_runs` (what was run),
  `instructions_per_inference` and `dot_instructions_per_inference` (with
  `instruction_runs`; the guest's executed arm64 instructions, SDOT / UDOT
  among them)."""
  info = None
  emulated_s = None
  feeds = None
  instruction_runs = 0
  instructions_per_inference = None
  dot_instructions_per_inference = None


def _run_once(root, stamp, model_path, feeds, num_threads, signature_key,
              repeats, count, timeout):
  """One qemu process: (outputs, info, seconds, counts or None)."""
  from android_bench import arm64_runner
  from tfmodels.process_lifetime import die_with_parent
  from tfmodels.staging import scratch_directory
  with scratch_directory("arm64-run-") as work:
    paths = {n: os.path.join(work, n) for n in (
        "feeds.npz", "outputs.npz", "info.json", "counts.txt")}
    arm64_runner.save_arrays(paths["feeds.npz"], feeds)
    args = [RUNNER, "--model", os.path.abspath(model_path),
            "--feeds", paths["feeds.npz"], "--outputs", paths["outputs.npz"],
            "--info", paths["info.json"], "--threads", str(num_threads),
            "--repeats", str(repeats)]
    if signature_key is not None:
      args += ["--signature_key", signature_key]
    command = qemu_command(root, stamp, args,
                           paths["counts.txt"] if count else None)
    begin = time.perf_counter()
    try:
      done = subprocess.run(
          command, env=guest_environment(root), capture_output=True,
          text=True, timeout=timeout, preexec_fn=die_with_parent,
          check=False)
    except subprocess.TimeoutExpired:
      raise Arm64Error(f"{model_path}: the emulated run took over "
                       f"{timeout:g} s (qemu-aarch64 -cpu {CPU})") from None
    seconds = time.perf_counter() - begin
    if done.returncode != 0:
      lines = [l for l in done.stderr.splitlines() if l.strip()]
      said = next((l for l in reversed(lines)
                   if l.startswith("arm64_runner: error: ")), None)
      if said:
        raise Arm64Error(said[len("arm64_runner: error: "):])
      raise Arm64Error(f"{model_path}: the emulated run under {root} failed "
                       f"(exit {done.returncode}: "
                       f"{lines[-1] if lines else 'no message'})")
    outputs = arm64_runner.load_arrays(paths["outputs.npz"])
    with open(paths["info.json"], encoding="utf-8") as f:
      info = json.load(f)
    counts = None
    if count:
      counts = _read_counts(paths["counts.txt"], root)
  return outputs, info, seconds, counts


COUNTS = ("insns", "dot", "section_insns", "section_dot", "sections")


def _read_counts(path, root):
  """{"insns", "dot", "section_insns", "section_dot", "sections"}: what the
  plugin wrote at exit (the process's totals; those between the runner's
  marks)."""
  try:
    with open(path, encoding="utf-8") as f:
      pairs = dict(line.split() for line in f if line.strip())
    return {key: int(pairs[key]) for key in COUNTS}
  except (OSError, ValueError, KeyError):
    raise Arm64Error(f"{root}: the instruction-count plugin wrote no "
                     f"counts ({path})") from None


def run_on_arm64(model_path, feeds, num_threads=1, signature_key=None,
                 instruction_runs=0, root=None, timeout=3600):
  """Each feed's {output name: array} from the model run on arm64 (qemu,
  CPU) with XNNPACK on `num_threads` threads, as an Arm64Result.

  Args:
    model_path: the .tflite file.
    feeds: list of {input name: numpy array}; lengths may differ per feed
      (a dynamic [1, -1] signature is resized per feed).
    signature_key: None for the model's only (or serving_default) one.
    instruction_runs: 0, or N > 0 to count the instructions of an
      inference: each feed runs N more times between the runner's marks
      (after its first, warm-up run), and qemu's plugin counts what runs
      between them; over N x feeds, the result's
      `instructions_per_inference` (start-up and loading never count).
    root: the arm64 root (default `default_root()`).
    timeout: seconds for each qemu process.
  """
  if not os.path.isfile(model_path):
    raise Arm64Error(f"{model_path}: no such model file")
  if not feeds:
    raise Arm64Error(f"{model_path}: no feeds to run")
  root, stamp = _usable_root(root)
  counting, why = instruction_counting(root)
  if instruction_runs and not counting:
    raise Arm64Error(f"{root}: cannot count instructions ({why})")
  outputs, info, seconds, counts = _run_once(
      root, stamp, model_path, feeds, num_threads, signature_key,
      instruction_runs, bool(instruction_runs), timeout)
  result = Arm64Result(outputs)
  result.info, result.emulated_s = info, seconds
  result.feeds, result.instruction_runs = feeds, instruction_runs
  if instruction_runs:
    if counts["sections"] != len(feeds):
      raise Arm64Error(f"{root}: the plugin saw {counts['sections']} counted "
                       f"sections, not {len(feeds)} (one per feed)")
    extra = instruction_runs * len(feeds)
    result.instructions_per_inference = counts["section_insns"] / extra
    result.dot_instructions_per_inference = counts["section_dot"] / extra
  return result


def run_on_host(model_path, feeds, num_threads=1, signature_key=None):
  """The same runner in this process (the host's LiteRT and XNNPACK):
  (outputs, info)."""
  from android_bench import arm64_runner
  try:
    return arm64_runner.run_feeds(model_path, feeds, num_threads,
                                  signature_key)
  except arm64_runner.RunnerError as e:
    raise Arm64Error(str(e)) from None


def _signature_inputs(model_path, signature_key=None):
  """(input details by name, dynamic?) of the signature the runner takes."""
  from ai_edge_litert.interpreter import Interpreter

  from android_bench import arm64_runner
  try:
    interpreter = Interpreter(model_path=str(model_path))
    key = arm64_runner.pick_signature(interpreter, model_path, signature_key)
  except arm64_runner.RunnerError as e:
    raise Arm64Error(str(e)) from None
  except (ValueError, RuntimeError) as e:
    first = (str(e).strip().splitlines() or [repr(e)])[0]
    raise Arm64Error(f"{model_path}: cannot load the model ({first})"
                     ) from None
  details = interpreter.get_signature_runner(key).get_input_details()
  first = next(iter(details.values()))
  signature = list(first.get("shape_signature", first["shape"]))
  return details, len(signature) >= 2 and signature[-1] == -1


def sample_lengths(full_length, samples, dynamic):
  """The length of each sample: a [1, L] model's L; a dynamic one's spread
  over multiples of contract.LENGTH_STEP up to its default L (3 samples
  of L=384: 128, 256, 384), so the last is always the full length."""
  from converters.contract import LENGTH_STEP
  if not dynamic:
    return [full_length] * samples
  step = LENGTH_STEP
  return [min(full_length, max(step, -(-full_length * (i + 1) // samples
                                        // step) * step))
          for i in range(samples)]


def random_feeds(model_path, samples, seed=0, signature_key=None):
  """`samples` random but valid feeds: ids within the embedding table
  (model_facts' index ranges), a mask of 1s, segment ids 0 then 1, floats
  in [-0.5, 0.5]; a dynamic model's at `sample_lengths`."""
  import numpy as np

  from android_bench.model_facts import model_facts
  details, dynamic = _signature_inputs(model_path, signature_key)
  full = int(next(iter(details.values()))["shape"][-1])
  ranges = model_facts(model_path)["index_ranges"]
  rng = np.random.default_rng(seed)
  feeds = []
  for length in sample_lengths(full, samples, dynamic):
    feed = {}
    for name, detail in details.items():
      dtype = np.dtype(detail["dtype"])
      shape = [int(d) for d in detail["shape"]]
      shape[-1] = length
      if dtype.kind == "f":
        value = rng.uniform(-0.5, 0.5, shape)
      elif "mask" in name.lower():
        value = np.ones(shape)
      elif "segment" in name.lower() or "type" in name.lower():
        value = np.zeros(shape)
        value[..., int(rng.integers(1, length)) if length > 1 else 1:] = 1
      else:
        low, high = ranges.get(detail["name"], ranges.get(name, (0, 99)))
        value = rng.integers(low, high + 1, shape)
      feed[name] = value.astype(dtype)
    feeds.append(feed)
  return feeds


def compare(host, arm):
  """{output: {max_abs_diff, max_abs_host, argmax_agree, samples}} over the
  feeds: the largest |host - arm|, the largest |host| (its scale), and in
  how many feeds the argmax over the last axis is the same position."""
  import numpy as np
  rows = {}
  for host_out, arm_out in zip(host, arm):
    for name, value in host_out.items():
      other = np.asarray(arm_out[name])
      value = np.asarray(value)
      row = rows.setdefault(name, {"max_abs_diff": 0.0, "max_abs_host": 0.0,
                                   "argmax_agree": 0, "samples": 0})
      if other.shape != value.shape:
        raise Arm64Error(f"output {name}: host {value.shape}, arm64 "
                         f"{other.shape}")
      diff = np.abs(value.astype(np.float64) - other.astype(np.float64))
      row["max_abs_diff"] = max(row["max_abs_diff"], float(diff.max(
          initial=0)))
      row["max_abs_host"] = max(row["max_abs_host"], float(np.abs(
          value).max(initial=0)))
      same = (value.size == 0 or np.array_equal(
          np.argmax(value, axis=-1), np.argmax(other, axis=-1)))
      row["argmax_agree"] += int(same)
      row["samples"] += 1
  return rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Arm64Options:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  model: str | None = option(None, "The .tflite file to run on the host and "
                             "on emulated arm64.", required=True)
  threads: int = option(1, "Threads of both interpreters (XNNPACK).")
  samples: int = option(3, "Random valid inputs to compare (a dynamic "
                        "model's cycle through its lengths).")
  seed: int = option(0, "Seed of the random inputs.")
  signature_key: str | None = option(None, "The signature to run (default: "
                                     "the model's only one).")
  instruction_runs: int = option(
      -1, "Extra inferences per input whose arm64 instructions are "
      "counted (qemu's plugin); 0: no count; -1: 2 when the root has the "
      "plugin, else 0.")
  arm64_root: str | None = option(None, "The arm64 root (default: "
                                  f"${ROOT_ENV} or the user's cache).")


def define_command_flags():
  """Defines the flags, when run as a command only: tests import this
  module beside commands with a --model or --threads of their own."""
  define_flags(Arm64Options)


def _fail(message):
  sys.exit(f"error: {message}")


def feed_length(feed):
  """A feed's sequence length (its inputs' last dimension)."""
  return int(next(iter(feed.values())).shape[-1])


def report_lines(model_path, rows, result, host_info, lengths, counted=None,
                 threads=1):
  """The command's lines: what ran where, one line per output, the
  instruction count (`counted`: an Arm64Result with one), the emulation's
  wall time (never a latency)."""
  arm_info = result.info

  def coverage(info):
    c = info["xnnpack"]
    return (f"XNNPACK took {c['replaced']} of {c['nodes']} nodes in "
            f"{c['partitions']} partition(s)")

  samples = next(iter(rows.values()))["samples"] if rows else 0
  lines = [
      f"model {model_path}: {samples} random inputs at length(s) "
      f"{', '.join(map(str, lengths))}, {threads} thread(s), signature "
      f"{arm_info['signature_key']!r}",
      f"arm64 (qemu-aarch64 -cpu {CPU}; ai-edge-litert "
      f"{arm_info['versions']['ai-edge-litert']}, numpy "
      f"{arm_info['versions']['numpy']}): {coverage(arm_info)}",
      f"host ({host_info['machine']}; ai-edge-litert "
      f"{host_info['versions']['ai-edge-litert']}): {coverage(host_info)}"]
  for name, row in sorted(rows.items()):
    lines.append(
        f"  {name}: max |host - arm64| {row['max_abs_diff']:.3g} (outputs "
        f"up to {row['max_abs_host']:.3g}); argmax agrees in "
        f"{row['argmax_agree']} of {row['samples']}")
  seconds = result.emulated_s
  if counted is not None:
    length = feed_length(counted.feeds[0])
    lines.append(
        f"arm64 instructions per inference at length {length}: "
        f"{counted.instructions_per_inference:,.0f}, of them SDOT/UDOT "
        f"{counted.dot_instructions_per_inference:,.0f} (qemu plugin; "
        + ("with the thread pool's spin-waits; " if threads > 1 else "")
        + f"mean of {counted.instruction_runs} x {len(counted.feeds)} "
        "inferences)")
    if counted is not result:
      seconds += counted.emulated_s
  lines.append(f"emulation took {seconds:.1f} s of wall time (qemu: not a "
               "latency)")
  return lines


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(Arm64Options, FLAGS)
  if options.threads < 1 or options.samples < 1:
    _fail("--threads and --samples must be >= 1")
  if options.instruction_runs < -1:
    _fail("--instruction_runs: give N >= 0, or -1 (2 when possible)")
  if not os.path.isfile(options.model):
    _fail(f"--model {options.model}: no such file")
  root, reason = arm64_root(options.arm64_root)
  if root is None:
    _fail(reason)
  runs = options.instruction_runs
  if runs == -1:
    runs = 2 if instruction_counting(root)[0] else 0
  elif runs and not instruction_counting(root)[0]:
    _fail(f"--instruction_runs {runs}: {instruction_counting(root)[1]}")
  try:
    feeds = random_feeds(options.model, options.samples, options.seed,
                         options.signature_key)
    lengths = [feed_length(f) for f in feeds]
    # Instructions are counted at the full length only (a mean over a
    # dynamic model's lengths would mean nothing).
    full = [f for f, n in zip(feeds, lengths) if n == max(lengths)]
    host, host_info = run_on_host(options.model, feeds, options.threads,
                                  options.signature_key)
    together = runs and len(full) == len(feeds)
    arm = run_on_arm64(options.model, feeds, options.threads,
                       options.signature_key,
                       instruction_runs=runs if together else 0, root=root)
    counted = arm if together else None
    if runs and not together:
      counted = run_on_arm64(options.model, full, options.threads,
                             options.signature_key, instruction_runs=runs,
                             root=root)
    rows = compare(host, arm)
  except Arm64Error as e:
    _fail(str(e))
  for line in report_lines(options.model, rows, arm, host_info,
                           sorted(set(lengths)), counted, options.threads):
    print(line)


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
