"""Distil a student: MobileBERT by AKT / JKT / PKT, or a KroneckerBERT.

    python -m tfmodels.training.distill --teacher_dir /tmp/ibbert_run \
        --student_config mobilebert --train_data /tmp/pretrain \
        --model_dir /tmp/mobilebert_pkt --strategy pkt --train_steps 2000

--teacher_dir is a `pretrain` run (or a converted checkpoint directory) with
MLM + NSP heads, or --teacher a named pretrained encoder without them
(MiniLM: pre-training distillation then has no soft targets, see
`progressive.plan`). A student narrower in E than its teacher starts from
the teacher's word table at rank E (`low_rank_init.py`). Stages are those of `distillation/progressive.py`; the run
checkpoints and resumes like `pretrain`, stage included (the stage follows
from the global step). A resume must name the teacher and --strategy the
run started with (`run_start.py`).

`--strategy kronecker` distils a KroneckerBERT config from a dense teacher of
the same depth and width (`distillation/kronecker.py`): the student starts
as the teacher's nearest Kronecker factorisation and learns embedding,
attention-score and FFN-output MSE plus its own MLM + NSP. Its teacher may
be a bare encoder, e.g. the shipped MiniLM:

    python -m tfmodels.training.distill --teacher all-minilm-l6-v2 \
        --student_config kronecker_minilm.json --strategy kronecker ...
"""

import dataclasses
import sys

from absl import app, flags, logging

from tfmodels.command_options import (define_flags, from_flags, option,
                                      redefault)
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.training.run_flags import (RunOptions, check_run_flags,
                                         optimizer_from_options,
                                         set_precision)

FLAGS = flags.FLAGS
KT_STRATEGIES = ("akt", "jkt", "pkt", "kronecker")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistillOptions(RunOptions):
  """The command line, one option per flag (the shared ones from
  `RunOptions`); `main` builds it with `command_options.from_flags`."""
  learning_rate: float = redefault(RunOptions, "learning_rate", 1.5e-3)
  teacher_dir: str | None = option(None, "Teacher run / model directory.")
  teacher: str | None = option(None, "Or a named teacher (see "
                               "checkpoints/teachers.py), e.g. "
                               "all-minilm-l6-v2.")
  student_config: str = option(None, "Student config name or JSON.",
                               required=True)
  train_data: str = option(None, "Directory of pre-training shards.",
                           required=True)
  model_dir: str = option(None, "Checkpoints and summaries.", required=True)
  strategy: str = option("pkt", "Knowledge-transfer strategy.",
                         choices=KT_STRATEGIES)
  kt_fraction: float = option(0.5, "JKT/PKT: share of the transfer stages.")
  lower_layer_lr: float = option(
      0.0, "PKT: learning-rate factor of the layers below the current one "
      "(0 freezes them).")
  alpha: float = option(0.5, "Pre-training distillation: MLM weight.")


define_flags(DistillOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(DistillOptions, FLAGS)
  error = nonfinite_float_flag(FLAGS) or check_run_flags(
      options, {"alpha": (0.0, 1.0), "kt_fraction": (0.0, 1.0),
                "lower_layer_lr": (0.0, None)})
  if error:
    sys.exit(f"error: {error}")
  if (options.teacher is None) == (options.teacher_dir is None):
    sys.exit("error: give exactly one of --teacher_dir and --teacher")
  if options.optimizer != "lamb" and options.lower_layer_lr:
    sys.exit("error: --lower_layer_lr needs --optimizer lamb")
  logging.set_verbosity(logging.WARNING)
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import (Head, check_run_dir,
                                              claim_run_dir, load_model_dir)
  from tfmodels.checkpoints.teachers import load_teacher
  from tfmodels.checkpoints.weight_mapping import CheckpointError
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.data.pretraining_dataset import check_fits, read_meta
  from tfmodels.distillation import progressive
  from tfmodels.models import build_pretrainer
  from tfmodels.staging import OutputError
  from tfmodels.training.loop import get_strategy, is_chief
  from tfmodels.training.run_start import check_resume

  # Multi-worker collectives must be set up before any TF op runs (reading
  # the shards runs some).
  strategy = get_strategy(options.distribution_strategy)
  try:  # the cheap checks first: the run directory, the data, the config
    student_config = load_config(options.student_config)
    meta = read_meta(options.train_data)
    check_fits(meta, student_config, "--student_config")
    head = Head("pretrainer",
                sentence_objective=meta["options"]["sentence_objective"])
    check_run_dir(options.model_dir, student_config, head)
    check_resume(options.model_dir, _start_flags(options))
  except (ConfigError, ValueError) as e:
    sys.exit(f"error: {e}")
  set_precision(options)
  keras.utils.set_random_seed(options.seed)
  try:
    with strategy.scope():
      if options.teacher:
        named = load_teacher(options.teacher)
        teacher, teacher_config, teacher_head = (named.encoder, named.config,
                                                 Head())
      else:
        teacher, teacher_config, teacher_head = load_model_dir(
            options.teacher_dir)
    if teacher_head.kind not in ("pretrainer", "encoder"):
      raise ValueError(f"the teacher has a {teacher_head.kind} head; "
                       "distillation needs a pre-trained encoder (MLM + NSP "
                       "head or none)")
    progressive.check_compatible(teacher_config, student_config)
    if options.strategy == "kronecker":
      stages = [progressive.Stage("kronecker", options.train_steps, (), False)]
    else:
      stages = progressive.plan(options.strategy,
                                student_config.num_hidden_layers,
                                options.train_steps, options.kt_fraction,
                                options.lower_layer_lr,
                                teacher_has_mlm=teacher_head.kind ==
                                "pretrainer")
  except (CheckpointError, ConfigError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  with strategy.scope():
    student = build_pretrainer(student_config,
                               sentence_objective=head.sentence_objective)
    optimizer = optimizer_from_options(options)
    # Stages train different subsets; the optimizer must know them all.
    optimizer.build(student.trainable_variables)
  try:
    with claim_run_dir(options.model_dir, student_config, head,
                       chief=is_chief(strategy)):
      _train(strategy, student, student_config, optimizer, teacher,
             teacher_config, stages, options)
  except OutputError as e:  # another writer or run took it meanwhile
    sys.exit(f"error: {e}")


def _start_flags(options):
  """What the run starts from and keeps to (see run_start.py): the teacher
  teaches every step, and the strategy fixes the stages and the start."""
  from tfmodels.training.run_start import start_flags
  return start_flags(teacher=options.teacher, teacher_dir=options.teacher_dir,
                     strategy=options.strategy)


def _train(strategy, student, student_config, optimizer, teacher,
           teacher_config, stages, options):
  """Runs the stages left after the run's checkpoint in --model_dir."""
  from tfmodels.checkpoints.model_dir import encoder_of
  from tfmodels.data.pretraining_dataset import pretraining_dataset
  from tfmodels.distillation import kronecker, low_rank_init, progressive
  from tfmodels.training.loop import Trainer
  from tfmodels.training.run_start import record_start
  trainer = Trainer(strategy, student, optimizer, options.model_dir,
                    options.keep_checkpoints)
  if trainer.chief and trainer.start_step == 0:
    record_start(options.model_dir, _start_flags(options))
  if trainer.start_step == 0 and options.strategy == "kronecker":
    factored, copied = kronecker.initialise_student(student, teacher)
    print(f"factored {len(factored)} Kronecker layers and copied "
          f"{len(copied)} variables from the teacher", flush=True)
  elif trainer.start_step == 0 and options.strategy != "akt":
    copied = progressive.copy_from_teacher(student, teacher)
    print(f"copied {len(copied)} embedding / head variables from the "
          "teacher", flush=True)
    if student_config.embedding_size != teacher_config.embedding_size:
      error = low_rank_init.init_word_embeddings(
          encoder_of(student).get_layer("embeddings"),
          encoder_of(teacher).get_layer("embeddings"))
      print(f"word embeddings: the teacher's table at rank "
            f"{student_config.embedding_size} (relative error {error:.3f})",
            flush=True)
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: pretraining_dataset(
          options.train_data,
          ctx.get_per_replica_batch_size(options.batch_size),
          seed=options.seed, input_context=ctx,
          skip_batches=trainer.start_step)))
  history = []
  for stage in stages:
    if stage.end_step <= trainer.start_step:
      continue
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # loss scaling
    inner.learning_rate_multipliers = list(stage.lr_multipliers)
    loss_fn = (kronecker.pretraining_loss(student, teacher)
               if options.strategy == "kronecker" else
               progressive.stage_loss(student, teacher, stage, options.alpha))
    history += trainer.train(
        iterator, loss_fn,
        stage.end_step, progressive.trained_variables(student, stage),
        options.checkpoint_every, options.log_every, description=stage.name,
        record={"stage": stage.name})
  if history and trainer.chief:  # Trainer appended it to history.jsonl
    print(f"step {history[-1]['step']} ({history[-1]['stage']}): loss "
          f"{history[-1]['loss']:.4f}")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
