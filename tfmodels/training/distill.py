"""Distil a MobileBERT student from an IB-BERT teacher (AKT, JKT or PKT).

    python -m tfmodels.training.distill --teacher_dir /tmp/ibbert_run \
        --student_config mobilebert --train_data /tmp/pretrain \
        --model_dir /tmp/mobilebert_pkt --strategy pkt --train_steps 2000

--teacher_dir is a `pretrain` run (or a converted checkpoint directory) with
MLM + NSP heads. Stages are those of `distillation/progressive.py`; the run
checkpoints and resumes like `pretrain`, stage included (the stage follows
from the global step).
"""

import json
import os
import sys

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher_dir", None, "Teacher run / model directory.")
flags.DEFINE_string("student_config", None, "Student config name or JSON.")
flags.DEFINE_string("train_data", None, "Directory of pre-training shards.")
flags.DEFINE_string("model_dir", None, "Checkpoints and summaries.")
flags.DEFINE_enum("strategy", "pkt", ["akt", "jkt", "pkt"],
                  "Knowledge-transfer strategy.")
flags.DEFINE_integer("train_steps", 1000, "Total steps, all stages.")
flags.DEFINE_float("kt_fraction", 0.5, "JKT/PKT: share of the transfer "
                   "stages.")
flags.DEFINE_float("lower_layer_lr", 0.0, "PKT: learning-rate factor of the "
                   "layers below the current one (0 freezes them).")
flags.DEFINE_float("alpha", 0.5, "Pre-training distillation: MLM weight.")
flags.DEFINE_integer("batch_size", 32, "Global batch size.")
flags.DEFINE_float("learning_rate", 1.5e-3, "Peak learning rate.")
flags.DEFINE_integer("warmup_steps", 0, "Linear warm-up steps.")
flags.DEFINE_float("weight_decay", 0.01, "Weight decay (not on norm/bias).")
flags.DEFINE_integer("checkpoint_every", 100, "Steps between checkpoints.")
flags.DEFINE_integer("keep_checkpoints", 3, "Checkpoints kept (newest).")
flags.DEFINE_integer("log_every", 10, "Steps between summaries.")
flags.DEFINE_enum("distribution_strategy", "one_device",
                  ["one_device", "mirrored", "multi_worker_mirrored"],
                  "tf.distribute strategy.")
flags.DEFINE_integer("seed", 0, "Seed for initialisation and shuffling.")
for _name in ("teacher_dir", "student_config", "train_data", "model_dir"):
  flags.mark_flag_as_required(_name)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.data.pretraining_dataset import (pretraining_dataset,
                                                 read_meta)
  from tfmodels.distillation import progressive
  from tfmodels.models import build_pretrainer
  from tfmodels.training.loop import Trainer, get_strategy
  from tfmodels.training.optimization import create_optimizer

  # Multi-worker collectives must be set up before any TF op runs.
  strategy = get_strategy(FLAGS.distribution_strategy)
  keras.utils.set_random_seed(FLAGS.seed)
  try:
    student_config = load_config(FLAGS.student_config)
    read_meta(FLAGS.train_data)
    with strategy.scope():
      teacher, teacher_config, head = load_model_dir(FLAGS.teacher_dir)
    if head.kind != "pretrainer":
      raise ValueError(f"--teacher_dir {FLAGS.teacher_dir} has a "
                       f"{head.kind} head; distillation needs MLM + NSP")
    progressive.check_compatible(teacher_config, student_config)
    stages = progressive.plan(FLAGS.strategy,
                              student_config.num_hidden_layers,
                              FLAGS.train_steps, FLAGS.kt_fraction,
                              FLAGS.lower_layer_lr)
  except (ConfigError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  with strategy.scope():
    student = build_pretrainer(student_config,
                               sentence_objective=head.sentence_objective)
    optimizer = create_optimizer("lamb", FLAGS.learning_rate,
                                 FLAGS.train_steps, FLAGS.warmup_steps,
                                 FLAGS.weight_decay)
    # Stages train different subsets; the optimizer must know them all.
    optimizer.build(student.trainable_variables)
  os.makedirs(FLAGS.model_dir, exist_ok=True)
  with open(os.path.join(FLAGS.model_dir, "config.json"), "w") as f:
    f.write(student_config.to_json() + "\n")
  with open(os.path.join(FLAGS.model_dir, "head.json"), "w") as f:
    json.dump({"kind": "pretrainer",
               "sentence_objective": head.sentence_objective}, f)
  trainer = Trainer(strategy, student, optimizer, FLAGS.model_dir,
                    FLAGS.keep_checkpoints)
  if trainer.start_step == 0 and FLAGS.strategy != "akt":
    copied = progressive.copy_from_teacher(student, teacher)
    print(f"copied {len(copied)} embedding / head variables from the "
          "teacher", flush=True)
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: pretraining_dataset(
          FLAGS.train_data, ctx.get_per_replica_batch_size(FLAGS.batch_size),
          seed=FLAGS.seed, input_context=ctx,
          skip_batches=trainer.start_step)))
  history = []
  for stage in stages:
    if stage.end_step <= trainer.start_step:
      continue
    optimizer.learning_rate_multipliers = list(stage.lr_multipliers)
    for h in trainer.train(
        iterator, progressive.stage_loss(student, teacher, stage, FLAGS.alpha),
        stage.end_step, progressive.trained_variables(student, stage),
        FLAGS.checkpoint_every, FLAGS.log_every, description=stage.name):
      history.append(dict(h, stage=stage.name))
  if not trainer.chief:
    return
  with open(os.path.join(FLAGS.model_dir, "history.jsonl"), "a") as f:
    f.writelines(json.dumps(h) + "\n" for h in history)
  if history:
    print(f"step {history[-1]['step']} ({history[-1]['stage']}): loss "
          f"{history[-1]['loss']:.4f}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
