"""Quantization-aware training (converters/qat.py, convert_tflite --qat_steps).

On the tiny BERT (LayerNorm + gelu) spam classifier: a few QAT steps lower
the fake-quantized model's loss and move its ranges; the int8 file the
converter makes from it carries those ranges (not its own calibration's)
and computes what the fake-quantized Keras model computes; the command
reports it.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from converters import conversion, export, qat, representative, runtime
from converters import source, validate
from fixtures.converters import tiny_models
from tfmodels.tokenization import WordPieceTokenizer
from tfmodels.training.tasks import make_task


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(QuantizationAware after 40 steps, its facts, task, float model)."""
  base = tmp_path_factory.getbasetemp()
  model_dir = tiny_models.trained_classifier(base, "tiny_bert", 80,
                                             "bert_classifier")
  src = source.load_source(model_dir)
  task = make_task("spam", tiny_models.spam_data(base),
                   WordPieceTokenizer(tiny_models.VOCAB),
                   tiny_models.SEQ_LENGTH)
  features = task.features("train")
  model = keras.models.clone_model(src.model)
  model.set_weights(src.model.get_weights())
  quantized = qat.QuantizationAware(model, "standard")
  quantized.calibrate(representative.sample(features, 64))
  calibrated = quantized.ranges()
  facts = qat.train(quantized, task, features, steps=40, batch_size=16,
                    learning_rate=1e-4,
                    eval_features=representative.sample(features, 64))
  return quantized, facts, calibrated, task, src.model


def test_qat_lowers_the_loss_and_moves_the_ranges(trained):
  quantized, facts, calibrated, _, _ = trained
  # tiny_bert: 14 Dense layers (q, k, v, out, 2 FFN per layer x 2, pooler,
  # logits), each with an input and an output range, and the pooler's
  # matmul before its tanh; 5 LayerNorms (embeddings, 2 per layer x 2) with
  # input, mean, variance, rsqrt and output; 2 attentions' raw and masked
  # scores (the standard recipe's int8 tensors).
  assert facts["quantized_tensors"] == 58 == calibrated.shape[1]
  assert quantized.ranges("dense_in").shape == (2, 14)
  assert quantized.ranges("norm_variance").shape == (2, 5)
  # The masked scores' range holds the mask adder, as int8's does.
  assert np.all(calibrated[0, [p.name.endswith("masked_scores")
                               for p in quantized.activations]] == -120.0)
  assert np.all(quantized.ranges("masked_scores")[0] < -100)
  assert facts["loss_after"] < facts["loss_before"]
  assert facts["range_shift"] > 0
  assert not np.allclose(quantized.ranges(), calibrated)
  # Every range holds 0 (integer zero points) and is not empty.
  ranges = quantized.ranges()
  assert np.all(ranges[0] <= 0) and np.all(ranges[1] >= 0)
  assert np.all(ranges[1] - ranges[0] > 0)


def test_xnnpack_recipe_rounds_only_its_int8_tensors(trained):
  *_, float_model = trained
  model = keras.models.clone_model(float_model)
  model.set_weights(float_model.get_weights())
  quantized = qat.QuantizationAware(model, "xnnpack")
  kinds = sorted({p.name.split("_", 1)[1] for p in quantized.activations})
  # Softmax with its mask and LayerNorm with the residual add before it
  # are float islands of the xnnpack recipe (fast_int8.py), so QAT leaves
  # them float too; the Q K^T matmul's output is int8.
  assert kinds == ["dense_in", "dense_matmul", "dense_out", "scores"]
  assert len(quantized.activations) == 29 + 2
  # Keys and values feed a BATCH_MATMUL's second operand, which the recipe
  # makes symmetric; after calibration their ranges are [-128 s, 127 s].
  symmetric = [p for p in quantized.activations if p.symmetric]
  assert len(symmetric) == 4 and all(
      p.name.endswith("dense_out") for p in symmetric)
  quantized.calibrate({k: np.ones([2, tiny_models.SEQ_LENGTH], np.int32)
                       for k in ("input_ids", "input_mask", "segment_ids")})
  for low, high in (p.range() for p in symmetric):
    assert low == pytest.approx(-high * 128 / 127) and high > 0
  with pytest.raises(qat.QatError, match="int8 recipe 'fast'"):
    qat.QuantizationAware(model, "fast")


def test_nonorms_are_rounded_in_both_recipes():
  from tfmodels.checkpoints.model_dir import Head, build_model
  from tfmodels.configs import load_config
  config = load_config("tiny_mobilebert_tiny").replace(vocab_size=50)
  features = {k: tf.ones([2, 8], tf.int32)
              for k in ("input_ids", "input_mask", "segment_ids")}
  for recipe in ("xnnpack", "standard"):
    model = build_model(config, Head("classifier", num_classes=2))
    model(features)
    nonorms = [l for l in model.submodules if type(l).__name__ == "NoNorm"]
    quantized = qat.QuantizationAware(model, recipe)
    names = [p.name.split("_", 1)[1] for p in quantized.activations]
    # A NoNorm is an int8 MUL + ADD in both recipes; the model has no
    # LayerNorm, so there are no statistics to round.
    assert names.count("norm_in") == names.count("norm_out") == len(nonorms)
    assert nonorms and "norm_variance" not in names
    assert names.count("masked_scores") == (
        config.num_hidden_layers if recipe == "standard" else 0)


def test_rounded_kernel_is_on_the_per_channel_int8_grid():
  w = tf.constant(np.random.default_rng(0).normal(size=(6, 4)), tf.float32)
  q = qat.rounded_kernel(w).numpy()
  scale = np.abs(w.numpy()).max(0) / 127
  steps = q / scale
  np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)
  assert np.abs(q - w.numpy()).max() <= scale.max() / 2 + 1e-6
  with tf.GradientTape() as tape:
    tape.watch(w)
    loss = tf.reduce_sum(qat.rounded_kernel(w) * 3.0)
  np.testing.assert_allclose(tape.gradient(loss, w), 3.0)  # straight through
  table = qat.rounded_table(w).numpy()
  steps = table / (np.abs(w.numpy()).max() / 127)  # one scale per table
  np.testing.assert_allclose(steps, np.round(steps), atol=1e-3)
  p = qat.quantized_probabilities(tf.constant([0.0, 0.3, 0.999])).numpy()
  np.testing.assert_allclose(p * 256, np.round(p * 256), atol=1e-3)
  assert p[2] <= 255 / 256


def _op_ranges(data, op_name):
  """[(min, max)] of every `op_name` input and output of the file."""
  from ai_edge_litert.interpreter import Interpreter
  interpreter = Interpreter(model_content=data)
  tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
  ranges = []
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access
    if op["op_name"] == op_name:
      for index in (op["inputs"][0], op["outputs"][0]):
        scale, zero = tensors[index]["quantization"]
        ranges.append((scale * (-128 - zero), scale * (127 - zero), scale))
  return ranges


def test_int8_file_uses_the_learned_ranges_and_matches_fake_quant(trained):
  quantized, _, _, task, float_model = trained
  # Widen every range by half, so the file's ranges can only be these and
  # not what the converter's own calibration would find.
  for point in quantized.activations:
    for name in ("min_var", "max_var"):
      point.variables[name].assign(1.5 * point.variables[name])
  # The matmuls' inputs and outputs (before an activation), and the
  # softmax inputs (the masked scores).
  learned = np.concatenate([quantized.ranges("dense_in"),
                            quantized.ranges("dense_matmul")], 1)
  scores = quantized.ranges("masked_scores")
  features = task.features("dev")
  data = conversion.convert_model(
      quantized, "classifier", tiny_models.SEQ_LENGTH, ["int8"],
      representative.calibration_dataset(features, 16), fold_nonorm=False,
      int8_recipe="standard").files["int8"][0]
  ranges = _op_ranges(data, "FULLY_CONNECTED")
  assert len(ranges) == 28
  softmax = _op_ranges(data, "SOFTMAX")
  for wanted, found in ((learned, ranges), (scores, softmax)):
    for low, high in wanted.T:
      # FakeQuant nudges a range by under one step to put 0 on the grid.
      step = (high - low) / 255
      assert any(abs(lo - low) <= 1.01 * step and abs(hi - high) <= 1.01 *
                 step for lo, hi, _ in found), (low, high)
  inputs = validate.contract_inputs(features, slice(0, 32))
  features_in = export.features_of({k: tf.constant(v)
                                    for k, v in inputs.items()})

  def probabilities(model):
    return export.contract_outputs("classifier", model(features_in))[
        "probability"].numpy()

  out = runtime.LiteRTModel(data, 2).run_batch(inputs)["probability"]
  fake = probabilities(quantized)
  # Close on average; the int8 file also rounds a few tensors QAT leaves
  # float (LayerNorm's centred input, the gelu), so single examples move
  # more.
  difference = np.abs(out - fake).mean()
  assert difference < 0.03, difference
  assert (out.argmax(-1) == fake.argmax(-1)).mean() >= 0.9
  # The fake quantization is really on: the QAT model differs from float.
  assert np.abs(fake - probabilities(float_model)).max() > 1e-4


def test_convert_tflite_qat_steps(tmp_path_factory, tmp_path):
  base = tmp_path_factory.getbasetemp()
  model_dir = tiny_models.trained_classifier(base, "tiny_bert", 80,
                                             "bert_classifier")
  out = tmp_path / "out"
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir",
      tiny_models.spam_data(base), "--output_dir", out, "--name", "spam",
      "--modes", "float32,int8", "--max_seq_length", tiny_models.SEQ_LENGTH,
      "--vocab_file", tiny_models.VOCAB, "--num_calibration_samples", 32,
      "--qat_steps", 20, "--qat_learning_rate", "1e-4",
      "--int8_recipe", "standard", "--max_metric_drop", 10)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "spam_report.json").read_text())
  facts = report["qat"]
  assert facts["steps"] == 20 and facts["quantized_tensors"] == 58
  assert facts["loss_after"] < facts["loss_before"]
  assert 0 <= facts["headline"] <= 100
  # float32 comes from the model as it is, int8 from the QAT model.
  assert report["modes"]["float32"]["difference"]["max_abs"] < 1e-4
  assert report["modes"]["int8"]["metric"]["drop"] <= 10
  assert "FULLY_CONNECTED" not in report["modes"]["int8"]["float_ops"]
  markdown = (out / "spam_report.md").read_text()
  assert "## Quantization-aware training" in markdown
  assert (out / "spam_int8.tflite").exists()


def test_qat_report_row_and_markdown():
  from experiments.papers import qat_report

  def report(points, **extra):
    return {"task": "spam", "eval_split": "dev", "seq_length": 128,
            "keras": {"metric": {"name": "accuracy", "points": 96.5}},
            "modes": {"float32": {"metric": {"points": 96.5}},
                      "int8": {"metric": {"points": points},
                               "float_ops": {"CAST": 1}}}, **extra}
  facts = {"headline": 97.0, "steps": 200, "batch_size": 16,
           "learning_rate": 1e-5, "loss_before": 0.2, "loss_after": 0.1,
           "range_shift": 0.01, "quantized_tensors": 76}
  r = qat_report.row(report(95.0), report(96.25, qat=facts), "m",
                     "standard", "python -m experiments.papers.qat_report x",
                     {"ptq": 1, "qat": 2})
  assert (r["float_metric"], r["ptq_metric"], r["qat_metric"]) == (
      96.5, 95.0, 96.25)
  assert r["ptq_drop"] == pytest.approx(1.5)
  assert r["qat_drop"] == pytest.approx(0.25)
  text = qat_report.markdown([r])
  assert ("| m | spam (dev) | standard | accuracy | 96.50 | 95.00 | -1.50 | "
          "96.25 | -0.25 | 97.00 | 200 | 0.2 -> 0.1 |") in text
  assert "`python -m experiments.papers.qat_report x`" in text
