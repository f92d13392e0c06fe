"""Fine-tune a teacher until more steps stop helping.

    python -m experiments.papers.plateau --task squad --data_dir data/wordnet_qa \\
        --init_dir RUN --model_dir OUT --first_steps 200 --min_gain 0.5

A student's share of its teacher means something only against a teacher at
its best. The test is doubling: `finetune` runs of S, 2S, 4S ... steps on
train minus a held-out slice (--heldout examples, drawn with --seed), each
scored on that slice (never on dev), until one doubling gains less than
--min_gain points (F1 for QA, accuracy for spam) or the next run would pass
--max_steps. Every point is a whole run (warm-up and linear decay to its own
step count), so it is what `finetune --train_steps N` gives.

The last run is the teacher: --model_dir gets its files, its dev score as
eval_results.json (what every consumer of a fine-tuned run reads) and
plateau.json: the steps and held-out score of each point and the gain of
the last doubling (`last_doubling_gain`). The runs stay in --model_dir's
`curve/`; a killed command resumes its unfinished run and skips the
finished ones.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys


from tfmodels.command_options import (define_flags, from_flags, option,
                                      run_command)
from tfmodels.training.stop_rule import doublings, plateau_of

# task -> (the metric a doubling must improve, the factor that makes it
# points)
TASKS = {"squad": ("f1", 1.0), "spam": ("accuracy", 100.0)}
CURVE = "curve"
PLATEAU = "plateau.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlateauOptions:
  """The command line; `main` builds it with `command_options.from_flags`."""
  task: str = option("squad", "The task (finetune's --task).",
                     choices=tuple(TASKS))
  data_dir: str | None = option(None, "The task's shipped files; train is "
                                "split, dev scores the chosen run.")
  init_dir: str | None = option(None, "The model every run starts from.")
  model_dir: str | None = option(None, "The converged teacher: the last "
                                 "run's files, eval_results.json (dev), "
                                 "plateau.json, the runs in curve/.")
  heldout: int = option(800, "Training examples held out to score each "
                        "point (QA articles, spam rows).")
  first_steps: int = option(200, "Steps of the first point.")
  min_gain: float = option(0.5, "A doubling gaining less (points) ends the "
                           "curve.")
  max_steps: int = option(6400, "No point runs longer.")
  seed: int = option(7, "Which examples are held out.")
  vocab_file: str = option("data/vocab/uncased_vocab.txt", "vocab.txt")
  max_seq_length: int = option(128, "Tokens per training example.")
  batch_size: int = option(16, "Examples per step.")
  learning_rate: float = option(1e-4, "Peak learning rate of every run.")



def define_command_flags():
  """Defines the flags, when run as a command only (its tests import it
  beside other commands' flags)."""
  define_flags(PlateauOptions)


def split_heldout(task, data_dir, n, seed, out):
  """Writes out/train.* (train without the slice) and out/dev.* (the n
  held-out examples, which every point's run scores as its dev); returns
  (train, held-out) counts."""
  from tfmodels.data.heldout import split
  return split(task, data_dir, n, seed, out, names=("train", "dev"),
               flag="--heldout")


def score(eval_results, task):
  """The points a doubling must improve, from finetune's eval_results."""
  metric, factor = TASKS[task]
  return factor * eval_results[metric]


def _run(argv):
  """A child command; its failure ends this one with its last line."""
  result = subprocess.run(argv, stdout=sys.stdout, stderr=subprocess.PIPE,
                          text=True)
  if result.returncode:
    lines = result.stderr.strip().splitlines() or ["(no output)"]
    sys.exit(f"error: {' '.join(argv[2:4])} failed: {lines[-1]}")


def _finetune(options, data_dir, steps, model_dir):
  _run([sys.executable, "-m", "tfmodels.training.finetune", "--task",
        options.task, "--data_dir", data_dir, "--init_dir", options.init_dir,
        "--model_dir", model_dir, "--vocab_file", options.vocab_file,
        "--max_seq_length", str(options.max_seq_length), "--train_steps",
        str(steps), "--batch_size", str(options.batch_size),
        "--learning_rate", str(options.learning_rate), "--checkpoint_every",
        "100", "--keep_checkpoints", "1", "--log_every", "10"])


def curve_runs(options):
  """Runs the doublings; [(steps, held-out score)], the last run's dir."""
  curve_dir = os.path.join(options.model_dir, CURVE)
  data_dir = os.path.join(curve_dir, "data")
  if not os.path.exists(os.path.join(data_dir, "counts.json")):
    counts = split_heldout(options.task, options.data_dir, options.heldout,
                           options.seed, data_dir)
    from tfmodels.staging import write_file
    write_file(os.path.join(data_dir, "counts.json"), json.dumps(
        {"train": counts[0], "heldout": counts[1]}))
  curve, run_dir = [], None
  for steps in doublings(options.first_steps, options.max_steps):
    run_dir = os.path.join(curve_dir, f"steps_{steps}")
    results = os.path.join(run_dir, "eval_results.json")
    if not os.path.exists(results):
      _finetune(options, data_dir, steps, run_dir)
    with open(results) as f:
      curve.append((steps, score(json.load(f), options.task)))
    print(f"plateau: {steps} steps, held-out {curve[-1][1]:.2f}", flush=True)
    if plateau_of(curve, options.min_gain)[1]:
      break
  return curve, run_dir


def finish(options, curve, run_dir):
  """--model_dir gets the last run's files, its dev score and the curve."""
  from tfmodels.staging import write_file
  for name in os.listdir(run_dir):
    if name == "eval_results.json" or name.startswith("."):
      continue
    source, target = os.path.join(run_dir, name), os.path.join(
        options.model_dir, name)
    if os.path.isdir(source):
      shutil.rmtree(target, ignore_errors=True)
      shutil.copytree(source, target)
    else:
      shutil.copy2(source, target)
  dev = os.path.join(options.model_dir, CURVE, "dev.json")
  _run([sys.executable, "-m", "tfmodels.training.evaluate", "--model_dir",
        options.model_dir, "--data_dir", options.data_dir, "--split", "dev",
        "--vocab_file", options.vocab_file, "--output", dev, "--overwrite"])
  with open(dev) as f:
    dev_results = json.load(f)
  gain, reached = plateau_of(curve, options.min_gain)
  with open(os.path.join(options.model_dir, CURVE, "data",
                         "counts.json")) as f:
    counts = json.load(f)
  plateau = {"task": options.task, "metric": TASKS[options.task][0],
             "steps": [s for s, _ in curve],
             "heldout_score": [round(v, 2) for _, v in curve],
             "last_doubling_gain": None if gain is None else round(gain, 2),
             "min_gain": options.min_gain, "reached": reached,
             "heldout_examples": counts["heldout"],
             "train_examples": counts["train"],
             "chosen_steps": curve[-1][0]}
  write_file(os.path.join(options.model_dir, PLATEAU),
             json.dumps(plateau, indent=2) + "\n")
  write_file(os.path.join(options.model_dir, "eval_results.json"),
             json.dumps(dev_results, indent=2))
  return plateau, dev_results


def _check(options):
  """One line naming the flag, before any work."""
  for flag in ("data_dir", "init_dir", "model_dir"):
    if not getattr(options, flag):
      return f"--{flag} is required"
  if not os.path.isdir(options.data_dir):
    return f"--data_dir {options.data_dir}: no such directory"
  if not os.path.isfile(os.path.join(options.init_dir, "config.json")):
    return f"--init_dir {options.init_dir}: no config.json"
  for flag in ("heldout", "first_steps", "batch_size", "max_seq_length"):
    if getattr(options, flag) < 1:
      return f"--{flag} must be >= 1"
  if options.first_steps > options.max_steps:
    return f"--max_steps {options.max_steps} is below --first_steps"
  if not options.min_gain > 0:
    return "--min_gain must be > 0"
  if not options.learning_rate > 0:
    return "--learning_rate must be > 0"
  return None


def _foreign(model_dir):
  """What a --model_dir holds that is not an earlier run's (None: it is
  new, empty but for the step runner's files, or an earlier run's, which
  this one resumes)."""
  from tfmodels.staging import RUNNER_LOG, RUNNER_MARKER
  if not os.path.isdir(model_dir) or os.path.isdir(
      os.path.join(model_dir, CURVE)):
    return None
  names = sorted(set(os.listdir(model_dir)) - {RUNNER_LOG, RUNNER_MARKER})
  return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "") or None


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(PlateauOptions)
  from tfmodels.flag_checks import nonfinite_float_flag
  error = nonfinite_float_flag() or _check(options)
  if error:
    sys.exit(f"error: {error}")
  foreign = _foreign(options.model_dir)
  if foreign:
    sys.exit(f"error: --model_dir {options.model_dir}: holds {foreign} and "
             f"no {CURVE}/ of an earlier plateau run; choose an empty or new "
             "directory")
  os.makedirs(options.model_dir, exist_ok=True)
  try:
    curve, run_dir = curve_runs(options)
  except (ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  plateau, dev = finish(options, curve, run_dir)
  print(f"plateau: {plateau['chosen_steps']} steps (last doubling "
        f"{plateau['last_doubling_gain']} points, reached "
        f"{plateau['reached']}); dev {json.dumps(dev)}")


def run():
  run_command(define_command_flags, main)


if __name__ == "__main__":
  run()
