"""Moving a model to a smaller vocabulary (compression/vocab_transfer.py):
the table's start by the math, the model around it unchanged, and the
moved student through compress, convert_tflite and the QA twin."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fixtures.converters import tiny_models
from fixtures.task_library import task_library_python
from tfmodels.checkpoints.model_dir import Head, build_model
from tfmodels.compression.vocab_transfer import (spelling, transferred_rows,
                                                 with_vocabulary)
from tfmodels.configs import load_config

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_spelling_is_the_teachers_greedy_wordpiece():
  teacher = {"play", "##ing", "##s", "un", "##play", "p", "##l", "##a",
             "##y"}
  assert spelling("play", teacher) == ["play"]
  assert spelling("playing", teacher) == ["play", "##ing"]
  assert spelling("##ings", teacher) == ["##ing", "##s"]
  assert spelling("unplay", teacher) == ["un", "##play"]
  assert spelling("plx", teacher) is None  # no piece for x


def test_shared_pieces_keep_their_rows_exactly_new_ones_average():
  teacher = SPECIALS + ["play", "##ing", "##s", "run"]
  table = np.random.default_rng(0).normal(size=(len(teacher), 4)).astype(
      np.float32)
  student = SPECIALS + ["run", "playing", "##ings", "zz"]
  rows, facts = transferred_rows(table, teacher, student)
  row = {p: table[i] for i, p in enumerate(teacher)}
  for i, piece in enumerate(SPECIALS + ["run"]):
    assert np.array_equal(rows[i], row[piece])  # bit for bit
  np.testing.assert_allclose(rows[6], (row["play"] + row["##ing"]) / 2,
                             rtol=1e-6)
  np.testing.assert_allclose(rows[7], (row["##ing"] + row["##s"]) / 2,
                             rtol=1e-6)
  assert np.array_equal(rows[8], row["[UNK]"])
  assert facts == {"kept": 6, "composed": 2, "unknown": 1}
  assert rows.dtype == np.float32


@pytest.mark.parametrize("low_rank", [False, True])
def test_a_moved_model_reads_shared_pieces_as_before(low_rank):
  """Every weight but the table is copied and shared rows are exact: a text
  made of shared pieces, fed by the student's ids, gives the teacher's
  logits from the teacher's ids."""
  import tf_keras as keras
  teacher_vocab = SPECIALS + [f"w{i}" for i in range(40)] + ["##x"]
  student_vocab = SPECIALS + [f"w{i}" for i in range(0, 40, 3)] + ["w1x"]
  config = load_config("tiny_bert").replace(
      vocab_size=len(teacher_vocab),
      low_rank_ranks={"word_embeddings": 4} if low_rank else {})
  keras.utils.set_random_seed(0)
  head = Head("span")
  teacher = build_model(config, head)
  student, student_config, facts = with_vocabulary(
      teacher, config, head, teacher_vocab, student_vocab)
  assert student_config.vocab_size == len(student_vocab)
  assert facts["composed"] == 1 and facts["kept"] == len(student_vocab) - 1
  text = ["[CLS]", "w0", "w3", "w9", "[SEP]", "w39", "w12", "[SEP]"]
  ids = lambda vocab: np.array([[vocab.index(p) for p in text]], np.int32)
  feed = lambda vocab: {"input_ids": ids(vocab),
                        "input_mask": np.ones((1, 8), np.int32),
                        "segment_ids": np.array([[0] * 5 + [1] * 3],
                                                np.int32)}
  before, after = teacher(feed(teacher_vocab)), student(feed(student_vocab))
  for key in ("start_logits", "end_logits"):
    np.testing.assert_array_equal(np.asarray(before[key]),
                                  np.asarray(after[key]))


def test_a_model_whose_head_predicts_its_vocabulary_is_refused():
  config = load_config("tiny_bert").replace(vocab_size=6)
  model = build_model(config, Head("pretrainer"))
  with pytest.raises(ValueError, match="masked-LM head predicts"):
    with_vocabulary(model, config, Head("pretrainer"), SPECIALS + ["a"],
                    SPECIALS)


def _run(module, *args):
  return subprocess.run([sys.executable, "-m", module, *map(str, args)],
                        capture_output=True, text=True, env=tiny_models.env(),
                        cwd=tiny_models.REPO)


def _smaller_vocab(path):
  """The tiny models' vocabulary cut to its first 1,500 learned pieces and
  every single character, plus three pieces it lacks (spelled by it)."""
  with open(tiny_models.VOCAB, encoding="utf-8") as f:
    pieces = f.read().splitlines()
  single = [p for p in pieces if len(p.removeprefix("##")) == 1]
  kept = pieces[:1500] + [p for p in single if p not in pieces[:1500]]
  novel = [p for p in ("##ingly", "##ationally", "unword") if p not in pieces]
  path.write_text("".join(p + "\n" for p in kept + novel), encoding="utf-8")
  return str(path), len(kept + novel)


def _bert_qa_teacher(base, tmp_path):
  """A tiny BERT (carving takes BERT-type encoders) fine-tuned on QA, with
  positions for the Task Library's fixed 384."""
  from tfmodels.checkpoints.model_dir import save_model_dir
  data = tiny_models.qa_data(base)
  config = load_config("tiny_bert").replace(
      vocab_size=sum(1 for _ in open(tiny_models.VOCAB)),
      max_position_embeddings=384)
  init = tmp_path / "init"
  save_model_dir(build_model(config, Head("encoder")), config,
                 Head("encoder"), str(init))
  run = tmp_path / "teacher"
  result = _run("tfmodels.training.finetune", "--task", "squad", "--data_dir",
                data, "--init_dir", init, "--model_dir", run, "--vocab_file",
                tiny_models.VOCAB, "--max_seq_length", 64, "--train_steps",
                20, "--batch_size", 16, "--learning_rate", 3e-3)
  assert result.returncode == 0, result.stderr[-2000:]
  return str(run), data


def test_span_targets_move_by_characters():
  """Context "playing ball": the teacher reads play|##ing|ball at input
  positions 3-5, the student playing|ball at 2-3. A teacher piece's start
  mass goes to the student piece holding its first character, its end mass
  to the one holding its last, [CLS]'s stays at [CLS]; the question's is
  dropped and the rest renormalised."""
  from tfmodels.data.squad import FeatureMeta
  from tfmodels.distillation.cross_vocab import project_span
  meta = lambda offset, starts, ends: FeatureMeta(
      0, 0, offset, np.array(starts), np.array(ends),
      np.ones(len(starts), bool))
  teacher = meta(3, [0, 4, 8], [4, 7, 12])
  student = meta(2, [0, 8], [7, 12])
  start = np.array([0.1, 0.1, 0, 0.4, 0.1, 0.3, 0])  # [CLS] 0.1, question 0.1
  end = np.array([0, 0, 0, 0.2, 0.4, 0.4, 0])
  s, e, mass = project_span(start, end, teacher, student, 6)
  np.testing.assert_allclose(s, np.array([0.1, 0, 0.5, 0.3, 0, 0]) / 0.9,
                             rtol=1e-6)
  np.testing.assert_allclose(e, [0, 0, 0.6, 0.4, 0, 0], rtol=1e-6)
  assert mass == pytest.approx(0.9)
  # A student window holding only "ball": "playing" falls outside it.
  s, e, mass = project_span(start, end, teacher, meta(2, [8], [12]), 6)
  np.testing.assert_allclose(s, np.array([0.1, 0, 0.3, 0, 0, 0]) / 0.4,
                             rtol=1e-6)
  assert mass == pytest.approx(0.4)


def test_the_carried_targets_loss_by_hand():
  """Task loss + the soft cross-entropy against carried targets, rows
  without a target (weight 0) left out of the mean."""
  import tensorflow as tf
  from tfmodels.distillation.cross_vocab import loss_fn

  class Task:
    def supervised_loss(self, outputs, batch):
      return tf.constant(1.5)

  logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]], np.float32)
  student = lambda inputs, training: {"start_logits": logits,
                                      "end_logits": logits[::-1]}
  targets = np.array([[0.7, 0.3, 0.0], [0.2, 0.2, 0.6]], np.float32)
  batch = {"input_ids": np.zeros((2, 3), np.int32),
           "input_mask": np.ones((2, 3), np.int32),
           "segment_ids": np.zeros((2, 3), np.int32),
           "soft_start": targets, "soft_end": targets,
           "soft_weight": np.array([1.0, 0.0], np.float32)}
  total, metrics = loss_fn(student, Task())(batch)
  log_softmax = lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))
  start = -(targets[0] * log_softmax(logits[0])).sum()
  end = -(targets[0] * log_softmax(logits[::-1][0])).sum()
  assert float(metrics["logit_kd"]) == pytest.approx((start + end) / 2,
                                                     rel=1e-5)
  assert float(total) == pytest.approx(1.5 + (start + end) / 2, rel=1e-5)


def test_a_carved_student_on_its_own_vocabulary_converts_and_answers(
    tmp_path_factory, tmp_path):
  """compress --vocab_file: the task.json record, the smaller table; then
  convert_tflite attaches that vocabulary, and the twin and the Task
  Library's BertQuestionAnswerer answer with it."""
  from android_bench.qa_app import answering
  from android_bench.qa_app.span_model import SpanModel
  from tfmodels.vocab_record import record_of_file
  base = tmp_path_factory.getbasetemp()
  teacher, data = _bert_qa_teacher(base, tmp_path)
  vocab, size = _smaller_vocab(tmp_path / "small_vocab.txt")
  carved = tmp_path / "carved"
  result = _run("tfmodels.training.compress", "--teacher_dir", teacher,
                "--data_dir", data, "--model_dir", carved, "--heads", 1,
                "--vocab_file", vocab, "--align_steps", 30,
                "--calibration_examples", 32, "--evaluate")
  assert result.returncode == 0, result.stderr[-3000:]
  config = load_config(str(carved / "config.json"))
  assert config.vocab_size == size
  task = json.loads((carved / "task.json").read_text())
  assert task["vocab_file"] == vocab
  assert task["vocab"] == record_of_file(vocab).to_dict()
  facts = json.loads((carved / "carving.json").read_text())
  assert facts["vocabulary"]["vocab_size"] == size
  assert facts["vocabulary"]["composed"] >= 1
  alignment = facts["vocabulary"]["alignment"]  # on the task's own text
  assert alignment["steps"] == 30 and alignment["texts"] > 1000
  assert alignment["heldout_after"] < alignment["heldout_before"]
  assert 0 <= facts["dev_moved"]["f1"] <= 100
  teacher_config = load_config(os.path.join(teacher, "config.json"))
  assert facts["params_encoder"] < facts["teacher_params_encoder"]

  # Task-stage KD from the teacher, which reads its own vocabulary: its
  # soft targets are carried to the student's pieces once, before training.
  tuned = tmp_path / "tuned"
  kd = ("tfmodels.training.finetune", "--task", "squad", "--data_dir", data,
        "--init_dir", carved, "--teacher_dir", teacher, "--vocab_file",
        vocab, "--max_seq_length", 64, "--train_steps", 4, "--batch_size", 8)
  result = _run(*kd, "--task_kd", "hidden", "--model_dir", tmp_path / "no")
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and "--task_kd hidden" in last, last
  result = _run(*kd, "--task_kd", "prediction", "--model_dir", tuned)
  assert result.returncode == 0, result.stderr[-3000:]
  carried = re.search(r"soft targets carried to (\d+) of (\d+) train rows",
                      result.stdout)
  # Most rows (this 20-step teacher still spreads mass over the question).
  assert carried and 0.5 * int(carried[2]) <= int(carried[1]) <= int(
      carried[2]), result.stdout[-2000:]
  history = [json.loads(l) for l in
             (tuned / "history.jsonl").read_text().splitlines()]
  assert history[-1]["logit_kd"] > 0

  out = tmp_path / "tflite"
  # At the Task Library's fixed length (its BertQuestionAnswerer feeds
  # [1, 384] whatever the file's default).
  result = tiny_models.run_converter(
      "--model_dir", tuned, "--data_dir", data, "--max_seq_length", 384,
      "--output_dir", out, "--modes", "float32,int8", "--name", "small",
      "--num_calibration_samples", 8, "--num_compare", 8)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "small_report.json").read_text())
  assert report["modes"]["float32"]["difference"]["max_abs"] <= 1e-4
  model = str(out / "small_int8.tflite")
  own = answering.tokenizer_for(model)
  assert len(own.vocab) == size and own.vocab[-1] == "unword"
  assert teacher_config.vocab_size != size
  # The twin answers with the vocabulary the file carries ...
  with open(os.path.join(data, "dev.json")) as f:
    article = json.load(f)["data"][0]["paragraphs"][0]
  passage, question = article["context"], article["qas"][0]["question"]
  passage_file = tmp_path / "passage.txt"
  passage_file.write_text(passage, encoding="utf-8")
  result = _run("android_bench.qa_app", "--model", model, "--passage",
                passage_file, "--question", question, "--num_threads", 2)
  assert result.returncode == 0, result.stderr[-2000:]
  expected = answering.predict(passage, question, own,
                               SpanModel(model, num_threads=2))
  assert result.stdout == expected.answer + "\n"
  # The Task Library answers from the same file: it tokenizes with the
  # vocabulary the metadata carries and takes no other.
  app = tmp_path / "app"
  result = _run("experiments.apps.qa_app_check", "--model", model, "--qa_dir", data,
                "--questions", 2, "--dev_questions", 0, "--output_dir", app,
                "--task_library_python", task_library_python())
  assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
  asked = json.loads((app / "answers.json").read_text())
  assert asked["task_library"]["api"].endswith("BertQuestionAnswerer")
  assert asked["task_library"]["length"] == 384
  assert len(asked["answers"]) == 2 and all(
      isinstance(a["task_library_answer"], str) for a in asked["answers"])
  assert (app / "vocab.txt").read_text().splitlines() == own.vocab
  # ... and refuses the teacher's, which the file does not carry.
  result = _run("android_bench.qa_app", "--model", model, "--vocab",
                tiny_models.VOCAB, "--passage", passage_file, "--question",
                question)
  assert result.returncode != 0
  assert "vocab" in result.stderr.strip().splitlines()[-1]
