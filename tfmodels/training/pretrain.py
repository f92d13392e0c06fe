"""Pre-train BERT / IB-BERT / ALBERT / MobileBERT with MLM + NSP or SOP.

    python -m tfmodels.training.pretrain --config tiny_bert \
        --train_data /tmp/pretrain --model_dir /tmp/bert_run \
        --train_steps 1000 --batch_size 32 --learning_rate 1e-3

`--train_data` is a directory of `create_pretraining_data` shards. The run
writes checkpoints (model, optimizer, input position) to --model_dir every
--checkpoint_every steps and resumes from the latest one when started again,
so a killed run loses at most the steps since its last checkpoint.
TensorBoard summaries go to --model_dir/summaries.

--init_from starts a fresh run from a pretrained model: a model directory
(`checkpoints.import_export` output, a `pretrain` / `distill` run) or a named
teacher (all-minilm-l6-v2). Every encoder weight of it fills the same-named
weight of --config (a pretrainer's MLM / NSP heads too); what --config adds
starts fresh. A source tensor whose shape differs, or a config field that
would change what the weights compute, is refused with its name. A resumed
run restores its own checkpoint: an --init_from (or
--init_student_embeddings_from) other than the one it started with is
refused (`run_start.py`).

Mixed-vocabulary training (Zhao et al.), stage I from a pretrained teacher
(the paper's is BERT-large; here MiniLM keeps its body and word table, the
student table, its projection and the MLM heads start fresh), on data
segmented with both vocabularies, then stage II, the student from the
stage-I student table on student-only data:

    python -m tfmodels.data.create_pretraining_data \
        --input_file data/pretraining/train.txt.gz \
        --vocab_file data/vocab/uncased_vocab.txt \
        --student_vocab_file data/vocab/student_vocab.txt \
        --output_dir /tmp/mixed --dupe_factor 1
    python -m tfmodels.training.pretrain --config mixed_vocab_teacher_minilm \
        --init_from all-minilm-l6-v2 --train_data /tmp/mixed \
        --model_dir /tmp/stage1 --train_steps 300
    python -m tfmodels.training.pretrain --config STUDENT.json \
        --init_student_embeddings_from /tmp/stage1 \
        --train_data /tmp/student_shards --model_dir /tmp/stage2

(STUDENT.json: a student whose vocab_size is the student vocabulary's and
whose width is the teacher's mixed_vocab_embedding_size, e.g.
snips_l6_h192 with vocab_size 4818; experiments/papers/mixed_vocab_student.py runs
the whole chain.)
"""

import dataclasses
import os
import sys

from absl import app, flags, logging

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.training.run_flags import (RunOptions, check_run_flags,
                                         optimizer_from_options,
                                         set_precision)

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainOptions(RunOptions):
  """The command line, one option per flag (the shared ones from
  `RunOptions`, at their defaults); `main` builds it with
  `command_options.from_flags`."""
  config: str = option(None, "Model config: a shipped name or a JSON.",
                       required=True)
  train_data: str = option(None, "Directory of pre-training shards.",
                           required=True)
  model_dir: str = option(None, "Checkpoints and summaries.", required=True)
  init_student_embeddings_from: str | None = option(
      None, "Mixed-vocabulary stage II: a stage-I run whose student "
      "embeddings start this model's word embeddings.")
  init_from: str | None = option(
      None, "Fresh run only: a model directory or a named teacher "
      "(all-minilm-l6-v2) whose weights start the same-named weights of "
      "--config; its new parts (a mixed-vocabulary teacher's student table "
      "and projection, MLM heads an encoder lacks) start fresh. See the "
      "module docstring.")


define_flags(PretrainOptions)


def pretraining_loss(model, teacher_vocab_size=None):
  """MLM (weighted mean over predictions) + NSP/SOP cross-entropy.

  With `teacher_vocab_size` (mixed-vocabulary stage I) the MLM term is eq. 1
  of Zhao et al.: one softmax per vocabulary.
  """
  import tensorflow as tf
  from tfmodels.distillation.losses import masked_lm_loss
  from tfmodels.distillation.mixed_vocab import mixed_mlm_loss

  def loss_fn(batch):
    out = model({k: batch[k] for k in model.input}, training=True)
    if teacher_vocab_size:
      mlm = mixed_mlm_loss(batch, out, teacher_vocab_size)
    else:
      mlm = masked_lm_loss(batch["masked_lm_ids"], out["mlm_logits"],
                           batch["masked_lm_weights"])
    sentence = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["next_sentence_labels"], out["sentence_logits"]))
    return mlm + sentence, {"mlm_loss": mlm, "sentence_loss": sentence}
  return loss_fn


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(PretrainOptions, FLAGS)
  error = nonfinite_float_flag(FLAGS) or check_run_flags(options)
  if error:
    sys.exit(f"error: {error}")
  from tfmodels.checkpoints.teachers import TEACHERS
  if options.init_from and options.init_from not in TEACHERS and not (
      os.path.isfile(os.path.join(options.init_from, "config.json"))):
    sys.exit(f"error: --init_from {options.init_from}: neither a model "
             f"directory (no config.json) nor a named teacher "
             f"({', '.join(TEACHERS)})")
  logging.set_verbosity(logging.WARNING)
  import tf_keras as keras
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.data.pretraining_dataset import check_fits, read_meta
  from tfmodels.checkpoints.model_dir import (Head, check_run_dir,
                                              claim_run_dir)
  from tfmodels.models import build_pretrainer
  from tfmodels.training.loop import get_strategy, is_chief
  from tfmodels.staging import OutputError

  # Multi-worker collectives must be set up before any TF op runs (reading
  # the shards runs some).
  strategy = get_strategy(options.distribution_strategy)
  try:
    config = load_config(options.config)
    meta = read_meta(options.train_data)
  except (ConfigError, ValueError) as e:
    sys.exit(f"error: {e}")
  from tfmodels.distillation import mixed_vocab
  if meta["mixed_vocabulary"]:
    try:
      mixed_vocab.check_stage_one_config(config, meta)
    except ValueError as e:
      sys.exit(f"error: --config {e}")
  objective = meta["options"]["sentence_objective"]
  head = Head("pretrainer", sentence_objective=objective)
  from tfmodels.training.run_start import check_resume
  try:  # claim_run_dir checks again, under its lock
    check_fits(meta, config)
    check_run_dir(options.model_dir, config, head)
    start = _start_flags(options)
    note = check_resume(options.model_dir, start, optional=tuple(start))
  except ValueError as e:
    sys.exit(f"error: {e}")
  if note:
    print(note, flush=True)
  set_precision(options)
  keras.utils.set_random_seed(options.seed)
  with strategy.scope():
    model = build_pretrainer(config, sentence_objective=objective)
    optimizer = optimizer_from_options(options)
  import tensorflow as tf
  if options.init_from and not tf.train.latest_checkpoint(options.model_dir):
    # before anything is written
    _init_from(model, config, strategy, options.init_from)
  try:
    with claim_run_dir(options.model_dir, config, head,
                       chief=is_chief(strategy)):
      _train(strategy, model, optimizer, meta, options)
  except OutputError as e:  # another writer or run took it meanwhile
    sys.exit(f"error: {e}")


def _start_flags(options):
  """The flags that act only when the run starts (see run_start.py)."""
  from tfmodels.training.run_start import start_flags
  return start_flags(
      init_from=options.init_from,
      init_student_embeddings_from=options.init_student_embeddings_from)


def _train(strategy, model, optimizer, meta, options):
  """Trains to --train_steps in the claimed --model_dir."""
  from tfmodels.data.pretraining_dataset import pretraining_dataset
  from tfmodels.distillation import mixed_vocab
  from tfmodels.training.loop import Trainer
  from tfmodels.training.run_start import record_start
  trainer = Trainer(strategy, model, optimizer, options.model_dir,
                    options.keep_checkpoints)
  if trainer.chief and trainer.start_step == 0:
    record_start(options.model_dir, _start_flags(options))
  if options.init_student_embeddings_from and trainer.start_step == 0:
    from tfmodels.checkpoints.model_dir import load_model_dir
    try:
      stage_one, _, _ = load_model_dir(options.init_student_embeddings_from)
      mixed_vocab.init_student_embeddings(model, stage_one)
    except (ValueError, OSError) as e:
      sys.exit(f"error: --init_student_embeddings_from {e}")
    print("word embeddings from the stage-I student table", flush=True)
  dataset = strategy.distribute_datasets_from_function(
      lambda ctx: pretraining_dataset(
          options.train_data,
          ctx.get_per_replica_batch_size(options.batch_size),
          seed=options.seed, input_context=ctx,
          skip_batches=trainer.start_step))
  teacher_vocab_size = (meta["teacher_vocab_size"]
                        if meta["mixed_vocabulary"] else None)
  history = trainer.train(iter(dataset),
                          pretraining_loss(model, teacher_vocab_size),
                          options.train_steps,
                          checkpoint_every=options.checkpoint_every,
                          log_every=options.log_every)
  if history and trainer.chief:  # Trainer appended it to history.jsonl
    print(f"step {history[-1]['step']}: loss {history[-1]['loss']:.4f}")


def _init_from(model, config, strategy, source):
  """Restores the matching weights of `source` (--init_from) into `model`,
  or exits."""
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.checkpoints.teachers import TEACHERS, load_teacher
  from tfmodels.configs import ConfigError
  from tfmodels.distillation.mixed_vocab import init_from_pretrained
  try:
    with strategy.scope():
      if source in TEACHERS:
        named = load_teacher(source)
        pretrained, source_config = named.encoder, named.config
      else:
        pretrained, source_config, _ = load_model_dir(source)
    restored, fresh = init_from_pretrained(model, config, pretrained,
                                           source_config)
  except (ConfigError, ValueError, OSError) as e:  # CheckpointError too
    sys.exit(f"error: --init_from {source}: {e}")
  print(f"restored {len(restored)} variables from {source}; "
        f"{len(fresh)} start fresh: {', '.join(fresh)}", flush=True)


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
