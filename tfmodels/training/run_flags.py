"""The flags every training command shares (steps, batch, optimizer, runs).

Each command calls `define_run_flags` with its own defaults, then defines
what is particular to it, so `pretrain`, `distill` and `finetune` read the
same way on the command line. `check_run_flags` checks their values (and
the command's own ranges) before any work: a zero interval or a negative
rate would otherwise fail mid-run, after checkpoints were written; so is
--model_dir's writability. nan and inf are refused for every float flag
first, by the command's `main` (`tfmodels.flag_checks`), so the ranges
below compare numbers.

A command's `main` reads the flags once into its options, a frozen
dataclass that inherits `RunOptions` (the shared flags) and adds its own,
and passes that down: nothing here reads absl's FLAGS.

    options = from_flags(PretrainOptions)
    error = nonfinite_float_flag(FLAGS) or check_run_flags(options)
"""

import dataclasses

from absl import flags

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


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """The shared flags (`define_run_flags`), one field each; a command's
  options inherit it."""
  train_steps: int
  batch_size: int
  optimizer: str
  learning_rate: float
  warmup_steps: int
  weight_decay: float
  clip_norm: float
  checkpoint_every: int
  keep_checkpoints: int
  log_every: int
  distribution_strategy: str
  seed: int
  mixed_precision: str


PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
# flag -> (lowest, highest or None): the shared flags' allowed values.
RUN_FLAG_RANGES = {
    "train_steps": (1, None), "batch_size": (1, None),
    "checkpoint_every": (1, None), "keep_checkpoints": (1, None),
    "log_every": (1, None), "warmup_steps": (0, None),
    "weight_decay": (0.0, None), "clip_norm": (0.0, None),
}


def check_run_flags(options, ranges=None):
  """None, or one line naming the first flag out of range.

  Args:
    options: the command's options (a `RunOptions`); the caller has refused
      non-finite floats (`tfmodels.flag_checks.nonfinite_float_flag`).
    ranges: the command's own flags, name -> (lowest, highest or None).
  """
  rate = options.learning_rate
  if not rate > 0:
    return f"--learning_rate must be > 0, got {rate}"
  for name, (low, high) in {**RUN_FLAG_RANGES, **(ranges or {})}.items():
    value = getattr(options, name)
    if value is None:
      continue
    if not (value >= low and (high is None or value <= high)):
      bound = f">= {low}" if high is None else f"in [{low}, {high}]"
      return f"--{name} must be {bound}, got {value}"
  if options.warmup_steps > options.train_steps:
    return (f"--warmup_steps {options.warmup_steps} exceeds --train_steps "
            f"{options.train_steps}")
  model_dir = getattr(options, "model_dir", None)
  if model_dir:  # every training command's output
    from tfmodels.staging import OutputError, check_writable
    try:
      check_writable(model_dir, "--model_dir")
    except OutputError as e:
      return str(e)
  return None


def set_precision(options):
  """Sets the global Keras policy from --mixed_precision; call it before
  building any model."""
  import tf_keras as keras
  policy = options.mixed_precision
  keras.mixed_precision.set_global_policy(
      "float32" if policy == "none" else policy)


def optimizer_from_options(options):
  """create_optimizer with the shared flags' values.

  Under mixed_float16 it is wrapped in Keras' dynamic loss scaling, which
  `Trainer` applies; anything set on the optimizer later (learning-rate
  multipliers) goes to `inner_optimizer`.
  """
  import tf_keras as keras
  from tfmodels.training.optimization import create_optimizer
  o = options
  optimizer = create_optimizer(o.optimizer, o.learning_rate, o.train_steps,
                               o.warmup_steps, o.weight_decay, o.clip_norm)
  if o.mixed_precision == "mixed_float16":
    optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
  return optimizer
