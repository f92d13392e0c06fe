"""Align a moved student's new word vectors by mixed-vocabulary training.

Zhao et al. align a student vocabulary with the teacher's by training on
text where each word is segmented with the student vocabulary with
probability p_SV and with the teacher's otherwise (their stage I, eq. 1):
"the model learns to predict student tokens using context which is
segmented using the teacher vocabulary". A carved student already has the
teacher's layers and table; what it lacks is vectors for the pieces its
new vocabulary adds (`compression.vocab_transfer` starts them as the mean
of the teacher pieces spelling them). So the alignment here keeps the
carved model's teacher-vocabulary table frozen and trains the student
rows: the model reading the mixed segmentation must give, at each word's
first piece (and its last, where either cut splits it: a span's end), the
hidden states (every layer's) the model as carved gives reading the same
text all in the teacher's vocabulary:

  L = mean over aligned word ends w and layers l of
      mean_d (h_l(mixed)[pos_mixed(w)] - h_l(teacher)[pos_teacher(w)])^2

Both segmentations share BERT's word splitting, so word k of one is word k
of the other. The mixed model is the carved one over both vocabularies
(the student's ids offset by the teacher's size). Rows alone cannot give
a word the teacher held whole but the student splits its own first-piece
state (the piece is shared by many words); with `layers_learning_rate`
the layers train too (the paper's stage I trains the whole teacher), to
compose split words as the teacher read them, against the carved model's
frozen copy.
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfmodels.compression.vocab_transfer import (check_movable,
                                                 rebuilt_with_rows,
                                                 transferred_rows,
                                                 word_table_variable)


def words(encoding):
  """Ids grouped by word: a `##` piece continues the word before it."""
  grouped = []
  for piece, i in zip(encoding.pieces, encoding.ids):
    if grouped and piece.startswith("##"):
      grouped[-1].append(i)
    else:
      grouped.append([i])
  return grouped


def mixed_example(teacher_words, student_words, offset, p_sv, rng, length,
                  cls_id, sep_id):
  """(teacher ids, mixed ids, teacher positions, mixed positions) of one
  text, each [CLS] words [SEP] cut to `length`; a word is kept only if it
  fits whole in both. A word's positions are its first piece and, if either
  cut splits it, its last (where a span ends). Student ids are shifted by
  `offset`."""
  if len(teacher_words) != len(student_words):
    raise ValueError("the two segmentations split the text into different "
                     "words")
  teacher, mixed = [cls_id], [cls_id]
  teacher_positions, mixed_positions = [], []
  for t, s in zip(teacher_words, student_words):
    m = [offset + i for i in s] if rng.random() < p_sv else t
    if len(teacher) + len(t) >= length or len(mixed) + len(m) >= length:
      break
    teacher_positions.append(len(teacher))
    mixed_positions.append(len(mixed))
    if len(t) > 1 or len(m) > 1:
      teacher_positions.append(len(teacher) + len(t) - 1)
      mixed_positions.append(len(mixed) + len(m) - 1)
    teacher += t
    mixed += m
  return teacher + [sep_id], mixed + [sep_id], teacher_positions, \
      mixed_positions


def alignment_loss(teacher_states, mixed_states, teacher_positions,
                   mixed_positions, weights):
  """The loss above. states: lists (one per layer) of [B, T, H];
  positions: [B, W] int; weights: [B, W] (1 for a real word, 0 padding)."""
  weights = tf.cast(weights, tf.float32)
  total = 0.0
  for t, m in zip(teacher_states, mixed_states):
    a = tf.gather(t, teacher_positions, batch_dims=1)
    b = tf.gather(m, mixed_positions, batch_dims=1)
    per_word = tf.reduce_mean(tf.square(a - b), axis=-1)
    total += tf.reduce_sum(per_word * weights) / tf.maximum(
        tf.reduce_sum(weights), 1.0)
  return total / len(teacher_states)


def _batch(examples, length):
  """Padded arrays of a list of mixed_example tuples."""
  width = max(1, max(len(e[2]) for e in examples))
  out = {k: np.zeros((len(examples), length), np.int32) for k in (
      "teacher_ids", "teacher_mask", "mixed_ids", "mixed_mask")}
  for k in ("teacher_positions", "mixed_positions", "weights"):
    out[k] = np.zeros((len(examples), width), np.int32)
  for row, (teacher, mixed, tp, mp) in enumerate(examples):
    out["teacher_ids"][row, :len(teacher)] = teacher
    out["teacher_mask"][row, :len(teacher)] = 1
    out["mixed_ids"][row, :len(mixed)] = mixed
    out["mixed_mask"][row, :len(mixed)] = 1
    out["teacher_positions"][row, :len(tp)] = tp
    out["mixed_positions"][row, :len(mp)] = mp
    out["weights"][row, :len(tp)] = 1
  return out


def align(model, config, head, teacher_tokenizer, student_tokenizer, texts,
          steps, length=128, batch_size=16, learning_rate=1e-3, p_sv=0.5,
          seed=0, heldout=64, layers_learning_rate=0.0, log=print):
  """(the student model on the student vocabulary, its config, facts).

  `model` reads the teacher's vocabulary; its student rows start by
  vocabulary transfer and are then trained for `steps` on `texts` (a
  random `heldout` of them, at most a quarter, scored before and after,
  never trained on); every other weight but the teacher's rows too when
  `layers_learning_rate` > 0. `model` itself is never changed.
  """
  from tfmodels.checkpoints.model_dir import encoder_of
  from tfmodels.encoders import INPUT_NAMES
  teacher_vocab, student_vocab = (teacher_tokenizer.vocab,
                                  student_tokenizer.vocab)
  check_movable(config, head, teacher_vocab)
  offset = len(teacher_vocab)
  values = {w.name.split(":")[0]: w.numpy() for w in model.weights}
  name = word_table_variable(values, config)
  student_rows, transfer = transferred_rows(values[name], teacher_vocab,
                                            student_vocab)
  # One model over both vocabularies: the teacher's rows, then the
  # student's (its ids shifted by `offset`).
  mixed_config = config.replace(vocab_size=offset + len(student_vocab))
  mixed_model = rebuilt_with_rows(
      model, config, head, name,
      np.concatenate([values[name], student_rows]), mixed_config)
  encoder, carved = encoder_of(mixed_model), encoder_of(model)
  table = next(w for w in mixed_model.weights
               if w.name.split(":")[0] == name)
  layers = [w for w in encoder.trainable_weights
            if w.name.split(":")[0] != name] if layers_learning_rate else []
  trainable = np.zeros((mixed_config.vocab_size, 1), np.float32)
  trainable[offset:] = 1.0  # the student rows alone
  trainable = tf.constant(trainable)

  rng = np.random.default_rng(seed)
  encoded = [(words(teacher_tokenizer.encode(t)),
              words(student_tokenizer.encode(t))) for t in texts if t]
  encoded = [e for e in encoded if e[0] and len(e[0]) == len(e[1])]
  encoded = [encoded[i] for i in rng.permutation(len(encoded))]
  if len(encoded) < 2:
    raise ValueError(f"{len(encoded)} text(s) to align on: need two, one "
                     "to train on and one held out")
  heldout = max(1, min(heldout, len(encoded) // 4))  # a small task's quarter
  train, held = encoded[:-heldout], encoded[-heldout:]
  cls_id, sep_id = (teacher_tokenizer.token_to_id[t]
                    for t in ("[CLS]", "[SEP]"))

  def examples(pairs, generator):
    return _batch([mixed_example(t, s, offset, p_sv, generator, length,
                                 cls_id, sep_id) for t, s in pairs], length)

  def states(model_encoder, ids, mask):
    out = model_encoder({INPUT_NAMES[0]: ids, INPUT_NAMES[1]: mask,
                         INPUT_NAMES[2]: tf.zeros_like(ids)}, training=False)
    return out["hidden_states"]

  def loss_of(batch):
    target = [tf.stop_gradient(s) for s in states(
        carved, batch["teacher_ids"], batch["teacher_mask"])]
    return alignment_loss(target, states(encoder, batch["mixed_ids"],
                                         batch["mixed_mask"]),
                          batch["teacher_positions"], batch["mixed_positions"],
                          batch["weights"])

  held_batch = examples(held, np.random.default_rng(seed + 1))
  before = float(loss_of(held_batch))
  optimizer = keras.optimizers.Adam(learning_rate)
  layer_optimizer = layers and keras.optimizers.Adam(layers_learning_rate)
  losses = []
  for step in range(steps):
    pick = rng.choice(len(train), min(batch_size, len(train)), replace=False)
    batch = examples([train[i] for i in pick], rng)
    with tf.GradientTape() as tape:
      loss = loss_of(batch)
    gradients = tape.gradient(loss, [table] + layers)
    optimizer.apply_gradients(
        [(tf.convert_to_tensor(gradients[0]) * trainable, table)])
    if layers:
      layer_optimizer.apply_gradients(
          [(g, w) for g, w in zip(gradients[1:], layers) if g is not None])
    losses.append(float(loss))
    if (step + 1) % 50 == 0:
      log(f"align step {step + 1}: loss {np.mean(losses[-50:]):.4f}")
  after = float(loss_of(held_batch))
  student_rows = table.numpy()[offset:]
  student_config = config.replace(vocab_size=len(student_vocab))
  student = rebuilt_with_rows(mixed_model, mixed_config, head, name,
                              student_rows, student_config)
  facts = dict(transfer, vocab_size=len(student_vocab),
               teacher_vocab_size=offset, table=name, alignment={
                   "steps": steps, "p_sv": p_sv, "texts": len(train),
                   "layers_learning_rate": layers_learning_rate,
                   "loss_first": losses[0] if losses else None,
                   "loss_last": losses[-1] if losses else None,
                   "heldout_texts": len(held), "heldout_before": before,
                   "heldout_after": after})
  return student, student_config, facts
