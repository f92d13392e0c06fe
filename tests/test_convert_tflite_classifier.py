"""convert_tflite on a tiny classifier (a `save_model_dir` output): every
mode, BertNLClassifier metadata with labels, the SavedModel input, and a
--max_metric_drop failure that leaves no model behind."""

import io
import json
import os
import zipfile

import numpy as np
import pytest

from fixtures.converters import tiny_models

MODES = ["float32", "float16", "dynamic", "int8", "int16x8"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  base = tmp_path_factory.getbasetemp()
  return tiny_models.trained_classifier(base), tiny_models.spam_data(base)


@pytest.fixture(scope="module")
def converted(classifier, tmp_path_factory):
  model_dir, data = classifier
  out = tmp_path_factory.mktemp("spam_converted")
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 64,
      "--output_dir", out, "--modes", ",".join(MODES), "--name", "spam",
      "--representative_data", os.path.join(data, "train.tsv"),
      "--num_calibration_samples", 16, "--num_compare", 16)
  assert result.returncode == 0, result.stderr[-3000:]
  return out, json.loads((out / "spam_report.json").read_text())


def test_every_mode_converts_and_reports_accuracy(converted):
  out, report = converted
  assert report["passed"] and report["head"] == "classifier"
  assert report["representative_data"].endswith("train.tsv")
  keras = report["keras"]["metric"]
  assert keras["name"] == "accuracy" and keras["points"] > 60  # trained
  for mode in MODES:
    r = report["modes"][mode]
    assert (out / f"spam_{mode}.tflite").exists()
    assert r["contract"]["outputs"] == {"probability": [[1, 2], "float32"]}
    assert r["metric"]["name"] == "accuracy"
    assert set(r["metrics"]) == {"accuracy", "f1"}
    assert r["metric"]["drop"] == pytest.approx(keras["points"] -
                                                r["metric"]["points"])
  float32 = report["modes"]["float32"]
  assert float32["difference"]["max_abs"] <= 1e-4
  assert float32["metric"]["points"] == pytest.approx(keras["points"])


def test_classifier_metadata_names_tensors_and_labels(converted):
  from ai_edge_litert import schema_py_generated as tfl
  from converters.schema import metadata_schema_generated as meta
  out, _ = converted
  data = (out / "spam_int8.tflite").read_bytes()
  model = tfl.Model.GetRootAs(data, 0)
  entry = next(model.Metadata(i) for i in range(model.MetadataLength())
               if model.Metadata(i).Name() == b"TFLITE_METADATA")
  metadata = meta.ModelMetadata.GetRootAs(
      model.Buffers(entry.Buffer()).DataAsNumpy().tobytes(), 0)
  assert metadata.Name() == b"BertNLClassifier"
  graph = metadata.SubgraphMetadata(0)
  output = graph.OutputTensorMetadata(0)
  assert output.Name() == b"probability"
  labels = output.AssociatedFiles(0)
  assert labels.Name() == b"labels.txt"
  assert labels.Type() == meta.AssociatedFileType.TENSOR_AXIS_LABELS
  archive = zipfile.ZipFile(io.BytesIO(data))
  assert archive.read("labels.txt") == b"0\n1\n"  # spam's labels, in order
  assert sorted(archive.namelist()) == ["labels.txt", "vocab.txt"]


def test_saved_model_input_converts_to_the_same_model(classifier, converted,
                                                      tmp_path):
  from ai_edge_litert.interpreter import Interpreter
  model_dir, data = classifier
  out, _ = converted
  result = tiny_models.run_converter(
      "--saved_model", os.path.join(model_dir, "saved_model"),
      "--task", "spam", "--data_dir", data, "--vocab_file",
      tiny_models.VOCAB, "--max_seq_length", 64, "--output_dir", tmp_path,
      "--name", "from_saved_model", "--num_compare", 8)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((tmp_path / "from_saved_model_report.json").read_text())
  assert report["head"] == "classifier" and report["passed"]
  assert report["modes"]["float32"]["difference"]["max_abs"] <= 1e-4
  assert json.loads((tmp_path / "from_saved_model_float32.model_card.json")
                    .read_text())["config"] is None
  rng = np.random.default_rng(0)
  feed = {"ids": rng.integers(5, 4000, [1, 64]).astype(np.int32),
          "mask": np.ones([1, 64], np.int32),
          "segment_ids": np.zeros([1, 64], np.int32)}
  outputs = [Interpreter(model_path=str(path)).get_signature_runner()(**feed)
             for path in (tmp_path / "from_saved_model_float32.tflite",
                          out / "spam_float32.tflite")]
  np.testing.assert_allclose(outputs[0]["probability"],
                             outputs[1]["probability"], atol=1e-6)


def test_metric_drop_beyond_limit_fails_and_leaves_no_model(classifier,
                                                            tmp_path):
  model_dir, data = classifier
  # A negative limit demands the TFLite model beat Keras: float32 ties it,
  # so the run must fail, whatever accuracy the model has.
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 64,
      "--output_dir", tmp_path, "--name", "spam", "--num_compare", 4,
      "--max_metric_drop=-1")
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: validation failed: float32: accuracy"), last
  assert "Traceback" not in result.stderr
  assert sorted(os.listdir(tmp_path)) == ["spam_report.json", "spam_report.md"]
  report = json.loads((tmp_path / "spam_report.json").read_text())
  assert not report["passed"]
  assert report["modes"]["float32"]["metric"]["drop"] == pytest.approx(0)
  markdown = (tmp_path / "spam_report.md").read_text()
  assert "FAILED: float32: accuracy" in markdown
