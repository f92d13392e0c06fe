"""Dense for [..., T, D] inputs whose length may be unknown.

Keras' Dense multiplies rank > 2 inputs with tf.tensordot, whose reshapes are
computed from the input's shape: when the sequence length is unknown (an
export with a dynamic length, converters/export.py) every layer converts to
SHAPE, GATHER, REDUCE_PROD, PACK, CONCATENATION and two RESHAPEs around its
FULLY_CONNECTED, which XNNPACK leaves out (57 partitions instead of 1 in a
carved MiniLM). A broadcast tf.matmul converts to the FULLY_CONNECTED alone.
Where every dimension but the batch is known (training, fixed-length
exports) the layer is Keras' own: tensordot trains faster on CPU (a MiniLM
FFN layer's step: 19 vs 22 ms with matmul) and the numbers stay as they
were.
"""

import tensorflow as tf
import tf_keras as keras
from tfmodels.layers.plain_call import plain_call


def dense_product(x, kernel):
  """x [..., D] times kernel [D, O]: Keras' tensordot where every dimension
  but the batch is known, else one broadcast matmul."""
  shape = x.shape
  if shape.rank is not None and shape.rank >= 3 and any(
      d is None for d in shape[1:]):
    return tf.matmul(x, tf.cast(kernel, x.dtype))
  return tf.tensordot(x, tf.cast(kernel, x.dtype), [[shape.rank - 1], [0]])


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class Dense(keras.layers.Dense):
  """keras.layers.Dense; inputs with an unknown length go through one
  broadcast matmul (`dense_product`).

    >>> Dense(4)(tf.ones([1, 3, 8])).shape
    TensorShape([1, 3, 4])
  """

  def call(self, inputs):
    shape = inputs.shape
    if (shape.rank is None or shape.rank < 3
        or all(d is not None for d in shape[1:])
        or not isinstance(inputs, tf.Tensor)):
      return super().call(inputs)
    outputs = dense_product(inputs, self.kernel)
    if self.use_bias:
      outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, inputs.dtype))
    if self.activation is not None:
      outputs = self.activation(outputs)
    return outputs
