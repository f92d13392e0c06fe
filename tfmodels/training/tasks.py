"""Fine-tuning tasks: data -> features, head, loss and dev metrics.

One class per task family, all with the same small interface, so `finetune`
and `evaluate` need no per-task branches:

    task = make_task("spam", "data/spam", tokenizer, max_seq_length=128)
    head = task.head()                        # model_dir.Head for the model
    features = task.features("train")         # dict of numpy arrays
    loss, metrics = task.loss(model, batch)   # per-replica, in training
    task.evaluate(model, "dev")               # {"accuracy": ..., ...}
    task.check_split("dev")                   # read only, before training
    task.points(task.evaluate(model, "dev"))  # the metric a plateau watches

A split with no examples is refused (ValueError naming its file) by each
of these; evaluation counts an eval label the train split lacks as wrong.

Tasks: the GLUE names and `spam` (ClassificationTask), `squad` (SpanTask),
`tagging` (TaggingTask) and `intent_slot` (IntentSlotTask: CoNLL with a
`# label = ` intent per sentence, the mixed-vocabulary paper's SNIPS task).

`supervised_loss` and `logit_kd` work on outputs already computed, so a
distillation loss can run the student once for both; `logit_keys` names
the outputs `logit_kd` reads of the teacher.
"""

import functools
import os

from absl import logging
import numpy as np
import tensorflow as tf

from tfmodels import inference
from tfmodels.checkpoints.model_dir import Head
from tfmodels.data import glue, squad, squad_metrics, tagging
from tfmodels.data.metrics import (TASK_METRICS, glue_metrics,
                                   intent_slot_metrics, token_accuracy)
from tfmodels.distillation.losses import soft_cross_entropy
from tfmodels.inference import model_inputs


def _predict(model, features, keys):
  """Model outputs `keys` over numpy features, in bounded memory."""
  return inference.predict(model, features, keys, trim=True)


def split_file(data_dir, split, extension):
  """DATA_DIR/SPLIT.EXTENSION, plain or gzipped (ValueError if neither)."""
  for name in (f"{split}.{extension}", f"{split}.{extension}.gz"):
    if os.path.exists(os.path.join(data_dir, name)):
      return os.path.join(data_dir, name)
  raise ValueError(f"{data_dir}: no {split}.{extension}[.gz]")


def _not_empty(count, path, split, what):
  """ValueError naming the file of a split with nothing in it (a header
  alone, `"data": []`): tf.data would fail on it deep in a ShuffleDataset,
  numpy on an empty concatenation, and no metric has a value on it."""
  if count == 0:
    raise ValueError(f"{path}: no {what} (an empty {split} split can be "
                     "neither trained on nor scored)")


def _trained_mask(vocabulary, trained):
  """Bool per vocabulary entry: does the train split label it? None when
  the train split is absent or labels nothing (then nothing is known)."""
  trained = set(trained)
  return np.array([v in trained for v in vocabulary]) if trained else None


def _predicted_ids(logits, trained, label_ids, names, split, what):
  """Argmax of `logits` over the classes the train split labels.

  A vocabulary spans every split, so that a tag only dev has still gets an
  id; but the model never saw a label of it, so its output is untrained,
  and a model that happened to rank it first would score those dev
  examples as right. Restricted to trained classes, an eval label the
  train split lacks always counts as an error (and is named in a warning).
  """
  if logits.shape[-1] != len(names):
    raise ValueError(f"the model predicts {logits.shape[-1]} {what}s but "
                     f"the data's splits name {len(names)}: score it on the "
                     "data it was fine-tuned on")
  if trained is None or trained.all():
    return logits.argmax(-1)
  unseen = [names[i] for i in np.unique(label_ids)
            if i >= 0 and not trained[i]]
  if unseen:
    logging.warning("%s: %d %s(s) the train split never labels count as "
                    "errors: %s", split, len(unseen), what,
                    ", ".join(map(str, unseen[:10])))
  return np.where(trained, logits, -np.inf).argmax(-1)


class ClassificationTask:
  """GLUE-layout classification / regression (and our spam task). MNLI has
  no `dev` split: its dev_matched, which finetune scores, stands in."""

  logit_keys = ("logits",)

  def __init__(self, name, data_dir, tokenizer, max_seq_length):
    self.name, self.data_dir = name, data_dir
    self.spec = glue.get_task(name)
    self.tokenizer, self.max_seq_length = tokenizer, max_seq_length

  def head(self):
    return Head("classifier", num_classes=1 if self.spec.is_regression
                else len(self.spec.labels))

  def _read(self, split):
    if split == "dev" and split not in self.spec.splits:  # MNLI: matched
      split = next(s for s in self.spec.splits if s.startswith("dev"))
    examples = glue.read_split(self.spec, self.data_dir, split)
    _not_empty(len(examples), glue.split_path(self.data_dir, split), split,
               "examples")
    return examples

  def check_split(self, split):
    """Reads `split` (ValueError naming its file if missing or empty)."""
    self._read(split)

  def texts(self, split):
    """The split's raw texts (each example's one or two)."""
    return [t for e in self._read(split) for t in (e.text_a, e.text_b) if t]

  def features(self, split, limit=None):
    """The split's feature rows; `limit`: those of its first examples
    only, at least that many rows, for a caller that reads no more."""
    return glue.convert_examples(self._read(split)[:limit], self.tokenizer,
                                 self.max_seq_length, self.spec.labels)

  @functools.cached_property
  def _trained_labels(self):
    """Mask of the labels the train split has (None: no train split)."""
    if not os.path.exists(glue.split_path(self.data_dir, "train")):
      return None
    train = glue.read_split(self.spec, self.data_dir, "train")
    return _trained_mask(self.spec.labels, {e.label for e in train})

  def loss(self, model, batch):
    return self.supervised_loss(model(model_inputs(batch), training=True),
                                batch), {}

  def supervised_loss(self, outputs, batch):
    logits = outputs["logits"]
    if self.spec.is_regression:
      return tf.reduce_mean(tf.square(logits[:, 0] - batch["label_ids"]))
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["label_ids"], logits))

  def logit_kd(self, teacher, student, batch):
    if self.spec.is_regression:
      return tf.reduce_mean(tf.square(teacher["logits"] - student["logits"]))
    return soft_cross_entropy(teacher["logits"], student["logits"])

  def evaluate(self, model, split):
    features = self.features(split)
    logits = _predict(model, features, ["logits"])["logits"]
    predictions = logits[:, 0] if self.spec.is_regression else (
        _predicted_ids(logits, self._trained_labels, features["label_ids"],
                       self.spec.labels, split, "label"))
    return glue_metrics(self.name, features["label_ids"], predictions)

  def points(self, results):
    """The task's first metric (accuracy, MCC, Pearson) x 100."""
    return 100 * results[TASK_METRICS[self.name.lower()][0]]


class SpanTask:
  """SQuAD v1.1 / v2.0 extractive QA (our WordNet QA set included)."""

  logit_keys = ("start_logits", "end_logits")

  def __init__(self, name, data_dir, tokenizer, max_seq_length,
               doc_stride=128, max_query_length=64):
    self.name, self.data_dir, self.tokenizer = name, data_dir, tokenizer
    self.max_seq_length = max_seq_length
    self.doc_stride = min(doc_stride, max_seq_length // 2)
    self.max_query_length = min(max_query_length, max_seq_length // 4)

  def head(self):
    return Head("span")

  def _read(self, split, is_training):
    path = split_file(self.data_dir, split, "json")
    data = squad.read_squad(path, is_training=is_training,
                            strict=is_training)
    _not_empty(len(data.examples), path, split, "questions")
    return data

  def check_split(self, split):
    """Reads `split` (ValueError naming its file if missing or empty)."""
    self._read(split, False)

  def _build(self, examples, is_training):
    return squad.build_features(examples, self.tokenizer,
                                self.max_seq_length, self.doc_stride,
                                self.max_query_length, is_training)

  def features(self, split, limit=None):
    """The split's windows (`limit`: those of its first questions only,
    at least that many windows)."""
    arrays, _ = self.train_windows(split, limit)
    return arrays

  def texts(self, split):
    """The split's raw texts: each context once, every question."""
    examples = self._read(split, False).examples
    return list(dict.fromkeys(e.context for e in examples)) + [
        e.question for e in examples]

  def train_windows(self, split="train", limit=None):
    """(arrays, FeatureMeta per row) of a split read for training: the
    rows `features` gives, with where each came from."""
    return self._build(self._read(split, True).examples[:limit], True)

  def loss(self, model, batch):
    return self.supervised_loss(model(model_inputs(batch), training=True),
                                batch), {}

  def supervised_loss(self, outputs, batch):
    start = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["start_positions"], outputs["start_logits"])
    end = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["end_positions"], outputs["end_logits"])
    return tf.reduce_mean(start + end) / 2

  def logit_kd(self, teacher, student, batch):
    """Soft cross-entropy of the start and of the end distributions."""
    return (soft_cross_entropy(teacher["start_logits"],
                               student["start_logits"]) +
            soft_cross_entropy(teacher["end_logits"],
                               student["end_logits"])) / 2

  def evaluate(self, model, split):
    data = self._read(split, False)
    arrays, metas = self._build(data.examples, False)
    out = _predict(model, arrays, ["start_logits", "end_logits"])
    version_2 = data.version.startswith("2")
    # The n-best among the context's positions: a Keras model and its
    # .tflite file score alike whatever their padding logits.
    predictions = squad.postprocess(data.examples, metas, out["start_logits"],
                                    out["end_logits"],
                                    version_2_with_negative=version_2,
                                    n_best_in_context=True)
    return squad_metrics.evaluate(data, predictions)

  def points(self, results):
    return results["f1"]


class TaggingTask:
  """CoNLL token tagging, the tag on each word's first WordPiece."""

  logit_keys = ("logits",)

  def __init__(self, name, data_dir, tokenizer, max_seq_length):
    self.name, self.data_dir = name, data_dir
    self.tokenizer, self.max_seq_length = tokenizer, max_seq_length
    # The tag set is closed: take it from every split present, so a rare
    # tag seen only in dev still has an id; evaluation never predicts a tag
    # the train split lacks, so it counts as an error (`_predicted_ids`).
    train = self._read("train")
    sentences = list(train)
    for split in ("dev", "test"):
      try:
        sentences += self._read(split)
      except ValueError:
        pass  # absent (or unreadable: named when the split is used)
    self._vocabularies(sentences, train)

  def _vocabularies(self, sentences, train):
    self.tags = tagging.tag_vocabulary(sentences)
    self._trained_tags = _trained_mask(self.tags,
                                       tagging.tag_vocabulary(train))

  def _read(self, split):
    return tagging.read_conll(split_file(self.data_dir, split, "conll"))

  def texts(self, split):
    """The split's sentences as text (words joined by spaces)."""
    return [" ".join(s.words) for s in self._sentences(split)]

  def _sentences(self, split):
    """The split's sentences; ValueError naming its file if it has none."""
    path = split_file(self.data_dir, split, "conll")
    sentences = tagging.read_conll(path)
    _not_empty(len(sentences), path, split, "sentences")
    return sentences

  def check_split(self, split):
    """Reads `split` (ValueError naming its file if missing or empty)."""
    self._sentences(split)

  def head(self):
    return Head("tagger", num_classes=len(self.tags))

  def features(self, split, limit=None):
    """The split's rows (`limit`: its first sentences' only)."""
    return tagging.convert_sentences(self._sentences(split)[:limit],
                                     self.tokenizer, self.max_seq_length,
                                     self.tags)

  def loss(self, model, batch):
    return self.supervised_loss(model(model_inputs(batch), training=True),
                                batch), {}

  def supervised_loss(self, outputs, batch):
    return _token_loss(outputs["logits"], batch)

  def logit_kd(self, teacher, student, batch):
    """Per real token: the teacher also has a view on unlabelled pieces."""
    return soft_cross_entropy(teacher["logits"], student["logits"],
                              batch["input_mask"])

  def evaluate(self, model, split):
    features = self.features(split)
    logits = _predict(model, features, ["logits"])["logits"]
    predictions = _predicted_ids(logits, self._trained_tags,
                                 features["label_ids"], self.tags, split,
                                 "tag")
    return {"token_accuracy": token_accuracy(
        features["label_ids"], predictions, features["label_weights"])}

  def points(self, results):
    return 100 * results["token_accuracy"]


class IntentSlotTask(TaggingTask):
  """Joint intent + slot tagging (SNIPS; Brown with genre as the intent and
  POS tags as slots): a `# label = <intent>` on every CoNLL sentence."""

  logit_keys = ("intent_logits", "slot_logits")

  def _vocabularies(self, sentences, train):
    super()._vocabularies(sentences, train)
    self.intents = tagging.label_vocabulary(sentences)
    self._trained_intents = _trained_mask(self.intents,
                                          tagging.label_vocabulary(train))
    if not self.intents:
      raise ValueError(f"{self.data_dir}: no '# label = <intent>' lines; "
                       "intent_slot needs one before each sentence (plain "
                       "tags: --task tagging)")

  def head(self):
    return Head("intent_slot", num_classes=len(self.intents),
                num_slots=len(self.tags))

  def features(self, split, limit=None):
    sentences = self._sentences(split)[:limit]
    try:
      return tagging.convert_sentences(sentences, self.tokenizer,
                                       self.max_seq_length, self.tags,
                                       self.intents)
    except ValueError as e:
      raise ValueError(f"{self.data_dir} ({split}): {e}") from None

  def supervised_loss(self, outputs, batch):
    """Intent cross-entropy plus the slots' per-word one, summed (Chen et
    al.'s joint BERT, the paper's baseline)."""
    intent = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["sentence_label_ids"], outputs["intent_logits"]))
    return intent + _token_loss(outputs["slot_logits"], batch)

  def logit_kd(self, teacher, student, batch):
    return (soft_cross_entropy(teacher["intent_logits"],
                               student["intent_logits"]) +
            soft_cross_entropy(teacher["slot_logits"], student["slot_logits"],
                               batch["input_mask"]))

  def evaluate(self, model, split):
    features = self.features(split)
    out = _predict(model, features, ["intent_logits", "slot_logits"])
    intents = _predicted_ids(out["intent_logits"], self._trained_intents,
                             features["sentence_label_ids"], self.intents,
                             split, "intent")
    slots = _predicted_ids(out["slot_logits"], self._trained_tags,
                           features["label_ids"], self.tags, split, "tag")
    return intent_slot_metrics(features["sentence_label_ids"], intents,
                               features["label_ids"], slots, self.tags)

  def points(self, results):
    """Intent and every slot right, per sentence, x 100."""
    return 100 * results["sentence_exact_match"]


def _token_loss(logits, batch):
  """Cross-entropy over the tagged positions (each word's first piece)."""
  labels = tf.maximum(batch["label_ids"], 0)  # -1 marks unlabelled pieces
  per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
  weights = tf.cast(batch["label_weights"], per_token.dtype)
  return tf.reduce_sum(per_token * weights) / tf.maximum(
      tf.reduce_sum(weights), 1.0)


_OWN_TASKS = {"squad": SpanTask, "tagging": TaggingTask,
              "intent_slot": IntentSlotTask}


def task_names():
  """Every name make_task accepts."""
  return [*glue.TASKS, *_OWN_TASKS]


def make_task(name, data_dir, tokenizer, max_seq_length):
  """`squad` for SQuAD-format data, `tagging` / `intent_slot` for CoNLL,
  else a GLUE task (or spam)."""
  if name in _OWN_TASKS:
    return _OWN_TASKS[name](name, data_dir, tokenizer, max_seq_length)
  if name.lower() not in glue.TASKS:
    raise ValueError(f"--task {name}: unknown; tasks are "
                     f"{', '.join(task_names())}")
  return ClassificationTask(name, data_dir, tokenizer, max_seq_length)
