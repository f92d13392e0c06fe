"""Mixed-vocabulary alignment of a moved student's new rows
(compression/vocab_alignment.py): the loss by hand, the mixed
segmentation, and training that moves only the student rows (or the
layers too)."""

import numpy as np
import pytest

from tfmodels.compression import vocab_alignment
from tfmodels.compression.vocab_alignment import (alignment_loss,
                                                   mixed_example, words)
from tfmodels.tokenization import Encoding


def test_alignment_loss_by_hand():
  """Mean over layers of the weighted mean over words of the mean squared
  difference of the two states at each word's first piece."""
  rng = np.random.default_rng(0)
  teacher = [rng.normal(size=(2, 5, 3)).astype(np.float32) for _ in range(2)]
  mixed = [rng.normal(size=(2, 6, 3)).astype(np.float32) for _ in range(2)]
  tp = np.array([[1, 2, 4], [1, 3, 0]])
  mp = np.array([[1, 3, 5], [2, 4, 0]])
  w = np.array([[1, 1, 1], [1, 1, 0]])
  expected = []
  for t, m in zip(teacher, mixed):
    terms = [np.mean((t[b, tp[b, k]] - m[b, mp[b, k]]) ** 2)
             for b in range(2) for k in range(3) if w[b, k]]
    expected.append(np.mean(terms))
  got = float(alignment_loss(teacher, mixed, tp, mp, w))
  assert got == pytest.approx(np.mean(expected), rel=1e-5)


def test_words_group_continuation_pieces():
  encoding = Encoding(["play", "##ing", "ball", ".", "##s"],
                      [7, 8, 9, 10, 11], [0] * 5, [1] * 5)
  assert words(encoding) == [[7, 8], [9], [10, 11]]


class _Always:
  def __init__(self, value):
    self.value = value

  def random(self):
    return self.value


def test_mixed_example_takes_each_word_from_one_vocabulary():
  teacher = [[5, 6], [7], [8, 9, 10]]
  student = [[1], [2, 3], [4]]
  all_student = mixed_example(teacher, student, 100, 0.5, _Always(0.1), 16,
                              0, 99)
  # Each word's first piece, and its last where either cut splits it.
  assert all_student == ([0, 5, 6, 7, 8, 9, 10, 99], [0, 101, 102, 103, 104,
                                                      99],
                         [1, 2, 3, 3, 4, 6], [1, 1, 2, 3, 4, 4])
  all_teacher = mixed_example(teacher, student, 100, 0.5, _Always(0.9), 16,
                              0, 99)
  assert all_teacher[1] == all_teacher[0]
  # Cut to 6 tokens: [CLS] + words that fit whole + [SEP].
  cut = mixed_example(teacher, student, 100, 0.5, _Always(0.1), 5, 0, 99)
  assert cut == ([0, 5, 6, 7, 99], [0, 101, 102, 103, 99], [1, 2, 3, 3],
                 [1, 1, 2, 3])
  with pytest.raises(ValueError, match="different words"):
    mixed_example(teacher, student[:2], 100, 0.5, _Always(0.1), 16, 0, 99)


LETTERS = list("abcdefgh")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TEACHER_VOCAB = SPECIALS + LETTERS + ["##" + c for c in LETTERS]
STUDENT_VOCAB = SPECIALS + ["ab", "cd", "##ef", "a", "g"] + [
    "##" + c for c in LETTERS]


def _aligned(tmp_path, **kwargs):
  """(teacher-vocabulary model, {name: its weights before}, align's
  result) on random letter words."""
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import Head, build_model
  from tfmodels.configs import load_config
  from tfmodels.tokenization import WordPieceTokenizer
  for name, vocab in (("t", TEACHER_VOCAB), ("s", STUDENT_VOCAB)):
    (tmp_path / f"{name}.txt").write_text("\n".join(vocab) + "\n")
  teacher_tok = WordPieceTokenizer(str(tmp_path / "t.txt"))
  student_tok = WordPieceTokenizer(str(tmp_path / "s.txt"))
  rng = np.random.default_rng(0)
  texts = [" ".join("".join(rng.choice(LETTERS, rng.integers(1, 5)))
                    for _ in range(6)) for _ in range(200)]
  config = load_config("tiny_bert").replace(vocab_size=len(TEACHER_VOCAB))
  keras.utils.set_random_seed(0)
  head = Head("span")
  model = build_model(config, head)
  before = {w.name: w.numpy() for w in model.weights}
  return model, before, vocab_alignment.align(
      model, config, head, teacher_tok, student_tok, texts, steps=60,
      length=32, batch_size=16, learning_rate=1e-2, heldout=32,
      log=lambda _: None, **kwargs)


def test_alignment_trains_only_the_student_rows(tmp_path):
  """On a tiny model: the held-out loss falls, a piece both vocabularies
  have ends where the transfer put it only if training moved it (shared
  rows are student rows too), and the rest of the model is untouched."""
  teacher_vocab, student_vocab = TEACHER_VOCAB, STUDENT_VOCAB
  model, _, (student, student_config, facts) = _aligned(tmp_path)
  alignment = facts["alignment"]
  assert alignment["heldout_after"] < 0.7 * alignment["heldout_before"]
  assert student_config.vocab_size == len(student_vocab)
  before = {w.name: w.numpy() for w in model.weights}
  after = {w.name: w.numpy() for w in student.weights}
  for name, value in after.items():
    if "word_embeddings" not in name:
      np.testing.assert_array_equal(value, before[name])
  table = after[next(n for n in after if "word_embeddings" in n)]
  old = before[next(n for n in before if "word_embeddings" in n)]
  # [PAD] never appears in a text: its row keeps the teacher's exactly.
  np.testing.assert_array_equal(table[0], old[0])
  # "ab" (new) moved from its start, the mean of a and ##b.
  start = (old[teacher_vocab.index("a")] + old[teacher_vocab.index("##b")]) / 2
  assert np.abs(table[student_vocab.index("ab")] - start).max() > 1e-3


def test_alignment_with_the_layers_trains_them_against_the_carved_copy(
    tmp_path):
  """--align_layers_learning_rate: the layers move too, the held-out loss
  falls further than the rows alone take it, and the model given stays
  as it was (it is the frozen copy the targets come from)."""
  _, _, (_, _, rows_only) = _aligned(tmp_path)
  model, given, (student, _, facts) = _aligned(
      tmp_path, layers_learning_rate=3e-3)
  alignment = facts["alignment"]
  assert alignment["layers_learning_rate"] == 3e-3
  assert alignment["heldout_after"] < rows_only["alignment"]["heldout_after"]
  for w in model.weights:  # the frozen copy the targets came from
    np.testing.assert_array_equal(w.numpy(), given[w.name])
  after = {w.name: w.numpy() for w in student.weights}
  moved = [n for n, v in after.items() if "word_embeddings" not in n
           and np.abs(v - given[n]).max() > 1e-4]
  assert any("attention" in n for n in moved), moved
