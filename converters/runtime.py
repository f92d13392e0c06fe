"""Running a converted model on the host through LiteRT, by tensor name.

Inputs and outputs go through the signature runner under their contract
names, never by position: the converter orders a subgraph's inputs as it
likes (ours come out ids, segment_ids, mask), which is the classic cause of
"accuracy collapsed after conversion".

    model = LiteRTModel(data)
    out = model.run_batch({"ids": ids, "mask": mask, "segment_ids": seg})
    coverage = xnnpack_coverage(data)  # or model.xnnpack_coverage()
"""

import collections
import os
import signal
import subprocess
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from converters.delegates import delegated_nodes
from converters.contract import SIGNATURE_KEY
from converters.native_output import native_output_to
from tfmodels.process_lifetime import die_with_parent
from tfmodels.staging import scratch_directory


# Loads and runs a model once on zero inputs; run in a child process.
_PROBE = """
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
interpreter = Interpreter(model_path=sys.argv[1])
runner = interpreter.get_signature_runner()
runner(**{name: np.zeros(d["shape"], d["dtype"])
          for name, d in runner.get_input_details().items()})
"""


def probe(data, timeout=900):
  """None if LiteRT loads and runs the model, else one line saying why.

  Some converter outputs crash the runtime outright (int16x8 LayerNorm
  graphs abort in LiteRT 2.3), which would take this process down with
  them, so the first run happens in a child process.
  """
  with scratch_directory("tflite-probe-") as scratch:
    path = os.path.join(scratch, "model.tflite")
    with open(path, "wb") as f:
      f.write(data)
    result = subprocess.run([sys.executable, "-c", _PROBE, path],
                            capture_output=True, text=True, timeout=timeout,
                            preexec_fn=die_with_parent)
  if result.returncode < 0:
    name = signal.Signals(-result.returncode).name
    return f"LiteRT crashed ({name}) loading or running the model"
  if result.returncode > 0:
    lines = [l for l in result.stderr.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else "?"
    if "Select TensorFlow op" in last:
      return ("LiteRT on the host has no Flex delegate for the select TF "
              "ops")
    return "LiteRT cannot run the model: " + last
  return None


def _interpreter(data, num_threads):
  # LiteRT applies its default delegate (XNNPACK) at allocation and says so
  # on stderr each time; keep that off the terminal.
  with native_output_to(os.devnull):
    interpreter = Interpreter(model_content=data, num_threads=num_threads)
    interpreter.allocate_tensors()
  return interpreter


class LiteRTModel:
  """A .tflite model on the host CPU (LiteRT with XNNPACK).

  Raises RuntimeError at construction when the host runtime cannot run it
  (select TF ops need the Flex delegate, which LiteRT's wheel lacks).
  """

  def __init__(self, data, num_threads=2):
    self.interpreter = _interpreter(data, num_threads)
    self.runner = self.interpreter.get_signature_runner(SIGNATURE_KEY)
    self.input_names = sorted(self.runner.get_input_details())

  def run(self, **inputs):
    """One [1, L] example by contract name -> {output name: array}."""
    return self.runner(**inputs)

  def median_ms(self, inputs, runs=10):
    return median_ms(self.run, inputs, runs)

  def xnnpack_coverage(self):
    """`xnnpack_coverage` of this model, read from its own interpreter
    (a second one would hold another copy of the weights)."""
    return interpreter_coverage(self.interpreter)

  def run_batch(self, inputs):
    return run_rows(self.run, inputs)


def run_rows(run, inputs):
  """{name: [N, L]} -> {output name: [N, ...]} through `run(**row)`, one
  [1, L] row at a time (how an app runs a model)."""
  n = len(next(iter(inputs.values())))
  rows = [run(**{k: np.asarray(v[i:i + 1], np.int32)
                 for k, v in inputs.items()}) for i in range(n)]
  return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


def median_ms(run, inputs, runs=10):
  """Median ms of `run(**inputs)` (one [1, L] example) after a warm-up
  run: a quick host time, for choosing between files of one model in one
  process (the latency harness, android_bench, is what reports a
  latency)."""
  import time
  run(**inputs)
  times = []
  for _ in range(runs):
    began = time.perf_counter()
    run(**inputs)
    times.append(time.perf_counter() - began)
  return 1000.0 * float(np.median(times))


def xnnpack_coverage(data, num_threads=2):
  """How much of the graph LiteRT's default XNNPACK delegate takes over.

  The Python API does not expose the execution plan, but each delegate
  kernel node lists its partition's input and output tensors: the replaced
  nodes are those on the paths from its outputs back to its inputs.

  Returns:
    {"delegate", "total_nodes", "delegated_nodes", "partitions",
     "not_delegated": {op name: count}}.
  """
  return interpreter_coverage(_interpreter(data, num_threads))


def interpreter_coverage(interpreter):
  """`xnnpack_coverage` of an allocated interpreter."""
  covered, original, partitions = delegated_nodes(interpreter)
  left = collections.Counter(n["op_name"] for n in original
                             if n["index"] not in covered)
  return {"delegate": "XNNPACK", "total_nodes": len(original),
          "delegated_nodes": len(covered), "partitions": partitions,
          "not_delegated": dict(left.most_common())}
