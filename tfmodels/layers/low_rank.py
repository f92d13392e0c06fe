"""Low-rank layers: a weight matrix stored as two factors of rank r.

A carved student (tfmodels/compression) replaces a teacher's n x m kernel W
by U (n x r) V (r x m), started from an activation-aware SVD of W; one token
then costs r (n + m) multiply-adds instead of n m. The word table V x E
becomes a V x r table times an r x E projection (ALBERT's factorisation
with the projection before the positions are added, so the positions and
the norm keep the teacher's width).
"""

import tensorflow as tf
import tf_keras as keras
from tfmodels.layers.plain_call import plain_call


def _initializer(stddev):
  return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class LowRankDense(keras.layers.Layer):
  """y = act((x U) V + b) with U [n, rank], V [rank, units].

  Args:
    units: int, m, the output width.
    rank: int, r.
    activation: str or None, applied after the bias.
    use_bias: bool.
    initializer_range: float, the std the product's entries should have.

  Example:
    >>> LowRankDense(8, rank=2)(tf.ones([3, 12])).shape
    TensorShape([3, 8])
  """

  def __init__(self, units, rank, activation=None, use_bias=True,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.units = int(units)
    self.rank = int(rank)
    self.activation = keras.activations.get(activation)
    self.use_bias = use_bias
    self.initializer_range = initializer_range

  def build(self, input_shape):
    n = int(input_shape[-1])
    # Each product entry sums r products: scale both factors so it has
    # std initializer_range.
    std = (self.initializer_range / self.rank ** 0.5) ** 0.5
    self.kernel_u = self.add_weight("kernel_u", shape=(n, self.rank),
                                    initializer=_initializer(std))
    self.kernel_v = self.add_weight("kernel_v", shape=(self.rank, self.units),
                                    initializer=_initializer(std))
    self.bias = (self.add_weight("bias", shape=(self.units,),
                                 initializer="zeros")
                 if self.use_bias else None)
    super().build(input_shape)

  def call(self, inputs):
    y = tf.matmul(tf.matmul(inputs, self.kernel_u), self.kernel_v)
    if self.bias is not None:
      y = y + self.bias
    return self.activation(y)

  def dense_kernel(self):
    """The product U V [n, m], the Keras kernel it stands for."""
    return tf.matmul(self.kernel_u, self.kernel_v)

  def get_config(self):
    config = super().get_config()
    config.update(units=self.units, rank=self.rank,
                  activation=keras.activations.serialize(self.activation),
                  use_bias=self.use_bias,
                  initializer_range=self.initializer_range)
    return config


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class LowRankEmbedding(keras.layers.Layer):
  """A vocab x embedding_size table stored as [vocab, rank] x [rank, size].

  Example:
    >>> LowRankEmbedding(100, 32, rank=4)(tf.constant([[1, 2]])).shape
    TensorShape([1, 2, 32])
  """

  def __init__(self, vocab_size, embedding_size, rank, initializer_range=0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = int(vocab_size)
    self.embedding_size = int(embedding_size)
    self.rank = int(rank)
    self.initializer_range = initializer_range

  def build(self, input_shape):
    std = (self.initializer_range / self.rank ** 0.5) ** 0.5
    self.table = self.add_weight("table", shape=(self.vocab_size, self.rank),
                                 initializer=_initializer(std))
    self.projection = self.add_weight(
        "projection", shape=(self.rank, self.embedding_size),
        initializer=_initializer(std))
    super().build(input_shape)

  def call(self, ids):
    return tf.matmul(tf.gather(self.table, ids), self.projection)

  @property
  def embeddings(self):
    """The full vocab x size table (for a tied MLM decoder)."""
    return tf.matmul(self.table, self.projection)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size,
                  embedding_size=self.embedding_size, rank=self.rank,
                  initializer_range=self.initializer_range)
    return config
