"""Kronecker-factored layers (KroneckerBERT, Tahaei et al., section 3).

`KroneckerDense` stores W (m x n) = sum_r A_r (x) B_r and never builds W: by
eq. 6, (A (x) B) x = vec(B X A^T) with X the n2 x n1 reshape of x, which costs
about m2 n1 (n2 + m1) multiply-adds instead of m n. `KroneckerEmbedding` stores
a vocab x d/n table A^E and a row vector B^E (eq. 8), so each word's vector is
the outer product of its row with B^E.
"""

import math

import tensorflow as tf
import tf_keras as keras

from tfmodels.layers.dense import Dense
from tfmodels.layers.low_rank import LowRankDense
from tfmodels.layers.plain_call import plain_call


def kronecker_contraction_order(a_shape, b_shape) -> str:
  """Which factor to contract first: the cheaper order of eq. 7.

  Returns "b_first" (X B^T, then A) or "a_first" (A X, then B^T).
  """
  (m1, n1), (m2, n2) = a_shape, b_shape
  b_first = n1 * n2 * m2 + n1 * m2 * m1
  a_first = n2 * n1 * m1 + m1 * n2 * m2
  return "b_first" if b_first <= a_first else "a_first"


def kronecker_macs(a_shape, b_shape, num_sums=1) -> int:
  """Multiply-adds of one vector product through eq. 6 in the cheaper order."""
  (m1, n1), (m2, n2) = a_shape, b_shape
  return num_sums * min(n1 * n2 * m2 + n1 * m2 * m1,
                        n2 * n1 * m1 + m1 * n2 * m2)


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class KroneckerDense(keras.layers.Layer):
  """A dense layer whose kernel is a sum of Kronecker products.

  Args:
    units: int, m, the output width.
    a_shape: (int, int), (m1, n1), the shape of each factor A_r; B_r is then
      (m / m1, n / n1) with n the input width.
    num_sums: int, r, the number of Kronecker products summed.
    activation: str or None, applied after the bias.
    use_bias: bool.
    initializer_range: float, the std the implied dense kernel should have.

  Example:
    >>> layer = KroneckerDense(8, a_shape=(2, 4), num_sums=2)
    >>> layer(tf.ones([3, 12])).shape
    TensorShape([3, 8])
  """

  def __init__(self, units, a_shape, num_sums=1, activation=None,
               use_bias=True, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.units = int(units)
    self.a_shape = tuple(int(v) for v in a_shape)
    self.num_sums = int(num_sums)
    self.activation = keras.activations.get(activation)
    self.use_bias = use_bias
    self.initializer_range = initializer_range

  def build(self, input_shape):
    n = int(input_shape[-1])
    m1, n1 = self.a_shape
    if self.units % m1 or n % n1:
      raise ValueError(f"{self.name}: A shape {self.a_shape} must divide the"
                       f" kernel shape ({self.units}, {n})")
    self.b_shape = (self.units // m1, n // n1)
    # Each kernel entry is a sum of r products of an A and a B entry; scale
    # both factors so the entries have std initializer_range.
    std = math.sqrt(self.initializer_range) / self.num_sums ** 0.25
    init = lambda: keras.initializers.TruncatedNormal(stddev=std)
    self.kronecker_a = self.add_weight(
        "kronecker_a", shape=(self.num_sums, m1, n1), initializer=init())
    self.kronecker_b = self.add_weight(
        "kronecker_b", shape=(self.num_sums,) + self.b_shape,
        initializer=init())
    self.bias = (self.add_weight("bias", shape=(self.units,),
                                 initializer="zeros")
                 if self.use_bias else None)
    self.order = kronecker_contraction_order(self.a_shape, self.b_shape)
    super().build(input_shape)

  def call(self, inputs):
    m1, n1 = self.a_shape
    m2, n2 = self.b_shape
    lead = [d if d is not None else tf.shape(inputs)[i]
            for i, d in enumerate(inputs.shape[:-1])]
    # Row-major x.reshape(n1, n2) is X^T of eq. 6, so y = A X^T B^T, flattened.
    x = tf.reshape(inputs, [-1, n1, n2])
    if self.order == "b_first":
      t = tf.einsum("bjk,rlk->brjl", x, self.kronecker_b)        # [b,r,n1,m2]
      y = tf.einsum("rij,brjl->bil", self.kronecker_a, t)        # [b,m1,m2]
    else:
      t = tf.einsum("rij,bjk->brik", self.kronecker_a, x)        # [b,r,m1,n2]
      y = tf.einsum("brik,rlk->bil", t, self.kronecker_b)        # [b,m1,m2]
    y = tf.reshape(y, lead + [self.units])
    if self.bias is not None:
      y = y + self.bias
    return self.activation(y)

  def dense_kernel(self):
    """The explicit Keras kernel [n, m] = (sum_r A_r (x) B_r)^T, for tests/export."""
    a, b = self.kronecker_a, self.kronecker_b
    m1, n1 = self.a_shape
    m2, n2 = self.b_shape
    w = tf.einsum("rij,rkl->ikjl", a, b)  # [m1, m2, n1, n2]
    return tf.transpose(tf.reshape(w, [m1 * m2, n1 * n2]))

  def get_config(self):
    config = super().get_config()
    config.update(units=self.units, a_shape=self.a_shape,
                  num_sums=self.num_sums,
                  activation=keras.activations.serialize(self.activation),
                  use_bias=self.use_bias,
                  initializer_range=self.initializer_range)
    return config


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class KroneckerEmbedding(keras.layers.Layer):
  """Embedding table X = A^E (x) B^E with B^E a row vector (paper eq. 8).

  Args:
    vocab_size: int, rows of the table.
    embedding_size: int, d, the width of each word vector.
    row_vector_size: int, n, the length of B^E; A^E is vocab x d/n.
    initializer_range: float.

  Example:
    >>> KroneckerEmbedding(100, 32, 4)(tf.constant([[1, 2]])).shape
    TensorShape([1, 2, 32])
  """

  def __init__(self, vocab_size, embedding_size, row_vector_size,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    if embedding_size % row_vector_size:
      raise ValueError(f"{self.name}: row_vector_size {row_vector_size} must"
                       f" divide embedding_size {embedding_size}")
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.row_vector_size = row_vector_size
    self.initializer_range = initializer_range

  def build(self, input_shape):
    std = math.sqrt(self.initializer_range)
    self.table_a = self.add_weight(
        "kronecker_a",
        shape=(self.vocab_size, self.embedding_size // self.row_vector_size),
        initializer=keras.initializers.TruncatedNormal(stddev=std))
    self.row_b = self.add_weight(
        "kronecker_b", shape=(self.row_vector_size,),
        initializer=keras.initializers.TruncatedNormal(stddev=std))
    super().build(input_shape)

  def call(self, ids):
    rows = tf.gather(self.table_a, ids)                  # [..., d/n]
    outer = rows[..., :, None] * self.row_b              # [..., d/n, n]
    shape = [d if d is not None else tf.shape(ids)[i]
             for i, d in enumerate(ids.shape)]
    return tf.reshape(outer, shape + [self.embedding_size])

  @property
  def embeddings(self):
    """The full vocab x d table (for a tied MLM decoder)."""
    return tf.reshape(self.table_a[:, :, None] * self.row_b,
                      [self.vocab_size, self.embedding_size])

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size,
                  embedding_size=self.embedding_size,
                  row_vector_size=self.row_vector_size,
                  initializer_range=self.initializer_range)
    return config


def plain_shapes(shapes):
  """{name: [m1, n1]}: a layer's kronecker_shapes as plain JSON for its
  config (Keras wraps a layer's dict attributes in trackable wrappers)."""
  return {name: [int(v) for v in shape] for name, shape in shapes.items()}


def make_dense(units, name, initializer_range, kronecker_shape=None,
               num_sums=1, activation=None, low_rank=0):
  """A Dense layer, or a KroneckerDense when the config factorises it, or a
  LowRankDense of rank `low_rank` (a carved student's)."""
  if low_rank:
    return LowRankDense(units, low_rank, activation=activation,
                        initializer_range=initializer_range, name=name)
  if kronecker_shape:
    return KroneckerDense(units, a_shape=kronecker_shape, num_sums=num_sums,
                          activation=activation,
                          initializer_range=initializer_range, name=name)
  return Dense(
      units, activation=activation, name=name,
      kernel_initializer=keras.initializers.TruncatedNormal(
          stddev=initializer_range))

