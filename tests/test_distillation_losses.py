"""Each knowledge-transfer loss against an independent numpy computation."""

import numpy as np
import pytest
import tensorflow as tf

from tfmodels.distillation import losses

RNG = np.random.default_rng(0)
B, T, N, HEADS = 2, 5, 6, 3
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _maps():
  return (RNG.normal(size=(B, T, N)).astype(np.float64),
          RNG.normal(1.0, 2.0, size=(B, T, N)).astype(np.float64))


def test_feature_map_mse_is_equation_2_over_real_tokens():
  t, s = _maps()
  expected = np.mean([((t[b, i] - s[b, i]) ** 2).mean()
                      for b in range(B) for i in range(T) if MASK[b, i]])
  got = losses.feature_map_mse(tf.constant(t), tf.constant(s), MASK)
  assert float(got) == pytest.approx(expected, rel=1e-12)
  assert float(losses.feature_map_mse(tf.constant(t), tf.constant(t))) == 0


def test_feature_map_transfer_decomposition_matches_the_recipe():
  t, s = _maps()
  def ln(x):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(
        x.var(-1, keepdims=True) + 1e-12)
  real = MASK.astype(bool)
  normalized = ((ln(t) - ln(s)) ** 2)[real].mean()
  mean_term = ((s.mean(-1) - t.mean(-1)) ** 2)[real].mean()
  var_term = np.abs(s.var(-1) - t.var(-1))[real].mean()
  expected = 100 * normalized + 5000 * mean_term + 5 * var_term
  got = losses.feature_map_transfer_loss(tf.constant(t), tf.constant(s), MASK)
  assert float(got) == pytest.approx(expected, rel=1e-10)
  # Zero exactly when the maps agree; the statistics terms see a shift or a
  # scale that the normalized term cannot.
  assert float(losses.feature_map_transfer_loss(tf.constant(t),
                                                tf.constant(t))) < 1e-12
  shifted = losses.feature_map_transfer_loss(tf.constant(t),
                                             tf.constant(t + 0.1))
  assert float(shifted) == pytest.approx(5000 * 0.01, rel=1e-9)


def test_attention_transfer_is_kl_teacher_to_student_per_head():
  t_scores = RNG.normal(size=(B, HEADS, T, T))
  s_scores = RNG.normal(size=(B, HEADS, T, T))
  # Padded keys carry the encoder's -120 adder in both.
  key_pad = (1 - MASK)[:, None, None, :] * -120.0
  t_scores, s_scores = t_scores + key_pad, s_scores + key_pad
  p, q = _softmax(t_scores), _softmax(s_scores)
  kl = (p * (np.log(p) - np.log(q))).sum(-1)  # [B, heads, T]
  expected = np.mean([kl[b, a, i] for b in range(B) for a in range(HEADS)
                      for i in range(T) if MASK[b, i]])
  got = losses.attention_transfer_loss(tf.constant(t_scores),
                                       tf.constant(s_scores), MASK)
  assert float(got) == pytest.approx(expected, rel=1e-9)
  # Direction: KL(teacher || student), not the reverse.
  reverse = (q * (np.log(q) - np.log(p))).sum(-1)[MASK[:, None, :].repeat(
      HEADS, 1).astype(bool)].mean()
  assert abs(float(got) - reverse) > 1e-3


def test_pretraining_distillation_is_equation_4():
  vocab, preds = 7, 4
  student = RNG.normal(size=(B, preds, vocab))
  teacher = RNG.normal(size=(B, preds, vocab))
  labels = RNG.integers(0, vocab, size=(B, preds))
  weights = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float64)
  nsp_logits, nsp_labels = RNG.normal(size=(B, 2)), np.array([0, 1])
  log_q = np.log(_softmax(student))
  real = weights.astype(bool)
  mlm = -np.take_along_axis(log_q, labels[..., None], -1)[..., 0][real].mean()
  kd = -(_softmax(teacher) * log_q).sum(-1)[real].mean()
  nsp = -np.log(_softmax(nsp_logits))[np.arange(B), nsp_labels].mean()
  for alpha in (0.3, 0.5):
    got = losses.pretraining_distillation_loss(
        labels, weights, tf.constant(student), tf.constant(teacher),
        nsp_labels, tf.constant(nsp_logits), alpha)
    assert float(got) == pytest.approx(
        alpha * mlm + (1 - alpha) * kd + nsp, rel=1e-10)
  # alpha * MLM + (1 - alpha) * KD is the cross-entropy against the mixed
  # target of the reference recipe.
  target = 0.5 * np.eye(vocab)[labels] + 0.5 * _softmax(teacher)
  mixed = -(target * log_q).sum(-1)[real].mean()
  assert 0.5 * mlm + 0.5 * kd == pytest.approx(mixed, rel=1e-12)
  with pytest.raises(ValueError, match="alpha=1"):
    losses.pretraining_distillation_loss(labels, weights, student, teacher,
                                         nsp_labels, nsp_logits, alpha=1)


def test_kronecker_intermediate_losses_are_plain_mse():
  t, s = _maps()
  assert float(losses.mse(tf.constant(t), tf.constant(s))) == pytest.approx(
      ((t - s) ** 2).mean(), rel=1e-12)
  t_att = RNG.normal(size=(B, HEADS, T, T))
  s_att = RNG.normal(size=(B, HEADS, T, T))
  expected = np.mean([(t_att[b, h, i, j] - s_att[b, h, i, j]) ** 2
                      for b in range(B) for h in range(HEADS)
                      for i in range(T) for j in range(T)
                      if MASK[b, i] and MASK[b, j]])
  got = losses.mse(tf.constant(t_att), tf.constant(s_att), MASK)
  assert float(got) == pytest.approx(expected, rel=1e-12)
  logits_t, logits_s = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
  expected = -(_softmax(logits_t) * np.log(_softmax(logits_s))).sum(-1).mean()
  assert float(losses.soft_cross_entropy(
      tf.constant(logits_t), tf.constant(logits_s))) == pytest.approx(
          expected, rel=1e-12)
