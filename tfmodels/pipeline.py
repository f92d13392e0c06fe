"""A resumable chain of commands, each with one output directory.

Experiments and the demo are lists of `Step`s. A step is done when its
output directory holds a `.done` marker newer than the markers of the steps
it reads from, so a re-run skips finished work, deleting one output re-runs
that step and what depends on it, and a step killed half-way resumes (the
training commands restart from their last checkpoint).

    steps = [Step("teacher", [python, "-m", "tfmodels.training.pretrain", ...],
                  output="/tmp/exp/teacher", inputs=["/tmp/exp/data"])]
    run_steps(steps)
"""

import dataclasses
import os
import shlex
import subprocess
import sys
import time

MARKER = ".done"


class StepError(RuntimeError):
  """A step failed: names it and the command that re-runs it."""


@dataclasses.dataclass
class Step:
  """One command (argv list) or Python callable writing `output`."""
  name: str
  command: object
  output: str
  inputs: tuple = ()

  def describe(self):
    if callable(self.command):
      return f"{self.command.__module__}.{self.command.__qualname__}()"
    return shlex.join(self.command)


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


def run_steps(steps, force=(), log=print):
  """Runs the steps not done (or named in `force`); raises StepError."""
  for index, step in enumerate(steps, 1):
    prefix = f"[{index}/{len(steps)}] {step.name}"
    if step.name not in force and is_done(step):
      log(f"{prefix}: done, skipped")
      continue
    marker = os.path.join(step.output, MARKER)
    if os.path.exists(marker):
      os.remove(marker)
    os.makedirs(step.output, exist_ok=True)  # commands may write files in it
    log(f"{prefix}: {step.describe()}")
    began = time.time()
    try:
      if callable(step.command):
        step.command()
      else:
        subprocess.run(step.command, check=True)
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
      raise StepError(f"step {step.name!r} failed ({e}); re-run it with: "
                      f"{step.describe()}") from e
    with open(marker, "w") as f:
      f.write(f"{time.time() - began:.1f} s\n")
    log(f"{prefix}: finished in {time.time() - began:.0f} s")
