"""Reading back what pipeline steps and commands wrote: JSON files,
history.jsonl, TensorBoard scalars, a step's `.done` marker, a model
directory's config, convert_tflite reports, android_bench runs and GLUE
TSV splits.

    read_json(path)                 # None when the file is not there yet
    read_marker(step_output)        # {"seconds", "finished", "peak_memory_mb"}
    conversion_summary(read_json(report))

Each reader returns None (or an empty value) for a piece not written yet,
so a half-finished run still reports.
"""

import json
import math
import os
import struct


def read_json(path):
  """The JSON object at path, or None when the file is not there yet."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_history(path):
  """history.jsonl rows by step (a resumed run appends; the last wins)."""
  if not os.path.exists(path):
    return []
  rows = {}
  with open(path) as f:
    for line in f:
      if line.strip():
        row = json.loads(line)
        rows[row["step"]] = row
  return [rows[s] for s in sorted(rows)]


def read_scalars(directory):
  """{tag: [(step, value)]} from a run's TensorBoard event files.

  Event files are TFRecords of `Event` protos; TensorBoard's own protos
  parse them without loading TensorFlow (the report must stay quick).
  """
  if not os.path.isdir(directory):
    return {}
  from tensorboard.compat.proto import event_pb2
  from tensorboard.util import tensor_util
  scalars = {}
  for name in sorted(os.listdir(directory)):
    if ".tfevents." not in name:
      continue
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
    pos = 0
    while pos + 12 <= len(data):  # length (8), its CRC (4), data, CRC (4)
      (length,) = struct.unpack("<Q", data[pos:pos + 8])
      record = data[pos + 12:pos + 12 + length]
      pos += 16 + length
      if len(record) < length:
        break  # the last record of a file still being written
      event = event_pb2.Event.FromString(record)
      for value in event.summary.value:
        if value.HasField("tensor"):
          number = float(tensor_util.make_ndarray(value.tensor))
        elif value.HasField("simple_value"):
          number = value.simple_value
        else:
          continue
        scalars.setdefault(value.tag, {})[event.step] = number
  return {tag: sorted(by_step.items()) for tag, by_step in scalars.items()}


def read_marker(directory):
  """{"seconds", "finished", "peak_memory_mb"} of a step's `.done` marker
  (None each when missing). The marker's first token is the seconds the
  step took ("SECONDS s"); a later token `peak_rss_mb=N`, if the pipeline
  writes one, is the step's peak memory. Anything else is ignored."""
  facts = {"seconds": None, "finished": None, "peak_memory_mb": None}
  path = os.path.join(directory, ".done")
  try:
    with open(path) as f:  # the list of files the step wrote comes last
      tokens = f.read().split("\nfiles ")[0].split()
    facts["finished"] = os.path.getmtime(path)
  except (OSError, UnicodeDecodeError):
    return facts
  facts["seconds"] = _number(tokens[0]) if tokens else None
  for token in tokens[1:]:
    name, _, value = token.partition("=")
    if name == "peak_rss_mb":
      facts["peak_memory_mb"] = _number(value)
  return facts


def _number(text):
  """A finite, non-negative float, or None."""
  try:
    value = float(text)
  except ValueError:
    return None
  return value if math.isfinite(value) and value >= 0 else None


def _marker(directory):
  """(seconds the step took, when it finished) from its `.done` marker."""
  facts = read_marker(directory)
  if facts["seconds"] is None:
    return None, None
  return facts["seconds"], facts["finished"]


def step_seconds(directory):
  """Seconds a pipeline step took (its marker), None if it has not run."""
  return _marker(directory)[0]


def config_params(config_file, seq_length):
  """Analytic parameter counts (tfmodels.summary) and the shape of a run's
  config.json, None before it is written."""
  if not os.path.exists(config_file):
    return None
  from tfmodels.configs import load_config
  from tfmodels.summary import count
  config = load_config(config_file)
  counts = count(config, min(seq_length, config.max_position_embeddings))
  return {k: counts[k] for k in ("params_encoder", "params_embedding",
                                 "params_blocks", "flops")} | {
      "name": config.name, "layers": config.num_hidden_layers,
      "heads": config.num_attention_heads,
      "intermediate_size": config.intermediate_size,
      "normalization": config.normalization_type, "act": config.hidden_act}


def latency_rows(out):
  """(paths, rows) of the android_bench runs under OUT/bench/host and
  OUT/bench/phone: the run files read, and a row per model, mode, threads,
  delegate and length (the one it ran at: `--lengths`', else its own
  shape's)."""
  from android_bench import report, results
  paths, rows = [], []
  for target in ("host", "phone"):
    directory = os.path.join(out, "bench", target)
    if not os.path.isdir(directory):
      continue
    for path in results.find_runs([directory]):
      try:
        run = results.load_run(path)
      except results.ResultsError:
        continue
      paths.append(path)
      for row in report.summarize(run):
        own = ((run["models"].get(row["model"]) or {}).get("inputs")
               or [{"shape": [None, None]}])[0]["shape"]
        stem = row["model"].rsplit(".", 1)[0]
        name, _, mode = stem.rpartition("_")
        device = run.get("device") or {}
        rows.append({"target": target, "device": device.get("model"),
                     "int8_isa": device.get("int8_isa"),
                     "model": name, "mode": mode,
                     "threads": row["threads"], "delegate": row["delegate"],
                     "length": row.get("length") or own[-1],
                     "latency_ms": row.get("latency_ms"),
                     "low_ms": row.get("low_ms"),
                     "high_ms": row.get("high_ms"),
                     "status": ",".join(row["statuses"])})
  return paths, rows


def conversion_summary(report):
  """The parts of a convert_tflite report the demo shows."""
  modes = {}
  for mode, r in report.get("modes", {}).items():
    xnn = r.get("xnnpack") or {}
    modes[mode] = {
        "size_mb": r.get("size_bytes", 0) / 1e6,
        "metric": (r.get("metric") or {}).get("points"),
        "drop": (r.get("metric") or {}).get("drop"),
        "max_abs_diff": (r.get("difference") or {}).get("max_abs"),
        "mean_abs_diff": (r.get("difference") or {}).get("mean_abs"),
        "float_ops": sum((r.get("float_ops") or {}).values()),
        "float_op_types": r.get("float_ops") or {},
        "ops": sum((r.get("ops") or {}).values()),
        "xnnpack": (f"{xnn.get('delegated_nodes')}/{xnn.get('total_nodes')}"
                    if xnn else None),
        "not_delegated": xnn.get("not_delegated") or {}}
  keras = (report.get("keras") or {}).get("metric") or {}
  return {"task": report.get("task"), "seq_length": report.get("seq_length"),
          "metric_name": keras.get("name"), "keras_metric": keras.get("points"),
          "modes": modes, "passed": report.get("passed"),
          "failures": report.get("failures")}


def tsv_rows(directory, split):
  """Examples in a GLUE-layout split (rows after the header)."""
  from tfmodels.data.glue import split_path
  from tfmodels.data.text_io import read_lines
  try:
    return sum(1 for line in read_lines(split_path(directory, split))[1:]
               if line)
  except (ValueError, OSError):
    return None


def arm64_result(directory):
  """arm64_check's arm64.json in `directory`, or {"not_run": why}: the
  machine has no usable arm64 root (its reason), or the step has not run."""
  found = read_json(os.path.join(directory, "arm64.json"))
  if found:
    return found
  from android_bench.arm64 import arm64_root
  return {"not_run": arm64_root()[1] or "the arm64 step has not run yet"}
