"""Calibration inputs for int8 / int16x8: real text, tokenized by our tokenizer.

Full-integer quantization picks each activation's range from what the model
sees on these inputs, so they must look like the app's inputs (random ids
give ranges that real text never reaches). Accepted files, plain or gzip:

  * SQuAD JSON (`.json`, or anything starting with `{`): question + context
    windows, as QA features are built;
  * a GLUE-layout `.tsv` of the task being converted (header and all);
  * CoNLL (`.conll`): one word and its tag per line, `# label = ...` intents
    allowed (tagging, intent_slot); each sentence's words, as tagging
    features are built;
  * anything else is text: one example per non-blank line, a tab separating
    segment A from segment B (e.g. `question<TAB>passage`). Blank lines are
    skipped, so the pre-training corpora work as they are.

    features = read_features("data/wordnet_qa/train.json.gz", tokenizer,
                              MAX_SEQ_LENGTH)
    dataset = calibration_dataset(features, num_samples=100)
"""

import numpy as np

from converters.contract import INPUT_FEATURES
from tfmodels.data.text_io import open_text

# tfmodels.data.glue is imported where used: it pulls in TensorFlow, and
# check_file runs before that is loaded, so bad input fails in a second.


class RepresentativeDataError(ValueError):
  """An unusable representative file; the message names it."""


def _sniff(path):
  """First non-blank character of the (possibly gzipped) text file."""
  try:
    with open_text(path) as f:
      while True:
        chunk = f.read(4096)
        if not chunk:
          return ""
        if chunk.strip():
          return chunk.lstrip()[0]
  except (OSError, EOFError, UnicodeDecodeError) as e:
    raise RepresentativeDataError(f"{path}: not UTF-8 text ({e})") from None
  except ValueError as e:  # open_text's "cannot open" names the file
    raise RepresentativeDataError(str(e)) from None


def _is_json(path, first):
  name = str(path).lower()
  return name.endswith((".json", ".json.gz")) or first == "{"


def _is_tsv(path):
  return str(path).lower().endswith((".tsv", ".tsv.gz"))


def _is_conll(path):
  return str(path).lower().endswith((".conll", ".conll.gz"))


def _conll_sentences(path):
  from tfmodels.data import tagging  # no TensorFlow in it
  try:
    sentences = tagging.read_conll(path)
  except ValueError as e:  # names file and line
    raise RepresentativeDataError(str(e)) from None
  if not sentences:
    raise RepresentativeDataError(f"{path}: no sentences")
  return sentences


def check_file(path):
  """Checks before any model is loaded: readable, UTF-8, not empty, and a
  SQuAD or CoNLL file, or text lines that parse (a .tsv is checked when
  read, its reader needs TensorFlow)."""
  first = _sniff(path)
  if first == "":
    raise RepresentativeDataError(f"{path}: no examples (the file is empty)")
  if _is_conll(path):
    _conll_sentences(path)
  elif _is_json(path, first):
    _squad_examples(path)
  elif not _is_tsv(path) and not _text_rows(path):
    raise RepresentativeDataError(f"{path}: no examples (only blank lines)")


def _squad_examples(path):
  from tfmodels.data import squad  # no TensorFlow in it
  try:
    examples = squad.read_squad(path, is_training=False, strict=False).examples
  except squad.SquadError as e:
    raise RepresentativeDataError(str(e)) from None
  if not examples:
    raise RepresentativeDataError(f"{path}: no questions")
  return examples


def _text_rows(path):
  """(line number, segment A, segment B or None) of each non-blank line."""
  try:
    with open_text(path) as f:
      lines = [line.rstrip("\n").rstrip("\r") for line in f]
  except (OSError, EOFError, UnicodeDecodeError) as e:
    raise RepresentativeDataError(f"{path}: not UTF-8 text ({e})") from None
  rows = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) > 2:
      raise RepresentativeDataError(
          f"{path}:{number}: {len(fields)} tab-separated fields; a text "
          "line holds one text or two (segment A<TAB>segment B)")
    rows.append((str(number), fields[0],
                 fields[1] if len(fields) == 2 else None))
  return rows


def read_features(path, tokenizer, seq_length, task_name=None):
  """Our feature dict (`input_ids`, `input_mask`, `segment_ids`) of the file.

  Args:
    path: str, the file (formats in the module docstring).
    tokenizer: tokenization.WordPieceTokenizer.
    seq_length: int, L.
    task_name: the GLUE task a `.tsv` file belongs to.

  Raises:
    RepresentativeDataError: unreadable, empty or malformed file.
  """
  from tfmodels.data import glue
  from tfmodels.data import squad
  from tfmodels.data import tagging
  first = _sniff(path)
  try:
    if _is_conll(path):
      sentences = _conll_sentences(path)
      features = tagging.convert_sentences(
          sentences, tokenizer, seq_length, tagging.tag_vocabulary(sentences))
    elif _is_json(path, first):
      features, _ = squad.build_features(
          _squad_examples(path), tokenizer, seq_length,
          doc_stride=max(1, seq_length // 2),
          max_query_length=max(1, seq_length // 4))
    elif _is_tsv(path):
      if task_name is None or task_name.lower() not in glue.TASKS:
        raise RepresentativeDataError(
            f"{path}: a .tsv file is read as a GLUE task's file, and "
            f"--task {task_name} is not a GLUE task")
      spec = glue.get_task(task_name)
      examples = glue.read_examples(spec, path)
      if not examples:
        raise RepresentativeDataError(f"{path}: no examples")
      features = glue.convert_examples(examples, tokenizer, seq_length,
                                       spec.labels)
    else:
      examples = [glue.Example(*row, None) for row in _text_rows(path)]
      if not examples:
        raise RepresentativeDataError(f"{path}: no examples (only blank "
                                      "lines)")
      features = glue.convert_examples(examples, tokenizer, seq_length)
  except RepresentativeDataError:
    raise
  except ValueError as e:  # SquadError and glue's errors name the file
    message = str(e)
    raise RepresentativeDataError(
        message if str(path) in message else f"{path}: {message}") from None
  return {k: features[k] for k in INPUT_FEATURES.values()}


def sample(features, num_samples, seed=0):
  """Up to num_samples rows, drawn without replacement (a fixed seed, so a
  conversion is reproducible)."""
  n = len(features["input_ids"])
  rows = np.sort(np.random.default_rng(seed).permutation(n)[:num_samples])
  return {k: v[rows] for k, v in features.items()}


def calibration_dataset(features, num_samples, seed=0):
  """The converter's `representative_dataset`: a callable yielding one
  [1, L] example at a time as a dict by signature input name, so the input
  order of the converted graph cannot mix them up."""
  chosen = sample(features, num_samples, seed)

  def generate():
    for row in range(len(chosen["input_ids"])):
      yield {name: chosen[ours][row:row + 1].astype(np.int32)
             for name, ours in INPUT_FEATURES.items()}
  return generate
