"""The data under data/ parses and has the sizes NOTICE.md states."""

import hashlib
import json
import os

import pytest

from conftest import DATA
from tfmodels.data import glue, squad, tagging
from tfmodels.data.demo_sources import BROWN_GENRES
from tfmodels.data.text_io import open_text
from tfmodels.data.vocab_learning import ascii_pieces, overlap
from tfmodels.tokenization import load_vocab

MANIFEST = json.load(open(os.path.join(DATA, "manifest.json")))
FILES = MANIFEST["files"]
NOTICE = open(os.path.join(DATA, "NOTICE.md"), encoding="utf-8").read()


def _path(relpath):
  return os.path.join(DATA, relpath)


def _count_documents(path):
  with open_text(path) as f:
    blocks, in_block = 0, False
    for line in f:
      if line.strip() and not in_block:
        blocks += 1
      in_block = bool(line.strip())
  return blocks


@pytest.mark.parametrize("relpath", sorted(FILES))
def test_file_matches_manifest_and_notice(relpath):
  entry = FILES[relpath]
  with open(_path(relpath), "rb") as f:
    data = f.read()
  assert len(data) == entry["bytes"]
  assert hashlib.sha256(data).hexdigest() == entry["sha256"]
  assert (f"| `{relpath}` | {entry['count']} {entry['unit']} | "
          f"{entry['source']} | {entry['bytes']} |") in NOTICE


def test_total_size_is_within_budget():
  assert sum(f["bytes"] for f in FILES.values()) < 15 * 10**6


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_pretraining_corpus_documents(split):
  relpath = f"pretraining/{split}.txt.gz"
  assert _count_documents(_path(relpath)) == FILES[relpath]["count"]


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_spam_task(split):
  relpath = f"spam/{split}.tsv.gz"
  examples = glue.read_examples("spam", _path(relpath), split=split)
  assert len(examples) == FILES[relpath]["count"]
  labels = [e.label for e in examples]
  assert set(labels) == {"0", "1"}
  assert 0.2 < labels.count("1") / len(labels) < 0.45  # ~1/3 spam


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_brown_tagging_task(split):
  relpath = f"brown_pos/{split}.conll.gz"
  sentences = tagging.read_conll(_path(relpath))
  assert len(sentences) == FILES[relpath]["count"]
  assert {s.label for s in sentences} <= set(BROWN_GENRES.values())
  assert all(len(s.words) == len(s.tags) > 0 for s in sentences)
  if split == "train":
    assert len({s.label for s in sentences}) == len(BROWN_GENRES)
    assert {"nn", "vb", "jj", "at"} <= set(tagging.tag_vocabulary(sentences))


def test_wordnet_qa_answers_are_recovered_from_token_spans(tokenizer):
  train = squad.read_squad(_path("wordnet_qa/train.json.gz"),
                           is_training=True)
  dev = squad.read_squad(_path("wordnet_qa/dev.json.gz"))
  assert len(train.examples) == FILES["wordnet_qa/train.json.gz"]["count"]
  assert len(dev.examples) == FILES["wordnet_qa/dev.json.gz"]["count"]
  assert len(train.examples) + len(dev.examples) >= 5000
  assert not train.mismatched
  recovery = squad.recover_answer_spans(train.examples, tokenizer)
  assert recovery.total == len(train.examples)
  assert recovery.not_exact == 0, recovery.failures[:5]
  # Split by definition: no question is in both splits, and no question
  # holds its own answer word.
  assert not ({e.question for e in train.examples} &
              {e.question for e in dev.examples})
  for e in train.examples + dev.examples:
    definition = e.question.lower().split("means:", 1)[1]
    assert e.answer_text.lower() not in definition.split(), e


def test_vocabularies():
  teacher = load_vocab(_path("vocab/uncased_vocab.txt"))
  student = load_vocab(_path("vocab/student_vocab.txt"))
  assert len(teacher) == 30522 == FILES["vocab/uncased_vocab.txt"]["count"]
  assert len(student) == FILES["vocab/student_vocab.txt"]["count"]
  assert 4000 < len(student) <= 5000 + len(ascii_pieces())
  assert set(ascii_pieces()) <= set(student)
  assert round(overlap(student, teacher), 4) == MANIFEST[
      "student_vocab_overlap"]
