"""WordPiece tokenization against Hugging Face's reference implementation.

`tokenizers` (BertWordPieceTokenizer: BertTokenizerFast's pipeline) records
the reference output here, on the shipped corpus, on messy text (the QA
demo's hand-made sentences: accents, ß, ligatures, full width,
superscripts, control characters, U+FFFD, long non-Latin words, CJK, emoji,
URLs) and on 2,000 seeded lines of characters from many scripts. The Java
tokenizer is held to the same output through the golden vectors, which the
QA app tests regenerate from this tokenizer.
"""

import itertools
import os
import random
import re
import subprocess
import sys
import unicodedata

import pytest
import tensorflow as tf
from tokenizers import BertWordPieceTokenizer

from conftest import HELDOUT_CORPUS, REPO, VOCAB
from tfmodels.data.text_io import open_text
from tfmodels.tokenization import VocabError, WordPieceTokenizer

sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "qa_app"))
from handmade_text import EXTRA_SENTENCES, HANDMADE  # noqa: E402  pylint: disable=wrong-import-position

# The first eight of the QA app's hand-made sentences (accents, scripts,
# numbers, punctuation, control characters, long words), then the edges.
HARD_LINES = EXTRA_SENTENCES[:8] + ["a" * 120 + " longword", ""]


@pytest.fixture(scope="module")
def reference():
  return BertWordPieceTokenizer(VOCAB, lowercase=True, strip_accents=True,
                                clean_text=True,
                                handle_chinese_chars=True)


@pytest.fixture(scope="module")
def corpus_lines():
  with open_text(HELDOUT_CORPUS) as f:
    lines = [line.rstrip("\n") for line in itertools.islice(f, 3000)]
  return [line for line in lines if line]


def _reference_pieces(reference, lines):
  return [e.tokens for e in reference.encode_batch(
      lines, add_special_tokens=False)]


def test_matches_reference_on_shipped_corpus(tokenizer, reference,
                                             corpus_lines):
  ours = tokenizer.tokenize_batch(corpus_lines)
  theirs = _reference_pieces(reference, corpus_lines)
  mismatched = [(l, a, b) for l, a, b in zip(corpus_lines, ours, theirs)
                if a != b]
  assert len(corpus_lines) > 2500
  assert not mismatched, mismatched[:3]
  assert sum(len(p) for p in ours) > 50_000


def test_matches_reference_on_accents_scripts_numbers(tokenizer, reference):
  ours = tokenizer.tokenize_batch(HARD_LINES)
  theirs = _reference_pieces(reference, HARD_LINES)
  for line, a, b in zip(HARD_LINES, ours, theirs):
    assert a == b, line
  assert ours[0][:4] == ["hello", ",", "world", "!"]
  assert "[UNK]" in ours[8]  # a 120-letter word is unknown, as in BERT
  assert ours[7][:3] == ["una", "##ffa", "##ble"]


MESSY_LINES = EXTRA_SENTENCES + [t for h in HANDMADE for t in h[1:3]]
# Blocks the generated lines draw from: Latin with accents, Greek, Cyrillic,
# Hebrew, Arabic, Indic scripts, Hangul jamo, punctuation and symbols, CJK,
# Hangul syllables, ligatures, full width, math letters, emoji, C0 / C1
# controls, zero-width and format characters.
_BLOCKS = ((0x20, 0x7F), (0xA0, 0x250), (0x370, 0x530), (0x590, 0x700),
           (0x900, 0xE80), (0x1100, 0x1200), (0x1E00, 0x2100),
           (0x2100, 0x2800), (0x3000, 0x3100), (0x4E00, 0x4E80),
           (0xAC00, 0xAC80), (0xFB00, 0xFB50), (0xFE00, 0xFF00),
           (0xFF00, 0xFFF0), (0x1D400, 0x1D500), (0x1F300, 0x1F700),
           (0x0, 0x20), (0x7F, 0xA0), (0x200B, 0x2030))
_WORDS = ("Straße", "café", "naïve", "ﬁnal", "x²", "…", "Ⅻ", "™", "½",
          "ＡＢＣ", "Hello", "WORLD", "don't", "e.g.", "https://a.b/c?d=e",
          "ΣΑΣ", "İi", "a" * 60 + "b" * 50, "ж" * 70, "한국어", "日本語",
          "\ufffd", "caf\u0301e")


def _generated_lines(count=2000, seed=0):
  """Messy lines: random characters of many scripts and tricky words.

  Characters are those Unicode 3.2 already assigned (or still unassigned):
  the reference's character tables predate the Unicode that Python and
  TensorFlow use, so characters assigned since can differ in category (a
  newer punctuation mark is a letter to the reference) and are left out.
  """
  rng = random.Random(seed)
  lines = []
  for _ in range(count):
    parts = []
    for _ in range(rng.randint(1, 12)):
      if rng.random() < 0.5:
        chars = (chr(rng.randrange(*rng.choice(_BLOCKS)))
                 for _ in range(rng.randint(1, 8)))
        parts.append("".join(
            c for c in chars if unicodedata.category(c) == "Cn"
            or unicodedata.ucd_3_2_0.category(c) != "Cn"))
      else:
        parts.append(rng.choice(_WORDS))
      parts.append(rng.choice((" ", "  ", "\t", "\n", "")))
    lines.append("".join(parts))
  return lines


def test_pieces_offsets_and_graph_ids_match_reference_on_messy_text(
    tokenizer, reference):
  lines = MESSY_LINES + _generated_lines()
  expected = reference.encode_batch(lines, add_special_tokens=False)
  ours = tokenizer.encode_batch(lines)
  graph = tokenizer.ids_batch(lines)
  for line, want, got, ids in zip(lines, expected, ours, graph):
    assert got.pieces == want.tokens, line
    assert list(zip(got.char_start, got.char_end)) == [
        tuple(o) for o in want.offsets], line
    assert got.ids == want.ids == ids, line
  # What the issue found wrong before: each now as the reference has it.
  pieces = dict(zip(MESSY_LINES, (e.pieces for e in ours)))
  assert "##raße" in pieces["Straße STRASSE ẞ İstanbul ıi ς Σ ΣΑΣ ϐϑϕϖ ſt ﬅ"]
  for deleted in ("\x07", "\x1b", "\x7f", "\x0b", "\x0c", "\x85", "\ufffd",
                  "\u200b"):  # one word, the character gone
    assert tokenizer.tokenize(f"broken{deleted}word") == tokenizer.tokenize(
        "brokenword") != tokenizer.tokenize("broken word")
  assert tokenizer.tokenize("ж" * 70) != ["[UNK]"]  # 70 letters, 140 bytes
  assert tokenizer.tokenize("ж" * 101) == ["[UNK]"]
  hangul = tokenizer.encode("한국")
  assert all(e > s for s, e in zip(hangul.char_start, hangul.char_end))
  accent = tokenizer.encode("cafe\u0301 x")
  assert (accent.char_start[0], accent.char_end[0]) == (0, 4)


def test_char_offsets_point_into_original_text(tokenizer):
  text = "The Café de Flore, in Paris — 1,234 visitors."
  enc = tokenizer.encode(text)
  spans = [text[s:e] for s, e in zip(enc.char_start, enc.char_end)]
  assert spans[:6] == ["The", "Café", "de", "Fl", "ore", ","]
  assert enc.pieces[:6] == ["the", "cafe", "de", "fl", "##ore", ","]
  assert spans[-5:] == ["1", ",", "234", "visitors", "."]
  assert enc.ids == tokenizer.convert_tokens_to_ids(enc.pieces)


def test_in_graph_tokenization_matches_python(tokenizer):
  lines = HARD_LINES[:4]

  @tf.function
  def ids(texts):
    return tokenizer.tf_tokenize(texts)

  assert ids(tf.constant(lines)).to_list() == tokenizer.ids_batch(lines)


def test_cased_tokenizer_matches_reference_without_lower_casing():
  cased = WordPieceTokenizer(VOCAB, lower_case=False)
  reference = BertWordPieceTokenizer(VOCAB, lowercase=False,
                                     strip_accents=False, clean_text=True,
                                     handle_chinese_chars=True)
  lines = ["hello Hello", "Héllo café"] + HARD_LINES[:6]
  assert cased.tokenize_batch(lines) == _reference_pieces(reference, lines)
  # The uncased vocabulary has no capitals: cased text tokenizes differently.
  assert cased.tokenize("hello Hello")[0] == "hello"
  assert cased.tokenize("hello Hello")[1:] == ["[UNK]"]


def test_tokenize_command_prints_pieces_per_line(tokenizer, tmp_path):
  lines = HARD_LINES[:3] + [""] + HARD_LINES[7:8]
  out = subprocess.run(
      [sys.executable, "-m", "tfmodels.tokenize_lines", "--vocab_file", VOCAB],
      input="\n".join(lines) + "\n", capture_output=True, text=True,
      check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  expected = [" ".join(p) for p in tokenizer.tokenize_batch(lines)]
  assert out.stdout.split("\n")[:-1] == expected


def test_tokenize_command_rejects_missing_vocab(tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "tfmodels.tokenize_lines", "--vocab_file",
       str(tmp_path / "nope.txt")], input="x\n", capture_output=True,
      text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert out.returncode != 0
  assert out.stderr.strip().splitlines()[-1].startswith(
      f"error: --vocab_file {tmp_path / 'nope.txt'}")


@pytest.mark.parametrize("content, message", [
    ("", "vocabulary is empty"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", "lacks [MASK]"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n", ":7: duplicate token"),
])
def test_bad_vocab_is_refused_naming_the_file(tmp_path, content, message):
  path = tmp_path / "vocab.txt"
  path.write_text(content)
  with pytest.raises(VocabError, match=re.escape(message)) as e:
    WordPieceTokenizer(path)
  assert str(path) in str(e.value)
