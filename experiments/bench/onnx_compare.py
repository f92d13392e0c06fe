r"""Our TFLite files of a model beside ONNX Runtime's, in one run on this host.

    python -m experiments.bench.onnx_compare --model_dir RUN \
        --data_dir data/wordnet_qa --output_dir onnx_compare \
        [--lengths 384,128] [--threads 1,2] [--max_int8_loss 1.0]

An app team choosing a runtime asks two things of each file: what it keeps
of the model's dev metric, and how fast it runs. This converts the model
(one of our model directories, a fine-tuned task model) the way each
runtime's users would:

  TFLite        convert_tflite --modes float32,int8,dynamic,selective
                (its report scores each file on dev)
  ONNX Runtime  the same SavedModel (convert_tflite's export, any length)
                through tf2onnx, and onnxruntime.quantization's dynamic
                int8 (int8 weights, activations quantized on the fly)

scores the ONNX files on the same dev split with the same task code, and
times every file with the same loop (median of --runs after warm-ups, one
random valid example) at each of --lengths x --threads, ONNX Runtime with
that many intra-op threads, LiteRT with XNNPACK. Host figures are the
host's: the table carries the CPU's int8 instructions (android_bench's
record), since int8's speed on x86 without dot-product instructions says
nothing of a phone's.

Writes, in --output_dir (a new folder, or with --overwrite an earlier
run's): onnx_compare.json (rows: runtime, file, metric, size, ms per length
and threads; the host), onnx_compare.md, tflite/ (convert_tflite's files and
report) and onnx/ (the two .onnx files).
Needs the bench extras (requirements-bench.txt: tf2onnx, onnx, onnxruntime).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np

from tfmodels.command_options import (define_flags, from_flags, option,
                                      run_command)

TFLITE_MODES = ("float32", "int8", "dynamic", "selective")
ONNX_FILES = (("float32", "model_float32.onnx"),
              ("dynamic int8", "model_dynamic_int8.onnx"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareOptions:
  """The command line; `main` builds it with `command_options.from_flags`."""
  model_dir: str | None = option(None, "A fine-tuned model directory (its "
                                 "task.json names task and length).",
                                 required=True)
  data_dir: str | None = option(None, "The task's data; dev scores every "
                                "file.", required=True)
  output_dir: str | None = option(None, "A new folder for the files, the "
                                  "table and its JSON.", required=True)
  max_seq_length: int = option(0, "The files' default length (0: the "
                               "run's task.json).")
  lengths: tuple = option(("0",), "Lengths every file is timed at (0: "
                          "--max_seq_length).")
  threads: tuple = option(("1", "2"), "Thread counts every file is timed "
                          "with.")
  runs: int = option(20, "Timed runs per file, length and thread count.")
  max_int8_loss: float = option(1.0, "convert_tflite's bound for the "
                                "selective file (points).")
  eval_split: str = option("dev", "The split every file is scored on.")
  overwrite: bool = option(False, "Replace an earlier onnx_compare output "
                           "in --output_dir (only if it wrote all of it).")


def _numbers(name, values, least=1):
  try:
    found = [int(v) for v in values]
  except ValueError:
    found = []
  if not found or any(v < least for v in found):
    raise ValueError(f"--{name} {','.join(values)}: give whole numbers, "
                     f"{least} or more")
  return found


class OnnxModel:
  """An .onnx file under ONNX Runtime, with LiteRTModel's `run_batch`, so
  validate.TaskModel scores it with the task's own code."""

  def __init__(self, path, num_threads=2):
    import onnxruntime
    settings = onnxruntime.SessionOptions()
    settings.intra_op_num_threads = num_threads
    settings.inter_op_num_threads = 1
    self.session = onnxruntime.InferenceSession(
        path, settings, providers=["CPUExecutionProvider"])
    self.outputs = [o.name for o in self.session.get_outputs()]

  def run(self, **inputs):
    values = self.session.run(self.outputs, {
        k: np.asarray(v, np.int32) for k, v in inputs.items()})
    return dict(zip(self.outputs, values))

  def run_batch(self, inputs):
    from converters.runtime import run_rows
    return run_rows(self.run, inputs)

  def median_ms(self, inputs, runs=10):
    from converters.runtime import median_ms
    return median_ms(self.run, inputs, runs)


def _example(vocab_size, length, seed=0):
  """One random, valid [1, L] example: [CLS] ids [SEP], all attended."""
  ids = np.random.default_rng(seed).integers(
      5, vocab_size, (1, length)).astype(np.int32)
  ids[0, 0], ids[0, -1] = 2, 3
  segments = np.zeros_like(ids)
  segments[0, length // 2:] = 1
  return {"ids": ids, "mask": np.ones_like(ids), "segment_ids": segments}


def _convert_tflite(options, length, out):
  """convert_tflite's report of our four files (its own command)."""
  directory = os.path.join(out, "tflite")
  done = subprocess.run(
      [sys.executable, "-m", "converters.convert_tflite", "--model_dir",
       options.model_dir, "--data_dir", options.data_dir, "--output_dir",
       directory, "--modes", ",".join(TFLITE_MODES), "--max_seq_length",
       str(length), "--max_int8_loss", str(options.max_int8_loss),
       "--eval_split", options.eval_split, "--name", "model"],
      capture_output=True, text=True, check=False)
  if done.returncode != 0:
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    raise ValueError(f"convert_tflite failed: {last}")
  with open(os.path.join(directory, "model_report.json")) as f:
    return directory, json.load(f)


def _convert_onnx(model, head, length, out):
  """The two .onnx files: tf2onnx of the contract SavedModel (any
  length), and onnxruntime's dynamic int8 of it."""
  from onnxruntime.quantization import QuantType, quantize_dynamic

  from converters import export
  from tfmodels.staging import scratch_directory
  directory = os.path.join(out, "onnx")
  os.makedirs(directory)
  paths = {name: os.path.join(directory, file) for name, file in ONNX_FILES}
  with scratch_directory("onnx-export-") as scratch:
    saved = os.path.join(scratch, "saved_model")
    export.export_saved_model(model, head, length, saved, True)
    done = subprocess.run(
        [sys.executable, "-m", "tf2onnx.convert", "--saved-model", saved,
         "--output", paths["float32"], "--opset", "17"],
        capture_output=True, text=True, check=False)
    if done.returncode != 0:
      last = (done.stderr.strip().splitlines() or ["no message"])[-1]
      raise ValueError(f"tf2onnx failed: {last}")
  quantize_dynamic(paths["float32"], paths["dynamic int8"],
                   weight_type=QuantType.QInt8)
  return paths


def compare(options, out):
  """The rows of the table (and writes the files into `out`)."""
  from android_bench.device_info import host_facts
  from converters import runtime, validate
  from tfmodels.checkpoints.model_dir import load_model_dir, read_task_spec
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve
  spec = read_task_spec(options.model_dir)
  length = options.max_seq_length or spec["max_seq_length"]
  lengths = [n or length for n in _numbers("lengths", options.lengths, 0)]
  threads = _numbers("threads", options.threads)
  directory, report = _convert_tflite(options, length, out)
  model, config, head = load_model_dir(options.model_dir)
  onnx_paths = _convert_onnx(model, head.kind, length, out)
  task = make_task(spec["task"], options.data_dir, WordPieceTokenizer(
      resolve(options.model_dir, model_flag="--model_dir")), length)
  rows = []
  for mode in TFLITE_MODES:
    path = os.path.join(directory, f"model_{mode}.tflite")
    with open(path, "rb") as f:
      data = f.read()
    metric = report["modes"][mode].get("metric") or {}
    kept = (report["modes"][mode].get("selective") or {}).get("kept")
    rows.append({"runtime": "TFLite", "file": mode + (
        f" ({kept})" if kept and kept != "selective" else ""),
        "path": path, "metric": metric.get("points"),
        "size_mb": len(data) / 1e6,
        "ms": {f"{n}x{t}": runtime.LiteRTModel(data, t).median_ms(
            _example(config.vocab_size, n), options.runs)
               for n in lengths for t in threads}})
  metric_name = report["keras"]["metric"]["name"]
  for name, path in onnx_paths.items():
    scored = task.evaluate(validate.TaskModel(OnnxModel(path)),
                           options.eval_split)
    rows.append({"runtime": "ONNX Runtime", "file": name, "path": path,
                 "metric": validate.headline(scored)[1],
                 "size_mb": os.path.getsize(path) / 1e6,
                 "ms": {f"{n}x{t}": OnnxModel(path, t).median_ms(
                     _example(config.vocab_size, n), options.runs)
                        for n in lengths for t in threads}})
  return {"model_dir": os.path.abspath(options.model_dir),
          "metric": metric_name, "keras": report["keras"]["metric"]["points"],
          "lengths": lengths, "threads": threads, "runs": options.runs,
          "host": host_facts(), "rows": rows}


def markdown(result):
  """The table: each file's dev metric, size and ms per length x threads."""
  cells = [f"{n}x{t}" for n in result["lengths"] for t in result["threads"]]
  isa = (result["host"].get("int8_isa") or {})
  lines = [f"# TFLite and ONNX Runtime: {result['model_dir']}", "",
           f"Dev {result['metric']} of the Keras model: "
           f"{result['keras']:.2f}. Host: {result['host'].get('model')}"
           f", {result['host'].get('cores')} cores, int8 instructions: "
           f"{', '.join(isa.get('instructions') or []) or 'none'}. Median "
           f"ms of {result['runs']} runs, one example; columns L x "
           "threads.", "",
           "| runtime | file | dev " + result["metric"] + " | MB | "
           + " | ".join(f"ms L={c.replace('x', ', ')} thr" for c in cells)
           + " |", "| --- " * (4 + len(cells)) + "|"]
  for r in result["rows"]:
    metric = "-" if r["metric"] is None else f"{r['metric']:.2f}"
    lines.append(f"| {r['runtime']} | {r['file']} | {metric} | "
                 f"{r['size_mb']:.2f} | "
                 + " | ".join(f"{r['ms'][c]:.2f}" for c in cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  from absl import flags
  from tfmodels.flag_checks import refuse_nonfinite_floats
  from tfmodels.staging import OutputError, check_output, staged_directory
  refuse_nonfinite_floats()
  options = from_flags(CompareOptions, flags.FLAGS)
  try:
    import onnxruntime  # noqa: F401
    import tf2onnx  # noqa: F401
  except ImportError as e:
    sys.exit(f"error: {e.name} is not installed (the bench extras: pip "
             "install --no-deps -r requirements-bench.txt)")
  try:
    _numbers("lengths", options.lengths, 0)
    _numbers("threads", options.threads)
    if options.runs < 1:
      raise ValueError(f"--runs {options.runs}: give 1 or more")
    check_output(options.output_dir, "--output_dir", options.overwrite,
                 "onnx_compare")
    with staged_directory(options.output_dir, "onnx_compare",
                          "--output_dir") as out:
      result = compare(options, out)
      with open(os.path.join(out, "onnx_compare.json"), "w") as f:
        json.dump(result, f, indent=1)
      table = markdown(result)
      with open(os.path.join(out, "onnx_compare.md"), "w") as f:
        f.write(table)
  except (OutputError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  print(table)


def define_command_flags():
  define_flags(CompareOptions)


if __name__ == "__main__":
  run_command(define_command_flags, main)
