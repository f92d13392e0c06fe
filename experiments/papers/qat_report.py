"""Post-training int8 against QAT int8 on one model: the rows of
experiments/results/qat.{json,md}.

    python -m experiments.papers.qat_report --model_dir runs/minilm_spam \
        --data_dir data/spam --int8_recipe standard --qat_steps 300 \
        --work_dir /tmp/qat_report

It runs convert_tflite twice, as an app team would: float32 + int8 from
calibration alone (post-training), then int8 after --qat_steps of
quantization-aware training (converters/qat.py). It reads the two reports
and writes one row per (model, recipe) into --results_dir's qat.json (rows
of other models and recipes are kept) and qat.md beside it. Every number
comes from those reports; the row keeps the command that made it.

Each conversion is a part of --work_dir (ptq_RECIPE/, qat_RECIPE/) with a
`qat_report.done` marker (its flags and seconds) written once it succeeds.
A re-run keeps a part whose marker has the same flags and is newer than the
model and data, and redoes the others (a failed run's leftovers are
replaced), so after a failure only what is missing runs again; a part made
with other flags is refused before any work unless --overwrite. A part is
redone in place, so a folder of a part's name is used only if this command
wrote it (`own_part`: its `qat_report.started` or `.done` marker and
nothing but a part's files); a user's folder there, a link, or a part that
would hold the model or data is refused before any work, --overwrite or
not. Every flag is checked before the first conversion starts, and the
conversions die with this process, kill -9 included
(tfmodels/process_lifetime.py).

Only `main` reads the flags, into `QatReportOptions`; every function takes
that (tests and other commands: `command_options.with_defaults`).
"""

import dataclasses
import glob
import json
import os
import re
import shlex
import signal
import sys
import time

from absl import app, flags

from converters import source
from experiments.common import skeleton
from experiments.common.paths import REPO
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.markdown import table
from tfmodels.process_lifetime import run_owned
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import (check_output, check_writable, lock_until_exit,
                              refuse_link, write_file)

FLAGS = flags.FLAGS

DONE = "qat_report.done"  # a finished part: {"flags": [...], "seconds": s}
# A part this command started: written before its conversion runs, so a
# failed conversion's leftovers are known to be this command's too.
STARTED = "qat_report.started"
REPORT = "model_report.json"
# What a part holds besides its markers: convert_tflite's files for
# `--name model` (and the staging a killed conversion left: `own_part`).
PART_FILE = re.compile(r"model_[A-Za-z0-9_]+\.(tflite|model_card\.json)|"
                       r"model_report\.(json|md)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class QatReportOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(QatReportOptions, **values)`."""
  model_dir: str = option(None, "Our model directory or finetune run "
                          "(task.json gives task, length and vocabulary).",
                          required=True)
  data_dir: str = option(None, "The task's files (train for QAT and "
                         "calibration, --eval_split for the metric).",
                         required=True)
  name: str | None = option(None, "The row's model name (default: the "
                            "directory's name).")
  eval_split: str = option("dev", "Split the metric is measured on.")
  int8_recipe: str = option("standard", "int8 recipe of both conversions "
                            "(`strict`: --strict_int8).",
                            choices=("xnnpack", "standard", "strict"))
  qat_steps: int = option(300, "QAT fine-tuning steps.")
  qat_learning_rate: float = option(1e-5, "QAT peak learning rate.")
  qat_batch_size: int = option(16, "QAT batch size.")
  work_dir: str = option(None, "Where the two conversions write "
                         "(ptq_RECIPE/, qat_RECIPE/).", required=True)
  results_dir: str = skeleton.results_dir_option("qat.json / qat.md")
  overwrite: bool = option(False, "Redo both conversions, replacing their "
                           "earlier outputs in --work_dir (without it, a "
                           "re-run keeps each conversion it finished with "
                           "the same flags).")


define_flags(QatReportOptions)


def _check_flags(options):
  """Every flag and input, before any conversion starts (ValueError, one
  line naming the flag): a bad value found by the second conversion would
  cost the whole first one. Float flags that are not finite are `main`'s
  to refuse first (nonfinite_float_flag)."""
  for flag in ("model_dir", "data_dir"):
    if not os.path.isdir(getattr(options, flag)):
      raise ValueError(f"--{flag} {getattr(options, flag)}: not a directory")
  source.check_files(options.model_dir)
  if not source.read_task(options.model_dir).get("task"):
    raise ValueError(f"--model_dir {options.model_dir}: no task.json naming "
                     "the task (give a finetune run)")
  for split in ("train", options.eval_split):
    if not glob.glob(os.path.join(glob.escape(options.data_dir),
                                  f"{glob.escape(split)}.*")):
      raise ValueError(f"--data_dir {options.data_dir}: no {split} split "
                       f"({split}.*)")
  for flag in ("qat_steps", "qat_batch_size"):
    if getattr(options, flag) < 1:
      raise ValueError(f"--{flag} {getattr(options, flag)}: must be >= 1")
  if not options.qat_learning_rate > 0:
    raise ValueError(f"--qat_learning_rate {options.qat_learning_rate}: must "
                     "be > 0")
  refuse_link(os.path.normpath(options.work_dir), "--work_dir")
  check_writable(options.work_dir, "--work_dir")
  check_writable(options.results_dir, "--results_dir")
  results = os.path.join(options.results_dir, "qat.json")
  if os.path.exists(results):
    with open(results) as f:
      try:
        json.load(f)["rows"]
      except (ValueError, KeyError, TypeError):
        raise ValueError(f"{results}: not a qat.json (no rows); move it "
                         "away") from None


@dataclasses.dataclass
class Part:
  """One convert_tflite run of the report, in its own output directory."""
  name: str  # ptq or qat
  output_dir: str
  flags: list  # convert_tflite's flags (strings, paths absolute)
  inputs: tuple  # directories it was made from (the model's, data's)

  def marker(self):
    """The finished run's marker (dict), or None."""
    try:
      with open(os.path.join(self.output_dir, DONE)) as f:
        marker = json.load(f)
    except (OSError, ValueError):
      return None
    return marker if isinstance(marker, dict) else None

  def state(self):
    """`done` (kept), `other` (finished with other flags) or `missing`:
    never finished, failed, or older than the model or data."""
    marker = self.marker()
    if marker is None or not os.path.exists(
        os.path.join(self.output_dir, REPORT)):
      return "missing"
    if marker.get("flags") != self.flags:
      return "other"
    made = os.path.getmtime(os.path.join(self.output_dir, DONE))
    return "done" if made >= _newest_input(self.inputs) else "missing"


def own_part(directory):
  """Whether `directory` is a part this command wrote: it carries one of
  its markers, and everything in it is a marker or a file of a part
  (`PART_FILE`; no directory or link by those names)."""
  names = os.listdir(directory)
  if not set(names) & {DONE, STARTED}:
    return False
  for name in names:
    path = os.path.join(directory, name)
    if name.startswith(".staging-"):  # a killed conversion's: cleared
      continue
    if name not in (DONE, STARTED) and not PART_FILE.fullmatch(name):
      return False
    if os.path.islink(path) or not os.path.isfile(path):
      return False
  return True


def _newest_input(tops):
  """The latest modification time of the files under `tops` (the model's
  and the data's directories)."""
  newest = 0.0
  for top in tops:
    for directory, _, files in os.walk(top):
      for name in files:
        newest = max(newest, os.path.getmtime(os.path.join(directory, name)))
  return newest


def _parts(options):
  """The PTQ and QAT parts, refused before either runs: a folder of a
  part's name that this command did not write (`own_part`), a link, or a
  part that would hold the model or data; unless --overwrite, a part
  finished with other flags."""
  recipe = options.int8_recipe
  common = ["--model_dir", os.path.abspath(options.model_dir),
            "--data_dir", os.path.abspath(options.data_dir),
            "--eval_split", options.eval_split]
  recipe_flags = (["--strict_int8"] if recipe == "strict" else
                  ["--int8_recipe", recipe])

  def part(name, modes, extra):
    output_dir = os.path.join(os.path.abspath(options.work_dir),
                              f"{name}_{recipe}")
    return Part(name, output_dir, [
        *common, "--output_dir", output_dir, "--name", "model", "--modes",
        modes, *recipe_flags, *map(str, extra)],
                (options.model_dir, options.data_dir))

  parts = [part("ptq", "float32,int8", []),
           part("qat", "int8", [
               "--qat_steps", options.qat_steps,
               "--qat_learning_rate", options.qat_learning_rate,
               "--qat_batch_size", options.qat_batch_size])]
  for p in parts:
    # A part is redone in place (convert_tflite --overwrite replaces its
    # files), so only a folder this command wrote may be one: a user's
    # folder of that name, a link, or one holding the model or data is
    # refused, --overwrite or not.
    check_output(p.output_dir, "--work_dir", True, owner="qat_report",
                 inputs=[("--model_dir", options.model_dir),
                         ("--data_dir", options.data_dir)],
                 recognised=own_part)
  for p in parts:
    if p.state() == "other" and not options.overwrite:
      raise ValueError(f"--work_dir {options.work_dir}: "
                       f"{os.path.basename(p.output_dir)} holds a conversion "
                       "made with other flags (pass --overwrite)")
  return parts


def _convert(part, overwrite=False):
  """Runs the part unless an earlier run finished it (or `overwrite`); (its
  report, wall seconds)."""
  if part.state() == "done" and not overwrite:
    seconds = part.marker().get("seconds")
    print(f"{part.name}: kept {part.output_dir} (finished by an earlier run "
          "with the same flags)", flush=True)
  else:
    marker = os.path.join(part.output_dir, DONE)
    if os.path.exists(marker):
      os.unlink(marker)
    # Ours from now on, whatever the conversion leaves (`own_part`).
    write_file(os.path.join(part.output_dir, STARTED),
               json.dumps({"flags": part.flags}) + "\n")
    command = [sys.executable, "-m", "converters.convert_tflite",
               *part.flags]
    if glob.glob(os.path.join(glob.escape(part.output_dir), "model_*")):
      command.append("--overwrite")  # a failed or outdated run's files
    print("$", shlex.join(command), flush=True)
    start = time.time()
    status = run_owned(command, cwd=REPO)
    if status:
      how = (f"was killed by {signal.Signals(-status).name}" if status < 0
             else f"exited {status}")
      raise ValueError(f"the {part.name} conversion (convert_tflite) {how}; "
                       "see its output above (a re-run redoes only what is "
                       "missing)")
    seconds = round(time.time() - start)
    write_file(marker, json.dumps({"flags": part.flags, "seconds": seconds})
               + "\n")
  with open(os.path.join(part.output_dir, REPORT)) as f:
    return json.load(f), seconds


def row(ptq, qat, model, recipe, command, seconds):
  """One qat.json row from the two convert_tflite reports."""
  float_metric = ptq["keras"]["metric"]
  ptq_int8 = ptq["modes"]["int8"]["metric"]["points"]
  qat_int8 = qat["modes"]["int8"]["metric"]["points"]
  facts = qat["qat"]
  return {
      "model": model, "task": ptq["task"], "eval_split": ptq["eval_split"],
      "seq_length": ptq["seq_length"], "recipe": recipe,
      "metric": float_metric["name"],
      "float_metric": float_metric["points"],
      "tflite_float32_metric": ptq["modes"]["float32"]["metric"]["points"],
      "ptq_metric": ptq_int8, "qat_metric": qat_int8,
      "ptq_drop": float_metric["points"] - ptq_int8,
      "qat_drop": float_metric["points"] - qat_int8,
      "fake_quant_keras_metric": facts["headline"],
      "qat_steps": facts["steps"], "qat_batch_size": facts["batch_size"],
      "qat_learning_rate": facts["learning_rate"],
      "qat_loss_before": facts["loss_before"],
      "qat_loss_after": facts["loss_after"],
      "range_shift": facts["range_shift"],
      "quantized_tensors": facts["quantized_tensors"],
      "int8_float_ops": {"ptq": ptq["modes"]["int8"]["float_ops"],
                         "qat": qat["modes"]["int8"]["float_ops"]},
      "wall_seconds": seconds, "command": command}


def markdown(rows):
  lines = ["# Quantization-aware training against post-training int8", "",
           "Each row: the model's Keras metric, its int8 file after "
           "calibration alone (PTQ) and after QAT fine-tuning "
           "(`convert_tflite --qat_steps`), measured by `convert_tflite` "
           "on the same split; made by the row's command "
           "(`experiments/papers/qat_report.py`).", "",
           *table(["model", "task", "recipe", "metric", "float", "PTQ int8",
                   "drop", "QAT int8", "drop", "fake-quant Keras",
                   "QAT steps", "QAT loss"],
                  ([r["model"], f"{r['task']} ({r['eval_split']})",
                    r["recipe"], r["metric"], f"{r['float_metric']:.2f}",
                    f"{r['ptq_metric']:.2f}", f"{-r['ptq_drop']:+.2f}",
                    f"{r['qat_metric']:.2f}", f"{-r['qat_drop']:+.2f}",
                    f"{r['fake_quant_keras_metric']:.2f}", r["qat_steps"],
                    f"{r['qat_loss_before']:.4g} -> "
                    f"{r['qat_loss_after']:.4g}"] for r in rows))]
  lines += ["", "Commands:", ""]
  lines += [f"- `{r['command']}`" for r in rows]
  return "\n".join(lines) + "\n"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(QatReportOptions, FLAGS)
  try:
    nonfinite = nonfinite_float_flag(FLAGS)
    if nonfinite:
      raise ValueError(nonfinite)
    _check_flags(options)
    lock_until_exit(options.work_dir, "--work_dir")  # one report per dir
    ptq_part, qat_part = _parts(options)
    command = "python -m experiments.papers.qat_report " + " ".join(
        shlex.quote(a) for a in sys.argv[1:])
    recipe = options.int8_recipe
    ptq, ptq_seconds = _convert(ptq_part, options.overwrite)
    qat, qat_seconds = _convert(qat_part, options.overwrite)
    new = row(ptq, qat, options.name or os.path.basename(
        os.path.normpath(options.model_dir)), recipe, command,
              {"ptq": ptq_seconds, "qat": qat_seconds})
    path = os.path.join(options.results_dir, "qat.json")
    rows = []
    if os.path.exists(path):
      with open(path) as f:
        rows = json.load(f)["rows"]
    rows = [r for r in rows if (r["model"], r["recipe"]) !=
            (new["model"], new["recipe"])] + [new]
    os.makedirs(options.results_dir, exist_ok=True)
    write_file(path, json.dumps({"rows": rows}, indent=2) + "\n")
    write_file(os.path.join(options.results_dir, "qat.md"), markdown(rows))
  except (ValueError, OSError) as e:
    sys.exit(f"error: {str(e).splitlines()[0]}")
  print(f"{new['model']} ({recipe}): float {new['float_metric']:.2f}, "
        f"PTQ int8 {new['ptq_metric']:.2f}, QAT int8 {new['qat_metric']:.2f}"
        f"; wrote {path}")


def run():
  exit_on_sigterm()  # SIGTERM unwinds, and stops the running conversion
  app.run(main)


if __name__ == "__main__":
  run()
