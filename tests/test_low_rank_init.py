"""The student's word table from the teacher's, against the SVD optimum."""

import numpy as np
import pytest
import tensorflow as tf

from tfmodels.configs import load_config
from tfmodels.distillation.low_rank_init import (init_word_embeddings,
                                                 low_rank_factors)
from tfmodels.encoders import build_encoder
from tfmodels.layers.embeddings import trigram_concat


def test_exact_on_a_table_of_that_rank():
  rng = np.random.default_rng(0)
  table = rng.normal(size=(50, 4)) @ rng.normal(size=(4, 12))
  left, right, error = low_rank_factors(table, 4)
  np.testing.assert_allclose(left @ right, table, atol=1e-10)
  assert error < 1e-7


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_no_rank_r_table_is_closer(rank):
  rng = np.random.default_rng(rank)
  table = rng.normal(size=(40, 10))
  left, right, error = low_rank_factors(table, rank)
  s = np.linalg.svd(table, compute_uv=False)
  assert error == pytest.approx(
      np.sqrt(np.sum(s[rank:] ** 2) / np.sum(s ** 2)))
  assert np.linalg.norm(table - left @ right) / np.linalg.norm(
      table) == pytest.approx(error)
  # Rank-r neighbours of the optimum (its factors nudged) are all further.
  best = np.linalg.norm(table - left @ right)
  for _ in range(5):
    other = (left + 1e-2 * rng.normal(size=left.shape)) @ (
        right + 1e-2 * rng.normal(size=right.shape))
    assert np.linalg.norm(table - other) > best
  # Balanced: both factors carry sqrt of the singular values.
  np.testing.assert_allclose(np.linalg.norm(left, axis=0),
                             np.linalg.norm(right, axis=1), rtol=1e-8)


def test_rank_outside_the_table_is_refused():
  with pytest.raises(ValueError, match="rank 0"):
    low_rank_factors(np.ones((5, 3)), 0)
  with pytest.raises(ValueError, match="rank 4"):
    low_rank_factors(np.ones((5, 3)), 4)


def test_student_word_vectors_start_as_the_teachers_at_rank_e():
  teacher = build_encoder(load_config("tiny_bert"))  # 100 x 32 table
  student = build_encoder(load_config("tiny_mobilebert"))  # E = 16 -> 32
  s_emb, t_emb = student.get_layer("embeddings"), teacher.get_layer(
      "embeddings")
  error = init_word_embeddings(s_emb, t_emb)
  table = t_emb.output_embedding_table().numpy()
  left, right, expected = low_rank_factors(table, 16)
  assert error == pytest.approx(expected)
  # A token with no neighbours (sequence of one): the projected trigram is
  # the teacher's vector at rank 16, whatever the neighbour blocks hold.
  ids = tf.range(100)[:, None]
  projected = s_emb.projection(trigram_concat(s_emb.word_vectors(ids)))
  np.testing.assert_allclose(projected[:, 0].numpy(), left @ right,
                             atol=1e-5)
  # With neighbours, they add nothing at the start.
  pair = s_emb.projection(trigram_concat(s_emb.word_vectors(
      tf.constant([[3, 7]]))))
  np.testing.assert_allclose(pair[0].numpy(), (left @ right)[[3, 7]],
                             atol=1e-5)


def test_a_student_of_another_vocabulary_is_refused():
  import dataclasses
  teacher = build_encoder(load_config("tiny_bert"))
  config = dataclasses.replace(load_config("tiny_mobilebert"), vocab_size=90)
  student = build_encoder(config)
  with pytest.raises(ValueError, match="does not match"):
    init_word_embeddings(student.get_layer("embeddings"),
                         teacher.get_layer("embeddings"))


def test_a_tall_table_factors_as_its_svd_does():
  """The Gram route of a word table (V >> H) gives the SVD's top factors."""
  rng = np.random.default_rng(3)
  table = rng.normal(size=(600, 24)) * np.linspace(3.0, 0.1, 24)
  left, right, error = low_rank_factors(table, 8)
  u, s, vt = np.linalg.svd(table, full_matrices=False)
  np.testing.assert_allclose(left @ right, (u[:, :8] * s[:8]) @ vt[:8],
                             atol=1e-10)
  assert error == pytest.approx(
      np.sqrt(np.sum(s[8:] ** 2) / np.sum(s ** 2)), rel=1e-9)
