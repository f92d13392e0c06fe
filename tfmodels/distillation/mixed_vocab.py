"""Mixed-vocabulary training (Zhao et al., sec. 3.2).

Stage I trains the teacher on inputs where each word is segmented with the
student vocabulary with probability p_SV (`create_pretraining_data
--student_vocab_file`), student pieces entering through a small embedding
table projected up to the teacher's width; each masked position is predicted
with the softmax of the vocabulary that segmented it (eq. 1). Stage II
starts the student model's word embeddings from that table and trains it
with the plain MLM loss on student-only segmented data (eq. 2).
`init_from_pretrained` starts the stage-I teacher from a pretrained model
(`pretrain --init_from`), as the paper starts from BERT-large.
"""

import dataclasses

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


# Config fields a model may set differently from the pretrained model it
# starts from: they size only its new parts or do not change what the
# restored weights compute.
FREE_FIELDS = ("name", "hidden_dropout_prob", "attention_probs_dropout_prob",
               "initializer_range", "mixed_vocab_size",
               "mixed_vocab_embedding_size", "mlm_layer_norm_eps")


def init_from_pretrained(model, config, source, source_config):
  """Stage I starts from a pretrained teacher (the paper's BERT-large).

  Every encoder weight of `source` fills the same-named weight of `model`,
  and so does every head weight `model` has under the same name (a
  pretrainer's MLM / NSP); what `model` has beyond them (a mixed-vocabulary
  teacher's student table and projection, the heads of an encoder-only
  source) keeps its fresh initialisation. Nothing is assigned unless all of
  it fits: a source encoder tensor `model` has no place for, a shape that
  differs or a config field that would change what the weights compute
  raises CheckpointError naming it.

  Returns:
    (restored variable names, names left fresh), sorted.
  """
  from tfmodels.checkpoints.model_dir import encoder_of
  from tfmodels.checkpoints.weight_mapping import (CheckpointError,
                                                   variables_by_name)
  ours = variables_by_name(model)
  theirs = variables_by_name(source)
  encoder = set(variables_by_name(encoder_of(source)))
  pairs = []
  for name, value in sorted(theirs.items()):
    target = ours.get(name)
    if target is None:
      if name in encoder:
        raise CheckpointError(f"the source's tensor {name} has no place in "
                              "the config's model (another architecture?)")
      continue  # a head the model does not have (a classifier's)
    if tuple(target.shape) != tuple(value.shape):
      raise CheckpointError(f"the source's tensor {name} has shape "
                            f"{list(value.shape)}, the config's "
                            f"{list(target.shape)}")
    pairs.append((name, target, value))
  for field in dataclasses.fields(config):
    if field.name in FREE_FIELDS:
      continue
    want, have = getattr(config, field.name), getattr(source_config,
                                                      field.name)
    if want != have:
      raise CheckpointError(f"the config's {field.name} is {want!r}, the "
                            f"source's {have!r}")
  for _, target, value in pairs:
    target.assign(value)
  restored = sorted(name for name, _, _ in pairs)
  return restored, sorted(set(ours) - set(restored))
