"""Fine-tune a pre-trained or distilled encoder on a task, then score dev.

    python -m tfmodels.training.finetune --task spam --data_dir data/spam \
        --init_dir /tmp/mobilebert_pkt --model_dir /tmp/spam_run \
        --train_steps 500 --batch_size 32 --learning_rate 5e-5

--task is a GLUE task name (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte,
wnli) or `spam`, `squad` (SQuAD v1.1/v2.0 JSON, e.g. data/wordnet_qa),
`tagging` (CoNLL) or `intent_slot` (joint intent + slot tagging, the
mixed-vocabulary paper's SNIPS task: CoNLL with a `# label = <intent>` line
before each sentence, e.g. data/brown_pos with genre as the intent and POS
tags as slots; dev metrics intent accuracy, slot F1, sentence exact match).
--init_dir is a `pretrain` / `distill` run or a converted
checkpoint; its encoder weights start the task model. The run checkpoints
and resumes like `pretrain` (with the --init_dir and --teacher_dir it
started with: `run_start.py`), and writes dev metrics to eval_results.json.
An empty train or dev split is refused before any work.

Trained until more training stops helping: with --eval_split (a slice held
out of train, written beside it in --data_dir) the run scores that split at
--eval_first_steps, twice that, four times ... and ends at the first
doubling that gains less than --min_gain points (`stop_rule.py`; not
from a point inside the warmup), or at --train_steps or --max_minutes;
plateau.json holds the curve and why it ended. The learning rate still decays towards --train_steps, the cap.
The run ends with the weights of its best point (written to its last
checkpoint, so every later step reads them; `kept_steps` in plateau.json):
while the rate is still high a student's held-out score can fall from one
point to the next (a carved student's soft-target run: 72.8 at 200 steps,
69.8 at 1,600).

With --substitute (compress's spec, e.g. layernorm=nonorm,gelu=relu) the
run makes MobileBERT's op swap itself, on a model that still has the
teacher's LayerNorm and gelu (compress without --substitute): NoNorms
fitted to the LayerNorms on the first train rows, then, with
--blend_steps N, each swapped op's output moved from the original op's to
its own over the first N steps (`substitution.blend`), so the student
learns the task while the swap is made rather than after it. Every scored
point and the written model are the swapped model alone.

With --task_kd prediction, a run that reads every train row at least once
(steps x batch >= rows) has the teacher's logits on the train rows computed
once before the first step (`distillation/teacher_targets.py`): the same
loss, without a teacher forward pass per step.
"""

import dataclasses
import json
import os
import shutil
import sys
import time

from absl import app, flags, logging

from tfmodels.command_options import (define_flags, from_flags, option,
                                      redefault)
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.training.run_flags import (RunOptions, check_run_flags,
                                         optimizer_from_options,
                                         set_precision)

FLAGS = flags.FLAGS
TASK_KD_MODES = ("all", "transfer", "hidden", "carved", "prediction")
# With --eval_split: the weights of the best held-out point so far.
BEST = "best_heldout"


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneOptions(RunOptions):
  """The command line, one option per flag (the shared ones from
  `RunOptions`); `main` builds it with `command_options.from_flags`."""
  train_steps: int = redefault(RunOptions, "train_steps", 500)
  learning_rate: float = redefault(RunOptions, "learning_rate", 5e-5)
  optimizer: str = redefault(RunOptions, "optimizer", "adamw")
  task: str = option(None, "Task: a GLUE name (cola, sst-2, mrpc, sts-b, "
                     "qqp, mnli, qnli, rte, wnli), spam, squad, tagging or "
                     "intent_slot (see the module docstring).", required=True)
  data_dir: str = option(None, "Directory of the task's files.",
                         required=True)
  init_dir: str = option(None, "Run or model directory to start from.",
                         required=True)
  teacher_dir: str | None = option(None, "Fine-tuned teacher for task-stage "
                                   "KD (see the module docstring).")
  task_kd: str = option(
      "all", "With --teacher_dir: `all` matches the teacher's embedding "
      "output, attention scores and hidden states besides its soft logits "
      "(KroneckerBERT's eq. 14); `transfer` every layer's feature maps and "
      "attention distributions by MobileBERT's eqs. 2 and 3 besides its "
      "soft logits; `hidden` the feature maps (eq. 2) and soft logits, for a "
      "student with other heads; `carved` (a student `compress` carved from "
      "this teacher) the feature maps and each kept head's attention "
      "distributions against the head it was carved from (--init_dir's "
      "carving.json), besides the soft logits; `prediction` only its soft "
      "logits (plus the task loss in all five). The student must match the "
      "teacher in what the mode compares.", choices=TASK_KD_MODES)
  hidden_kd_weight: float = option(1.0, "Weight of the feature-map terms "
                                   "(--task_kd transfer, hidden, carved).")
  attention_kd_weight: float = option(1.0, "Weight of the attention terms "
                                      "(--task_kd transfer, carved).")
  model_dir: str = option(None, "Checkpoints, summaries, results.",
                          required=True)
  vocab_file: str = option("data/vocab/uncased_vocab.txt", "vocab.txt")
  max_seq_length: int = option(128, "Tokens per example.")
  warmup_fraction: float = option(0.1, "Share of steps warming up "
                                  "(overrides --warmup_steps when > 0).")
  eval_split: str | None = option(
      None, "A split of --data_dir held out of train (e.g. `heldout`), "
      "scored at --eval_first_steps, twice that, four times ...; the run "
      "ends at the first doubling that gains less than --min_gain points, "
      "at --train_steps or at --max_minutes (curve and reason in "
      "plateau.json).")
  eval_first_steps: int = option(100, "With --eval_split: the steps of the "
                                 "curve's first point.")
  min_gain: float = option(0.5, "With --eval_split: a doubling gaining less "
                           "(points: F1, or accuracy x 100) ends the run.")
  max_minutes: float = option(0.0, "With --eval_split: minutes of training "
                              "after which the run ends (0: no cap).")
  substitute: str = option("", "layernorm=nonorm and/or gelu=relu: ops of "
                           "--init_dir's model swapped as the run starts "
                           "(see the module docstring; default: none).")
  blend_steps: int = option(0, "With --substitute: steps over which each "
                            "swapped op's output moves from the original "
                            "op's to its own (0: swapped at once); at most "
                            "--eval_first_steps with --eval_split.")


define_flags(FinetuneOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(FinetuneOptions, FLAGS)
  error = nonfinite_float_flag(FLAGS) or check_run_flags(
      options, {"max_seq_length": (1, None), "warmup_fraction": (0.0, 1.0),
                "eval_first_steps": (1, None), "max_minutes": (0.0, None),
                "blend_steps": (0, None)})
  if not error and options.max_minutes and (
      options.distribution_strategy == "multi_worker_mirrored"):
    # Each worker's clock would decide alone; a step count they all share.
    error = ("--max_minutes: the workers of multi_worker_mirrored would each "
             "stop by their own clock; cap the run with --train_steps")
  if not error:
    error = _blend_error(options)
  if error:
    sys.exit(f"error: {error}")
  logging.set_verbosity(logging.WARNING)
  # Multi-worker collectives must be set up before any TF op runs (the
  # tokenizer's lookup table is one).
  from tfmodels.training.loop import get_strategy, is_chief
  strategy = get_strategy(options.distribution_strategy)
  from tfmodels.checkpoints.model_dir import check_run_dir, claim_run_dir
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.staging import OutputError
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  from tfmodels.training.run_start import check_resume
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import with_record

  if not os.path.isfile(os.path.join(options.init_dir, "config.json")):
    sys.exit(f"error: --init_dir {options.init_dir}: no config.json (not a "
             "model or run directory)")
  try:  # the cheap checks first: the run directory, the model, the task
    config = load_config(os.path.join(options.init_dir, "config.json"))
    swap = original_config = None
    if options.substitute:
      from tfmodels.compression.substitution import (parse_spec,
                                                     substituted_config)
      swap = parse_spec(options.substitute)
      original_config, config = config, substituted_config(config, swap)
    tokenizer = WordPieceTokenizer(options.vocab_file)
    task = make_task(options.task, options.data_dir, tokenizer,
                     options.max_seq_length)
    task.check_split("dev")  # scored at the end: refused now, not then
    if options.eval_split:
      task.check_split(options.eval_split)
    spec = {"task": options.task, "max_seq_length": options.max_seq_length,
            "vocab_file": os.path.abspath(options.vocab_file)}
    spec = with_record(spec, tokenizer.vocab, options.model_dir)  # size, hash
    check_run_dir(options.model_dir, config, task.head(), spec)
    note = check_resume(options.model_dir, _start_flags(options),
                        optional=("init_dir",))
  except (ConfigError, VocabError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  if note:
    print(note, flush=True)
  if config.max_position_embeddings < options.max_seq_length:
    sys.exit(f"error: --max_seq_length {options.max_seq_length} exceeds the "
             f"model's max_position_embeddings "
             f"{config.max_position_embeddings}")
  if len(tokenizer) > config.vocab_size:
    sys.exit(f"error: --vocab_file {options.vocab_file} has {len(tokenizer)} "
             f"pieces but the model's vocab_size is {config.vocab_size}")
  set_precision(options)
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import (build_model, encoder_of,
                                              load_model_dir)

  keras.utils.set_random_seed(options.seed)
  try:
    features = task.features("train")
    with strategy.scope():
      source, _, _ = load_model_dir(options.init_dir)
      if swap:
        original, model = _swapped(original_config, task, source, swap,
                                   features)
      else:
        model = build_model(config, task.head(), encoder_of(source))
      teacher = targets = teacher_heads = None
      if options.teacher_dir:
        teacher_tokenizer = _teacher_tokenizer(options, tokenizer)
        teacher = _load_teacher(options.teacher_dir, task, config,
                                options.task_kd,
                                across=teacher_tokenizer is not None)
        if options.task_kd == "carved":
          from tfmodels.compression.carve import kept_heads
          teacher_heads = kept_heads(
              options.init_dir, config, load_config(os.path.join(
                  options.teacher_dir, "config.json")).num_attention_heads)
        if teacher_tokenizer is not None:
          targets = _cross_vocab_targets(options, task, teacher_tokenizer,
                                         teacher)
      if options.warmup_fraction > 0:
        options = dataclasses.replace(options, warmup_steps=int(
            options.warmup_fraction * options.train_steps))
      optimizer = optimizer_from_options(options)
      if swap and options.blend_steps:
        from tfmodels.compression.substitution import blend
        import tensorflow as tf
        blended = blend(original, model, original_config, swap,
                        lambda: tf.minimum(1.0, tf.cast(
                            optimizer.iterations, tf.float32)
                                           / options.blend_steps))
        print(f"{blended['norms']} NoNorms and {blended['activations']} "
              f"activations blend from the original ops over the first "
              f"{options.blend_steps} steps", flush=True)
  except (ConfigError, VocabError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  try:
    with claim_run_dir(options.model_dir, config, task.head(), spec,
                       chief=is_chief(strategy)):
      _train(strategy, model, optimizer, task, features, teacher, options,
             targets, teacher_heads)
  except OutputError as e:  # another writer or run took it meanwhile
    sys.exit(f"error: {e}")


def _blend_error(options):
  if options.blend_steps and not options.substitute:
    return "--blend_steps: blends the ops of --substitute, which is not given"
  if options.blend_steps and options.mixed_precision == "mixed_float16":
    # The blend follows the optimizer's step count, which loss scaling
    # holds back on each skipped step.
    return ("--blend_steps: not with --mixed_precision mixed_float16, whose "
            "skipped steps would end the blend late")
  if options.eval_split and options.blend_steps > options.eval_first_steps:
    return (f"--blend_steps {options.blend_steps}: more than "
            f"--eval_first_steps {options.eval_first_steps}, so a scored "
            "point would be a blend, not the swapped model")
  return None


# Train rows the NoNorms are fitted on (compress's --calibration_examples).
FIT_ROWS = 256


def _swapped(original_config, task, source, swap, features):
  """(the original task model, the swapped one with NoNorms fitted to the
  original's LayerNorms on the first train rows)."""
  from tfmodels.checkpoints.model_dir import build_model, encoder_of
  from tfmodels.compression.substitution import substitute
  original = build_model(original_config, task.head(), encoder_of(source))
  rows = {k: v[:FIT_ROWS] for k, v in features.items()}
  model, _, fit = substitute(original, original_config, task.head(), swap,
                             rows)
  print(f"swapped {', '.join(f'{k} -> {v}' for k, v in swap.items())} "
        f"({fit['fitted_norms']} NoNorms fitted on "
        f"{len(rows['input_ids'])} train rows)", flush=True)
  return original, model


def _start_flags(options):
  """What the run starts from (see run_start.py): --init_dir's weights, the
  ops swapped from them, the teacher's copied head and its soft targets at
  every step."""
  from tfmodels.training.run_start import start_flags
  return start_flags(init_dir=options.init_dir,
                     teacher_dir=options.teacher_dir,
                     substitute=options.substitute or None,
                     blend_steps=options.blend_steps or None)


def _train(strategy, model, optimizer, task, features, teacher, options,
           targets=None, teacher_heads=None):
  """Trains in the claimed --model_dir, then scores dev (the chief).
  `targets`: the soft targets of a teacher reading another vocabulary
  (distillation/cross_vocab.py), one per train row."""
  import tensorflow as tf
  from tfmodels.distillation.kronecker import finetuning_loss
  from tfmodels.distillation.progressive import copy_from_teacher
  from tfmodels.staging import write_file
  from tfmodels.training.loop import Trainer
  from tfmodels.training.run_start import record_start
  from tfmodels.write_errors import refused
  trainer = Trainer(strategy, model, optimizer, options.model_dir,
                    options.keep_checkpoints)
  if trainer.chief and trainer.start_step == 0:
    record_start(options.model_dir, _start_flags(options))
  if teacher is not None and trainer.start_step == 0:
    # The head layer is named after its kind (models.py).
    copied = copy_from_teacher(model, teacher,
                               prefixes=(task.head().kind + "/",))
    print(f"copied {len(copied)} prediction-layer variables from the "
          "teacher", flush=True)
  if targets is not None:
    from tfmodels.distillation import cross_vocab
    features = {**features, **targets}
    loss_fn = cross_vocab.loss_fn(model, task)
  elif teacher is not None and options.task_kd == "prediction" and (
      options.train_steps * options.batch_size >= len(features["input_ids"])):
    # Each row is read once or more: one pass of the teacher over train
    # costs no more than a forward pass at every step.
    from tfmodels.distillation import teacher_targets
    began = time.monotonic()
    features = {**features,
                **teacher_targets.teacher_logits(teacher, task, features)}
    print(f"the teacher's logits on {len(features['input_ids'])} train rows "
          f"computed once ({time.monotonic() - began:.0f} s)", flush=True)
    loss_fn = teacher_targets.loss_fn(model, task)
  elif teacher is not None:
    loss_fn = finetuning_loss(
        model, teacher, task, intermediate=options.task_kd,
        teacher_heads=teacher_heads, layer_weights=(
            options.hidden_kd_weight, options.attention_kd_weight))
  else:
    loss_fn = lambda batch: task.loss(model, batch)
  n = len(features["input_ids"])

  def dataset_fn(ctx):
    ds = tf.data.Dataset.from_tensor_slices(features).repeat().shuffle(
        min(n, 10_000), seed=options.seed)
    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    ds = ds.batch(ctx.get_per_replica_batch_size(options.batch_size),
                  drop_remainder=True)
    return ds.skip(trainer.start_step).prefetch(2)

  curve = None
  if options.eval_split:
    from tfmodels.training.stop_rule import Curve, StopRule
    best = tf.train.Checkpoint(model=model)
    # Each worker's own copy, where its checkpoints go (the chief's: the
    # model dir).
    best_path = os.path.join(trainer.manager.directory, BEST, "weights")
    curve = Curve(options.eval_split, StopRule(
        options.eval_first_steps, options.train_steps, options.min_gain,
        options.max_minutes, options.warmup_steps), lambda: task.points(task.evaluate(
            model, options.eval_split)), options.model_dir,
                  trainer.start_step, trainer.chief,
                  snapshot=lambda step: best.write(best_path))
  if curve is None or not curve.ended:
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    trainer.train(iterator, loss_fn, options.train_steps,
                  checkpoint_every=options.checkpoint_every,
                  log_every=options.log_every, description=options.task,
                  should_stop=curve and curve.should_stop)
  if curve is not None and curve.points and (
      curve.best["steps"] != curve.points[-1]["steps"]):
    # The run ends with its best held-out weights, in its last checkpoint.
    best.read(best_path).assert_existing_objects_matched()
    trainer.manager.save(checkpoint_number=trainer.start_step)
    if not trainer.chief:  # its copies only existed to take part
      shutil.rmtree(trainer.manager.directory, ignore_errors=True)
    print(f"kept the weights of step {curve.best['steps']} ("
          f"{options.eval_split} {curve.best['score']:.2f}, the best point)",
          flush=True)
  if trainer.chief:
    results = task.evaluate(model, "dev")
    path = os.path.join(options.model_dir, "eval_results.json")
    try:
      write_file(path, json.dumps(results, indent=2))
    except OSError as e:  # a full disk; the checkpoints are whole
      raise refused(path, "the dev metrics", e) from None
    print(f"dev: {json.dumps(results)}")


def _teacher_tokenizer(options, tokenizer):
  """The teacher's tokenizer when it reads another vocabulary than the
  student's (its task.json's), else None. Only --task_kd prediction
  compares nothing layer by layer, so only it crosses vocabularies."""
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.vocab_record import record_of, resolve
  teacher_vocab = resolve(options.teacher_dir, model_flag="--teacher_dir",
                          default=options.vocab_file)
  teacher_tokenizer = WordPieceTokenizer(teacher_vocab, tokenizer.lower_case)
  if record_of(teacher_tokenizer.vocab) == record_of(tokenizer.vocab):
    return None
  if options.task_kd != "prediction":
    raise ValueError(f"--task_kd {options.task_kd}: the teacher reads "
                     f"{teacher_vocab}, the student {options.vocab_file}; "
                     "across vocabularies only `prediction` applies")
  return teacher_tokenizer


def _cross_vocab_targets(options, task, teacher_tokenizer, teacher):
  """The soft targets of a teacher reading its own vocabulary on the
  student's train rows, computed once (distillation/cross_vocab.py)."""
  from tfmodels.distillation.cross_vocab import soft_targets
  from tfmodels.training.tasks import make_task
  teacher_task = make_task(options.task, options.data_dir, teacher_tokenizer,
                           options.max_seq_length)
  targets = soft_targets(task, teacher_task, teacher)
  carried = targets.get("soft_weight")
  print(f"the teacher reads {teacher_tokenizer.vocab_file}: its soft "
        f"targets carried to "
        f"{'all' if carried is None else int(carried.sum())} of "
        f"{len(next(iter(targets.values())))} train rows", flush=True)
  return targets


def _load_teacher(teacher_dir, task, student_config, task_kd, across=False):
  """The fine-tuned teacher; its head must be the task's, its shapes what
  `task_kd` (--task_kd) compares (`across`: it reads its own vocabulary,
  so the two tables need not match)."""
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.distillation.kronecker import TASK_KD_NEEDS
  from tfmodels.distillation.progressive import check_compatible
  teacher, teacher_config, head = load_model_dir(teacher_dir)
  if head != task.head():
    raise ValueError(f"{teacher_dir}: the teacher has a {head.kind} head "
                     f"({head}), the task needs {task.head()}")
  check_compatible(teacher_config, student_config,
                   [f for f in TASK_KD_NEEDS[task_kd]
                    if not (across and f == "vocab_size")],
                   f"--task_kd {task_kd} needs them equal")
  return teacher


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
