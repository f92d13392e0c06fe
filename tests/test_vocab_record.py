"""tfmodels.vocab_record: the vocabulary a run records, and the check of
the one a consumer is given against it (old runs keep working)."""

import hashlib
import json

import pytest

from conftest import STUDENT_VOCAB, VOCAB, write_lines
from tfmodels.tokenization import SPECIAL_TOKENS, VocabError
from tfmodels.vocab_record import (VocabMismatchError, record_of,
                                   record_of_file, resolve, with_record)

WORDS = ["river", "stream", "lake"]


@pytest.fixture()
def vocabs(tmp_path):
  """(right, swapped): two vocabularies of one size, ids of two words
  swapped."""
  right = write_lines(tmp_path / "right.txt", list(SPECIAL_TOKENS) + WORDS)
  swapped = write_lines(tmp_path / "swapped.txt",
                        list(SPECIAL_TOKENS) + WORDS[::-1])
  return right, swapped


def _run(tmp_path, spec, name="run"):
  run = tmp_path / name
  run.mkdir()
  (run / "task.json").write_text(json.dumps(spec))
  return str(run)


def test_record_is_size_and_the_hash_of_the_tokens(tmp_path, vocabs):
  right, _ = vocabs
  with open(right, "rb") as f:
    assert record_of_file(right).sha256 == hashlib.sha256(f.read()).hexdigest()
  assert record_of_file(right).size == 8
  crlf = tmp_path / "crlf.txt"
  crlf.write_bytes(open(right, "rb").read().replace(b"\n", b"\r\n") + b"\n")
  assert record_of_file(crlf) == record_of_file(right)  # the same tokens
  assert str(record_of_file(right)) == (
      f"8 tokens, sha256 {record_of_file(right).sha256[:12]}")


def test_writers_record_it_but_an_old_run_resumes_unchanged(tmp_path,
                                                             vocabs):
  right, _ = vocabs
  tokens = list(SPECIAL_TOKENS) + WORDS
  spec = {"task": "squad", "max_seq_length": 8, "vocab_file": right}
  recorded = with_record(spec, tokens, str(tmp_path / "new"))
  assert recorded["vocab"] == record_of(tokens).to_dict()
  old = _run(tmp_path, spec, "old")
  assert with_record(spec, tokens, old) == spec
  assert with_record(spec, tokens, _run(tmp_path, recorded)) == recorded


def test_resolve_uses_the_runs_own_and_refuses_another(tmp_path, vocabs):
  right, swapped = vocabs
  spec = with_record({"task": "squad", "max_seq_length": 8,
                      "vocab_file": right}, list(SPECIAL_TOKENS) + WORDS)
  run = _run(tmp_path, spec)
  assert resolve(run) == right
  assert resolve(run, right) == right
  for other, size in ((swapped, 8), (STUDENT_VOCAB, 4818)):
    with pytest.raises(VocabMismatchError) as e:
      resolve(run, other)
    assert str(e.value) == (
        f"--vocab_file {other} ({size} tokens, sha256 "
        f"{record_of_file(other).sha256[:12]}) is not the vocabulary of "
        f"--model_dir {run} (8 tokens, sha256 "
        f"{record_of_file(right).sha256[:12]})")
  with pytest.raises(VocabError, match=r"^--vocab_file .*gone.txt: cannot "):
    resolve(run, str(tmp_path / "gone.txt"))
  # The file task.json names changed since: refused, saying what to do.
  with open(right, "a") as f:
    f.write("sea\n")
  with pytest.raises(VocabMismatchError,
                     match=r"^.*task.json's vocab_file .*right.txt \(9 tokens"
                     r".*; pass --vocab_file with the vocabulary it was "
                     r"trained with$"):
    resolve(run)


def test_resolve_on_runs_without_a_record(tmp_path, vocabs):
  right, swapped = vocabs
  old = _run(tmp_path, {"task": "squad", "max_seq_length": 8,
                        "vocab_file": right})
  assert resolve(old) == right  # as before records
  assert resolve(old, right) == right
  with pytest.raises(VocabMismatchError,
                     match=r"is not the vocabulary of --model_dir .* \(.*"
                     r"task.json's vocab_file .*right.txt: 8 tokens"):
    resolve(old, swapped)  # held to the file it names
  gone = _run(tmp_path, {"task": "squad", "max_seq_length": 8,
                         "vocab_file": str(tmp_path / "gone.txt")}, "gone")
  assert resolve(gone, swapped) == swapped  # nothing to compare with
  bare = tmp_path / "bare"  # no task.json at all (a pretrain run)
  bare.mkdir()
  assert resolve(str(bare), swapped) == swapped
  assert resolve(str(bare), default=VOCAB) == VOCAB
  with pytest.raises(ValueError, match="no vocabulary recorded"):
    resolve(str(bare))
  broken = _run(tmp_path, {"vocab_file": right, "vocab": {"size": "8"}},
                "broken")
  with pytest.raises(ValueError, match=r"task.json: vocab must be"):
    resolve(broken)
