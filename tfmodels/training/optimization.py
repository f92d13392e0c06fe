"""Learning-rate schedule and optimizers of the papers' recipes.

Linear warm-up to the peak rate, then polynomial (default linear) decay to
`end_learning_rate` at `total_steps`; LAMB or AdamW with weight decay that
skips norm and bias variables; global-norm clipping (1.0 in the recipes).
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.training.lamb import DEFAULT_EXCLUDE, LAMB

OPTIMIZERS = ("lamb", "adamw")


@keras.utils.register_keras_serializable(package="tfmodels")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """peak * step / warmup, then polynomial decay to end at total_steps."""

  def __init__(self, peak_learning_rate, total_steps, warmup_steps=0,
               end_learning_rate=0.0, power=1.0):
    if total_steps <= 0 or not 0 <= warmup_steps <= total_steps:
      raise ValueError(f"need 0 <= warmup_steps ({warmup_steps}) <= "
                       f"total_steps ({total_steps}), total_steps > 0")
    self.peak_learning_rate = peak_learning_rate
    self.total_steps = total_steps
    self.warmup_steps = warmup_steps
    self.end_learning_rate = end_learning_rate
    self.power = power

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    peak = tf.cast(self.peak_learning_rate, tf.float32)
    warmup = tf.cast(self.warmup_steps, tf.float32)
    decay_steps = tf.maximum(tf.cast(self.total_steps, tf.float32) - warmup,
                             1.0)
    progress = tf.clip_by_value((step - warmup) / decay_steps, 0.0, 1.0)
    decayed = (peak - self.end_learning_rate) * tf.pow(
        1.0 - progress, self.power) + self.end_learning_rate
    warming = peak * (step + 1.0) / tf.maximum(warmup, 1.0)
    return tf.where(step < warmup, warming, decayed)

  def get_config(self):
    return dict(peak_learning_rate=self.peak_learning_rate,
                total_steps=self.total_steps, warmup_steps=self.warmup_steps,
                end_learning_rate=self.end_learning_rate, power=self.power)


def create_optimizer(name, learning_rate, total_steps, warmup_steps=0,
                     weight_decay=0.01, clip_norm=1.0, epsilon=1e-6):
  """LAMB or AdamW on the warm-up + decay schedule."""
  schedule = WarmupPolynomialDecay(learning_rate, total_steps, warmup_steps)
  clip = {"global_clipnorm": clip_norm} if clip_norm else {}
  if name == "lamb":
    return LAMB(schedule, epsilon=epsilon, weight_decay_rate=weight_decay,
                **clip)
  if name == "adamw":
    optimizer = keras.optimizers.AdamW(learning_rate=schedule,
                                       weight_decay=weight_decay,
                                       epsilon=epsilon, **clip)
    optimizer.exclude_from_weight_decay(var_names=list(DEFAULT_EXCLUDE))
    return optimizer
  raise ValueError(f"optimizer {name!r} is not one of {OPTIMIZERS}")
