"""Op substitution (converters/substitution.py) and convert_tflite --substitute.

A fitted NoNorm approximates its LayerNorm far better than an identity one;
distillation lowers the feature-map loss of the substituted model; and the
converter, on a fine-tuned tiny BERT (LayerNorm + gelu) classifier, reports
the metric before substitution, right after it and after recovery, and
converts the substituted model (no LayerNorm or gelu ops left).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfmodels.compression import substitution
from fixtures.converters import tiny_models
from tfmodels.checkpoints.model_dir import Head, build_model
from tfmodels.configs import load_config


def _random_norm_model(config_name="tiny_mobilebert"):
  """A span model in LayerNorm + gelu with norm parameters away from 1 / 0
  (as after training), and features with padding."""
  config = load_config(config_name).replace(normalization_type="layer_norm",
                                            hidden_act="gelu")
  keras.utils.set_random_seed(0)
  model = build_model(config, Head("span"))
  rng = np.random.default_rng(0)
  for v in model.variables:
    if v.name.endswith(("gamma:0", "beta:0")):
      center = 1.0 if "gamma" in v.name else 0.0
      v.assign(center + 0.2 * rng.standard_normal(v.shape))
  n, length = 48, 24
  ids = rng.integers(5, config.vocab_size, (n, length)).astype(np.int32)
  mask = np.ones((n, length), np.int32)
  for row in range(n):
    mask[row, rng.integers(5, length):] = 0
  features = {"input_ids": ids * mask, "input_mask": mask,
              "segment_ids": np.zeros_like(ids)}
  return model, config, features


@pytest.fixture(scope="module")
def substituted():
  model, config, features = _random_norm_model()
  spec = substitution.parse_spec("layernorm=nonorm,gelu=relu")
  student, new_config, facts = substitution.substitute(
      model, config, Head("span"), spec, features)
  return model, student, new_config, facts, features


def test_fitted_nonorm_approximates_layernorm_better_than_identity(
    substituted):
  model, student, new_config, facts, features = substituted
  assert (new_config.normalization_type, new_config.hidden_act) == (
      "no_norm", "relu")
  # tiny_mobilebert: embeddings + 2 layers x (bottleneck in, shared q/k,
  # attention, 2 FFNs, bottleneck out) = 13 norms.
  assert facts["fitted_norms"] == 13
  errors = substitution.norm_fit_errors(model, student, features)
  assert len(errors) == 13
  for name, e in errors.items():
    assert e["fitted"] < e["identity"], name
  fitted = np.mean([e["fitted"] for e in errors.values()])
  identity = np.mean([e["identity"] for e in errors.values()])
  assert fitted < 0.3 * identity


def test_least_squares_line_per_channel():
  stats = substitution._NormStatistics()  # pylint: disable=protected-access
  x = np.random.default_rng(1).normal(size=(4, 5, 3))
  y = x * np.array([2.0, -1.0, 0.5]) + np.array([0.1, 0.2, -0.3])
  stats.add("k", tf.constant(x), tf.constant(y))
  gamma, beta = stats.fit("k")
  np.testing.assert_allclose(gamma, [2.0, -1.0, 0.5], atol=1e-5)
  np.testing.assert_allclose(beta, [0.1, 0.2, -0.3], atol=1e-5)


def test_recovery_lowers_the_feature_map_loss(substituted):
  model, student, _, _, features = substituted
  history = substitution.recover(model, student, features, steps=60,
                                 batch_size=16, learning_rate=1e-3)
  assert history["feature_map_after"] < 0.5 * history["feature_map_before"]
  assert history["loss_after"] < history["loss_before"]
  # The encoder inside the task model is what was trained.
  out_t = model(features)["sequence_output"]
  out_s = student(features)["sequence_output"]
  assert float(tf.reduce_mean(tf.square(out_t - out_s))) < history[
      "feature_map_before"]


def test_blend_moves_from_the_original_to_the_swapped_model():
  model, config, features = _random_norm_model()
  spec = substitution.parse_spec("layernorm=nonorm,gelu=relu")
  student, _, _ = substitution.substitute(model, config, Head("span"), spec,
                                          features)
  rows = {k: v[:8] for k, v in features.items()}
  original = model(rows)["sequence_output"].numpy()
  swapped = student(rows)["sequence_output"].numpy()
  share = tf.Variable(0.0)
  blended = substitution.blend(model, student, config, spec, lambda: share)
  # tiny_mobilebert: 13 norms; an activation in each of the 2 stacked FFNs
  # of its 2 layers; the span head has none.
  assert blended == {"norms": 13, "activations": 4}
  np.testing.assert_allclose(student(rows)["sequence_output"], original,
                             atol=1e-5)
  share.assign(0.5)
  half = student(rows)["sequence_output"].numpy()
  assert np.abs(half - original).mean() > 1e-3
  assert np.abs(half - swapped).mean() > 1e-3
  share.assign(1.0)
  np.testing.assert_allclose(student(rows)["sequence_output"], swapped,
                             atol=1e-5)
  # Only the student's own weights train: the original's norms are not
  # among them.
  assert not {v.ref() for v in student.trainable_variables} & {
      v.ref() for v in model.trainable_variables}


def test_bad_specs_are_refused():
  with pytest.raises(substitution.SubstitutionError, match="not one of"):
    substitution.parse_spec("layernorm=relu")
  with pytest.raises(substitution.SubstitutionError, match="nothing"):
    substitution.parse_spec(" , ")
  with pytest.raises(substitution.SubstitutionError,
                     match="normalization_type is 'no_norm'"):
    substitution.substituted_config(load_config("tiny_mobilebert"),
                                    {"layernorm": "nonorm"})


@pytest.fixture(scope="module")
def bert_classifier(tmp_path_factory):
  """tiny_bert (LayerNorm + gelu) fine-tuned on the spam slice."""
  base = tmp_path_factory.getbasetemp()
  return (tiny_models.trained_classifier(base, "tiny_bert", 80,
                                         "bert_classifier"),
          tiny_models.spam_data(base))


def test_convert_tflite_substitutes_and_reports_each_stage(bert_classifier,
                                                           tmp_path):
  model_dir, data = bert_classifier
  out = tmp_path / "out"
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--output_dir", out, "--name", "spam", "--modes", "float32,int8",
      "--max_seq_length", tiny_models.SEQ_LENGTH,
      "--vocab_file", tiny_models.VOCAB, "--num_calibration_samples", 32,
      "--substitute", "layernorm=nonorm,gelu=relu", "--recover_steps", 150,
      "--recover_learning_rate", "2e-3", "--int8_recipe", "xnnpack")
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "spam_report.json").read_text())
  facts = report["substitution"]
  assert facts["substitutions"] == {"layernorm": "nonorm", "gelu": "relu"}
  # tiny_bert: embeddings + 2 layers x (attention, FFN) = 5 LayerNorms.
  assert facts["fitted_norms"] == 5
  assert facts["norm_fit_mse"]["fitted"] < facts["norm_fit_mse"]["identity"]
  recovery = facts["recovery"]
  assert recovery["steps"] == 150
  assert recovery["loss_after"] < recovery["loss_before"]
  points = facts["headline"]
  assert set(points) == {"original", "substituted", "recovered"}
  assert all(0 <= v <= 100 for v in points.values())
  # Recovery gets back at least what substitution alone kept.
  assert points["recovered"] >= points["substituted"] - 2.0
  # The report judges TFLite against the recovered Keras model.
  assert report["keras"]["metric"]["points"] == pytest.approx(
      points["recovered"])
  float32 = report["modes"]["float32"]
  assert float32["difference"]["max_abs"] < 1e-4
  assert report["int8_recipe"] == "xnnpack"
  assert report["modes"]["int8"]["metric"]["drop"] <= 5.0
  # The substituted int8 graph has no LayerNorm / gelu islands left: only
  # attention's softmax (with its mask) stays float.
  int8_float = set(report["modes"]["int8"]["float_ops"])
  assert "SOFTMAX" in int8_float and not int8_float & {"RSQRT", "GELU"}
  for op in ("MEAN", "RSQRT", "SQUARED_DIFFERENCE", "GELU"):
    assert op not in float32["ops"]
  card = json.loads((out / "spam_float32.model_card.json").read_text())
  assert card["config"]["normalization_type"] == "no_norm"
  assert card["config"]["hidden_act"] == "relu"
  markdown = (out / "spam_report.md").read_text()
  assert "## Op substitution" in markdown and "recovered (Keras)" in markdown


def test_substitution_flags_are_checked_before_work(bert_classifier, tmp_path):
  model_dir, data = bert_classifier
  out = tmp_path / "bad"
  for args, message in [
      (["--recover_steps", 5], "--recover_steps needs --substitute"),
      (["--substitute", "gelu=nonorm"], "not one of")]:
    result = tiny_models.run_converter(
        "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
        "--output_dir", out, "--vocab_file", tiny_models.VOCAB,
        "--max_seq_length", tiny_models.SEQ_LENGTH, *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error:") and message in lines[-1], lines[-1]
    assert not os.path.exists(out) or not os.listdir(out)


def test_gate_measures_against_the_original_model(bert_classifier, tmp_path):
  """A substitution that loses more than --max_metric_drop is refused even
  when TFLite matches the substituted model: the gate compares with the
  model before substitution, and the report keeps both drops."""
  model_dir, data = bert_classifier
  out = tmp_path / "gated"
  # NoNorms fitted on one example only: the substituted model loses several
  # dev examples (5 of 60 when measured, 8.3 points; with 4 examples it
  # lost one or gained one, too close to 1.0 to test the gate), and TFLite
  # float32 then reproduces it exactly.
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--output_dir", out, "--name", "spam", "--modes", "float32",
      "--max_seq_length", tiny_models.SEQ_LENGTH,
      "--vocab_file", tiny_models.VOCAB,
      "--substitute", "layernorm=nonorm,gelu=relu", "--num_fit_samples", 1,
      "--max_metric_drop", 1.0)
  assert result.returncode != 0
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines[-1].startswith("error: validation failed: float32: "), (
      lines[-1])
  assert "below the original model" in lines[-1]
  report = json.loads((out / "spam_report.json").read_text())
  points = report["substitution"]["headline"]
  assert report["original"]["metric"]["points"] == pytest.approx(
      points["original"])
  metric = report["modes"]["float32"]["metric"]
  assert metric["drop_from_original"] == pytest.approx(
      points["original"] - metric["points"])
  assert metric["drop"] == pytest.approx(points["substituted"]
                                         - metric["points"])
  # Against the substituted model it would have passed; not any more.
  assert metric["drop"] <= 1.0 < metric["drop_from_original"]
  assert not report["passed"]
  assert sorted(os.listdir(out)) == ["spam_report.json", "spam_report.md"]
  assert "vs original" in (out / "spam_report.md").read_text()


def test_build_report_gates_on_the_original_metric():
  """The MiniLM spam case of issue 19: 98.8 -> 70.5 by substitution,
  recovered to 98.0, int8 97.9: the int8 drop is 0.1 against the recovered
  model but 0.9 against the original."""
  from converters import validate

  def mode(accuracy):
    return {"metrics": {"accuracy": accuracy}, "float_ops": {},
            "select_tf_ops": [], "difference": {"max_abs": 0.0}}

  report = validate.build_report(
      {}, {"accuracy": 0.980}, {"int8": mode(0.979)}, max_metric_drop=0.5,
      original_metrics={"accuracy": 0.988})
  metric = report["modes"]["int8"]["metric"]
  assert metric["drop"] == pytest.approx(0.1)
  assert metric["drop_from_original"] == pytest.approx(0.9)
  assert not report["passed"]
  assert "0.90 points below the original model (98.80" in report[
      "failures"][0]
  assert "0.10 below the substituted model" in report["failures"][0]
  passed = validate.build_report(
      {}, {"accuracy": 0.980}, {"int8": mode(0.979)}, max_metric_drop=1.0,
      original_metrics={"accuracy": 0.988})
  assert passed["passed"] and passed["original"]["metric"]["points"] == (
      pytest.approx(98.8))
  # Without a substitution nothing changes.
  plain = validate.build_report({}, {"accuracy": 0.980},
                                {"int8": mode(0.979)}, max_metric_drop=0.5)
  assert plain["passed"] and "original" not in plain
  assert "drop_from_original" not in plain["modes"]["int8"]["metric"]
