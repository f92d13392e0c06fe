"""Fine-tuning tasks: data -> features, head, loss and dev metrics.

One class per task family, all with the same small interface, so `finetune`
and `evaluate` need no per-task branches:

    task = make_task("spam", "data/spam", tokenizer, max_seq_length=128)
    head = task.head()                        # model_dir.Head for the model
    features = task.features("train")         # dict of numpy arrays
    loss, metrics = task.loss(model, batch)   # per-replica, in training
    task.evaluate(model, "dev")               # {"accuracy": ..., ...}

Tasks: the GLUE names and `spam` (ClassificationTask), `squad` (SpanTask),
`tagging` (TaggingTask) and `intent_slot` (IntentSlotTask: CoNLL with a
`# label = ` intent per sentence, the mixed-vocabulary paper's SNIPS task).

`supervised_loss` and `logit_kd` work on outputs already computed, so a
distillation loss can run the student once for both.
"""

import os

import numpy as np
import tensorflow as tf

from tfmodels.checkpoints.model_dir import Head
from tfmodels.data import glue, squad, squad_metrics, tagging
from tfmodels.data.metrics import (glue_metrics, intent_slot_metrics,
                                   token_accuracy)
from tfmodels.distillation.losses import soft_cross_entropy

_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _predict(model, features, keys, batch_size=64):
  """Model outputs `keys` over numpy features, concatenated."""
  out = {k: [] for k in keys}
  n = len(features["input_ids"])
  for begin in range(0, n, batch_size):
    batch = {k: tf.constant(v[begin:begin + batch_size])
             for k, v in model_inputs(features).items()}
    result = model(batch, training=False)
    for k in keys:
      out[k].append(result[k].numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def model_inputs(batch):
  return {k: batch[k] for k in _INPUTS}


def split_file(data_dir, split, extension):
  """DATA_DIR/SPLIT.EXTENSION, plain or gzipped (ValueError if neither)."""
  for name in (f"{split}.{extension}", f"{split}.{extension}.gz"):
    if os.path.exists(os.path.join(data_dir, name)):
      return os.path.join(data_dir, name)
  raise ValueError(f"{data_dir}: no {split}.{extension}[.gz]")


class ClassificationTask:
  """GLUE-layout classification / regression (and our spam task)."""

  def __init__(self, name, data_dir, tokenizer, max_seq_length):
    self.name, self.data_dir = name, data_dir
    self.spec = glue.get_task(name)
    self.tokenizer, self.max_seq_length = tokenizer, max_seq_length

  def head(self):
    return Head("classifier", num_classes=1 if self.spec.is_regression
                else len(self.spec.labels))

  def features(self, split):
    examples = glue.read_split(self.spec, self.data_dir, split)
    return glue.convert_examples(examples, self.tokenizer,
                                 self.max_seq_length, self.spec.labels)

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
        logits.argmax(-1))
    return glue_metrics(self.name, features["label_ids"], predictions)


class SpanTask:
  """SQuAD v1.1 / v2.0 extractive QA (our WordNet QA set included)."""

  def __init__(self, name, data_dir, tokenizer, max_seq_length,
               doc_stride=128, max_query_length=64):
    self.name, self.data_dir, self.tokenizer = name, data_dir, tokenizer
    self.max_seq_length = max_seq_length
    self.doc_stride = min(doc_stride, max_seq_length // 2)
    self.max_query_length = min(max_query_length, max_seq_length // 4)

  def head(self):
    return Head("span")

  def _read(self, split, is_training):
    return squad.read_squad(split_file(self.data_dir, split, "json"),
                            is_training=is_training, strict=is_training)

  def _build(self, examples, is_training):
    return squad.build_features(examples, self.tokenizer,
                                self.max_seq_length, self.doc_stride,
                                self.max_query_length, is_training)

  def features(self, split):
    arrays, _ = self._build(self._read(split, True).examples, True)
    return arrays

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
    predictions = squad.postprocess(data.examples, metas, out["start_logits"],
                                    out["end_logits"],
                                    version_2_with_negative=version_2)
    return squad_metrics.evaluate(data, predictions)


class TaggingTask:
  """CoNLL token tagging, the tag on each word's first WordPiece."""

  def __init__(self, name, data_dir, tokenizer, max_seq_length):
    self.name, self.data_dir = name, data_dir
    self.tokenizer, self.max_seq_length = tokenizer, max_seq_length
    # The tag set is closed: take it from every split present, so a rare
    # tag seen only in dev still has an id (and counts as an error).
    sentences = []
    for split in ("train", "dev", "test"):
      try:
        sentences += self._read(split)
      except ValueError:
        if split == "train":
          raise
    self._vocabularies(sentences)

  def _vocabularies(self, sentences):
    self.tags = tagging.tag_vocabulary(sentences)

  def _read(self, split):
    return tagging.read_conll(split_file(self.data_dir, split, "conll"))

  def head(self):
    return Head("tagger", num_classes=len(self.tags))

  def features(self, split):
    return tagging.convert_sentences(self._read(split), self.tokenizer,
                                     self.max_seq_length, self.tags)

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
    return {"token_accuracy": token_accuracy(
        features["label_ids"], logits.argmax(-1), features["label_weights"])}


class IntentSlotTask(TaggingTask):
  """Joint intent + slot tagging (SNIPS; Brown with genre as the intent and
  POS tags as slots): a `# label = <intent>` on every CoNLL sentence."""

  def _vocabularies(self, sentences):
    super()._vocabularies(sentences)
    self.intents = tagging.label_vocabulary(sentences)
    if not self.intents:
      raise ValueError(f"{self.data_dir}: no '# label = <intent>' lines; "
                       "intent_slot needs one before each sentence (plain "
                       "tags: --task tagging)")

  def head(self):
    return Head("intent_slot", num_classes=len(self.intents),
                num_slots=len(self.tags))

  def features(self, split):
    try:
      return tagging.convert_sentences(self._read(split), self.tokenizer,
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
    return intent_slot_metrics(
        features["sentence_label_ids"], out["intent_logits"].argmax(-1),
        features["label_ids"], out["slot_logits"].argmax(-1), self.tags)


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
