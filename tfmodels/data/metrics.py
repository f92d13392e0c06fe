"""Task metrics as plain floats, computed by scikit-learn and scipy.

Why a layer at all: one place says which metrics each GLUE task reports (as
the benchmark does), the inputs are checked once, and results are plain
Python floats that go straight into logs and JSON.

    glue_metrics("mrpc", labels=[1, 0, 1], predictions=[1, 1, 1])
    # {'accuracy': 0.666..., 'f1': 0.8}

Predictions are class ids (argmax of the logits) or, for STS-B, scores.
"""

import re

import numpy as np
from scipy import stats
from sklearn import metrics as sk

# Metric names each task reports, as on the GLUE leaderboard. "spam" is ours.
TASK_METRICS = {
    "cola": ("mcc",),
    "sst-2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "sts-b": ("pearson", "spearman", "pearson_spearman_mean"),
    "qqp": ("accuracy", "f1"),
    "mnli": ("accuracy",),
    "mnli-m": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "spam": ("accuracy", "f1"),
}


def _pair(labels, predictions):
  """Both as 1-D arrays of one length; refuses empty or mismatched inputs."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.shape != predictions.shape or labels.ndim != 1:
    raise ValueError(f"labels {labels.shape} and predictions "
                     f"{predictions.shape} must be 1-D of equal length")
  if not labels.size:
    raise ValueError("no labels to score")
  return labels, predictions


def accuracy(labels, predictions):
  return float(sk.accuracy_score(*_pair(labels, predictions)))


def f1(labels, predictions):
  """Binary F1 of class 1; 0.0 when class 1 is never predicted nor present."""
  return float(sk.f1_score(*_pair(labels, predictions), pos_label=1,
                           average="binary", zero_division=0))


def mcc(labels, predictions):
  """Matthews correlation; 0.0 when undefined (one class predicted only)."""
  return float(sk.matthews_corrcoef(*_pair(labels, predictions)))


def pearson(labels, predictions):
  """Pearson r; nan when either side is constant."""
  labels, predictions = _pair(labels, predictions)
  return float(stats.pearsonr(labels.astype(np.float64),
                              predictions.astype(np.float64)).statistic)


def spearman(labels, predictions):
  """Spearman rho (ties get average ranks); nan when either side is constant."""
  labels, predictions = _pair(labels, predictions)
  return float(stats.spearmanr(labels, predictions).statistic)


def pearson_spearman_mean(labels, predictions):
  """STS-B's single score: the mean of Pearson and Spearman."""
  return (pearson(labels, predictions) + spearman(labels, predictions)) / 2


_FUNCTIONS = {"accuracy": accuracy, "f1": f1, "mcc": mcc, "pearson": pearson,
              "spearman": spearman,
              "pearson_spearman_mean": pearson_spearman_mean}


def glue_metrics(task_name, labels, predictions):
  """{metric name: float} for a task of TASK_METRICS (case-insensitive)."""
  names = TASK_METRICS.get(task_name.lower())
  if names is None:
    raise ValueError(f"unknown task {task_name!r}; known: "
                     f"{', '.join(TASK_METRICS)}")
  return {name: _FUNCTIONS[name](labels, predictions) for name in names}


def token_accuracy(label_ids, predictions, weights=None):
  """Accuracy over labelled token positions (POS tagging's metric).

  Args:
    label_ids: int array [N, L]; -1 marks positions without a label (the
      tagging features' non-first WordPieces, [CLS], [SEP], padding).
    predictions: int array [N, L] of predicted tag ids.
    weights: optional array [N, L]; positions with weight > 0 count. Defaults
      to label_ids >= 0.
  """
  label_ids, predictions = np.asarray(label_ids), np.asarray(predictions)
  if label_ids.shape != predictions.shape:
    raise ValueError(f"label_ids {label_ids.shape} and predictions "
                     f"{predictions.shape} differ in shape")
  keep = label_ids >= 0 if weights is None else np.asarray(weights) > 0
  if not keep.any():
    raise ValueError("no labelled positions to score")
  return float(np.mean(label_ids[keep] == predictions[keep]))


# An IOB slot tag: B-type or I-type (SNIPS, CoNLL). Case matters: Brown's
# lowercase POS tags such as "in-tl" are plain tags.
_IOB = re.compile(r"([BI])-(.+)")


def chunks(tags):
  """The chunks of one sentence's tags, as {(start, end, type)} (end
  exclusive), read the way CoNLL's conlleval reads IOB tags.

  `B-x` opens a chunk of type x; `I-x` continues the open chunk of type x or,
  after `O` or another type, opens one (IOB1 and sloppy predictions); `O` is
  outside. Any other tag (a POS tag such as `nn` or `np-tl`) is a one-token
  chunk of its own type, so slot F1 over such tags is token F1.
  """
  found, start, kind = set(), None, None
  for i, tag in enumerate(list(tags) + ["O"]):
    iob = _IOB.fullmatch(tag)
    continues = iob and iob.group(1) == "I" and iob.group(2) == kind
    if start is not None and not continues:
      found.add((start, i, kind))
      start = kind = None
    if iob and not continues:
      start, kind = i, iob.group(2)
    elif not iob and tag != "O":
      found.add((i, i + 1, tag))
  return found


def chunk_f1(true_tags, predicted_tags):
  """Micro F1 of exact chunk matches over sentences (SNIPS' slot F1, the
  CoNLL-2000 chunking score).

  Args:
    true_tags / predicted_tags: one tag sequence (strings) per sentence, of
      equal lengths pairwise.

  Returns:
    float in [0, 1]; 0.0 when no chunk is right (or none exists).
  """
  if len(true_tags) != len(predicted_tags):
    raise ValueError(f"{len(true_tags)} true and {len(predicted_tags)} "
                     "predicted sentences")
  right = n_true = n_predicted = 0
  for i, (truth, guess) in enumerate(zip(true_tags, predicted_tags)):
    if len(truth) != len(guess):
      raise ValueError(f"sentence {i}: {len(truth)} true tags but "
                       f"{len(guess)} predicted")
    truth, guess = chunks(truth), chunks(guess)
    right += len(truth & guess)
    n_true, n_predicted = n_true + len(truth), n_predicted + len(guess)
  if not right:
    return 0.0
  precision, recall = right / n_predicted, right / n_true
  return 2 * precision * recall / (precision + recall)


def intent_slot_metrics(intent_labels, intent_predictions, slot_label_ids,
                        slot_predictions, tags):
  """Joint intent + slot scores (SNIPS style, the mixed-vocabulary paper's
  Table 2 plus the sentence-level score).

  Args:
    intent_labels / intent_predictions: int [N] intent ids.
    slot_label_ids: int [N, L]; -1 marks positions without a tag (non-first
      WordPieces, [CLS], [SEP], padding, words cut by max_seq_length).
    slot_predictions: int [N, L] predicted tag ids.
    tags: tag names in id order (chunk F1 reads their IOB prefixes).

  Returns:
    dict: `intent_accuracy`, `slot_f1` (`chunk_f1` over the labelled
    positions), `sentence_exact_match` (intent and every labelled slot tag
    right) and `slot_accuracy` (token accuracy).
  """
  intent_labels, intent_predictions = _pair(intent_labels, intent_predictions)
  slot_label_ids = np.asarray(slot_label_ids)
  slot_predictions = np.asarray(slot_predictions)
  if slot_label_ids.shape[:1] != intent_labels.shape:
    raise ValueError(f"{len(intent_labels)} intents but slot labels for "
                     f"{slot_label_ids.shape[0]} sentences")
  if slot_predictions.shape != slot_label_ids.shape:
    raise ValueError(f"slot_label_ids {slot_label_ids.shape} and "
                     f"slot_predictions {slot_predictions.shape} differ")
  labelled = slot_label_ids >= 0
  if labelled.any() and (slot_label_ids.max() >= len(tags) or
                         slot_predictions[labelled].max() >= len(tags) or
                         slot_predictions[labelled].min() < 0):
    raise ValueError(f"slot ids outside the {len(tags)} tags")
  names = np.asarray(tags, dtype=object)
  true_tags = [names[row[keep]] for row, keep in zip(slot_label_ids, labelled)]
  predicted_tags = [names[row[keep]]
                    for row, keep in zip(slot_predictions, labelled)]
  slot_wrong = labelled & (slot_label_ids != slot_predictions)
  exact = (intent_labels == intent_predictions) & ~slot_wrong.any(axis=1)
  return {"intent_accuracy": accuracy(intent_labels, intent_predictions),
          "slot_f1": chunk_f1(true_tags, predicted_tags),
          "sentence_exact_match": float(np.mean(exact)),
          "slot_accuracy": token_accuracy(slot_label_ids, slot_predictions)}
