"""A compact model worth shipping: MobileBERT distilled from the real teacher.

    python -m experiments.papers.distill_from_minilm --output_dir /tmp/minilm_kd

The teacher is all-MiniLM-L6-v2 (`load_teacher`), fine-tuned on the shipped
QA (data/wordnet_qa, L = 384) and spam sets until doubling its steps gains
less than half a point on a slice held out of train (`experiments.papers.plateau`;
the curves are in the results). The student `mobilebert_minilm`
is MobileBERT's shape scaled to its teacher: 6 layers (MiniLM's), 384-wide
feature maps and 12 heads (MiniLM's, so the paper's feature-map and
attention transfer apply unchanged), a 96-wide bottleneck (H / 4) with four
stacked 384-wide FFNs, NoNorm and relu, a 128-wide 3-gram embedding. It
takes 31% of MiniLM's encoder parameters and 28% of its FLOPs
(docs/experiment_notes.md).

  student   PKT from MiniLM on data/pretraining (its word table starts as
            MiniLM's at rank 128), then task-stage distillation from the
            fine-tuned MiniLM (eq. 14's intermediate losses + soft logits +
            the task loss)
  baseline  the same shape pre-trained from scratch (MLM + NSP) with the
            student's steps, fine-tuned with its steps, no teacher
  kronecker KroneckerBERT (`kronecker_minilm`) by its two-stage recipe
  carved    cut out of each fine-tuned teacher (`training.compress`):
            the best 6 of 12 heads and 512 of 1536 FFN neurons per layer,
            the word table at rank 128 (37% of MiniLM's encoder
            parameters), LayerNorm / gelu swapped for NoNorm / relu
            (fitted, then recovered by feature-map distillation), then
            task-stage KD (soft targets)
  carved_low_rank
            cut out by activation-aware SVD of every block kernel (rank 96
            in attention, 128 in the FFN) and the word table at rank 128,
            then task-stage KD

Every QA model is converted to int8 at L = 384 (`convert_tflite`, scored on
the dev set) and the int8 files are timed together on the host (LiteRT, 1
and 2 threads). Each plain word table is probed before and after QA
fine-tuning (`lexical_probe`: how much of the QA set it answers alone).
Results: RESULTS_DIR/distill_from_minilm.json (schema in
`collect`), .md and .png (quality, size, latency, and every run's training
curves). Every step is a command of this project; a re-run skips finished
steps. `--scale tiny` runs the chain in minutes for the tests (numbers
meaningless). `--models carved,carved_low_rank` runs only those rows (and
the teacher they are carved from); the other rows are carried over from
the results already in --results_dir, each marked with the command that
measured it.
"""

import dataclasses
import os
import platform
import sys

from absl import app

from experiments.common import skeleton
from experiments.common.result_files import (conversion_summary, latency_rows,
                                      read_json, read_scalars)
from experiments.common.paths import VOCAB, data_sources, task_library_flags
from experiments.common.pipeline import Step, python_module
from experiments.common.real_teacher import (MINILM, import_step,
                                     tiny_teacher_step)
from experiments.ship.student_recipe import (RECIPE, carve_command,
                                        student_steps)
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data.squad import MAX_SEQ_LENGTH
from tfmodels.markdown import table
from tfmodels.sigterm import exit_on_sigterm

RESULTS_NAME = "distill_from_minilm"


@dataclasses.dataclass(frozen=True)
class Scale:
  pretraining_max_seq_length: int  # distillation shards
  qa_max_seq_length: int  # QA training (WordNet QA windows: <= 85 + question)
  qa_export_max_seq_length: int  # the converted QA model's L, timed, scored
  spam_max_seq_length: int
  dupe_factor: int
  batch_size: int  # distillation and pre-training
  finetune_batch_size: int
  distill_steps: int  # student PKT and the baseline's pre-training
  kronecker_steps: int
  recover_steps: int  # carved students' feature-map recovery
  finetune_steps: dict  # model -> (QA steps, spam steps)
  calibration_samples: int
  bench_runs: int
  slices: dict = None  # experiments.demo.data sizes; None: the shipped data as it is
  teacher_layers: int = 0  # > 0: only MiniLM's first N layers (tiny)
  bench_min_secs: float = 1.0  # least seconds a file is timed
  distill_lr: float = 1e-3
  kronecker_lr: float = 1e-4
  teacher_lr: float = 1e-4  # MiniLM and its KroneckerBERT
  student_lr: float = 5e-4
  calibration_examples: int = 512  # carving's importance scores
  student_vocab_size: int = 8000  # the small-vocabulary student's learner
  # Single characters it keeps: the spam e-mails' stray scripts otherwise
  # take ~1,400 pieces the teacher cannot spell (docs/experiment_notes.md,
  # the small-vocabulary student).
  max_unique_chars: int = 200
  align_steps: int = 300  # its new rows' mixed-vocabulary alignment
  # ... with the layers trained too (docs/experiment_notes.md, the
  # small-vocabulary student: rows alone cannot carry the words the small
  # vocabulary splits).
  align_layers_learning_rate: float = 1e-4
  app_questions: int = 20  # asked of its QA file through the Task Library
  # The teacher's fine-tuning runs to its plateau (experiments.papers.plateau):
  # its first point's steps are finetune_steps["teacher"], doubled until
  # a doubling gains less than plateau_gain points on the examples held
  # out of train (QA articles, spam rows), never past plateau_max_steps.
  plateau_heldout: tuple = (800, 400)
  plateau_gain: float = 0.5
  plateau_max_steps: int = 6400
  # (QA, spam) > 0: the teacher is fine-tuned once at these steps (a
  # plateau an earlier run's curve found) instead of the whole curve.
  teacher_steps: tuple = (0, 0)
  # The students of PLATEAU_ROWS train by the same rule within one run
  # (finetune --eval_split heldout): scored from the teacher's first
  # point's steps on, on their own slice of the same size, capped at
  # student_max_steps (QA, spam) and student_max_minutes a task.
  student_max_steps: tuple = (6400, 3200)
  student_max_minutes: float = 40.0


# The carved row's student recipe measured lever by lever against the
# converged teacher, on the same carve: trained to its plateau; + layer-wise
# distillation (every layer's hidden states, each kept head's attention
# against the head it was carved from); + teacher-labelled augmentation;
# and that recipe with the teacher's LayerNorm and gelu kept (the NoNorm /
# relu swap's own cost). Their changes to the student recipe: ROW_RECIPES.
PLATEAU_ROWS = ("carved_plateau", "carved_layerwise", "carved_augmented",
                "carved_layernorm", "carved_blended")

SCALES = {
    # Measured on the 2-core host with --jobs 2, two steps side by side:
    # MiniLM fine-tuning ~2 s a step (batch 16, L = 128); the student's
    # PKT layer stages 0.7-2.6 s a step, its PD stage (MiniLM forward +
    # the whole student) ~3.2 s; scoring MiniLM's Keras QA model on the
    # dev set at L = 384 (convert_tflite) over ten minutes.
    "full": Scale(128, 128, MAX_SEQ_LENGTH, 128, dupe_factor=2,
                  batch_size=32, finetune_batch_size=16, distill_steps=600,
                  kronecker_steps=150, recover_steps=200,
                  finetune_steps={"teacher": (200, 100),
                                  "student": (300, 300),
                                  "baseline": (300, 300),
                                  "kronecker": (100, 60),
                                  "carved": (400, 400),
                                  "carved_low_rank": (200, 50),
                                  "carved_small_vocab": (400, 400)},
                  calibration_samples=100, bench_runs=20),
    "tiny": Scale(32, 64, 64, 32, dupe_factor=1, batch_size=2,
                  finetune_batch_size=2, distill_steps=14, kronecker_steps=2,
                  recover_steps=2,
                  finetune_steps={"teacher": (2, 2), "student": (2, 2),
                                  "baseline": (2, 2), "kronecker": (2, 2),
                                  "carved": (2, 2),
                                  "carved_low_rank": (2, 2),
                                  "carved_small_vocab": (2, 2)},
                  calibration_samples=2, bench_runs=2,
                  student_max_steps=(4, 4), student_max_minutes=5.0,
                  calibration_examples=8, plateau_heldout=(4, 4),
                  student_vocab_size=300, align_steps=2, app_questions=2,
                  plateau_max_steps=4, teacher_layers=2, bench_min_secs=0,
                  slices={"pretraining_documents": 12, "spam_rows": (16, 8),
                          "qa_questions": (16, 6)}),
}

# name -> (role, method, config, how its encoder is made)
MODELS = {
    "teacher": ("teacher", "all-MiniLM-L6-v2, fine-tuned", None, "minilm"),
    "student": ("student", "PKT from MiniLM + task-stage KD (soft "
                "targets)", "mobilebert_minilm", "distill"),
    "baseline": ("baseline", "same shape, MLM + NSP from scratch, "
                 "fine-tuned", "mobilebert_minilm", "pretrain"),
    "kronecker": ("student", "KroneckerBERT: Kronecker KD from MiniLM + "
                  "task-stage KD", "kronecker_minilm", "kronecker"),
    "carved": ("student", "carved from the fine-tuned MiniLM: 6 of 12 heads,"
               " 512 of 1536 FFN neurons, word table at rank 128; NoNorm + "
               "relu, recovered; task-stage KD (soft targets)",
               None, "carve"),
    "carved_low_rank": ("student", "carved from the fine-tuned MiniLM: "
                        "activation-aware SVD of every kernel (rank 96 "
                        "attention, 128 FFN), word table at rank 128; "
                        "task-stage KD (soft targets)", None, "carve"),
    "carved_small_vocab": (
        "student", "carved from the fine-tuned MiniLM: 6 of 12 heads, 384 "
        "of 1536 FFN neurons, word table at rank 96; NoNorm + relu, "
        "recovered; then moved to its own vocabulary "
        "(learned from the QA, spam and pre-training text; each piece the "
        "teacher has keeps its vector, each new one starts as the mean of "
        "the teacher pieces spelling it, then mixed-vocabulary alignment); "
        "task-stage KD from the teacher reading its own vocabulary (soft "
        "targets carried by characters)",
        None, "carve"),
    "carved_plateau": ("student", "the carved row's carve; task-stage KD "
                       "(soft targets) trained until a doubling of its "
                       "steps gains less than half a point on a slice held "
                       "out of train", None, "carve"),
    "carved_layerwise": ("student", "the carved row's carve, trained to its "
                         "plateau; task-stage KD of every layer's hidden "
                         "states and each kept head's attention (from the "
                         "head it was carved from) besides the soft targets",
                         None, "carve"),
    "carved_augmented": ("student", "as carved_layerwise, on train plus 2 "
                         "copies with words replaced by their neighbours in "
                         "the teacher's word table (TinyBERT's "
                         "augmentation), labelled by the teacher",
                         None, "carve"),
    "carved_layernorm": ("student", "as carved_layerwise with the teacher's "
                         "LayerNorm and gelu kept (no NoNorm / relu swap, "
                         "no recovery)", None, "carve"),
    "carved_blended": ("student", "as carved_layerwise with the NoNorm / "
                       "relu swap made gently by the student's run instead "
                       "of at the carve: NoNorms fitted, then each swapped "
                       "op's output moved from the original op's to its own "
                       "over the first 100 steps (no recovery)",
                       None, "carve"),
}
# compress's flags per carved model: what it keeps, and the on-device form.
# This experiment's own, not the demo's student, so that its committed
# results stay what these flags measured whatever the demo ships. `carved`
# is the split chosen with this recipe (docs/design.md, "Choosing the carved
# split"): 37% of MiniLM's encoder parameters.
CARVES = {
    "carved": ("--heads", 6, "--intermediate_size", 512, "--low_rank",
               "word_embeddings=128"),
    "carved_low_rank": (
        "--low_rank", "word_embeddings=128,query=96,key=96,value=96,"
        "attention_output=96,intermediate=128,output=128"),
}
# The small-vocabulary student is carved a little narrower than `carved`
# to aim its int8 QA file at 5 MB (4.70M encoder parameters with the
# 7,878-piece table; `carved`'s split would be 5.55M;
# docs/experiment_notes.md, "What fits 5 MB": 5.57 MB measured, 0.79 MB of
# it the float position table),
# then moved to the learned vocabulary (compress
# --vocab_file, the last thing compress does). The FFN width is written as
# the flag's text: the number 384 is kept for the QA length (test_qa_length).
CARVES.update(dict.fromkeys(PLATEAU_ROWS, CARVES["carved"]))
CARVES["carved_small_vocab"] = (
    "--heads", 6, "--intermediate_size", "384", "--low_rank",
    "word_embeddings=96")
SMALL_VOCAB = ("carved_small_vocab",)
# The blended row's swap: over the steps to the spam curve's first point
# (no scored point may be a blend; the QA curve's first is at 200).
BLEND_STEPS = 100
# What a carved row changes of the student recipe (student_recipe.py):
# the low-rank row keeps LayerNorm and gelu, its factorization measured
# alone; PLATEAU_ROWS take their levers away or add them one at a time
# (carved_layerwise is the recipe itself).
ROW_RECIPES = {"carved_low_rank": {"substitute": ""},
               "carved_plateau": {"task_kd": "prediction"},
               "carved_augmented": {"augment_copies": 2},
               "carved_layernorm": {"substitute": ""},
               "carved_blended": {"blend_steps": BLEND_STEPS}}
# Models whose encoder is a run of its own (distill / pretrain) on shards.
OWN_ENCODER = ("student", "baseline", "kronecker")
# Where each model's weights start: the teacher's or random layers.
INIT = {"teacher": "teacher", "student": "random", "baseline": "random",
        "kronecker": "teacher", "carved": "teacher",
        "carved_low_rank": "teacher", "carved_small_vocab": "teacher",
        **dict.fromkeys(PLATEAU_ROWS, "teacher")}
TASKS = (("qa", "squad", "wordnet_qa"), ("spam", "spam", "spam"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options):
  """The experiment's flags: the experiments' common ones and --models."""
  output_dir: str | None = skeleton.output_dir_option(
      "Runs, conversions and timings.")
  results_dir: str | None = skeleton.results_dir_option(
      f"{RESULTS_NAME}.{{json,md,png}}")
  scale: str = skeleton.scale_option(SCALES)
  jobs: int = skeleton.jobs_option(1)
  force: tuple = skeleton.force_option()
  models: tuple = option((), "Rows to run (the teacher always runs); the "
                         "others are carried over from --results_dir. "
                         "Empty: all.")
  teacher_qa_steps: int = option(
      0, "Fine-tune the QA teacher once at these steps (a plateau an "
      "earlier run's curve found; the curve takes hours on 2 cores) instead of "
      "finding its plateau again. 0: find it.")
  teacher_spam_steps: int = option(0, "The same for the spam teacher.")


define_flags(Options)


class Layout(skeleton.Layout):
  """Where each step writes under the output directory."""

  def carved(self, model, task):
    """The compress step's directory; the model directory is inside."""
    return self.path("runs", f"{model}_{task}")

  def start(self, model, task):
    """The model directory a task's fine-tuning starts from."""
    if MODELS[model][3] == "carve":
      return os.path.join(self.carved(model, task), "model")
    return self.run(model)

  def tflite(self, model):
    return self.path("tflite", model)

  def probe(self, model, stage):
    """`lexical_probe` of the model's word table before (encoder) or
    after (qa) QA fine-tuning."""
    return self.path("probe", f"{model}_{stage}", "probe.json")

  def student_vocab(self):
    """The small-vocabulary student's vocab.txt (`build_student_vocab`)."""
    return self.path("vocab", "student_vocab.txt")

  def app(self, model):
    """`qa_app_check`'s output for the model's int8 QA file."""
    return self.path("app", model)

  def tflite_file(self, model, mode="int8"):
    return os.path.join(self.tflite(model), f"{model}_qa_{mode}.tflite")


@dataclasses.dataclass(frozen=True)
class _Recipe:
  """What every step of a run is built from."""
  layout: Layout
  scale: Scale
  task_dirs: dict  # data/ name -> its directory (shipped or sliced)
  data_inputs: tuple  # the slice step's output (none: the shipped data)


def build_steps(layout, scale, models=tuple(MODELS)):
  """The recipe as pipeline steps, for `models` (the teacher always)."""
  steps, texts, task_dirs = data_sources(scale.slices,
                                         layout.path("data", "slices"))
  recipe = _Recipe(layout, scale, task_dirs, tuple(s.output for s in steps))
  if set(OWN_ENCODER) & set(models):
    steps += _shard_steps(recipe, texts)
  cut = tiny_teacher_step(scale.teacher_layers,
                          layout.path("data", "tiny_teacher"))
  steps += [cut] if cut else []
  steps.append(import_step(layout.run("teacher"), source=cut))
  if set(SMALL_VOCAB) & set(models):
    steps.append(_vocab_step(recipe, texts))
  # Model by model, so the teacher's task models (the students' task-stage
  # teachers) come first.
  for model in models:
    if model in OWN_ENCODER:
      steps.append(_encoder_step(recipe, model))
    for task, task_name, data_dir in TASKS:
      if model in CARVES:
        steps.append(_carve_step(recipe, model, task, data_dir))
      steps += _finetune_steps(recipe, model, task, task_name, data_dir)
    steps.append(_convert_step(recipe, model))
    if model in SMALL_VOCAB:
      steps.append(_app_step(recipe, model))
    # Kronecker and low-rank factors hold no plain word table.
    if model in ("teacher", "student", "baseline"):
      steps += _probe_steps(recipe, model)
  steps.append(_bench_step(recipe, models))
  return steps


def _shard_steps(recipe, texts):
  """Pre-training shards of the train and held-out text."""
  layout, scale = recipe.layout, recipe.scale
  steps = []
  for split, seed in (("train", 12345), ("heldout", 7)):
    steps.append(Step(f"data_{split}", python_module(
        "tfmodels.data.create_pretraining_data", "--input_file",
        texts[split], "--vocab_file", VOCAB, "--output_dir",
        layout.shards(split), "--max_seq_length",
        scale.pretraining_max_seq_length, "--dupe_factor",
        scale.dupe_factor if split == "train" else 1, "--random_seed", seed,
        "--overwrite"), layout.path("data", split), recipe.data_inputs))
  return steps


def _vocab_step(recipe, texts):
  """The small-vocabulary student's vocabulary, learned from the tasks'
  training text and the pre-training text (`texts`: its files)."""
  layout, scale = recipe.layout, recipe.scale
  gz = ".gz" if scale.slices is None else ""  # slices are written plain
  corpus = (os.path.join(recipe.task_dirs["wordnet_qa"], "train.json" + gz),
            os.path.join(recipe.task_dirs["spam"], "train.tsv" + gz),
            texts["train"])
  return Step("student_vocab", python_module(
      "tfmodels.build_student_vocab", "--corpus", ",".join(corpus),
      "--vocab_size", scale.student_vocab_size, "--max_unique_chars",
      scale.max_unique_chars, "--output",
      layout.student_vocab(), "--teacher_vocab", VOCAB, "--overwrite"),
      os.path.dirname(layout.student_vocab()), recipe.data_inputs)


def _encoder_step(recipe, model):
  """A model's own encoder, trained on the shards: PKT from MiniLM (the
  student), MLM + NSP from scratch (the baseline), or KroneckerBERT's
  Kronecker distillation from MiniLM."""
  layout, scale = recipe.layout, recipe.scale
  config = MODELS[model][2]
  if model == "baseline":
    trainer = ("tfmodels.training.pretrain", "--config", config)
  else:
    trainer = ("tfmodels.training.distill", "--teacher", MINILM,
               "--student_config", config, "--strategy",
               "kronecker" if model == "kronecker" else "pkt")
  steps, lr = ((scale.kronecker_steps, scale.kronecker_lr)
               if model == "kronecker" else
               (scale.distill_steps, scale.distill_lr))
  return Step(model, python_module(
      *trainer, "--model_dir", layout.run(model), "--train_steps", steps,
      "--learning_rate", lr, "--warmup_steps", steps // 10,
      "--train_data", layout.shards("train"), "--batch_size",
      scale.batch_size, "--checkpoint_every", 200, "--keep_checkpoints", 1,
      "--log_every", 10), layout.run(model), (layout.path("data", "train"),))


def student_recipe(scale, model, task):
  """A carved row's student recipe for a task: the scale's sizes, the
  plateau rule of PLATEAU_ROWS and the row's changes (ROW_RECIPES) over
  the student recipe's defaults."""
  spam = task == "spam"
  plateau = {} if model not in PLATEAU_ROWS else dict(
      heldout=scale.plateau_heldout[spam], min_gain=scale.plateau_gain,
      eval_first_steps=scale.finetune_steps["teacher"][spam],
      steps=scale.student_max_steps[spam],
      max_minutes=scale.student_max_minutes)
  fields = dict(recover_steps=scale.recover_steps,
                calibration_examples=scale.calibration_examples,
                batch_size=scale.finetune_batch_size)
  if model not in PLATEAU_ROWS:  # the earlier recipe: fixed steps, logits
    fields.update(steps=scale.finetune_steps[model][spam], heldout=0,
                  task_kd="prediction")
  row = dataclasses.replace(RECIPE, **{**fields, **plateau,
                                       **ROW_RECIPES.get(model, {})})
  # A blend ends by the curve's first point (a small scale's is earlier).
  return dataclasses.replace(row, blend_steps=min(row.blend_steps,
                                                  row.eval_first_steps))


def _carve_step(recipe, model, task, data_dir):
  """A carved model cut out of the task's fine-tuned teacher by compress
  (CARVES: what is cut; the row's student recipe: how)."""
  layout, scale = recipe.layout, recipe.scale
  teacher_run = layout.finetuned("teacher", task)
  return Step(f"carve_{model}_{task}", carve_command(
      student_recipe(scale, model, task), teacher_run,
      recipe.task_dirs[data_dir], layout.start(model, task), CARVES[model],
      "--overwrite", *_vocab_flags(layout, scale, model)),
      layout.carved(model, task), (teacher_run,) + recipe.data_inputs +
      _vocab_inputs(layout, model), clean=True)


def _vocab_flags(layout, scale, model):
  """--vocab_file and the alignment flags of a model with its own vocabulary,
  else nothing."""
  return (("--vocab_file", layout.student_vocab(), "--align_steps",
           scale.align_steps, "--align_layers_learning_rate",
           scale.align_layers_learning_rate) if model in SMALL_VOCAB else ())


def _vocab_inputs(layout, model):
  return ((os.path.dirname(layout.student_vocab()),) if model in SMALL_VOCAB
          else ())


def _plateau_step(recipe, task, task_name, data_dir):
  """The teacher fine-tuned on a task until doubling its steps gains less
  than the scale's plateau_gain on a slice held out of train
  (experiments.papers.plateau); its model directory holds the last run."""
  layout, scale = recipe.layout, recipe.scale
  output = layout.finetuned("teacher", task)
  spam = task == "spam"
  first, last = scale.finetune_steps["teacher"][spam], scale.plateau_max_steps
  if scale.teacher_steps[spam]:  # the plateau is known: one run
    first = last = scale.teacher_steps[spam]
  return Step(f"teacher_{task}", python_module(
      "experiments.papers.plateau", "--task", task_name, "--data_dir",
      recipe.task_dirs[data_dir], "--init_dir", layout.run("teacher"),
      "--model_dir", output, "--vocab_file", VOCAB, "--max_seq_length",
      getattr(scale, f"{task}_max_seq_length"), "--batch_size",
      scale.finetune_batch_size, "--learning_rate", scale.teacher_lr,
      "--first_steps", first, "--heldout", scale.plateau_heldout[spam],
      "--min_gain", scale.plateau_gain, "--max_steps", last), output,
      (layout.run("teacher"),) + recipe.data_inputs, clean=True)


def _finetune_steps(recipe, model, task, task_name, data_dir):
  """A model fine-tuned on a task, from where it starts (`Layout.start`);
  every model but the teacher and the baseline learns from the fine-tuned
  teacher of the same task too."""
  if model == "teacher":
    return [_plateau_step(recipe, task, task_name, data_dir)]
  layout, scale = recipe.layout, recipe.scale
  # KroneckerBERT's task stage is its eq. 14 (every layer's outputs
  # and attention scores too); the MobileBERT student learns from the
  # teacher's soft targets: MSE on raw attention scores, which its
  # PKT stage matched only up to softmax, swamped the task loss.
  teacher = (() if model in ("teacher", "baseline") else
             (layout.finetuned("teacher", task),))
  kd = () if not teacher else (
      "--teacher_dir", *teacher, "--task_kd",
      "all" if model == "kronecker" else "prediction")
  output = layout.finetuned(model, task)
  start = layout.start(model, task)
  vocab = layout.student_vocab() if model in SMALL_VOCAB else VOCAB
  length = getattr(scale, f"{task}_max_seq_length")
  every = ("--checkpoint_every", 100, "--keep_checkpoints", 1, "--log_every",
           10)
  if model in CARVES:
    return student_steps(
        student_recipe(scale, model, task),
        (f"heldout_{model}_{task}", f"{model}_{task}"), task_name,
        recipe.task_dirs[data_dir], layout.path("data", "heldout",
                                                f"{model}_{task}"),
        start, output, vocab, length, *teacher,
        (os.path.dirname(start),) + teacher + recipe.data_inputs, every,
        teacher_vocab=VOCAB)
  steps = scale.finetune_steps[model][task == "spam"]
  lr = (scale.teacher_lr if model in ("teacher", "kronecker") else
        scale.student_lr)
  return [Step(f"{model}_{task}", python_module(
      "tfmodels.training.finetune", "--task", task_name, "--data_dir",
      recipe.task_dirs[data_dir], "--init_dir", start,
      "--model_dir", output, "--vocab_file", vocab, "--max_seq_length",
      length, "--train_steps", steps, "--batch_size",
      scale.finetune_batch_size, "--learning_rate", lr, *every, *kd),
      output, (start,) + teacher + recipe.data_inputs, clean=True)]


def _convert_step(recipe, model):
  """The model's QA model in int8, scored on the dev set."""
  layout, scale = recipe.layout, recipe.scale
  return Step(f"convert_{model}", python_module(
      "converters.convert_tflite", "--model_dir",
      layout.finetuned(model, "qa"), "--data_dir",
      recipe.task_dirs["wordnet_qa"], "--output_dir",
      layout.tflite(model), "--name", f"{model}_qa", "--max_seq_length",
      scale.qa_export_max_seq_length, "--modes", "int8",
      "--num_calibration_samples",
      scale.calibration_samples, "--overwrite"),
      layout.tflite(model),
      (layout.finetuned(model, "qa"),) + recipe.data_inputs)


def _app_step(recipe, model):
  """The int8 QA file asked as an app asks it: the Python twin and, when
  its venv exists, the Task Library's BertQuestionAnswerer, both with the
  vocabulary the file carries (the student's own). The library always
  feeds [1, MAX_SEQ_LENGTH], so a file exported shorter (the tiny scale)
  is asked through the twin alone."""
  layout, scale = recipe.layout, recipe.scale
  library = (task_library_flags()
             if scale.qa_export_max_seq_length == MAX_SEQ_LENGTH else ())
  return Step(f"app_{model}", python_module(
      "experiments.apps.qa_app_check", "--model", layout.tflite_file(model),
      "--qa_dir", recipe.task_dirs["wordnet_qa"], "--questions",
      scale.app_questions, "--dev_questions", 0, "--output_dir",
      layout.app(model), *library), layout.app(model),
      (layout.tflite(model),) + recipe.data_inputs)


def _probe_steps(recipe, model):
  """`lexical_probe` of the model's word table before (its encoder) and
  after QA fine-tuning."""
  layout = recipe.layout
  steps = []
  for stage, model_dir in (("encoder", layout.run(model)),
                           ("qa", layout.finetuned(model, "qa"))):
    output = layout.probe(model, stage)
    steps.append(Step(f"probe_{model}_{stage}", python_module(
        "experiments.papers.lexical_probe", "--model_dir", model_dir,
        "--data_dir", recipe.task_dirs["wordnet_qa"], "--output", output),
        os.path.dirname(output), (model_dir,) + recipe.data_inputs))
  return steps


def _bench_step(recipe, models):
  """Every model's int8 QA file timed together on the host, alone."""
  layout, scale = recipe.layout, recipe.scale
  return Step("bench", python_module(
      "android_bench", "run", "--target", "host", "--threads", "1,2",
      "--num_runs", scale.bench_runs, "--min_secs", scale.bench_min_secs,
      "--benchmark_args", f"--warmup_min_secs={scale.bench_min_secs / 2:g}",
      "--results_dir",
      layout.path("bench", "host"), "--name", "host", "--noplot",
      *[layout.tflite_file(m) for m in models]), layout.path("bench", "host"),
      tuple(layout.tflite(m) for m in models), alone=True)


def _cost(layout, scale, model):
  """(training steps, kd steps, minutes) of a model's QA and spam chain:
  steps of its own encoder run, carving's recovery and its fine-tunings;
  minutes from the steps' markers (None if one is missing)."""
  from experiments.common.result_files import step_seconds
  if model == "teacher":  # every point of its plateau curves
    qa, spam = (sum((_plateau(layout, task) or {}).get("steps") or [0])
                for task, _, _ in TASKS)
  elif model in PLATEAU_ROWS:  # where each run ended
    qa, spam = ((_student_curve(layout, model, task) or {}).get("steps")
                for task, _, _ in TASKS)
    if qa is None or spam is None:
      return None, None, None
  else:
    qa, spam = scale.finetune_steps[model]
  encoder = {"student": scale.distill_steps, "baseline": scale.distill_steps,
             "kronecker": scale.kronecker_steps}.get(model, 0)
  recover = (scale.recover_steps if model in CARVES and student_recipe(
      scale, model, "qa").recovers() else 0)
  kd = 0 if model in ("teacher", "baseline") else (
      encoder + 2 * recover + qa + spam)
  directories = [layout.finetuned(model, t) for t, _, _ in TASKS]
  if model in OWN_ENCODER:
    directories.append(layout.run(model))
  if model in CARVES:
    directories += [layout.carved(model, t) for t, _, _ in TASKS]
  seconds = [step_seconds(d) for d in directories]
  minutes = (None if None in seconds else round(sum(seconds) / 60, 1))
  return encoder + 2 * recover + qa + spam, kd, minutes


def _shipped_vocab_size():
  with open(VOCAB, encoding="utf-8") as f:
    return sum(1 for _ in f)


def _plateau(layout, task):
  """The teacher's plateau.json for a task (experiments.papers.plateau), or None."""
  from experiments.papers.plateau import PLATEAU
  return read_json(os.path.join(layout.finetuned("teacher", task), PLATEAU))


def collect(layout, command, scale, models=tuple(MODELS), previous=None):
  """{"command", "host", "rows"}: one row per model (the issue's schema).

  Rows of models not in `models` come from `previous` (the results this
  run replaces), each with the command that measured it (`measured_by`).
  """
  from tfmodels.configs import load_config
  from tfmodels.summary import count, word_table_params
  _, timings = latency_rows(layout.out)
  carried = {r["name"]: r for r in (previous or {}).get("rows", [])}
  rows = []
  for model, (role, method, _, _) in MODELS.items():
    if model not in models:
      if model in carried:
        predates = {}  # the fields a row predates follow from the recipe
        if "norm" not in carried[model]:
          config = load_config(MODELS[model][2])
          steps, kd_steps, _ = _cost(layout, scale, model)
          predates = {
              "init": INIT[model], "norm": config.normalization_type,
              "activation": config.hidden_act, "kd_steps": kd_steps,
              "train_steps": steps, "minutes": None, "carving": None}
        named = MODELS[model][2]  # a carved row's config is its carving's
        rows.append({
            # Rows from before the fields read the shipped vocabulary.
            "vocab_size": _shipped_vocab_size(),
            "table_params": named and word_table_params(load_config(named)),
            "task_library": None, "qa_f1_float_int8_length": None,
            **predates, **carried[model], "method": method,
            "measured_by": carried[model].get("measured_by",
                                              previous["command"]),
            # Its speed and scores compare with the teacher of the run
            # that measured it.
            "teacher_int8_ms": carried[model].get(
                "teacher_int8_ms", carried["teacher"]["int8_ms"]),
            **{f"teacher_{k}": carried[model].get(
                f"teacher_{k}", carried["teacher"][k])
               for k in ("qa_f1", "spam_acc")}})
      continue
    start = layout.start(model, "qa")
    config_file = os.path.join(start if model in CARVES else
                               layout.run(model), "config.json")
    qa = read_json(os.path.join(layout.finetuned(model, "qa"),
                                "eval_results.json")) or {}
    spam = read_json(os.path.join(layout.finetuned(model, "spam"),
                                  "eval_results.json")) or {}
    report = read_json(os.path.join(layout.tflite(model),
                                    f"{model}_qa_report.json"))
    int8 = (conversion_summary(report)["modes"].get("int8") or {}) if (
        report) else {}
    params = config = None
    if os.path.exists(config_file):
      config = load_config(config_file)
      params = count(config)["params_encoder"]
    steps, kd_steps, minutes = _cost(layout, scale, model)
    rows.append({
        "name": model, "role": role, "method": method,
        "encoder_params": params, "qa_f1": qa.get("f1"),
        "qa_em": qa.get("exact_match"),
        "spam_acc": None if "accuracy" not in spam else 100 * spam["accuracy"],
        # The float model scored as the int8 file is (convert_tflite's
        # Keras metric: its length, its dev windows); qa_f1 is fine-
        # tuning's own score at the training length.
        "qa_f1_float_int8_length": report and conversion_summary(report)[
            "keras_metric"],
        "qa_f1_int8": int8.get("metric"),
        "int8_size_mb": int8.get("size_mb"),
        "seq_length": report and report.get("seq_length"),
        "int8_ms": {str(t["threads"]): t["latency_ms"] for t in timings
                    if t["model"] == f"{model}_qa" and t["mode"] == "int8"},
        "word_table_em": {stage: (read_json(layout.probe(model, stage))
                                  or {}).get("exact_match")
                          for stage in ("encoder", "qa")},
        "init": INIT[model],
        "norm": config and config.normalization_type,
        "activation": config and config.hidden_act,
        "kd_steps": kd_steps, "train_steps": steps, "minutes": minutes,
        "carving": _carving(layout, model),
        "vocab_size": config and config.vocab_size,
        "table_params": config and word_table_params(config),
        "task_library": _task_library(layout, model),
        **({"plateau": {task: _plateau(layout, task) for task, _, _ in TASKS}}
           if model == "teacher" else {}),
        **({"plateau": {task: _student_curve(layout, model, task)
                        for task, _, _ in TASKS},
            "recipe": {task: student_recipe(scale, model, task).record()
                       for task, _, _ in TASKS}}
           if model in PLATEAU_ROWS else {})})
  return {"command": command, "host": _host(), "rows": rows}


def _student_curve(layout, model, task):
  """A row's held-out curve (finetune's plateau.json: points, the steps it
  ended at and why), None before the run."""
  from tfmodels.training.stop_rule import PLATEAU
  return read_json(os.path.join(layout.finetuned(model, task), PLATEAU))


def _task_library(layout, model):
  """How many of the app questions BertQuestionAnswerer answered as the
  twin did from the int8 QA file (None: not asked)."""
  answers = read_json(os.path.join(layout.app(model), "answers.json"))
  library = (answers or {}).get("task_library")
  return library and {"agree": library["agree"],
                      "questions": len(answers["answers"]),
                      "length": library["length"]}


def _carving(layout, model):
  """What compress kept and measured for the QA model (None if not carved)."""
  if model not in CARVES:
    return None
  facts = read_json(os.path.join(layout.start(model, "qa"),
                                 "carving.json")) or {}
  keep = ("heads", "intermediate_size", "low_rank_ranks", "params_share",
          "word_table_error", "substitution", "recovery", "vocabulary")
  return {k: facts.get(k) for k in keep}


def _host():
  cpus = os.cpu_count()
  try:
    with open("/proc/cpuinfo") as f:
      name = next((l.split(":", 1)[1].strip() for l in f
                   if l.startswith("model name")), platform.processor())
  except OSError:
    name = platform.processor()
  return f"{name}, {cpus} cores, {platform.system()} {platform.release()}"


def progress(layout):
  """How far each run's losses got, read off its curves: one line a run.

  A run's objective is its last stage's (PKT's layer stages each have
  their own); the change between the last two fifths of the logged steps
  says whether it had flattened.
  Fine-tuning is judged by the labels' cross-entropy alone (`task`), the
  part every model shares.
  """
  from experiments.common.result_files import read_history
  lines = []
  for model in MODELS:
    runs = [("QA fine-tuning", layout.finetuned(model, "qa"), "task"),
            ("spam fine-tuning", layout.finetuned(model, "spam"), "task")]
    if model != "teacher":
      runs.insert(0, ("pre-training" if model == "baseline" else
                      "distillation", layout.run(model), "loss"))
    for label, directory, tag in runs:
      scalars = read_scalars(os.path.join(directory, "summaries"))
      curve = scalars.get(tag) or scalars.get("loss")
      if not curve:
        continue
      history = read_history(os.path.join(directory, "history.jsonl"))
      last = history[-1].get("stage") if history else None
      if last:
        start = next(r["step"] for r in history if r.get("stage") == last)
        curve = [(step, v) for step, v in curve if step >= start]
        label += f" (its last stage, {last})"
      values = [v for _, v in curve]
      fifth = max(1, len(values) // 5)
      before = values[-2 * fifth:-fifth] or values[:1]
      head = sum(before) / len(before)
      tail = sum(values[-fifth:]) / fifth
      change = 100 * (tail - head) / head
      lines.append(
          f"{model}, {label}, steps {curve[0][0]}-{curve[-1][0]}: "
          f"{'loss' if tag == 'loss' else 'task loss'} {values[0]:.3g} -> "
          f"{tail:.3g} (mean of the last fifth of the logged steps, "
          f"{'down' if change < 0 else 'up'} {abs(change):.0f}% from the "
          "fifth before)")
  return lines


def markdown(results, scale, curves=()):
  """The results as a table with the targets' ratios, and how far each
  run's losses got (`progress`)."""
  fmt = lambda v, f="{:.1f}": "n/a" if v is None else f.format(v)
  rows = {r["name"]: r for r in results["rows"]}
  teacher = rows["teacher"]
  steps = dict(scale.finetune_steps)
  steps["teacher"] = tuple(
      f"{(p or {}).get('chosen_steps', 'n/a')} (plateau)"
      for p in (teacher.get("plateau") or {}).values()) or steps["teacher"]
  lines = [f"`{results['command']}` on {results['host']}.", "",
           f"Distillation and the baseline's pre-training "
           f"{scale.distill_steps} steps, KroneckerBERT's "
           f"{scale.kronecker_steps} (batch {scale.batch_size}, L = "
           f"{scale.pretraining_max_seq_length}); fine-tuning steps (QA, "
           "spam) " + ", ".join(f"{m} {q}, {p}" for m, (q, p) in
                       steps.items()) +
           f" (batch {scale.finetune_batch_size}, QA at L = "
           f"{scale.qa_max_seq_length}); int8 QA models exported, scored and "
           "timed (host LiteRT) at "
           f"[1, {scale.qa_export_max_seq_length}].", "",
           *table(["model", "role", "init", "norm, activation",
                   "encoder params", "vocabulary (table params)", "QA F1",
                   "QA EM", "spam acc", "QA F1 float at the int8 L",
                   "QA F1 int8", "int8 MB", "int8 ms (1 thread)",
                   "int8 ms (2)", "KD steps", "cost"],
                  ([f"{r['name']}: {r['method']}", r["role"],
                    r.get("init") or "n/a", _form(r),
                    fmt(r["encoder_params"] and r["encoder_params"] / 1e6,
                        "{:.2f}M"),
                    f"{fmt(r.get('vocab_size'), '{:,}')} ("
                    f"{fmt(r.get('table_params') and r['table_params'] / 1e6, '{:.2f}M')})",
                    fmt(r["qa_f1"]), fmt(r["qa_em"]), fmt(r["spam_acc"]),
                    fmt(r.get("qa_f1_float_int8_length")),
                    fmt(r["qa_f1_int8"]), fmt(r["int8_size_mb"]),
                    fmt(r["int8_ms"].get("1")), fmt(r["int8_ms"].get("2")),
                    fmt(r.get("kd_steps"), "{}"), _cost_text(r)]
                   for r in results["rows"]))]
  carried = [r for r in results["rows"] if r.get("measured_by")]
  if carried:
    lines += ["", "Rows carried over from an earlier run (not re-run by "
              "this command; their timings are from that run's own "
              "benchmark): " + ", ".join(
                  f"{r['name']} (`{r['measured_by']}`)" for r in carried)]
  lines += ["", "Cost: training steps of the row's QA and spam chain "
            "(its own pre-training or distillation, carving's recovery, "
            "both fine-tunings) and their wall-clock minutes on this host "
            "(conversion and timing not included)."]
  lines += _plateau_lines(teacher)
  lines += _student_curve_lines(results["rows"])
  lines += ["", "Against the teacher (a carried row against the teacher of "
            "the run that measured it):", ""]
  for r in results["rows"][1:]:
    lines.append("- " + _ratios(r, teacher))
  asked = [r for r in results["rows"] if r.get("task_library")]
  if asked:
    lines += ["", "Asked as an app asks (`experiments.apps.qa_app_check`: the int8 "
              "QA file with the vocabulary it carries, through the TFLite "
              "Task Library's BertQuestionAnswerer and the app's Python "
              "twin):", ""] + [
        f"- {r['name']}: {r['task_library']['agree']} of "
        f"{r['task_library']['questions']} answers the same as the twin's "
        f"at L = {r['task_library']['length']}" for r in asked]
  lines += ["", "What each word table knows by itself "
            "(`experiments.papers.lexical_probe`: the context word nearest the "
            "definition by word vectors alone, exact match on the QA dev "
            "set), against the model's own QA EM:", ""]
  for r in results["rows"]:
    probe = r["word_table_em"]
    if any(v is not None for v in probe.values()):
      lines.append(
          f"- {r['name']}: the table answers {fmt(probe['encoder'])}% "
          f"before QA fine-tuning, {fmt(probe['qa'])}% after; the model "
          f"{fmt(r['qa_em'])}%")
  if curves:
    lines += ["", "How far each run's losses got (the curves are in "
              f"{RESULTS_NAME}.png):", ""] + [f"- {l}" for l in curves]
  return "\n".join(lines) + "\n"


def _plateau_lines(teacher):
  """The teacher's curves: held-out score per point, the last gain."""
  plateaus = {t: p for t, p in (teacher.get("plateau") or {}).items() if p}
  if not plateaus:
    return []
  lines = ["", "The teacher, fine-tuned until doubling its steps stops "
           "helping (`experiments.papers.plateau`: each point a whole run on train "
           "without a held-out slice, scored on that slice, never on dev):",
           ""]
  for task, p in plateaus.items():
    points = ", ".join(f"{s} steps {v:.1f}" for s, v in
                       zip(p["steps"], p["heldout_score"]))
    gain = p["last_doubling_gain"]
    lines.append(
        f"- {task} ({p['metric']} on {p['heldout_examples']} held-out "
        f"examples): {points}; last doubling "
        f"{'n/a' if gain is None else f'{gain:+.2f}'} points "
        f"({'below' if p['reached'] else 'not below'} {p['min_gain']}: "
        f"{'plateau' if p['reached'] else 'stopped at the step limit'}), "
        f"teacher = the {p['chosen_steps']}-step run")
  return lines


def _student_curve_lines(rows):
  """Each plateau row's curves: held-out score per point, why it ended."""
  lines = []
  for r in rows:
    for task, p in (r.get("plateau") or {}).items():
      if r["role"] != "teacher" and p and p.get("points"):
        points = ", ".join(f"{q['steps']} steps {q['score']:.1f}"
                           for q in p["points"])
        kept = p.get("kept_steps")
        lines.append(f"- {r['name']}, {task}: {points}; ended after "
                     f"{p['steps']} steps: {p['stopped']}" + (
                         f"; kept the weights of its best point ({kept} "
                         "steps)" if kept not in (None, p["steps"]) else ""))
  return lines and ["", "The students trained until more training stops "
                    "helping (one run each, scored as it trains on a slice "
                    "held out of train, never on dev):", ""] + lines


def _form(row):
  """"no_norm, relu" from the row's config fields."""
  if not row.get("norm"):
    return "n/a"
  return f"{row['norm']}, {row['activation']}"


def _cost_text(row):
  if row.get("train_steps") is None:
    return "n/a"
  minutes = row.get("minutes")
  return (f"{row['train_steps']} steps, "
          f"{'n/a' if minutes is None else f'{minutes:.0f}'} min")


def _ratios(row, teacher):
  """One line: parameter share, F1 share, spam gap, int8 drop, speed-up."""
  def share(a, b):
    return "n/a" if a is None or not b else f"{100 * a / b:.0f}%"
  drop = (None if row["qa_f1"] is None or row["qa_f1_int8"] is None
          else row["qa_f1"] - row["qa_f1_int8"])
  teacher_f1 = row.get("teacher_qa_f1", teacher["qa_f1"])
  teacher_spam = row.get("teacher_spam_acc", teacher["spam_acc"])
  gap = (None if row["spam_acc"] is None or teacher_spam is None
         else teacher_spam - row["spam_acc"])
  teacher_ms = row.get("teacher_int8_ms", teacher["int8_ms"]).get("1")
  speed = (None if not row["int8_ms"].get("1") or not teacher_ms else
           teacher_ms / row["int8_ms"]["1"])
  return (f"{row['name']}: {share(row['encoder_params'], teacher['encoder_params'])}"
          f" of the parameters, {share(row['qa_f1'], teacher_f1)} of "
          f"the teacher's QA F1 ({'n/a' if teacher_f1 is None else f'{teacher_f1:.1f}'}), "
          f"spam {'n/a' if gap is None else f'{gap:.1f}'} points "
          f"below, int8 F1 {'n/a' if drop is None else f'{drop:.1f}'} points "
          f"below its float32, "
          f"{'n/a' if speed is None else f'{speed:.1f}x'} the teacher's "
          "1-thread int8 speed" + (" (both timed in the run that measured "
                                   "it)" if "teacher_int8_ms" in row else ""))


def plot(layout, results, path):
  """Quality against latency, and every run's training curves."""
  from android_bench.plotting import pyplot, save_figure
  plt = pyplot()
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
  ax = axes[0]
  palette = plt.get_cmap("tab20").colors  # one colour per row
  colors = {m: palette[i % len(palette)] for i, m in enumerate(MODELS)}
  for r in results["rows"]:
    ms = r["int8_ms"].get("1")
    if ms and r["qa_f1_int8"] is not None:
      ax.scatter(ms, r["qa_f1_int8"], color=colors[r["name"]])
      ax.annotate(r["name"], (ms, r["qa_f1_int8"]))
  ax.set(xlabel="int8 latency, 1 thread (ms)", ylabel="QA F1 (int8)",
         title="Quality vs host latency")
  for ax, (title, runs) in zip(axes[1:], (
      ("Pre-training / distillation loss", [
          (m, layout.run(m)) for m in OWN_ENCODER]),
      ("QA fine-tuning loss (with the KD terms)", [
          (m, layout.finetuned(m, "qa")) for m in MODELS]))):
    for name, directory in runs:
      curve = read_scalars(os.path.join(directory, "summaries")).get("loss")
      if curve:
        ax.plot(*zip(*curve), label=name, color=colors[name])
    ax.set(xlabel="step", ylabel="loss", title=title, yscale="log")
    ax.legend(fontsize="small")
  save_figure(fig, path)


def _models(names):
  """The rows to run, in MODELS order, the teacher first; exits with one
  line on an unknown name."""
  unknown = sorted(set(names) - set(MODELS))
  if unknown:
    sys.exit(f"error: --models {','.join(unknown)}: not a row (rows: "
             f"{', '.join(MODELS)})")
  return tuple(m for m in MODELS
               if not names or m in names or m == "teacher")


def run_experiment(options, out, results):
  """Runs the rows of `options.models` into `out`, then stages the results
  in `results` (OutputFiles) and commits them."""
  models = _models(options.models)
  scale = dataclasses.replace(SCALES[options.scale], teacher_steps=(
      options.teacher_qa_steps, options.teacher_spam_steps))
  layout = Layout(out)
  steps = build_steps(layout, scale, models)  # loads TensorFlow

  def report(results):
    previous = None if len(models) == len(MODELS) else read_json(
        os.path.join(options.results_dir, RESULTS_NAME + ".json"))
    data = collect(layout, options.command, scale, models, previous)
    table = markdown(data, scale, progress(layout))
    skeleton.stage_results(results, RESULTS_NAME, data, table)
    plot(layout, data, os.path.join(results.staging, RESULTS_NAME + ".png"))
    return table

  skeleton.run_and_report(steps, options, results, report)


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  command = skeleton.command_line("experiments.papers.distill_from_minilm")
  options = from_flags(Options, command=command)
  _models(options.models)  # an unknown row: one line, before any work
  skeleton.run_command(argv, options, run_experiment)


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
