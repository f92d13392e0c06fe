"""The papers' knowledge-transfer losses, on our encoders' output dicts.

All take teacher and student tensors of one layer (so statistics can only
come from the layer they describe) and an optional `input_mask` [B, T]; means
run over real tokens only. Attention inputs are the encoders'
`attention_scores`, i.e. PRE-softmax [B, heads, T, T]: each loss applies the
softmax it needs exactly once.

MobileBERT (Sun et al., sec. 3.5):
  * `feature_map_mse`: eq. 2.
  * `feature_map_transfer_loss`: eq. 2 decomposed as the reference recipe
    runs it: 100 * MSE of parameter-free layer-normed maps + 5000 * mean
    squared difference of per-token means + 5 * mean absolute difference of
    per-token variances.
  * `attention_transfer_loss`: eq. 3, KL(teacher || student) per head.
  * `pretraining_distillation_loss`: eq. 4, alpha * MLM + (1 - alpha) * KD
    + NSP.
KroneckerBERT (Tahaei et al., sec. 3.5): `mse` for embeddings, attention
score matrices (eq. 9) and FFN outputs; `soft_cross_entropy` for logits.
"""

import tensorflow as tf

FMT_WEIGHTS = (100.0, 5000.0, 5.0)  # normalized, mean, variance terms


def _token_mask(x, input_mask):
  """[B, T, 1] float weights of real tokens (all ones without a mask)."""
  if input_mask is None:
    return tf.ones_like(x[..., :1])
  return tf.cast(input_mask, x.dtype)[..., None]


def _masked_mean(values, mask):
  """Mean of values over the positions mask (broadcast to values) keeps."""
  weights = tf.broadcast_to(tf.cast(mask, values.dtype), tf.shape(values))
  return tf.reduce_sum(values * weights) / tf.maximum(
      tf.reduce_sum(weights), 1.0)


def mse(teacher, student, input_mask=None):
  """Mean squared error over real tokens: KroneckerBERT's intermediate KD.

  On [B, heads, T, T] score matrices a cell counts when both its query and
  its key are real tokens, so padding cannot move the loss.
  """
  if teacher.shape.rank == 3:
    mask = _token_mask(teacher, input_mask)
  elif input_mask is None:
    mask = tf.ones_like(teacher[:, :1])
  else:
    mask = tf.cast(input_mask, teacher.dtype)
    mask = mask[:, None, :, None] * mask[:, None, None, :]
  return _masked_mean(tf.square(teacher - student), mask)


def feature_map_mse(teacher, student, input_mask=None):
  """MobileBERT eq. 2: 1/(TN) sum_t sum_n (H_tr - H_st)^2, batch-averaged."""
  return _masked_mean(tf.square(teacher - student),
                      _token_mask(teacher, input_mask))


def _parameter_free_layer_norm(x, epsilon=1e-12):
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  return (x - mean) * tf.math.rsqrt(variance + epsilon), mean, variance


def feature_map_transfer_loss(teacher, student, input_mask=None,
                              weights=FMT_WEIGHTS):
  """Eq. 2 decomposed: normalized discrepancy + mean/variance statistics."""
  mask = _token_mask(teacher, input_mask)
  t_norm, t_mean, t_var = _parameter_free_layer_norm(teacher)
  s_norm, s_mean, s_var = _parameter_free_layer_norm(student)
  normalized = _masked_mean(tf.square(t_norm - s_norm), mask)
  mean_term = _masked_mean(tf.square(s_mean - t_mean), mask)
  variance_term = _masked_mean(tf.abs(s_var - t_var), mask)
  w_norm, w_mean, w_var = weights
  return w_norm * normalized + w_mean * mean_term + w_var * variance_term


def _attention_mask(scores, input_mask):
  """[B, 1, T, 1] weights of real query positions."""
  if input_mask is None:
    return tf.ones_like(scores[:, :1, :, :1])
  return tf.cast(input_mask, scores.dtype)[:, None, :, None]


def attention_transfer_loss(teacher_scores, student_scores, input_mask=None):
  """Eq. 3: mean over heads and real query positions of KL(p_tr || p_st).

  Scores are pre-softmax; padded keys already carry the mask adder, so they
  get ~0 probability in both distributions.
  """
  log_t = tf.nn.log_softmax(teacher_scores, axis=-1)
  log_s = tf.nn.log_softmax(student_scores, axis=-1)
  kl = tf.reduce_sum(tf.exp(log_t) * (log_t - log_s), axis=-1,
                     keepdims=True)  # [B, heads, T, 1]
  return _masked_mean(kl, _attention_mask(teacher_scores, input_mask))


def soft_cross_entropy(teacher_logits, student_logits, weights=None):
  """Cross-entropy of softmax(student) against softmax(teacher) targets."""
  targets = tf.nn.softmax(teacher_logits, axis=-1)
  per_item = -tf.reduce_sum(
      targets * tf.nn.log_softmax(student_logits, axis=-1), axis=-1)
  return _weighted_mean(per_item, weights)


def _weighted_mean(values, weights):
  if weights is None:
    return tf.reduce_mean(values)
  weights = tf.cast(weights, values.dtype)
  return tf.reduce_sum(values * weights) / tf.maximum(
      tf.reduce_sum(weights), 1e-9)


def masked_lm_loss(labels, logits, weights):
  """BERT's MLM cross-entropy, averaged over real predictions."""
  per_item = tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.cast(labels, tf.int32), logits)
  return _weighted_mean(per_item, weights)


def pretraining_distillation_loss(mlm_labels, mlm_weights, student_mlm_logits,
                                  teacher_mlm_logits, sentence_labels,
                                  student_sentence_logits, alpha=0.5):
  """Eq. 4: alpha * MLM + (1 - alpha) * KD + NSP.

  KD is the cross-entropy against the teacher's softmax at the masked
  positions, so alpha * MLM + (1 - alpha) * KD is the cross-entropy against
  the reference recipe's target alpha * one_hot + (1 - alpha) * p_teacher.
  A teacher without an MLM head (a sentence encoder such as MiniLM) passes
  teacher_mlm_logits=None: the loss is then eq. 4 at alpha = 1, MLM + NSP.
  """
  if not 0 < alpha < 1:
    raise ValueError(f"alpha={alpha}: must be in (0, 1)")
  mlm = masked_lm_loss(mlm_labels, student_mlm_logits, mlm_weights)
  nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.cast(sentence_labels, tf.int32), student_sentence_logits))
  if teacher_mlm_logits is None:
    return mlm + nsp
  kd = soft_cross_entropy(teacher_mlm_logits, student_mlm_logits, mlm_weights)
  return alpha * mlm + (1 - alpha) * kd + nsp
