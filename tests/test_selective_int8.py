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
                      lambda calibrated, keep_float=(): (
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


def test_ranking_compares_each_int8_node_with_the_float_model(
    tmp_path_factory):
  """rank_nodes on a calibrated model and its int8 file: every ranked node
  is an int8 output of the file, its error in [0, inf) against the float
  model's value, worst first."""
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
      "error: --modes selective needs --data_dir: it keeps nodes in float "
      "until the dev metric is within --max_int8_loss")
  assert not (tmp_path / "out").exists()
