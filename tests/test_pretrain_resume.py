"""A killed pre-training run resumes exactly where its checkpoint left it."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import HELDOUT_CORPUS, VOCAB

STEPS, EVERY = 120, 10


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  out = tmp_path_factory.mktemp("data") / "shards"
  subprocess.run(
      [sys.executable, "-m", "tfmodels.data.create_pretraining_data",
       "--input_file", HELDOUT_CORPUS, "--output_dir", str(out),
       "--vocab_file", VOCAB, "--dupe_factor", "1", "--max_seq_length", "32",
       "--max_predictions_per_seq", "5", "--num_shards", "2"],
      check=True, capture_output=True, env=_env())
  config = out.parent / "tiny.json"
  config.write_text(json.dumps({
      "name": "tiny_resume", "vocab_size": 30522, "hidden_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 2,
      "intermediate_size": 32, "max_position_embeddings": 32,
      "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
  return out, config


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
          "CUDA_VISIBLE_DEVICES": ""}


def _command(shards, model_dir, policy="none", steps=STEPS):
  data, config = shards
  return [sys.executable, "-m", "tfmodels.training.pretrain", "--config",
          str(config), "--train_data", str(data), "--model_dir",
          str(model_dir), "--train_steps", str(steps), "--batch_size", "4",
          "--checkpoint_every", str(EVERY), "--keep_checkpoints", "100",
          "--learning_rate", "3e-3", "--mixed_precision", policy]


def _latest_step(model_dir):
  latest = tf.train.latest_checkpoint(str(model_dir))
  return int(latest.rsplit("-", 1)[1]) if latest else 0


def _state(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if "save_counter" not in name
          and name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


# Mixed precision: layers in 16 bits, variables in float32, float16 with
# dynamic loss scaling (whose state must survive the kill too). Fewer steps:
# 16-bit arithmetic is emulated, slowly, on CPUs.
@pytest.mark.parametrize("policy,steps", [("none", STEPS),
                                          ("mixed_float16", 50),
                                          ("mixed_bfloat16", 50)])
def test_killed_run_resumes_with_identical_state(shards, tmp_path, policy,
                                                 steps):
  whole, killed = tmp_path / "whole", tmp_path / "killed"
  command = lambda model_dir: _command(shards, model_dir, policy, steps)
  subprocess.run(command(whole), check=True, capture_output=True,
                 env=_env())
  # The run to kill starts cold (not from the suite's warm-start server):
  # kill -9 must stop the command itself, at once.
  cold = {k: v for k, v in _env().items() if k != "WARM_START_SOCKET"}
  process = subprocess.Popen(command(killed),
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=cold)
  # Wait for the checkpoint *state file* to name step 2*EVERY: the shard
  # files appear a moment before it does.
  deadline = time.time() + 120
  while _latest_step(killed) < 2 * EVERY:
    assert process.poll() is None and time.time() < deadline
    time.sleep(0.05)
  process.send_signal(signal.SIGKILL)
  process.wait()
  latest = tf.train.latest_checkpoint(str(killed))
  resumed_at = _latest_step(killed)
  assert 2 * EVERY <= resumed_at < steps, "the kill came too late to test"
  # The state on disk at the kill equals the uninterrupted run's at that
  # step: weights, optimizer moments and step counter.
  at_kill, reference = _state(latest), _state(whole / f"ckpt-{resumed_at}")
  assert at_kill.keys() == reference.keys()
  assert any(k.startswith("optimizer/") for k in at_kill)
  assert any("loss_scale" in k for k in at_kill) == (
      policy == "mixed_float16")
  assert all(v.dtype == np.float32 for k, v in at_kill.items()
             if k.startswith("model/"))
  for name in reference:
    np.testing.assert_array_equal(at_kill[name], reference[name], err_msg=name)
  result = subprocess.run(command(killed), capture_output=True,
                          text=True, env=_env())
  assert result.returncode == 0, result.stderr[-800:]
  assert f"at step {resumed_at}" in result.stdout
  final, expected = _state(killed / f"ckpt-{steps}"), _state(
      whole / f"ckpt-{steps}")
  for name in expected:
    np.testing.assert_allclose(final[name], expected[name], rtol=1e-5,
                               atol=1e-6, err_msg=name)
  losses = [json.loads(l)["loss"] for l in
            (whole / "history.jsonl").read_text().splitlines()]
  assert np.mean(losses[-10:]) < np.mean(losses[:10])  # it does learn

