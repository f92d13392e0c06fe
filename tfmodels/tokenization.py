"""BERT WordPiece tokenization on tensorflow-text's FastBertTokenizer.

One tokenizer serves Python code (pieces, ids and character offsets, needed to
map QA answers back to the passage) and TF graphs (`tf_tokenize`). It reads a
BERT `vocab.txt`; with `lower_case=True` it lower-cases, NFD-normalises and
strips accents like Google's uncased models, and it always splits punctuation
and CJK characters into tokens of their own.

    tok = WordPieceTokenizer("data/vocab/uncased_vocab.txt")
    tok.tokenize("Unaffable!")   # ['una', '##ffa', '##ble', '!']
"""

import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_text as text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_BATCH = 512


class VocabError(ValueError):
  """A vocabulary file that cannot be used; the message names the file."""


def load_vocab(vocab_file):
  """Tokens of a BERT `vocab.txt`, one per line, in id order."""
  try:
    with open(vocab_file, encoding="utf-8") as f:
      tokens = [line.rstrip("\n").rstrip("\r") for line in f]
  except (OSError, UnicodeDecodeError) as e:
    raise VocabError(f"{vocab_file}: cannot read vocabulary ({e})") from None
  while tokens and not tokens[-1]:
    tokens.pop()
  if not tokens:
    raise VocabError(f"{vocab_file}: vocabulary is empty")
  missing = [t for t in SPECIAL_TOKENS if t not in tokens]
  if missing:
    raise VocabError(f"{vocab_file}: vocabulary lacks {', '.join(missing)}")
  seen = set()
  for line, token in enumerate(tokens, 1):
    if not token:
      raise VocabError(f"{vocab_file}:{line}: empty token")
    if token in seen:
      raise VocabError(f"{vocab_file}:{line}: duplicate token {token!r}")
    seen.add(token)
  return tokens


@dataclasses.dataclass(frozen=True)
class Encoding:
  """One text's WordPieces: `char_start`/`char_end` index the original text."""
  pieces: list
  ids: list
  char_start: list
  char_end: list


def _byte_to_char(s):
  """Array mapping each UTF-8 byte offset of s (and len) to a char offset."""
  lengths = [len(c.encode("utf-8")) for c in s]
  mapping = np.repeat(np.arange(len(s)), lengths)
  return np.append(mapping, len(s))


class WordPieceTokenizer:
  """BERT WordPiece tokenizer over a `vocab.txt`.

  Args:
    vocab_file: str, path of a BERT `vocab.txt`.
    lower_case: bool, lower-case and strip accents (uncased models).
  """

  def __init__(self, vocab_file, lower_case=True):
    self.vocab_file = str(vocab_file)
    self.lower_case = lower_case
    self.vocab = load_vocab(vocab_file)
    self.token_to_id = {t: i for i, t in enumerate(self.vocab)}
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.token_to_id[t] for t in SPECIAL_TOKENS)
    self._tf = text.FastBertTokenizer(
        vocab=self.vocab, token_out_type=tf.int64, unknown_token="[UNK]",
        lower_case_nfd_strip_accents=lower_case)

  def __len__(self):
    return len(self.vocab)

  def tf_tokenize(self, texts):
    """Graph op: string tensor [B] -> int64 RaggedTensor [B, (pieces)]."""
    return self._tf.tokenize(texts)

  def ids_batch(self, texts):
    """List of str -> list of id lists (no offsets; the fast path)."""
    out = []
    for begin in range(0, len(texts), _BATCH):
      chunk = tf.constant(list(texts[begin:begin + _BATCH]), tf.string)
      out.extend(self._tf.tokenize(chunk).to_list())
    return out

  def encode_batch(self, texts):
    """List of str -> list of `Encoding`, offsets in characters."""
    out = []
    for begin in range(0, len(texts), _BATCH):
      chunk = list(texts[begin:begin + _BATCH])
      ids, starts, ends = self._tf.tokenize_with_offsets(
          tf.constant(chunk, tf.string))
      for s, i, b, e in zip(chunk, ids.to_list(), starts.to_list(),
                            ends.to_list()):
        if len(s) != len(s.encode("utf-8")):  # non-ASCII: bytes != chars
          to_char = _byte_to_char(s)
          b, e = to_char[b].tolist(), to_char[e].tolist()
        out.append(Encoding([self.vocab[x] for x in i], i, b, e))
    return out

  def encode(self, text_):
    return self.encode_batch([text_])[0]

  def tokenize(self, text_):
    """str -> list of WordPiece strings."""
    return self.encode(text_).pieces

  def tokenize_batch(self, texts):
    return [e.pieces for e in self.encode_batch(texts)]

  def convert_tokens_to_ids(self, pieces):
    return [self.token_to_id.get(p, self.unk_id) for p in pieces]

  def convert_ids_to_tokens(self, ids):
    return [self.vocab[i] for i in ids]

