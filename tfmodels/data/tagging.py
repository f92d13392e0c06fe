"""CoNLL-style token tagging data (POS, NER, slots) with optional intent.

One token per line: the word is the first field, its tag the last (fields are
separated by spaces or tabs). A blank line ends a sentence; `-DOCSTART-`
lines are skipped. For joint intent + slot data a sentence may open with the
CoNLL-U style comment `# label = <sentence label>`; other `# key = value`
comments are ignored. Plain or gzip files.

    # label = PlayMusic
    play  O
    jazz  B-genre

    train = read_conll("data/snips/train.conll")
    features = convert_sentences(train, tokenizer, 64, tag_vocabulary(train),
                                 label_vocabulary(train))
"""

import dataclasses
import re

import numpy as np

from tfmodels.data.text_io import open_text

_COMMENT = re.compile(r"# (\S+) = (.*)")
_FIELD_SEPARATOR = re.compile(r"[ \t]+")


@dataclasses.dataclass(frozen=True)
class Sentence:
  """Words and their tags; `label` is the sentence label (intent) or None."""
  words: tuple[str, ...]
  tags: tuple[str, ...]
  label: str | None = None




def read_conll(path):
  """Sentences of a CoNLL file.

  Raises:
    ValueError: "file:line: problem" for a token line without a tag, a
      `# label` comment after the sentence's tokens, a second or empty one, or
      one that labels no tokens.
  """
  sentences = []
  words, tags, label, label_line = [], [], None, None

  def end_sentence():
    if words:
      sentences.append(Sentence(tuple(words), tuple(tags), label))
    elif label is not None:
      raise ValueError(f"{path}:{label_line}: '# label = {label}' labels no "
                       "tokens")

  with open_text(path) as f:
    try:
      for number, line in enumerate(f, 1):
        line = line.rstrip("\n").rstrip("\r")
        where = f"{path}:{number}"
        comment = _COMMENT.fullmatch(line)
        if comment:
          if comment.group(1) != "label":
            continue
          if words:
            raise ValueError(f"{where}: '# label = ...' must come before the "
                             "sentence's tokens")
          if label is not None:
            raise ValueError(f"{where}: second '# label = ...' for one "
                             "sentence")
          label, label_line = comment.group(2).strip(), number
          if not label:
            raise ValueError(f"{where}: empty '# label = '")
          continue
        fields = _FIELD_SEPARATOR.split(line.strip(" \t"))
        if fields == [""]:
          end_sentence()
          words, tags, label = [], [], None
        elif fields[0] != "-DOCSTART-":
          if len(fields) < 2:
            raise ValueError(f"{where}: expected a token and a tag, got "
                             f"{line!r}")
          words.append(fields[0])
          tags.append(fields[-1])
    except (UnicodeDecodeError, OSError, EOFError) as e:
      raise ValueError(f"{path}: cannot read ({e})") from None
  end_sentence()
  return sentences


def tag_vocabulary(sentences):
  """Sorted tags of (training) sentences; a tag's id is its position."""
  return sorted({t for s in sentences for t in s.tags})


def label_vocabulary(sentences):
  """Sorted sentence labels (intents) of (training) sentences."""
  return sorted({s.label for s in sentences if s.label is not None})


def _ids(names, vocabulary, what):
  """Ids of names in vocabulary; an unknown name is a ValueError naming it."""
  index = {name: i for i, name in enumerate(vocabulary)}
  for name in names:
    if name not in index:
      raise ValueError(f"unknown {what} {name!r}; known {what}s: "
                       f"{list(vocabulary)}")
  return [index[name] for name in names]


def convert_sentences(sentences, tokenizer, max_seq_length, tag_list,
                      label_list=None):
  """`[CLS] pieces [SEP]` features with each word's tag on its first piece.

  Words are WordPiece-tokenized one by one (in one batch); the first piece of
  a word carries its tag id with weight 1, its other pieces, [CLS], [SEP] and
  padding carry tag id -1 and weight 0. A word with no pieces (e.g. a lone
  zero-width space) becomes [UNK] so its tag is kept. Pieces past
  max_seq_length - 2 are dropped, and with them the tags of those words.

  Args:
    sentences: list of Sentence.
    tokenizer: tokenization.WordPieceTokenizer.
    max_seq_length: int, L >= 2.
    tag_list: tags in id order (`tag_vocabulary(train)`).
    label_list: sentence labels in id order (`label_vocabulary(train)`), for
      joint intent + slot; None ignores sentence labels (plain tagging of a
      labelled file, e.g. Brown POS with genre labels).

  Returns:
    dict of numpy arrays [N, L]: int32 `input_ids`, `input_mask`,
    `segment_ids` (zeros), `label_ids`; float32 `label_weights`; with
    label_list also int32 `sentence_label_ids` [N].

  Raises:
    ValueError: for an unknown tag or label (named), or with label_list a
      sentence without a label.
  """
  if max_seq_length < 2:
    raise ValueError(f"max_seq_length {max_seq_length} leaves no room for "
                     "[CLS] and [SEP]")
  for i, s in enumerate(sentences):
    if len(s.words) != len(s.tags):
      raise ValueError(f"sentence {i} has {len(s.words)} words but "
                       f"{len(s.tags)} tags")
  tag_ids = _ids([t for s in sentences for t in s.tags], tag_list, "tag")
  words = [w for s in sentences for w in s.words]
  pieces = [e.ids or [tokenizer.unk_id] for e in tokenizer.encode_batch(words)]
  n = len(sentences)
  input_ids = np.zeros([n, max_seq_length], np.int32)
  input_mask = np.zeros_like(input_ids)
  label_ids = np.full([n, max_seq_length], -1, np.int32)
  label_weights = np.zeros([n, max_seq_length], np.float32)
  word = 0
  for row, sentence in enumerate(sentences):
    tokens = [tokenizer.cls_id]
    for _ in sentence.words:
      if len(tokens) < max_seq_length - 1:
        label_ids[row, len(tokens)] = tag_ids[word]
        label_weights[row, len(tokens)] = 1.0
        tokens.extend(pieces[word][:max_seq_length - 1 - len(tokens)])
      word += 1
    tokens.append(tokenizer.sep_id)
    input_ids[row, :len(tokens)] = tokens
    input_mask[row, :len(tokens)] = 1
  features = {"input_ids": input_ids, "input_mask": input_mask,
              "segment_ids": np.zeros_like(input_ids), "label_ids": label_ids,
              "label_weights": label_weights}
  if label_list is None:
    return features
  unlabelled = [i for i, s in enumerate(sentences) if s.label is None]
  if unlabelled:
    raise ValueError(f"sentence {unlabelled[0]} has no '# label = ' but "
                     "label_list asks for sentence labels")
  features["sentence_label_ids"] = np.array(
      _ids([s.label for s in sentences], label_list, "label"), np.int32)
  return features
