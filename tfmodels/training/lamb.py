"""LAMB (You et al., 2019), the optimizer MobileBERT and ALBERT train with.

tf-keras has none. Per variable w with gradient g, at step t:

    m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
    u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w
    w = w - lr * r * u,   r = ||w|| / ||u||  (1 if either norm is 0)

Weight decay (`wd`) and the trust ratio `r` are skipped for variables whose
name contains any of `exclude_from_weight_decay` (default: norm and bias
variables, as in the reference recipe) / `exclude_from_layer_adaptation`
(default: the same list). `learning_rate_multipliers`, a list of (regex,
factor) pairs, scales lr for matching variables (first match wins): the
progressive transfer trains lower layers at a small rate this way. Gradient
scaling could not do it, since the trust ratio undoes any scale.
"""

import re

import tensorflow as tf
import tf_keras as keras

DEFAULT_EXCLUDE = ("norm", "bias")


@keras.utils.register_keras_serializable(package="tfmodels")
class LAMB(keras.optimizers.Optimizer):
  """Layer-wise adaptive moments optimizer.

  Args:
    learning_rate: float or a LearningRateSchedule.
    beta_1, beta_2, epsilon: Adam's moment decays and epsilon.
    weight_decay_rate: float, decoupled weight decay (reference: 0.01).
    exclude_from_weight_decay: substrings (regexes) of variable names that
      get no weight decay.
    exclude_from_layer_adaptation: substrings of variable names that get no
      trust ratio; None means the weight-decay list.
    learning_rate_multipliers: list of (regex, factor): lr * factor for the
      variables whose name matches (first match).
    Other keyword arguments (clipnorm, global_clipnorm, ...) go to Keras.
  """

  def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, weight_decay_rate=0.01,
               exclude_from_weight_decay=DEFAULT_EXCLUDE,
               exclude_from_layer_adaptation=None,
               learning_rate_multipliers=(), name="LAMB", **kwargs):
    super().__init__(name=name, **kwargs)
    self._learning_rate = self._build_learning_rate(learning_rate)
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.weight_decay_rate = weight_decay_rate
    self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
    self.exclude_from_layer_adaptation = tuple(
        self.exclude_from_weight_decay if exclude_from_layer_adaptation is None
        else exclude_from_layer_adaptation)
    self.learning_rate_multipliers = list(learning_rate_multipliers)

  def build(self, var_list):
    super().build(var_list)
    if getattr(self, "_built", False):
      return
    self._built = True
    self._m = [self.add_variable_from_reference(v, "m") for v in var_list]
    self._v = [self.add_variable_from_reference(v, "v") for v in var_list]

  @staticmethod
  def _matches(name, patterns):
    return any(re.search(p, name) for p in patterns)

  def update_step(self, gradient, variable):
    if isinstance(gradient, tf.IndexedSlices):
      gradient = tf.convert_to_tensor(gradient)
    dtype = variable.dtype
    lr = tf.cast(self.learning_rate, dtype)
    step = tf.cast(self.iterations + 1, dtype)
    b1, b2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    index = self._index_dict[self._var_key(variable)]
    m, v = self._m[index], self._v[index]
    m.assign(b1 * m + (1 - b1) * gradient)
    v.assign(b2 * v + (1 - b2) * tf.square(gradient))
    m_hat = m / (1 - tf.pow(b1, step))
    v_hat = v / (1 - tf.pow(b2, step))
    update = m_hat / (tf.sqrt(v_hat) + tf.cast(self.epsilon, dtype))
    name = variable.name
    if self.weight_decay_rate and not self._matches(
        name, self.exclude_from_weight_decay):
      update += tf.cast(self.weight_decay_rate, dtype) * variable
    ratio = tf.constant(1.0, dtype)
    if not self._matches(name, self.exclude_from_layer_adaptation):
      w_norm, u_norm = tf.norm(variable), tf.norm(update)
      ratio = tf.where((w_norm > 0) & (u_norm > 0),
                       w_norm / tf.maximum(u_norm, 1e-30), ratio)
    for pattern, factor in self.learning_rate_multipliers:
      if re.search(pattern, name):
        lr = lr * tf.cast(factor, dtype)
        break
    variable.assign_sub(lr * ratio * update)

  def get_config(self):
    config = super().get_config()
    config.update(
        learning_rate=self._serialize_hyperparameter(self._learning_rate),
        beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
        weight_decay_rate=self.weight_decay_rate,
        exclude_from_weight_decay=list(self.exclude_from_weight_decay),
        exclude_from_layer_adaptation=list(
            self.exclude_from_layer_adaptation),
        learning_rate_multipliers=[list(p) for p in
                                   self.learning_rate_multipliers])
    return config
