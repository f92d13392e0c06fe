"""WordPiece tokenization against Hugging Face's reference implementation."""

import itertools
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf
from tokenizers import BertWordPieceTokenizer

from conftest import HELDOUT_CORPUS, VOCAB
from tfmodels.data.text_io import open_text
from tfmodels.tokenization import VocabError, WordPieceTokenizer


HARD_LINES = [
    "Héllo, wörld! The café's price: $3.50 — naïve résumé.",
    "Ünïcödé façade, Ångström, smörgåsbord; coöperate.",
    "Ελληνικά, русский язык, العربية, עברית and हिन्दी.",
    "中文字符 日本語のテキスト 한국어 mixed with English.",
    "Numbers: 1,234,567.89 3.14159 1e-10 2nd 42% #1 @home",
    "Punctuation!!! ... ??? (brackets) [square] {curly} <angle> \"quotes\"",
    "Control\tchars\u00a0and  multiple   spaces\u200b zero-width.",
    "unaffable antidisestablishmentarianism supercalifragilistic",
    "a" * 120 + " longword",
    "",
]


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
