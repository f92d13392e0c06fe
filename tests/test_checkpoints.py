"""Checkpoint import/export against outputs recorded with transformers.

The fixtures under tests/fixtures/checkpoints/ were made by
`make_fixtures.py` there (PyTorch + transformers, not needed here).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from conftest import REPO
from tfmodels.checkpoints import hf, tf1
from tfmodels.checkpoints.model_dir import load_model_dir, save_model_dir
from tfmodels.checkpoints.teachers import load_teacher
from tfmodels.checkpoints.weight_mapping import CheckpointError

FIXTURES = os.path.join(REPO, "tests", "fixtures", "checkpoints")
HF_FIXTURES = ["bert_pretraining", "bert_classifier", "bert_qa",
               "albert_pretraining", "mobilebert_pretraining",
               "mobilebert_layernorm", "mobilebert_qa", "bert_tagger"]
TF1_FIXTURES = ["bert_pretraining", "albert_pretraining",
                "mobilebert_pretraining"]
TOLERANCE = 1e-4


def _recorded(name):
  return dict(np.load(os.path.join(FIXTURES, name, "outputs.npz")))


def _run(model, head, recorded):
  features = {"input_ids": tf.constant(recorded["input_ids"], tf.int32),
              "input_mask": tf.constant(recorded["attention_mask"], tf.int32),
              "segment_ids": tf.constant(recorded["token_type_ids"],
                                         tf.int32)}
  if head.kind == "pretrainer":  # predict every position, like HF does
    batch, length = recorded["input_ids"].shape
    features["masked_lm_positions"] = tf.tile(
        tf.range(length, dtype=tf.int32)[None], [batch, 1])
  return model(features, training=False)


def _assert_matches(out, head, recorded):
  def close(ours, theirs, what):
    diff = np.abs(np.asarray(ours) - theirs).max()
    assert diff < TOLERANCE, f"{what}: max |diff| {diff:.2e}"

  hidden = recorded["hidden_states"]
  close(out["embedding_output"], hidden[0], "embedding output")
  assert len(out["hidden_states"]) == len(hidden) - 1
  for i, h in enumerate(out["hidden_states"]):
    close(h, hidden[i + 1], f"hidden state {i}")
  for i, scores in enumerate(out["attention_scores"]):
    close(tf.nn.softmax(scores, -1), recorded["attentions"][i],
          f"attention probabilities {i}")
  if "pooler_output" in recorded:
    close(out["pooled_output"], recorded["pooler_output"], "pooled output")
  if head.kind == "pretrainer":
    close(out["mlm_logits"], recorded["prediction_logits"], "MLM logits")
    sentence = recorded.get("seq_relationship_logits",
                            recorded.get("sop_logits"))
    close(out["sentence_logits"], sentence, "NSP / SOP logits")
  elif head.kind in ("classifier", "tagger"):
    close(out["logits"], recorded["logits"], f"{head.kind} logits")
  elif head.kind == "span":
    close(out["start_logits"], recorded["start_logits"], "start logits")
    close(out["end_logits"], recorded["end_logits"], "end logits")


@pytest.mark.parametrize("name", HF_FIXTURES)
def test_hf_import_matches_transformers(name):
  model, config, head = hf.import_checkpoint(os.path.join(FIXTURES, name))
  expected_head = {"pretraining": "pretrainer", "classifier": "classifier",
                   "qa": "span", "layernorm": "pretrainer",
                   "tagger": "tagger"}[name.split("_")[1]]
  assert head.kind == expected_head
  _assert_matches(_run(model, head, _recorded(name)), head, _recorded(name))


@pytest.mark.parametrize("name", TF1_FIXTURES)
def test_tf1_import_matches_transformers(name):
  directory = os.path.join(FIXTURES, name + "_tf1")
  model, config, head = tf1.import_checkpoint(
      os.path.join(directory, "model.ckpt"))
  assert head.kind == "pretrainer"
  _assert_matches(_run(model, head, _recorded(name)), head, _recorded(name))


@pytest.mark.parametrize("name", HF_FIXTURES)
def test_hf_round_trip_is_bit_identical(name, tmp_path):
  source = os.path.join(FIXTURES, name)
  model, config, head = hf.import_checkpoint(source)
  hf.export_checkpoint(model, config, head, str(tmp_path))
  original = load_file(os.path.join(source, hf.WEIGHTS_NAME))
  again = load_file(str(tmp_path / hf.WEIGHTS_NAME))
  weights = {k for k in original if not k.endswith("position_ids")}
  assert weights == set(again)
  for k in weights:
    assert original[k].dtype == again[k].dtype, k
    assert np.array_equal(original[k], again[k]), k
  _, config_again, head_again = hf.import_checkpoint(str(tmp_path))
  assert config_again.replace(name=config.name) == config
  assert head_again == head


def test_model_directory_round_trip_and_serving_signature(tmp_path):
  model, config, head = hf.import_checkpoint(
      os.path.join(FIXTURES, "bert_qa"))
  save_model_dir(model, config, head, str(tmp_path / "ours"))
  loaded, config_again, head_again = load_model_dir(str(tmp_path / "ours"))
  assert (config_again, head_again) == (config, head)
  recorded = _recorded("bert_qa")
  _assert_matches(_run(loaded, head, recorded), head, recorded)
  serve = tf.saved_model.load(str(tmp_path / "ours" / "saved_model")
                              ).signatures["serving_default"]
  out = serve(input_ids=tf.constant(recorded["input_ids"], tf.int32),
              input_mask=tf.constant(recorded["attention_mask"], tf.int32),
              segment_ids=tf.constant(recorded["token_type_ids"], tf.int32))
  assert {"sequence_output", "pooled_output", "start_logits",
          "end_logits"} <= set(out)
  np.testing.assert_allclose(out["start_logits"], recorded["start_logits"],
                             atol=TOLERANCE)
  np.testing.assert_allclose(out["sequence_output"],
                             recorded["hidden_states"][-1], atol=TOLERANCE)


def test_minilm_teacher_gives_recorded_sentence_embeddings():
  reference = np.load(os.path.join(FIXTURES, "minilm_reference.npz"))
  teacher = load_teacher("all-minilm-l6-v2")
  assert (teacher.config.num_hidden_layers, teacher.config.hidden_size) == (
      6, 384)
  sentences = [str(s) for s in reference["sentences"]]
  assert len(sentences) >= 20
  features = teacher.features(sentences)
  np.testing.assert_array_equal(features["input_ids"],
                                reference["input_ids"])
  ours = teacher.sentence_embeddings(sentences)
  theirs = reference["embeddings"]
  cosine = np.sum(ours * theirs, 1) / (
      np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
  assert cosine.min() > 0.9999, cosine.min()


def _copy_fixture(tmp_path, name="bert_classifier"):
  target = tmp_path / name
  shutil.copytree(os.path.join(FIXTURES, name), target)
  return target


def test_refuses_config_of_another_architecture(tmp_path):
  target = _copy_fixture(tmp_path)
  text = (target / "config.json").read_text().replace(
      '"model_type": "bert"', '"model_type": "gpt2"')
  (target / "config.json").write_text(text)
  with pytest.raises(CheckpointError, match="model_type 'gpt2'"):
    hf.import_checkpoint(str(target))


def test_refuses_tensor_of_wrong_shape(tmp_path):
  target = _copy_fixture(tmp_path)
  tensors = load_file(str(target / hf.WEIGHTS_NAME))
  tensors["classifier.weight"] = tensors["classifier.weight"][:, :-1].copy()
  save_file(tensors, str(target / hf.WEIGHTS_NAME))
  with pytest.raises(CheckpointError, match="'classifier.weight' has shape"):
    hf.import_checkpoint(str(target))


def test_refuses_missing_and_unknown_tensors(tmp_path):
  target = _copy_fixture(tmp_path)
  tensors = load_file(str(target / hf.WEIGHTS_NAME))
  key = "bert.encoder.layer.1.output.dense.bias"
  missing = {k: v for k, v in tensors.items() if k != key}
  save_file(missing, str(target / hf.WEIGHTS_NAME))
  with pytest.raises(CheckpointError, match=f"missing tensor '{key}'"):
    hf.import_checkpoint(str(target))
  save_file(dict(tensors, **{"bert.mystery.weight": np.zeros(3, "f4")}),
            str(target / hf.WEIGHTS_NAME))
  with pytest.raises(CheckpointError, match="'bert.mystery.weight' is not "
                     "mapped"):
    hf.import_checkpoint(str(target))


def _convert(*args):
  return subprocess.run(
      [sys.executable, "-m", "tfmodels.checkpoints.import_export", *args],
      capture_output=True, text=True,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_command_refuses_truncated_file_and_missing_input(tmp_path):
  target = _copy_fixture(tmp_path)
  weights = target / hf.WEIGHTS_NAME
  weights.write_bytes(weights.read_bytes()[:-1000])
  out = tmp_path / "out"
  result = _convert("--from", "hf", "--input", str(target), "--output",
                    str(out))
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"error: {weights}: cannot read safetensors"), last
  assert not out.exists()
  assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]
  os.remove(target / "config.json")
  result = _convert("--from", "hf", "--input", str(target), "--output",
                    str(out))
  assert result.returncode != 0
  assert result.stderr.strip().endswith(
      f"error: {target / 'config.json'}: no such file")
  assert not out.exists()


def test_command_converts_both_ways(tmp_path):
  ours, again = tmp_path / "ours", tmp_path / "again"
  source = os.path.join(FIXTURES, "mobilebert_qa")
  result = _convert("--from", "hf", "--input", source, "--output", str(ours))
  assert result.returncode == 0, result.stderr[-800:]
  assert sorted(os.listdir(ours)) == [
      ".written_by.json", "ckpt-1.data-00000-of-00001", "ckpt-1.index", "config.json",
      "head.json", "saved_model"]
  result = _convert("--to", "hf", "--input", str(ours), "--output",
                    str(again))
  assert result.returncode == 0, result.stderr[-800:]
  original = load_file(os.path.join(source, hf.WEIGHTS_NAME))
  exported = load_file(str(again / hf.WEIGHTS_NAME))
  assert all(np.array_equal(original[k], exported[k]) for k in exported)
  result = _convert("--from", "hf", "--input", source, "--output", str(ours))
  assert result.returncode != 0 and "exists" in result.stderr


def test_the_tokenizer_goes_both_ways(tmp_path):
  """An imported directory keeps its tokenizer's vocabulary, and the export
  writes it back as files transformers and our import read."""
  from tfmodels.checkpoints.hf_tokenizer import read_tokenizer
  ours, again = tmp_path / "ours", tmp_path / "again"
  source = os.path.join(FIXTURES, "ship_qa")
  assert _convert("--from", "hf", "--input", source, "--output",
                  str(ours)).returncode == 0
  result = _convert("--to", "hf", "--input", str(ours), "--output",
                    str(again))
  assert result.returncode == 0, result.stderr[-800:]
  with open(os.path.join(source, "vocab.txt")) as f:
    assert (again / "vocab.txt").read_text() == f.read()
  with open(again / "tokenizer_config.json") as f:
    settings = json.load(f)
  assert settings["do_lower_case"] is True
  assert settings["cls_token"] == "[CLS]"
  _, config, _ = hf.import_checkpoint(str(again))
  tokenizer = read_tokenizer(str(again), config)
  assert tokenizer.lower_case and len(tokenizer.vocab) == 2000


def test_tf1_refuses_missing_checkpoint_and_wrong_config(tmp_path):
  with pytest.raises(CheckpointError, match="cannot read TF1 checkpoint"):
    tf1.import_checkpoint(str(tmp_path / "nope" / "model.ckpt"))
  prefix = os.path.join(FIXTURES, "bert_pretraining_tf1", "model.ckpt")
  mobilebert_config = os.path.join(FIXTURES, "mobilebert_pretraining_tf1",
                                   "bert_config.json")
  with pytest.raises(CheckpointError, match="a mobilebert config for a bert "
                     "checkpoint"):
    tf1.import_checkpoint(prefix, mobilebert_config)


def test_command_imports_tf1(tmp_path):
  prefix = os.path.join(FIXTURES, "albert_pretraining_tf1", "model.ckpt")
  result = _convert("--from", "tf1", "--input", prefix, "--output",
                    str(tmp_path / "ours"))
  assert result.returncode == 0, result.stderr[-800:]
  model, config, head = load_model_dir(str(tmp_path / "ours"))
  assert (config.sharing_mode, config.hidden_act, head.sentence_objective) == (
      "all", "gelu_new", "sop")
  recorded = _recorded("albert_pretraining")
  _assert_matches(_run(model, head, recorded), head, recorded)
