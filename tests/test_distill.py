"""MobileBERT knowledge-transfer strategies: stage plans and a real run."""

import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import HELDOUT_CORPUS, VOCAB
from tfmodels.checkpoints.model_dir import Head, build_model
from tfmodels.configs import load_config
from tfmodels.distillation import progressive


def test_plans_share_the_step_budget():
  akt = progressive.plan("akt", 4, 100)
  assert [(s.name, s.end_step, s.transfer_layers, s.distill) for s in akt] == [
      ("akt", 100, (0, 1, 2, 3), True)]
  jkt = progressive.plan("jkt", 4, 100, kt_fraction=0.4)
  assert [(s.end_step, s.transfer_layers, s.distill) for s in jkt] == [
      (40, (0, 1, 2, 3), False), (100, (), True)]
  pkt = progressive.plan("pkt", 4, 100, kt_fraction=0.5)
  assert [s.end_step for s in pkt] == [12, 24, 36, 50, 100]
  assert [s.transfer_layers for s in pkt[:4]] == [(0,), (1,), (2,), (3,)]
  assert pkt[2].trained == progressive.layer_pattern((2,))
  soft = progressive.plan("pkt", 4, 100, lower_layer_lr=0.1)
  assert soft[2].trained == progressive.layer_pattern((0, 1, 2))
  assert soft[2].lr_multipliers == ((progressive.layer_pattern((0, 1)), 0.1),)
  with pytest.raises(ValueError, match="kt_fraction"):
    progressive.plan("jkt", 4, 100, kt_fraction=1.0)


def test_layer_pattern_matches_only_its_layers():
  pattern = progressive.layer_pattern((1,))
  import re
  assert re.search(pattern, "layer_1/ffn_0/output/kernel:0")
  assert re.search(pattern, "layer_1_attention/norm/gamma:0")
  assert not re.search(pattern, "layer_11/ffn_0/output/kernel:0")
  assert not re.search(pattern, "embeddings/norm/gamma:0")


def test_incompatible_teacher_is_refused():
  with pytest.raises(ValueError, match="num_hidden_layers"):
    progressive.check_compatible(
        load_config("tiny_ibbert").replace(num_hidden_layers=3),
        load_config("tiny_mobilebert"))


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  root = tmp_path_factory.mktemp("distill")
  data = root / "shards"
  subprocess.run(
      [sys.executable, "-m", "tfmodels.data.create_pretraining_data",
       "--input_file", HELDOUT_CORPUS, "--output_dir", str(data),
       "--vocab_file", VOCAB, "--dupe_factor", "1", "--max_seq_length", "32",
       "--max_predictions_per_seq", "5", "--num_shards", "2"],
      check=True, capture_output=True, env=_env())
  configs = {}
  for name in ("tiny_ibbert", "tiny_mobilebert"):
    path = root / f"{name}.json"
    path.write_text(load_config(name).replace(vocab_size=30522).to_json())
    configs[name] = path
  teacher = root / "teacher"
  subprocess.run(
      [sys.executable, "-m", "tfmodels.training.pretrain", "--config",
       str(configs["tiny_ibbert"]), "--train_data", str(data), "--model_dir",
       str(teacher), "--train_steps", "10", "--batch_size", "4"],
      check=True, capture_output=True, env=_env())
  student = root / "student"
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.distill", "--teacher_dir",
       str(teacher), "--student_config", str(configs["tiny_mobilebert"]),
       "--train_data", str(data), "--model_dir", str(student), "--strategy",
       "pkt", "--train_steps", "40", "--batch_size", "4",
       "--checkpoint_every", "10", "--keep_checkpoints", "10",
       "--learning_rate", "1e-2"], capture_output=True, text=True,
      env=_env())
  assert result.returncode == 0, result.stderr[-1000:]
  return teacher, student, data, configs


def _weights(prefix):
  """{variable name: value} of a run's checkpoint, through our model."""
  directory = os.path.dirname(str(prefix))
  config = load_config(os.path.join(directory, "config.json"))
  model = build_model(config, Head("pretrainer"))
  tf.train.Checkpoint(model=model).read(str(prefix)).expect_partial()
  return {v.name: v.numpy() for v in model.weights}


def test_progressive_transfer_trains_one_layer_at_a_time(run):
  teacher, student = run[:2]
  # PKT with 40 steps on 2 layers: layer 0 to step 10, layer 1 to 20, PD.
  w = {s: _weights(student / f"ckpt-{s}") for s in (10, 20, 30)}
  assert w[10].keys() == w[20].keys()
  def changed(a, b, marker):
    return {k for k in w[a] if marker(k)
            and not np.array_equal(w[a][k], w[b][k])}
  # Stage 2 (layer 1): layer 0, the embeddings and heads do not move.
  assert not changed(10, 20, lambda k: "layer_0" in k
                     or "embeddings" in k or "mlm" in k)
  assert changed(10, 20, lambda k: "layer_1" in k)
  # Pre-training distillation trains everything.
  assert changed(20, 30, lambda k: "layer_0" in k)
  assert changed(20, 30, lambda k: "embeddings" in k)
  history = [json.loads(l) for l in
             (student / "history.jsonl").read_text().splitlines()]
  fmt0 = [h["fmt_0"] for h in history if h["stage"] == "pkt-layer-0"]
  assert np.mean(fmt0[-3:]) < np.mean(fmt0[:3])  # layer 0 learns to mimic
  assert {h["stage"] for h in history} == {"pkt-layer-0", "pkt-layer-1",
                                           "distillation"}


def test_embeddings_and_heads_start_as_the_teachers(run):
  teacher, student = run[:2]
  t = _weights(tf.train.latest_checkpoint(str(teacher)))
  s = _weights(student / "ckpt-10")
  shared = [k for k in s if k in t and ("embeddings" in k or "mlm" in k)
            and s[k].shape == t[k].shape]
  assert len(shared) > 5
  for k in shared:
    np.testing.assert_array_equal(s[k], t[k], err_msg=k)


def test_pkt_from_a_teacher_without_mlm_head(run, tmp_path):
  # A bare encoder (like MiniLM): a BERT teacher of width 32 whose word
  # table the student (E = 16) takes at rank 16; PD keeps the layer losses.
  from tfmodels.checkpoints.model_dir import save_model_dir
  from tfmodels.encoders import build_encoder
  data, configs = run[2], run[3]
  config = load_config("tiny_bert").replace(vocab_size=30522)
  teacher_dir = tmp_path / "bare_teacher"
  save_model_dir(build_encoder(config), config, Head(), str(teacher_dir))
  assert progressive.plan("jkt", 2, 10, teacher_has_mlm=False)[-1] == (
      progressive.Stage("distillation", 10, (0, 1), True))
  student = tmp_path / "student"
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.distill", "--teacher_dir",
       str(teacher_dir), "--student_config", str(configs["tiny_mobilebert"]),
       "--train_data", str(data), "--model_dir", str(student), "--strategy",
       "pkt", "--train_steps", "6", "--batch_size", "4",
       "--checkpoint_every", "6", "--log_every", "1"],
      capture_output=True, text=True,
      env=_env())
  assert result.returncode == 0, result.stderr[-1000:]
  assert "at rank 16 (relative error" in result.stdout
  history = [json.loads(l) for l in
             (student / "history.jsonl").read_text().splitlines()]
  last = [h for h in history if h["stage"] == "distillation"]
  assert last and {"fmt_0", "fmt_1", "at_1", "pd"} <= set(last[-1])


def test_a_resume_with_another_teacher_is_refused(run, tmp_path):
  # It used to resume, distilling the rest of the run from the other one.
  teacher, student, data, configs = run
  other = tmp_path / "same_teacher_elsewhere"
  shutil.copytree(teacher, other)
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.distill", "--teacher_dir",
       str(other), "--student_config", str(configs["tiny_mobilebert"]),
       "--train_data", str(data), "--model_dir", str(student), "--strategy",
       "pkt", "--train_steps", "50", "--batch_size", "4"],
      capture_output=True, text=True, env=_env())
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --teacher_dir {os.path.realpath(other)}: --model_dir "
      f"{student} holds a run started with --teacher_dir "
      f"{os.path.realpath(teacher)}, which a resume keeps; give the same, "
      "or choose another --model_dir")
  assert tf.train.latest_checkpoint(str(student)).endswith("ckpt-40")


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def test_two_workers_follow_the_one_worker_loss_curve(run, tmp_path):
  teacher, _, data, configs = run
  def command(model_dir, strategy):
    return [sys.executable, "-m", "tfmodels.training.distill",
            "--teacher_dir", str(teacher), "--student_config",
            str(configs["tiny_mobilebert"]), "--train_data", str(data),
            "--model_dir", str(model_dir), "--strategy", "akt",
            "--train_steps", "12", "--batch_size", "8",
            "--checkpoint_every", "6", "--learning_rate", "1e-2",
            "--distribution_strategy", strategy]
  single = tmp_path / "single"
  subprocess.run(command(single, "one_device"), check=True,
                 capture_output=True, env=_env())
  workers = [f"localhost:{p}" for p in _free_ports(2)]
  multi = tmp_path / "multi"
  processes = []
  for index in range(2):
    tf_config = {"cluster": {"worker": workers},
                 "task": {"type": "worker", "index": index}}
    processes.append(subprocess.Popen(
        command(multi, "multi_worker_mirrored"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**_env(), "TF_CONFIG": json.dumps(tf_config)}))
  for p in processes:
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-1500:]
  def losses(directory):
    return np.array([json.loads(l)["loss"] for l in
                     (directory / "history.jsonl").read_text().splitlines()])
  one, two = losses(single), losses(multi)
  assert len(one) == len(two) == 12
  # Same records per global batch (each worker keeps every other record of
  # the common stream); per-replica averaging differs only slightly.
  np.testing.assert_allclose(two, one, rtol=2e-2)
  assert one[-1] < one[0]
  # The chief keeps the checkpoints; the other worker's copies are gone.
  assert (multi / "ckpt-12.index").exists()
  assert not (multi / ".worker_1").exists()
