"""Reports, results files and device facts of android_bench, on synthetic
runs whose numbers are known (no benchmark is run here)."""

import copy
import json
import os

import pytest

from android_bench import device_info, report, results
from android_bench.model_facts import ModelError, find_models


def _cell(model, threads, repeat, median, mean, lo, hi, p5=None, p95=None,
          status="ok", delegate="xnnpack"):
  timings = {"count": 50, "min": lo, "median": median, "mean": mean,
             "max": hi, "std": 100, "first": hi, "p5": p5, "p95": p95}
  return {"model": model, "runner": "benchmark_model", "delegate": delegate,
          "threads": threads, "repeat": repeat, "status": status,
          "error": None if status == "ok" else "boom",
          "timings_us": timings if status == "ok" else None,
          "init_us": 40000, "memory_mb": {"peak": 90.5},
          "delegate_coverage": [{"delegate": "TfLiteXNNPackDelegate",
                                 "replaced_nodes": 10, "total_nodes": 12,
                                 "partitions": 2}]}


def _run(cells, name=None):
  run = results.new_run("adb", {"model": "Pixel 4"}, {}, {}, ["x"], name)
  run["cells"] = cells
  return run


def test_rows_pool_repeats():
  run = _run([
      _cell("a.tflite", 4, 0, 10000, 10500, 9000, 15000, 9500, 13000),
      _cell("a.tflite", 4, 1, 12000, 12400, 11000, 19000, 11500, 14000),
      _cell("a.tflite", 4, 2, 0, 0, 0, 0, status="timeout"),
      _cell("b.tflite", 1, 0, None, 30000, 28000, 33000),
  ])
  rows = report.summarize(run)
  a, b = rows
  assert (a["cells"], a["ok"], a["statuses"]) == (3, 2, ["ok", "timeout"])
  assert a["latency_ms"] == pytest.approx(11.0)  # median of the medians
  assert a["mean_ms"] == pytest.approx(11.45)
  assert (a["min_ms"], a["max_ms"]) == (9.0, 19.0)
  assert (a["low_ms"], a["high_ms"]) == (10.5, 13.5)
  assert a["runs"] == 100 and a["coverage"] == "10/12"
  assert a["init_ms"] == 40.0 and a["peak_mb"] == 90.5
  # No percentiles (old build): the mean, +- std as spread, marked in tables.
  assert b["estimate"] == "mean" and b["latency_ms"] == 30.0
  assert (b["low_ms"], b["high_ms"]) == (29.9, 30.1)
  table = report.markdown_table([run])
  assert "| a.tflite | benchmark_model | xnnpack | 4 | 11 | 10.5..13.5 |" \
      in table
  assert "| b.tflite | benchmark_model | xnnpack | 1 | 30* |" in table
  assert "2/3 ok (timeout)" in table
  assert table.rstrip().endswith("prints no median.")


def test_compare_ratio_per_row(tmp_path):
  old = _run([_cell("a.tflite", 4, 0, 20000, 20000, 1, 2, 1, 2),
              _cell("a.tflite", 1, 0, 60000, 60000, 1, 2, 1, 2),
              _cell("gone.tflite", 4, 0, 5000, 5000, 1, 2, 1, 2)], "old")
  new = _run([_cell("a.tflite", 4, 0, 15000, 15000, 1, 2, 1, 2),
              _cell("a.tflite", 1, 0, 66000, 66000, 1, 2, 1, 2),
              _cell("new.tflite", 4, 0, 7000, 7000, 1, 2, 1, 2)], "new")
  table, pairs = report.compare(old, new)
  ratios = {(p["model"], p["threads"]): p["ratio"] for p in pairs}
  assert ratios == {("a.tflite", 4): pytest.approx(0.75),
                    ("a.tflite", 1): pytest.approx(1.1),
                    ("gone.tflite", 4): None, ("new.tflite", 4): None}
  assert "| a.tflite | benchmark_model | xnnpack | 4 | 20 | 15 | 0.750 |" \
      in table
  assert "| gone.tflite | benchmark_model | xnnpack | 4 | 5 | - | - |" in table
  assert table.startswith("A = old\nB = new\n")
  assert report.plot_ratios(pairs, str(tmp_path / "c.png"), "t") == 2
  assert report.plot_latency([old, new], str(tmp_path / "l.png")) == 6
  for name in ("c.png", "l.png"):
    with open(tmp_path / name, "rb") as f:
      assert f.read(4) == b"\x89PNG"
  assert sorted(os.listdir(tmp_path)) == ["c.png", "l.png"]  # no temp files


def test_results_file_round_trip_and_refusals(tmp_path):
  run = _run([_cell("a.tflite", 4, 0, 1, 1, 1, 1)])
  path = results.save_run(run, str(tmp_path))
  assert os.listdir(tmp_path) == [os.path.basename(path)]
  assert results.load_run(path) == json.loads(json.dumps(run))
  assert results.find_runs([str(tmp_path)]) == [path]
  for change, message in [
      (lambda r: r.update(kind="other"), "not an android_bench run file"),
      (lambda r: r.update(schema_version=9), "schema version 9"),
      (lambda r: r["cells"][0].pop("threads"), "cell 0 has no 'threads'"),
  ]:
    bad = copy.deepcopy(run)
    change(bad)
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad))
    with pytest.raises(results.ResultsError, match=message):
      results.load_run(str(bad_path))


def test_big_cores_and_masks():
  pixel4 = [1785600] * 4 + [2419200] * 3 + [2841600]
  assert device_info.big_cores(pixel4) == [4, 5, 6, 7]
  assert device_info.big_core_mask(pixel4) == "f0"
  assert device_info.big_core_mask([1800000] * 6 + [2200000] * 2) == "c0"
  assert device_info.big_core_mask([2000000] * 4) == "f"  # homogeneous
  assert device_info.big_core_mask([None, 1000, 2000, None]) == "4"
  assert device_info.parse_mask("f0") == [4, 5, 6, 7]
  with pytest.raises(ValueError):
    device_info.parse_mask("0")
  assert device_info.parse_cpu_freqs("cpu0 1000\ncpu2 3000\ncpu1\n") == [
      1000, None, 3000]


def test_device_text_parsers():
  props = device_info.parse_getprop(
      "[ro.product.model]: [Pixel 4]\n[ro.build.version.sdk]: [33]\njunk\n")
  assert props == {"ro.product.model": "Pixel 4",
                   "ro.build.version.sdk": "33"}
  thermal = device_info.parse_thermal(
      "thermal_zone0 cpu-0-0-usr 36500\n"
      "thermal_zone1 battery 29\n"        # already in degrees
      "thermal_zone2 cpu-0-0-usr 41000\n"  # duplicate type
      "thermal_zone3 sensor-x \n"          # unreadable
      "Thermal Status: 2\n")
  assert thermal == {"status": 2, "zones_c": {
      "cpu-0-0-usr": 36.5, "battery": 29.0,
      "cpu-0-0-usr/thermal_zone2": 41.0}, "max_c": 41.0}


def test_find_models(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "a" / "x.tflite").write_bytes(b"1")
  (tmp_path / "a" / "notes.txt").write_text("")
  (tmp_path / "b").mkdir()
  (tmp_path / "b" / "y.tflite").write_bytes(b"2")
  assert find_models([str(tmp_path)]) == [str(tmp_path / "a" / "x.tflite"),
                                          str(tmp_path / "b" / "y.tflite")]
  (tmp_path / "b" / "x.tflite").write_bytes(b"3")
  with pytest.raises(ModelError, match="two models share the file name"):
    find_models([str(tmp_path)])

