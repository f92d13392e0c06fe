import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import load_config
from tfmodels.layers.activations import get_activation
from tfmodels.layers.attention import MultiHeadAttention
from tfmodels.layers.embeddings import Embeddings, trigram_concat
from tfmodels.layers.kronecker import (KroneckerDense, KroneckerEmbedding,
                                       kronecker_contraction_order)
from tfmodels.layers.normalization import NoNorm


def test_nonorm_is_exactly_gamma_h_plus_beta():
  layer = NoNorm()
  h = np.random.randn(2, 3, 8).astype(np.float32)
  layer(h)
  gamma = np.random.randn(8).astype(np.float32)
  beta = np.random.randn(8).astype(np.float32)
  layer.set_weights([gamma, beta])
  np.testing.assert_array_equal(layer(h).numpy(), gamma * h + beta)
  # Unlike LayerNorm it is linear over a batch: NoNorm(2h) - beta = 2(NoNorm(h) - beta).
  np.testing.assert_allclose(layer(2 * h) - beta, 2 * (layer(h) - beta),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("units, n_in, a_shape, sums", [
    (8, 12, (2, 4), 1),     # contracts B first
    (12, 8, (6, 2), 3),
    (6, 16, (6, 16), 2),    # B is 1x1: degenerate, all weight in A
    (16, 6, (1, 1), 2),     # A is 1x1
])
def test_kronecker_dense_equals_dense_with_explicit_kronecker_sum(
    units, n_in, a_shape, sums):
  layer = KroneckerDense(units, a_shape=a_shape, num_sums=sums)
  x = np.random.randn(2, 5, n_in).astype(np.float32)
  y = layer(x).numpy()
  a = layer.kronecker_a.numpy()
  b = layer.kronecker_b.numpy()
  bias = np.random.randn(units).astype(np.float32)
  layer.bias.assign(bias)
  w = sum(np.kron(a[r], b[r]) for r in range(sums))     # [m, n] as in the paper
  assert w.shape == (units, n_in)
  dense = keras.layers.Dense(units)
  dense(x)
  dense.set_weights([w.T, bias])
  np.testing.assert_allclose(layer(x).numpy(), dense(x).numpy(), rtol=1e-5,
                             atol=1e-5)
  np.testing.assert_allclose(layer.dense_kernel().numpy(), w.T, rtol=1e-5,
                             atol=1e-7)
  assert y.shape == (2, 5, units)


def test_kronecker_contraction_order_picks_the_cheaper_product():
  # A 384x384, B 2x2 (KroneckerBERT-8 attention): either order is equal.
  assert kronecker_contraction_order((384, 384), (2, 2)) == "b_first"
  # A 2x8, B 384x384 (its FFN output matrix): contracting A first is cheaper.
  assert kronecker_contraction_order((2, 8), (384, 384)) == "a_first"


def test_kronecker_embedding_rows_are_kronecker_products():
  layer = KroneckerEmbedding(vocab_size=10, embedding_size=12,
                             row_vector_size=4)
  out = layer(tf.constant([[3, 7]])).numpy()
  a, b = layer.table_a.numpy(), layer.row_b.numpy()
  np.testing.assert_allclose(out[0, 0], np.kron(a[3], b), rtol=1e-6)
  np.testing.assert_allclose(out[0, 1], np.kron(a[7], b), rtol=1e-6)
  np.testing.assert_allclose(layer.embeddings.numpy(),
                             np.kron(a, b[None, :]), rtol=1e-6)


def test_trigram_concat_order_is_next_current_previous():
  e = tf.constant([[[1.0], [2.0], [3.0]]])                # [1, T=3, E=1]
  out = trigram_concat(e).numpy()[0]
  np.testing.assert_array_equal(out, [[2, 1, 0], [3, 2, 1], [0, 3, 2]])


def test_mobilebert_embedding_is_dense_of_trigram_plus_positions():
  config = load_config("tiny_mobilebert")
  layer = Embeddings(config)
  ids = tf.constant([[5, 6, 7, 8]])
  segments = tf.constant([[0, 0, 1, 1]])
  out = layer(ids, segments).numpy()
  table = layer.word_embeddings.embeddings.numpy()
  e = table[ids.numpy()[0]]                                # [T, E]
  zero = np.zeros_like(e[:1])
  trigram = np.concatenate([np.concatenate([e[1:], zero]), e,
                            np.concatenate([zero, e[:-1]])], axis=1)
  kernel, bias = layer.projection.get_weights()
  x = trigram @ kernel + bias
  x += layer.position_embeddings.numpy()[:4]
  x += layer.type_embeddings.embeddings.numpy()[segments.numpy()[0]]
  gamma, beta = layer.norm.get_weights()
  np.testing.assert_allclose(out[0], x * gamma + beta, rtol=1e-5, atol=1e-6)


def test_activations_match_their_formulas():
  x = tf.constant([-3.0, -1.0, 0.0, 0.5, 2.0, 7.0])
  from scipy.special import erf
  xs = x.numpy()
  np.testing.assert_allclose(get_activation("gelu")(x),
                             0.5 * xs * (1 + erf(xs / np.sqrt(2))), rtol=1e-5,
                             atol=1e-6)
  tanh_gelu = get_activation("gelu_new")(x).numpy()
  np.testing.assert_allclose(tanh_gelu, get_activation("gelu")(x), atol=1e-3)
  np.testing.assert_array_equal(get_activation("relu6")(x),
                                [0, 0, 0, 0.5, 2, 6])
  with pytest.raises(ValueError, match="swish"):
    get_activation("swish")


def test_attention_mask_is_bounded_and_hides_padding_exactly():
  mha = MultiHeadAttention(num_heads=2, head_size=4, output_size=8,
                           mask_bias=-120.0)
  x = np.random.randn(1, 4, 8).astype(np.float32) * 3
  mask = tf.constant([[[[1.0, 1.0, 1.0, 0.0]]]])
  _, scores = mha(x, x, x, mask)
  scores = scores.numpy()
  assert scores.shape == (1, 2, 4, 4)
  np.testing.assert_array_equal(scores[..., 3], -120.0)   # bounded, not -1e9
  assert np.all(tf.nn.softmax(scores)[..., 3].numpy() == 0.0)


def test_dense_at_an_unknown_length_is_one_fully_connected():
  """A dynamic-length export: our Dense gives Keras' numbers and converts
  to one FULLY_CONNECTED, where Keras' tensordot adds shape arithmetic
  XNNPACK refuses (docs/design.md, "A dynamic sequence length")."""
  from converters import tflite_file
  from tfmodels.layers.dense import Dense
  layer = Dense(4, activation="relu")
  x = tf.random.stateless_normal([1, 5, 8], seed=[1, 2])
  known = layer(x)  # every dimension known: Keras' own path
  any_length = tf.function(layer, input_signature=[
      tf.TensorSpec([1, None, 8], tf.float32)])
  np.testing.assert_allclose(any_length(x), known, atol=1e-6)
  keras_dense = keras.layers.Dense(4, activation="relu")
  keras_dense(x)
  histograms = {}
  for name, fn in (("ours", layer), ("keras", keras_dense)):
    f = tf.function(fn, input_signature=[
        tf.TensorSpec([1, None, 8], tf.float32)])
    data = tf.lite.TFLiteConverter.from_concrete_functions(
        [f.get_concrete_function()], fn).convert()
    histograms[name] = tflite_file.op_histogram(data)
  assert histograms["ours"] == {"FULLY_CONNECTED": 1}
  assert "REDUCE_PROD" in histograms["keras"]  # what it replaces


def test_attention_reshapes_need_no_shape_at_an_unknown_length():
  from tfmodels.layers.attention import reshape_dims
  assert reshape_dims(tf.zeros([2, 3, 8]), 2) == [2, 3]
  spec = tf.TensorSpec([1, None, 8], tf.float32)
  seen = {}

  @tf.function(input_signature=[spec])
  def dims(t):
    seen["dims"] = reshape_dims(t, 2)
    return t
  dims.get_concrete_function()
  assert seen["dims"] == [1, -1]
