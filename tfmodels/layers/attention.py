"""Multi-head attention written out, so it can hand back per-head scores.

Distillation needs every head's attention map (MobileBERT AT, KroneckerBERT
eq. 9), and int8 conversion needs a bounded mask adder, neither of which
keras' MultiHeadAttention offers. Query, key and value may come from
different tensors of different widths (MobileBERT's shared bottleneck).
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.layers.kronecker import make_dense, plain_shapes
from tfmodels.layers.normalization import make_normalization
from tfmodels.layers.plain_call import plain_call


def static_or_dynamic_shape(x):
  """x's shape as a list, static where known: keeps fixed-shape exports free of
  Shape/StridedSlice ops."""
  return [d if d is not None else tf.shape(x)[i] for i, d in enumerate(x.shape)]


def reshape_dims(x, keep):
  """x's first `keep` dims as a reshape target: static where known, a single
  unknown one as -1 (a dynamic-length export then has no SHAPE ops around
  its reshapes), tf.shape's where more are unknown."""
  dims = list(x.shape[:keep])
  unknown = [i for i, d in enumerate(dims) if d is None]
  if len(unknown) == 1:
    dims[unknown[0]] = -1
    return dims
  return static_or_dynamic_shape(x)[:keep]


def attention_mask_from_input_mask(input_mask, dtype=tf.float32):
  """[B, T] 0/1 mask -> [B, 1, 1, T] float, broadcast over heads and queries."""
  return tf.cast(input_mask, dtype)[:, None, None, :]


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class MultiHeadAttention(keras.layers.Layer):
  """Scaled dot-product attention over N heads with a bounded mask adder.

  Masked scores are set to exactly `mask_bias` (scores * mask + (1 - mask) *
  mask_bias, as Google's MobileBERT does) so the tensor stays in a small
  range for int8, yet exp(-120) underflows to 0 in float32.

  Args:
    num_heads: int, N.
    head_size: int, H; q/k/v projections have N * H units.
    output_size: int, width of the output projection.
    dropout: float, on the attention probabilities.
    mask_bias: float (< 0), the score given to padded keys.
    initializer_range: float.
    kronecker_shapes: dict or None, A-factor shape per projection name
      (query, key, value, attention_output) for KroneckerBERT.
    kronecker_num_sums: int.
    low_rank_ranks: dict or None, rank per projection name (LowRankDense).

  Call args:
    query, key, value: [B, F, Dq], [B, T, Dk], [B, T, Dv].
    attention_mask: [B, 1, 1, T] float 0/1 (see attention_mask_from_input_mask).
    return_context: bool, also return each head's context.

  Returns:
    (output [B, F, output_size], scores [B, N, F, T] before the softmax, after
    scaling and masking: softmax(scores) is the attention distribution), and
    with return_context the per-head context [B, F, N, H] that the output
    projection reads (what head pruning scores).

  Example:
    >>> mha = MultiHeadAttention(num_heads=2, head_size=4, output_size=8)
    >>> x = tf.ones([1, 3, 8]); m = tf.ones([1, 1, 1, 3])
    >>> [t.shape for t in mha(x, x, x, m)]
    [TensorShape([1, 3, 8]), TensorShape([1, 2, 3, 3])]
  """

  def __init__(self, num_heads, head_size, output_size, dropout=0.0,
               mask_bias=-120.0, initializer_range=0.02, kronecker_shapes=None,
               kronecker_num_sums=1, low_rank_ranks=None, **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.head_size = head_size
    self.output_size = output_size
    self.dropout_rate = dropout
    self.mask_bias = mask_bias
    self.initializer_range = initializer_range
    self.kronecker_shapes = dict(kronecker_shapes or {})
    self.kronecker_num_sums = kronecker_num_sums
    self.low_rank_ranks = dict(low_rank_ranks or {})

    width = num_heads * head_size
    dense = lambda units, name: make_dense(
        units, name, initializer_range, self.kronecker_shapes.get(name),
        kronecker_num_sums, low_rank=self.low_rank_ranks.get(name, 0))
    self.query_dense = dense(width, "query")
    self.key_dense = dense(width, "key")
    self.value_dense = dense(width, "value")
    self.output_dense = dense(output_size, "attention_output")
    self.dropout = keras.layers.Dropout(dropout)

  def _split_heads(self, x):
    shape = reshape_dims(x, x.shape.rank - 1) + [self.num_heads,
                                                 self.head_size]
    return tf.reshape(x, shape)                             # [B, T, N, H]

  def call(self, query, key, value, attention_mask=None, training=None,
           return_context=False):
    q = self._split_heads(self.query_dense(query))
    k = self._split_heads(self.key_dense(key))
    v = self._split_heads(self.value_dense(value))
    scores = tf.einsum("BFNH,BTNH->BNFT", q, k) * (self.head_size ** -0.5)
    scores = self.masked_scores(scores, attention_mask)
    probs = self.dropout(self.attention_probabilities(scores),
                         training=training)
    context = tf.einsum("BNFT,BTNH->BFNH", probs, v)
    shape = reshape_dims(context, 2) + [self.num_heads * self.head_size]
    output = self.output_dense(tf.reshape(context, shape))
    return (output, scores, context) if return_context else (output, scores)

  # masked_scores and attention_probabilities are methods of their own so
  # that quantization-aware training (converters/qat.py) can round the
  # scores and probabilities where int8 conversion does.
  def masked_scores(self, scores, attention_mask):
    """Padded keys' scores set to exactly mask_bias."""
    if attention_mask is None:
      return scores
    mask = tf.cast(attention_mask, scores.dtype)
    return scores * mask + (1.0 - mask) * self.mask_bias

  def attention_probabilities(self, scores):
    """softmax over the keys."""
    return tf.nn.softmax(scores, axis=-1)

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, head_size=self.head_size,
                  output_size=self.output_size, dropout=self.dropout_rate,
                  mask_bias=self.mask_bias,
                  initializer_range=self.initializer_range,
                  kronecker_shapes=plain_shapes(self.kronecker_shapes),
                  kronecker_num_sums=self.kronecker_num_sums,
                  low_rank_ranks=dict(self.low_rank_ranks))
    return config


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class SelfAttentionBlock(keras.layers.Layer):
  """BERT's attention sub-layer: norm(x + dropout(MHA(x, x, x))).

  One layer so that ALBERT's attention-only sharing shares the norm with the
  attention, as ALBERT does.

  Args:
    num_heads, head_size, dropout, attention_dropout, mask_bias,
    initializer_range, kronecker_shapes, kronecker_num_sums, low_rank_ranks:
      see MultiHeadAttention.
    output_size: int, the input (residual) width D; None means
      num_heads * head_size (a block whose heads were not pruned).
    normalization_type: str, `layer_norm` or `no_norm`.
    epsilon: float.

  Returns:
    (output [B, T, D], scores [B, N, T, T]), and with return_context the
    per-head context [B, T, N, H].

  Example:
    >>> block = SelfAttentionBlock(num_heads=2, head_size=4)
    >>> block(tf.ones([1, 3, 8]), tf.ones([1, 1, 1, 3]))[0].shape
    TensorShape([1, 3, 8])
  """

  def __init__(self, num_heads, head_size, dropout=0.0, attention_dropout=0.0,
               mask_bias=-120.0, initializer_range=0.02,
               normalization_type="layer_norm", epsilon=1e-12,
               kronecker_shapes=None, kronecker_num_sums=1,
               low_rank_ranks=None, output_size=None, **kwargs):
    super().__init__(**kwargs)
    output_size = output_size or num_heads * head_size
    self._config = dict(
        num_heads=num_heads, head_size=head_size, dropout=dropout,
        attention_dropout=attention_dropout, mask_bias=mask_bias,
        initializer_range=initializer_range,
        normalization_type=normalization_type, epsilon=epsilon,
        kronecker_shapes=dict(kronecker_shapes or {}),
        kronecker_num_sums=kronecker_num_sums,
        low_rank_ranks=dict(low_rank_ranks or {}), output_size=output_size)
    self.attention = MultiHeadAttention(
        num_heads, head_size, output_size=output_size,
        dropout=attention_dropout, mask_bias=mask_bias,
        initializer_range=initializer_range, kronecker_shapes=kronecker_shapes,
        kronecker_num_sums=kronecker_num_sums, low_rank_ranks=low_rank_ranks,
        name="self_attention")
    self.dropout = keras.layers.Dropout(dropout)
    self.norm = make_normalization(normalization_type, epsilon, "norm")

  def call(self, x, attention_mask=None, training=None, return_context=False):
    out, scores, context = self.attention(x, x, x, attention_mask,
                                          training=training,
                                          return_context=True)
    out = self.norm(x + self.dropout(out, training=training))
    return (out, scores, context) if return_context else (out, scores)

  def get_config(self):
    config = super().get_config()
    config.update(self._config)
    config.update(kronecker_shapes=plain_shapes(self._config[
        "kronecker_shapes"]), low_rank_ranks=dict(self._config[
            "low_rank_ranks"]))
    return config
