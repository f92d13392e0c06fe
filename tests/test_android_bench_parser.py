"""benchmark_model output parsing, on hand-written transcripts of every variant
(tests/fixtures/android_bench/*.txt): plain / `INFO: ` / logcat threadtime and
brief prefixes, with and without percentiles, scientific notation, the old
and new memory lines, delegate coverage of XNNPACK / GPU / NNAPI, op-profiling
tables (tab-separated under "Profiling Info", bare as old builds print them,
CSV with subgraphs and the delegate's own profile), failures and logs
holding two runs. The transcripts follow the format strings of TensorFlow's
benchmark tool and stats_calculator of each era."""

import json
import os
import subprocess
import sys

import pytest

from android_bench.output_parser import (parse_output, parse_stat,
                                         split_sessions, strip_prefixes)
from android_bench.results import fill_cell, timings_from_stat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "android_bench")


def fixture(name):
  with open(os.path.join(FIXTURES, name)) as f:
    return f.read()


def test_plain_output_with_percentiles_and_memory_status():
  p = parse_output(fixture("plain_percentiles.txt"))
  assert p["complete"]
  assert p["model_path"] == "/data/local/tmp/mobilebert_float.tflite"
  assert p["model_size_mb"] == pytest.approx(100.478)
  assert p["init_ms"] == pytest.approx(412.366)
  assert p["params"]["Num threads"] == "4"
  assert p["warmup"] == {"count": 8, "first": 92873, "curr": 63912,
                         "min": 63120, "max": 92873, "avg": 67420.1,
                         "std": 9617, "p5": 63120, "median": 64388,
                         "p95": 92873}
  assert p["timings"]["count"] == 50
  assert p["timings"]["median"] == 62511
  assert p["timings"]["avg"] == pytest.approx(62954.3)
  assert p["summary"] == {"init_us": 412366, "first_inference_us": 92873,
                          "warmup_avg_us": 67420.1,
                          "inference_avg_us": 62954.3}
  assert p["memory"]["init_mb"] == pytest.approx(118.559)
  assert p["memory"]["overall_mb"] == pytest.approx(131.902)
  assert p["memory"]["peak_mb"] == pytest.approx(137.453)
  assert p["memory"]["status_mb"] == {"VmRSS": 139, "RssAnnon": 36,
                                      "RssFile + RssShmem": 103}
  assert p["delegates"] == [{"delegate": "TfLiteXNNPackDelegate",
                             "replaced_nodes": 1117, "total_nodes": 1121,
                             "partitions": 3, "subgraph": 0}]
  assert p["delegates_created"] == ["XNNPACK"]
  assert p["unparsed"] == [] and p["errors"] == []


def test_info_prefix_scientific_notation_and_old_memory_line():
  p = parse_output(fixture("info_prefix_scientific.txt"))
  assert p["complete"]
  # avg=1.34286e+06 and Warmup (avg): 1.84312e+06 are floats in us.
  assert p["timings"]["avg"] == pytest.approx(1342860.0)
  assert p["summary"]["inference_avg_us"] == pytest.approx(1342860.0)
  assert p["summary"]["warmup_avg_us"] == pytest.approx(1843120.0)
  assert p["summary"]["init_us"] == 1187420
  assert "median" not in p["timings"]  # an older build: no percentiles
  # One warm-up run prints only count and curr.
  assert p["warmup"] == {"count": 1, "curr": 1843120}
  assert p["memory"] == {"init_mb": pytest.approx(441.285),
                         "overall_mb": pytest.approx(468.91)}
  assert p["delegates"][0]["replaced_nodes"] == 569
  assert p["delegates"][0]["partitions"] == 5
  assert p["delegates"][0]["subgraph"] is None
  assert p["unparsed"] == []
  timings = timings_from_stat(p["warmup"])
  assert (timings["min"], timings["max"], timings["mean"], timings["std"]) \
      == (1843120, 1843120, 1843120, 0)


def test_logcat_threadtime_prefixes_and_unknown_lines_kept():
  p = parse_output(fixture("logcat_threadtime.txt"))
  assert p["complete"]
  assert p["model_path"] == "/data/local/tmp/mobilebert_int8.tflite"
  assert p["init_ms"] == pytest.approx(92.318)
  assert p["timings"]["median"] == 26702
  assert p["timings"]["p95"] == 28830
  assert p["warmup"]["count"] == 18
  assert p["delegates"][0]["replaced_nodes"] == 1321
  assert p["delegates"][0]["total_nodes"] == 1433
  assert p["delegates"][0]["partitions"] == 25
  assert p["memory"]["overall_mb"] == pytest.approx(73.4102)
  # Nothing that is not the tool's is thrown away.
  assert p["unparsed"] == [
      "--------- beginning of main",
      "07-14 13:14:54.052 22838 22838 I BenchmarkModelActivity: Benchmark "
      "finished, results in logcat"]


def test_logcat_brief_gpu_delegate():
  p = parse_output(fixture("logcat_brief_gpu.txt"))
  assert p["complete"]
  assert p["params"]["Use gpu"] == "1"
  assert p["delegates"] == [{"delegate": "TfLiteGpuDelegateV2",
                             "replaced_nodes": 1121, "total_nodes": 1121,
                             "partitions": 1, "subgraph": None}]
  assert p["delegates_created"] == ["GPU"]
  assert p["summary"]["init_us"] == 2843610
  assert p["timings"]["min"] == 36844
  assert len(p["unparsed"]) == 3
  assert p["unparsed"][-1].startswith("W/Adreno-GSL")


def test_op_profiling_tables():
  p = parse_output(fixture("op_profiling.txt"))
  assert p["complete"]
  assert p["timings"]["median"] == 55398
  init, regular = p["op_profile"]["init"], p["op_profile"]["regular"]
  assert init["run_order"] == [{
      "node_type": "AllocateTensors", "start_ms": 0.0, "first_ms": 1.262,
      "avg_ms": 1.262, "percent": 100.0, "cdf_percent": 100.0, "mem_kb": 0.0,
      "times_called": 1, "name": "AllocateTensors/0"}]
  assert init["timings_us"] == {"count": 1, "curr": 1262}
  assert len(regular["run_order"]) == 8
  assert regular["run_order"][2]["node_type"] == "FULLY_CONNECTED"
  assert regular["run_order"][2]["avg_ms"] == pytest.approx(3.986)
  assert regular["run_order"][2]["name"] == \
      "[bert/embeddings/embedding_transformation/MatMul]:2"
  assert [r["node_type"] for r in regular["top_by_computation_time"]] == [
      "FULLY_CONNECTED", "FULLY_CONNECTED", "BATCH_MATMUL"]
  by_type = regular["summary_by_node_type"]
  assert [r["node_type"] for r in by_type][:3] == [
      "FULLY_CONNECTED", "BATCH_MATMUL", "ADD"]
  assert by_type[0]["count"] == 410
  assert by_type[0]["percent"] == pytest.approx(76.038)
  assert sum(r["percent"] for r in by_type) == pytest.approx(100.0, abs=0.01)
  assert by_type[-1]["cdf_percent"] == pytest.approx(100.0)
  assert regular["nodes_executed"] == 1284
  assert regular["nodes_observed"] == 1284
  assert regular["timings_us"]["avg"] == pytest.approx(55391.2)
  # The profile's own `Timings (microseconds): count=50` is not a run line.
  assert p["timings"]["avg"] == pytest.approx(55634.7)
  assert p["unparsed"] == []


def test_old_build_bare_profile_through_logcat():
  """An old build: no "Profiling Info" line before its tables, the
  "Average inference timings" summary, no terminate clause, logcat."""
  p = parse_output(fixture("old_build_bare_profile_logcat.txt"))
  assert p["complete"]
  assert p["summary"] == {"init_us": 41700, "first_inference_us": None,
                          "warmup_avg_us": 88710.3,
                          "inference_avg_us": 88050.6}
  assert p["runs"][1] == {"min_runs": 50, "min_secs": 1, "max_secs": None}
  assert p["warmup"]["count"] == 6 and p["timings"]["avg"] == 88050.6
  regular = p["op_profile"]["regular"]
  by_type = {r["node_type"]: r for r in regular["summary_by_node_type"]}
  assert by_type["FULLY_CONNECTED"]["count"] == 2
  assert by_type["FULLY_CONNECTED"]["avg_ms"] == pytest.approx(6.3)
  assert by_type["FULLY_CONNECTED"]["percent"] == pytest.approx(71.672)
  assert sum(r["count"] for r in by_type.values()) == \
      regular["nodes_executed"] == regular["nodes_observed"] == 5
  assert len(regular["run_order"]) == 5
  assert regular["run_order"][0]["name"] == \
      "[bert/embeddings/word_embeddings]"
  assert regular["timings_us"]["avg"] == pytest.approx(8795.4)
  assert p["unparsed"] == ["--------- beginning of main"]
  cell = fill_cell({}, p)
  assert cell["first_inference_us"] is None and cell["init_us"] == 41700


def test_csv_profile_with_subgraphs_and_delegate_internal():
  p = parse_output(fixture("csv_profile_subgraphs.txt"))
  assert p["complete"] and p["unparsed"] == []
  regular = p["op_profile"]["regular"]
  assert [r["node_type"] for r in regular["run_order"]] == [
      "GATHER", "FULLY_CONNECTED", "BATCH_MATMUL"]
  assert regular["run_order"][1] == {
      "node_type": "FULLY_CONNECTED", "start_ms": 0.2, "first_ms": 4.1,
      "avg_ms": 3.9, "percent": 44.37, "cdf_percent": 46.53, "mem_kb": 0,
      "times_called": 1,
      "name": "[bert/encoder/layer_0/attention/self/query/MatMul]"}
  assert [(r["node_type"], r["count"], r["avg_ms"])
          for r in regular["summary_by_node_type"]] == [
      ("FULLY_CONNECTED", 1, 3.9), ("BATCH_MATMUL", 1, 1.7),
      ("GATHER", 1, 0.19)]
  assert regular["timings_us"]["avg"] == pytest.approx(5895.2)
  # The while body's profile does not overwrite the primary graph's.
  body = regular["subgraphs"]["1"]
  assert body["name"] == "while_body" and body["nodes_observed"] == 1
  assert body["summary_by_node_type"][0]["times_called"] == 4
  assert body["timings_us"]["avg"] == pytest.approx(11.2)
  # XNNPACK's op names hold commas; the numeric cells place the split.
  delegate = regular["delegate_internal"]["run_order"][0]
  assert delegate["node_type"] == "Fully Connected (NC, QS8) GEMM"
  assert delegate["avg_ms"] == 3.7
  assert delegate["name"] == "Delegate/Fully Connected (NC, QS8) GEMM:0"
  assert p["timings"]["median"] == 186100


def test_failed_run_keeps_errors_and_is_incomplete():
  p = parse_output(fixture("failed_unsupported_op.txt"))
  assert not p["complete"]
  assert p["timings"] is None and p["summary"] is None
  assert p["errors"][1] == "Node number 41 (FlexErf) failed to prepare."
  assert p["errors"][-1] == "Benchmarking failed."
  assert len(p["unparsed"]) == 4  # the error lines, raw
  cell = fill_cell({}, p)
  assert cell["timings_us"] is None and cell["delegate_coverage"] == []


def test_output_cut_short_and_trimmed_pastes():
  lines = fixture("plain_percentiles.txt").splitlines()
  cut = "\n".join(lines[:18])  # the device died during the regular runs
  p = parse_output(cut)
  assert not p["complete"] and p["timings"] is None
  assert p["warmup"]["count"] == 8 and len(p["runs"]) == 2
  paste = parse_output("count=50 first=63455 curr=62190 min=61388 "
                       "max=71804 avg=62954.3 std=1702")
  assert p["warmup"] is not None and paste["warmup"] is None
  assert paste["timings"]["count"] == 50


def test_two_runs_in_one_log_are_split():
  sessions = split_sessions(fixture("two_runs_nnapi.txt"))
  assert len(sessions) == 2
  one, four = (parse_output(s) for s in sessions)
  assert one["params"]["Num threads"] == "1"
  assert four["params"]["Num threads"] == "4"
  assert one["timings"]["median"] == 6366 and four["timings"]["median"] == 4829
  assert one["delegates"][0] == {"delegate": "TfLiteNnapiDelegate",
                                 "replaced_nodes": 12, "total_nodes": 20,
                                 "partitions": 3, "subgraph": 0}
  assert split_sessions(fixture("plain_percentiles.txt")) == [
      fixture("plain_percentiles.txt")]


@pytest.mark.parametrize("line, expected", [
    ("INFO: count=3", ("INFO", "count=3")),
    ("VERBOSE: Replacing 1 out", ("VERBOSE", "Replacing 1 out")),
    ("07-14 13:14:52.097 22838 22838 I tflite  : Num threads: [4]",
     ("INFO", "Num threads: [4]")),
    ("2024-07-14 13:14:52.097 22838 22838 E tflite  : boom",
     ("ERROR", "boom")),
    ("I/tflite  ( 9418): count=3", ("INFO", "count=3")),
    ("07-14 13:14:52.097 I/tflite  ( 9418): count=3", ("INFO", "count=3")),
    ("I tflite  : INFO: count=3", ("INFO", "count=3")),
    ("count=3\r", (None, "count=3")),
])
def test_prefixes(line, expected):
  assert strip_prefixes(line) == expected


def test_stat_numbers():
  assert parse_stat("count=50 first=1 curr=2 min=1 max=3 avg=2.5e+06 std=7") \
      == {"count": 50, "first": 1, "curr": 2, "min": 1, "max": 3,
          "avg": 2.5e6, "std": 7}
  assert isinstance(parse_stat("avg=64500")["avg"], int)
  assert isinstance(parse_stat("avg=645.5")["avg"], float)


def _cli(*args):
  return subprocess.run([sys.executable, "-m", "android_bench", *args],
                        capture_output=True, text=True, cwd=REPO, timeout=120)


def test_parse_command(tmp_path):
  path = os.path.join(FIXTURES, "logcat_threadtime.txt")
  out = _cli("parse", path, "--json")
  assert out.returncode == 0, out.stderr
  parsed = json.loads(out.stdout)
  assert parsed["timings"]["median"] == 26702 and parsed["file"] == path
  text = _cli("parse", path)
  assert text.returncode == 0
  assert "median 26.702" in text.stdout
  assert "TfLiteXNNPackDelegate: 1321 of 1433 nodes in 25 partitions" \
      in text.stdout
  old = _cli("parse", os.path.join(FIXTURES,
                                  "old_build_bare_profile_logcat.txt"))
  assert old.returncode == 0, old.stderr
  assert "init 41.700 ms, warm-up mean 88.710 ms" in old.stdout
  assert "op profile: 5 nodes; top node types FULLY_CONNECTED 71.672%" \
      in old.stdout
  both = json.loads(_cli("parse", os.path.join(
      FIXTURES, "two_runs_nnapi.txt"), "--json").stdout)
  assert [s["session"] for s in both] == [0, 1]
  # Bad input: one line naming the file, non-zero status.
  missing = _cli("parse", str(tmp_path / "nope.txt"))
  assert missing.returncode != 0
  assert missing.stderr.strip().splitlines() == [
      f"error: {tmp_path / 'nope.txt'}: No such file or directory"]
  junk = tmp_path / "junk.txt"
  junk.write_text("hello\nworld\n")
  out = _cli("parse", str(junk))
  assert out.returncode != 0
  assert out.stderr.strip() == f"error: {junk}: no benchmark_model output found"
