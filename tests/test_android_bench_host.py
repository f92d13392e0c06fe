"""The host side of android_bench: the ai_edge_litert benchmark_model runner
(its lines, numbers and measured delegate coverage) and `run --target host`
-> JSON -> table -> plots -> `report --compare`, including a hung cell."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from android_bench.output_parser import parse_output
from android_bench.report import summarize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "android_bench"))
from tiny_models import write_models  # noqa: E402  pylint: disable=wrong-import-position

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  return write_models(tmp_path_factory.mktemp("models"))


def runner(*flags):
  out = subprocess.run(
      [sys.executable, "-m", "android_bench.benchmark_model", *flags],
      capture_output=True, text=True, env=ENV, timeout=120)
  return out.returncode, out.stdout + out.stderr


def cli(*args, timeout=300):
  return subprocess.run([sys.executable, "-m", "android_bench", *args],
                        capture_output=True, text=True, env=ENV, cwd=REPO,
                        timeout=timeout)


def test_runner_prints_the_tools_lines(models):
  status, out = runner(f"--graph={models['tiny_dense']}", "--num_threads=1",
                       "--warmup_runs=2", "--warmup_min_secs=0",
                       "--num_runs=20", "--min_secs=0",
                       "--report_peak_memory_footprint=true",
                       "--some_future_flag=1")
  assert status == 0, out
  p = parse_output(out)
  assert p["complete"] and p["errors"] == []
  # min_secs=0: exactly the requested counts.
  assert p["warmup"]["count"] == 2 and p["timings"]["count"] == 20
  t = p["timings"]
  assert 0 < t["min"] <= t["p5"] <= t["median"] <= t["p95"] <= t["max"]
  assert t["min"] <= t["avg"] <= t["max"]
  assert p["summary"]["inference_avg_us"] == pytest.approx(t["avg"], rel=1e-5)
  assert p["summary"]["first_inference_us"] == p["warmup"]["first"]
  assert p["summary"]["init_us"] == pytest.approx(p["init_ms"] * 1e3, abs=1)
  size = os.path.getsize(models["tiny_dense"])
  assert p["model_size_mb"] == pytest.approx(size / 1e6, rel=1e-5)
  assert p["memory"]["peak_mb"] > 0 and p["memory"]["overall_mb"] >= 0
  assert p["params"]["Num threads"] == "1"
  assert p["unparsed"] == ["INFO: Unconsumed cmdline flags: "
                           "--some_future_flag=1"]


@pytest.mark.parametrize("model, xnnpack, coverage", [
    # FC, FC, ADD: all XNNPACK ops, one partition.
    ("tiny_dense", "true", [(3, 3, 1)]),
    # FC, CUMSUM, FC: no CUMSUM in XNNPACK, so two partitions around it.
    ("tiny_cumsum", "true", [(2, 3, 2)]),
    ("tiny_dense", "false", []),
])
def test_runner_measures_delegate_coverage(models, model, xnnpack, coverage):
  status, out = runner(f"--graph={models[model]}", f"--use_xnnpack={xnnpack}",
                       "--num_runs=3", "--min_secs=0", "--warmup_min_secs=0")
  assert status == 0, out
  found = [(d["replaced_nodes"], d["total_nodes"], d["partitions"])
           for d in parse_output(out)["delegates"]]
  assert found == coverage


def test_runner_failures(models, tmp_path):
  status, out = runner(f"--graph={models['tiny_dense']}", "--use_gpu=true")
  assert status == 1
  assert "ERROR: the GPU delegate is not available" in out
  status, out = runner(f"--graph={tmp_path / 'missing.tflite'}")
  assert status == 1 and "ERROR: Could not load model" in out
  # The tool's default integers (0..99) overrun the 2-row token-type table,
  # as they do on a phone; value ranges reach the inputs and fix it.
  fast = [f"--graph={models['tiny_qa']}", "--num_runs=2", "--min_secs=0",
          "--warmup_min_secs=0"]
  status, out = runner(*fast)
  assert status == 1
  assert "ERROR: Failed to invoke the interpreter: gather index out of " \
      "bounds" in out
  layers = ["--input_layer=ids,mask,segment_ids",
            "--input_layer_shape=1,32:1,32:1,32"]
  status, out = runner(*fast, *layers, "--input_layer_value_range="
                       "ids,0,99:segment_ids,0,1:mask,1,1")
  assert status == 0, out
  status, out = runner(*fast, *layers, "--input_layer_value_range="
                       "ids,100,100:segment_ids,0,1")
  assert status == 1 and "gather index out of bounds" in out
  # As in the tool, a range needs its name in --input_layer, which lists
  # every input with a shape.
  status, out = runner(*fast, "--input_layer_value_range=segment_ids,0,1")
  assert status == 1
  assert "ERROR: Cannot find the corresponding input_layer name(segment_ids)" \
      " in --input_layer as " in out
  status, out = runner(*fast, "--input_layer=ids", "--input_layer_shape=1,32")
  assert status == 1
  assert "ERROR: Inputs mismatch: Model inputs #:1 expected: 3" in out


def _load(path):
  with open(path) as f:
    return json.load(f)


def _runs(results_dir):
  return sorted(os.path.join(results_dir, f) for f in os.listdir(results_dir)
                if f.endswith(".json"))


def test_host_run_report_and_compare(models, tmp_path):
  model_dir = tmp_path / "models"
  write_models(model_dir, ["tiny_qa", "tiny_dense"])
  results_dir = str(tmp_path / "results")
  fast = ["--num_runs=5", "--min_secs=0", "--warmup_runs=1",
          "--benchmark_args=--warmup_min_secs=0",
          f"--results_dir={results_dir}"]
  out = cli("run", "--target=host", "--threads=1,2",
            "--delegates=xnnpack,none", "--peak_memory", "--name=first",
            *fast, str(model_dir))
  assert out.returncode == 0, out.stdout + out.stderr
  [first_path] = _runs(results_dir)
  run = _load(first_path)
  assert run["kind"] == "android_bench.run" and run["schema_version"] == 1
  assert run["complete"] and run["target"] == "host"
  assert run["device"]["kind"] == "host" and run["device"]["cores"] >= 1
  facts = run["models"]["tiny_qa.tflite"]
  with open(model_dir / "tiny_qa.tflite", "rb") as f:
    assert facts["sha256"] == hashlib.sha256(f.read()).hexdigest()
  assert [t["name"] for t in facts["inputs"]] == ["ids", "mask", "segment_ids"]
  assert facts["inputs"][0] == {"name": "ids", "shape": [1, 32],
                                "shape_signature": [1, 32], "dtype": "int32"}
  # Read from the model's tables; passed to benchmark_model (below).
  assert facts["index_ranges"] == {"ids": [0, 99], "mask": [0, 1],
                                   "segment_ids": [0, 1]}
  cells = run["cells"]
  assert len(cells) == 2 * 2 * 2
  assert {(c["model"], c["delegate"], c["threads"]) for c in cells} == {
      (m, d, t) for m in ("tiny_qa.tflite", "tiny_dense.tflite")
      for d in ("xnnpack", "none") for t in (1, 2)}
  for c in cells:
    assert c["status"] == "ok", c["error"]
    assert c["runner"] == "litert"
    assert c["timings_us"]["count"] == 5
    assert c["timings_us"]["min"] <= c["timings_us"]["median"] \
        <= c["timings_us"]["max"]
    assert f"--num_threads={c['threads']}" in c["command"]
    assert c["memory_mb"]["peak"] > 0
    # The stored numbers are the parse of the stored raw output.
    assert c["timings_us"]["mean"] == parse_output(
        c["raw_output"])["timings"]["avg"]
    if c["model"] == "tiny_qa.tflite":
      assert c["command"].endswith(
          " --input_layer=ids,mask,segment_ids --input_layer_shape=1,32:1,32:"
          "1,32 --input_layer_value_range=ids,0,99:mask,0,1:segment_ids,0,1")
    if c["delegate"] == "none":
      assert "--use_xnnpack=false" in c["command"]
      assert c["delegate_coverage"] == []
    elif c["model"] == "tiny_dense.tflite":
      assert c["delegate_coverage"] == [{
          "delegate": "TfLiteXNNPackDelegate", "replaced_nodes": 3,
          "total_nodes": 3, "partitions": 1}]
  # The table on stdout and the plot beside the JSON.
  assert "| tiny_qa.tflite | litert | none | 2 |" in out.stdout
  plot = first_path[:-len(".json")] + ".png"
  with open(plot, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"

  out = cli("run", "--target=host", "--threads=2", "--repeats=2",
            "--name=second", *fast, str(model_dir / "tiny_qa.tflite"),
            str(model_dir / "tiny_dense.tflite"))
  assert out.returncode == 0, out.stdout + out.stderr
  second_path = [p for p in _runs(results_dir) if p != first_path][0]
  second = _load(second_path)
  assert [c["repeat"] for c in second["cells"]] == [0, 0, 1, 1]
  rows = {r["model"]: r for r in summarize(second)}
  assert rows["tiny_qa.tflite"]["ok"] == 2
  assert rows["tiny_qa.tflite"]["runs"] == 10

  report_dir = tmp_path / "report"
  out = cli("report", first_path, second_path, "--compare",
            f"--output={report_dir}")
  assert out.returncode == 0, out.stderr
  a = {(r["model"], r["delegate"], r["threads"]): r["latency_ms"]
       for r in summarize(run)}
  b = {(r["model"], r["delegate"], r["threads"]): r["latency_ms"]
       for r in summarize(second)}
  ratio = b[("tiny_qa.tflite", "xnnpack", 2)] / a[("tiny_qa.tflite",
                                                   "xnnpack", 2)]
  assert (f"| tiny_qa.tflite | litert | xnnpack | 2 | "
          f"{a[('tiny_qa.tflite', 'xnnpack', 2)]:.4g} | "
          f"{b[('tiny_qa.tflite', 'xnnpack', 2)]:.4g} | {ratio:.3f} |") \
      in out.stdout
  # Rows only one run has are listed without a ratio.
  assert "| tiny_qa.tflite | litert | none | 1 |" in out.stdout
  assert sorted(os.listdir(report_dir)) == [".written_by.json", "compare.png",
                                            "latency.png", "report.md"]
  assert "B / A" in (report_dir / "report.md").read_text()
  again = cli("report", first_path, second_path, "--compare",
              f"--output={report_dir}")
  assert again.returncode != 0
  assert again.stderr.strip() == (f"error: --output {report_dir}: exists "
                                  f"(pass --overwrite)")


def test_lengths_time_a_dynamic_model_at_each_length(models, tmp_path):
  """--lengths: one cell per length, the inputs resized to [1, L] by the
  tool's own flags (value ranges kept), a length column in the table and
  latency against length in the PNG; a fixed-length file is refused."""
  results_dir = str(tmp_path / "results")
  out = cli("run", "--target=host", "--threads=1", "--lengths=8,64",
            "--num_runs=3", "--min_secs=0", "--warmup_runs=1",
            "--benchmark_args=--warmup_min_secs=0",
            f"--results_dir={results_dir}", models["tiny_qa_dynamic"])
  assert out.returncode == 0, out.stdout + out.stderr
  [path] = _runs(results_dir)
  run = _load(path)
  assert run["settings"]["lengths"] == [8, 64]
  assert run["models"]["tiny_qa_dynamic.tflite"]["inputs"][0][
      "shape_signature"] == [1, -1]
  cells = {c["length"]: c for c in run["cells"]}
  assert sorted(cells) == [8, 64]
  for length, cell in cells.items():
    assert cell["status"] == "ok", cell["error"]
    shape = ":".join([f"1,{length}"] * 3)
    assert cell["command"].endswith(
        f" --input_layer=ids,mask,segment_ids --input_layer_shape={shape} "
        "--input_layer_value_range=ids,0,99:mask,0,1:segment_ids,0,1")
  rows = summarize(run)
  assert [(r["length"], r["ok"]) for r in rows] == [(8, 1), (64, 1)]
  assert "| tiny_qa_dynamic.tflite | litert | xnnpack | 1 | 8 |" in out.stdout
  with open(path[:-len(".json")] + ".png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  from android_bench.report import plot_lengths
  assert plot_lengths([run], str(tmp_path / "lengths.png")) == 1

  fixed = cli("run", "--target=host", "--lengths=8",
              f"--results_dir={tmp_path / 'fixed'}", models["tiny_qa"])
  assert fixed.returncode != 0
  assert fixed.stderr.strip() == (
      "error: --lengths: tiny_qa.tflite has fixed inputs [1, 32]; time "
      "dynamic-length files (convert_tflite's default) or drop --lengths")


def _invokes_at(path, length):
  import numpy as np
  from ai_edge_litert import interpreter as litert
  interpreter = litert.Interpreter(model_path=path)
  for detail in interpreter.get_input_details():
    interpreter.resize_tensor_input(detail["index"], [1, length])
  interpreter.allocate_tensors()
  for detail in interpreter.get_input_details():
    interpreter.set_tensor(detail["index"], np.zeros([1, length], np.int32))
  try:
    interpreter.invoke()
    return True
  except RuntimeError:
    return False


def test_the_position_table_bounds_a_dynamic_models_length(models):
  """max_length, read from the graph, is where the model stops running; a
  classifier that cuts its inputs first (tiny_qa_dynamic) has none."""
  from android_bench.model_facts import length_facts, model_facts
  path = models["tiny_qa_positions"]
  assert model_facts(path)["max_length"] == 64
  assert length_facts(path)["max_length"] == 64
  assert _invokes_at(path, 64) and not _invokes_at(path, 65)
  assert model_facts(models["tiny_qa_dynamic"])["max_length"] is None
  assert _invokes_at(models["tiny_qa_dynamic"], 65)


@pytest.mark.parametrize("target", ["host", "adb"])
def test_lengths_past_the_position_table_are_refused(models, tmp_path,
                                                     target):
  """Before any timing (and, for adb, before looking for adb or a device),
  in one line naming --lengths, the file and its limit; nothing written."""
  results_dir = tmp_path / "results"
  adb = (["--adb=/nonexistent/adb",
          f"--benchmark_binary={models['tiny_dense']}"]
         if target == "adb" else [])
  out = cli("run", f"--target={target}", *adb, "--lengths=3,65,1000",
            f"--results_dir={results_dir}", models["tiny_qa_positions"],
            timeout=120)
  assert out.returncode != 0
  assert out.stderr.strip().splitlines() == [
      "error: --lengths 65,1000: tiny_qa_positions.tflite takes at most 64 "
      "tokens (its position table)"]
  assert "Traceback" not in out.stdout + out.stderr and out.stdout == ""
  assert not results_dir.exists()


def test_host_timeout_and_pinning_with_a_user_binary(models, tmp_path):
  """A host benchmark_model (here a script around ours that hangs on one
  model) runs beside the litert runner; the hung cell times out, the others
  finish, and --cpu_mask reaches the processes."""
  binary = tmp_path / "benchmark_model"
  pid_file = tmp_path / "hung.pid"
  binary.write_text(
      "#!/bin/sh\n"
      "grep Cpus_allowed_list /proc/self/status\n"
      f"case \"$*\" in *tiny_cumsum*) echo $$ > {pid_file}; exec sleep 120;; "
      "esac\n"
      f"exec {sys.executable} -m android_bench.benchmark_model \"$@\"\n")
  binary.chmod(0o755)
  results_dir = str(tmp_path / "results")
  out = cli("run", "--target=host", f"--benchmark_binary={binary}",
            "--threads=1", "--num_runs=3", "--min_secs=0",
            "--benchmark_args=--warmup_min_secs=0", "--timeout=8",
            "--cpu_mask=1", f"--results_dir={results_dir}",
            models["tiny_cumsum"], models["tiny_dense"])
  assert out.returncode == 1
  assert out.stderr.strip().splitlines() == [
      f"error: 1 of 4 cells did not finish ({_runs(results_dir)[0]} keeps "
      f"the rest)"]
  run = _load(_runs(results_dir)[0])
  status = {(c["model"], c["runner"]): c for c in run["cells"]}
  hung = status[("tiny_cumsum.tflite", "benchmark_model")]
  assert hung["status"] == "timeout"
  assert hung["error"] == "no result after 8 s; killed"
  assert hung["wall_s"] < 30
  with pytest.raises(ProcessLookupError):
    os.kill(int(pid_file.read_text()), 0)
  for key in [("tiny_cumsum.tflite", "litert"), ("tiny_dense.tflite",
                                                 "litert"),
              ("tiny_dense.tflite", "benchmark_model")]:
    assert status[key]["status"] == "ok", status[key]["error"]
    assert status[key]["cpu_mask"] == "1"
  pinned = status[("tiny_dense.tflite", "benchmark_model")]
  assert pinned["unparsed_lines"][0].split() == ["Cpus_allowed_list:", "0"]
  assert "| tiny_dense.tflite | benchmark_model | xnnpack | 1 |" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "--target=host", "/nonexistent/m.tflite"],
     "error: /nonexistent/m.tflite: no such file or directory"),
    (["run", "--target=host", "README.md"],
     "error: README.md: not a .tflite file"),
    (["run", "--target=host", "--delegates=tpu", "tests"],
     "error: --delegates tpu: use xnnpack, gpu, nnapi, none"),
    (["run", "--target=host", "--cpu_mask=zz", "tests"],
     "error: --cpu_mask zz: give a hex mask like f0, or big"),
    (["run", "--target=host", "--cool_below_c=-5", "tests"],
     "error: --cool_below_c -5: give a temperature in degrees C above 0"),
    (["run", "--target=host", "--cool_below_c=40", "--throttled_status=0",
      "tests"], "error: --throttled_status 0: give 1 (light) .. 6 (shutdown)"),
    (["run", "--target=host", "--cool_poll_s=0", "tests"],
     "error: --cool_poll_s 0: give seconds > 0"),
    (["run", "--target=host", "--lengths=64,x", "tests"],
     "error: --lengths 64,x: give integers"),
    (["run", "--target=host", "--lengths=0", "tests"],
     "error: --lengths: give sequence lengths >= 1"),
    (["run", "--target=host", "--lengths=64",
      "--benchmark_args=--input_layer=ids", "tests"],
     "error: --lengths sets the inputs' shapes: drop the --input_layer flags"),
    (["run", "--target=host", "tests/fixtures/checkpoints"],
     "error: no .tflite files in tests/fixtures/checkpoints"),
    (["run", "--target=adb", "--adb=/nonexistent/adb",
      "--benchmark_binary=README.md", "tests/fixtures/android_bench"],
     None),
    (["report", "tests/fixtures/android_bench/plain_percentiles.txt"],
     "error: tests/fixtures/android_bench/plain_percentiles.txt: not JSON"),
])
def test_bad_input_is_one_line(args, message, models):
  if args[-1] == "tests/fixtures/android_bench":
    args = args[:-1] + [models["tiny_dense"]]
    message = ("error: adb binary not found: /nonexistent/adb (install "
               "Android platform-tools or pass --adb)")
  out = cli(*args, timeout=120)
  assert out.returncode != 0
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(message), out.stderr
