"""Pre-train BERT / IB-BERT / ALBERT / MobileBERT with MLM + NSP or SOP.

    python -m tfmodels.training.pretrain --config tiny_bert \
        --train_data /tmp/pretrain --model_dir /tmp/bert_run \
        --train_steps 1000 --batch_size 32 --learning_rate 1e-3

`--train_data` is a directory of `create_pretraining_data` shards. The run
writes checkpoints (model, optimizer, input position) to --model_dir every
--checkpoint_every steps and resumes from the latest one when started again,
so a killed run loses at most the steps since its last checkpoint.
TensorBoard summaries go to --model_dir/summaries.
"""

import json
import os
import sys

from absl import app, flags, logging

from tfmodels.training.run_flags import (check_run_flags,
                                         define_run_flags,
                                         optimizer_from_flags,
                                         precision_from_flags)

FLAGS = flags.FLAGS
flags.DEFINE_string("config", None, "Model config: a shipped name or a JSON.")
flags.DEFINE_string("train_data", None, "Directory of pre-training shards.")
flags.DEFINE_string("model_dir", None, "Checkpoints and summaries.")
define_run_flags(train_steps=1000, learning_rate=1e-3)
flags.DEFINE_string("init_student_embeddings_from", None,
                    "Mixed-vocabulary stage II: a stage-I run whose student "
                    "embeddings start this model's word embeddings.")
for _name in ("config", "train_data", "model_dir"):
  flags.mark_flag_as_required(_name)


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
  error = check_run_flags()
  if error:
    sys.exit(f"error: {error}")
  logging.set_verbosity(logging.WARNING)
  import tf_keras as keras
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.data.pretraining_dataset import (pretraining_dataset,
                                                 read_meta)
  from tfmodels.checkpoints.model_dir import Head, write_description
  from tfmodels.models import build_pretrainer
  from tfmodels.training.loop import Trainer, get_strategy

  try:
    config = load_config(FLAGS.config)
    meta = read_meta(FLAGS.train_data)
  except (ConfigError, ValueError) as e:
    sys.exit(f"error: {e}")
  from tfmodels.distillation import mixed_vocab
  if meta["mixed_vocabulary"]:
    try:
      mixed_vocab.check_stage_one_config(config, meta)
    except ValueError as e:
      sys.exit(f"error: --config {e}")
  elif meta["vocab_size"] > config.vocab_size:
    sys.exit(f"error: --train_data ids reach {meta['vocab_size']} but "
             f"--config vocab_size is {config.vocab_size}")
  # Multi-worker collectives must be set up before any TF op runs.
  strategy = get_strategy(FLAGS.distribution_strategy)
  precision_from_flags()
  keras.utils.set_random_seed(FLAGS.seed)
  objective = meta["options"]["sentence_objective"]
  with strategy.scope():
    model = build_pretrainer(config, sentence_objective=objective)
    optimizer = optimizer_from_flags()
  write_description(FLAGS.model_dir, config,
                    Head("pretrainer", sentence_objective=objective))
  trainer = Trainer(strategy, model, optimizer, FLAGS.model_dir,
                    FLAGS.keep_checkpoints)
  if FLAGS.init_student_embeddings_from and trainer.start_step == 0:
    from tfmodels.checkpoints.model_dir import load_model_dir
    try:
      stage_one, _, _ = load_model_dir(FLAGS.init_student_embeddings_from)
      mixed_vocab.init_student_embeddings(model, stage_one)
    except (ValueError, OSError) as e:
      sys.exit(f"error: --init_student_embeddings_from {e}")
    print("word embeddings from the stage-I student table", flush=True)
  dataset = strategy.distribute_datasets_from_function(
      lambda ctx: pretraining_dataset(
          FLAGS.train_data, ctx.get_per_replica_batch_size(FLAGS.batch_size),
          seed=FLAGS.seed, input_context=ctx,
          skip_batches=trainer.start_step))
  teacher_vocab_size = (meta["teacher_vocab_size"]
                        if meta["mixed_vocabulary"] else None)
  history = trainer.train(iter(dataset),
                          pretraining_loss(model, teacher_vocab_size),
                          FLAGS.train_steps,
                          checkpoint_every=FLAGS.checkpoint_every,
                          log_every=FLAGS.log_every)
  if history and trainer.chief:
    with open(os.path.join(FLAGS.model_dir, "history.jsonl"), "a") as f:
      f.writelines(json.dumps(h) + "\n" for h in history)
    print(f"step {history[-1]['step']}: loss {history[-1]['loss']:.4f}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
