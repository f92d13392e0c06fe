"""The flags every training command shares (steps, batch, optimizer, runs).

Each command's options inherit `RunOptions` (with its own defaults) and
add what is particular to it, so `pretrain`, `distill` and `finetune` read the
same way on the command line. `check_run_flags` checks their values (and
the command's own ranges) before any work: a zero interval or a negative
rate would otherwise fail mid-run, after checkpoints were written; so is
--model_dir's writability. nan and inf are refused for every float flag
first, by the command's `main` (`tfmodels.flag_checks`), so the ranges
below compare numbers.

A command's `main` reads the flags once into its options
(`tfmodels.command_options`) and passes that down: nothing here reads
absl's FLAGS.

    options = from_flags(PretrainOptions)
    error = nonfinite_float_flag(FLAGS) or check_run_flags(options)
"""

import dataclasses

from tfmodels.command_options import option
from tfmodels.training.loop import STRATEGIES
from tfmodels.training.optimization import OPTIMIZERS


PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
  """The shared flags, one option each; a command's options inherit it and
  give `train_steps`, `learning_rate` and `optimizer` its own defaults
  (`command_options.redefault`)."""
  train_steps: int = option(1000, "Total optimizer steps.")
  batch_size: int = option(32, "Global batch size.")
  optimizer: str = option("lamb", "Optimizer.", choices=OPTIMIZERS)
  learning_rate: float = option(1e-3, "Peak learning rate.")
  warmup_steps: int = option(0, "Linear warm-up steps.")
  weight_decay: float = option(
      0.01, "Weight decay (not on norm / bias variables).")
  clip_norm: float = option(1.0, "Global-norm clipping; 0 disables.")
  checkpoint_every: int = option(100, "Steps between checkpoints.")
  keep_checkpoints: int = option(3, "Checkpoints kept (newest).")
  log_every: int = option(10, "Steps between summaries.")
  distribution_strategy: str = option("one_device", "tf.distribute strategy.",
                                      choices=STRATEGIES)
  seed: int = option(0, "Seed for initialisation and shuffling.")
  mixed_precision: str = option(
      "none", "Keras precision policy: layers compute in float16 (with "
      "dynamic loss scaling) or bfloat16, variables and losses stay "
      "float32.", choices=PRECISIONS)


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
