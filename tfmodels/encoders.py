"""Encoders: a stack of blocks on top of the embeddings, as a functional Keras model.

`build_encoder(config)` returns a keras.Model taking int32 `input_ids`,
`input_mask`, `segment_ids` [B, T] and returning the dict every consumer
(distillation, heads, export) reads:

  sequence_output   [B, T, hidden]   the last block's output
  pooled_output     [B, hidden]      [CLS] (dense + tanh if classifier_activation)
  embedding_output  [B, T, hidden]   input of the first block
  hidden_states     L x [B, T, hidden]  inter-block feature map after each block
  attention_scores  L x [B, N, T, T]   per-head scores BEFORE the softmax
                                       (scaled, masked); softmax them for maps
  ffn_outputs       L x [B, T, block]  output of each block's (last) FFN
  attention_contexts L x [B, T, N, H]  each head's context, the input of the
                                       attention output projection
  attention_outputs L x [B, T, block]  output of each attention sub-layer
                                       (the first FFN's input)
  ffn_activations   L x [B, T, I]    the (last) FFN's inner activations
  (the last two are what compression scores heads and neurons by)

BERT, ALBERT, KroneckerBERT and mixed-vocabulary models share one stack
(`model_type: bert`); IB-BERT, MobileBERT and TINY share another
(`model_type: mobilebert`).
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig
from tfmodels.layers.attention import (SelfAttentionBlock,
                                       attention_mask_from_input_mask)
from tfmodels.layers.embeddings import Embeddings
from tfmodels.layers.feed_forward import FeedForward
from tfmodels.layers.mobilebert_block import MobileBertBlock

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def encoder_inputs(seq_length=None):
  return {name: keras.Input(shape=(seq_length,), dtype=tf.int32, name=name)
          for name in INPUT_NAMES}


def _bert_blocks(c: ModelConfig):
  """Yields (attention, ffn) per layer, reusing objects ALBERT shares."""
  shapes = c.kronecker_factor_shapes
  attention_shapes = {k: v for k, v in shapes.items()
                      if k in ("query", "key", "value", "attention_output")}
  ffn_shapes = {k: v for k, v in shapes.items()
                if k in ("intermediate", "output")}
  attention_ranks = {k: v for k, v in c.low_rank_ranks.items()
                     if k in ("query", "key", "value", "attention_output")}
  ffn_ranks = {k: v for k, v in c.low_rank_ranks.items()
               if k in ("intermediate", "output")}
  made = {}
  for i in range(c.num_hidden_layers):
    g = c.group_of_layer(i)
    share_attention = c.sharing_mode in ("all", "attention")
    share_ffn = c.sharing_mode in ("all", "ffn")
    attention_key = f"group_{g}_attention" if share_attention else (
        f"layer_{i}_attention")
    ffn_key = f"group_{g}_ffn" if share_ffn else f"layer_{i}_ffn"
    if attention_key not in made:
      made[attention_key] = SelfAttentionBlock(
          c.num_attention_heads, c.attention_head_size,
          dropout=c.hidden_dropout_prob,
          attention_dropout=c.attention_probs_dropout_prob,
          mask_bias=c.attention_mask_bias,
          initializer_range=c.initializer_range,
          normalization_type=c.normalization_type, epsilon=c.layer_norm_eps,
          kronecker_shapes=attention_shapes,
          kronecker_num_sums=c.kronecker_num_sums,
          low_rank_ranks=attention_ranks, output_size=c.hidden_size,
          name=attention_key)
    if ffn_key not in made:
      made[ffn_key] = FeedForward(
          c.intermediate_size, c.hidden_act, dropout=c.hidden_dropout_prob,
          initializer_range=c.initializer_range,
          normalization_type=c.normalization_type, epsilon=c.layer_norm_eps,
          kronecker_shapes=ffn_shapes,
          kronecker_num_sums=c.kronecker_num_sums, low_rank_ranks=ffn_ranks,
          name=ffn_key)
    yield made[attention_key], made[ffn_key]


def build_encoder(config: ModelConfig, seq_length=None, name=None):
  """The encoder of `config` as a keras.Model (see the module docstring).

  Args:
    config: ModelConfig.
    seq_length: int or None; fix it for TFLite export.
    name: str, defaults to config.name.

  Example:
    >>> from tfmodels.configs import load_config
    >>> encoder = build_encoder(load_config("tiny_bert"))
    >>> sorted(encoder.output)[:3]
    ['attention_scores', 'embedding_output', 'ffn_outputs']
  """
  c = config
  inputs = encoder_inputs(seq_length)
  embedding_output = Embeddings(c, name="embeddings")(
      inputs["input_ids"], inputs["segment_ids"], inputs["input_mask"])
  mask = attention_mask_from_input_mask(inputs["input_mask"])

  hidden_states, attention_scores, ffn_outputs = [], [], []
  contexts, activations, attended = [], [], []
  h = embedding_output
  if c.model_type == "mobilebert":
    for i in range(c.num_hidden_layers):
      out = MobileBertBlock(c, name=f"layer_{i}")(h, mask)
      h = out["output"]
      hidden_states.append(h)
      attention_scores.append(out["attention_scores"])
      ffn_outputs.append(out["ffn_output"])
      contexts.append(out["attention_context"])
      activations.append(out["ffn_activations"])
      attended.append(out["attention_output"])
  else:
    for attention, ffn in _bert_blocks(c):
      h, scores, context = attention(h, mask, return_context=True)
      attended.append(h)
      h, inner = ffn(h, return_activations=True)
      hidden_states.append(h)
      attention_scores.append(scores)
      ffn_outputs.append(h)
      contexts.append(context)
      activations.append(inner)

  first_token = h[:, 0, :]
  if c.classifier_activation:
    pooled = keras.layers.Dense(
        c.hidden_size, activation="tanh", name="pooler",
        kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=c.initializer_range))(first_token)
  else:
    pooled = first_token
  outputs = {
      "sequence_output": h,
      "pooled_output": pooled,
      "embedding_output": embedding_output,
      "hidden_states": hidden_states,
      "attention_scores": attention_scores,
      "ffn_outputs": ffn_outputs,
      "attention_contexts": contexts,
      "attention_outputs": attended,
      "ffn_activations": activations,
  }
  return float32_model(inputs, outputs, name or c.name)


def float32_model(inputs, outputs, name):
  """keras.Model whose floating outputs are float32 under any policy.

  With a mixed precision policy the layers compute in float16 / bfloat16;
  losses and metrics still see float32 (the casts are no-ops in float32).
  """
  outputs = tf.nest.map_structure(
      lambda t: tf.cast(t, tf.float32) if t.dtype.is_floating else t,
      outputs)
  return keras.Model(inputs, outputs, name=name)
