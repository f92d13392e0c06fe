"""Mixed-vocabulary training (Zhao et al., sec. 3.2).

Stage I trains the teacher on inputs where each word is segmented with the
student vocabulary with probability p_SV (`create_pretraining_data
--student_vocab_file`), student pieces entering through a small embedding
table projected up to the teacher's width; each masked position is predicted
with the softmax of the vocabulary that segmented it (eq. 1). Stage II
starts the student model's word embeddings from that table and trains it
with the plain MLM loss on student-only segmented data (eq. 2).
"""

import tensorflow as tf


def mixed_mlm_loss(batch, outputs, teacher_vocab_size):
  """Eq. 1, averaged over masked positions: each label in its own softmax.

  `masked_lm_ids` are in the combined id space (student ids offset by the
  teacher vocabulary size) and `masked_lm_vocab` says which vocabulary
  (0 teacher, 1 student) each label belongs to.
  """
  ids = tf.cast(batch["masked_lm_ids"], tf.int32)
  is_student = tf.cast(batch["masked_lm_vocab"], tf.bool)
  weights = tf.cast(batch["masked_lm_weights"], tf.float32)
  teacher_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.where(is_student, 0, ids), outputs["mlm_logits"])
  student_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      tf.where(is_student, ids - teacher_vocab_size, 0),
      outputs["mlm_student_logits"])
  per_label = tf.where(is_student, student_ce, teacher_ce)
  return tf.reduce_sum(per_label * weights) / tf.maximum(
      tf.reduce_sum(weights), 1.0)


def check_stage_one_config(config, meta):
  """The teacher's two vocabularies must be the data's."""
  student_size = meta["vocab_size"] - meta["teacher_vocab_size"]
  if (config.vocab_size, config.mixed_vocab_size) != (
      meta["teacher_vocab_size"], student_size):
    raise ValueError(
        f"mixed-vocabulary data has {meta['teacher_vocab_size']} teacher + "
        f"{student_size} student pieces; the config has vocab_size "
        f"{config.vocab_size}, mixed_vocab_size {config.mixed_vocab_size}")


def init_student_embeddings(student, stage_one):
  """Stage II: the student's word table := stage I's student table."""
  source = [v for v in stage_one.weights
            if "student_word_embeddings/embeddings" in v.name]
  target = [v for v in student.weights
            if v.name.startswith("embeddings/word_embeddings/embeddings")]
  if len(source) != 1 or len(target) != 1:
    raise ValueError("need a stage-I teacher with student embeddings and a "
                     "student with a plain word-embedding table")
  if source[0].shape != target[0].shape:
    raise ValueError(f"stage-I student table {list(source[0].shape)} does "
                     f"not fit the student's {list(target[0].shape)} "
                     "(vocab_size / embedding width)")
  target[0].assign(source[0])
