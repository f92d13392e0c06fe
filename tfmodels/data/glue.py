"""GLUE (and our "spam") TSV readers and BERT sentence(-pair) features.

Each task is one `Task` row in `TASKS`: where its files keep the texts, the
label and the id, and its label list (None for STS-B's regression). One
reader serves them all:

    task = get_task("mrpc")
    train = read_split(task, "data/glue/MRPC", "train")   # train.tsv(.gz)
    features = convert_examples(train, tokenizer, 128, task.labels)
    ds = dataset(features, batch_size=32, shuffle=True)

Files are read as UTF-8 (a leading BOM, as in MRPC, is dropped) and split on
tabs with no quote handling: GLUE texts contain unmatched quotes. Gzip files
are recognised by their magic bytes, whatever their name.
"""

import dataclasses
import math
import os

import numpy as np
import tensorflow as tf

from tfmodels.data.metrics import TASK_METRICS
from tfmodels.data.text_io import open_text

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where one kind of file (labelled or test) keeps its fields.

  Fields are found by column name in the file's header, so MNLI's 12-column
  train and 16-column dev files share a layout. `columns` names the fields of
  a headerless file (CoLA train/dev). A row must have as many fields as the
  header. `guid` None: the line number serves as the id.
  """
  text_a: str
  text_b: str | None = None
  label: str | None = None
  guid: str | None = None
  columns: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Task:
  """A GLUE-style task: file layouts, splits and labels (None: regression)."""
  name: str
  labelled: Layout
  test: Layout
  labels: tuple[str, ...] | None
  splits: tuple[str, ...] = ("train", "dev", "test")

  @property
  def is_regression(self):
    return self.labels is None

  @property
  def metrics(self):
    """Metric names it reports (see metrics.TASK_METRICS)."""
    return TASK_METRICS[self.name]


@dataclasses.dataclass(frozen=True)
class Example:
  """One row: `label` is a str, a float (regression) or None (test files)."""
  guid: str
  text_a: str
  text_b: str | None
  label: str | float | None


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")
_PAIR_TEST = Layout("sentence1", "sentence2", guid="index")
_PAIR = dataclasses.replace(_PAIR_TEST, label="label")
_SST = Layout("sentence", label="label")

TASKS = {t.name: t for t in (
    Task("cola",
         Layout("sentence", label="label",
                columns=("source", "label", "original_label", "sentence")),
         Layout("sentence", guid="index"), _BINARY),
    Task("sst-2", _SST, Layout("sentence", guid="index"), _BINARY),
    Task("mrpc",
         Layout("#1 String", "#2 String", label="Quality"),
         Layout("#1 String", "#2 String", guid="index"), _BINARY),
    Task("sts-b", dataclasses.replace(_PAIR_TEST, label="score"), _PAIR_TEST,
         None),
    Task("qqp",
         Layout("question1", "question2", label="is_duplicate", guid="id"),
         Layout("question1", "question2", guid="id"), _BINARY),
    Task("mnli",
         Layout("sentence1", "sentence2", label="gold_label", guid="index"),
         _PAIR_TEST, ("contradiction", "entailment", "neutral"),
         splits=("train", "dev_matched", "dev_mismatched", "test_matched",
                 "test_mismatched")),
    Task("qnli", Layout("question", "sentence", label="label", guid="index"),
         Layout("question", "sentence", guid="index"), _NLI),
    Task("rte", _PAIR, _PAIR_TEST, _NLI),
    Task("wnli", _PAIR, _PAIR_TEST, _BINARY),
    # SpamAssassin e-mail (data/spam): SST-2's layout, labelled in every
    # split; 0 = ham, 1 = spam.
    Task("spam", _SST, _SST, _BINARY),
)}


def get_task(name):
  """The `Task` called `name` (case-insensitive, e.g. "SST-2")."""
  task = TASKS.get(name.lower())
  if task is None:
    raise ValueError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
  return task


def _rows(f, path):
  """(line number, fields) of each non-blank line of an open file."""
  try:
    for number, line in enumerate(f, 1):
      line = line.rstrip("\n").rstrip("\r")
      if line:
        yield number, line.split("\t")
  except (UnicodeDecodeError, OSError, EOFError) as e:
    raise ValueError(f"{path}: cannot read ({e})") from None


def read_examples(task, path, layout=None, split="train"):
  """Examples of one TSV file, plain or gzip.

  Args:
    task: Task (or its name).
    path: the file.
    layout: Layout; default the task's test layout for a `test*` split and
      its labelled layout otherwise.
    split: str, prefixes each guid ("dev-17").

  Raises:
    ValueError: "file:line: problem" for a missing header column, a row with
      the wrong number of fields, an unknown label or a non-numeric score.
  """
  task = get_task(task) if isinstance(task, str) else task
  if layout is None:
    layout = task.test if split.startswith("test") else task.labelled
  with open_text(path) as f:
    rows = _rows(f, path)
    header_line, columns = 0, layout.columns
    if columns is None:
      header_line, columns = next(rows, (1, []))
    fields_of = [layout.text_a, layout.text_b, layout.label, layout.guid]
    missing = [c for c in fields_of if c is not None and c not in columns]
    if missing:
      raise ValueError(f"{path}:{header_line}: header lacks column(s) "
                       f"{missing}; header is {columns}")
    # Field positions; -1 (a None field) is never read.
    a, b, label_at, guid_at = (-1 if c is None else columns.index(c)
                               for c in fields_of)
    examples = []
    for number, fields in rows:
      where = f"{path}:{number}"
      if len(fields) != len(columns):
        raise ValueError(f"{where}: {len(fields)} tab-separated fields, "
                         f"expected {len(columns)} ({task.name})")
      label = None
      if layout.label is not None:
        label = _parse_label(task, fields[label_at], where)
      guid = fields[guid_at] if layout.guid is not None else str(number)
      examples.append(Example(f"{split}-{guid}", fields[a],
                              None if layout.text_b is None else fields[b],
                              label))
  return examples


def _parse_label(task, label, where):
  if task.labels is not None:
    if label not in task.labels:
      raise ValueError(f"{where}: unknown label {label!r}; {task.name} labels "
                       f"are {list(task.labels)}")
    return label
  try:
    score = float(label)
  except ValueError:
    score = math.nan
  if not math.isfinite(score):
    raise ValueError(f"{where}: score {label!r} is not a finite number")
  return score


def split_path(data_dir, split):
  """`<split>.tsv` in data_dir, else `<split>.tsv.gz`."""
  path = os.path.join(data_dir, f"{split}.tsv")
  if not os.path.exists(path) and os.path.exists(path + ".gz"):
    return path + ".gz"
  return path


def read_split(task, data_dir, split):
  """Examples of `<data_dir>/<split>.tsv[.gz]`; split must be in task.splits
  or a labelled file of its own there (a slice held out of train)."""
  task = get_task(task) if isinstance(task, str) else task
  if split not in task.splits and not os.path.exists(
      split_path(data_dir, split)):
    raise ValueError(f"{task.name} has no split {split!r}; splits are "
                     f"{list(task.splits)}")
  return read_examples(task, split_path(data_dir, split), split=split)


def truncate_pair(len_a, len_b, max_length):
  """Lengths after BERT's `_truncate_seq_pair`.

  One token at a time is dropped from the end of the longer segment (of `b`
  on a tie) until both fit in max_length, so a short segment survives whole.
  """
  while len_a + len_b > max_length:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return len_a, len_b


def convert_examples(examples, tokenizer, max_seq_length, label_list=None):
  """BERT features: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, zero padded.

  Args:
    examples: list of Example.
    tokenizer: tokenization.WordPieceTokenizer.
    max_seq_length: int, L; at least 2 (3 with pairs). Truncation may leave
      a segment with no tokens.
    label_list: sequence of label strings (id = position), or None for
      regression (float labels).

  Returns:
    dict of numpy arrays: int32 `input_ids`, `input_mask`, `segment_ids`
    [N, L] and, unless every example is unlabelled, `label_ids` [N] (int32,
    or float32 for regression).
  """
  pair = any(e.text_b is not None for e in examples)
  if max_seq_length < (3 if pair else 2):
    raise ValueError(f"max_seq_length {max_seq_length} leaves no room for "
                     "the special tokens")
  texts = [e.text_a for e in examples] + [e.text_b for e in examples
                                          if e.text_b is not None]
  encodings = iter(tokenizer.encode_batch(texts))
  ids_a = [next(encodings).ids for _ in examples]
  n = len(examples)
  input_ids = np.zeros([n, max_seq_length], np.int32)
  segment_ids = np.zeros_like(input_ids)
  input_mask = np.zeros_like(input_ids)
  for row, (e, a) in enumerate(zip(examples, ids_a)):
    if e.text_b is None:
      tokens = [tokenizer.cls_id, *a[:max_seq_length - 2], tokenizer.sep_id]
      first = len(tokens)
    else:
      b = next(encodings).ids
      len_a, len_b = truncate_pair(len(a), len(b), max_seq_length - 3)
      tokens = [tokenizer.cls_id, *a[:len_a], tokenizer.sep_id, *b[:len_b],
                tokenizer.sep_id]
      first = len_a + 2
    input_ids[row, :len(tokens)] = tokens
    input_mask[row, :len(tokens)] = 1
    segment_ids[row, first:len(tokens)] = 1
  features = {"input_ids": input_ids, "input_mask": input_mask,
              "segment_ids": segment_ids}
  labels = [e.label for e in examples]
  if labels and all(label is None for label in labels):
    return features
  if any(label is None for label in labels):
    raise ValueError("labelled and unlabelled examples are mixed")
  if label_list is None:
    if any(isinstance(label, str) for label in labels):
      raise ValueError("class labels need a label_list (None means "
                       "regression)")
    features["label_ids"] = np.array(labels, np.float32)
  else:
    label_id = {label: i for i, label in enumerate(label_list)}
    unknown = sorted({str(l) for l in labels if l not in label_id})
    if unknown:
      raise ValueError(f"labels {unknown} are not in the label list "
                       f"{list(label_list)}")
    features["label_ids"] = np.array([label_id[l] for l in labels], np.int32)
  return features


def dataset(features, batch_size, shuffle=False, seed=None,
            drop_remainder=False):
  """tf.data of (inputs dict, label_ids) batches; inputs only if unlabelled.

  Shuffling is over the whole set and differs every epoch.
  """
  inputs = {k: features[k] for k in INPUT_KEYS}
  if "label_ids" in features:
    ds = tf.data.Dataset.from_tensor_slices((inputs, features["label_ids"]))
  else:
    ds = tf.data.Dataset.from_tensor_slices(inputs)
  if shuffle:
    ds = ds.shuffle(len(features["input_ids"]), seed=seed,
                    reshuffle_each_iteration=True)
  return ds.batch(batch_size, drop_remainder=drop_remainder).prefetch(
      tf.data.AUTOTUNE)
