"""The one results object of a run, its JSON file, and reading it back.

A run is a dict (JSON as written) whichever target produced it:

    {"kind": "android_bench.run", "schema_version": 1, "run_id", "name",
     "started_at", "finished_at", "complete": bool, "argv": [...],
     "target": "adb" | "host",
     "device":   {kind, serial, manufacturer, model, android_version, sdk, abi,
                  soc, cores, cpu_max_freq_khz, big_cores, big_core_mask ...},
     "settings": {threads, delegates, repeats, warmup_runs, num_runs,
                  cpu_mask, timeout_s, benchmark_binary {path, sha256},
                  extra_args, remote_dir, cool_below_c, throttled_status,
                  cool_timeout_s, cool_poll_s},
     "models":   {name: {path, size_bytes, sha256, md5, inputs, outputs,
                         nodes, op_counts}},
     "cells": [{"model", "runner", "delegate", "threads", "repeat",
                "cpu_mask", "status": ok|error|timeout|skipped, "error",
                "command", "started_at", "wall_s",
                "timings_us": {count, min, median, mean, max, std, first,
                               p5, p95},
                "warmup_us": {...same...}, "init_us", "first_inference_us",
                "session_init_ms", "memory_mb": {init, overall, peak},
                "delegate_coverage": [{delegate, replaced_nodes, total_nodes,
                                       partitions}],
                "op_profile": {...},
                "thermal": {"before", "after", "before_wait", "waited_s",
                            "reads", "wait_timed_out", "hot_before",
                            "hot_after"},
                "throttled": bool | null,
                "unparsed_lines": [...], "raw_output": "..."}]}

A thermal reading is {"status": thermal service status or null,
"zones_c": {zone type: degrees C}, "max_c"}. "before" is the state the cell
started in, "before_wait" the first reading when the harness had to wait
for the device to cool (else null), "waited_s" the time it waited
(`started_at` and `wall_s` leave the wait out), "reads" how many readings
that took, "wait_timed_out" whether --cool_timeout_s ran out with the
device still hot. "hot_before" / "hot_after" list why the device counted as
hot (status >= settings.throttled_status, hottest zone >= cool_below_c), []
when it did not; "throttled" is true when either is non-empty, null when
the cell has no thermal record. Runs written before these fields existed
hold only "before" and "after" and no "throttled"; they load as they are
(report.py judges them by the status, thermal.cell_throttled).

Timings stay in the tool's microseconds; `median`, `p5`, `p95` are null when
the benchmark_model build predates percentiles. The file is rewritten
(atomically) after every cell, so a run that dies keeps what it measured and
says `"complete": false`.
"""

import datetime
import json
import os
import uuid

from tfmodels.staging import write_file

KIND = "android_bench.run"
SCHEMA_VERSION = 1


class ResultsError(ValueError):
  """A file that is not an android_bench run (one line, names the file)."""


def now_iso():
  return datetime.datetime.now(datetime.timezone.utc).isoformat(
      timespec="seconds")


def new_run(target, device, settings, models, argv, name=None):
  stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
  return {"kind": KIND, "schema_version": SCHEMA_VERSION,
          "run_id": f"{stamp}-{uuid.uuid4().hex[:6]}", "name": name,
          "started_at": now_iso(), "finished_at": None, "complete": False,
          "argv": list(argv), "target": target, "device": device,
          "settings": settings, "models": models, "cells": []}


def timings_from_stat(stat):
  """A parsed `count= ... avg= std=` line in the schema's names."""
  if not stat:
    return None
  count = stat.get("count", 0)
  if count == 1 and "curr" in stat:  # the tool prints only curr for one run
    value = stat["curr"]
    stat = dict({"first": value, "min": value, "max": value, "avg": value,
                 "std": 0}, **stat)
  return {"count": count, "min": stat.get("min"),
          "median": stat.get("median"), "mean": stat.get("avg"),
          "max": stat.get("max"), "std": stat.get("std"),
          "first": stat.get("first"), "p5": stat.get("p5"),
          "p95": stat.get("p95")}


def fill_cell(cell, parsed):
  """Copies what the parser found into a cell (status is the caller's)."""
  summary = parsed.get("summary") or {}
  memory = parsed.get("memory") or {}
  cell.update({
      "timings_us": timings_from_stat(parsed.get("timings")),
      "warmup_us": timings_from_stat(parsed.get("warmup")),
      "init_us": summary.get("init_us"),
      "first_inference_us": summary.get("first_inference_us"),
      "session_init_ms": parsed.get("init_ms"),
      "memory_mb": {"init": memory.get("init_mb"),
                    "overall": memory.get("overall_mb"),
                    "peak": memory.get("peak_mb")},
      "delegate_coverage": [
          {k: d[k] for k in ("delegate", "replaced_nodes", "total_nodes",
                             "partitions")}
          for d in parsed.get("delegates", [])],
      "op_profile": parsed.get("op_profile") or None,
      "unparsed_lines": parsed.get("unparsed", []),
  })
  return cell


def run_path(results_dir, run):
  return os.path.join(results_dir, f"{run['run_id']}.json")


def save_run(run, results_dir):
  """Writes (or rewrites) the run's JSON atomically; returns its path."""
  return write_file(run_path(results_dir, run),
                    json.dumps(run, indent=1) + "\n")


def load_run(path):
  """Reads and checks a run file; ResultsError names what is wrong."""
  try:
    with open(path) as f:
      run = json.load(f)
  except OSError as e:
    raise ResultsError(f"{path}: {e.strerror}") from e
  except ValueError as e:
    raise ResultsError(f"{path}: not JSON ({e})") from e
  if not isinstance(run, dict) or run.get("kind") != KIND:
    raise ResultsError(f"{path}: not an android_bench run file")
  if run.get("schema_version") != SCHEMA_VERSION:
    raise ResultsError(f"{path}: schema version {run.get('schema_version')}"
                       f", this tool reads {SCHEMA_VERSION}")
  for i, cell in enumerate(run.get("cells", [])):
    for key in ("model", "delegate", "threads", "status"):
      if key not in cell:
        raise ResultsError(f"{path}: cell {i} has no {key!r}")
  return run


def find_runs(paths):
  """Run files named directly, or every run in the named directories."""
  found = []
  for path in paths:
    if os.path.isdir(path):
      found.extend(sorted(os.path.join(path, f) for f in os.listdir(path)
                          if f.endswith(".json") and not f.startswith(".")))
    else:
      found.append(path)
  return found
