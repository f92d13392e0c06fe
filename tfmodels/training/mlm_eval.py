"""Held-out masked-LM and next-sentence accuracy of a pre-trained model.

Reads `create_pretraining_data` shards once, in order (made from held-out
documents, e.g. data/pretraining/heldout.txt.gz), and reports the accuracy
and mean cross-entropy over the masked positions, plus NSP / SOP accuracy.
On mixed-vocabulary shards each label is scored by its own vocabulary's
softmax, as in training.
"""

import numpy as np
import tensorflow as tf

from tfmodels.data.pretraining_dataset import pretraining_dataset, read_meta


def evaluate_pretraining(model, directory, batch_size=64):
  """{mlm_accuracy, mlm_loss, sentence_accuracy, masked_tokens}."""
  meta = read_meta(directory)
  teacher_size = meta.get("teacher_vocab_size", 0)
  correct = total = 0.0
  loss_sum = 0.0
  sentence_correct = sentences = 0
  for batch in pretraining_dataset(directory, batch_size, is_training=False):
    out = model({k: batch[k] for k in model.input}, training=False)
    weights = batch["masked_lm_weights"].numpy()
    labels = batch["masked_lm_ids"].numpy()
    log_probs = tf.nn.log_softmax(out["mlm_logits"]).numpy()
    if meta["mixed_vocabulary"]:
      student = batch["masked_lm_vocab"].numpy().astype(bool)
      student_log_probs = tf.nn.log_softmax(
          out["mlm_student_logits"]).numpy()
      local = np.where(student, labels - teacher_size, labels)
      # Index each table only where it applies (0 elsewhere, then masked).
      in_student = np.take_along_axis(
          student_log_probs, np.where(student, local, 0)[..., None], -1)
      in_teacher = np.take_along_axis(
          log_probs, np.where(student, 0, local)[..., None], -1)
      picked = np.where(student, in_student[..., 0], in_teacher[..., 0])
      predicted = np.where(student, student_log_probs.argmax(-1),
                           log_probs.argmax(-1))
      hits = predicted == local
    else:
      picked = np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
      hits = log_probs.argmax(-1) == labels
    correct += float((hits * weights).sum())
    loss_sum += float((-picked * weights).sum())
    total += float(weights.sum())
    sentence_correct += int((out["sentence_logits"].numpy().argmax(-1)
                             == batch["next_sentence_labels"].numpy()).sum())
    sentences += len(weights)
  if not total:
    raise ValueError(f"{directory}: no masked tokens to score")
  return {"mlm_accuracy": correct / total, "mlm_loss": loss_sum / total,
          "sentence_accuracy": sentence_correct / sentences,
          "masked_tokens": int(total)}
