"""BERT WordPiece tokenization, as the reference BERT tokenizer does it.

One tokenizer serves Python code (pieces, ids and character offsets, needed to
map QA answers back to the passage) and TF graphs (`tf_tokenize`). It reads a
BERT `vocab.txt` and follows Google's BERT and Hugging Face's
`BertTokenizerFast` (the tests' reference) step by step:

  1. clean: NUL, U+FFFD and control, format, private-use and surrogate
     characters (Cc, Cf, Co, Cs; not tab, CR, LF) are deleted; whitespace
     becomes a space (unassigned code points stay, and become [UNK]);
  2. CJK ideographs become words of their own (`tokenize_chinese_chars`);
  3. uncased (`lower_case=True`): NFD, non-spacing marks (Mn, accents)
     dropped (`strip_accents`, by default when lower-casing), then
     lower-cased code point by code point (`str.lower` of each
     character: `ß` stays, `ﬁ`, `²`, full-width letters are kept as they
     are and usually become [UNK]);
  4. words split at whitespace and at punctuation (ASCII punctuation and
     Unicode P*), each punctuation character a word;
  5. greedy longest-match WordPiece; a word of more than 100 characters
     (characters, not bytes) is [UNK].

Offsets index the original text: a piece spans the original characters its
normalized characters came from (a Hangul syllable split into jamo pieces
gives each piece the syllable; deleted characters and dropped accents belong
to no piece).

The settings (`TokenizerSettings`, Hugging Face's names) live beside the
vocabulary, as Hugging Face keeps them: a `tokenizer_config.json` next to
the vocab.txt (`settings_beside`), the same file in a converted model's
metadata.

The graph path runs the same steps with TensorFlow and tensorflow-text ops
(regular expressions, `normalize_utf8`, `WordpieceTokenizer`); the Python path
(`encode_batch`) normalizes character by character to keep the offsets; the
tests hold both to the reference on messy text.

    tok = WordPieceTokenizer("data/vocab/uncased_vocab.txt")
    tok.tokenize("Unaffable!")   # ['una', '##ffa', '##ble', '!']
"""

import dataclasses
import io
import json
import os
import string
import unicodedata


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100
# A vocabulary of a million pieces is ~20 MB; a larger file is not one.
MAX_VOCAB_BYTES = 1 << 26
SUFFIX = "##"
_BATCH = 512
# The CJK ideograph blocks BERT isolates (Google's `_is_chinese_char`).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
              (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
              (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_PUNCTUATION = frozenset(string.punctuation)

# The same rules as RE2 patterns for the graph path (RE2's \p{C} is Cc, Cf,
# Co, Cs: no unassigned code points, as the reference).
_CJK_CLASS = "[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                           for a, b in CJK_RANGES) + "]"
_DELETE_RE = r"[\x00\x{FFFD}]|[^\t\n\r\P{C}]"
_DELETED_CATEGORIES = ("Cc", "Cf", "Co", "Cs")
_SPACE_RE = r"[\t\n\r\p{Z}]"
_PUNCTUATION_RE = r"[!-/:-@\[-`{-~]|\p{P}"
_ISOLATE_RE = _PUNCTUATION_RE + "|" + _CJK_CLASS


class VocabError(ValueError):
  """A vocabulary file that cannot be used; the message names the file."""


def load_vocab(vocab_file, data=None):
  """Tokens of a BERT `vocab.txt`, one per line, in id order.

  `data`: the file's bytes when it lives elsewhere (a `.tflite` model's
  metadata); `vocab_file` then only names it in errors.
  """
  if data is None:  # it may come from a downloaded model directory
    from tfmodels.configs import ConfigError, read_regular_file
    try:
      data = read_regular_file(vocab_file, MAX_VOCAB_BYTES)
    except ConfigError as e:
      reason = str(e).removeprefix(f"{vocab_file}: ")
      raise VocabError(f"{vocab_file}: cannot read vocabulary ({reason})"
                       ) from None
    if len(data) > MAX_VOCAB_BYTES:
      raise VocabError(f"{vocab_file}: larger than {MAX_VOCAB_BYTES} bytes, "
                       "not a vocabulary")
  try:
    with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8") as f:
      tokens = [line.rstrip("\n").rstrip("\r") for line in f]
  except UnicodeDecodeError as e:
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


def is_cjk(c):
  cp = ord(c)
  return any(a <= cp <= b for a, b in CJK_RANGES)


def is_punctuation(c):
  return c in _ASCII_PUNCTUATION or unicodedata.category(c).startswith("P")


@dataclasses.dataclass(frozen=True)
class TokenizerSettings:
  """A BERT tokenizer's settings, by Hugging Face's names (its
  tokenizer_config.json fields and tokenizer.json's BertNormalizer):
  lower-case; strip accents (None: when lower-casing); isolate CJK
  ideographs. They travel with the vocabulary: `SETTINGS_NAME` beside a
  vocab.txt, and the same file in a converted model's metadata."""
  lower_case: bool = True
  strip_accents: bool | None = None
  tokenize_chinese_chars: bool = True

  @property
  def strips_accents(self):
    return (self.lower_case if self.strip_accents is None
            else self.strip_accents)

  def is_default(self):
    return self == TokenizerSettings()

  def to_config(self):
    """tokenizer_config.json's fields."""
    return {"do_lower_case": self.lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars}

  @classmethod
  def from_config(cls, values, source):
    """From tokenizer_config.json's fields (absent: the defaults);
    VocabError naming `source` and the field when one is not a boolean."""
    fields = {"do_lower_case": ("lower_case", (True, False)),
              "strip_accents": ("strip_accents", (True, False, None)),
              "tokenize_chinese_chars": ("tokenize_chinese_chars",
                                         (True, False))}
    kept = {}
    for field, (name, allowed) in fields.items():
      if field in values:
        value = values[field]
        if not any(value is a for a in allowed):
          raise VocabError(f"{source}: field '{field}' is "
                           f"{json.dumps(value)}; give "
                           f"{' or '.join(json.dumps(a) for a in allowed)}")
        kept[name] = value
    return cls(**kept)


# The settings' file beside a vocab.txt (Hugging Face's name and fields).
SETTINGS_NAME = "tokenizer_config.json"


def settings_beside(vocab_file):
  """The TokenizerSettings of `SETTINGS_NAME` beside `vocab_file`, or the
  defaults when there is none: a tokenizer built from a vocabulary path
  tokenizes as the model that vocabulary came with was trained."""
  path = os.path.join(os.path.dirname(os.path.abspath(vocab_file)),
                      SETTINGS_NAME)
  if not os.path.exists(path):
    return TokenizerSettings()
  from tfmodels.configs import ConfigError, read_json_object
  try:
    return TokenizerSettings.from_config(read_json_object(path), path)
  except ConfigError as e:
    raise VocabError(str(e)) from None


def normalize_char(c, settings):
  """What one character of the input becomes (steps 1 and 3): "" when
  deleted, " " for whitespace. CJK ideographs are isolated when words are
  split (`is_cjk`). `settings`: TokenizerSettings, or a bool (lower-case
  and strip accents, or neither)."""
  if isinstance(settings, bool):
    settings = TokenizerSettings(lower_case=settings)
  if c in "\x00\ufffd" or (c not in "\t\n\r" and unicodedata.category(c)
                           in _DELETED_CATEGORIES):
    return ""
  if c.isspace():
    return " "
  if settings.strips_accents:
    c = "".join(d for d in unicodedata.normalize("NFD", c)
                if unicodedata.category(d) != "Mn")
  if settings.lower_case:
    c = "".join(d.lower() for d in c)
  return c


class WordPieceTokenizer:
  """BERT WordPiece tokenizer over a `vocab.txt`.

  Args:
    vocab_file: str, path of a BERT `vocab.txt`.
    lower_case: bool, lower-case and strip accents (uncased models), where
      `settings` say otherwise; None: as `settings` say.
    data: bytes or None, the vocab.txt's content when it is not a file of
      its own (a model's metadata; `vocab_file` then names it).
    settings: TokenizerSettings, or None: those beside `vocab_file`
      (`settings_beside`; the defaults for `data`).
  """

  def __init__(self, vocab_file, lower_case=None, data=None, settings=None):
    self.vocab_file = str(vocab_file)
    if settings is None:
      settings = (TokenizerSettings() if data is not None
                  else settings_beside(vocab_file))
    if lower_case is not None and lower_case != settings.lower_case:
      settings = dataclasses.replace(
          settings, lower_case=lower_case,
          strip_accents=None if lower_case else settings.strip_accents)
    self.settings = settings
    self.lower_case = settings.lower_case
    self.vocab = load_vocab(vocab_file, data)
    self.token_to_id = {t: i for i, t in enumerate(self.vocab)}
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.token_to_id[t] for t in SPECIAL_TOKENS)
    self._normalized = {}  # character -> [(normalized char, word role)]
    # TensorFlow only here and in the graph path: reading a vocabulary or
    # its settings (load_vocab, settings_beside) loads neither.
    import tensorflow as tf
    import tensorflow_text as text
    self._table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(self.vocab), tf.range(len(self.vocab),
                                              dtype=tf.int64)),
        num_oov_buckets=1)
    # Words are capped at MAX_WORD_CHARS characters before this, so its
    # byte cap (4 bytes per character at most) never decides.
    self._wordpiece = text.WordpieceTokenizer(
        self._table, suffix_indicator=SUFFIX,
        max_bytes_per_word=4 * MAX_WORD_CHARS + 4, token_out_type=tf.int64,
        unknown_token="[UNK]")

  def __len__(self):
    return len(self.vocab)

  # --- the graph path --------------------------------------------------------

  def tf_tokenize(self, texts):
    """Graph op: string tensor [B] -> int64 RaggedTensor [B, (pieces)]."""
    import tensorflow as tf
    import tensorflow_text as text
    x = tf.strings.regex_replace(texts, _DELETE_RE, "")
    x = tf.strings.regex_replace(x, _SPACE_RE, " ")
    if self.settings.strips_accents:
      x = text.normalize_utf8(x, "NFD")
      x = tf.strings.regex_replace(x, r"\p{Mn}", "")
    if self.lower_case:
      # Character by character, as the reference: no final-sigma context.
      x = tf.strings.regex_replace(x, "\u03a3", "\u03c3")
      x = tf.strings.lower(x, encoding="utf-8")
    isolate = (_ISOLATE_RE if self.settings.tokenize_chinese_chars
               else _PUNCTUATION_RE)
    words = text.regex_split(x, r" +|" + isolate, isolate)
    words = tf.ragged.map_flat_values(
        lambda w: tf.where(
            tf.strings.length(w, unit="UTF8_CHAR") > MAX_WORD_CHARS,
            "[UNK]", w), words)
    return self._wordpiece.tokenize(words).merge_dims(-2, -1)

  def ids_batch(self, texts):
    """List of str -> list of id lists (no offsets; the fast path)."""
    import tensorflow as tf
    out = []
    for begin in range(0, len(texts), _BATCH):
      chunk = tf.constant(list(texts[begin:begin + _BATCH]), tf.string)
      out.extend(self.tf_tokenize(chunk).to_list())
    return out

  # --- the Python path, with offsets ----------------------------------------

  def _words(self, text_):
    """[(normalized word, origin index of each of its characters)]."""
    words, chars, origins = [], [], []

    def flush():
      if chars:
        words.append(("".join(chars), origins[:]))
        chars.clear()
        origins.clear()

    for i, c in enumerate(text_):
      normalized = self._normalized.get(c)
      if normalized is None:
        normalized = self._normalized[c] = [
            (x, "space" if x.isspace() else
             "alone" if is_punctuation(x) or (
                is_cjk(x) and self.settings.tokenize_chinese_chars)
            else "word")
            for x in normalize_char(c, self.settings)]
      for x, role in normalized:
        if role == "word":
          chars.append(x)
          origins.append(i)
        else:
          flush()
          if role == "alone":
            words.append((x, [i]))
    flush()
    return words

  def _wordpieces(self, word):
    """[(piece, first char, end char)] of one normalized word."""
    if len(word) > MAX_WORD_CHARS:
      return [("[UNK]", 0, len(word))]
    pieces, start = [], 0
    while start < len(word):
      end = len(word)
      while end > start:
        piece = word[start:end] if start == 0 else SUFFIX + word[start:end]
        if piece in self.token_to_id:
          break
        end -= 1
      if end == start:
        return [("[UNK]", 0, len(word))]
      pieces.append((piece, start, end))
      start = end
    return pieces

  def encode(self, text_):
    pieces, starts, ends = [], [], []
    for word, origins in self._words(text_):
      for piece, begin, end in self._wordpieces(word):
        pieces.append(piece)
        starts.append(origins[begin])
        ends.append(origins[end - 1] + 1)
    return Encoding(pieces, [self.token_to_id[p] for p in pieces], starts,
                    ends)

  def encode_batch(self, texts):
    """List of str -> list of `Encoding`, offsets in characters."""
    return [self.encode(t) for t in texts]

  def tokenize(self, text_):
    """str -> list of WordPiece strings."""
    return self.encode(text_).pieces

  def tokenize_batch(self, texts):
    return [e.pieces for e in self.encode_batch(texts)]

  def convert_tokens_to_ids(self, pieces):
    return [self.token_to_id.get(p, self.unk_id) for p in pieces]

  def convert_ids_to_tokens(self, ids):
    return [self.vocab[i] for i in ids]
