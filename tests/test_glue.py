import math

import numpy as np
import pytest

from conftest import write_lines
from tfmodels.data import glue, metrics
from tfmodels.data.glue import Example

CLS, SEP = 101, 102
# Single-piece words of the uncased vocabulary.
IDS = {"the": 1996, "cat": 4937, "sat": 2938, "on": 2006, "mat": 13523,
       "a": 1037, "dog": 3899, "ran": 2743}


MNLI_TRAIN_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
    "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
    "sentence1\tsentence2\tlabel1\tgold_label")
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER.replace(
    "label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
MNLI_TEST_HEADER = MNLI_TRAIN_HEADER.replace("\tlabel1\tgold_label", "")
STSB_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
               "sentence1\tsentence2")

# (task, split, file lines, expected (guid, text_a, text_b, label) rows),
# each in the layout GLUE ships.
LAYOUTS = [
    ("cola", "train",
     ["gj04\t1\t\tOur friends won't buy this analysis.",
      "gj04\t0\t*\tThey drank the pub \"dry."],
     [("train-1", "Our friends won't buy this analysis.", None, "1"),
      ("train-2", "They drank the pub \"dry.", None, "0")]),
    ("cola", "test", ["index\tsentence", "0\tBill whistled past the house."],
     [("test-0", "Bill whistled past the house.", None, None)]),
    ("sst-2", "dev", ["sentence\tlabel", "it 's a charming journey . \t1"],
     [("dev-2", "it 's a charming journey . ", None, "1")]),
    ("sst-2", "test", ["index\tsentence", "0\tuneasy mishmash ."],
     [("test-0", "uneasy mishmash .", None, None)]),
    ("mrpc", "train",
     ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
      "1\t702876\t702977\tHe called \" the witness .\tAmrozi accused him ."],
     [("train-2", "He called \" the witness .", "Amrozi accused him .", "1")]),
    ("mrpc", "test",
     ["index\t#1 ID\t#2 ID\t#1 String\t#2 String",
      "0\t1089874\t1089925\tPCCW 's chief .\tCurrent Chief ."],
     [("test-0", "PCCW 's chief .", "Current Chief .", None)]),
    ("sts-b", "train",
     [STSB_HEADER + "\tscore",
      "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane takes off."
      "\tAn air plane takes off.\t5.000",
      "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man plays."
      "\tA man sings.\t0.5"],
     [("train-0", "A plane takes off.", "An air plane takes off.", 5.0),
      ("train-1", "A man plays.", "A man sings.", 0.5)]),
    ("sts-b", "test",
     [STSB_HEADER, "0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\t"
      "A girl styles her hair.\tA girl brushes her hair."],
     [("test-0", "A girl styles her hair.", "A girl brushes her hair.", None)]),
    ("qqp", "dev",
     ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
      "133273\t213221\t213222\tHow is life?\tWhich level?\t0"],
     [("dev-133273", "How is life?", "Which level?", "0")]),
    ("qqp", "test", ["id\tquestion1\tquestion2", "0\tWhy?\tHow?"],
     [("test-0", "Why?", "How?", None)]),
    ("mnli", "train",
     [MNLI_TRAIN_HEADER,
      "0\t31193\t31193n\tgovernment\t( ( Conceptually cream ) )\t( Product )\t"
      "(ROOT (S))\t(ROOT (S))\tConceptually cream skimming.\tProduct and "
      "geography.\tneutral\tneutral"],
     [("train-0", "Conceptually cream skimming.", "Product and geography.",
       "neutral")]),
    ("mnli", "dev_matched",
     [MNLI_DEV_HEADER,
      "0\t63735\t63735n\tslate\t( a )\t( b )\t(ROOT)\t(ROOT)\tThe new rights."
      "\tEveryone likes it.\tneutral\tentailment\tneutral\tneutral\tneutral\t"
      "neutral",
      "1\t91383\t91383c\tslate\t( a )\t( b )\t(ROOT)\t(ROOT)\tThis site."
      "\tThe site is out.\tcontradiction\tcontradiction\tcontradiction\t"
      "contradiction\tcontradiction\tcontradiction"],
     [("dev_matched-0", "The new rights.", "Everyone likes it.", "neutral"),
      ("dev_matched-1", "This site.", "The site is out.", "contradiction")]),
    ("mnli", "test_mismatched",
     [MNLI_TEST_HEADER, "0\t1\t1n\tletters\t( a )\t( b )\t(ROOT)\t(ROOT)\t"
      "Your gift.\tHundreds of students."],
     [("test_mismatched-0", "Your gift.", "Hundreds of students.", None)]),
    ("qnli", "train",
     ["index\tquestion\tsentence\tlabel",
      "0\tWhen?\tIn 1998.\tnot_entailment"],
     [("train-0", "When?", "In 1998.", "not_entailment")]),
    ("qnli", "test", ["index\tquestion\tsentence", "0\tWhat?\tThat."],
     [("test-0", "What?", "That.", None)]),
    ("rte", "dev",
     ["index\tsentence1\tsentence2\tlabel", "0\tDana Reeve died.\tChris lives."
      "\tnot_entailment", "1\tYet, we.\tBacteria.\tentailment"],
     [("dev-0", "Dana Reeve died.", "Chris lives.", "not_entailment"),
      ("dev-1", "Yet, we.", "Bacteria.", "entailment")]),
    ("wnli", "train",
     ["index\tsentence1\tsentence2\tlabel", "0\tI stuck a pin.\tThe pin had."
      "\t1"],
     [("train-0", "I stuck a pin.", "The pin had.", "1")]),
    ("wnli", "test", ["index\tsentence1\tsentence2", "0\tMaude.\tMaude is."],
     [("test-0", "Maude.", "Maude is.", None)]),
    ("spam", "test", ["sentence\tlabel", "WINNER!! Claim your prize\t1",
                      "Ok lar... Joking wif u oni...\t0"],
     [("test-2", "WINNER!! Claim your prize", None, "1"),
      ("test-3", "Ok lar... Joking wif u oni...", None, "0")]),
]


@pytest.mark.parametrize("task,split,lines,expected", LAYOUTS,
                         ids=[f"{t}-{s}" for t, s, _, _ in LAYOUTS])
def test_reads_every_glue_layout(tmp_path, task, split, lines, expected):
  write_lines(tmp_path / f"{split}.tsv", lines)
  examples = glue.read_split(task, str(tmp_path), split)
  assert examples == [Example(*row) for row in expected]


def test_gzip_split_is_found_and_read(tmp_path):
  write_lines(tmp_path / "train.tsv.gz",
        ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
         "7\t15\t16\tHow do I \"read?\tHow to read?\t1"], gzipped=True)
  assert glue.split_path(str(tmp_path), "train").endswith("train.tsv.gz")
  assert glue.read_split("QQP", str(tmp_path), "train") == [
      Example("train-7", "How do I \"read?", "How to read?", "1")]


def test_gzip_is_recognised_by_content_not_name(tmp_path):
  path = write_lines(tmp_path / "dev.tsv", ["sentence\tlabel", "fine\t0"],
               gzipped=True)
  assert glue.read_examples("spam", path, split="dev") == [
      Example("dev-2", "fine", None, "0")]


@pytest.mark.parametrize("task,lines,message", [
    ("sst-2", ["sentence\tlabel", "good\t1", "bad\tworse\t0"],
     r"train\.tsv:3: 3 tab-separated fields, expected 2 \(sst-2\)$"),
    ("cola", ["gj04\t1\t\tFine.", "gj04\t1\tNo label column"],
     r"train\.tsv:2: 3 tab-separated fields, expected 4"),
    ("rte", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tmaybe"],
     r"train\.tsv:2: unknown label 'maybe'; rte labels are "
     r"\['entailment', 'not_entailment'\]"),
    ("sts-b", [STSB_HEADER + "\tscore", "0\tg\tf\ty\to\ts\ts\ta\tb\thigh"],
     r"train\.tsv:2: score 'high' is not a finite number"),
    ("qnli", ["index\tquestion\tsentence", "0\tWhat?\tThat."],
     r"train\.tsv:1: header lacks column\(s\) \['label'\]"),
])
def test_bad_rows_name_file_and_line(tmp_path, task, lines, message):
  write_lines(tmp_path / "train.tsv", lines)
  with pytest.raises(ValueError, match=message):
    glue.read_split(task, str(tmp_path), "train")


def test_unknown_split_and_task_are_refused(tmp_path):
  with pytest.raises(ValueError, match=r"mnli has no split 'dev'"):
    glue.read_split("mnli", str(tmp_path), "dev")
  with pytest.raises(ValueError, match=r"unknown task 'squad'"):
    glue.get_task("squad")


def test_task_table():
  assert glue.get_task("STS-B").is_regression
  assert glue.get_task("mnli").labels == ("contradiction", "entailment",
                                          "neutral")
  assert glue.get_task("mrpc").metrics == ("accuracy", "f1")
  assert glue.get_task("cola").metrics == ("mcc",)
  assert set(glue.TASKS) <= set(metrics.TASK_METRICS)


def test_single_sentence_features_exact_ids(tokenizer):
  f = glue.convert_examples([Example("0", "The cat", None, "1")], tokenizer, 6,
                            ("0", "1"))
  np.testing.assert_array_equal(f["input_ids"], [[CLS, 1996, 4937, SEP, 0, 0]])
  np.testing.assert_array_equal(f["input_mask"], [[1, 1, 1, 1, 0, 0]])
  np.testing.assert_array_equal(f["segment_ids"], [[0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(f["label_ids"], [1])
  assert all(f[k].dtype == np.int32 for k in f)


def ids(words):
  return [IDS[w] for w in words.split()]


def test_pair_features_and_segment_ids(tokenizer):
  f = glue.convert_examples([Example("0", "the cat", "a dog", None)],
                            tokenizer, 8)
  np.testing.assert_array_equal(
      f["input_ids"], [[CLS, *ids("the cat"), SEP, *ids("a dog"), SEP, 0]])
  np.testing.assert_array_equal(f["segment_ids"], [[0, 0, 0, 0, 1, 1, 1, 0]])
  np.testing.assert_array_equal(f["input_mask"], [[1] * 7 + [0]])
  assert "label_ids" not in f        # unlabelled (test) examples


def test_truncation_follows_berts_truncate_seq_pair(tokenizer):
  assert glue.truncate_pair(5, 2, 4) == (2, 2)      # longer a loses 3
  assert glue.truncate_pair(3, 3, 5) == (3, 2)      # a tie pops from b
  assert glue.truncate_pair(10, 1, 5) == (4, 1)     # the short one survives
  assert glue.truncate_pair(1, 10, 5) == (1, 4)
  assert glue.truncate_pair(2, 2, 10) == (2, 2)
  examples = [Example("0", "the cat sat on mat", "a dog", None),
              Example("1", "the cat sat", "a dog ran", None),
              Example("2", "the cat sat on mat", None, None)]
  f = glue.convert_examples(examples, tokenizer, 8)
  np.testing.assert_array_equal(f["input_ids"], [
      [CLS, *ids("the cat sat"), SEP, *ids("a dog"), SEP],      # 5+2 -> 3+2
      [CLS, *ids("the cat sat"), SEP, *ids("a dog"), SEP],      # 3+3 -> 3+2
      [CLS, *ids("the cat sat on mat"), SEP, 0]])
  f = glue.convert_examples(examples[2:], tokenizer, 4)
  np.testing.assert_array_equal(f["input_ids"], [[CLS, *ids("the cat"), SEP]])


def test_label_ids_classification_and_regression(tokenizer):
  mnli = glue.get_task("mnli")
  f = glue.convert_examples(
      [Example("0", "a", "b", "neutral"), Example("1", "a", "b",
                                                  "contradiction")],
      tokenizer, 8, mnli.labels)
  np.testing.assert_array_equal(f["label_ids"], [2, 0])
  assert f["label_ids"].dtype == np.int32
  f = glue.convert_examples([Example("0", "a", "b", 3.8)], tokenizer, 8)
  assert f["label_ids"].dtype == np.float32
  np.testing.assert_allclose(f["label_ids"], [3.8])
  with pytest.raises(ValueError, match="class labels need a label_list"):
    glue.convert_examples([Example("0", "a", None, "1")], tokenizer, 8)
  with pytest.raises(ValueError, match=r"labels \['maybe'\] are not in"):
    glue.convert_examples([Example("0", "a", None, "maybe")], tokenizer, 8,
                          ("0", "1"))


def test_dataset_batches_inputs_and_labels(tokenizer):
  examples = [Example(str(i), "the cat", None, str(i % 2)) for i in range(3)]
  f = glue.convert_examples(examples, tokenizer, 5, ("0", "1"))
  batches = list(glue.dataset(f, batch_size=2).as_numpy_iterator())
  assert len(batches) == 2
  inputs, labels = batches[0]
  assert sorted(inputs) == ["input_ids", "input_mask", "segment_ids"]
  np.testing.assert_array_equal(inputs["input_ids"][1],
                                [CLS, 1996, 4937, SEP, 0])
  np.testing.assert_array_equal(labels, [0, 1])
  np.testing.assert_array_equal(batches[1][1], [0])
  shuffled = glue.dataset(f, batch_size=3, shuffle=True, seed=1)
  _, labels = next(shuffled.as_numpy_iterator())
  assert sorted(labels.tolist()) == [0, 0, 1]


# Metrics, against numbers worked out by hand.
LABELS = [1, 0, 1, 1, 0]
PREDICTIONS = [1, 1, 1, 0, 0]      # tp=2 (0, 2), fp=1 (1), fn=1 (3), tn=1 (4)


def test_accuracy_f1_mcc_by_hand():
  tp, fp, fn, tn = 2, 1, 1, 1
  assert metrics.accuracy(LABELS, PREDICTIONS) == pytest.approx(3 / 5)
  assert metrics.f1(LABELS, PREDICTIONS) == pytest.approx(2 * tp /
                                                          (2 * tp + fp + fn))
  mcc = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) *
                                        (tn + fn))
  assert mcc == pytest.approx(1 / 6)
  assert metrics.mcc(LABELS, PREDICTIONS) == pytest.approx(mcc)
  assert metrics.mcc([0, 1, 1], [1, 1, 1]) == 0.0        # undefined -> 0
  assert metrics.f1([0, 0], [0, 0]) == 0.0


def test_pearson_and_spearman_by_hand():
  # Ranks differ by d = (-1, 1, -1, 1, 0): rho = 1 - 6*4 / (5 * (25 - 1)).
  assert metrics.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(
      0.8)
  # Centred (-1, 0, 1) and (-1, 1, 0): r = 1 / sqrt(2 * 2).
  assert metrics.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
  x, y = np.array([1., 2, 3, 4]), np.array([1., 4, 9, 16])
  r = (np.sum((x - x.mean()) * (y - y.mean())) /
       math.sqrt(np.sum((x - x.mean())**2) * np.sum((y - y.mean())**2)))
  assert metrics.pearson(x, y) == pytest.approx(r)
  assert metrics.spearman(x, y) == pytest.approx(1.0)    # monotone
  assert metrics.pearson_spearman_mean(x, y) == pytest.approx((r + 1) / 2)


def test_glue_metrics_per_task():
  out = metrics.glue_metrics("MRPC", LABELS, PREDICTIONS)
  assert out == pytest.approx({"accuracy": 0.6, "f1": 2 / 3})
  assert all(type(v) is float for v in out.values())
  assert metrics.glue_metrics("cola", LABELS, PREDICTIONS) == pytest.approx(
      {"mcc": 1 / 6})
  assert metrics.glue_metrics("mnli-mm", [0, 2, 1], [0, 2, 2]) == (
      pytest.approx({"accuracy": 2 / 3}))
  assert set(metrics.glue_metrics("spam", LABELS, PREDICTIONS)) == {
      "accuracy", "f1"}
  stsb = metrics.glue_metrics("sts-b", [1, 2, 3], [1, 3, 2])
  assert stsb == pytest.approx({"pearson": 0.5, "spearman": 0.5,
                                "pearson_spearman_mean": 0.5})
  with pytest.raises(ValueError, match="unknown task 'squad'"):
    metrics.glue_metrics("squad", [1], [1])
  with pytest.raises(ValueError, match="1-D of equal length"):
    metrics.accuracy([1, 0], [1])
