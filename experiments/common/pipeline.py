"""A resumable chain of commands, each with one output directory.

Experiments and the demo are lists of `Step`s. A step is done when its
output directory holds a `.done` marker newer than the markers of the steps
it reads from, so a re-run skips finished work, deleting one output re-runs
that step and what depends on it, and a step killed half-way resumes (the
training commands restart from their last checkpoint).

    steps = [Step("teacher", [python, "-m", "tfmodels.training.pretrain", ...],
                  output="/tmp/exp/teacher", inputs=["/tmp/exp/data"])]
    run_steps(steps)

`jobs=2` runs steps whose inputs are finished side by side (two small
TensorFlow processes use two cores better than one does); each command's
output then goes to `pipeline.log` in its output directory and the runner
prints the running steps' latest progress line every `heartbeat` seconds.
A step with `clean=True` starts from an empty output directory when it
re-runs after finishing (forced, or an input changed), so a training
command starts over instead of resuming its finished run; after a crash
(no marker) its output is kept, so it resumes. Only what the step wrote is
ever removed: its marker lists its files, and a re-run into an output
holding anything else (a user's file put there) stops with a StepError
naming it. A step with `alone=True` (a
latency benchmark) waits until nothing else runs and runs by itself.

`memory_budget_mb` bounds what steps side by side may hold: a step starts
beside others only if its `memory_mb` (the peak its experiment measured)
plus what the running ones hold (the larger of their `memory_mb` and their
peak so far, read from /proc) fits. Each step's peak resident memory is
recorded in its `.done` marker and at the end of its `pipeline.log`.

One run per output directory: a command holds `sole_writer(OUTPUT_DIR)`
while it runs its steps, so a second run into the same directory is refused
(one line naming the first's pid) instead of both writing into it. Step
commands get SIGTERM when the runner dies, even by `kill -9`, so none keeps
writing into a directory whose lock has gone with its runner.
"""

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

from tfmodels.process_lifetime import die_with_parent
from tfmodels.staging import (RUNNER_LOG, RUNNER_MARKER, OutputError,
                              check_writable, files_under, open_own,
                              output_lock, write_file)

MARKER = RUNNER_MARKER
LOG = RUNNER_LOG
_FILES = "files "  # the marker's line listing what the step wrote
# Lines that say nothing about progress: TensorFlow's C++ and absl logging.
_NOISE = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages|INFO: )")


class StepError(RuntimeError):
  """A step failed: names it and the command that re-runs it."""


@dataclasses.dataclass
class Step:
  """One command (argv list) or Python callable writing `output`."""
  name: str
  command: object
  output: str
  inputs: tuple = ()
  clean: bool = False  # empty `output` before re-running a finished step
  alone: bool = False  # jobs > 1: run with no other step beside it
  memory_mb: float | None = None  # expected peak resident memory

  def describe(self):
    if callable(self.command):
      return f"{self.command.__module__}.{self.command.__qualname__}()"
    return shlex.join(self.command)


def check_force(force, steps):
  """Exits with one line when `--force` names a step the run does not have."""
  unknown = sorted(set(force) - {s.name for s in steps})
  if unknown:
    sys.exit(f"error: --force {','.join(unknown)}: not a step (steps: "
             f"{', '.join(s.name for s in steps)})")


def check_output_dir(output_dir, flag="--output_dir"):
  """OutputError (one line naming the flag) unless `output_dir` is, or can
  be made, a writable directory; creates nothing."""
  if not output_dir:
    raise OutputError(f"{flag} is required")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise OutputError(f"{flag} {output_dir}: exists and is not a directory")
  check_writable(output_dir, flag)


@contextlib.contextmanager
def sole_writer(output_dir, flag="--output_dir"):
  """Holds `output_dir` (made if missing) for this process alone while the
  block runs. OutputError (one line naming the flag) if it cannot be
  written or another run holds it: checked before any work."""
  check_output_dir(output_dir, flag)
  with output_lock(output_dir, flag):
    made = not os.path.exists(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    try:
      yield os.path.abspath(output_dir)
    finally:
      if made and not os.listdir(output_dir):  # refused before any work
        os.rmdir(output_dir)


def python_module(module, *args):
  """argv running `python -m module args` with this interpreter."""
  return [sys.executable, "-m", module, *map(str, args)]


def _finished_at(directory):
  path = os.path.join(directory, MARKER)
  return os.path.getmtime(path) if os.path.exists(path) else None


def is_done(step):
  done = _finished_at(step.output)
  if done is None:
    return False
  for source in step.inputs:
    finished = _finished_at(source)
    if finished is None or finished > done:
      return False
  return True


def _written(directory):
  """The files a finished step wrote into `directory`, as its marker lists
  them; for a marker without the list (written before it was kept), the
  files no newer than the marker. None when the step has not finished."""
  marker = os.path.join(directory, MARKER)
  try:
    with open(marker, encoding="utf-8") as f:
      lines = f.read().splitlines()
    finished = os.path.getmtime(marker)
  except (OSError, UnicodeDecodeError):
    return None
  listed = [l[len(_FILES):] for l in lines if l.startswith(_FILES)]
  if listed:
    try:
      return set(json.loads(listed[-1]))
    except ValueError:
      return set()
  return {n for n in files_under(directory)
          if os.lstat(os.path.join(directory, n)).st_mtime <= finished}


def _own_files(directory):
  """Files under a step's output, those of steps nested in it (a ship run
  inside a demo step) left to their own markers."""
  nested = [os.path.relpath(d, directory) + os.sep
            for d, _, files in os.walk(directory)
            if d != directory and MARKER in files]
  return [n for n in files_under(directory)
          if n not in (MARKER, LOG) and not n.startswith(tuple(nested))]


def unowned_files(directory):
  """Files in a finished step's output that the step did not write (a
  user's file put there afterwards); [] for an unfinished step's."""
  written = _written(directory)
  if written is None:
    return []
  return [n for n in _own_files(directory) if n not in written]


def unowned_files_under(root):
  """unowned_files of every finished step's output below `root` (not
  `root` itself: the output of the command that runs them), as paths
  relative to `root`."""
  found = []
  for directory, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if not os.path.islink(
        os.path.join(directory, d))]
    if MARKER in files and directory != root:
      found += [os.path.relpath(os.path.join(directory, n), root)
                for n in unowned_files(directory)]
  return sorted(found)


def _prepare(step):
  """Removes a stale marker (and, for `clean` steps, the old output:
  only if the step wrote all of it; StepError naming what it did not)."""
  marker = os.path.join(step.output, MARKER)
  if os.path.exists(marker):
    if step.clean:
      foreign = unowned_files(step.output)
      if foreign:
        raise StepError(
            f"step {step.name!r} would start over in {step.output}, which "
            f"holds {', '.join(foreign[:3])}{' and more' if foreign[3:] else ''}"
            ", not written by it; move it out of there and re-run")
      shutil.rmtree(step.output)
    else:
      os.remove(marker)
  os.makedirs(step.output, exist_ok=True)  # commands may write files in it


def _failure(step, error, log_file=None):
  where = f"; its output is in {log_file}" if log_file else ""
  return StepError(f"step {step.name!r} failed ({error}){where}; re-run it "
                   f"with: {step.describe()}")


def _finish(step, began, peak_mb=None):
  """The marker: the step's seconds, for a command the peak resident
  memory of its largest process (`peak_rss_mb=N`), and the files it wrote
  (`files [...]`: what a re-run may remove)."""
  peak = f"peak_rss_mb={peak_mb:.0f}\n" if peak_mb is not None else ""
  written = _own_files(step.output)
  write_file(os.path.join(step.output, MARKER),
             f"{time.time() - began:.1f} s\n{peak}"
             f"{_FILES}{json.dumps(written)}\n")


def _peak(peak_mb):
  return "" if peak_mb is None else f", peak {peak_mb:.0f} MB"


def _peak_mb(pid, seen=None):
  """max(seen, the process's resident high-water mark in MB), read from
  /proc while it runs (VmHWM restarts at exec, so the runner's own memory,
  which a forked child shares until then, does not count; rusage's maxrss
  would include it)."""
  try:
    with open(f"/proc/{pid}/status") as f:
      hwm = next((int(l.split()[1]) / 1024 for l in f
                  if l.startswith("VmHWM:")), None)
  except (OSError, ValueError):
    hwm = None
  return seen if hwm is None else max(hwm, seen or 0.0)


def run_steps(steps, force=(), log=print, jobs=1, heartbeat=20.0,
              memory_budget_mb=None):
  """Runs the steps not done (or named in `force`); raises StepError."""
  if jobs > 1:
    return _run_parallel(steps, set(force), log, jobs, heartbeat,
                         memory_budget_mb)
  for index, step in enumerate(steps, 1):
    prefix = f"[{index}/{len(steps)}] {step.name}"
    if step.name not in force and is_done(step):
      log(f"{prefix}: done, skipped")
      continue
    _prepare(step)
    log(f"{prefix}: {step.describe()}")
    began = time.time()
    peak = None
    try:
      if callable(step.command):
        step.command()
      else:
        process = subprocess.Popen(step.command, preexec_fn=die_with_parent)
        try:
          while process.poll() is None:
            peak = _peak_mb(process.pid, peak)
            time.sleep(0.2)
        except BaseException:
          process.terminate()
          process.wait()
          raise
        if process.returncode:
          raise subprocess.CalledProcessError(process.returncode,
                                              step.command)
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
      raise _failure(step, e) from e
    _finish(step, began, peak)
    log(f"{prefix}: finished in {time.time() - began:.0f} s{_peak(peak)}")


class _Running:
  """One launched step: a process writing its log, or a callable's thread."""

  def __init__(self, step):
    self.step, self.began, self.error = step, time.time(), None
    self.log_file = self.peak_mb = None
    if callable(step.command):
      self.thread = threading.Thread(target=self._call, daemon=True)
      self.thread.start()
      self.process = None
    else:
      self.log_file = os.path.join(step.output, LOG)
      with open_own(self.log_file, "wb") as out:
        self.process = subprocess.Popen(step.command, stdout=out,
                                        stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        preexec_fn=die_with_parent)

  def _call(self):
    try:
      self.step.command()
    except Exception as e:  # reported by the main thread, as a failed step
      self.error = e

  def finished(self):
    if self.process is None:
      return not self.thread.is_alive()
    self.peak_mb = _peak_mb(self.process.pid, self.peak_mb)
    status = self.process.poll()
    if status is not None and status != 0:
      self.error = subprocess.CalledProcessError(status, self.step.command)
    return status is not None

  def progress(self):
    """The last progress line of the log (tqdm redraws with \\r)."""
    if not self.log_file:
      return "running"
    try:
      with open(self.log_file, "rb") as f:
        f.seek(max(0, os.path.getsize(self.log_file) - 4096))
        tail = f.read().decode("utf-8", "replace")
    except OSError:
      return "starting"
    lines = [l.strip() for l in re.split(r"[\r\n]", tail)
             if l.strip() and not _NOISE.match(l.strip())]
    if not lines:
      return "starting"
    # "desc:  45%|####5     | 180/400 [...]" -> "desc: 45% 180/400 [...]"
    return re.sub(r"\|[^|]*\|\s*", " ", lines[-1])[:110]

  def held_mb(self):
    """What it holds or is expected to: the scheduler's view of it."""
    return max(self.step.memory_mb or 0.0, self.peak_mb or 0.0)

  def close_log(self):
    """The log's last line: the step's peak resident memory."""
    if self.log_file and self.peak_mb is not None:
      with open_own(self.log_file, "a") as f:
        f.write(f"pipeline: {self.step.name} peak resident memory "
                f"{self.peak_mb:.0f} MB\n")

  def stop(self):
    if self.process is not None and self.process.poll() is None:
      self.process.terminate()
      self.process.wait()


def _fits(step, running, budget_mb):
  """Whether `step` may start beside `running` within `budget_mb`."""
  if not running or budget_mb is None:
    return True
  return sum(r.held_mb() for r in running) + (step.memory_mb or 0.0) <= (
      budget_mb)


def _run_parallel(steps, force, log, jobs, heartbeat, budget_mb=None):
  """run_steps with up to `jobs` steps at once, in list order when ready
  and within `budget_mb` (MB) of memory."""
  index = {id(step): i for i, step in enumerate(steps, 1)}
  producer = {step.output: step for step in steps}
  pending, running, failed = list(steps), [], []
  last_beat = time.time()
  prefix = lambda s: f"[{index[id(s)]}/{len(steps)}] {s.name}"
  try:
    while running or (pending and not failed):
      for step in list(pending):
        if failed or len(running) >= jobs or any(r.step.alone
                                                 for r in running):
          break
        waits = [producer[i] for i in step.inputs if i in producer]
        busy = pending + [r.step for r in running]
        if any(w is b for w in waits for b in busy):
          continue
        done = step.name not in force and is_done(step)
        if step.alone and running and not done:
          break  # start nothing else until it has run
        if not done and not _fits(step, running, budget_mb):
          break  # it waits for memory, and the steps after it with it
        pending.remove(step)
        if done:
          log(f"{prefix(step)}: done, skipped")
          continue
        _prepare(step)
        log(f"{prefix(step)}: {step.describe()}")
        running.append(_Running(step))
      time.sleep(0.2)
      for run in [r for r in running if r.finished()]:
        running.remove(run)
        run.close_log()
        if run.error is not None:
          failed.append(run)
          log(f"{prefix(run.step)}: failed")
          if run.log_file:
            log(_tail(run.log_file))
          continue
        _finish(run.step, run.began, run.peak_mb)
        log(f"{prefix(run.step)}: finished in "
            f"{time.time() - run.began:.0f} s{_peak(run.peak_mb)}")
      if running and time.time() - last_beat >= heartbeat:
        last_beat = time.time()
        for run in running:
          log(f"    {run.step.name} ({time.time() - run.began:.0f} s): "
              f"{run.progress()}")
  finally:
    for run in running:  # interrupted: stop what we started
      run.stop()
  if failed:
    run = failed[0]
    raise _failure(run.step, run.error, run.log_file) from run.error


def _tail(path, lines=15):
  with open(path, "rb") as f:
    text = f.read().decode("utf-8", "replace")
  kept = [l for l in re.split(r"[\r\n]", text) if l.strip()][-lines:]
  return "\n".join("    | " + l for l in kept)
