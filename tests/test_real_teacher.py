"""The real pretrained teacher: the one smoke test that imports and converts
the whole 22M-parameter MiniLM (every other chain runs on tiny fixtures or
on its first layers), and the tiny scales' cut of it."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

# (experiments.common.tiny_teacher defines its flags on import: run, not imported.)
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _run(module, *args):
  result = subprocess.run([sys.executable, "-m", module, *map(str, args)],
                          capture_output=True, text=True, env=ENV, cwd=REPO)
  return result


def test_the_real_teacher_imports_and_converts(tmp_path):
  """MiniLM through the importer and the converter, as ship's first steps
  take it: all six layers, float32 and int8 at L = 128."""
  from tfmodels.checkpoints.teachers import teacher_dir
  ours = tmp_path / "minilm"
  imported = _run("tfmodels.checkpoints.import_export", "--from", "hf",
                  "--input", teacher_dir("all-minilm-l6-v2"), "--output", ours)
  assert imported.returncode == 0, imported.stderr[-3000:]
  assert "6 layers, hidden 384, head encoder, its tokenizer's vocab.txt " \
         "(30522 pieces" in imported.stdout
  out = tmp_path / "tflite"
  converted = _run("converters.convert_tflite", "--model_dir", ours,
                   "--output_dir", out, "--name", "minilm", "--modes",
                   "float32,int8", "--max_seq_length", 128,
                   "--num_calibration_samples", 8, "--representative_data",
                   os.path.join(REPO, "data", "pretraining", "heldout.txt.gz"))
  assert converted.returncode == 0, converted.stderr[-3000:]
  report = json.loads((out / "minilm_report.json").read_text())
  assert report["passed"] and report["head"] == "encoder"
  float32, int8 = (report["modes"][m] for m in ("float32", "int8"))
  assert float32["difference"]["max_abs"] <= 1e-3
  assert int8["size_bytes"] < 0.3 * float32["size_bytes"]
  assert float32["size_bytes"] > 4 * 22_000_000  # the whole model


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
  out = tmp_path_factory.mktemp("cut") / "tiny_teacher"
  result = _run("experiments.common.tiny_teacher", "--layers", 2, "--output_dir",
                out)
  assert result.returncode == 0, result.stderr[-3000:]
  return out


def layer_of(name):
  match = re.search(r"(?:^|\.)layer\.(\d+)\.", name)
  return int(match.group(1)) if match else None


def test_the_cut_teacher_is_the_first_layers_of_the_real_one(cut):
  from safetensors.numpy import load_file
  from tfmodels.checkpoints.teachers import teacher_dir
  source = teacher_dir("all-minilm-l6-v2")
  config = json.loads((cut / "config.json").read_text())
  with open(os.path.join(source, "config.json")) as f:
    assert config == {**json.load(f), "num_hidden_layers": 2}
  whole = load_file(os.path.join(source, "model.safetensors"))
  kept = load_file(str(cut / "model.safetensors"))
  assert set(kept) == {k for k in whole if layer_of(k) in (None, 0, 1)}
  assert {layer_of(k) for k in whole} == {None, 0, 1, 2, 3, 4, 5}
  for name, tensor in kept.items():
    np.testing.assert_array_equal(tensor, whole[name])
  for name in TOKENIZER_FILES:  # the tokenizer is the teacher's, as it is
    with open(os.path.join(source, name), "rb") as f:
      assert (cut / name).read_bytes() == f.read(), name


def test_the_cut_teacher_computes_the_real_ones_first_layers(cut):
  """Its output is the whole teacher's hidden state after layer 2."""
  import tensorflow as tf
  from tfmodels.checkpoints.hf import import_checkpoint
  from tfmodels.checkpoints.teachers import load_teacher
  whole = load_teacher("all-minilm-l6-v2")
  small, config, _ = import_checkpoint(str(cut), "cut")
  assert config.num_hidden_layers == 2
  features = whole.features(["A cut teacher keeps its first layers.",
                             "Résumé café"])
  expected = whole.encoder(features, training=False)["hidden_states"][1]
  got = small(features, training=False)["sequence_output"]
  np.testing.assert_allclose(got.numpy(), tf.convert_to_tensor(
      expected).numpy(), atol=1e-5)


def test_the_cut_is_refused_in_one_line(tmp_path):
  result = _run("experiments.common.tiny_teacher", "--layers", 7, "--output_dir",
                tmp_path / "out")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --layers 7: the teacher has 6 layers")
  assert not (tmp_path / "out").exists()
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("mine")
  result = _run("experiments.common.tiny_teacher", "--output_dir", mine)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"error: --output_dir {mine}")
  assert os.listdir(mine) == ["notes.txt"]
