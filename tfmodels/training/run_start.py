"""What a training run started from, held to when it resumes.

Some flags act when a run starts: `pretrain --init_from` fills the weights
before step 1, `finetune --init_dir` and a teacher's copied layers too. A
resumed run restores its own checkpoint instead, so such a flag given again
with another value was silently ignored (and a teacher that keeps teaching
would change half-way). Each command records these flags in
MODEL_DIR/start.json as its run starts; a resume given another value is
refused in one line. A run from before start.json is resumed with a
one-line note that the flags are not applied.

    start = start_flags(init_from=options.init_from)
    note = check_resume(options.model_dir, start, optional=("init_from",))
    ...                                        # in the claimed run dir:
    record_start(options.model_dir, start)     # only when it starts afresh

(`options`: the command's options, which its `main` read from the flags;
nothing here reads absl's FLAGS.)
"""

import json
import os

START_FILE = "start.json"


class ResumeError(ValueError):
  """A resume given start flags its run did not start with."""


def start_flags(**values):
  """{flag: value}; a value naming an existing path is made absolute and
  free of symlinks, so `./run` and `/abs/run` compare equal."""
  return {name: os.path.realpath(value)
          if isinstance(value, str) and os.path.exists(value) else value
          for name, value in values.items()}


def _shown(name, value):
  return f"--{name} {value}" if value is not None else f"no --{name}"


def check_resume(model_dir, start, optional=()):
  """None for a fresh run (or one that recorded these very flags).

  Raises ResumeError when `model_dir` holds a checkpoint of a run that
  started with other values; a flag in `optional` may be left out (it
  only acts at the start). Returns a one-line note for a run that
  recorded nothing, whose start flags are therefore not checked.
  """
  import tensorflow as tf
  if not tf.train.latest_checkpoint(model_dir):
    return None  # a fresh run: the flags act
  path = os.path.join(model_dir, START_FILE)
  try:
    with open(path) as f:
      held = json.load(f)
  except FileNotFoundError:
    given = [f"--{k}" for k, v in start.items()
             if v is not None and k in optional]
    return (f"note: {', '.join(given)} not applied: --model_dir "
            f"{model_dir} resumes from its own checkpoint") if given else None
  except (OSError, ValueError) as e:
    raise ResumeError(f"{path}: cannot read it ({e}); choose another "
                      "--model_dir") from None
  if not isinstance(held, dict):
    raise ResumeError(f"{path}: not a JSON object; choose another "
                      "--model_dir")
  for name, value in start.items():
    if value == held.get(name) or (value is None and name in optional):
      continue
    raise ResumeError(
        f"{_shown(name, value)}: --model_dir {model_dir} holds a run "
        f"started with {_shown(name, held.get(name))}, which a resume "
        "keeps; give the same, or choose another --model_dir")
  return None


def record_start(model_dir, start):
  """Writes start.json (a fresh run's, before its first checkpoint)."""
  from tfmodels.staging import write_file
  from tfmodels.write_errors import refused
  path = os.path.join(model_dir, START_FILE)
  try:
    write_file(path, json.dumps(start, indent=2) + "\n")
  except OSError as e:
    raise refused(path, "the run's start flags", e) from None
