"""android_bench: benchmark_model latency on phones, emulators or the host.

    python -m android_bench devices [--json]
    python -m android_bench run --target adb --benchmark_binary benchmark_model \
        [--serial SERIAL] [--cpu_mask big] MODEL.tflite|DIR ...
    python -m android_bench run --target host models/
    python -m android_bench run --target host --lengths 32,64,128,256,384 \
        student.tflite teacher.tflite     # dynamic-length files: ms vs L
    python -m android_bench parse saved_output.txt [--json]
    python -m android_bench report RUN.json|DIR ... [--output DIR [--overwrite]]
    python -m android_bench report OLD.json NEW.json --compare [--output DIR]

`run` measures models x --delegates x --threads x --repeats (defaults:
xnnpack, 4 threads, 1 repeat, 1 warm-up + 50 runs) [x --lengths], appends
one JSON per run to --results_dir, prints a Markdown table and writes a PNG
plot beside the JSON (latency against length with --lengths). It exits 1 if any cell failed; what was measured is kept either way.
One run at a time per device (a second is refused: the two would share the
device directory and its cores; the lock lives in this user's 0700 directory
under the temporary root). A .tflite that is empty, not TFLite or truncated
is refused, by name, before anything runs, and so are --lengths a model
cannot take (fixed inputs, or longer than its position table). `report
--overwrite` replaces only a directory report wrote (its
`.written_by.json`), never a link, the runs it reads or a folder holding
anything else.
With --cool_below_c 40 each cell first waits (at most --cool_timeout_s) for
the device to cool; cells that ran hot or throttled are marked in the JSON
and the tables.
"""

import contextlib
import dataclasses
import json
import os
import shlex
import sys

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats

FLAGS = flags.FLAGS
COMMANDS = ("devices", "run", "parse", "report")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchOptions:
  """The command line, one option per flag (a subcommand reads the ones it
  uses). `main` builds it with `command_options.from_flags`, other callers
  with `command_options.with_defaults(BenchOptions, **values)`."""
  # Where the device is.
  adb: str = option("adb", "The adb client binary.")
  adb_server_port: int | None = option(
      None, "adb server port (adb -P); default: $ANDROID_ADB_SERVER_PORT or "
      "5037.")
  serial: str | None = option(None, "Device serial when several are "
                              "attached.")
  # run
  target: str = option("adb", "Where to run.", choices=("adb", "host"))
  benchmark_binary: str | None = option(
      None, "LiteRT benchmark_model built for the device (required for "
      "--target adb; optional for host, where it runs beside the "
      "ai_edge_litert runner).")
  # Thread counts and lengths as given (strings): `_settings` makes them
  # integers.
  threads: tuple = option(("4",), "Thread counts (--num_threads).")
  lengths: tuple = option(
      (), "Sequence lengths to time dynamic-length models at (inputs "
      "[1, L], e.g. 32,64,128,256,384; convert_tflite writes such files), "
      "at most the rows of each one's position table. Default: each "
      "model's own shape.")
  delegates: tuple = option(("xnnpack",), "Any of xnnpack, gpu, nnapi, "
                            "none (plain CPU kernels).")
  repeats: int = option(1, "Times to measure every configuration.")
  warmup_runs: int = option(1, "benchmark_model --warmup_runs.")
  num_runs: int = option(50, "benchmark_model --num_runs.")
  min_secs: float | None = option(None, "benchmark_model --min_secs.")
  max_secs: float | None = option(None, "benchmark_model --max_secs.")
  cpu_mask: str | None = option(None, "Pin with taskset: a hex mask (f0) or "
                                "'big' (cores faster than the slowest "
                                "cluster).")
  timeout: float = option(600.0, "Seconds before one cell is abandoned.")
  reconnect_wait: float = option(10.0, "Seconds to wait for a device that "
                                 "dropped off before skipping the remaining "
                                 "cells.")
  cool_below_c: float | None = option(
      None, "Before each cell, wait until the hottest thermal zone is below "
      "this (degrees C) and the thermal status below --throttled_status; a "
      "cell that starts or ends hotter is marked throttled. Default: no "
      "waiting (the status alone marks cells).")
  throttled_status: int = option(
      1, "Android thermal service status from which a device counts as "
      "throttled (1 light, 2 moderate, 3 severe, 4 critical, 5 emergency, 6 "
      "shutdown).")
  cool_timeout_s: float = option(300.0, "Longest wait for --cool_below_c "
                                 "before one cell; the cell then runs "
                                 "anyway, marked throttled.")
  cool_poll_s: float = option(5.0, "Seconds between thermal reads while "
                              "waiting to cool.")
  op_profiling: bool = option(False, "--enable_op_profiling=true.")
  peak_memory: bool = option(False, "--report_peak_memory_footprint=true.")
  benchmark_args: str = option("", "More benchmark_model flags, e.g. "
                               "'--input_layer_value_range=ids,0,30521'.")
  auto_value_ranges: bool = option(
      True, "Give integer inputs that index a table (ids, segment_ids) "
      "their valid range, and a mask 0..1 (--input_layer*), unless "
      "--benchmark_args sets --input_layer flags.")
  keep: bool = option(False, "Leave the pushed files on the device.")
  remote_dir: str = option("/data/local/tmp", "Device directory.")
  results_dir: str = option("bench_results", "Where run JSONs go.")
  name: str | None = option(None, "A label for the run in reports.")
  plot: bool = option(True, "run: write a PNG beside the JSON.")
  # parse / report / devices
  json: bool = option(False, "parse, devices: print JSON.")
  compare: bool = option(False, "report: compare exactly two runs.")
  output: str | None = option(None, "report: directory for report.md and "
                              "the PNG plots.")
  overwrite: bool = option(False, "report: replace an existing --output.")


define_flags(BenchOptions)


def _fail(message):
  sys.exit(f"error: {message}")


def _adb(options, serial=None):
  from android_bench.adb import Adb
  return Adb(options.adb, serial, options.adb_server_port)


def _mhz(freqs):
  """8 cores as '1786x4 2419x3 2842x1'."""
  groups = []
  for khz in freqs:
    mhz = round(khz / 1000) if khz else "?"
    if groups and groups[-1][0] == mhz:
      groups[-1][1] += 1
    else:
      groups.append([mhz, 1])
  return " ".join(f"{m}x{n}" for m, n in groups) or "-"


def cmd_devices(options, args):
  from android_bench import device_info
  from android_bench.adb import AdbError
  if args:
    _fail(f"devices takes no arguments (got {' '.join(args)})")
  _check_adb_flags(options)
  adb = _adb(options)
  try:
    listed = adb.devices()
    for entry in listed:
      if entry["state"] == "device":
        entry.update(device_info.adb_device_facts(
            _adb(options, entry["serial"])))
  except AdbError as e:
    _fail(str(e))
  if options.json:
    print(json.dumps(listed, indent=1))
  elif not listed:
    _fail("no device attached (adb devices lists none); connect a phone or "
          "start an emulator")
  else:
    rows = [("serial", "state", "model", "android", "abi", "cores",
             "max MHz per core", "big cores")]
    for d in listed:
      big = d.get("big_cores") or []
      rows.append((d["serial"], d["state"], d.get("model") or "-",
                   d.get("android_version") or "-", d.get("abi") or "-",
                   str(d.get("cores") or "-"),
                   _mhz(d.get("cpu_max_freq_khz") or []),
                   f"{big[0]}-{big[-1]} (mask {d['big_core_mask']})"
                   if big and d.get("big_core_mask") else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
      print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
  if not any(d["state"] == "device" for d in listed):
    sys.exit(1)


def _settings(options):
  from android_bench.runner import DELEGATE_FLAGS, Settings
  try:
    threads = tuple(int(t) for t in options.threads)
  except ValueError:
    _fail(f"--threads {','.join(options.threads)}: give integers")
  if not threads or min(threads) < 1:
    _fail("--threads: give thread counts >= 1")
  try:
    lengths = tuple(int(n) for n in options.lengths)
  except ValueError:
    _fail(f"--lengths {','.join(options.lengths)}: give integers")
  if lengths and min(lengths) < 1:
    _fail("--lengths: give sequence lengths >= 1")
  for delegate in options.delegates:
    if delegate not in DELEGATE_FLAGS:
      _fail(f"--delegates {delegate}: use {', '.join(DELEGATE_FLAGS)}")
  if options.repeats < 1 or options.num_runs < 1 or options.warmup_runs < 0:
    _fail("--repeats and --num_runs must be >= 1, --warmup_runs >= 0")
  _check_seconds(options)
  if not options.remote_dir.startswith("/"):
    _fail(f"--remote_dir {options.remote_dir!r}: give an absolute device "
          "directory, e.g. /data/local/tmp")
  if options.cpu_mask and options.cpu_mask != "big":
    from android_bench.device_info import parse_mask
    try:
      parse_mask(options.cpu_mask)
    except ValueError:
      _fail(f"--cpu_mask {options.cpu_mask}: give a hex mask like f0, or big")
  _check_cooling_flags(options)
  try:
    extra = tuple(shlex.split(options.benchmark_args))
  except ValueError as e:
    _fail(f"--benchmark_args: {e}")
  if lengths and any(a.startswith("--input_layer") for a in extra):
    _fail("--lengths sets the inputs' shapes: drop the --input_layer flags "
          "from --benchmark_args")
  return Settings(
      threads=threads, delegates=tuple(options.delegates),
      repeats=options.repeats, warmup_runs=options.warmup_runs,
      num_runs=options.num_runs, min_secs=options.min_secs,
      max_secs=options.max_secs, cpu_mask=options.cpu_mask,
      timeout_s=options.timeout, op_profiling=options.op_profiling,
      peak_memory=options.peak_memory, extra_args=extra, keep=options.keep,
      remote_dir=options.remote_dir, reconnect_wait_s=options.reconnect_wait,
      auto_value_ranges=options.auto_value_ranges,
      cool_below_c=options.cool_below_c,
      throttled_status=options.throttled_status,
      cool_timeout_s=options.cool_timeout_s, cool_poll_s=options.cool_poll_s,
      lengths=lengths)


def _check_seconds(options):
  """Durations: finite, not negative; a cell's --timeout above zero."""
  for flag in ("timeout", "reconnect_wait", "min_secs", "max_secs"):
    value = getattr(options, flag)
    if value is None:  # min_secs, max_secs: the tool's default
      continue
    if not 0 <= value < float("inf") or (flag == "timeout" and value == 0):
      _fail(f"--{flag} {value:g}: give seconds "
            + ("> 0" if flag == "timeout" else ">= 0"))
  if options.min_secs is not None and options.max_secs is not None and \
      options.max_secs < options.min_secs:
    _fail(f"--max_secs {options.max_secs:g} is below --min_secs "
          f"{options.min_secs:g}")


def _check_output(path, flag):
  """One line (and exit 1) unless `path` can become a directory of ours."""
  from tfmodels.staging import OutputError, check_writable
  if os.path.exists(path) and not os.path.isdir(path):
    _fail(f"{flag} {path}: exists and is not a directory")
  try:
    check_writable(path, flag)
  except OutputError as e:
    _fail(str(e))


def _check_adb_flags(options):
  port = options.adb_server_port
  if port is not None and not 0 < port < 65536:
    _fail(f"--adb_server_port {port}: give a TCP port, 1..65535")


def _check_cooling_flags(options):
  from android_bench.thermal import STATUS_NAMES
  limit = options.cool_below_c
  if limit is not None and not 0 < limit < 1000:
    _fail(f"--cool_below_c {limit:g}: give a temperature in degrees C "
          f"above 0, e.g. 40")
  if not 1 <= options.throttled_status < len(STATUS_NAMES):
    _fail(f"--throttled_status {options.throttled_status}: give 1 (light) .. "
          f"{len(STATUS_NAMES) - 1} ({STATUS_NAMES[-1]})")
  if not 0 <= options.cool_timeout_s < float("inf"):
    _fail(f"--cool_timeout_s {options.cool_timeout_s:g}: give seconds >= 0")
  if not 0 < options.cool_poll_s < float("inf"):
    _fail(f"--cool_poll_s {options.cool_poll_s:g}: give seconds > 0")


def cmd_run(options, args):
  from android_bench import report, results
  from android_bench.adb import AdbError, choose_device
  from android_bench.model_facts import (ModelError, check_model, find_models,
                                         length_facts)
  from android_bench.runner import (AdbTarget, HostTarget, SetupError,
                                    check_lengths, device_lock, run_matrix)
  if not args:
    _fail("run: give .tflite files or directories holding them")
  settings = _settings(options)
  _check_adb_flags(options)
  _check_output(options.results_dir, "--results_dir")
  try:
    models = find_models(args)
    for model in models:  # empty, not TFLite, truncated: before any run
      check_model(model)
  except ModelError as e:
    _fail(str(e))
  if not models:
    _fail(f"no .tflite files in {' '.join(args)}")
  try:  # fixed inputs, lengths past the position table: before any device
    check_lengths({os.path.basename(m): length_facts(m) for m in models}
                  if settings.lengths else {}, settings.lengths)
  except SetupError as e:
    _fail(str(e))
  binary = options.benchmark_binary
  if binary and not os.path.isfile(binary):
    _fail(f"--benchmark_binary {binary}: no such file")
  held = contextlib.ExitStack()
  if options.target == "adb":
    if not binary:
      _fail("--target adb needs --benchmark_binary (LiteRT's benchmark_model "
            "for the device's ABI; docs/android_app.md says where to get it)")
    try:
      adb = _adb(options)
      adb.serial = choose_device(adb, options.serial)
      held.enter_context(device_lock(adb.serial))
      target = AdbTarget(adb, binary, settings)
      target.facts()
    except (AdbError, SetupError) as e:
      held.close()
      _fail(str(e))
  else:
    target = HostTarget(settings, binary)
  from tfmodels.staging import OutputError
  with held:
    try:
      run, path = run_matrix(target, models, settings, options.results_dir,
                             argv=sys.argv, name=options.name, binary=binary)
    except (AdbError, OutputError, SetupError) as e:
      _fail(str(e))  # OutputError: a link in the way; SetupError: --lengths
    except KeyboardInterrupt:
      _fail(f"interrupted; what was measured is in {options.results_dir}")
  print()
  print(report.markdown_table([run]), end="")
  outputs = [path]
  if options.plot and any(r.get("latency_ms") for r in report.summarize(run)):
    plot = os.path.splitext(path)[0] + ".png"
    try:
      (report.plot_lengths if settings.lengths else report.plot_latency)(
          [run], plot)
    except OutputError as e:
      _fail(f"{e} ({path} keeps the run)")
    outputs.append(plot)
  print(f"\nwrote {' and '.join(outputs)}")
  failed = [c for c in run["cells"] if c["status"] != "ok"]
  if failed:
    sys.exit(f"error: {len(failed)} of {len(run['cells'])} cells did not "
             f"finish ({results.run_path(options.results_dir, run)} keeps the "
             f"rest)")


def _summary_lines(parsed):
  lines = []
  if parsed["model_path"]:
    size = parsed["model_size_mb"]
    lines.append(f"model {parsed['model_path']}" +
                 (f" ({size:g} MB)" if size is not None else ""))
  summary = parsed["summary"]
  if summary:
    first = summary["first_inference_us"]  # None in old builds' logs
    lines.append(f"init {summary['init_us'] / 1e3:.3f} ms, " + (
        "" if first is None else f"first inference {first / 1e3:.3f} ms, ")
        + f"warm-up mean {summary['warmup_avg_us'] / 1e3:.3f} ms, inference "
        f"mean {summary['inference_avg_us'] / 1e3:.3f} ms")
  t = parsed["timings"]
  if t:
    parts = [f"{t.get('count')} runs"] + [
        f"{k} {t[k] / 1e3:.3f}" for k in ("avg", "median", "min", "max",
                                          "std", "p5", "p95") if k in t]
    lines.append("inference (ms): " + ", ".join(parts))
  memory = parsed["memory"]
  if any(k in memory for k in ("init_mb", "overall_mb", "peak_mb")):
    lines.append("memory (MB): " + ", ".join(
        f"{k[:-3]} {memory[k]:g}" for k in ("init_mb", "overall_mb",
                                             "peak_mb") if k in memory))
  for d in parsed["delegates"]:
    lines.append(f"delegate {d['delegate']}: {d['replaced_nodes']} of "
                 f"{d['total_nodes']} nodes in {d['partitions']} partitions")
  regular = parsed["op_profile"].get("regular") or {}
  by_type = regular.get("summary_by_node_type") or []
  if by_type:
    top = ", ".join(f"{r.get('node_type')} {r.get('percent')}%"
                    for r in by_type[:3])
    lines.append(f"op profile: {regular.get('nodes_executed', '?')} nodes; "
                 f"top node types {top}")
  for error in parsed["errors"]:
    lines.append(f"error line: {error}")
  if parsed["unparsed"]:
    lines.append(f"{len(parsed['unparsed'])} other lines kept (--json)")
  if not parsed["complete"]:
    lines.append("incomplete: no 'Inference timings in us' line")
  return lines


def cmd_parse(options, args):
  from android_bench.output_parser import parse_output, split_sessions
  if not args:
    _fail("parse: give a saved benchmark_model output file")
  parsed_all = []
  for path in args:
    try:
      with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    except OSError as e:
      _fail(f"{path}: {e.strerror}")
    sessions = [parse_output(s) for s in split_sessions(text)]
    if not any(p["timings"] or p["summary"] or p["params"] for p in sessions):
      _fail(f"{path}: no benchmark_model output found")
    for i, parsed in enumerate(sessions):
      parsed_all.append(dict(parsed, file=path, session=i))
  if options.json:
    print(json.dumps(parsed_all[0] if len(parsed_all) == 1 else parsed_all,
                     indent=1))
    return
  for parsed in parsed_all:
    print(f"{parsed['file']}" + (f" (run {parsed['session'] + 1})"
                                 if len(parsed_all) > len(args) else "") + ":")
    for line in _summary_lines(parsed):
      print("  " + line)


# The writer named in the record of a report directory (`staged_directory`):
# --overwrite replaces a directory only when this command wrote all of it.
REPORT_OWNER = "android_bench report"
REPORT_FILES = ("report.md", "latency.png", "lengths.png", "compare.png")
REPORT_TITLE = "# android_bench report\n"


def _older_report(directory):
  """Whether `directory` is a report written before reports carried their
  owner record: only report's files, plain files, report.md with its title."""
  try:
    names = os.listdir(directory)
    if "report.md" not in names or not set(names) <= set(REPORT_FILES) or \
        any(not os.path.isfile(os.path.join(directory, n))
            or os.path.islink(os.path.join(directory, n)) for n in names):
      return False
    with open(os.path.join(directory, "report.md"), encoding="utf-8",
              errors="replace") as f:
      return f.read(len(REPORT_TITLE)) == REPORT_TITLE
  except OSError:
    return False


def cmd_report(options, args):
  from android_bench import report
  from android_bench.results import ResultsError, find_runs, load_run
  from tfmodels.staging import (OutputError, check_output, lock_until_exit,
                                staged_directory)
  paths = find_runs(args)
  if not paths:
    _fail("report: give run JSON files or a results directory")
  if options.output:
    inputs = [("results directory" if os.path.isdir(a) else "run", a)
              for a in args]
    try:  # before any work: never a link, an input, or someone else's files
      check_output(options.output, "--output", options.overwrite,
                   owner=REPORT_OWNER, inputs=inputs,
                   recognised=_older_report)
      lock_until_exit(options.output, "--output")  # one writer of the report
    except OutputError as e:
      _fail(str(e))
  try:
    runs = [load_run(p) for p in paths]
  except ResultsError as e:
    _fail(str(e))
  if options.compare and len(runs) != 2:
    _fail(f"--compare needs exactly two runs, got {len(runs)}")
  text = "## Latency\n\n" + report.markdown_table(runs)
  pairs = None
  if options.compare:
    table, pairs = report.compare(runs[0], runs[1])
    text = "## Comparison (B / A, below 1 is faster)\n\n" + table + "\n" + text
  print(text, end="")
  if not options.output:
    print("\n(pass --output DIR for report.md and PNG plots)")
    return
  try:
    with staged_directory(options.output, REPORT_OWNER, "--output",
                          recognised=_older_report) as staging:
      with open(os.path.join(staging, "report.md"), "w",
                encoding="utf-8") as f:
        f.write(REPORT_TITLE + "\n" + text)
      written = ["report.md"]
      if report.plot_latency(runs, os.path.join(staging, "latency.png")):
        written.append("latency.png")
      if report.plot_lengths(runs, os.path.join(staging, "lengths.png")):
        written.append("lengths.png")
      if pairs and report.plot_ratios(
          pairs, os.path.join(staging, "compare.png"),
          f"{report.run_label(runs[1])} vs {report.run_label(runs[0])}"):
        written.append("compare.png")
  except OutputError as e:  # e.g. someone's files joined it meanwhile
    _fail(str(e))
  print("\nwrote " + ", ".join(os.path.join(options.output, w)
                                for w in written))


def main(argv):
  if len(argv) < 2 or argv[1] not in COMMANDS:
    _fail(f"give a command: {', '.join(COMMANDS)}")
  refuse_nonfinite_floats(FLAGS)
  options = from_flags(BenchOptions, FLAGS)
  {"devices": cmd_devices, "run": cmd_run, "parse": cmd_parse,
   "report": cmd_report}[argv[1]](options, argv[2:])


def run():
  from tfmodels.sigterm import exit_on_sigterm
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
