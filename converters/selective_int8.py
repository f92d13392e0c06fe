"""Int8 that keeps a model's accuracy: the fewest matmuls taken out of full int8.

Full int8 of a LayerNorm + gelu BERT loses points (the demo's MiniLM QA
teacher: 59.4 -> 51.6 dev F1; the converged one 81.9 -> 75.1), and most of
the loss sits in a few matmuls whose input one static int8 range cannot
hold (the FFN output's, after gelu: a few rows far outside the rest). This
ranks the int8 nodes of the fast int8 file by the error each one adds to
what it reads, against the calibrated float model on a few calibration
windows (`rank_nodes`), then re-quantizes the same calibrated model with
the worst 1, 2, 4, ... of them taken out of full int8 (with the
element-wise islands they join; `fast_int8.from_calibrated`): a fully
connected one keeps int8 weights and quantizes its input per row at run
time (dynamic range), any other stays float. Each file is scored on the
task's dev split, and the fewest that bring it within the bound of the
float model's metric are kept (a doubling, then bisection; `search`).

    chosen = search(calibrated, full_int8, feeds, score, float_metric,
                    max_loss=1.0, finish=rewrite, log=print)
    chosen.data, chosen.facts["kept_float"]
"""

import dataclasses
import functools

import numpy as np

from converters import fast_int8

# Nodes whose int8 output only moves or relabels its input, or that take
# integer inputs: never the cause, never kept float for accuracy.
_NOT_RANKED = ("QUANTIZE", "DEQUANTIZE", "DELEGATE", "RESHAPE", "TRANSPOSE",
               "STRIDED_SLICE", "CONCATENATION", "PAD", "GATHER", "CAST")


def _contract_name(tensor_name):
  """The contract input (ids, mask, segment_ids) a model input tensor is,
  by its name: the calibrated model's `serving_default_ids:0` or a
  finished file's `ids`."""
  from converters.contract import INPUT_FEATURES
  return next(c for c in sorted(INPUT_FEATURES, key=len, reverse=True)
              if c in tensor_name)


def _tensor_values(data, feeds, num_threads=2):
  """[{tensor name: float values}] per feed: every float tensor, and every
  per-tensor-quantized int8 one dequantized; with the interpreter's node
  list and tensor details."""
  from ai_edge_litert.interpreter import Interpreter
  interpreter = Interpreter(model_content=data, num_threads=num_threads,
                            experimental_preserve_all_tensors=True)
  inputs = interpreter.get_input_details()
  values = []
  for feed in feeds:
    for detail in inputs:
      interpreter.resize_tensor_input(
          detail["index"], feed[_contract_name(detail["name"])].shape)
    interpreter.allocate_tensors()
    for detail in inputs:
      interpreter.set_tensor(detail["index"],
                             feed[_contract_name(detail["name"])])
    interpreter.invoke()
    found = {}
    for tensor in interpreter.get_tensor_details():
      try:
        value = interpreter.get_tensor(tensor["index"])
      except ValueError:
        continue
      if value is None or value.dtype not in (np.float32, np.int8):
        continue
      if value.dtype == np.int8:
        q = tensor["quantization_parameters"]
        if len(q["scales"]) != 1:
          continue
        value = (value.astype(np.float32) - q["zero_points"][0]) * \
            q["scales"][0]
      found[tensor["name"]] = value
    values.append(found)
  ops = interpreter._get_ops_details()  # pylint: disable=protected-access
  tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
  return values, ops, tensors


# Ops a node's input passes through unchanged in value (bar rounding) on
# its way from the tensor that carries its error.
_PASS_THROUGH = ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "TRANSPOSE")


def rank_nodes(calibrated, quantized, feeds):
  """[(output tensor name, op name, added error)] of the int8 nodes of
  `quantized` that the calibrated float model also computes, worst first.

  A node's error is ||int8 - float|| / ||float|| of its output over
  `feeds` ({contract input name: [1, L] array} each); its added error that
  less the largest error among the tensors it reads (walked back through
  QUANTIZE and moves to the tensor both models compute). Why added: error
  accumulates downstream, so every node after the one that rounds badly
  (a matmul whose input has outlier rows, such as the FFN output after
  gelu) shows a large error of its own; ranked by what each node adds, the
  cause comes first and the nodes that only pass it on come after it."""
  floats, _, _ = _tensor_values(calibrated, feeds)
  ints, ops, tensors = _tensor_values(quantized, feeds)
  producer = {i: op for op in ops for i in op["outputs"] if i >= 0}

  @functools.lru_cache(maxsize=None)  # a tensor read by several nodes
  def error(name):
    pairs = [(f[name], q[name]) for f, q in zip(floats, ints)
             if name in f and name in q and f[name].shape == q[name].shape]
    norm = sum(float(np.sum(np.square(f))) for f, _ in pairs)
    if not pairs or norm == 0:
      return None
    return (sum(float(np.sum(np.square(q - f))) for f, q in pairs)
            / norm) ** 0.5

  def carried(index):
    """The error the tensor `index` brings in: the error of the first
    tensor up its pass-through chain that both models compute (the float
    side of a QUANTIZE, not its rounded copy); 0 for model inputs."""
    for _ in range(len(ops)):
      op = producer.get(index)
      if op is None:
        return 0.0
      if op["op_name"] not in _PASS_THROUGH:
        found = error(tensors[index]["name"])
        return found or 0.0
      index = op["inputs"][0]
    return 0.0

  ranked = []
  for op in ops:
    outputs = [tensors[i] for i in op["outputs"] if i >= 0]
    if (op["op_name"] in _NOT_RANKED or not outputs
        or outputs[0]["dtype"] != np.int8):
      continue
    name = outputs[0]["name"]
    own = error(name)
    if own is None:
      continue
    brought = max([carried(i) for i in op["inputs"]
                   if i >= 0 and i in producer] or [0.0])
    ranked.append((name, op["op_name"], max(own - brought, 0.0)))
  return sorted(ranked, key=lambda r: -r[2])


@dataclasses.dataclass
class Chosen:
  """The file kept (bytes, finished), and what the search did."""
  data: bytes
  facts: dict


def search(calibrated, full, feeds, score, float_metric, max_loss, finish,
           log=lambda line: None):
  """The int8 file with the fewest ranked nodes in float whose `score`
  (dev metric, points) is within `max_loss` of `float_metric`.

  Args:
    calibrated: the calibrated model (fast_int8.calibrate) `full` came from.
    full: the full int8 file (fast_int8.from_calibrated), finished.
    feeds: calibration windows for `rank_nodes`.
    score: bytes of a finished file -> its dev metric in points.
    finish: bytes -> the file as it ships (tensor names, default length).
    log: progress lines.

  Returns:
    Chosen: the finished file, and facts: float_metric, max_int8_loss,
    met (whether any candidate met the bound: else every ranked node was
    tried in float and the last candidate is kept), kept_float
    [{tensor, op, relative_error}], tried [{float_nodes, metric, size_mb}]
    in the order tried, ranked (how many nodes were ranked).
  """
  tried = {}

  def attempt(count, keep):
    data = full if not count else finish(fast_int8.from_calibrated(
        calibrated, keep_float=[n for n, _, _ in keep],
        dynamic_range=True)[0])
    metric = score(data)
    tried[count] = (data, metric)
    log(f"selective: {count} node(s) out of int8: {metric:.2f} (float "
        f"{float_metric:.2f})")
    return float_metric - metric <= max_loss

  ranked = []
  if attempt(0, []):
    best = 0
  else:
    ranked = rank_nodes(calibrated, full, feeds)
    low, best = 0, None
    count = 1
    while ranked:
      count = min(count, len(ranked))
      if attempt(count, ranked[:count]):
        best = count
        break
      low = count
      if count == len(ranked):
        break
      count *= 2
    if best is not None:  # bisect between the last miss and the first hit
      while best - low > 1:
        middle = (low + best) // 2
        if attempt(middle, ranked[:middle]):
          best = middle
        else:
          low = middle
  met = best is not None
  kept = best if met else max(tried)
  data, metric = tried[kept]
  return Chosen(data, {
      "float_metric": float_metric, "max_int8_loss": max_loss,
      "metric": metric, "met": met, "ranked": len(ranked),
      "kept_float": [{"tensor": n, "op": o, "relative_error": round(e, 4)}
                     for n, o, e in ranked[:kept]],
      "tried": [{"float_nodes": c, "metric": m,
                 "size_mb": round(len(d) / 1e6, 4)}
                for c, (d, m) in tried.items()]})


def calibration_feeds(calibrated, features, count=4, step=32):
  """Up to `count` windows of our feature dict as feeds ({contract input
  name: [1, L]}) of `calibrated`: a dynamic-length model's cut to their
  tokens (rounded up to `step`), a fixed one's whole."""
  from ai_edge_litert.interpreter import Interpreter
  from converters.contract import INPUT_FEATURES
  first = Interpreter(model_content=calibrated).get_input_details()[0]
  dynamic = first["shape_signature"][-1] == -1
  feeds = []
  for row in range(min(count, len(features["input_ids"]))):
    tokens = int(np.sum(features["input_mask"][row]))
    feed = {}
    for contract, ours in INPUT_FEATURES.items():
      values = np.asarray(features[ours][row:row + 1], np.int32)
      if dynamic:
        values = values[:, :min(values.shape[1],
                                max(step, -(-tokens // step) * step))]
      feed[contract] = values
    feeds.append(feed)
  return feeds
