"""LayerNorm and MobileBERT's NoNorm (paper eq. 1: NoNorm(h) = gamma * h + beta).

NoNorm is element-wise and linear, so it needs no mean/variance/rsqrt at
inference time; that is what makes it cheap on phones and exact in int8.
"""

import tf_keras as keras
from tfmodels.layers.plain_call import plain_call


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class NoNorm(keras.layers.Layer):
  """Element-wise affine map `gamma * h + beta` over the last axis.

  Args:
    (none besides the standard Keras layer arguments)

  Example:
    >>> NoNorm()(tf.ones([2, 3, 8])).shape
    TensorShape([2, 3, 8])
  """

  def build(self, input_shape):
    width = input_shape[-1]
    self.gamma = self.add_weight("gamma", shape=[width], initializer="ones")
    self.beta = self.add_weight("beta", shape=[width], initializer="zeros")
    super().build(input_shape)

  def call(self, inputs):
    return inputs * self.gamma + self.beta


def make_normalization(normalization_type: str, epsilon: float, name: str):
  """The norm a config asks for: `layer_norm` or `no_norm`."""
  if normalization_type == "no_norm":
    return NoNorm(name=name)
  if normalization_type == "layer_norm":
    return keras.layers.LayerNormalization(axis=-1, epsilon=epsilon, name=name)
  raise ValueError(f"unknown normalization_type {normalization_type!r}")
