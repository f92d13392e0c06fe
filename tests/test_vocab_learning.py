"""WordPiece vocabulary learning for mixed-vocabulary students."""

import os
import subprocess
import sys

from conftest import HELDOUT_CORPUS, VOCAB
from tfmodels.data.vocab_learning import (ascii_pieces, learn_vocabulary,
                                          overlap)
from tfmodels.tokenization import WordPieceTokenizer, load_vocab



def test_learned_vocabulary_covers_ascii_and_tokenizes(tmp_path):
  vocab = learn_vocabulary([HELDOUT_CORPUS], vocab_size=300, max_lines=1000)
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert len(vocab) == len(set(vocab))
  assert set(ascii_pieces()) <= set(vocab)
  learned = len(vocab) - len([p for p in ascii_pieces()
                              if vocab.index(p) >= 300])
  assert 200 < learned <= 300  # the learner's target, before ASCII top-up
  path = tmp_path / "vocab.txt"
  path.write_text("".join(p + "\n" for p in vocab))
  tokenizer = WordPieceTokenizer(path)
  # Every printable ASCII word is covered: no [UNK].
  pieces = tokenizer.tokenize("Zyzzyva qwxj 3.14 ~{}| the government")
  assert "[UNK]" not in pieces and "the" in pieces


def test_rare_characters_are_bounded_and_task_files_are_read(tmp_path):
  """A SQuAD file's contexts and questions and a TSV's first column are
  text to learn from; max_unique_chars keeps stray scripts out."""
  import json
  stray = "".join(chr(0x3041 + i) for i in range(60))  # hiragana
  lines = ["the river bank holds water " * 3] * 40 + [
      f"{c}{c} mail" for c in stray] * 12
  (tmp_path / "qa.json").write_text(json.dumps({"data": [{"paragraphs": [
      {"context": line, "qas": [{"question": "which bank?"}]}]}
      for line in lines]}))
  (tmp_path / "spam.tsv").write_text("sentence\tlabel\n" + "".join(
      f"{line}\t0\n" for line in lines))
  corpus = [str(tmp_path / "qa.json"), str(tmp_path / "spam.tsv")]
  wide = learn_vocabulary(corpus, vocab_size=300)
  # The text's own letters come first, leaving room for a kana or two,
  # where the learner's default keeps all sixty.
  narrow = learn_vocabulary(corpus, vocab_size=300, max_unique_chars=20)
  kana = lambda vocab: {p for p in vocab if p.removeprefix("##") in stray}
  assert len(kana(wide)) >= 60 and len(kana(narrow)) <= 4
  assert "bank" in narrow and "which" in narrow and "sentence" not in narrow


def test_overlap_is_the_fraction_of_student_pieces_in_teacher():
  assert overlap(["a", "b", "##c", "dd"], ["a", "##c", "x"]) == 0.5


def test_command_reports_overlap(tmp_path):
  out = tmp_path / "student.txt"
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.build_student_vocab", "--corpus", HELDOUT_CORPUS,
       "--vocab_size", "200", "--max_lines", "500", "--output", str(out),
       "--teacher_vocab", VOCAB], capture_output=True, text=True,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert result.returncode == 0, result.stderr[-500:]
  vocab = load_vocab(out)
  expected = 100 * overlap(vocab, load_vocab(VOCAB))
  assert f"holds {expected:.1f}% of them" in result.stdout
  refused = subprocess.run(
      [sys.executable, "-m", "tfmodels.build_student_vocab", "--corpus", HELDOUT_CORPUS,
       "--output", str(out)], capture_output=True, text=True,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert refused.returncode != 0
  assert f"--output {out}: exists" in refused.stderr
