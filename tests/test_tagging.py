
import numpy as np
import pytest

from conftest import write_lines
from tfmodels.data import metrics, tagging
from tfmodels.data.tagging import Sentence

CLS, SEP, UNK = 101, 102, 100
UNA, FFA, BLE = 14477, 20961, 3468          # "unaffable" -> una ##ffa ##ble
THE, CAT = 1996, 4937


CONLL_2003 = [
    "-DOCSTART- -X- -X- O",
    "",
    "EU NNP B-NP B-ORG",
    "rejects VBZ B-VP O",
    "",
    "",
    "# NN I-NP O",                 # a "#" token, not a comment
    "Peter NNP B-NP B-PER",
]


def test_reads_conll_2003(tmp_path):
  sentences = tagging.read_conll(write_lines(tmp_path / "train.txt", CONLL_2003))
  assert sentences == [Sentence(("EU", "rejects"), ("B-ORG", "O")),
                       Sentence(("#", "Peter"), ("O", "B-PER"))]


def test_reads_intent_labels_and_ignores_other_comments(tmp_path):
  path = write_lines(tmp_path / "train.conll.gz", [
      "# sent_id = 1",
      "# label = PlayMusic",
      "# text = play some jazz",
      "play\tO",
      "some\tO",
      "jazz\tB-genre",
      "",
      "# label = GetWeather ",
      "rain  O",
      "",
  ], gzipped=True)
  sentences = tagging.read_conll(path)
  assert sentences == [
      Sentence(("play", "some", "jazz"), ("O", "O", "B-genre"), "PlayMusic"),
      Sentence(("rain",), ("O",), "GetWeather")]
  assert tagging.label_vocabulary(sentences) == ["GetWeather", "PlayMusic"]
  assert tagging.tag_vocabulary(sentences) == ["B-genre", "O"]


@pytest.mark.parametrize("lines,message", [
    (["EU B-ORG", "rejects"], r"x\.conll:2: expected a token and a tag"),
    (["play O", "# label = PlayMusic"],
     r"x\.conll:2: '# label = \.\.\.' must come before the sentence's tokens"),
    (["# label = A", "# label = B", "play O"],
     r"x\.conll:2: second '# label = \.\.\.'"),
    (["a O", "", "# label = Lonely", "", "b O"],
     r"x\.conll:3: '# label = Lonely' labels no tokens"),
])
def test_bad_lines_name_file_and_line(tmp_path, lines, message):
  path = write_lines(tmp_path / "x.conll", lines)
  with pytest.raises(ValueError, match=message):
    tagging.read_conll(path)


def test_tag_on_first_wordpiece_only(tokenizer):
  sentences = [Sentence(("The", "unaffable", "cat"), ("DT", "JJ", "NN"))]
  tags = tagging.tag_vocabulary(sentences)
  assert tags == ["DT", "JJ", "NN"]
  assert tokenizer.tokenize("unaffable") == ["una", "##ffa", "##ble"]
  f = tagging.convert_sentences(sentences, tokenizer, 9, tags)
  np.testing.assert_array_equal(
      f["input_ids"], [[CLS, THE, UNA, FFA, BLE, CAT, SEP, 0, 0]])
  np.testing.assert_array_equal(f["label_ids"],
                                [[-1, 0, 1, -1, -1, 2, -1, -1, -1]])
  np.testing.assert_array_equal(f["label_weights"],
                                [[0, 1, 1, 0, 0, 1, 0, 0, 0]])
  np.testing.assert_array_equal(f["input_mask"], [[1] * 7 + [0, 0]])
  np.testing.assert_array_equal(f["segment_ids"], np.zeros([1, 9]))
  assert f["label_weights"].dtype == np.float32
  assert f["label_ids"].dtype == f["input_ids"].dtype == np.int32
  assert "sentence_label_ids" not in f


def test_truncation_keeps_first_pieces_and_drops_later_words(tokenizer):
  sentences = [Sentence(("unaffable", "cat"), ("JJ", "NN"))]
  f = tagging.convert_sentences(sentences, tokenizer, 4, ["JJ", "NN"])
  np.testing.assert_array_equal(f["input_ids"], [[CLS, UNA, FFA, SEP]])
  np.testing.assert_array_equal(f["label_ids"], [[-1, 0, -1, -1]])
  f = tagging.convert_sentences(sentences, tokenizer, 2, ["JJ", "NN"])
  np.testing.assert_array_equal(f["input_ids"], [[CLS, SEP]])
  assert f["label_weights"].sum() == 0


def test_word_without_pieces_becomes_unk(tokenizer):
  f = tagging.convert_sentences([Sentence(("\u200b", "cat"), ("X", "NN"))],
                                tokenizer, 5, ["NN", "X"])
  np.testing.assert_array_equal(f["input_ids"], [[CLS, UNK, CAT, SEP, 0]])
  np.testing.assert_array_equal(f["label_ids"], [[-1, 1, 0, -1, -1]])


def test_sentence_labels(tokenizer):
  sentences = [Sentence(("play", "jazz"), ("O", "B-genre"), "PlayMusic"),
               Sentence(("rain",), ("O",), "GetWeather")]
  f = tagging.convert_sentences(sentences, tokenizer, 6, ["B-genre", "O"],
                                ["GetWeather", "PlayMusic"])
  np.testing.assert_array_equal(f["sentence_label_ids"], [1, 0])
  np.testing.assert_array_equal(f["label_ids"], [[-1, 1, 0, -1, -1, -1],
                                                 [-1, 1, -1, -1, -1, -1]])
  tags_only = tagging.convert_sentences(sentences, tokenizer, 6,
                                       ["B-genre", "O"])
  assert "sentence_label_ids" not in tags_only      # plain tagging
  np.testing.assert_array_equal(tags_only["label_ids"], f["label_ids"])
  with pytest.raises(ValueError, match=r"unknown label 'GetWeather'"):
    tagging.convert_sentences(sentences, tokenizer, 6, ["B-genre", "O"],
                              ["PlayMusic"])
  with pytest.raises(ValueError, match=r"sentence 1 has no '# label = '"):
    tagging.convert_sentences([sentences[0], Sentence(("a",), ("O",))],
                              tokenizer, 6, ["B-genre", "O"], ["PlayMusic"])


def test_unknown_tag_is_named(tokenizer):
  with pytest.raises(ValueError, match=r"unknown tag 'B-PER'"):
    tagging.convert_sentences([Sentence(("Peter",), ("B-PER",))], tokenizer, 4,
                              ["O"])


def test_token_accuracy_counts_labelled_positions_only():
  label_ids = [[-1, 0, 2, -1, 1], [-1, 1, -1, -1, -1]]
  predictions = [[5, 0, 1, 5, 1], [5, 1, 5, 5, 5]]    # 3 of 4 right
  assert metrics.token_accuracy(label_ids, predictions) == pytest.approx(0.75)
  weights = [[0, 1, 0, 0, 0], [0, 1, 0, 0, 0]]         # only the two right
  assert metrics.token_accuracy(label_ids, predictions, weights) == 1.0


def test_intent_slot_metrics_by_hand():
  out = metrics.intent_slot_metrics(
      intent_labels=[0, 1, 2], intent_predictions=[0, 1, 1],
      slot_label_ids=[[-1, 3, 4], [-1, 3, -1], [-1, 0, -1]],
      slot_predictions=[[0, 3, 4], [0, 2, 0], [0, 0, 0]],
      tags=["O", "B-a", "I-a", "B-b", "I-b"])
  # Intents: 2/3. Slots: 3 of 4 labelled right. Exact: only sentence 0.
  # Chunks: b(0,2) right; b(0,1) predicted as a(0,1): P = R = F1 = 1/2.
  assert out == pytest.approx({"intent_accuracy": 2 / 3, "slot_f1": 0.5,
                               "sentence_exact_match": 1 / 3,
                               "slot_accuracy": 0.75})
