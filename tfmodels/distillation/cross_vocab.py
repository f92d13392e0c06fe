"""Task-stage KD from a teacher that reads another vocabulary.

A student moved to its own vocabulary (`compression.vocab_transfer`) still
learns from the teacher's soft targets, but the two read different token ids
and, in QA, cut the same text into different pieces. The teacher runs once
over the train split in its own tokenization (`soft_targets`); its targets
are carried to the student's rows:

  classification  one row per example in both: the teacher's logits as
                  they are
  intent + slot   the same for the intent; the slots learn from their
                  labels alone
  QA              start / end probabilities moved by characters: a
                  teacher piece's start mass goes to the student piece
                  holding its first character, its end mass to the one
                  holding its last, [CLS] (the answer is not in this
                  window) to [CLS]; each student window reads the teacher
                  window sharing most of its context; a row where less than
                  half the mass lands gets no target (weight 0)

Training then needs no teacher forward pass (`loss_fn`): the task loss plus
the soft cross-entropy against the carried targets, as the shared
vocabulary's `--task_kd prediction` is.
"""

import numpy as np
import tensorflow as tf

from tfmodels.distillation.losses import _weighted_mean
from tfmodels.inference import model_inputs, predict

SPAN_KEYS = ("soft_start", "soft_end", "soft_weight")


def _softmax(logits):
  z = logits - logits.max(axis=-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(axis=-1, keepdims=True)


def _piece_at(char_start, char_end, char):
  """Index of the piece whose [start, end) holds `char`, else None."""
  k = int(np.searchsorted(char_end, char, side="right"))
  if k < len(char_start) and char_start[k] <= char < char_end[k]:
    return k
  return None


def project_span(start_probs, end_probs, teacher_meta, student_meta, length):
  """(start [length], end [length], carried mass) on the student's input
  positions from the teacher's probabilities over its input positions.

  [CLS] (position 0, "not in this window") keeps its mass; a context
  piece's start mass goes to the student piece holding its first
  character, its end mass to the one holding its last; the question's and
  what falls outside the student's window are dropped. Each distribution is
  renormalised over what was carried; the mass is the smaller carried
  share of the two.
  """
  start, end = np.zeros(length, np.float32), np.zeros(length, np.float32)
  start[0], end[0] = start_probs[0], end_probs[0]
  for k in range(teacher_meta.window_length):
    position = teacher_meta.context_offset + k
    first = int(teacher_meta.char_start[k])
    last = int(teacher_meta.char_end[k]) - 1
    for probs, char, out in ((start_probs, first, start),
                             (end_probs, last, end)):
      j = _piece_at(student_meta.char_start, student_meta.char_end, char)
      if j is not None:
        out[student_meta.context_offset + j] += probs[position]
  mass = float(min(start.sum(), end.sum()))
  if mass > 0:
    start, end = start / start.sum(), end / end.sum()
  return start, end, mass


def _overlap(a, b):
  """Characters of the context both windows hold."""
  if not a.window_length or not b.window_length:
    return 0
  return max(0, min(a.char_end[-1], b.char_end[-1]) -
             max(a.char_start[0], b.char_start[0]))


def span_targets(task, teacher_task, teacher, min_mass=0.5):
  """{soft_start, soft_end [rows, L], soft_weight [rows]} for the rows of
  `task.features("train")` from `teacher` reading `teacher_task`'s.

  Each student window takes the teacher window of the same example that
  shares the most context with it; a row whose carried mass is below
  `min_mass` (the teacher's answer lies mostly outside the row's window
  or in its question) gets weight 0.
  """
  arrays, metas = task.train_windows()
  teacher_arrays, teacher_metas = teacher_task.train_windows()
  out = predict(teacher, teacher_arrays, ["start_logits", "end_logits"])
  starts, ends = _softmax(out["start_logits"]), _softmax(out["end_logits"])
  windows = {}
  for row, meta in enumerate(teacher_metas):
    windows.setdefault(meta.example_index, []).append(row)
  rows, length = len(metas), arrays["input_ids"].shape[1]
  targets = {"soft_start": np.zeros((rows, length), np.float32),
             "soft_end": np.zeros((rows, length), np.float32),
             "soft_weight": np.zeros(rows, np.float32)}
  for row, meta in enumerate(metas):
    candidates = windows.get(meta.example_index)
    if not candidates:
      continue  # the teacher's tokenization skipped the example
    t = max(candidates, key=lambda r: _overlap(teacher_metas[r], meta))
    start, end, mass = project_span(starts[t], ends[t], teacher_metas[t],
                                    meta, length)
    if mass >= min_mass:
      targets["soft_start"][row], targets["soft_end"][row] = start, end
      targets["soft_weight"][row] = 1.0
  return targets


def classification_targets(task, teacher_task, teacher):
  """{soft_logits [rows, classes]}: one row per example in both."""
  teacher_arrays = teacher_task.features("train")
  logits = predict(teacher, teacher_arrays, ["logits"])["logits"]
  rows = len(task.features("train")["input_ids"])
  if len(logits) != rows:
    raise ValueError(f"the teacher reads {len(logits)} train rows, the "
                     f"student {rows}")
  return {"soft_logits": logits.astype(np.float32)}


def intent_targets(task, teacher_task, teacher):
  """{soft_intent_logits [rows, intents]}: one row per sentence in both.
  The slots keep their labels alone: a teacher distribution per word over
  hundreds of tags on every train sentence would not fit in memory."""
  logits = predict(teacher, teacher_task.features("train"),
                   ["intent_logits"])["intent_logits"]
  rows = len(task.features("train")["input_ids"])
  if len(logits) != rows:
    raise ValueError(f"the teacher reads {len(logits)} train rows, the "
                     f"student {rows}")
  return {"soft_intent_logits": logits.astype(np.float32)}


TARGETS = {"span": span_targets, "classifier": classification_targets,
           "intent_slot": intent_targets}


def soft_targets(task, teacher_task, teacher):
  """The teacher's targets for the student's train rows (see the module
  docstring); ValueError for a task it has none for (tagging)."""
  kind = task.head().kind
  if kind not in TARGETS:
    raise ValueError(f"--teacher_dir reads another vocabulary: KD across "
                     f"vocabularies takes {', '.join(TARGETS)}, not {kind}")
  return TARGETS[kind](task, teacher_task, teacher)


def _soft_ce(targets, logits, weights=None):
  per_row = -tf.reduce_sum(targets * tf.nn.log_softmax(logits, axis=-1),
                           axis=-1)
  return _weighted_mean(per_row, weights)


def loss_fn(student, task):
  """loss_fn(batch): the task loss plus the soft cross-entropy against the
  batch's carried targets (`soft_targets` columns)."""

  def compute(batch):
    outputs = student(model_inputs(batch), training=True)
    supervised = task.supervised_loss(outputs, batch)
    if "soft_logits" in batch:
      kd = _soft_ce(tf.nn.softmax(batch["soft_logits"]), outputs["logits"])
    elif "soft_intent_logits" in batch:
      kd = _soft_ce(tf.nn.softmax(batch["soft_intent_logits"]),
                    outputs["intent_logits"])
    else:
      weight = batch["soft_weight"]
      kd = (_soft_ce(batch["soft_start"], outputs["start_logits"], weight) +
            _soft_ce(batch["soft_end"], outputs["end_logits"], weight)) / 2
    metrics = {"logit_kd": kd, "task": supervised}
    return supervised + kd, metrics
  return compute
