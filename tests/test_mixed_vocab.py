"""Mixed-vocabulary stage I loss (eq. 1) and the stage I -> II hand-over."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import HELDOUT_CORPUS, STUDENT_VOCAB, VOCAB
from tfmodels.configs import load_config
from tfmodels.distillation.mixed_vocab import (init_student_embeddings,
                                               mixed_mlm_loss)
from tfmodels.models import build_pretrainer


def test_each_label_uses_its_own_vocabulary_softmax():
  rng = np.random.default_rng(0)
  teacher_v, student_v = 6, 4
  t_logits = rng.normal(size=(2, 3, teacher_v))
  s_logits = rng.normal(size=(2, 3, student_v))
  ids = np.array([[1, teacher_v + 2, 5], [teacher_v + 0, 3, 0]])
  vocab = (ids >= teacher_v).astype(np.int32)
  weights = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
  def log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))
  expected = []
  for b in range(2):
    for p in range(3):
      if weights[b, p]:
        if vocab[b, p]:
          expected.append(-log_softmax(s_logits[b, p])[ids[b, p] - teacher_v])
        else:
          expected.append(-log_softmax(t_logits[b, p])[ids[b, p]])
  batch = {"masked_lm_ids": ids, "masked_lm_vocab": vocab,
           "masked_lm_weights": weights}
  outputs = {"mlm_logits": tf.constant(t_logits, tf.float32),
             "mlm_student_logits": tf.constant(s_logits, tf.float32)}
  got = mixed_mlm_loss(batch, outputs, teacher_v)
  assert float(got) == pytest.approx(np.mean(expected), rel=1e-5)


def test_stage_two_starts_from_the_stage_one_student_table():
  stage_one = build_pretrainer(load_config("tiny_mixed_vocab_teacher"))
  student_config = load_config("tiny_bert").replace(
      vocab_size=40, hidden_size=8, embedding_size=8, num_attention_heads=2,
      intermediate_size=16)
  student = build_pretrainer(student_config)
  init_student_embeddings(student, stage_one)
  table = [v for v in stage_one.weights
           if "student_word_embeddings" in v.name][0]
  np.testing.assert_array_equal(
      student.get_layer("tiny_bert").get_layer("embeddings")
      .word_embeddings.embeddings.numpy(), table.numpy())
  wrong = build_pretrainer(student_config.replace(vocab_size=41))
  with pytest.raises(ValueError, match="does not fit"):
    init_student_embeddings(wrong, stage_one)


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def _run(*args):
  result = subprocess.run([sys.executable, "-m", *args], capture_output=True,
                          text=True, env=_env())
  assert result.returncode == 0, result.stderr[-1000:]
  return result.stdout


def test_stage_one_and_two_commands(tmp_path):
  student_size = sum(1 for _ in open(STUDENT_VOCAB, encoding="utf-8"))
  common = ["--input_file", HELDOUT_CORPUS, "--dupe_factor", "1",
            "--max_seq_length", "32", "--max_predictions_per_seq", "5"]
  _run("tfmodels.data.create_pretraining_data", *common, "--output_dir",
       str(tmp_path / "mixed"), "--vocab_file", VOCAB, "--student_vocab_file",
       STUDENT_VOCAB)
  _run("tfmodels.data.create_pretraining_data", *common, "--output_dir",
       str(tmp_path / "student_data"), "--vocab_file", STUDENT_VOCAB)
  teacher = load_config("tiny_mixed_vocab_teacher").replace(
      vocab_size=30522, mixed_vocab_size=student_size)
  (tmp_path / "teacher.json").write_text(teacher.to_json())
  _run("tfmodels.training.pretrain", "--config", str(tmp_path / "teacher.json"),
       "--train_data", str(tmp_path / "mixed"), "--model_dir",
       str(tmp_path / "stage1"), "--train_steps", "20", "--batch_size", "8",
       "--learning_rate", "1e-2")
  history = [json.loads(l) for l in
             (tmp_path / "stage1" / "history.jsonl").read_text().splitlines()]
  assert np.mean([h["mlm_loss"] for h in history[-5:]]) < np.mean(
      [h["mlm_loss"] for h in history[:5]])
  scored = json.loads(_run("tfmodels.training.evaluate", "--model_dir",
                           str(tmp_path / "stage1"), "--pretraining_data",
                           str(tmp_path / "mixed")))
  assert 0 <= scored["mlm_accuracy"] <= 1 and scored["masked_tokens"] > 1000
  # Each label is scored in its own vocabulary: far below ln(30522 + V_s).
  assert scored["mlm_loss"] < np.log(30522)
  student = load_config("tiny_bert").replace(
      vocab_size=student_size, hidden_size=8, embedding_size=8,
      num_attention_heads=2,
      intermediate_size=16)
  (tmp_path / "student.json").write_text(student.to_json())
  out = _run("tfmodels.training.pretrain", "--config",
             str(tmp_path / "student.json"), "--train_data",
             str(tmp_path / "student_data"), "--model_dir",
             str(tmp_path / "stage2"), "--train_steps", "5", "--batch_size",
             "8", "--init_student_embeddings_from", str(tmp_path / "stage1"))
  assert "word embeddings from the stage-I student table" in out


def test_the_shipped_minilm_teacher_keeps_minilm_and_adds_the_student_parts():
  # Not through experiments.papers.mixed_vocab_student: its absl flags would clash
  # with the other experiments' in this process.
  from tfmodels.checkpoints.teachers import load_teacher
  from tfmodels.distillation.mixed_vocab import init_from_pretrained
  with open(STUDENT_VOCAB, encoding="utf-8") as f:
    size = sum(1 for line in f if line.strip())
  shipped = load_config("mixed_vocab_teacher_minilm")
  assert shipped.mixed_vocab_size == size  # the shipped student vocabulary
  teacher_config = shipped.replace(mixed_vocab_embedding_size=96)
  minilm = load_teacher("all-minilm-l6-v2")
  model = build_pretrainer(teacher_config)
  restored, fresh = init_from_pretrained(model, teacher_config,
                                         minilm.encoder, minilm.config)
  assert len(restored) == len(minilm.encoder.weights)
  assert {n.split("/")[0] for n in fresh} == {"embeddings", "mlm", "nsp"}
  assert [n for n in fresh if n.startswith("embeddings/")] == [
      "embeddings/student_embedding_projection/kernel",
      "embeddings/student_word_embeddings/embeddings"]
