"""One MobileBERT / IB-BERT block (MobileBERT paper, Figure 1 and Table 1).

With bottlenecks (REFERENCE.md, "Block structure"):
  layer_input = norm(dense_{inter->intra}(x))
  q, k, v     = x, x, x                         (IB-BERT teacher)
              | s, s, x with s = norm(dense(x)) (shared key/query bottleneck)
              | layer_input x 3                 (TINY, bottleneck attention)
  h = norm(MHA(q, k, v) + layer_input)
  h = norm(dense(act(dense(h))) + h)            (x num_feedforward_networks)
  out = norm(dense_{intra->inter}(h) + x)
The teacher and the student are this one class with two configs.
"""

import tf_keras as keras

from tfmodels.configs import ModelConfig
from tfmodels.layers.attention import MultiHeadAttention
from tfmodels.layers.dense import Dense
from tfmodels.layers.feed_forward import FeedForward
from tfmodels.layers.normalization import make_normalization
from tfmodels.layers.plain_call import plain_call


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class MobileBertBlock(keras.layers.Layer):
  """A bottleneck (student) or inverted-bottleneck (teacher) block.

  Args:
    config: ModelConfig (model_type `mobilebert`) or its dict.

  Call args:
    x: [B, T, hidden_size]; attention_mask: [B, 1, 1, T].

  Returns:
    dict with `output` [B, T, hidden_size], `attention_scores` [B, N, T, T]
    (pre-softmax), `ffn_output` [B, T, intra_bottleneck_size],
    `attention_context` [B, T, N, head size] (each head's context) and
    `ffn_activations` [B, T, intermediate_size] (the last FFN's inner layer)
    and `attention_output` [B, T, intra_bottleneck_size] (the first FFN's
    input).

  Example:
    >>> from tfmodels.configs import load_config
    >>> block = MobileBertBlock(load_config("tiny_mobilebert"))
    >>> block(tf.ones([1, 4, 32]), tf.ones([1, 1, 1, 4]))["output"].shape
    TensorShape([1, 4, 32])
  """

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    c = self.config = ModelConfig.coerce(config)
    norm = lambda name: make_normalization(c.normalization_type,
                                           c.layer_norm_eps, name)
    dense = lambda units, name: Dense(
        units, name=name, kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=c.initializer_range))
    if c.use_bottleneck:
      self.bottleneck_input = dense(c.intra_bottleneck_size,
                                    "bottleneck_input")
      self.bottleneck_input_norm = norm("bottleneck_input_norm")
      if c.key_query_shared_bottleneck:
        self.shared_qk = dense(c.intra_bottleneck_size, "shared_query_key")
        self.shared_qk_norm = norm("shared_query_key_norm")
    self.attention = MultiHeadAttention(
        c.num_attention_heads, c.attention_head_size, c.block_size,
        dropout=c.attention_probs_dropout_prob, mask_bias=c.attention_mask_bias,
        initializer_range=c.initializer_range, name="self_attention")
    # Google's block drops out only outside the bottleneck.
    inner_dropout = 0.0 if c.use_bottleneck else c.hidden_dropout_prob
    self.attention_dropout = keras.layers.Dropout(inner_dropout)
    self.attention_norm = norm("attention_norm")
    self.ffns = [
        FeedForward(c.intermediate_size, c.hidden_act,
                    dropout=(inner_dropout
                             if i == c.num_feedforward_networks - 1 else 0.0),
                    initializer_range=c.initializer_range,
                    normalization_type=c.normalization_type,
                    epsilon=c.layer_norm_eps, name=f"ffn_{i}")
        for i in range(c.num_feedforward_networks)]
    if c.use_bottleneck:
      self.bottleneck_output = dense(c.hidden_size, "bottleneck_output")
      self.output_dropout = keras.layers.Dropout(c.hidden_dropout_prob)
      self.bottleneck_output_norm = norm("bottleneck_output_norm")

  def call(self, x, attention_mask=None, training=None):
    c = self.config
    layer_input = q = k = v = x
    if c.use_bottleneck:
      layer_input = self.bottleneck_input_norm(self.bottleneck_input(x))
      if c.use_bottleneck_attention:
        q = k = v = layer_input
      elif c.key_query_shared_bottleneck:
        q = k = self.shared_qk_norm(self.shared_qk(x))
    attended, scores, context = self.attention(
        q, k, v, attention_mask, training=training, return_context=True)
    h = attention_output = self.attention_norm(
        self.attention_dropout(attended, training=training) + layer_input)
    for ffn in self.ffns:
      h, activations = ffn(h, training=training, return_activations=True)
    out = h
    if c.use_bottleneck:
      out = self.bottleneck_output_norm(
          self.output_dropout(self.bottleneck_output(h), training=training) + x)
    return {"output": out, "attention_scores": scores, "ffn_output": h,
            "attention_context": context, "ffn_activations": activations,
            "attention_output": attention_output}

  def get_config(self):
    config = super().get_config()
    config["config"] = self.config.to_dict()
    return config
