"""The position-wise feed-forward sub-layer: norm(h + dense(act(dense(h))))."""

import tf_keras as keras

from tfmodels.layers.activations import get_activation
from tfmodels.layers.kronecker import make_dense, plain_shapes
from tfmodels.layers.normalization import make_normalization
from tfmodels.layers.plain_call import plain_call


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class FeedForward(keras.layers.Layer):
  """FFN with residual and norm; BERT's, and each of MobileBERT's stacked FFNs.

  Args:
    intermediate_size: int, width of the inner layer.
    activation: str, a name from tfmodels.layers.activations.
    dropout: float, on the output before the residual.
    initializer_range: float.
    normalization_type: str, `layer_norm` or `no_norm`.
    epsilon: float.
    kronecker_shapes: dict or None, A-factor shapes for `intermediate` and
      `output` (KroneckerBERT).
    kronecker_num_sums: int.
    low_rank_ranks: dict or None, rank of `intermediate` / `output`
      (LowRankDense).

  Call args:
    h: [B, T, D]; return_activations: bool, also return the inner
      activations [B, T, intermediate_size] (what neuron pruning scores).

  Example:
    >>> FeedForward(16, "relu")(tf.ones([1, 3, 8])).shape
    TensorShape([1, 3, 8])
  """

  def __init__(self, intermediate_size, activation="gelu", dropout=0.0,
               initializer_range=0.02, normalization_type="layer_norm",
               epsilon=1e-12, kronecker_shapes=None, kronecker_num_sums=1,
               low_rank_ranks=None, **kwargs):
    super().__init__(**kwargs)
    self._config = dict(
        intermediate_size=intermediate_size, activation=activation,
        dropout=dropout, initializer_range=initializer_range,
        normalization_type=normalization_type, epsilon=epsilon,
        kronecker_shapes=dict(kronecker_shapes or {}),
        kronecker_num_sums=kronecker_num_sums,
        low_rank_ranks=dict(low_rank_ranks or {}))
    self.activation = get_activation(activation)
    self.kronecker_shapes = dict(kronecker_shapes or {})
    self.kronecker_num_sums = kronecker_num_sums
    self.low_rank_ranks = dict(low_rank_ranks or {})
    self.intermediate = make_dense(
        intermediate_size, "intermediate", initializer_range,
        self.kronecker_shapes.get("intermediate"), kronecker_num_sums,
        low_rank=self.low_rank_ranks.get("intermediate", 0))
    self.dropout = keras.layers.Dropout(dropout)
    self.norm = make_normalization(normalization_type, epsilon, "norm")
    self.initializer_range = initializer_range

  def build(self, input_shape):
    # The output width is the input width (residual), known only here.
    self.output_dense = make_dense(
        int(input_shape[-1]), "output", self.initializer_range,
        self.kronecker_shapes.get("output"), self.kronecker_num_sums,
        low_rank=self.low_rank_ranks.get("output", 0))
    super().build(input_shape)

  def call(self, h, training=None, return_activations=False):
    inner = self.activation(self.intermediate(h))
    out = self.dropout(self.output_dense(inner), training=training)
    out = self.norm(h + out)
    return (out, inner) if return_activations else out

  def get_config(self):
    config = super().get_config()
    config.update(self._config)
    config.update(kronecker_shapes=plain_shapes(self._config[
        "kronecker_shapes"]), low_rank_ranks=dict(self._config[
            "low_rank_ranks"]))
    return config
