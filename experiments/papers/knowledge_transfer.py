"""Does knowledge transfer beat training from scratch? Measured on the shipped data.

    python -m experiments.papers.knowledge_transfer --output_dir /tmp/transfer

A small IB-BERT teacher is pre-trained on data/pretraining; a MobileBERT
student of the same feature-map width (128) and depth is then trained with
the same number of steps (a) from scratch with MLM + NSP, (b) by PKT + PD,
(c) by JKT + PD and (d) by AKT. Every model is scored on held-out masked-LM
accuracy (shards from data/pretraining/heldout.txt.gz) and fine-tuned, with
one shared recipe, on spam classification (data/spam) and extractive QA
(data/wordnet_qa). Then a KroneckerBERT is distilled from the real MiniLM
teacher (pre-training KD on the same shards, then task-stage KD from MiniLM
fine-tuned on each task) and compared with MiniLM itself.

Every step is a command of this project (the log prints each one); a re-run
skips finished steps (`experiments/common/pipeline.py`). The results land in
OUTPUT_DIR/results.json and OUTPUT_DIR/RESULTS.md. `--scale tiny` runs the
same chain in a couple of minutes (for the tests), numbers meaningless.
"""

import dataclasses
import json
import os
import sys

from absl import app

from experiments.common import skeleton
from experiments.common.paths import DATA, VOCAB
from experiments.common.pipeline import Step, python_module
from experiments.common.real_teacher import MINILM, import_step
from experiments.common.result_files import read_json
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.markdown import number, table
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import write_file

STUDENTS = ("scratch", "pkt", "jkt", "akt")


@dataclasses.dataclass(frozen=True)
class Scale:
  teacher_config: str
  student_config: str
  kronecker_config: str
  config_overrides: dict  # applied to every config (tiny: short sequences)
  max_seq_length: int
  dupe_factor: int
  batch_size: int
  teacher_steps: int
  student_steps: int
  kronecker_steps: int
  finetune_steps: int
  pretrain_lr: float = 2e-3
  finetune_lr: float = 1e-3  # the small models trained here
  pretrained_finetune_lr: float = 1e-4  # MiniLM and its KroneckerBERT


SCALES = {
    "small": Scale("small_ibbert", "small_mobilebert", "kronecker_minilm",
                   {}, max_seq_length=128, dupe_factor=3, batch_size=32,
                   teacher_steps=1200, student_steps=600, kronecker_steps=300,
                   finetune_steps=250),
    "tiny": Scale("tiny_ibbert", "tiny_mobilebert", "kronecker_minilm",
                  {"vocab_size": 30522}, max_seq_length=32, dupe_factor=1,
                  batch_size=4, teacher_steps=4, student_steps=8,
                  kronecker_steps=2, finetune_steps=2),
}


STEP_FLAGS = ("teacher_steps", "student_steps", "kronecker_steps",
              "finetune_steps")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options):
  output_dir: str | None = skeleton.output_dir_option(
      "Where runs and results go.")
  scale: str = skeleton.scale_option(SCALES)
  force: tuple = skeleton.force_option()
  kronecker: bool = option(True, "Also the KroneckerBERT-from-MiniLM part.")
  # The step counts (STEP_FLAGS); None: the scale's.
  teacher_steps: int | None = option(None, "Override the scale's "
                                     "teacher_steps.")
  student_steps: int | None = option(None, "Override the scale's "
                                     "student_steps.")
  kronecker_steps: int | None = option(None, "Override the scale's "
                                       "kronecker_steps.")
  finetune_steps: int | None = option(None, "Override the scale's "
                                      "finetune_steps.")

  def sized_scale(self):
    """The scale with the step counts the options override."""
    return dataclasses.replace(SCALES[self.scale], **{
        f: getattr(self, f) for f in STEP_FLAGS
        if getattr(self, f) is not None})


define_flags(Options)


def _write_configs(scale, directory):
  """The configs the runs use, as JSON files (with the scale's overrides)."""
  from tfmodels.configs import load_config
  os.makedirs(directory, exist_ok=True)
  paths = {}
  for role, name in (("teacher", scale.teacher_config),
                     ("student", scale.student_config),
                     ("kronecker", scale.kronecker_config)):
    overrides = {k: v for k, v in scale.config_overrides.items()
                 if role != "kronecker"}
    config = load_config(name).replace(**overrides)
    paths[role] = os.path.join(directory, f"{role}.json")
    write_file(paths[role], json.dumps(dataclasses.asdict(config), indent=2))
  return paths


def build_steps(out, scale, kronecker=True):
  """The experiment as pipeline steps; returns (steps, models)."""
  configs = _write_configs(scale, os.path.join(out, "configs"))
  data = {split: os.path.join(out, "data", split)
          for split in ("train", "heldout")}
  runs = lambda name: os.path.join(out, "runs", name)
  train = ("--train_data", data["train"], "--batch_size", scale.batch_size,
           "--checkpoint_every", 200, "--log_every", 20)
  steps = []
  for split, seed in (("train", 12345), ("heldout", 7)):
    steps.append(Step(f"data_{split}", python_module(
        "tfmodels.data.create_pretraining_data", "--input_file",
        os.path.join(DATA, "pretraining", f"{split}.txt.gz"), "--vocab_file",
        VOCAB, "--output_dir", data[split], "--max_seq_length",
        scale.max_seq_length, "--dupe_factor",
        scale.dupe_factor if split == "train" else 1, "--random_seed", seed,
        "--overwrite"), data[split]))
  steps.append(Step("teacher", python_module(
      "tfmodels.training.pretrain", "--config", configs["teacher"],
      "--model_dir", runs("teacher"), "--train_steps", scale.teacher_steps,
      "--learning_rate", scale.pretrain_lr, "--warmup_steps",
      scale.teacher_steps // 10, *train), runs("teacher"), (data["train"],)))
  steps.append(Step("scratch", python_module(
      "tfmodels.training.pretrain", "--config", configs["student"],
      "--model_dir", runs("scratch"), "--train_steps", scale.student_steps,
      "--learning_rate", scale.pretrain_lr, "--warmup_steps",
      scale.student_steps // 10, *train), runs("scratch"), (data["train"],)))
  for strategy in STUDENTS[1:]:
    steps.append(Step(strategy, python_module(
        "tfmodels.training.distill", "--teacher_dir", runs("teacher"),
        "--student_config", configs["student"], "--strategy", strategy,
        "--model_dir", runs(strategy), "--train_steps", scale.student_steps,
        "--learning_rate", scale.pretrain_lr, "--warmup_steps",
        scale.student_steps // 10, *train), runs(strategy),
        (data["train"], runs("teacher"))))

  def evaluate(model):
    """Held-out MLM (when it has an MLM head), spam and QA fine-tuning."""
    if model != "minilm":  # MiniLM ships without its MLM head
      output = os.path.join(out, "eval", f"{model}_mlm")
      steps.append(Step(f"{model}_mlm", python_module(
          "tfmodels.training.evaluate", "--model_dir", runs(model),
          "--pretraining_data", data["heldout"], "--overwrite", "--output",
          os.path.join(output, "metrics.json")), output,
          (runs(model), data["heldout"])))
    for task, task_name, data_dir in (
        ("spam", "spam", os.path.join(DATA, "spam")),
        ("qa", "squad", os.path.join(DATA, "wordnet_qa"))):
      output = os.path.join(out, "finetune", f"{model}_{task}")
      extra, inputs = (), (runs(model),)
      if model == "kronecker":  # task-stage KD from the fine-tuned MiniLM
        teacher = os.path.join(out, "finetune", f"minilm_{task}")
        extra, inputs = ("--teacher_dir", teacher), (runs(model), teacher)
      lr = (scale.pretrained_finetune_lr if model in ("minilm", "kronecker")
            else scale.finetune_lr)
      steps.append(Step(f"{model}_{task}", python_module(
          "tfmodels.training.finetune", "--task", task_name, "--data_dir",
          data_dir, "--init_dir", runs(model), "--model_dir", output,
          "--vocab_file", VOCAB, "--max_seq_length", scale.max_seq_length,
          "--train_steps", scale.finetune_steps, "--batch_size",
          scale.batch_size, "--learning_rate", lr,
          "--checkpoint_every", 1000, "--log_every", 20, *extra), output,
          inputs))

  for model in ("teacher", *STUDENTS):
    evaluate(model)
  models = ["teacher", *STUDENTS]
  if kronecker:
    steps.append(import_step(runs("minilm"), name="minilm"))
    steps.append(Step("kronecker", python_module(
        "tfmodels.training.distill", "--teacher", MINILM, "--student_config",
        configs["kronecker"], "--strategy", "kronecker", "--model_dir",
        runs("kronecker"), "--train_steps", scale.kronecker_steps,
        "--learning_rate", 1e-3, "--warmup_steps",
        scale.kronecker_steps // 10, *train), runs("kronecker"),
        (data["train"],)))
    for model in ("minilm", "kronecker"):
      evaluate(model)
    models += ["minilm", "kronecker"]
  return steps, models


LABELS = {
    "teacher": "IB-BERT teacher", "scratch": "MobileBERT, scratch (MLM+NSP)",
    "pkt": "MobileBERT, PKT + PD", "jkt": "MobileBERT, JKT + PD",
    "akt": "MobileBERT, AKT", "minilm": "MiniLM-L6-H384 (teacher)",
    "kronecker": "KroneckerBERT from MiniLM"}


def collect(out, models):
  """One row per model: size, held-out MLM / NSP, spam accuracy, QA F1 / EM."""
  from tfmodels.configs import load_config
  from tfmodels.summary import count
  rows = []
  for model in models:
    config_file = os.path.join(out, "runs", model, "config.json")
    if not os.path.exists(config_file):  # not trained yet
      continue
    config = load_config(config_file)
    mlm = read_json(os.path.join(out, "eval", f"{model}_mlm", "metrics.json"))
    spam = read_json(os.path.join(out, "finetune", f"{model}_spam",
                              "eval_results.json"))
    qa = read_json(os.path.join(out, "finetune", f"{model}_qa",
                            "eval_results.json"))
    rows.append({
        "model": model, "label": LABELS[model],
        "params": count(config, min(128, config.max_position_embeddings))[
            "params_encoder"],
        "mlm_accuracy": mlm and mlm["mlm_accuracy"],
        "nsp_accuracy": mlm and mlm["sentence_accuracy"],
        "spam_accuracy": spam and spam["accuracy"],
        "qa_f1": qa and qa["f1"], "qa_exact_match": qa and qa["exact_match"]})
  return rows


def markdown(rows, scale):
  fmt = lambda v, scale=100: number(v, 1, "n/a", scale)
  lines = [
      f"Teacher {scale.teacher_steps} steps; each MobileBERT student "
      f"{scale.student_steps} steps; KroneckerBERT {scale.kronecker_steps} "
      f"KD steps; batch {scale.batch_size}, sequence {scale.max_seq_length}; "
      f"fine-tuning {scale.finetune_steps} steps, learning rate "
      f"{scale.finetune_lr:g} ({scale.pretrained_finetune_lr:g} for MiniLM "
      "and its KroneckerBERT).",
      "",
      *table(["model", "encoder params", "held-out MLM acc", "NSP acc",
              "spam acc", "QA F1", "QA EM"],
             ([r["label"], f"{r['params'] / 1e6:.2f}M",
               fmt(r["mlm_accuracy"]), fmt(r["nsp_accuracy"]),
               fmt(r["spam_accuracy"]), fmt(r["qa_f1"], 1),
               fmt(r["qa_exact_match"], 1)] for r in rows))]
  return "\n".join(lines) + "\n"


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  options = from_flags(Options)
  skeleton.check_command_line(argv, options)  # before the step counts
  for flag in STEP_FLAGS:
    value = getattr(options, flag)
    if value is not None and value < 1:
      sys.exit(f"error: --{flag} {value}: give 1 or more")
  skeleton.run_command(argv, options, run_experiment)


def run_experiment(options, out, results):
  """Runs the steps into `out`, then writes what they measured there
  (results.json, RESULTS.md)."""
  scale = options.sized_scale()
  steps, models = build_steps(out, scale, options.kronecker)

  def report(results):
    rows = collect(out, models)
    table = markdown(rows, scale)
    results.add("results.json", json.dumps(
        {"scale": dataclasses.asdict(scale), "rows": rows}, indent=2))
    results.add("RESULTS.md", table)
    return table

  skeleton.run_and_report(steps, options, results, report)


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
