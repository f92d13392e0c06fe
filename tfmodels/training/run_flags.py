"""The flags every training command shares (steps, batch, optimizer, runs).

Each command calls `define_run_flags` with its own defaults, then defines
what is particular to it, so `pretrain`, `distill` and `finetune` read the
same way on the command line. `check_run_flags` checks their values (and
the command's own ranges) before any work: a zero interval or a negative
rate would otherwise fail mid-run, after checkpoints were written; so is
--model_dir's writability. nan and inf are refused for every float flag
first (`tfmodels.flag_checks`), so the ranges below compare numbers.
"""

from absl import flags

from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.training.loop import STRATEGIES
from tfmodels.training.optimization import OPTIMIZERS


def define_run_flags(train_steps, learning_rate, optimizer="lamb"):
  flags.DEFINE_integer("train_steps", train_steps, "Total optimizer steps.")
  flags.DEFINE_integer("batch_size", 32, "Global batch size.")
  flags.DEFINE_enum("optimizer", optimizer, list(OPTIMIZERS), "Optimizer.")
  flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
  flags.DEFINE_integer("warmup_steps", 0, "Linear warm-up steps.")
  flags.DEFINE_float("weight_decay", 0.01,
                     "Weight decay (not on norm / bias variables).")
  flags.DEFINE_float("clip_norm", 1.0, "Global-norm clipping; 0 disables.")
  flags.DEFINE_integer("checkpoint_every", 100, "Steps between checkpoints.")
  flags.DEFINE_integer("keep_checkpoints", 3, "Checkpoints kept (newest).")
  flags.DEFINE_integer("log_every", 10, "Steps between summaries.")
  flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES),
                    "tf.distribute strategy.")
  flags.DEFINE_integer("seed", 0, "Seed for initialisation and shuffling.")
  flags.DEFINE_enum("mixed_precision", "none", list(PRECISIONS),
                    "Keras precision policy: layers compute in float16 "
                    "(with dynamic loss scaling) or bfloat16, variables and "
                    "losses stay float32.")


PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
# flag -> (lowest, highest or None): the shared flags' allowed values.
RUN_FLAG_RANGES = {
    "train_steps": (1, None), "batch_size": (1, None),
    "checkpoint_every": (1, None), "keep_checkpoints": (1, None),
    "log_every": (1, None), "warmup_steps": (0, None),
    "weight_decay": (0.0, None), "clip_norm": (0.0, None),
}


def check_run_flags(ranges=None):
  """None, or one line naming the first flag out of range.

  Args:
    ranges: the command's own flags, name -> (lowest, highest or None).
  """
  f = flags.FLAGS
  nonfinite = nonfinite_float_flag()
  if nonfinite:
    return nonfinite
  rate = f.learning_rate
  if not rate > 0:
    return f"--learning_rate must be > 0, got {rate}"
  for name, (low, high) in {**RUN_FLAG_RANGES, **(ranges or {})}.items():
    value = f[name].value
    if value is None:
      continue
    if not (value >= low and (high is None or value <= high)):
      bound = f">= {low}" if high is None else f"in [{low}, {high}]"
      return f"--{name} must be {bound}, got {value}"
  if f.warmup_steps > f.train_steps:
    return (f"--warmup_steps {f.warmup_steps} exceeds --train_steps "
            f"{f.train_steps}")
  if "model_dir" in f and f.model_dir:  # every training command's output
    from tfmodels.staging import OutputError, check_writable
    try:
      check_writable(f.model_dir, "--model_dir")
    except OutputError as e:
      return str(e)
  return None


def precision_from_flags():
  """Sets the global Keras policy; call it before building any model."""
  import tf_keras as keras
  policy = flags.FLAGS.mixed_precision
  keras.mixed_precision.set_global_policy(
      "float32" if policy == "none" else policy)


def optimizer_from_flags():
  """create_optimizer with the shared flags' values.

  Under mixed_float16 it is wrapped in Keras' dynamic loss scaling, which
  `Trainer` applies; anything set on the optimizer later (learning-rate
  multipliers) goes to `inner_optimizer`.
  """
  import tf_keras as keras
  from tfmodels.training.optimization import create_optimizer
  f = flags.FLAGS
  optimizer = create_optimizer(f.optimizer, f.learning_rate, f.train_steps,
                               f.warmup_steps, f.weight_decay, f.clip_norm)
  if f.mixed_precision == "mixed_float16":
    optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
  return optimizer
