"""Run a matrix of models x delegates x threads x repeats on one target.

    settings = Settings(threads=(1, 4), delegates=("xnnpack", "none"))
    target = AdbTarget(Adb(serial=...), "benchmark_model", settings)  # or
    target = HostTarget(settings, benchmark_binary=None)
    run, path = run_matrix(target, model_paths, settings, "bench_results")

The LiteRT tool's shape: params (Settings) -> a target that runs one cell
and returns the tool's raw output -> the parser -> one results object
(results.py) that the reporters read. Both targets run `benchmark_model`
command lines, so the same flags reach a phone, an emulator or the host (where
`android_bench.benchmark_model` stands in for the binary, on ai_edge_litert).

Robustness: every cell has a timeout and ends as ok / error / timeout; a cell
whose output is incomplete makes the harness ask adb whether the device is
still there (a dropped transport makes `adb shell` exit 0 with truncated
output). If it is gone and does not come back within `reconnect_wait_s`, the
remaining cells are marked skipped. The results file is rewritten after every
cell, so whatever was measured survives.

Thermal: with `cool_below_c` set, each cell waits (up to `cool_timeout_s`,
reading every `cool_poll_s`) until the hottest zone is below it and the
thermal service status is below `throttled_status`; a cell that started or
ended hot is recorded as `"throttled": true` (thermal.py), and still runs
when the wait times out. Without it no cell waits, and the status alone
marks throttled cells.
"""

import contextlib
import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from android_bench import device_info, results, thermal
from android_bench.adb import AdbError, AdbTimeout, DeviceGone
from android_bench.model_facts import (dynamic_length, file_digests,
                                       input_flags, model_facts)
from android_bench.output_parser import parse_output
from tfmodels.process_lifetime import die_with_parent

DELEGATE_FLAGS = {"xnnpack": ["--use_xnnpack=true"],
                  "gpu": ["--use_gpu=true"],
                  "nnapi": ["--use_nnapi=true"],
                  "none": ["--use_xnnpack=false"]}
PID_FILE = ".android_bench.pid"


class SetupError(RuntimeError):
  """The matrix cannot start (one line for the user)."""


@dataclasses.dataclass(frozen=True)
class Settings:
  threads: tuple = (4,)
  delegates: tuple = ("xnnpack",)
  repeats: int = 1
  warmup_runs: int = 1
  num_runs: int = 50
  min_secs: float = None
  max_secs: float = None
  cpu_mask: str = None        # hex mask, "big", or None (no pinning)
  timeout_s: float = 600.0
  op_profiling: bool = False
  peak_memory: bool = False
  extra_args: tuple = ()
  keep: bool = False
  remote_dir: str = "/data/local/tmp"
  reconnect_wait_s: float = 10.0
  auto_value_ranges: bool = True  # index ranges read from each model
  cool_below_c: float = None  # wait before each cell until below (None: no)
  throttled_status: int = 1   # thermal service status counted as throttled
  cool_timeout_s: float = 300.0
  cool_poll_s: float = 5.0
  lengths: tuple = ()  # sequence lengths of dynamic-length models; () as is

  def thermal_policy(self):
    return thermal.ThermalPolicy(limit_c=self.cool_below_c,
                                 throttled_status=self.throttled_status,
                                 timeout_s=self.cool_timeout_s,
                                 poll_s=self.cool_poll_s)


def benchmark_args(settings, graph, threads, delegate, facts=None,
                   length=None):
  """The benchmark_model flags of one cell; the model's facts give its
  inputs valid index ranges unless the user set input flags, and a
  dynamic-length model's inputs the cell's `length`."""
  args = [f"--graph={graph}", f"--num_threads={threads}",
          f"--warmup_runs={settings.warmup_runs}",
          f"--num_runs={settings.num_runs}"]
  if settings.min_secs is not None:
    args.append(f"--min_secs={settings.min_secs:g}")
  if settings.max_secs is not None:
    args.append(f"--max_secs={settings.max_secs:g}")
  args += DELEGATE_FLAGS[delegate]
  if settings.op_profiling:
    args.append("--enable_op_profiling=true")
  if settings.peak_memory:
    args.append("--report_peak_memory_footprint=true")
  args += list(settings.extra_args)
  if facts and (settings.auto_value_ranges or length) and not any(
      a.startswith("--input_layer") for a in args):
    args += input_flags(facts.get("inputs"), facts.get("index_ranges")
                        if settings.auto_value_ranges else None, length)
  return args


def _last_error(parsed, output):
  if parsed["errors"]:
    return parsed["errors"][-1]
  lines = [l.strip() for l in output.splitlines() if l.strip()]
  return lines[-1] if lines else "no output"


def _child_env():
  """Our environment, with this package importable from any directory."""
  env = dict(os.environ)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env["PYTHONPATH"] = os.pathsep.join(
      p for p in (root, env.get("PYTHONPATH")) if p)
  return env


class HostTarget:
  """This machine: the ai_edge_litert runner, and a host benchmark_model
  binary too when the user gives one."""

  name = "host"

  def __init__(self, settings, benchmark_binary=None):
    self.settings = settings
    self.binary = os.path.abspath(benchmark_binary) if benchmark_binary \
        else None
    self.runners = ["litert"] + (["benchmark_model"] if self.binary else [])
    self._facts = None
    self._cores = None

  def facts(self):
    if self._facts is None:
      self._facts = device_info.host_facts()
    return self._facts

  def prepare(self, model_paths):
    if self.binary and not os.access(self.binary, os.X_OK):
      raise SetupError(f"--benchmark_binary {self.binary}: not an "
                       f"executable file")
    mask = self.settings.cpu_mask
    if mask:
      usable = self.facts()["usable_cores"]
      cores = self.facts()["big_cores"] if mask == "big" else \
          device_info.parse_mask(mask)
      if not set(cores) <= set(usable):
        raise SetupError(f"--cpu_mask {mask}: cores {cores} are not all "
                         f"usable here (usable: {usable})")
      self._cores = cores
    self.paths = {os.path.basename(p): p for p in model_paths}
    return {}

  def cell_mask(self):
    return device_info.core_mask(self._cores) if self._cores else None

  def thermal(self):
    return device_info.host_thermal()

  def run_cell(self, model, runner, threads, delegate, facts=None,
               length=None):
    """(status, output, command, error) of one cell."""
    args = benchmark_args(self.settings, self.paths[model], threads, delegate,
                          facts, length)
    argv = ([sys.executable, "-m", "android_bench.benchmark_model"]
            if runner == "litert" else [self.binary]) + args
    cores = self._cores

    def start():
      die_with_parent()
      if cores:
        os.sched_setaffinity(0, cores)

    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True, env=_child_env(),
        preexec_fn=start)
    try:
      out, _ = proc.communicate(timeout=self.settings.timeout_s)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)  # the group we started, only
      out, _ = proc.communicate()
      return ("timeout", out.decode("utf-8", "replace"), shlex.join(argv),
              f"no result after {self.settings.timeout_s:g} s; killed")
    except BaseException:  # interrupted: stop the benchmark we started
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      raise
    output = out.decode("utf-8", "replace")
    parsed = parse_output(output)
    if proc.returncode == 0 and parsed["complete"]:
      return "ok", output, shlex.join(argv), None
    return ("error", output, shlex.join(argv),
            f"exit status {proc.returncode}: {_last_error(parsed, output)}")

  def ensure_alive(self):
    pass

  def stop_cell(self):
    pass  # run_cell kills its own child when interrupted

  def cleanup(self):
    return []


class AdbTarget:
  """A phone or emulator through the real adb client."""

  name = "adb"
  runners = ["benchmark_model"]

  def __init__(self, adb, benchmark_binary, settings):
    self.adb = adb
    self.binary = os.path.abspath(benchmark_binary)
    self.settings = settings
    self.remote_dir = settings.remote_dir.rstrip("/") or "/"
    self.pushed = []
    self.cell_running = False
    self._facts = None
    self._mask = None

  def _remote(self, name):
    return f"{self.remote_dir}/{name}"

  def facts(self):
    if self._facts is None:
      self._facts = device_info.adb_device_facts(self.adb)
      try:
        self._facts["adb_version"] = self.adb.version()
      except AdbError:
        self._facts["adb_version"] = None
    return self._facts

  def prepare(self, model_paths):
    """Pushes what the device lacks (by checksum) and resolves the CPU mask."""
    if not os.path.isfile(self.binary):
      raise SetupError(f"--benchmark_binary {self.binary}: no such file")
    mask = self.settings.cpu_mask
    if mask == "big":
      self._mask = self.facts()["big_core_mask"]
      if not self._mask:
        raise SetupError("--cpu_mask big: the device reports no per-core "
                         "frequencies; give a hex mask")
    elif mask:
      cores = device_info.parse_mask(mask)
      if self.facts()["cores"] and max(cores) >= self.facts()["cores"]:
        raise SetupError(f"--cpu_mask {mask}: the device has "
                         f"{self.facts()['cores']} cores")
      self._mask = mask
    local = {os.path.basename(p): p for p in [self.binary] + list(model_paths)}
    self.binary_name = os.path.basename(self.binary)
    digests = {name: file_digests(path) for name, path in local.items()}
    present = self._remote_digests(list(local))
    skipped = []
    for name, path in local.items():
      if present.get(name) in digests[name]:
        skipped.append(name)
        continue
      self.pushed.append(name)  # first: a push cut short is removed too
      self.adb.push(path, self._remote(name), self.settings.timeout_s)
    status, out = self.adb.shell(
        f"chmod 755 {shlex.quote(self._remote(self.binary_name))}", 30)
    if status != 0:
      raise SetupError(f"chmod of the benchmark binary failed: {out.strip()}")
    return {"pushed": list(self.pushed), "already_on_device": skipped}

  def _remote_digests(self, names):
    """Checksums of the files already on the device (sha256, else md5)."""
    status, out = self.adb.shell(
        f"cd {shlex.quote(self.remote_dir)} && for f in {_here(names)}; do "
        f"[ -f \"$f\" ] && {{ sha256sum \"$f\" 2>/dev/null || "
        f"md5sum \"$f\"; }}; done; true", 120)
    digests = {}
    for line in out.splitlines():
      fields = line.split()
      if len(fields) >= 2 and len(fields[0]) in (32, 64):
        digests[os.path.basename(fields[-1])] = fields[0]
    return digests

  def cell_mask(self):
    return self._mask

  def thermal(self):
    return device_info.adb_thermal(self.adb)

  def command(self, model, threads, delegate, facts=None, length=None):
    args = benchmark_args(self.settings, self._remote(model), threads,
                          delegate, facts, length)
    pin = f"taskset {self._mask} " if self._mask else ""
    # `exec` keeps the shell's pid, recorded so a hung run can be killed.
    return (f"cd {shlex.quote(self.remote_dir)} && echo $$ > {PID_FILE} && "
            f"exec {pin}./{shlex.quote(self.binary_name)} "
            + " ".join(shlex.quote(a) for a in args))

  def run_cell(self, model, runner, threads, delegate, facts=None,
               length=None):
    command = self.command(model, threads, delegate, facts, length)
    self.cell_running = True  # until the shell returns (stop_cell)
    try:
      status, output = self.adb.shell(command, self.settings.timeout_s)
    except AdbTimeout:
      self.cell_running = False
      self._kill_remote()
      self._check_device(command=command)
      return ("timeout", "", command,
              f"no result after {self.settings.timeout_s:g} s; killed "
              f"{self.binary_name} on the device")
    self.cell_running = False
    parsed = parse_output(output)
    if status == 0 and parsed["complete"]:
      return "ok", output, command, None
    self._check_device(output, command)  # raises DeviceGone if it is gone
    return ("error", output, command,
            f"exit status {status}: {_last_error(parsed, output)}")

  def stop_cell(self):
    """An interrupted run: the benchmark may still run on the device."""
    if self.cell_running:
      self.cell_running = False
      self._kill_remote()

  def _kill_remote(self):
    try:
      self.adb.shell(f"cd {shlex.quote(self.remote_dir)} && "
                     f"kill -9 $(cat {PID_FILE}) 2>/dev/null; rm -f "
                     f"{PID_FILE}", 20)
    except AdbError:
      pass

  def ensure_alive(self):
    self._check_device()

  def _check_device(self, output="", command=None):
    """Raises DeviceGone unless the device is (back) online in time; the
    exception carries the cell's partial output and command."""
    deadline = time.monotonic() + self.settings.reconnect_wait_s
    while True:
      try:
        state = self.adb.state()
      except AdbError as e:
        state = f"unreachable ({e})"
      if state == "device":
        return
      if time.monotonic() >= deadline:
        gone = DeviceGone(f"device {self.adb.serial} disconnected "
                          f"(adb state: {state or 'not attached'})")
        gone.output, gone.command = output, command
        raise gone
      time.sleep(1.0)

  def cleanup(self):
    """Removes what this run pushed (unless --keep); returns the names
    removed. The device then lists what is still there, so a file rm could
    not remove is never reported removed (AdbError names it)."""
    if self.settings.keep or not self.pushed:
      return []
    names = _here(self.pushed + [PID_FILE])
    # The listing ends with a marker: output cut short (a dropped transport
    # makes `adb shell` exit 0 with truncated output) is listed again, and
    # never read as "nothing left". rm's errors join stdout on the device
    # (2>&1): as a second stream they can arrive split around a "left"
    # line and hide it.
    listing = (f"for f in {names}; do [ -e \"$f\" ] && echo \"left $f\"; "
               f"done; echo {shlex.quote(LISTED)}")
    cd = f"cd {shlex.quote(self.remote_dir)} && "
    listed = lambda out: any(l.strip() == LISTED for l in out.splitlines())
    status, out = self.adb.shell(
        f"{cd}{{ rm -f {names}; {listing}; }} 2>&1", 60)
    if status == 0 and not listed(out):
      status, out = self.adb.shell(f"{cd}{{ {listing}; }} 2>&1", 60)
    left = {line.strip()[len("left ./"):] for line in out.splitlines()
            if line.startswith("left ./")}
    if status != 0 or not listed(out):
      left = set(self.pushed)  # cd failed, or no whole listing: assume so
    out = "\n".join(l for l in out.splitlines() if l.strip() != LISTED)
    removed = [n for n in self.pushed if n not in left]
    self.pushed = [n for n in self.pushed if n in left]
    if self.pushed:
      said = "; ".join(l.strip() for l in out.splitlines() if l.strip())
      raise AdbError(f"could not remove {', '.join(self.pushed)} from "
                     f"{self.remote_dir} on the device ({said}); removed "
                     f"{', '.join(removed) or 'nothing'}")
    return removed


LISTED = "android_bench: listed"


def device_lock_path(serial):
  """Where the lock of device `serial` lives: in this user's private
  directory (0700, `private_directory`), not at a name any user of the
  machine could take first, or replace with a link, in the shared temporary
  directory. OutputError if that directory is not this user's alone."""
  from tfmodels.staging import private_directory
  name = re.sub(r"[^\w.-]", "_", serial)
  return os.path.join(private_directory("android_bench"),
                      f"android_bench-device-{name}")


@contextlib.contextmanager
def device_lock(serial):
  """One run per device while the block runs: two runs would share the
  device directory (one's clean-up removing the other's files) and each
  other's cores. SetupError (one line) if it is held by another run of this
  user, or its lock file is a link or cannot be made."""
  from tfmodels.staging import OutputError, output_lock
  with contextlib.ExitStack() as held:
    try:
      held.enter_context(output_lock(device_lock_path(serial),
                                     f"device {serial} lock"))
    except OutputError as e:
      pid = re.search(r"another process \(pid (\S+)\)", str(e))
      if not pid:  # a link (output_lock opens it O_NOFOLLOW), no directory
        raise SetupError(str(e)) from None
      raise SetupError(f"device {serial}: another android_bench run (pid "
                       f"{pid.group(1)}) is using it; wait for it to "
                       "finish") from None
    yield


def _here(names):
  """Names as ./NAME words for a device shell in their directory: a file
  called "-x.tflite" is then never taken for an option, by any rm, chmod or
  checksum tool, whether or not that build knows `--`."""
  return " ".join(shlex.quote(f"./{n}") for n in names)


def plan(model_names, runners, settings):
  """Cells in measuring order: repeats outermost, so drift (heat) spreads
  over every configuration instead of hitting one. `length` is None when
  the models run at their own shape."""
  return [{"model": m, "runner": r, "delegate": d, "threads": t,
           "length": n, "repeat": k}
          for k in range(settings.repeats) for m in model_names
          for n in (settings.lengths or (None,))
          for d in settings.delegates for t in settings.threads
          for r in runners]


def _describe(cell):
  return (f"{cell['model']} {cell['runner']} {cell['delegate']} "
          f"{cell['threads']} threads"
          + (f" L {cell['length']}" if cell.get("length") else "")
          + f" #{cell['repeat']}")


def check_lengths(facts, lengths):
  """SetupError (one line) unless every model takes `lengths`: only a
  dynamic-length file can be resized (a fixed one's XNNPACK graph refuses),
  and to no more tokens than its position table has rows (the cell would
  fail on the first op past the table). `facts`: {name: model_facts or
  length_facts}; a model whose limit could not be read (`max_length` None:
  no table in its graph, or not loadable here) is not checked for length."""
  if not lengths:
    return
  fixed = [name for name, f in facts.items() if not dynamic_length(f)]
  if fixed:
    shape = (facts[fixed[0]].get("inputs") or [{}])[0].get("shape")
    raise SetupError(
        f"--lengths: {', '.join(fixed)} has fixed inputs {shape}; time "
        f"dynamic-length files (convert_tflite's default) or drop --lengths")
  for name, f in facts.items():
    limit = f.get("max_length")
    longer = [n for n in lengths if limit and n > limit]
    if longer:
      raise SetupError(
          f"--lengths {','.join(str(n) for n in longer)}: {name} takes at "
          f"most {limit} tokens (its position table)")


def run_matrix(target, model_paths, settings, results_dir, argv=(), name=None,
               binary=None, log=print):
  """Measures every cell; returns (run dict, path of its JSON)."""
  facts = {}
  for path in model_paths:
    facts[os.path.basename(path)] = model_facts(path)
  check_lengths(facts, settings.lengths)
  settings_record = dataclasses.asdict(settings)
  settings_record["extra_args"] = list(settings.extra_args)
  settings_record["threads"] = list(settings.threads)
  settings_record["delegates"] = list(settings.delegates)
  settings_record["lengths"] = list(settings.lengths)
  if binary:
    settings_record["benchmark_binary"] = {
        "path": os.path.abspath(binary), "sha256": file_digests(binary)[0]}
  run = results.new_run(target.name, target.facts(), settings_record, facts,
                        argv, name)
  cells = plan(list(facts), target.runners, settings)
  path = results.save_run(run, results_dir)
  log(f"run {run['run_id']}: {len(cells)} cells on "
      f"{run['device'].get('model')} ({target.name}) -> {path}")
  try:
    _measure(target, model_paths, settings, run, cells, facts, results_dir,
             log)
  except BaseException:  # Ctrl-C, SIGTERM (SystemExit): leave the device clean
    target.stop_cell()
    _clean_up(target, None, log)
    raise
  run["finished_at"] = results.now_iso()
  run["complete"] = True
  return run, results.save_run(run, results_dir)


def _clean_up(target, gone, log):
  """Removes what the run pushed, unless the device went away."""
  try:
    if not gone or not gone.startswith("device lost"):
      removed = target.cleanup()
      if removed:
        log(f"removed from the device: {', '.join(removed)}")
  except AdbError as e:
    log(f"warning: clean-up failed: {e}")


def _measure(target, model_paths, settings, run, cells, facts, results_dir,
             log):
  """Prepares the target, runs every cell (saving the run after each) and
  cleans up."""
  gone = None
  policy, blind = settings.thermal_policy(), False
  try:
    run["settings"]["transfer"] = target.prepare(model_paths)
    run["settings"]["cpu_mask_used"] = target.cell_mask()
  except (AdbError, SetupError, OSError, ValueError) as e:
    gone = f"set-up failed: {e}"
  for i, spec in enumerate(cells, 1):
    cell = dict(spec, cpu_mask=target.cell_mask(), status="skipped",
                error=gone, command=None, started_at=results.now_iso(),
                wall_s=None, thermal=None, raw_output="")
    if not gone:
      begin = time.monotonic()
      try:
        wait = thermal.wait_until_cool(
            target.thermal, policy,
            log=lambda line, i=i: log(f"[{i}/{len(cells)}] {line}"))
        begin = time.monotonic()  # wall_s leaves the cooling wait out
        if policy.limit_c is not None and not blind and \
            wait["before"].get("max_c") is None:
          blind = True
          log(f"warning: cool_below_c {policy.limit_c:g}: the device "
              f"reports no thermal zone temperature; cells wait on the "
              f"thermal status only")
        cell.update(started_at=results.now_iso(),
                    thermal=thermal.cell_record(wait, None, policy))
        status, output, command, error = target.run_cell(
            spec["model"], spec["runner"], spec["threads"], spec["delegate"],
            facts[spec["model"]], spec["length"])
        cell.update(status=status, error=error, command=command,
                    raw_output=output)
        results.fill_cell(cell, parse_output(output))
        cell["thermal"] = thermal.cell_record(wait, target.thermal(), policy)
      except DeviceGone as e:
        gone = f"device lost earlier in the run: {e}"
        output = getattr(e, "output", "")
        cell.update(status="error", error=str(e), raw_output=output,
                    command=getattr(e, "command", None))
        results.fill_cell(cell, parse_output(output))
      except AdbError as e:  # e.g. the thermal read timed out
        cell.update(status="error", error=str(e))
        try:
          target.ensure_alive()
        except DeviceGone as lost:
          gone = f"device lost earlier in the run: {lost}"
      cell["wall_s"] = round(time.monotonic() - begin, 3)
    cell["throttled"] = thermal.is_throttled(cell["thermal"])
    run["cells"].append(cell)
    results.save_run(run, results_dir)
    log(f"[{i}/{len(cells)}] {_describe(cell)}: " + (
        _cell_summary(cell) if cell["status"] == "ok" else
        f"{cell['status'].upper()}: {cell['error']}") + (
            " [throttled]" if cell["throttled"] else ""))
  _clean_up(target, gone, log)


def _cell_summary(cell):
  t = cell["timings_us"] or {}
  central = t.get("median") if t.get("median") is not None else t.get("mean")
  label = "median" if t.get("median") is not None else "mean"
  return (f"{central / 1e3:.3f} ms {label} over {t.get('count')} runs"
          if central is not None else "ok")
