"""`pretrain --init_from`: mixed-vocabulary stage I from a pretrained model."""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import HELDOUT_CORPUS, STUDENT_VOCAB, VOCAB, write_lines
from tfmodels.checkpoints.model_dir import Head, load_model_dir, save_model_dir
from tfmodels.checkpoints.weight_mapping import CheckpointError
from tfmodels.configs import load_config
from tfmodels.distillation.mixed_vocab import init_from_pretrained
from tfmodels.encoders import build_encoder
from tfmodels.models import build_pretrainer

STUDENT_PARTS = ("embeddings/student_word_embeddings/embeddings",
                 "embeddings/student_embedding_projection/kernel")


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def _pretrain(*args):
  return subprocess.run(
      [sys.executable, "-m", "tfmodels.training.pretrain", *map(str, args)],
      capture_output=True, text=True, env=_env())


def _teacher_config():
  """The tiny stage-I teacher over the shipped teacher + student vocabs."""
  student_size = sum(1 for _ in open(STUDENT_VOCAB, encoding="utf-8"))
  return load_config("tiny_mixed_vocab_teacher").replace(
      vocab_size=30522, mixed_vocab_size=student_size)


def _source_dir(path, **changes):
  """A pretrained plain encoder (the teacher without its student parts),
  every weight drawn afresh so only a real restore can reproduce it."""
  config = _teacher_config().replace(mixed_vocab_size=0,
                                     mixed_vocab_embedding_size=0, **changes)
  encoder = build_encoder(config)
  rng = np.random.default_rng(7)
  for v in encoder.weights:
    v.assign(rng.normal(0.5, 0.3, v.shape).astype(np.float32))
  save_model_dir(encoder, config, Head(), str(path))
  return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("init")
  with gzip.open(HELDOUT_CORPUS, "rt", encoding="utf-8") as f:
    lines = [line.rstrip("\n") for _, line in zip(range(1500), f)]
  corpus = write_lines(root / "corpus.txt", lines)
  subprocess.run(
      [sys.executable, "-m", "tfmodels.data.create_pretraining_data",
       "--input_file", corpus, "--output_dir", str(root / "mixed"),
       "--vocab_file", VOCAB, "--student_vocab_file", STUDENT_VOCAB,
       "--dupe_factor", "1", "--max_seq_length", "32",
       "--max_predictions_per_seq", "5", "--num_shards", "1"],
      check=True, capture_output=True, env=_env())
  (root / "teacher.json").write_text(_teacher_config().to_json())
  _source_dir(root / "wrong", vocab_size=100)  # another word table
  return root


def _stage_one(setup, model_dir, source, steps):
  return _pretrain("--config", setup / "teacher.json", "--train_data",
                   setup / "mixed", "--model_dir", model_dir, "--init_from",
                   source, "--train_steps", steps, "--batch_size", 4,
                   "--optimizer", "adamw", "--learning_rate", 1e-7,
                   "--checkpoint_every", 2)


def test_stage_one_starts_from_a_model_dir_and_resumes_its_own(setup):
  source_dir = _source_dir(setup / "pretrained")
  run = _stage_one(setup, setup / "stage1", source_dir, 2)
  assert run.returncode == 0, run.stderr[-1500:]
  assert "start fresh" in run.stdout
  source, _, _ = load_model_dir(str(source_dir))
  trained, _, _ = load_model_dir(str(setup / "stage1"))
  ours = {v.name: v.numpy() for v in trained.weights}
  for v in source.weights:  # two steps at lr 1e-7 move a weight by < 1e-6
    np.testing.assert_allclose(ours[v.name], v.numpy(), atol=1e-5,
                               err_msg=v.name)
  fresh = load_config(str(setup / "teacher.json"))
  assert ours[STUDENT_PARTS[0] + ":0"].std() < 5 * fresh.initializer_range
  # A resumed run restores its own checkpoint: another --init_from, which
  # it used to ignore silently, is refused in one line, the run untouched;
  # the one it started from resumes it.
  refused = _stage_one(setup, setup / "stage1", setup / "wrong", 4)
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1] == (
      f"error: --init_from {os.path.realpath(setup / 'wrong')}: --model_dir "
      f"{setup / 'stage1'} holds a run started with --init_from "
      f"{os.path.realpath(source_dir)}, which a resume keeps; give the same, "
      "or choose another --model_dir")
  assert tf.train.latest_checkpoint(str(setup / "stage1")).endswith(
      "ckpt-2")
  resumed = _stage_one(setup, setup / "stage1", source_dir, 4)
  assert resumed.returncode == 0, resumed.stderr[-1500:]
  assert "resumed from" in resumed.stdout
  assert "restored" not in resumed.stdout  # the source is not read again


def test_a_source_that_does_not_fit_is_refused_before_anything_is_written(
    setup):
  run = _stage_one(setup, setup / "refused", setup / "wrong", 2)
  assert run.returncode != 0
  last = run.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --init_from ")
  assert "embeddings/word_embeddings/embeddings has shape [100, 32]" in last
  assert not (setup / "refused" / "config.json").exists()
  missing = _pretrain("--config", setup / "teacher.json", "--train_data",
                      setup / "mixed", "--model_dir", setup / "nowhere",
                      "--init_from", setup / "no_such_model")
  assert missing.returncode != 0
  assert "neither a model directory" in missing.stderr.strip().splitlines()[-1]


def test_restore_keeps_the_body_and_refuses_a_different_computation():
  config = load_config("tiny_mixed_vocab_teacher")
  plain = config.replace(mixed_vocab_size=0, mixed_vocab_embedding_size=0)
  source = build_pretrainer(plain)
  model = build_pretrainer(config)
  before = {v.name: v.numpy() for v in model.weights}
  theirs = {v.name: v.numpy() for v in source.weights}
  assert not np.array_equal(before["layer_0_ffn/output/kernel:0"],
                            theirs["layer_0_ffn/output/kernel:0"])
  restored, fresh = init_from_pretrained(model, config, source, plain)
  assert set(fresh) == set(STUDENT_PARTS) | {"mlm/student_output_bias"}
  assert len(restored) == len(source.weights)
  for v in model.weights:
    name = v.name.split(":")[0]
    expected = theirs[v.name] if name in restored else before[v.name]
    np.testing.assert_array_equal(v.numpy(), expected, err_msg=name)
  # Same shapes, another activation: restoring would change the function.
  model = build_pretrainer(config)
  with pytest.raises(CheckpointError, match="hidden_act is 'gelu'"):
    init_from_pretrained(model, config, source,
                         plain.replace(hidden_act="relu"))
  # A source tensor the model has no place for (two layers into one).
  shallow = config.replace(num_hidden_layers=1)
  with pytest.raises(CheckpointError, match="layer_1_attention"):
    init_from_pretrained(build_pretrainer(shallow), shallow, source, plain)
