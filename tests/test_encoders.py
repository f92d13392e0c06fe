import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_CONFIGS, make_features
from tfmodels.configs import load_config
from tfmodels.encoders import build_encoder
from tfmodels.layers.attention import SelfAttentionBlock
from tfmodels.layers.feed_forward import FeedForward
from tfmodels.summary import count

IDS = [[2, 14, 33, 7, 51, 3]]


@pytest.mark.parametrize("name", TINY_CONFIGS)
def test_outputs_follow_the_contract(name):
  config = load_config(name)
  out = build_encoder(config)(make_features(IDS, segment_split=3))
  B, T, H, L = 1, len(IDS[0]), config.hidden_size, config.num_hidden_layers
  assert out["sequence_output"].shape == (B, T, H)
  assert out["embedding_output"].shape == (B, T, H)
  assert out["pooled_output"].shape == (B, H)
  assert len(out["hidden_states"]) == len(out["attention_scores"]) == L
  assert len(out["ffn_outputs"]) == L
  assert out["attention_scores"][0].shape == (B, config.num_attention_heads,
                                              T, T)
  assert out["ffn_outputs"][0].shape == (B, T, config.block_size)
  np.testing.assert_array_equal(out["hidden_states"][-1],
                                out["sequence_output"])
  if not config.classifier_activation:
    np.testing.assert_array_equal(out["pooled_output"],
                                  out["sequence_output"][:, 0])


@pytest.mark.parametrize("name", TINY_CONFIGS)
def test_padding_does_not_change_real_tokens(name):
  config = load_config(name)
  if config.trigram_input:  # the variant's promise; the reference: below
    config = config.replace(trigram_zero_padding=True)
  encoder = build_encoder(config)
  T = len(IDS[0])
  short = encoder(make_features(IDS, segment_split=3))
  padded = encoder(make_features(IDS, seq_len=T + 5, segment_split=3))
  for key in ("sequence_output", "embedding_output", "pooled_output"):
    real = padded[key][:, :T] if key != "pooled_output" else padded[key]
    np.testing.assert_allclose(real, short[key], rtol=1e-5, atol=1e-5)
  for key in ("hidden_states", "ffn_outputs"):
    for a, b in zip(padded[key], short[key]):
      np.testing.assert_allclose(a[:, :T], b, rtol=1e-5, atol=1e-5)
  # Attention distributions over real keys are unchanged; padded keys get 0.
  for a, b in zip(padded["attention_scores"], short["attention_scores"]):
    pa = tf.nn.softmax(a).numpy()
    np.testing.assert_allclose(pa[..., :T, :T], tf.nn.softmax(b), atol=1e-6)
    assert np.all(pa[..., :T, T:] == 0)


@pytest.mark.parametrize("name", ["tiny_mobilebert", "tiny_ibbert"])
def test_reference_trigram_sees_the_pad_row_at_padded_positions(name):
  """Google's and Hugging Face's MobileBERT: the last real token's e(t+1)
  at a padded position is the [PAD] (id 0) row, as if [PAD] were a token."""
  encoder = build_encoder(load_config(name))
  T = len(IDS[0])
  padded = encoder(make_features(IDS, seq_len=T + 5, segment_split=3))
  as_token = make_features([IDS[0] + [0]], segment_split=3)
  as_token["input_mask"] = tf.constant([[1] * T + [0]])
  with_pad = encoder(as_token)
  np.testing.assert_allclose(padded["embedding_output"][:, :T],
                             with_pad["embedding_output"][:, :T], atol=1e-6)
  unpadded = encoder(make_features(IDS, segment_split=3))
  assert np.abs(padded["embedding_output"][:, T - 1]
                - unpadded["embedding_output"][:, T - 1]).max() > 1e-3
  np.testing.assert_allclose(padded["embedding_output"][:, :T - 1],
                             unpadded["embedding_output"][:, :T - 1],
                             atol=1e-6)


@pytest.mark.parametrize("name", TINY_CONFIGS + ["mobilebert", "albert_base",
                                                 "kroneckerbert_21",
                                                 "mixed_vocab_l6_h256"])
def test_analytic_parameter_count_equals_keras(name):
  config = load_config(name)
  encoder = build_encoder(config)
  assert count(config, seq_len=16)["params_encoder"] == encoder.count_params()


def test_released_mobilebert_encoder_has_exactly_24581888_parameters():
  assert build_encoder(load_config("mobilebert")).count_params() == 24_581_888


def _blocks(encoder, cls):
  return [layer for layer in encoder.layers if isinstance(layer, cls)]


@pytest.mark.parametrize("mode, attention_blocks, ffn_blocks", [
    ("all", 2, 2), ("attention", 2, 4), ("ffn", 4, 2), ("none", 4, 4)])
def test_albert_sharing_really_shares_variables(mode, attention_blocks,
                                                ffn_blocks):
  # tiny_albert: 4 layers in 2 groups.
  config = load_config("tiny_albert").replace(
      sharing_mode=mode, num_hidden_groups=2 if mode != "none" else 1)
  encoder = build_encoder(config)
  attentions = _blocks(encoder, SelfAttentionBlock)
  ffns = _blocks(encoder, FeedForward)
  assert (len(attentions), len(ffns)) == (attention_blocks, ffn_blocks)
  # Each distinct block's variables appear once in the model.
  ids = [id(v) for v in encoder.weights]
  assert len(ids) == len(set(ids))
  per_attention = attentions[0].count_params()
  per_ffn = ffns[0].count_params()
  unshared = build_encoder(config.replace(sharing_mode="none",
                                          num_hidden_groups=1))
  saved = ((4 - attention_blocks) * per_attention
           + (4 - ffn_blocks) * per_ffn)
  assert unshared.count_params() - encoder.count_params() == saved
  assert count(config, seq_len=16)["params_encoder"] == encoder.count_params()
  # A shared block is one layer object called by every layer of its group.
  for block in attentions + ffns:
    assert len(block.inbound_nodes) == (4 // len(attentions) if block in
                                        attentions else 4 // len(ffns))


def test_mobilebert_attention_inputs_follow_each_variant():
  def kernels(name):
    layer = build_encoder(load_config(name)).get_layer("layer_0")
    return (layer.attention.query_dense.kernel.shape,
            layer.attention.value_dense.kernel.shape)
  # Student: shared 128-d query/key bottleneck, value from the 512-d input.
  assert kernels("tiny_mobilebert") == ((16, 16), (32, 16))
  # TINY: query, key and value all from the bottleneck.
  assert kernels("tiny_mobilebert_tiny") == ((16, 16), (16, 16))
  # IB-BERT teacher: all from the inter-block input, into the 64-d inside.
  assert kernels("tiny_ibbert") == ((32, 64), (32, 64))


def test_mixed_vocab_teacher_embeds_student_ids_through_projection():
  config = load_config("tiny_mixed_vocab_teacher")
  encoder = build_encoder(config)
  embeddings = encoder.get_layer("embeddings")
  student_id = config.vocab_size + 5
  vectors = embeddings.word_vectors(tf.constant([[7, student_id]])).numpy()
  np.testing.assert_allclose(
      vectors[0, 0], embeddings.word_embeddings.embeddings.numpy()[7])
  np.testing.assert_allclose(
      vectors[0, 1], embeddings.student_output_embedding_table().numpy()[5],
      rtol=1e-5)
