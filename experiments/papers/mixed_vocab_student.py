"""The mixed-vocabulary paper's small student on the shipped intent + slot data.

    python -m experiments.papers.mixed_vocab_student --output_dir /tmp/mixed_vocab

Zhao et al.'s recipe, scaled to this host:

  stage I   a mixed-vocabulary teacher (`mixed_vocab_teacher_minilm`:
            all-MiniLM-L6-v2's shape plus a student table as wide as the
            student, projected up) starts from MiniLM (`pretrain
            --init_from`, where the paper starts from BERT-large) and learns
            eq. 1 on data/pretraining segmented with both vocabularies
            (p_SV = 0.5)
  stage II  the student (Table 2's L6 shape, `snips_l6_h192` by default,
            with the shipped 4818-piece student vocabulary) starts its word
            table from stage I's student table and learns eq. 2 (MLM + NSP)
            on student-segmented data
  NoKD      the paper's baseline: the same student and steps, no stage I
  carved    the project's small-vocabulary student beside the paper's: cut
            out of the fine-tuned teacher (6 of 12 heads, 512 of 1536 FFN
            neurons, word table at rank 128, NoNorm + relu, recovered),
            moved to the same student vocabulary (each piece the teacher
            has keeps its vector, each new one the mean of the teacher
            pieces spelling it, then mixed-vocabulary alignment on the
            task's sentences), then fine-tuned with the teacher's intent
            soft targets (the teacher reading its own vocabulary)
  teacher   MiniLM itself fine-tuned on the task (its vocabulary), the
            bar both students are read against
  task      each is fine-tuned on data/brown_pos as joint intent + slot
            tagging (SNIPS' stand-in: POS tags = slots, the tense of the
            sentence's first finite verb = intent, `experiments.papers.tense_intent`:
            a genre, the shipped label, cannot be told from one sentence)
            and scored on dev and test: intent accuracy beside the majority
            class's, slot F1, sentence exact match

Held-out masked-LM accuracy of each pre-training run is scored too (stage I
in its two vocabularies, the students in theirs). Results:
RESULTS_DIR/mixed_vocab_student.{json,md}. Every step is a command of this
project; a re-run skips finished steps and a killed one resumes.
`--scale tiny` runs the chain with a handful of steps to check the wiring
(numbers meaningless; it still loads MiniLM and the full Brown sets).
"""

import dataclasses
import os

from absl import app

from experiments.common import skeleton
from experiments.common.result_files import read_history, read_json
from experiments.common.paths import DATA, VOCAB
from experiments.common.pipeline import Step, python_module
from experiments.common.real_teacher import MINILM, MINILM_LABEL, import_step
from experiments.ship.student_recipe import (RECIPE, carve_command,
                                        student_steps)
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.markdown import number, table
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import write_file

RESULTS_NAME = "mixed_vocab_student"
STUDENT_VOCAB = os.path.join(DATA, "vocab", "student_vocab.txt")
BROWN = os.path.join(DATA, "brown_pos")
TEACHER_CONFIG = "mixed_vocab_teacher_minilm"
SPLITS = ("dev", "test")


@dataclasses.dataclass(frozen=True)
class Scale:
  pretraining_text: str  # data/pretraining split the shards are cut from
  max_seq_length: int  # pre-training and the task
  max_predictions: int  # masked tokens per sequence (stage I: half teacher)
  batch_size: int
  stage_one_steps: int
  stage_two_steps: int  # the student's and the NoKD baseline's
  finetune_steps: int
  recover_steps: int = 200  # the carved student's NoNorm recovery
  align_steps: int = 300  # its new rows' mixed-vocabulary alignment
  calibration_examples: int = 512  # its carving's importance scores
  teacher_lr: float = 1e-4  # MiniLM's fine-tuning (distill_from_minilm's)
  stage_one_lr: float = 5e-4
  stage_two_lr: float = 1e-3
  finetune_lr: float = 5e-4


SCALES = {
    # Measured on the shared 2-core host: stage I ~3 s a step (MiniLM at
    # batch 32, L = 64), the H192 student ~0.7 s a step.
    "full": Scale("train", 64, 10, batch_size=32, stage_one_steps=150,
                  stage_two_steps=400, finetune_steps=300),
    "tiny": Scale("heldout", 32, 4, batch_size=4, stage_one_steps=2,
                  stage_two_steps=2, finetune_steps=2, recover_steps=2,
                  align_steps=2,
                  calibration_examples=8),
}
# name -> (method, the run its encoder comes from)
MODELS = {
    "teacher": (f"{MINILM_LABEL}, fine-tuned on the task (its own "
                "vocabulary)", "teacher"),
    "student": ("mixed-vocab distilled: stage I from MiniLM, stage II",
                "stage2"),
    "nokd": ("NoKD baseline: the same student, MLM + NSP from scratch",
             "nokd"),
    "carved": ("carved from the fine-tuned teacher, moved to the student "
               "vocabulary, intent KD from the teacher", "carve"),
}
# What compress cuts for the carved row (distill_from_minilm's `carved`);
# how is the student recipe's (`student_recipe`).
CARVE = ("--heads", 6, "--intermediate_size", 512, "--low_rank",
         "word_embeddings=128")
# Rows whose encoder is not a pre-training run of this experiment.
NOT_PRETRAINED = ("teacher", "carved")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options):
  output_dir: str | None = skeleton.output_dir_option(
      "Data, runs and scores.")
  results_dir: str = skeleton.results_dir_option(
      f"{RESULTS_NAME}.{{json,md}}")
  scale: str = skeleton.scale_option(SCALES)
  force: tuple = skeleton.force_option()
  student: str = option("snips_l6_h192", "The student's shape (the paper's "
                        "Table 2 rows).", choices=(
                            "snips_l6_h96", "snips_l6_h192", "snips_l6_h256"))
  nokd: bool = option(True, "Also train and score the NoKD baseline (the "
                      "paper's comparison; doubles stage II and the task).")


define_flags(Options)


class Layout(skeleton.Layout):
  """Where each step writes under the output directory."""

  def score(self, name):
    return self.path("scores", name)

  def start(self, model):
    """The model directory a row's fine-tuning starts from: its encoder's
    run, or the carved model inside the carving step's directory."""
    run = self.run(MODELS[model][1])
    return os.path.join(run, "model") if model == "carved" else run

  def task_data(self):
    """data/brown_pos with the tense intent (`experiments.papers.tense_intent`)."""
    return self.path("data", "intent")


def student_vocab_size():
  with open(STUDENT_VOCAB, encoding="utf-8") as f:
    return sum(1 for _ in f)


def write_configs(layout, student):
  """The teacher's and student's configs over the shipped student vocab.

  The paper's configs count its 4928-piece vocabulary (Table 2's
  parameters); the runs use the shipped one, and the teacher's student
  table is as wide as the student.
  """
  from tfmodels.configs import load_config
  size = student_vocab_size()
  student_config = load_config(student).replace(vocab_size=size)
  teacher_config = load_config(TEACHER_CONFIG).replace(
      mixed_vocab_size=size,
      mixed_vocab_embedding_size=student_config.embedding_size)
  paths = {}
  for role, config in (("teacher", teacher_config),
                       ("student", student_config)):
    paths[role] = layout.path("configs", f"{role}.json")
    write_file(paths[role], config.to_json() + "\n")
  return paths


EVERY = ("--checkpoint_every", 100, "--keep_checkpoints", 1, "--log_every",
         10)


def student_recipe(scale):
  """The carved row's student recipe: the scale's sizes over the student
  recipe's defaults, for a fixed number of steps on the soft logits alone
  (its student reads another vocabulary than its teacher, so no layer is
  compared; the committed figures are such runs)."""
  return dataclasses.replace(
      RECIPE, recover_steps=scale.recover_steps,
      calibration_examples=scale.calibration_examples,
      steps=scale.finetune_steps, batch_size=scale.batch_size,
      task_kd="prediction", heldout=0)


def _carved_steps(layout, scale):
  """The carved row: cut out of the fine-tuned teacher and moved to the
  student vocabulary (compress), then distilled on the task from it."""
  recipe, teacher = student_recipe(scale), layout.finetuned("teacher")
  carve = Step("carve", carve_command(
      recipe, teacher, layout.task_data(), layout.start("carved"), CARVE,
      "--vocab_file", STUDENT_VOCAB, "--align_steps", scale.align_steps,
      "--overwrite"), layout.run("carve"), (teacher, layout.task_data()),
      clean=True)
  return [carve, *student_steps(
      recipe, ("heldout_carved", "finetune_carved"), "intent_slot",
      layout.task_data(), layout.path("data", "heldout_carved"),
      layout.start("carved"), layout.finetuned("carved"), STUDENT_VOCAB,
      scale.max_seq_length, teacher,
      (layout.run("carve"), layout.task_data(), teacher), EVERY,
      teacher_vocab=VOCAB)]


def build_steps(layout, scale, configs, models=tuple(MODELS)):
  """The recipe as pipeline steps, for the named `models` (MODELS)."""
  text = lambda split: os.path.join(DATA, "pretraining", f"{split}.txt.gz")
  data = {  # name -> (text, student-only?)
      "mixed": (text(scale.pretraining_text), False),
      "student": (text(scale.pretraining_text), True),
      "mixed_heldout": (text("heldout"), False),
      "student_heldout": (text("heldout"), True)}
  steps = [Step("data_intent", python_module(
      "experiments.papers.tense_intent", "--data_dir", BROWN, "--output_dir",
      layout.task_data()), layout.task_data())]
  for name, (source, student_only) in data.items():
    vocab = (("--vocab_file", STUDENT_VOCAB) if student_only else
             ("--vocab_file", VOCAB, "--student_vocab_file", STUDENT_VOCAB,
              "--max_teacher_predictions", scale.max_predictions // 2))
    steps.append(Step(f"data_{name}", python_module(
        "tfmodels.data.create_pretraining_data", "--input_file", source,
        *vocab, "--output_dir", layout.shards(name), "--max_seq_length",
        scale.max_seq_length, "--max_predictions_per_seq",
        scale.max_predictions,
        "--dupe_factor", 1, "--random_seed",
        7 if name.endswith("heldout") else 12345, "--overwrite"),
        layout.path("data", name)))
  common = ("--batch_size", scale.batch_size, "--checkpoint_every", 100,
            "--keep_checkpoints", 1, "--log_every", 10)
  steps.append(Step("stage1", python_module(
      "tfmodels.training.pretrain", "--config", configs["teacher"],
      "--init_from", MINILM, "--train_data", layout.shards("mixed"),
      "--model_dir", layout.run("stage1"), "--train_steps",
      scale.stage_one_steps, "--learning_rate", scale.stage_one_lr,
      "--warmup_steps", scale.stage_one_steps // 10, *common),
      layout.run("stage1"), (layout.path("data", "mixed"),)))
  student = ("--config", configs["student"], "--train_data",
             layout.shards("student"), "--train_steps",
             scale.stage_two_steps, "--learning_rate", scale.stage_two_lr,
             "--warmup_steps", scale.stage_two_steps // 10, *common)
  pretraining = {
      "stage2": ("--init_student_embeddings_from", layout.run("stage1")),
      "nokd": ()}
  heldout = {"stage1": "mixed_heldout", "stage2": "student_heldout",
             "nokd": "student_heldout"}
  # The student's whole chain first, then the baseline's.
  for model, (_, run) in MODELS.items():
    if model not in models:
      continue
    if model == "teacher":
      steps.append(import_step(layout.run(run)))
    elif model == "carved":
      steps += _carved_steps(layout, scale)
    else:
      inputs = (layout.path("data", "student"),) + (
          (layout.run("stage1"),) if run == "stage2" else ())
      steps.append(Step(run, python_module(
          "tfmodels.training.pretrain", *student, "--model_dir",
          layout.run(run), *pretraining[run]), layout.run(run), inputs))
    if model != "carved":
      steps.append(Step(f"finetune_{model}", python_module(
          "tfmodels.training.finetune", "--task", "intent_slot",
          "--data_dir", layout.task_data(), "--init_dir", layout.start(model),
          "--model_dir", layout.finetuned(model), "--vocab_file",
          VOCAB if model == "teacher" else STUDENT_VOCAB,
          "--max_seq_length", scale.max_seq_length, "--train_steps",
          scale.finetune_steps, "--batch_size", scale.batch_size,
          "--learning_rate", scale.teacher_lr if model == "teacher" else
          scale.finetune_lr, *EVERY), layout.finetuned(model),
          (layout.run(run), layout.task_data())))
    steps.append(_score(f"test_{model}", layout, layout.finetuned(model),
                        ("--data_dir", layout.task_data(), "--split", "test"),
                        (layout.task_data(),)))
    if model in NOT_PRETRAINED:
      continue
    for scored in (("stage1", run) if run == "stage2" else (run,)):
      steps.append(_score(f"mlm_{scored}", layout, layout.run(scored), (
          "--pretraining_data", layout.shards(heldout[scored])),
          (layout.path("data", heldout[scored]),)))
  return steps


def _score(name, layout, model_dir, args, inputs=()):
  """`evaluate` of model_dir, its JSON kept in the step's directory."""
  return Step(name, python_module(
      "tfmodels.training.evaluate", "--model_dir", model_dir, *args,
      "--overwrite", "--output", os.path.join(layout.score(name),
                                              "scores.json")),
      layout.score(name), (model_dir,) + tuple(inputs))


def collect(layout, scale, student, command, models=tuple(MODELS)):
  """{"command", "host", "scale", "student_config", "pretraining", "rows"}."""
  from android_bench.device_info import host_facts
  from tfmodels.configs import load_config
  from tfmodels.summary import PAPER_FIGURES, count
  host = host_facts()
  paper = {f.metric: f.value for f in PAPER_FIGURES.get(student, [])}
  config_file = layout.path("configs", "student.json")
  params = (count(load_config(config_file))["params_encoder"]
            if os.path.exists(config_file) else None)
  pretraining = {}
  runs = ["stage1"] + [MODELS[m][1] for m in models
                       if m not in NOT_PRETRAINED]
  for run in runs:
    history = read_history(os.path.join(layout.run(run), "history.jsonl"))
    pretraining[run] = {
        "steps": history[-1]["step"] if history else None,
        "mlm_loss_first": history[0]["mlm_loss"] if history else None,
        "mlm_loss_last": history[-1]["mlm_loss"] if history else None,
        "heldout": read_json(os.path.join(layout.score(f"mlm_{run}"),
                                          "scores.json"))}
  majority = majority_accuracy(layout)
  rows = []
  for model in models:
    method = MODELS[model][0]
    own_config = os.path.join(layout.start(model), "config.json")
    test = read_json(os.path.join(layout.score(f"test_{model}"),
                                  "scores.json"))
    rows.append({
        "name": model, "method": method,
        "config": {"teacher": MINILM_LABEL, "carved": "carved"}.get(
            model, student),
        "encoder_params": (
            (count(load_config(own_config))["params_encoder"]
             if os.path.exists(own_config) else None)
            if model in NOT_PRETRAINED else params),
        "paper_params": None if model in NOT_PRETRAINED else paper.get(
            "params_encoder"),
        "dev": read_json(os.path.join(layout.finetuned(model),
                                      "eval_results.json")),
        "test": test,
        # On test: the model's, and always answering the train majority.
        "intent_accuracy": (test or {}).get("intent_accuracy"),
        "intent_majority_accuracy": majority["test"]})
  return {"command": command,
          "host": f"{host['model']}, {host['cores']} cores, {host['os']}",
          "scale": dataclasses.asdict(scale), "student_config": student,
          "teacher": MINILM_LABEL, "pretraining": pretraining, "rows": rows}


def majority_accuracy(layout):
  """{split: accuracy of always answering the train split's commonest
  intent} (None before the intent data is written)."""
  counts = read_json(os.path.join(layout.task_data(), "labels.json"))
  if not counts:
    return {split: None for split in SPLITS}
  train = counts["train"]
  label = max(train, key=train.get)
  return {split: counts[split].get(label, 0) / sum(counts[split].values())
          for split in SPLITS}


def markdown(results):
  """The task scores per model and split, then how pre-training went."""
  pct = lambda v: number(v, 1, "n/a", 100)
  s = results["scale"]
  lines = [f"`{results['command']}` on {results['host']}.", "",
           f"Stage I {s['stage_one_steps']} steps from {results['teacher']}, "
           f"stage II and NoKD {s['stage_two_steps']} steps each (batch "
           f"{s['batch_size']}, L = {s['max_seq_length']}, data/pretraining "
           f"{s['pretraining_text']}); intent + slot fine-tuning "
           f"{s['finetune_steps']} steps on data/brown_pos (POS tags = "
           "slots; intent = the tense of the first finite verb, "
           "`experiments.papers.tense_intent`). Student: "
           f"`{results['student_config']}` with the shipped student "
           "vocabulary.", ""]
  rows = []
  for r in results["rows"]:
    params = ("n/a" if r["encoder_params"] is None else
              f"{r['encoder_params'] / 1e6:.2f}M")
    if r["paper_params"]:
      params += f" ({r['paper_params'] / 1e6:.1f}M)"
    for split in SPLITS:
      m = r[split] or {}
      rows.append([f"{r['name']}: {r['method']}", params, split,
                   pct(m.get("intent_accuracy")), pct(m.get("slot_f1")),
                   pct(m.get("sentence_exact_match"))])
  lines += table(["model", "encoder params (paper)", "split", "intent acc",
                  "slot F1", "sentence exact match"], rows)
  majority = next((r["intent_majority_accuracy"] for r in results["rows"]
                   if r["intent_majority_accuracy"] is not None), None)
  if majority is not None:
    lines += ["", f"Intent on test against the majority class (always "
              f"answering train's commonest tense: {pct(majority)}%): " +
              ", ".join(f"{r['name']} {_margin(r)}" for r in results["rows"])]
  lines += ["", "Pre-training (masked-LM loss of the first and last step; "
            "held-out masked-LM accuracy, each label in its own "
            "vocabulary's softmax):", ""]
  for run, p in results["pretraining"].items():
    held = p["heldout"] or {}
    first, last = p["mlm_loss_first"], p["mlm_loss_last"]
    lines.append(
        f"- {run}: {p['steps'] or 0} steps, MLM loss "
        f"{'n/a' if first is None else f'{first:.2f}'} -> "
        f"{'n/a' if last is None else f'{last:.2f}'}, held-out MLM accuracy "
        f"{pct(held.get('mlm_accuracy'))}%")
  return "\n".join(lines) + "\n"


def _margin(row):
  """"+41.2 points" (intent accuracy over the majority class's), or n/a."""
  if row["intent_accuracy"] is None:
    return "n/a"
  return (f"{100 * (row['intent_accuracy'] - row['intent_majority_accuracy']):+.1f}"
          " points")


def run_experiment(options, out, results):
  """Runs the recipe into `out`, then stages the results in `results`
  (OutputFiles) and commits them."""
  scale = SCALES[options.scale]
  layout = Layout(out)
  models = tuple(m for m in MODELS if options.nokd or m != "nokd")
  configs = write_configs(layout, options.student)
  steps = build_steps(layout, scale, configs, models)

  def report(results):
    data = collect(layout, scale, options.student, options.command, models)
    table = markdown(data)
    skeleton.stage_results(results, RESULTS_NAME, data, table)
    return table

  skeleton.run_and_report(steps, options, results, report)


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  command = skeleton.command_line("experiments.papers.mixed_vocab_student")
  skeleton.run_command(argv, from_flags(Options, command=command),
                         run_experiment)


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
