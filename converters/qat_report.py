"""Post-training int8 against QAT int8 on one model: the rows of
converters/results/qat.{json,md}.

    python -m converters.qat_report --model_dir runs/minilm_spam \
        --data_dir data/spam --int8_recipe standard --qat_steps 300 \
        --work_dir /tmp/qat_report

It runs convert_tflite twice, as an app team would: float32 + int8 from
calibration alone (post-training), then int8 after --qat_steps of
quantization-aware training (converters/qat.py). It reads the two reports
and writes one row per (model, recipe) into --results_dir's qat.json (rows
of other models and recipes are kept) and qat.md beside it. Every number
comes from those reports; the row keeps the command that made it.
"""

import json
import os
import shlex
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Our model directory or finetune "
                    "run (task.json gives task, length and vocabulary).")
flags.DEFINE_string("data_dir", None, "The task's files (train for QAT and "
                    "calibration, --eval_split for the metric).")
flags.DEFINE_string("name", None, "The row's model name (default: the "
                    "directory's name).")
flags.DEFINE_string("eval_split", "dev", "Split the metric is measured on.")
flags.DEFINE_enum("int8_recipe", "standard", ["xnnpack", "standard",
                                              "strict"],
                  "int8 recipe of both conversions (`strict`: "
                  "--strict_int8).")
flags.DEFINE_integer("qat_steps", 300, "QAT fine-tuning steps.")
flags.DEFINE_float("qat_learning_rate", 1e-5, "QAT peak learning rate.")
flags.DEFINE_integer("qat_batch_size", 16, "QAT batch size.")
flags.DEFINE_string("work_dir", None, "Where the two conversions write "
                    "(ptq_RECIPE/, qat_RECIPE/).")
flags.DEFINE_string("results_dir", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "results"),
                    "Where qat.json / qat.md go.")
flags.DEFINE_bool("overwrite", False, "Replace the conversions' earlier "
                  "outputs in --work_dir.")
flags.mark_flags_as_required(["model_dir", "data_dir", "work_dir"])


def _check_flags():
  for flag in ("model_dir", "data_dir"):
    if not os.path.isdir(getattr(FLAGS, flag)):
      raise ValueError(f"--{flag} {getattr(FLAGS, flag)}: not a directory")
  if FLAGS.qat_steps < 1:
    raise ValueError(f"--qat_steps {FLAGS.qat_steps}: must be >= 1")
  results = os.path.join(FLAGS.results_dir, "qat.json")
  if os.path.exists(results):
    with open(results) as f:
      try:
        json.load(f)["rows"]
      except (ValueError, KeyError, TypeError):
        raise ValueError(f"{results}: not a qat.json (no rows); move it "
                         "away") from None


def _convert(output_dir, modes, extra):
  """Runs convert_tflite; (its report, wall seconds)."""
  recipe = (["--strict_int8"] if FLAGS.int8_recipe == "strict" else
            ["--int8_recipe", FLAGS.int8_recipe])
  command = [sys.executable, "-m", "converters.convert_tflite",
             "--model_dir", FLAGS.model_dir, "--data_dir", FLAGS.data_dir,
             "--eval_split", FLAGS.eval_split, "--output_dir", output_dir,
             "--name", "model", "--modes", modes, *recipe, *extra]
  if FLAGS.overwrite:
    command.append("--overwrite")
  command = [str(a) for a in command]
  print("$", " ".join(map(shlex.quote, command)), flush=True)
  start = time.time()
  result = subprocess.run(command, cwd=os.path.dirname(
      os.path.dirname(os.path.abspath(__file__))))
  if result.returncode:
    raise ValueError(f"convert_tflite exited {result.returncode} "
                     f"(see its output above)")
  with open(os.path.join(output_dir, "model_report.json")) as f:
    return json.load(f), time.time() - start


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
           "(`converters/qat_report.py`).", "",
           "| model | task | recipe | metric | float | PTQ int8 | drop | "
           "QAT int8 | drop | fake-quant Keras | QAT steps | QAT loss |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
           "--- | --- |"]
  for r in rows:
    lines.append(
        f"| {r['model']} | {r['task']} ({r['eval_split']}) | {r['recipe']} "
        f"| {r['metric']} | {r['float_metric']:.2f} | {r['ptq_metric']:.2f} "
        f"| {-r['ptq_drop']:+.2f} | {r['qat_metric']:.2f} | "
        f"{-r['qat_drop']:+.2f} | {r['fake_quant_keras_metric']:.2f} | "
        f"{r['qat_steps']} | {r['qat_loss_before']:.4g} -> "
        f"{r['qat_loss_after']:.4g} |")
  lines += ["", "Commands:", ""]
  lines += [f"- `{r['command']}`" for r in rows]
  return "\n".join(lines) + "\n"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  from tfmodels.staging import write_file
  try:
    _check_flags()
    command = "python -m converters.qat_report " + " ".join(
        shlex.quote(a) for a in sys.argv[1:])
    recipe = FLAGS.int8_recipe
    ptq, ptq_seconds = _convert(
        os.path.join(FLAGS.work_dir, f"ptq_{recipe}"), "float32,int8", [])
    qat, qat_seconds = _convert(
        os.path.join(FLAGS.work_dir, f"qat_{recipe}"), "int8",
        ["--qat_steps", FLAGS.qat_steps, "--qat_learning_rate",
         FLAGS.qat_learning_rate, "--qat_batch_size", FLAGS.qat_batch_size])
    new = row(ptq, qat, FLAGS.name or os.path.basename(
        os.path.normpath(FLAGS.model_dir)), recipe, command,
              {"ptq": round(ptq_seconds), "qat": round(qat_seconds)})
    path = os.path.join(FLAGS.results_dir, "qat.json")
    rows = []
    if os.path.exists(path):
      with open(path) as f:
        rows = json.load(f)["rows"]
    rows = [r for r in rows if (r["model"], r["recipe"]) !=
            (new["model"], new["recipe"])] + [new]
    os.makedirs(FLAGS.results_dir, exist_ok=True)
    write_file(path, json.dumps({"rows": rows}, indent=2) + "\n")
    write_file(os.path.join(FLAGS.results_dir, "qat.md"), markdown(rows))
  except (ValueError, OSError) as e:
    sys.exit(f"error: {str(e).splitlines()[0]}")
  print(f"{new['model']} ({recipe}): float {new['float_metric']:.2f}, "
        f"PTQ int8 {new['ptq_metric']:.2f}, QAT int8 {new['qat_metric']:.2f}"
        f"; wrote {path}")


if __name__ == "__main__":
  app.run(main)
