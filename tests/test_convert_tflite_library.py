"""The conversion library piece by piece: calibration data, Flex ops, the
LiteRT probe, flatbuffer rewriting, XNNPACK coverage, the report's
thresholds, staged output, the generated metadata schema and the registry
of quantization modes."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from converters import (contract, export, quantize, representative, runtime,
                        tflite_file, validate)
from fixtures.converters import tiny_models

L = 16


@pytest.fixture(scope="module")
def tokenizer():
  from tfmodels.tokenization import WordPieceTokenizer
  return WordPieceTokenizer(tiny_models.VOCAB)


@pytest.fixture(scope="module")
def bert_saved_model(tmp_path_factory):
  """tiny_bert (LayerNorm + gelu) QA model exported at [1, 16]."""
  from tfmodels.checkpoints.model_dir import Head, build_model
  from tfmodels.configs import load_config
  config = load_config("tiny_bert").replace(vocab_size=4818)
  model = build_model(config, Head("span"))
  path = str(tmp_path_factory.mktemp("bert") / "saved_model")
  export.export_saved_model(model, "span", L, path)
  return model, path


def _inputs(n=4, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, 4818, [n, L]).astype(np.int32)
  mask = np.ones([n, L], np.int32)
  mask[:, 10:] = 0
  return {"ids": ids * mask, "mask": mask,
          "segment_ids": np.zeros([n, L], np.int32)}


@pytest.fixture(scope="module")
def float32_model(bert_saved_model):
  data = quantize.convert(bert_saved_model[1], "float32")
  return tflite_file.rewrite(
      data, tensor_names=tflite_file.signature_tensor_names(data))


def test_representative_files_in_each_format(tokenizer, tmp_path):
  squad = representative.read_features(
      os.path.join(tiny_models.DATA, "wordnet_qa", "dev.json.gz"),
      tokenizer, L)
  assert squad["input_ids"].shape[1] == L and len(squad["input_ids"]) >= 1000
  assert (squad["input_ids"][:, 0] == tokenizer.cls_id).all()
  assert squad["segment_ids"].max() == 1  # question, then passage
  spam = representative.read_features(
      os.path.join(tiny_models.DATA, "spam", "dev.tsv.gz"), tokenizer, L,
      task_name="spam")
  assert len(spam["input_ids"]) == 584 and spam["segment_ids"].max() == 0
  text = tmp_path / "text.txt"
  text.write_text("where is it?\tit is here.\n\n\na lone sentence\n")
  rows = representative.read_features(str(text), tokenizer, L)
  assert len(rows["input_ids"]) == 2
  assert rows["segment_ids"][0].max() == 1 and rows["segment_ids"][1].max() == 0
  assert tokenizer.convert_ids_to_tokens(
      rows["input_ids"][1][rows["input_mask"][1] == 1].tolist()) == [
          "[CLS]", *tokenizer.tokenize("a lone sentence"), "[SEP]"]
  with pytest.raises(representative.RepresentativeDataError,
                     match="not a GLUE task"):
    representative.read_features(
        os.path.join(tiny_models.DATA, "spam", "dev.tsv.gz"), tokenizer, L,
        task_name="squad")


def test_calibration_dataset_yields_named_int32_examples(tokenizer):
  features = {k: np.arange(10 * L, dtype=np.int64).reshape(10, L) + i
              for i, k in enumerate(("input_ids", "input_mask",
                                     "segment_ids"))}
  first = list(representative.calibration_dataset(features, 4)())
  again = list(representative.calibration_dataset(features, 4)())
  assert len(first) == 4
  for a, b in zip(first, again):
    assert sorted(a) == ["ids", "mask", "segment_ids"]
    assert all(v.dtype == np.int32 and v.shape == (1, L) for v in a.values())
    np.testing.assert_array_equal(a["ids"], b["ids"])
    np.testing.assert_array_equal(a["mask"], a["ids"] + 1)  # rows aligned
  assert len(list(representative.calibration_dataset(features, 50)())) == 10


def test_float32_contract_and_rename(bert_saved_model, float32_model):
  model, _ = bert_saved_model
  inputs, outputs = tflite_file.io_tensor_names(float32_model)
  assert sorted(inputs) == ["ids", "mask", "segment_ids"]
  assert sorted(outputs) == ["end_logits", "start_logits"]
  facts = contract.check(float32_model, {"start_logits": (1, L),
                                         "end_logits": (1, L)}, L)
  assert facts["input_order"] == inputs and facts["select_tf_ops"] == []
  with pytest.raises(contract.ContractError, match="expected int32"):
    contract.check(float32_model, {"start_logits": (1, L),
                                   "end_logits": (1, L)}, L + 1)
  with pytest.raises(contract.ContractError, match="outputs"):
    contract.check(float32_model, {"probability": (1, 2)}, L)
  feed = _inputs()
  keras = export.contract_outputs("span", model(export.features_of(
      {k: tf.constant(v) for k, v in feed.items()})))
  lite = runtime.LiteRTModel(float32_model).run_batch(feed)
  diff = validate.differences({k: v.numpy() for k, v in keras.items()}, lite)
  assert diff["max_abs"] < 1e-4 and set(diff["outputs"]) == set(outputs)


def test_rewrite_adds_metadata_and_keeps_the_graph(float32_model):
  rewritten = tflite_file.rewrite(float32_model,
                                  metadata={"our_entry": b"\x01\x02\x03"})
  assert tflite_file.metadata_buffers(rewritten)["our_entry"] == (
      b"\x01\x02\x03")
  assert "min_runtime_version" in tflite_file.metadata_buffers(rewritten)
  assert tflite_file.op_histogram(rewritten) == tflite_file.op_histogram(
      float32_model)
  feed = {k: v[:1] for k, v in _inputs().items()}
  np.testing.assert_array_equal(
      runtime.LiteRTModel(rewritten).run(**feed)["start_logits"],
      runtime.LiteRTModel(float32_model).run(**feed)["start_logits"])
  with pytest.raises(tflite_file.TFLiteFileError):
    tflite_file.read_model(b"not a model at all")


def test_xnnpack_coverage_accounts_for_every_node(float32_model):
  coverage = runtime.xnnpack_coverage(float32_model)
  ops = tflite_file.op_histogram(float32_model)
  assert coverage["total_nodes"] == sum(ops.values())
  assert coverage["partitions"] >= 1
  assert coverage["delegated_nodes"] + sum(
      coverage["not_delegated"].values()) == coverage["total_nodes"]
  # The embedding lookups stay on the CPU kernels; the matmuls do not.
  assert "GATHER" in coverage["not_delegated"]
  assert "FULLY_CONNECTED" not in coverage["not_delegated"]
  # Validation reads it from the interpreter it runs (no second copy).
  assert runtime.LiteRTModel(float32_model).xnnpack_coverage() == coverage


def test_export_saves_the_signature_and_variables_not_the_keras_model(
    bert_saved_model):
  """Keras' own SavedModel metadata (every layer's call traced) is left
  out; the signature computes what the model does."""
  model, path = bert_saved_model
  loaded = tf.saved_model.load(path)
  assert not hasattr(loaded, "model")
  assert len(loaded.model_variables) == len(model.variables)
  feed = {k: tf.constant(v[:1]) for k, v in _inputs().items()}
  want = export.contract_outputs("span", model(export.features_of(feed),
                                               training=False))
  got = loaded.signatures[contract.SIGNATURE_KEY](**feed)
  for name, value in want.items():
    np.testing.assert_allclose(got[name].numpy(), value.numpy(), atol=1e-5)


def test_int16x8_layernorm_model_is_caught_before_it_runs(bert_saved_model):
  _, path = bert_saved_model
  dataset = representative.calibration_dataset(
      {export.INPUT_FEATURES[k]: v for k, v in _inputs(8).items()}, 8)
  data = quantize.convert(path, "int16x8", dataset)
  # LiteRT 2.3 has no int16 SQUARED_DIFFERENCE (LayerNorm's variance); the
  # probe reports it (or the crash) from a child process.
  assert runtime.probe(data) is not None
  assert runtime.probe(quantize.convert(path, "int8", dataset)) is None
  with pytest.raises(quantize.ConversionError,
                     match=r"^int16x8: op \w+ cannot be quantized "
                           r"\(--strict_int8\)$"):
    quantize.convert(path, "int16x8", dataset, strict_int8=True)


@pytest.fixture(scope="module")
def flex_saved_model(tmp_path_factory):
  """A contract-named encoder that needs a select TF op (MatrixInverse)."""
  class Flex(tf.Module):

    @tf.function(input_signature=[
        tf.TensorSpec([1, 4], tf.int32, name=n) for n in (
            "ids", "mask", "segment_ids")])
    def serve(self, ids, mask, segment_ids):
      x = tf.cast(tf.reshape(ids + mask + segment_ids, [1, 2, 2]),
                  tf.float32) + 10 * tf.eye(2)
      return {"sequence_output": tf.linalg.inv(x)}

  module = Flex()
  path = str(tmp_path_factory.mktemp("flex") / "saved_model")
  tf.saved_model.save(module, path, signatures={"serving_default":
                                                module.serve})
  return path


def test_select_tf_ops_are_refused_unless_allowed(flex_saved_model):
  with pytest.raises(quantize.ConversionError) as refused:
    quantize.convert(flex_saved_model, "float32")
  assert str(refused.value) == (
      "float32: ops ['tf.MatrixInverse'] are not TFLite builtins "
      "(try --allow_select_tf_ops)")
  data = quantize.convert(flex_saved_model, "float32",
                          allow_select_tf_ops=True)
  data = tflite_file.rewrite(
      data, tensor_names=tflite_file.signature_tensor_names(data))
  assert tflite_file.select_tf_ops(data) == ["MatrixInverse"]
  expected = {"sequence_output": (1, 2, 2)}
  with pytest.raises(contract.ContractError, match="--allow_select_tf_ops"):
    contract.check(data, expected, 4)
  assert contract.check(data, expected, 4, allow_select_tf_ops=True)[
      "select_tf_ops"] == ["MatrixInverse"]
  result = validate.measure_mode(data, {}, {})
  assert "no Flex delegate" in result["not_runnable"]
  # The host cannot run Flex ops: fine for a conversion, not for a metric.
  assert validate.build_report({}, None, {"float32": result})["passed"]
  assert not validate.build_report({}, {"f1": 50.0, "exact_match": 40.0},
                                   {"float32": result},
                                   max_metric_drop=1.0)["passed"]


def test_report_thresholds_and_headline():
  assert validate.headline({"exact_match": 40.0, "f1": 55.5,
                            "total": 9}) == ("f1", 55.5)
  assert validate.headline({"accuracy": 0.9, "f1": 0.5}) == ("accuracy",
                                                              90.0)
  mode = lambda points, diff: {
      "metrics": {"accuracy": points / 100}, "select_tf_ops": [],
      "difference": {"max_abs": diff, "mean_abs": diff / 2}}
  keras = {"accuracy": 0.80}
  report = validate.build_report(
      {"name": "m"}, keras, {"float32": mode(80, 1e-6), "int8": mode(79, 0.1)},
      max_float_diff=1e-4, max_metric_drop=1.5)
  assert report["passed"] and report["modes"]["int8"]["metric"]["drop"] == (
      pytest.approx(1.0))
  report = validate.build_report(
      {"name": "m"}, keras, {"float32": mode(80, 1e-3), "int8": mode(77, 0.1)},
      max_float_diff=1e-4, max_metric_drop=1.5)
  assert [f.split(":")[0] for f in report["failures"]] == ["float32", "int8"]
  assert "3.00 points below Keras" in report["failures"][1]
  for key in ("size_bytes", "ops", "float_ops"):
    for m in report["modes"].values():
      m.setdefault(key, {} if key != "size_bytes" else 1000)
  markdown = validate.markdown(report)
  assert "| int8 | 0.00 | accuracy 77.00 | +3.00 |" in markdown
  assert "- FAILED: int8: accuracy 77.00" in markdown


def test_regression_head_exports_a_score():
  outputs = export.contract_outputs("classifier",
                                    {"logits": tf.constant([[0.25]])})
  assert list(outputs) == ["score"]
  probability = export.contract_outputs(
      "classifier", {"logits": tf.constant([[0.0, np.log(3.0)]])})
  np.testing.assert_allclose(probability["probability"], [[0.25, 0.75]],
                             rtol=1e-6)


@pytest.mark.skipif(shutil.which("flatc") is None, reason="needs flatc")
def test_generated_schema_module_is_flatc_output(tmp_path):
  schema_dir = os.path.join(tiny_models.REPO, "converters", "schema")
  subprocess.run(["flatc", "--python", "--gen-object-api", "--gen-onefile",
                  "-o", str(tmp_path),
                  os.path.join(schema_dir, "metadata_schema.fbs")],
                 check=True, capture_output=True)
  with open(os.path.join(schema_dir, "metadata_schema_generated.py")) as f:
    assert (tmp_path / "metadata_schema_generated.py").read_text() == f.read()


def test_command_on_a_contract_named_saved_model_with_flex_ops(
    flex_saved_model, tmp_path):
  text = tmp_path / "calibration.txt"
  text.write_text("what is it\tit is a test\nhello there\n")
  args = ["--saved_model", flex_saved_model, "--representative_data", text,
          "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 4,
          "--modes", "float32", "--name", "flex"]
  refused = tiny_models.run_converter(*args, "--output_dir", tmp_path / "a")
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1] == (
      "error: float32: ops ['tf.MatrixInverse'] are not TFLite builtins "
      "(try --allow_select_tf_ops)")
  assert not (tmp_path / "a").exists()
  allowed = tiny_models.run_converter(*args, "--allow_select_tf_ops",
                                      "--output_dir", tmp_path / "b")
  assert allowed.returncode == 0, allowed.stderr[-2000:]
  card = json.loads((tmp_path / "b" / "flex_float32.model_card.json")
                    .read_text())
  assert card["select_tf_ops"] == ["MatrixInverse"]
  assert card["outputs"] == {"sequence_output": [[1, 2, 2], "float32"]}
  report = json.loads((tmp_path / "b" / "flex_report.json").read_text())
  assert report["head"] == "encoder" and report["passed"]
  assert "no Flex delegate" in report["modes"]["float32"]["not_runnable"]


def test_one_list_of_modes_serves_every_command():
  names = quantize.mode_names()
  assert names == ("float32", "float16", "dynamic", "int8", "int16x8",
                   "selective")
  assert quantize.mode_labels() == names + ("int8_standard",)
  assert quantize.parse_mode_label("int8") == ("int8", "xnnpack")
  assert quantize.parse_mode_label("int8_standard") == ("int8", "standard")
  assert quantize.parse_mode_label("dynamic") == ("dynamic", None)
  for bad in ("int4", "float32_standard", "int8_fast"):
    with pytest.raises(ValueError, match="unknown mode"):
      quantize.parse_mode_label(bad)
  assert [m for m in names if quantize.calibrated(m)] == [
      "int8", "int16x8", "selective"]
  # `all` is every mode but the one chosen by a search on dev data.
  assert [m.name for m in quantize.MODES if m.searched] == ["selective"]
  assert all(set(m.int8_recipes) <= set(quantize.INT8_RECIPES)
             for m in quantize.MODES)
  from experiments.demo.steps import DEMO_MODES
  assert set(DEMO_MODES) <= set(names)
  from experiments.bench.latency_report import timed_modes
  assert timed_modes() == ("float32", "dynamic", "int8", "int8_standard")


# A mode we do not ship: full integer, the converter's own output only (no
# xnnpack recipe, what an NPU takes), timed by latency comparisons.
NPU_INT8 = quantize.QuantizationMode(
    name="int8_npu", optimize=True, calibrated=True,
    strict_ops=("TFLITE_BUILTINS_INT8",), int8_recipes=("standard",),
    timed=True)

# convert_tflite's checks on a registry with one more mode, run in a child:
# the command's absl flags clash with other commands' in this process.
_PLAN_WITH_ANOTHER_MODE = r"""
import json, sys
from converters import convert_tflite, quantize
from tfmodels.command_options import from_flags
from tfmodels.staging import OutputFiles
FLAGS, ours = convert_tflite.FLAGS, quantize.MODES
for extra, args in json.loads(sys.argv[1]):
  quantize.MODES = ours + (quantize.QuantizationMode(**{
      k: tuple(v) if isinstance(v, list) else v for k, v in extra.items()}),)
  FLAGS.unparse_flags()
  FLAGS(["convert_tflite", *args])
  out = OutputFiles(FLAGS.output_dir)
  try:
    p = convert_tflite.plan(from_flags(convert_tflite.ConvertOptions), out)
    print(json.dumps({"calibrated": p.integer_modes, "qat": p.qat_modes}))
  except ValueError as e:
    print(json.dumps({"error": str(e)}))
  out.discard()
"""


def test_a_new_calibrated_mode_is_one_registry_entry(
    bert_saved_model, float32_model, monkeypatch, tmp_path):
  """Issue 38: adding a mode is one QuantizationMode in quantize.MODES. The
  command's --modes check, its calibration and --qat_steps rules, the
  conversion and the latency report all follow that entry."""
  import dataclasses
  from converters import conversion
  from experiments.bench import latency_report
  from tfmodels.configs import load_config
  model_dir = tmp_path / "model"  # what plan reads; it loads no weights
  model_dir.mkdir()
  (model_dir / "config.json").write_text(
      load_config("tiny_bert").replace(vocab_size=4818).to_json())
  (model_dir / "head.json").write_text('{"kind": "span"}')
  (model_dir / "ckpt-1.index").write_bytes(b"")
  text = tmp_path / "calibration.txt"
  text.write_text("what is it\tit is a test\n")
  common = ["--model_dir", str(model_dir), "--output_dir",
            str(tmp_path / "out"), "--vocab_file", tiny_models.VOCAB,
            "--max_seq_length", str(L)]
  qat = common + ["--modes", "int8,int8_npu", "--qat_steps", "5", "--task",
                  "spam", "--data_dir", os.path.join(tiny_models.DATA,
                                                     "spam")]
  trained = dataclasses.replace(NPU_INT8, qat=True)
  cases = [(NPU_INT8, common + ["--modes", "int8_npu"]),
           (NPU_INT8, common + ["--modes", "float32,int8_npu",
                                "--representative_data", str(text)]),
           (NPU_INT8, common + ["--modes", "all", "--representative_data",
                                str(text)]),
           (NPU_INT8, qat), (trained, qat)]
  result = subprocess.run(
      [sys.executable, "-c", _PLAN_WITH_ANOTHER_MODE, json.dumps(
          [(dataclasses.asdict(m), args) for m, args in cases])],
      capture_output=True, text=True, env=tiny_models.env(),
      cwd=tiny_models.REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  assert [json.loads(line) for line in result.stdout.splitlines()] == [
      {"error": "--modes int8_npu need calibration text: "
                "--representative_data or --data_dir"},
      {"calibrated": ["int8_npu"], "qat": []},
      {"calibrated": ["int8", "int16x8", "int8_npu"], "qat": []},
      {"error": "--qat_steps trains for int8: --modes must include int8 "
                "and not int16x8 or selective or int8_npu"},
      {"calibrated": ["int8", "int8_npu"], "qat": ["int8", "int8_npu"]}]

  monkeypatch.setattr(quantize, "MODES", quantize.MODES + (NPU_INT8,))
  assert quantize.mode_labels()[-2:] == ("int8_npu", "int8_standard")
  assert quantize.parse_mode_label("int8_npu") == ("int8_npu", "standard")
  model, path = bert_saved_model
  with pytest.raises(ValueError, match="needs a representative dataset"):
    quantize.make_converter(path, "int8_npu")
  dataset = representative.calibration_dataset(
      {export.INPUT_FEATURES[k]: v for k, v in _inputs(8).items()}, 8)
  data, facts = conversion.convert_model(
      model, "span", L, ["int8_npu"], dataset).files["int8_npu"]
  assert facts == {}  # its one recipe, `standard`, whatever int8_recipe says
  assert len(data) < len(float32_model) / 2  # int8 weights
  assert latency_report.timed_modes()[-2:] == ("int8_npu", "int8_standard")
  rows = [dict(model="mobilebert", variant="nonorm_relu", mode=mode,
               threads=1, target="host", median_ms=2.0, p5_ms=1.9,
               p95_ms=2.1) for mode in ("int8_npu", "int16x8")]
  assert latency_report.plot(rows, str(tmp_path / "bars.png")) == 1


def test_matmul_xnnpack_cannot_create_stays_float(tmp_path):
  """A matmul whose requantization scale (input x weight / output) is
  >= 256 makes XNNPACK fail the whole runtime at prepare instead of
  refusing the node; the xnnpack recipe keeps such a matmul float."""
  from ai_edge_litert.interpreter import Interpreter
  from converters import fast_int8

  class Cancelling(tf.Module):
    """x (range +-1000) times [1, -1]: the output range is tiny."""

    @tf.function(input_signature=[tf.TensorSpec([1, 2], tf.float32,
                                                name="x")])
    def serve(self, x):
      return {"y": tf.tanh(tf.matmul(x, tf.constant([[1.0], [-1.0]])))}

  module, path = Cancelling(), str(tmp_path / "saved_model")
  tf.saved_model.save(module, path, signatures={"serving_default":
                                                module.serve})

  def dataset():
    for value in np.linspace(-1000, 1000, 16):
      yield {"x": np.array([[value, value + 1e-3]], np.float32)}
  calibrated = fast_int8.symmetric_matmul_operands(fast_int8.calibrate(
      quantize.make_converter(path, "int8", dataset)))[0]
  plain = fast_int8.quantize_calibrated(calibrated)
  assert list(fast_int8.out_of_range_matmuls(plain).values()) == [
      "FULLY_CONNECTED"]
  with pytest.raises(RuntimeError, match="XNNPACK"):
    Interpreter(model_content=plain).allocate_tensors()
  data, facts = fast_int8.convert(quantize.make_converter(path, "int8",
                                                          dataset))
  assert facts["float_ops"].get("FULLY_CONNECTED") == 1
  assert fast_int8.out_of_range_matmuls(data) == {}
  interpreter = Interpreter(model_content=data)
  interpreter.allocate_tensors()
