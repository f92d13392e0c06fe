"""experiments/bench/onnx_compare.py on a fine-tuned tiny QA model: our four
TFLite files and ONNX Runtime's two, each scored on dev by the same task
code and timed at every length x threads; the table and its JSON; a used
--output_dir refused before any work."""

import json
import subprocess
import sys

import pytest

from fixtures.converters import tiny_models

pytest.importorskip("onnxruntime", reason="the bench extras "
                    "(requirements-bench.txt) are not installed")
pytest.importorskip("tf2onnx", reason="the bench extras "
                    "(requirements-bench.txt) are not installed")


def _compare(*args):
  return subprocess.run(
      [sys.executable, "-m", "experiments.bench.onnx_compare", *map(str, args)],
      capture_output=True, text=True, cwd=tiny_models.REPO,
      env=tiny_models.env(), timeout=1800)


def test_tflite_and_onnx_runtime_files_side_by_side(tmp_path,
                                                    tmp_path_factory):
  base = tmp_path_factory.getbasetemp()
  run_dir = tiny_models.finetuned_qa(base)
  out = tmp_path / "compare"
  done = _compare("--model_dir", run_dir, "--data_dir",
                  tiny_models.qa_data(base), "--output_dir", out,
                  "--lengths", "0,32", "--threads", "1,2", "--runs", 3)
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads((out / "onnx_compare.json").read_text())
  assert [(r["runtime"], r["file"].split(" (")[0]) for r in result["rows"]] \
      == [("TFLite", "float32"), ("TFLite", "int8"), ("TFLite", "dynamic"),
          ("TFLite", "selective"), ("ONNX Runtime", "float32"),
          ("ONNX Runtime", "dynamic int8")]
  assert result["lengths"] == [64, 32] and result["threads"] == [1, 2]
  for r in result["rows"]:
    assert 0 <= r["metric"] <= 100 and r["size_mb"] > 0
    assert set(r["ms"]) == {"64x1", "64x2", "32x1", "32x2"}
    assert all(ms > 0 for ms in r["ms"].values())
  # The same model, scored alike: float32 under both runtimes agrees.
  scores = {(r["runtime"], r["file"]): r["metric"] for r in result["rows"]}
  assert scores[("ONNX Runtime", "float32")] == pytest.approx(
      scores[("TFLite", "float32")], abs=0.5)
  assert scores[("TFLite", "float32")] == pytest.approx(result["keras"],
                                                        abs=0.5)
  assert "int8_isa" in result["host"]
  table = (out / "onnx_compare.md").read_text()
  assert "| ONNX Runtime | dynamic int8 |" in table
  assert "ms L=32, 2 thr" in table and table in done.stdout
  assert (out / "onnx" / "model_dynamic_int8.onnx").is_file()
  assert (out / "tflite" / "model_selective.tflite").is_file()
  # A second run into the same folder: refused at once, the folder kept.
  again = _compare("--model_dir", run_dir, "--data_dir",
                   tiny_models.qa_data(base), "--output_dir", out)
  assert again.returncode == 1
  assert again.stderr.strip().splitlines()[-1] == (
      f"error: --output_dir {out}: exists (pass --overwrite)")
  assert (out / "onnx_compare.json").is_file()
