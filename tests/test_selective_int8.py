"""converters/selective_int8.py: the search keeps the fewest ranked nodes in
float that meet the bound (doubling, then bisection, on a scripted metric
curve), stops at full int8 when it already meets it, keeps every node when
nothing does; the ranking against the calibrated float model, and
`convert_tflite --modes selective` end to end on a fine-tuned tiny QA model
(candidates scored, timed, the fastest in the bound kept; refused without
--data_dir)."""

import json

import numpy as np
import pytest

from converters import fast_int8, selective_int8
from fixtures.converters import tiny_models

FLOAT = 80.0


def _scripted(monkeypatch, losses):
  """Candidates that are their float-node count; `losses[k]` the points
  k nodes in float lose; the ranking, 10 nodes with falling errors."""
  ranked = [(f"node_{i}", "FULLY_CONNECTED", 1.0 - i / 10)
            for i in range(10)]
  calls = []
  monkeypatch.setattr(selective_int8, "rank_nodes",
                      lambda *args: calls.append("ranked") or ranked)
  monkeypatch.setattr(fast_int8, "from_calibrated",
                      lambda calibrated, keep_float=(), dynamic_range=False: (
                          str(len(keep_float)).encode(), {}))
  tried = []

  def score(data):
    tried.append(int(data))
    return FLOAT - losses[int(data)]

  return tried, calls, score


def _search(score, max_loss=1.0):
  return selective_int8.search(b"calibrated", b"0", [], score, FLOAT,
                               max_loss, finish=lambda data: data)


def test_the_fewest_nodes_in_float_that_meet_the_bound(monkeypatch):
  losses = [5, 4, 3, 2.5, 1.5, 1.2, 0.9, 0.8, 0.7, 0.6, 0.5]
  tried, calls, score = _scripted(monkeypatch, losses)
  chosen = _search(score)
  assert tried == [0, 1, 2, 4, 8, 6, 5]  # doubling, then bisection
  assert chosen.data == b"6" and chosen.facts["met"]
  assert [k["tensor"] for k in chosen.facts["kept_float"]] == [
      f"node_{i}" for i in range(6)]
  assert chosen.facts["metric"] == FLOAT - 0.9
  assert [t["float_nodes"] for t in chosen.facts["tried"]] == tried
  assert calls == ["ranked"]


def test_full_int8_within_the_bound_is_kept_without_ranking(monkeypatch):
  tried, calls, score = _scripted(monkeypatch, [0.4] * 11)
  chosen = _search(score)
  assert tried == [0] and calls == [] and chosen.data == b"0"
  assert chosen.facts["kept_float"] == [] and chosen.facts["met"]


def test_a_bound_nothing_meets_keeps_every_ranked_node_in_float(
    monkeypatch):
  tried, _, score = _scripted(monkeypatch, [3.0] * 11)
  chosen = _search(score, max_loss=0.5)
  assert tried == [0, 1, 2, 4, 8, 10]
  assert chosen.data == b"10" and not chosen.facts["met"]
  assert len(chosen.facts["kept_float"]) == 10


@pytest.fixture(scope="module")
def selective(tmp_path_factory):
  """convert_tflite --modes selective on the tiny QA model, with a
  bound of 0 points (its full int8 file loses nothing: the search keeps
  it; the search itself is tested above, the ranking below)."""
  base = tmp_path_factory.getbasetemp()
  run_dir = tiny_models.finetuned_qa(base)
  out = base / "qa_selective"
  result = tiny_models.run_converter(
      "--model_dir", run_dir, "--data_dir", tiny_models.qa_data(base),
      "--output_dir", out, "--modes", "selective", "--name", "qa",
      "--num_calibration_samples", 8, "--max_int8_loss", 0,
      "--dynamic_length")
  assert result.returncode == 0, result.stderr[-3000:]
  return out, json.loads((out / "qa_report.json").read_text())


def test_convert_tflite_selective_keeps_the_fastest_file_in_the_bound(
    selective):
  """The search's facts, the candidates (full int8, selective, dynamic)
  each scored, sized and timed on the host, the fastest within the bound
  kept and named in the report."""
  from converters import tflite_file
  out, report = selective
  facts = report["modes"]["selective"]["selective"]
  assert set(report["modes"]) == {"selective"}  # dynamic: a candidate only
  assert facts["float_metric"] == pytest.approx(
      report["keras"]["metric"]["points"])
  assert facts["tried"][0]["float_nodes"] == 0
  assert facts["tried"][0]["metric"] == pytest.approx(
      facts["candidates"]["full int8"]["metric"])
  kept = facts["kept_float"]
  if facts["met"]:
    assert facts["metric"] >= facts["float_metric"]
  else:  # nothing met a bound of 0: every ranked node is float
    assert len(kept) == facts["ranked"]
  if not facts["ranked"]:  # the tiny model's full int8 meets the bound
    assert kept == [] and [t["float_nodes"] for t in facts["tried"]] == [0]
  candidates = facts["candidates"]
  assert set(candidates) == {"full int8", "selective", "dynamic"}
  for c in candidates.values():
    assert c["size_mb"] > 0 and c["host_ms"] > 0
    assert c["within_bound"] == (facts["float_metric"] - c["metric"] <= 0)
  meeting = [n for n in ("selective", "dynamic")
             if candidates[n]["within_bound"]]
  if meeting:
    assert facts["kept"] == min(meeting,
                                key=lambda n: candidates[n]["host_ms"])
  assert report["modes"]["selective"]["metric"]["points"] == pytest.approx(
      candidates[facts["kept"]]["metric"])
  data = (out / "qa_selective.tflite").read_bytes()
  md = (out / "qa_report.md").read_text()
  assert f". Kept: {facts['kept']}." in md
  if facts["kept"] == "dynamic":  # int8 weights, float activations
    assert "QUANTIZE" not in tflite_file.op_histogram(data)
    assert "the file is dynamic-range int8" in md
  else:  # the kept matmuls are float in the file
    assert tflite_file.float_op_histogram(data).get(
        "FULLY_CONNECTED", 0) >= sum(k["op"] == "FULLY_CONNECTED"
                                     for k in kept)


@pytest.fixture(scope="module")
def calibrated_tiny(tmp_path_factory):
  """The tiny QA model's calibrated model, its full int8 file as it ships
  and two calibration feeds."""
  from converters import conversion, export, quantize, representative
  from tfmodels.checkpoints.model_dir import load_model_dir
  base = tmp_path_factory.getbasetemp()
  model, config, head = load_model_dir(tiny_models.finetuned_qa(base))
  rng = np.random.default_rng(0)
  ids = rng.integers(5, config.vocab_size, (8, 32)).astype(np.int32)
  features = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids)}
  saved = tmp_path_factory.mktemp("saved") / "saved_model"
  export.export_saved_model(model, head.kind, 32, str(saved), True)
  converter = quantize.make_converter(
      str(saved), "int8", representative.calibration_dataset(features, 8))
  calibrated = fast_int8.calibrate(converter)
  # The file as it ships (its inputs renamed ids, mask, segment_ids).
  full = conversion.finish(fast_int8.from_calibrated(calibrated)[0], 32)
  feeds = selective_int8.calibration_feeds(calibrated, features, count=2)
  return calibrated, full, feeds


def test_ranking_compares_each_int8_node_with_the_float_model(
    calibrated_tiny):
  """rank_nodes on a calibrated model and its int8 file: every ranked node
  is an int8 output of the file, its added error in [0, inf), worst
  first."""
  calibrated, full, feeds = calibrated_tiny
  assert len(feeds) == 2 and all(v.shape == (1, 32) for f in feeds
                                 for v in f.values())
  assert set(feeds[0]) == {"ids", "mask", "segment_ids"}
  ranked = selective_int8.rank_nodes(calibrated, full, feeds)
  assert ranked and all(e >= 0 for _, _, e in ranked)
  assert [e for _, _, e in ranked] == sorted(
      (e for _, _, e in ranked), reverse=True)
  assert "FULLY_CONNECTED" in {op for _, op, _ in ranked}
  # The worst node in float: the file has one float matmul more.
  worst = [n for n, op, _ in ranked if op == "FULLY_CONNECTED"][:1]
  kept, _ = fast_int8.from_calibrated(calibrated, keep_float=worst)
  from converters import tflite_file
  assert tflite_file.float_op_histogram(kept).get("FULLY_CONNECTED") == 1


def _chain(monkeypatch, errors):
  """rank_nodes over a scripted graph: ids -> GATHER -> g (float) ->
  QUANTIZE -> fc1 (int8) -> RESHAPE -> fc2 (int8); each tensor's int8
  value is its float value times (1 + its error in `errors`)."""
  names = ["ids", "g", "g_q", "fc1", "fc1_r", "fc2", "w"]
  tensors = {i: {"name": n} for i, n in enumerate(names)}
  ops = [{"op_name": "GATHER", "inputs": [0], "outputs": [1]},
         {"op_name": "QUANTIZE", "inputs": [1], "outputs": [2]},
         {"op_name": "FULLY_CONNECTED", "inputs": [2, 6], "outputs": [3]},
         {"op_name": "RESHAPE", "inputs": [3], "outputs": [4]},
         {"op_name": "FULLY_CONNECTED", "inputs": [4, 6], "outputs": [5]}]
  for op in ops:
    tensors[op["outputs"][0]]["dtype"] = (
        np.int8 if op["op_name"] in ("QUANTIZE", "FULLY_CONNECTED",
                                     "RESHAPE") else np.float32)
  base = np.ones((1, 4), np.float32)
  floats = {n: base for n in names}
  ints = {n: base * (1 + errors.get(n, 0.0)) for n in names}

  def values(model, feeds):
    return ([floats] if model == b"float" else [ints]), ops, tensors

  monkeypatch.setattr(selective_int8, "_tensor_values", values)
  return selective_int8.rank_nodes(b"float", b"int8", [{}])


def test_ranking_puts_the_node_that_rounds_badly_before_those_after_it(
    monkeypatch):
  """fc1 adds 0.3 to what its QUANTIZE brings from g (0.1, walked back
  through the QUANTIZE to the float tensor); fc2 shows more error of its
  own (0.45) but adds only 0.05 to fc1's (walked back through RESHAPE)."""
  ranked = _chain(monkeypatch, {"g": 0.1, "g_q": 0.12, "fc1": 0.4,
                                "fc1_r": 0.4, "fc2": 0.45})
  assert [(n, op) for n, op, _ in ranked] == [
      ("fc1", "FULLY_CONNECTED"), ("fc2", "FULLY_CONNECTED")]
  assert [e for _, _, e in ranked] == pytest.approx([0.3, 0.05], abs=1e-6)
  # A node that only passes error on adds nothing, never less than 0.
  ranked = _chain(monkeypatch, {"g": 0.1, "fc1": 0.4, "fc1_r": 0.4,
                                "fc2": 0.3})
  assert dict((n, e) for n, _, e in ranked) == pytest.approx(
      {"fc1": 0.3, "fc2": 0.0}, abs=1e-6)


def test_kept_fully_connected_nodes_get_int8_weights_per_output_channel(
    calibrated_tiny):
  """from_calibrated(..., dynamic_range=True): each kept fully connected
  node reads float activations and int8 weights, w = q * scale per output
  channel with scale = max|w| / 127 and q in [-127, 127], quantizing its
  input at run time, in a quarter of the bytes; the node's output stays
  within rounding of the float-kept node's."""
  from ai_edge_litert import schema_py_generated as schema
  from ai_edge_litert.interpreter import Interpreter
  from converters import conversion
  calibrated, full, feeds = calibrated_tiny
  kept = [n for n, op, _ in selective_int8.rank_nodes(
      calibrated, full, feeds) if op == "FULLY_CONNECTED"][:2]
  floats, _ = fast_int8.from_calibrated(calibrated, keep_float=kept)
  hybrid, facts = fast_int8.from_calibrated(calibrated, keep_float=kept,
                                            dynamic_range=True)
  assert facts["dynamic_range_matmuls"] == 2

  def kept_weights(data):
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    graph = model.subgraphs[0]
    found = {}
    for op in graph.operators:
      name = graph.tensors[op.outputs[0]].name.decode()
      if name in kept:
        weight = graph.tensors[op.inputs[1]]
        raw = np.asarray(model.buffers[weight.buffer].data, np.uint8)
        found[name] = (weight, raw, op.builtinOptions)
    return found

  before, after = kept_weights(floats), kept_weights(hybrid)
  assert set(before) == set(after) == set(kept)
  for name in kept:
    weight, raw, options = before[name]
    w = raw.view(np.float32).reshape(weight.shape)
    weight, raw, options = after[name]
    assert weight.type == schema.TensorType.INT8
    assert options.asymmetricQuantizeInputs
    assert raw.size * 4 == w.nbytes  # a quarter of the bytes
    q = raw.view(np.int8).reshape(weight.shape)
    scale = np.asarray(weight.quantization.scale)
    assert weight.quantization.quantizedDimension == 0
    assert list(weight.quantization.zeroPoint) == [0] * len(scale)
    np.testing.assert_allclose(scale, np.abs(w).max(axis=1) / 127,
                               rtol=1e-6)
    assert np.abs(q).max() <= 127
    assert np.all(np.abs(q * scale[:, None] - w) <= scale[:, None] / 2
                  + 1e-7)

  def outputs(data):
    interpreter = Interpreter(model_content=conversion.finish(data, 32),
                              experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
      interpreter.set_tensor(detail["index"], feeds[0][
          selective_int8._contract_name(detail["name"])])
    interpreter.invoke()
    return {t["name"]: interpreter.get_tensor(t["index"])
            for t in interpreter.get_tensor_details() if t["name"] in kept}

  want, got = outputs(floats), outputs(hybrid)
  for name in kept:
    assert got[name].dtype == np.float32
    assert not np.array_equal(got[name], want[name])  # int8 weights used
    assert (np.linalg.norm(got[name] - want[name])
            <= 0.05 * np.linalg.norm(want[name]))


def test_selective_without_dev_data_is_refused_in_one_line(
    tmp_path, tmp_path_factory):
  run_dir = tiny_models.finetuned_qa(tmp_path_factory.getbasetemp())
  text = tmp_path / "text.txt"
  text.write_text("some calibration text\n")
  result = tiny_models.run_converter(
      "--model_dir", run_dir, "--representative_data", text,
      "--output_dir", tmp_path / "out", "--modes", "selective")
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --modes selective needs --data_dir: it takes nodes out of "
      "full int8 until the dev metric is within --max_int8_loss")
  assert not (tmp_path / "out").exists()
