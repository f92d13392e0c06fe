"""convert_tflite on a fine-tuned tiny QA model (a real `finetune` run).

Every mode converts and passes the contract, float32 matches Keras, the
report carries each mode's F1, the metadata reads back with a flatbuffers
reader, and LiteRT fed by tensor name (in another order) answers as Keras.
"""

import hashlib
import io
import json
import os
import zipfile

import numpy as np
import pytest

from fixtures.converters import tiny_models

MODES = ["float32", "float16", "dynamic", "int8", "int16x8"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  base = tmp_path_factory.getbasetemp()
  run_dir = tiny_models.finetuned_qa(base)
  out = base / "qa_converted"
  result = tiny_models.run_converter(
      "--model_dir", run_dir, "--data_dir", tiny_models.qa_data(base),
      "--output_dir", out, "--modes", "all", "--name", "qa",
      "--num_calibration_samples", 32, "--max_metric_drop", 50,
      "--dynamic_length")
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "qa_report.json").read_text())
  return run_dir, out, report


def test_every_mode_converts_with_contract_and_metric(converted):
  run_dir, out, report = converted
  assert report["passed"] and report["failures"] == []
  # task.json of the finetune run supplied task, length and vocabulary.
  assert (report["task"], report["seq_length"], report["head"]) == (
      "squad", 64, "span")
  assert report["vocab_file"] == tiny_models.VOCAB
  keras_f1 = report["keras"]["metric"]["points"]
  assert report["keras"]["metric"]["name"] == "f1" and keras_f1 > 2
  for mode in MODES:
    r = report["modes"][mode]
    assert (out / f"qa_{mode}.tflite").stat().st_size == r["size_bytes"]
    assert r["contract"]["inputs"] == {
        n: [[1, 64], "int32"] for n in ("ids", "mask", "segment_ids")}
    assert r["contract"]["outputs"] == {
        n: [[1, 64], "float32"] for n in ("start_logits", "end_logits")}
    assert r["select_tf_ops"] == []
    assert r["metric"]["name"] == "f1"
    assert r["metric"]["drop"] == pytest.approx(
        keras_f1 - r["metric"]["points"])
    assert r["metrics"]["total"] == report["keras"]["metrics"]["total"] == 30
    cover = r["xnnpack"]
    assert 0 <= cover["delegated_nodes"] <= cover["total_nodes"]
    assert sum(cover["not_delegated"].values()) == (
        cover["total_nodes"] - cover["delegated_nodes"])
  # XNNPACK runs float and int8 graphs, not int16 activations.
  # The float graph is one XNNPACK partition; what stays out is the input
  # prelude (the embedding lookups, the mask cast, the length read and the
  # range of positions gathered from the position table) and the head's
  # split of its logits (one UNPACK).
  coverage = {m: report["modes"][m]["xnnpack"] for m in MODES}
  assert coverage["float32"]["partitions"] == 1
  for mode in ("float32", "int8"):
    assert set(coverage[mode]["not_delegated"]) <= {
        "CAST", "GATHER", "STRIDED_SLICE", "SHAPE", "PACK", "UNPACK", "RANGE"
    }, coverage[mode]
  assert coverage["int8"]["delegated_nodes"] > 0
  assert coverage["int16x8"]["delegated_nodes"] == 0
  float32 = report["modes"]["float32"]
  # The tiny MobileBERT's NoNorms fold (all but the last) and stay exact.
  assert report["nonorm_folding"]["kept"] == 1
  assert report["nonorm_folding"]["folded"] > 0
  assert float32["difference"]["max_abs"] <= 1e-4
  assert float32["metric"]["points"] == pytest.approx(keras_f1, abs=1e-9)
  # Every float32 op computes in float but the input length's read and the
  # range of positions. int8 (the default xnnpack recipe) keeps every matmul
  # integer, and the position table too (gathered by position, as the word
  # table is); only islands XNNPACK has no int8 kernel for stay float.
  integer = {k: v - float32["float_ops"].get(k, 0)
             for k, v in float32["ops"].items()}
  assert {k for k, v in integer.items() if v} <= {
      "SHAPE", "PACK", "STRIDED_SLICE", "RANGE"}  # the length read, int32
  int8 = report["modes"]["int8"]
  assert report["int8_recipe"] == "xnnpack"
  assert set(int8["float_ops"]) <= {
      "CAST", "DEQUANTIZE", "QUANTIZE", "SOFTMAX", "MUL", "ADD", "SUB",
      "MEAN", "SQUARED_DIFFERENCE", "RSQRT", "GELU", "STRIDED_SLICE"
  }, int8["float_ops"]
  # The length is dynamic (signature [1, -1], default [1, 64]): every mode
  # is validated at L = 32 too, against Keras at 32.
  from converters import tflite_file
  assert report["dynamic_length"] is True
  for mode in MODES:
    signatures = tflite_file.shape_signatures(
        (out / f"qa_{mode}.tflite").read_bytes())
    assert signatures["ids"] == signatures["start_logits"] == [1, -1]
    assert report["modes"][mode]["shorter_length"]["length"] == 32
  assert float32["shorter_length"]["max_abs"] <= 1e-4
  int8_error = report["modes"]["int8"]["difference"]["mean_abs"]
  assert report["modes"]["int8"]["shorter_length"]["mean_abs"] < (
      2 * int8_error)  # the int8 recipe holds at the shorter length
  assert "- at L = 32 too" in (out / "qa_report.md").read_text()
  # No table stays float32 in the int8 file: the position table, read at
  # any length, is gathered in int8 as the word table is.
  from ai_edge_litert.interpreter import Interpreter
  with open(os.path.join(run_dir, "config.json")) as f:
    positions = json.load(f)["max_position_embeddings"]
  tensors = Interpreter(str(out / "qa_int8.tflite")).get_tensor_details()
  tables = {t["dtype"].__name__ for t in tensors
            if len(t["shape"]) and t["shape"][-2:][0] == positions}
  assert tables == {"int8"}, tables
  sizes = {m: report["modes"][m]["size_bytes"] for m in MODES}
  assert sizes["int8"] < sizes["float16"] < sizes["float32"]
  assert sizes["dynamic"] < sizes["float16"]
  markdown = (out / "qa_report.md").read_text()
  for mode in MODES:
    assert f"| {mode} | " in markdown
  # The float files' GPU-delegate report (issue 41): what the delegate's
  # rules leave to the CPU, with a reason and where it sits in the graph.
  for mode in ("float32", "float16"):
    gpu = report["modes"][mode]["gpu_delegate"]
    assert gpu["rules"] == "LiteRT 1.4.1 GPU delegate"
    assert gpu["dynamic_shapes"] is True
    assert 0 < gpu["gpu_nodes"] <= gpu["total_nodes"]
    assert gpu["total_nodes"] == sum(report["modes"][mode]["ops"].values())
    assert all(r["count"] > 0 and r["reason"] and r["where"]
               for r in gpu["refused"])
    section = markdown.split(f"## {mode}\n")[1].split("\n## ")[0]
    assert "- GPU delegate (LiteRT 1.4.1 GPU delegate rules): " in section
  assert {"op": "SHAPE", "count": 1, "where": "before the GPU graph",
          "reason": "not in the GPU delegate's op list",
          "means": "stays: the CPU runs it first and hands the GPU graph its "
                   "result, without splitting it"} in (
              report["modes"]["float32"]["gpu_delegate"]["refused"])
  assert "gpu_delegate" not in report["modes"]["int8"]
  assert "- NoNorm folding: " in markdown
  assert "- passed" in markdown


def test_model_cards_describe_their_files(converted):
  _, out, report = converted
  for mode in MODES:
    card = json.loads((out / f"qa_{mode}.model_card.json").read_text())
    data = (out / card["file"]).read_bytes()
    assert card["file"] == f"qa_{mode}.tflite"
    assert card["sha256"] == hashlib.sha256(data).hexdigest()
    assert card["size_bytes"] == len(data)
    assert (card["mode"], card["seq_length"], card["head"]) == (mode, 64,
                                                                "span")
    assert os.path.basename(card["source_checkpoint"]) == "ckpt-300"
    assert card["config"]["name"] == "tiny_mobilebert"
    assert card["metric"] == report["modes"][mode]["metric"]
    assert card["task"]["name"] == "squad" and card["created"]


def test_the_qa_apps_readme_says_what_the_file_is(converted, tmp_path,
                                                  tmp_path_factory):
  """experiments.apps.qa_app_check's README.md is written from the file it hands
  the app and the card beside it, not from the demo; a card describing
  another file is not used."""
  import shutil
  import subprocess
  import sys
  from experiments.apps.app_checks import model_facts
  _, out, _ = converted
  data = tiny_models.qa_data(tmp_path_factory.getbasetemp())
  model = out / "qa_int8.tflite"
  app = tmp_path / "app_assets"
  result = subprocess.run(
      [sys.executable, "-m", "experiments.apps.qa_app_check", "--model", str(model),
       "--qa_dir", data, "--questions", "1", "--dev_questions", "0",
       "--output_dir", str(app), "--teacher", "my-org/my-teacher"],
      capture_output=True, text=True, env=tiny_models.env(),
      cwd=tiny_models.REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  readme = (app / "README.md").read_text()
  card = json.loads((out / "qa_int8.model_card.json").read_text())
  for fact in (f"`qa_model.tflite` is `qa_int8.tflite`, copied from\n`{model}`",
               "`vocab.txt`", "(`squad`", f"`{data}`",
               "Sequence length: 64 (", f"`{card['source_checkpoint']}`",
               "(int8, span head)", "Encoder `tiny_mobilebert`",
               f"f1 {card['metric']['points']:.2f} for this file",
               card["sha256"], "Teacher: `my-org/my-teacher`",
               f"-PqaModel={app}/qa_model.tflite"):
    assert fact in readme, fact
  for wrong in ("from the demo", "wordnet_qa", "MobileBERT student"):
    assert wrong not in readme, wrong
  # A card beside a copy of another file: not read as this one's.
  other = tmp_path / "other"
  other.mkdir()
  shutil.copyfile(out / "qa_float32.tflite", other / "qa_int8.tflite")
  shutil.copyfile(out / "qa_int8.model_card.json",
                  other / "qa_int8.model_card.json")
  facts = model_facts(str(other / "qa_int8.tflite"), task="t", length=64,
                      length_words="w", asked="a")
  assert "describes another file" in facts and card["sha256"] not in facts


def _read_metadata(data):
  """(ModelMetadata, subgraph input names, output names, zip) through the
  flatbuffers schema classes only."""
  from ai_edge_litert import schema_py_generated as tfl
  from converters.schema import metadata_schema_generated as meta
  model = tfl.Model.GetRootAs(data, 0)
  entries = {model.Metadata(i).Name(): model.Metadata(i).Buffer()
             for i in range(model.MetadataLength())}
  buffer = model.Buffers(entries[b"TFLITE_METADATA"]).DataAsNumpy().tobytes()
  assert meta.ModelMetadata.ModelMetadataBufferHasIdentifier(buffer, 0)
  graph = model.Subgraphs(0)
  inputs = [graph.Tensors(t).Name().decode() for t in graph.InputsAsNumpy()]
  outputs = [graph.Tensors(t).Name().decode() for t in graph.OutputsAsNumpy()]
  return (meta.ModelMetadata.GetRootAs(buffer, 0), inputs, outputs,
          zipfile.ZipFile(io.BytesIO(data)))


@pytest.mark.parametrize("mode", ["float32", "int8"])
def test_metadata_reads_back_with_flatbuffers(converted, mode):
  from converters.schema import metadata_schema_generated as meta
  _, out, _ = converted
  data = (out / f"qa_{mode}.tflite").read_bytes()
  metadata, inputs, outputs, archive = _read_metadata(data)
  assert metadata.Name() == b"BertQuestionAnswerer"
  assert metadata.MinParserVersion() == b"1.1.0"
  graph = metadata.SubgraphMetadata(0)
  names = lambda get, n: [get(i).Name().decode() for i in range(n)]
  # One TensorMetadata per tensor, in the subgraph's (not declared) order.
  assert names(graph.InputTensorMetadata,
               graph.InputTensorMetadataLength()) == inputs
  assert sorted(inputs) == ["ids", "mask", "segment_ids"]
  assert names(graph.OutputTensorMetadata,
               graph.OutputTensorMetadataLength()) == outputs
  assert sorted(outputs) == ["end_logits", "start_logits"]
  unit = graph.InputProcessUnits(0)
  assert unit.OptionsType() == meta.ProcessUnitOptions.BertTokenizerOptions
  tokenizer = meta.BertTokenizerOptions()
  tokenizer.Init(unit.Options().Bytes, unit.Options().Pos)
  vocab = tokenizer.VocabFile(0)
  assert vocab.Name() == b"vocab.txt"
  assert vocab.Type() == meta.AssociatedFileType.VOCABULARY
  # The associated file is stored uncompressed, as the Task Library needs.
  info = archive.getinfo("vocab.txt")
  assert info.compress_type == zipfile.ZIP_STORED
  with open(tiny_models.VOCAB, "rb") as f:
    assert archive.read("vocab.txt") == f.read()


def test_litert_by_tensor_name_in_another_order_answers_like_keras(converted):
  import tensorflow as tf
  from ai_edge_litert.interpreter import Interpreter
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.data import squad
  from tfmodels.tokenization import WordPieceTokenizer
  run_dir, out, _ = converted
  model, _, _ = load_model_dir(run_dir)
  data = squad.read_squad(os.path.join(tiny_models.qa_data(
      os.path.dirname(out)), "dev.json"))
  arrays, metas = squad.build_features(
      data.examples, WordPieceTokenizer(tiny_models.VOCAB), 64, 32, 16)
  keras = model({k: tf.constant(v) for k, v in arrays.items()})
  keras = {k: keras[k].numpy() for k in ("start_logits", "end_logits")}

  path = str(out / "qa_float32.tflite")
  # Two interpreters: a signature runner holds on to its interpreter, which
  # then refuses raw invoke() calls.
  runner = Interpreter(model_path=path).get_signature_runner(
      "serving_default")
  interpreter = Interpreter(model_path=path)
  interpreter.allocate_tensors()
  by_name = {d["name"]: d for d in interpreter.get_input_details()}
  outputs = {d["name"]: d["index"] for d in interpreter.get_output_details()}
  declared = ["ids", "mask", "segment_ids"]
  ours = {"ids": "input_ids", "mask": "input_mask",
          "segment_ids": "segment_ids"}
  lite = {"start_logits": [], "end_logits": []}
  positional = []
  for row in range(len(arrays["input_ids"])):
    feed = {n: arrays[ours[n]][row:row + 1] for n in declared}
    # Signature runner, keyword arguments in reverse order.
    by_signature = {k: v.copy() for k, v in runner(
        segment_ids=feed["segment_ids"], mask=feed["mask"],
        ids=feed["ids"]).items()}
    # Raw tensors found by name, set in yet another order.
    for name in ("mask", "segment_ids", "ids"):
      interpreter.set_tensor(by_name[name]["index"], feed[name])
    interpreter.invoke()
    for name in lite:
      raw = interpreter.get_tensor(outputs[name]).copy()
      np.testing.assert_array_equal(raw, by_signature[name])
      lite[name].append(raw)
    # The classic bug: feeding by position in the declared order.
    for detail, name in zip(interpreter.get_input_details(), declared):
      interpreter.set_tensor(detail["index"], feed[name])
    interpreter.invoke()
    positional.append(interpreter.get_tensor(outputs["start_logits"]).copy())
  lite = {k: np.concatenate(v) for k, v in lite.items()}
  for name in lite:
    np.testing.assert_allclose(lite[name], keras[name], atol=1e-4)
  answers = lambda o: squad.postprocess(data.examples, metas,
                                        o["start_logits"], o["end_logits"])
  assert answers(lite) == answers(keras)
  order = [d["name"] for d in interpreter.get_input_details()]
  if order != declared:  # the converter reordered them: position is wrong
    assert not np.allclose(np.concatenate(positional), keras["start_logits"],
                           atol=1e-4)


# ------------------------------------------- where a file departs, by layer
def test_a_layer_output_is_its_last_hidden_wide_tensor():
  from converters.layer_errors import layer_tensors
  names = {0: "m/enc/layer_0_attention/x", 1: "m/enc/layer_0_ffn/out;m/y",
           2: "m/enc/layer_0_ffn/norm", 3: "m/enc/layer_1/add_1",
           4: "m/enc/layer_10_ffn/norm", 5: "m/head/logits",
           6: "m/enc/layer_1/reduce", 7: "m/enc/layer_0_ffn/late"}
  widths = {0: 8, 1: 8, 2: 8, 3: 8, 4: 8, 5: 8, 6: 4, 7: 8}
  ops = [[0], [1], [2], [3, 6], [4], [5]]  # 7 is never computed
  assert layer_tensors(ops, names, widths, 2, 8) == {
      0: "m/enc/layer_0_ffn/norm", 1: "m/enc/layer_1/add_1"}


def test_layer_errors_against_a_hand_computation():
  from converters.layer_errors import compare
  flt = {0: np.array([[[1.0, -2.0], [3.0, 9.0]]])}
  int8 = {0: np.array([[[1.5, -2.0], [3.0, 0.0]]])}
  mask = np.array([[1, 0]])  # the second token is padding
  # int8 about zero point 0 at scale 0.01: [-1.28, 1.27]
  row, = compare(flt, int8, {0: (0.01, 0)}, mask)
  assert row["rel_error"] == pytest.approx(0.5 / np.sqrt(5))
  assert row["max_abs"] == pytest.approx(0.5)
  assert row["clipped"] == pytest.approx(0.5)  # -2.0 is outside
  assert row["int8_range"] == pytest.approx([-1.28, 1.27])
  assert row["float_range"] == [-2.0, 1.0]
  row, = compare(flt, int8, {0: (0.0, 0)}, mask)  # a float tensor
  assert row["clipped"] == 0 and row["int8_range"] is None


def test_an_int8_file_departs_from_its_float32_file_layer_by_layer(
    converted, tmp_path_factory):
  from converters.layer_errors import LayerErrorOptions, measure
  run_dir, out, _ = converted
  data = tiny_models.qa_data(tmp_path_factory.getbasetemp())

  def layers(tflite):
    return measure(LayerErrorOptions(
        model_dir=str(run_dir), tflite=str(out / tflite),
        reference=str(out / "qa_float32.tflite"), data_dir=data,
        examples=4))["layers"]

  # The float32 file against itself: nothing departs, nothing is clipped.
  same = layers("qa_float32.tflite")
  assert [r["layer"] for r in same] == [0, 1]  # tiny_mobilebert
  assert all(r["rel_error"] == 0 and r["int8_range"] is None for r in same)
  # int8: every layer departs a little, within its tensors' ranges mostly.
  int8 = layers("qa_int8.tflite")
  assert [r["tensor"] for r in int8] == [r["tensor"] for r in same]
  assert all(1e-3 < r["rel_error"] < 0.5 and r["int8_range"]
             and 0 <= r["clipped"] < 0.1 for r in int8), int8


def test_layer_errors_refuses_files_exported_differently(converted, tmp_path):
  """A float32 file converted alone keeps the NoNorm streams the int8 run
  equalized: the same tensor names, other per-channel scales. The cards
  of one run agree (compared); a reference whose card says otherwise is
  refused in one line naming it."""
  import json
  import shutil
  from converters.layer_errors import check_same_folding
  _, out, _ = converted
  cards = {m: json.loads((out / f"qa_{m}.model_card.json").read_text())
           for m in ("float32", "int8")}
  assert cards["float32"]["nonorm_folding"] == cards["int8"][
      "nonorm_folding"] is not None
  check_same_folding(str(out / "qa_int8.tflite"), str(out / "qa_float32.tflite"))
  alone = tmp_path / "alone_float32.tflite"
  shutil.copy(out / "qa_float32.tflite", alone)
  card = dict(cards["float32"], nonorm_folding={"folded": 0, "kept": 13})
  (tmp_path / "alone_float32.model_card.json").write_text(json.dumps(card))
  with pytest.raises(ValueError, match=(
      rf"^--reference {alone}: its NoNorms were exported as \{{'folded': 0, "
      r"'kept': 13\}, --tflite's as .*convert both in one convert_tflite "
      r"run: --modes float32,int8\)$")):
    check_same_folding(str(out / "qa_int8.tflite"), str(alone))
