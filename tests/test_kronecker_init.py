"""Nearest-Kronecker-product initialisation against the SVD optimum."""

import numpy as np
import pytest

from tfmodels.configs import load_config
from tfmodels.distillation.kronecker_init import (init_dense,
                                                  init_embedding,
                                                  init_from_teacher,
                                                  kronecker_sum,
                                                  nearest_kronecker,
                                                  optimal_error, rearrange)
from tfmodels.encoders import build_encoder
from tfmodels.layers.kronecker import KroneckerDense, KroneckerEmbedding


def test_rearrangement_turns_a_kronecker_product_into_rank_one():
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(3, 4)), rng.normal(size=(2, 5))
  r = rearrange(np.kron(a, b), (3, 4), (2, 5))
  np.testing.assert_allclose(r, np.outer(a.ravel(), b.ravel()), atol=1e-12)


@pytest.mark.parametrize("num_sums", [1, 2, 3])
def test_recovers_an_exact_sum_of_kronecker_products(num_sums):
  rng = np.random.default_rng(num_sums)
  a = rng.normal(size=(num_sums, 4, 3))
  b = rng.normal(size=(num_sums, 8, 6))
  w = kronecker_sum(a, b)
  a2, b2, s = nearest_kronecker(w, (4, 3), num_sums)
  assert np.abs(kronecker_sum(a2, b2) - w).max() < 1e-5
  assert s[num_sums:].max(initial=0) < 1e-9  # rank of R(W) is r


@pytest.mark.parametrize("num_sums", [1, 2, 4])
def test_error_on_a_random_matrix_is_the_svd_optimum(num_sums):
  w = np.random.default_rng(7).normal(size=(16, 24))
  a, b, s = nearest_kronecker(w, (4, 6), num_sums)
  error = np.sum((w - kronecker_sum(a, b)) ** 2)
  predicted = np.sum(w ** 2) - np.sum(s[:num_sums] ** 2)
  assert error == pytest.approx(predicted, rel=1e-9)
  assert error == pytest.approx(optimal_error(w, (4, 6), num_sums), rel=1e-9)
  # No other r-term sum does better: perturbing the optimum only hurts.
  worse = kronecker_sum(a + 1e-3, b)
  assert np.sum((w - worse) ** 2) > error


def test_initialises_keras_layers_from_dense_weights():
  rng = np.random.default_rng(3)
  layer = KroneckerDense(12, a_shape=(3, 2), num_sums=2)
  layer.build((None, 8))
  kernel = rng.normal(size=(8, 12)).astype("float32")  # Keras [in, out]
  init_dense(layer, kernel, bias=np.arange(12.0))
  a, b, _ = nearest_kronecker(kernel.T, (3, 2), 2)
  np.testing.assert_allclose(layer.dense_kernel().numpy(),
                             kronecker_sum(a, b).T, atol=1e-5)
  x = rng.normal(size=(5, 8)).astype("float32")
  np.testing.assert_allclose(layer(x).numpy(),
                             x @ kronecker_sum(a, b).T + np.arange(12.0),
                             atol=1e-4)
  embedding = KroneckerEmbedding(10, 8, 4)
  embedding.build((None,))
  a_e, b_e = rng.normal(size=(10, 2)), rng.normal(size=(1, 4))
  init_embedding(embedding, np.kron(a_e, b_e))
  np.testing.assert_allclose(embedding.embeddings.numpy(), np.kron(a_e, b_e),
                             atol=1e-5)


def test_student_from_teacher_by_layer_names():
  student_config = load_config("tiny_kroneckerbert")
  teacher_config = load_config("tiny_bert").replace(
      **{k: getattr(student_config, k) for k in (
          "vocab_size", "hidden_size", "num_hidden_layers",
          "num_attention_heads", "intermediate_size")})
  student = build_encoder(student_config)
  teacher = build_encoder(teacher_config)
  done = init_from_teacher(student, teacher)
  kron_layers = [l for l in student.submodules
                 if isinstance(l, (KroneckerDense, KroneckerEmbedding))]
  assert len(done) == len(kron_layers) > 0
  teacher_vars = {v.name.split(":")[0]: v for v in teacher.weights}
  for layer in kron_layers:
    if isinstance(layer, KroneckerDense):
      prefix = layer.kronecker_a.name.rsplit("/", 1)[0]
      w = teacher_vars[prefix + "/kernel"].numpy().T
      got = layer.dense_kernel().numpy().T
      best = optimal_error(w, layer.a_shape, layer.num_sums)
      assert np.sum((w - got) ** 2) == pytest.approx(best, rel=1e-3, abs=1e-6)


def test_student_starts_close_to_its_dense_teacher():
  """Kronecker init + copied variables reproduce a factorisable teacher."""
  import tensorflow as tf

  from conftest import make_features
  from tfmodels.distillation.kronecker import (initialise_student,
                                               intermediate_kd_loss)
  from tfmodels.models import build_pretrainer
  student_config = load_config("tiny_kroneckerbert").replace(
      kronecker_num_sums=4)
  teacher = build_pretrainer(load_config("tiny_bert"))
  # A teacher whose block matrices are exact sums of 4 Kronecker products,
  # so the factorised student can match them exactly.
  donor = build_pretrainer(student_config)
  teacher_vars = {v.name: v for v in teacher.weights}
  for layer in donor.submodules:
    if isinstance(layer, KroneckerDense):
      prefix = layer.kronecker_a.name.rsplit("/", 1)[0]
      teacher_vars[prefix + "/kernel:0"].assign(layer.dense_kernel())
    elif isinstance(layer, KroneckerEmbedding):
      prefix = layer.table_a.name.rsplit("/", 1)[0]
      teacher_vars[prefix + "/embeddings:0"].assign(layer.embeddings)
  features = make_features([[2, 5, 9, 14, 3, 7, 11, 3]], segment_split=5)
  features["masked_lm_positions"] = tf.constant([[1, 4]])
  fresh = build_pretrainer(student_config)
  def kd(student):
    return sum(float(x) for x in intermediate_kd_loss(
        teacher(features), student(features), features["input_mask"]))
  before = kd(fresh)
  factored, copied = initialise_student(fresh, teacher)
  assert len(factored) == 13 and len(copied) > 10  # 12 matrices + table
  assert kd(fresh) < 1e-8 * before  # the factorisation is exact here
