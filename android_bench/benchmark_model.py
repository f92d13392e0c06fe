"""A host stand-in for LiteRT's `benchmark_model`, built on ai_edge_litert.

    python -m android_bench.benchmark_model --graph=model.tflite \
        --num_threads=4 --warmup_runs=1 --num_runs=50 [--use_xnnpack=false] \
        [--report_peak_memory_footprint=true] \
        [--input_layer_value_range=ids,0,30521:mask,1,1]

Why: the harness's host target and the stand-in device of the adb tests need
a `benchmark_model` that runs anywhere Python does, takes the same flags and
prints the same lines (so one parser reads both). It follows the tool's
method: time the interpreter set-up (load, delegate, allocate) as init, fill
inputs with the tool's random values (floats in [-0.5, 0.5], integers in
[0, 99] unless a value range is given), run warm-up then regular runs until
both the run count and the minimum seconds are reached (never past
`max_secs`), and report memory as the growth of the process's max RSS since
start, plus periodic RSS sampling for the peak (that peak includes the Python
interpreter's own ~45 MB: compare host peaks with each other, not with a
phone's).

Delegate coverage is measured, not assumed: the XNNPACK default delegate is
applied by LiteRT on allocation; the original nodes whose outputs a DELEGATE
node now produces are counted by walking back from its outputs to its inputs.

What it cannot do: per-op profiling (the Python API exposes no profiler),
and the GPU / NNAPI delegates (Android only): those flags end the run with an
error line and exit status 1, like a tool built without them. Unknown flags
are reported as unconsumed and ignored, as the real tool does.
"""

import dataclasses
import os
import resource
import sys
import threading
import time

from absl import app, flags

from converters.delegates import delegate_coverage
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import nonfinite_float_flag

FLAGS = flags.FLAGS
_XNNPACK = "TfLiteXNNPackDelegate"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchmarkOptions:
  """The tool's known flags, one option per flag. `main` parses them and
  builds this with `command_options.from_flags`; other callers use
  `command_options.with_defaults(BenchmarkOptions, **values)`."""
  graph: str = option("", "The .tflite model to benchmark.")
  num_threads: int = option(-1, "Threads of the CPU kernels and XNNPACK "
                            "(-1: the runtime's choice).")
  num_runs: int = option(50, "Minimum number of regular runs.")
  min_secs: float = option(1.0, "Minimum seconds of regular runs.")
  max_secs: float = option(150.0, "Stop runs after this many seconds.")
  warmup_runs: int = option(1, "Minimum number of warm-up runs.")
  warmup_min_secs: float = option(0.5, "Minimum seconds of warm-up.")
  run_delay: float = option(-1.0, "Seconds to sleep between runs.")
  use_xnnpack: bool = option(True, "Apply the XNNPACK delegate.")
  use_gpu: bool = option(False, "GPU delegate (not on the host).")
  use_nnapi: bool = option(False, "NNAPI delegate (not on the host).")
  enable_op_profiling: bool = option(False, "Not supported on the host.")
  report_peak_memory_footprint: bool = option(
      False, "Sample the RSS periodically and report its peak.")
  memory_footprint_check_interval_ms: int = option(
      50, "Sampling period of the peak memory monitor.")
  input_layer: str = option("", "Every input's name, comma-separated, in "
                            "the interpreter's order (matched by position).")
  input_layer_shape: str = option("", "Their shapes, e.g. "
                                  "1,128:1,128:1,128.")
  input_layer_value_range: str = option(
      "", "name,low,high[:...] inclusive integer ranges; names from "
      "--input_layer.")
  verbose: bool = option(False, "Print every parameter.")


define_flags(BenchmarkOptions)


def log(message):
  """The tool's logger: prefixed lines on stderr, flushed at once."""
  sys.stderr.write(f"INFO: {message}\n")
  sys.stderr.flush()


def fmt(value):
  """C++ ostream's default rendering of a double (6 significant digits)."""
  return f"{value:g}"


class Stat:
  """Running statistics in the tool's `count= first= ... std=` format."""

  def __init__(self):
    self.values = []

  def add(self, value):
    self.values.append(value)

  def percentile(self, p):
    ordered = sorted(self.values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]

  def avg(self):
    return sum(self.values) / len(self.values) if self.values else 0.0

  def __str__(self):
    n = len(self.values)
    if n == 0:
      return "count=0"
    percentiles = (f" p5={self.percentile(5)} median={self.percentile(50)}"
                   f" p95={self.percentile(95)}")
    if n == 1:
      return f"count=1 curr={self.values[0]}" + percentiles
    mean = self.avg()
    std = (sum((v - mean) ** 2 for v in self.values) / n) ** 0.5
    return (f"count={n} first={self.values[0]} curr={self.values[-1]} "
            f"min={min(self.values)} max={max(self.values)} avg={fmt(mean)} "
            f"std={round(std)}" + percentiles)


class PeakMemoryMonitor:
  """Samples the resident set size in a thread (the tool's periodic monitor)."""

  def __init__(self, interval_s):
    self.interval_s = interval_s
    self.peak_bytes = 0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)

  def _sample(self):
    with open("/proc/self/statm") as f:
      pages = int(f.read().split()[1])
    self.peak_bytes = max(self.peak_bytes, pages * os.sysconf("SC_PAGE_SIZE"))

  def _run(self):
    while not self._stop.is_set():
      self._sample()
      self._stop.wait(self.interval_s)

  def start(self):
    self._thread.start()

  def stop(self):
    self._stop.set()
    self._thread.join()
    self._sample()


def max_rss_mb():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def input_layer_info(options, num_inputs):
  """[(name, shape, value range or None)] per input from --input_layer*
  (`options`' fields of those names), or None without --input_layer. Raises
  ValueError with the tool's complaint: like the tool, a value range must
  name an --input_layer entry, which must list every input (matched by
  position) with a shape."""
  names = [n for n in options.input_layer.split(",") if n]
  shapes = [s for s in options.input_layer_shape.split(":") if s]
  ranges = {}
  for item in filter(None, options.input_layer_value_range.split(":")):
    fields = item.split(",")
    if len(fields) != 3:
      raise ValueError(f"Wrong input value range item specified: {item}")
    try:
      low, high = int(fields[1]), int(fields[2])
    except ValueError:
      low = high = None
    if low is None or low > high:
      raise ValueError(f"Wrong low and high value of the input value range "
                       f"specified: {item}")
    if fields[0] not in names:
      raise ValueError(f"Cannot find the corresponding input_layer name("
                       f"{fields[0]}) in --input_layer as "
                       f"{options.input_layer}")
    ranges[fields[0]] = (low, high)
  if not names:
    return None
  if len(names) != len(shapes):
    raise ValueError(f"The number of items in --input_layer_shape "
                     f"({options.input_layer_shape}, with {len(shapes)} items)"
                     f" must match the number of items in --input_layer "
                     f"({options.input_layer}, with {len(names)} items).")
  if len(names) != num_inputs:
    raise ValueError(f"Inputs mismatch: Model inputs #:{len(names)} "
                     f"expected: {num_inputs}")
  return [(name, [int(d) for d in shape.split(",")], ranges.get(name))
          for name, shape in zip(names, shapes)]


def random_inputs(details, ranges, rng):
  """The tool's random inputs: uniform floats in [-0.5, 0.5], integers in the
  inclusive range given for that position or [0, 99] (int8 [-127, 127],
  uint8 [0, 254])."""
  import numpy as np
  values = []
  for detail, value_range in zip(details, ranges):
    dtype, shape = np.dtype(detail["dtype"]), detail["shape"]
    if dtype.kind == "f":
      value = rng.uniform(-0.5, 0.5, shape)
    elif dtype.kind == "b":
      value = rng.integers(0, 2, shape)
    else:
      default = {np.dtype("int8"): (-127, 127),
                 np.dtype("uint8"): (0, 254)}.get(dtype, (0, 99))
      low, high = value_range or default
      value = rng.integers(low, high + 1, shape)
    values.append(value.astype(dtype))
  return values


def _run_loop(interpreter, inputs, details, min_runs, min_secs, max_secs,
              run_delay):
  log(f"Running benchmark for at least {min_runs} iterations and at least "
      f"{fmt(min_secs)} seconds but terminate if exceeding {fmt(max_secs)} "
      f"seconds.")
  stat = Stat()
  start = time.perf_counter()
  while True:
    now = time.perf_counter()
    if (len(stat.values) >= min_runs and now - start >= min_secs) or \
        now - start > max_secs:
      break
    for detail, value in zip(details, inputs):
      interpreter.set_tensor(detail["index"], value)
    begin = time.perf_counter()
    interpreter.invoke()
    stat.add(round((time.perf_counter() - begin) * 1e6))
    if run_delay > 0:
      time.sleep(run_delay)
  log(str(stat))
  log("")
  return stat


class _Failure(Exception):
  """Ends the run with the tool's `ERROR: <message>` line and status 1."""


def benchmark(options, unconsumed=()):
  """Runs the benchmark `options` (a BenchmarkOptions) describe; returns the
  exit status. `unconsumed`: the command line's unknown flags, logged."""
  import numpy  # pylint: disable=unused-import
  start_rss = max_rss_mb()  # after numpy: the memory deltas leave it out
  _log_parameters(options, unconsumed)
  try:
    _check_supported(options)
    monitor = _start_monitor(options)
    from ai_edge_litert import interpreter as litert
    init_begin = time.perf_counter()
    model = _read_model(options.graph)
    interpreter, layers = _interpreter(litert, model, options)
    _log_delegation(interpreter)
    init_us = round((time.perf_counter() - init_begin) * 1e6)
    init_rss = max_rss_mb()
    log(f"The input model file size (MB): {fmt(len(model) / 1e6)}")
    log(f"Initialized session in {fmt(init_us / 1e3)}ms.")
    warmup, regular = _measure(interpreter, layers, options)
  except _Failure as e:
    print(f"ERROR: {e}", file=sys.stderr)
    return 1
  first = warmup.values[0] if warmup.values else 0
  log(f"Inference timings in us: Init: {init_us}, First inference: {first}, "
      f"Warmup (avg): {fmt(warmup.avg())}, Inference (avg): "
      f"{fmt(regular.avg())}")
  _log_memory(start_rss, init_rss, monitor)
  return 0


def _log_parameters(options, unconsumed):
  """The tool's banner: the parameters it runs with."""
  log("STARTING!")
  log(f"Log parameter values verbosely: [{int(options.verbose)}]")
  log(f"Min num runs: [{options.num_runs}]")
  log(f"Num threads: [{options.num_threads}]")
  log(f"Min warmup runs: [{options.warmup_runs}]")
  log(f"Graph: [{options.graph}]")
  log(f"Enable op profiling: [{int(options.enable_op_profiling)}]")
  log(f"#threads used for CPU inference: [{options.num_threads}]")
  log(f"Use xnnpack: [{int(options.use_xnnpack)}]")
  if options.report_peak_memory_footprint:
    log("Report the peak memory footprint: [1]")
  if unconsumed:
    log(f"Unconsumed cmdline flags: {' '.join(unconsumed)}")


def _check_supported(options):
  """Refuses a run without --graph or with a delegate the host lacks; op
  profiling only draws a warning (the timings are still whole-model)."""
  if not options.graph:
    raise _Failure("Please specify the name of your TF Lite input file with "
                   "--graph")
  for flag, name in (("use_gpu", "GPU"), ("use_nnapi", "NNAPI")):
    if getattr(options, flag):
      raise _Failure(f"the {name} delegate is not available in the "
                     f"ai_edge_litert host runner (Android only).")
  if options.enable_op_profiling:
    print("WARNING: op profiling is not available in the ai_edge_litert host "
          "runner; timings are whole-model only.", file=sys.stderr)


def _start_monitor(options):
  """The running peak memory monitor with --report_peak_memory_footprint,
  else None."""
  if not options.report_peak_memory_footprint:
    return None
  monitor = PeakMemoryMonitor(options.memory_footprint_check_interval_ms / 1e3)
  monitor.start()
  return monitor


def _read_model(path):
  try:
    with open(path, "rb") as f:
      model = f.read()
  except OSError as e:
    raise _Failure(f"Could not load model {path}: {e.strerror}") from e
  log(f"Loaded model {path}")
  return model


def _interpreter(litert, model, options):
  """(interpreter, input layers or None): `model` loaded with or without
  the default XNNPACK delegate, its inputs resized to --input_layer_shape,
  its tensors allocated."""
  resolver = (litert.OpResolverType.AUTO if options.use_xnnpack else
              litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
  try:
    interpreter = litert.Interpreter(
        model_content=model, experimental_op_resolver_type=resolver,
        num_threads=options.num_threads if options.num_threads > 0 else None)
    details = interpreter.get_input_details()
    try:
      layers = input_layer_info(options, len(details))
    except ValueError as e:
      raise _Failure(str(e)) from e
    for i, (detail, (name, shape, _)) in enumerate(zip(details, layers or [])):
      if name != detail["name"]:
        print(f"WARN: Tensor # {i} is named {detail['name']} but flags call "
              f"it {name}", file=sys.stderr)
      interpreter.resize_tensor_input(detail["index"], shape)
    interpreter.allocate_tensors()
  except (ValueError, RuntimeError) as e:
    raise _Failure(f"Failed to initialize the interpreter: {e}") from e
  return interpreter, layers


def _log_delegation(interpreter):
  """The tool's lines on the nodes the XNNPACK delegate took, if any."""
  replaced, total, partitions = delegate_coverage(interpreter)
  if replaced:
    log(f"Replacing {replaced} out of {total} node(s) with delegate "
        f"({_XNNPACK}) node, yielding {partitions} partitions for the whole "
        f"graph.")
    kind = "completely" if replaced == total and partitions == 1 else \
        "partially"
    log(f"Explicitly applied XNNPACK delegate, and the model graph will be "
        f"{kind} executed by the delegate.")


def _measure(interpreter, layers, options):
  """(warm-up, regular) Stats of the runs on the tool's random inputs."""
  import numpy as np
  details = interpreter.get_input_details()
  ranges = [r for _, _, r in layers] if layers else [None] * len(details)
  inputs = random_inputs(details, ranges, np.random.default_rng(0))
  try:
    warmup = _run_loop(interpreter, inputs, details, options.warmup_runs,
                       options.warmup_min_secs, options.max_secs,
                       options.run_delay)
    regular = _run_loop(interpreter, inputs, details, options.num_runs,
                        options.min_secs, options.max_secs, options.run_delay)
  except (ValueError, RuntimeError) as e:
    raise _Failure(f"Failed to invoke the interpreter: {e}") from e
  return warmup, regular


def _log_memory(start_rss, init_rss, monitor):
  """The tool's memory lines: growth of the max RSS since start, and the
  monitor's peak when it ran."""
  log("Note: as the benchmark tool itself affects memory footprint, the "
      "following is only APPROXIMATE to the actual memory footprint of the "
      "model at runtime. Take the information at your discretion.")
  log(f"Memory footprint delta from the start of the tool (MB): "
      f"init={fmt(init_rss - start_rss)} "
      f"overall={fmt(max_rss_mb() - start_rss)}")
  if monitor:
    monitor.stop()
    log(f"Overall peak memory footprint (MB) via periodic monitoring: "
        f"{fmt(monitor.peak_bytes / 2**20)}")


def main(argv=None):
  """The tool on `argv` (default: sys.argv), under absl's app.run: it parses
  its known flags itself (unknown ones are reported as unconsumed, not fatal,
  as the real tool does) and exits with the benchmark's status."""

  def parse_known(argv):
    known, unknown = [argv[0]], []
    for arg in argv[1:]:
      name = arg.lstrip("-").split("=", 1)[0]
      if arg.startswith("-") and (name in FLAGS or (name.startswith("no") and
                                                    name[2:] in FLAGS)):
        known.append(arg)
      else:
        unknown.append(arg)
    try:
      return FLAGS(known) + unknown
    except flags.Error as e:
      sys.exit(f"ERROR: {e}")

  def benchmark_main(argv):
    nonfinite = nonfinite_float_flag(FLAGS)
    if nonfinite:  # the tool's own error format; the harness parses it
      print(f"ERROR: {nonfinite}", file=sys.stderr)
      return 1
    return benchmark(from_flags(BenchmarkOptions, FLAGS), argv[1:])

  app.run(benchmark_main, argv=argv, flags_parser=parse_known)


def run():
  main()


if __name__ == "__main__":
  run()
