"""Which ops of a .tflite file TFLite's GPU delegate refuses, and why.

The rules are those of LiteRT 1.4.1's GPU delegate (the version of the app's
com.google.ai.edge.litert), read from its source: the delegate's op list and
op versions (`tflite/delegates/gpu/common/model_builder.cc`,
`NewOperationParser` and each parser's `IsSupported`), the per-op checks
it calls (`tflite/tools/versioning/gpu_compatibility.cc`, with the runtime's
standard broadcast), the tensor types it takes (`GetOpsToReplace`: float32 /
float16 everywhere, int32 only into CAST / GATHER / ONE_HOT, no rank >= 5)
and its partitioning (`delegates/utils.cc`: float16 weights' DEQUANTIZE
folds away; by default only the largest partition goes to the GPU).
Conv, pool, resize, LSTM, depth / space, cumsum, one-hot, densify and
custom ops get their version and tensor types checked, not their finer
parameters: no model of ours has them. Checks the delegate makes only when
it builds its GPU graph (a BATCH_MATMUL with a 3-D constant operand,
strided slices with negative strides) need a device.

TFLite's own analyzer is not used: `tf.lite.experimental.Analyzer.analyze(
..., gpu_compatibility=True)` (TF 2.21) and ai-edge-litert's wrapper print
"Your model looks compatible with GPU delegate" for every model (their
model_analyzer.cc declares the list of refused nodes and never fills it;
neither wheel's binary holds a message of gpu_compatibility.cc), and older
analyzers that did check assumed an enhanced broadcast the runtime's
delegate does not use.

    report = gpu_delegate_report(data)   # or a path
    report["refused"]  # [{"op", "count", "reason", "where"}, ...]
"""

import collections
import os

from ai_edge_litert import schema_py_generated as schema

from converters import tflite_file

RULES = "LiteRT 1.4.1 GPU delegate"
FLOAT_MODES = ("float32", "float16")

_TYPES = {v: k for k, v in vars(schema.TensorType).items()
          if not k.startswith("_")}
_OPTIONS = {v: k for k, v in vars(schema.BuiltinOptions).items()
            if not k.startswith("_")}

Tensor = collections.namedtuple("Tensor", "index type dims const")
Node = collections.namedtuple("Node", "index op version inputs outputs options")

_UNARY = ("ABS COS ELU EXP FLOOR GELU LOG LOGISTIC NEG RSQRT SIGN SIN SQRT "
          "SQUARE TANH").split()
_BINARY = ("DIV EQUAL FLOOR_DIV FLOOR_MOD GREATER GREATER_EQUAL LESS "
           "LESS_EQUAL LOGICAL_AND MAXIMUM MINIMUM NOT_EQUAL POW "
           "SQUARED_DIFFERENCE SUB").split()
_LOGICAL = {"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS",
            "LESS_EQUAL"}
_FLOATS = {"FLOAT32", "FLOAT16"}


def _option(node, name, default=0):
  get = getattr(node.options, name, None)
  return get() if get else default


def _runtime(node):
  return [t for t in node.inputs if t is not None and not t.const]


def _consts(node):
  return [t for t in node.inputs if t is not None and t.const]


def _counts(node, runtime, const=None, outputs=1):
  """gpu_compatibility's CheckInputs(Consts)Outputs."""
  got = (len(_runtime(node)), len(_consts(node)), len(node.outputs))
  if got[0] != runtime or (const is not None and got[1] != const) or (
      got[2] != outputs):
    return (f"{got[0]} runtime / {got[1]} constant inputs, {got[2]} "
            f"outputs: the delegate's {node.op} takes {runtime} runtime"
            + (f" / {const} constant" if const is not None else "")
            + f" and {outputs} output{'s' if outputs > 1 else ''}")
  return None


def _activation(node):
  if _option(node, "FusedActivationFunction") == (
      schema.ActivationFunctionType.SIGN_BIT):
    return "fused SIGN_BIT activation"
  return None


def _broadcast(node):
  """The runtime's standard broadcast: a lower rank (> 1) only into 4-D."""
  a, b = (t.dims for t in node.inputs[:2])
  if len(a) <= 1 or len(b) <= 1 or len(a) == len(b):
    return None
  long, short = (a, b) if len(a) > len(b) else (b, a)
  if len(long) == 4 and (
      (len(short) == 3 and long[0] == 1) or
      (len(short) == 2 and long[0] == 1 and tuple(short) == (1, 1)) or
      (len(short) == 2 and long[0] == short[0] and long[3] == short[1])):
    return None
  return (f"broadcasts {list(a)} with {list(b)}: the delegate broadcasts a "
          "lower rank only into 4-D ([1, H, W, C] with 3-D, [1, 1] or "
          "[B, C])")


def _two_inputs(node):
  if len(node.inputs) != 2:
    return f"{len(node.inputs)} inputs: the delegate's {node.op} takes 2"
  return None


def _add(node):
  return _two_inputs(node) or _broadcast(node)


def _mul(node):
  return _two_inputs(node) or _broadcast(node) or _activation(node)


def _operands(node):
  """Two runtime inputs, or one and a constant; one output."""
  if _counts(node, 2, 0) and _counts(node, 1, 1):
    return (f"{len(_runtime(node))} runtime / {len(_consts(node))} constant "
            f"inputs: the delegate's {node.op} takes 2 runtime inputs, or 1 "
            "and a constant")
  return None


def _binary(node):
  return _operands(node) or _activation(node)


def _logical(graph, node):
  """A comparison only as the bool input of one CAST / SELECT to float."""
  users = graph.consumers.get(node.outputs[0].index, [])
  if len(users) == 1:
    user = graph.nodes[users[0]]
    if user.op in ("CAST", "SELECT", "SELECT_V2") and (
        user.outputs[0].type in _FLOATS):
      return None
  return ("a comparison the delegate takes only as the bool input of one "
          "CAST / SELECT to float")


def _cast(graph, node):
  src, dst = node.inputs[0], node.outputs[0]
  if src.type == "BOOL" and dst.type in _FLOATS:
    producer = graph.producer.get(src.index)
    if producer is None or len(graph.consumers.get(src.index, [])) != 1:
      return "CAST of a bool that is not one op's output read once"
    if len(graph.consumers.get(dst.index, [])) != 1:
      return "CAST from bool whose result is not read by exactly one op"
    if graph.nodes[producer].op in _LOGICAL:
      return None
  reason = _counts(node, 1)
  if reason:
    return reason
  if (src.type == "BOOL" and dst.type in _FLOATS) or (
      src.type in _FLOATS and dst.type == "BOOL") or (
          src.type in ("FLOAT32", "INT32") and
          dst.type in ("FLOAT32", "INT32")):
    return None
  return (f"CAST {src.type} -> {dst.type}: the delegate casts only between "
          "float32 and int32, and bool <-> float")


def _fully_connected(node):
  if _option(node, "WeightsFormat") != (
      schema.FullyConnectedOptionsWeightsFormat.DEFAULT):
    return "shuffled weights format"
  if len(_runtime(node)) > 2:
    return "more than 2 runtime inputs"
  if node.inputs[0].const:
    return "a constant input"
  if _option(node, "KeepNumDims") and (
      len(node.inputs[0].dims) != len(node.outputs[0].dims)):
    return "keep_num_dims with input and output of different ranks"
  return None


def _gather(node):
  reason = _operands(node)
  if reason:
    return reason
  indices = node.inputs[1]
  if len(indices.dims) != 1:
    return (f"indices of rank {len(indices.dims)}: the delegate gathers by "
            "1-D indices only")
  if indices.type != "INT32":
    return f"{indices.type} indices: the delegate takes int32 indices only"
  return None


def _axes(node):
  axes = node.inputs[1]
  if not axes.const or axes.type != "INT32":
    return f"{node.op} over non-constant or non-int32 axes"
  return None


def _mean(node):
  return _counts(node, 1, 1) or _axes(node)


def _reduce(node):
  return _counts(node, 1) or _axes(node)


def _softmax(node):
  if _option(node, "Beta", 1.0) != 1.0:
    return "softmax with beta != 1"
  return None


_MASKS = (("EllipsisMask", "ellipsis_mask"), ("NewAxisMask", "new_axis_mask"),
          ("ShrinkAxisMask", "shrink_axis_mask"))


def _slice(node):
  for getter, mask in _MASKS:
    if _option(node, getter):
      return f"{mask}: the delegate's slices keep every axis"
  if len(node.inputs) < (4 if node.op == "STRIDED_SLICE" else 3):
    return f"{node.op} with too few inputs"
  if len(node.inputs[0].dims) not in (3, 4):
    return (f"a {len(node.inputs[0].dims)}-D input: the delegate slices 3-D "
            "and 4-D tensors only")
  return None


def _pad(node):
  if node.op == "MIRROR_PAD" and _option(node, "Mode") != (
      schema.MirrorPadMode.REFLECT):
    return "mirror padding other than REFLECT"
  reason = _counts(node, 1)
  paddings = node.inputs[1].dims if len(node.inputs) > 1 else ()
  if not reason and (len(paddings) != 2 or paddings[0] not in (3, 4) or
                     paddings[1] != 2):
    reason = f"paddings of shape {list(paddings)}: the delegate takes 3x2 / 4x2"
  return reason


def _select(node):
  if len(node.inputs) != 3 or len(node.outputs) != 1:
    return "SELECT needs 3 inputs and 1 output"
  if node.inputs[0].type not in _FLOATS | {"BOOL"}:
    return f"a {node.inputs[0].type} condition"
  return None


_ok = lambda node: None
_one_runtime = lambda node: _counts(node, 1)
_unary = lambda node: _counts(node, 1, 0)

# op -> (newest version the delegate takes or None, check(node) -> reason).
_RULES = {
    "ADD": (2, _add), "ADD_N": (2, lambda n: None if len(n.inputs) == 2
                                else "ADD_N of more than 2 inputs"),
    "MUL": (3, _mul), "BATCH_MATMUL": (None, lambda n: _two_inputs(n) or (
        None if len(n.outputs) == 1 else "more than one output")),
    "CAST": (None, None), "CONCATENATION": (2, _ok),
    "FULLY_CONNECTED": (9, _fully_connected), "GATHER": (1, _gather),
    "MEAN": (None, _mean), "PACK": (None, _ok), "UNPACK": (None, _ok),
    "SPLIT": (None, _ok), "SPLIT_V": (None, _ok),
    "RESHAPE": (1, _one_runtime), "TRANSPOSE": (4, _one_runtime),
    "TILE": (None, _one_runtime), "SOFTMAX": (2, _softmax),
    "SLICE": (2, _slice), "STRIDED_SLICE": (4, _slice),
    "PAD": (2, _pad), "PADV2": (2, _pad), "MIRROR_PAD": (2, _pad),
    "SELECT": (1, _select), "SELECT_V2": (1, _select),
    "DEQUANTIZE": (3, lambda n: "an int16 input" if (
        n.inputs[0].type == "INT16") else None),
    "QUANTIZE": (2, _one_runtime), "PRELU": (1, _ok),
    "CONV_2D": (6, _ok), "DEPTHWISE_CONV_2D": (6, _ok),
    "TRANSPOSE_CONV": (3, _ok), "AVERAGE_POOL_2D": (2, _ok),
    "MAX_POOL_2D": (2, _ok), "RESIZE_BILINEAR": (3, _ok),
    "RESIZE_NEAREST_NEIGHBOR": (3, _ok), "LSTM": (4, _ok),
    "DEPTH_TO_SPACE": (None, _ok), "SPACE_TO_DEPTH": (2, _ok),
    "CUMSUM": (1, _ok), "ONE_HOT": (1, _ok), "DENSIFY": (1, _ok),
    "HARD_SWISH": (None, _ok),
}
_RULES.update({op: (2, _ok) for op in (
    "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU")})
_RULES.update({op: (None, _reduce) for op in (
    "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")})
_RULES.update({op: (2, _unary) for op in _UNARY})
_RULES.update({op: (2, _binary) for op in _BINARY})
_CUSTOM = {"Convolution2DTransposeBias", "MaxPoolingWithArgmax2D",
           "MaxUnpooling2D", "Resampler"}
# Runtime tensor types beyond float32 / float16 (and int8 / uint8, the
# delegate's default quantized-ops flag) that an op may read or write.
_EXTRA_IN = {"CAST": {"BOOL", "INT32"}, "GATHER": {"INT32"},
             "ONE_HOT": {"INT32"}, "SELECT": {"BOOL"}, "SELECT_V2": {"BOOL"},
             "LOGICAL_AND": {"BOOL"}}
_EXTRA_OUT = dict({op: {"BOOL"} for op in _LOGICAL | {"LOGICAL_AND"}},
                  CAST={"INT32", "BOOL"})


def _types(node):
  """GetOpsToReplace's tensor check: ranks < 5, non-constant tensors in the
  types the delegate computes in."""
  base = _FLOATS | {"INT8", "UINT8"}
  for role, tensors, extra in (("input", node.inputs, _EXTRA_IN),
                               ("output", node.outputs, _EXTRA_OUT)):
    for t in tensors:
      if t is None:
        continue
      if len(t.dims) >= 5:
        return f"a {len(t.dims)}-D {role}: the delegate takes ranks up to 4"
      if not t.const and t.type not in base | extra.get(node.op, set()):
        return (f"{t.type} {role} tensor: the delegate computes in float32 / "
                "float16 (int32 only into CAST, GATHER and ONE_HOT)")
  return None


class _Graph:
  """The subgraph's nodes (float16 weights' DEQUANTIZE folded into their
  readers, as the delegate does) and who reads each tensor."""

  def __init__(self, data):
    model = tflite_file.read_model(data)
    graph = model.Subgraphs(0)

    def tensor(index):
      if index < 0:
        return None
      t = graph.Tensors(index)
      buffer = model.Buffers(t.Buffer()) if t.Buffer() > 0 else None
      const = buffer is not None and (
          buffer.DataLength() > 0 or buffer.Offset() > 1)
      dims = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
      return Tensor(index, _TYPES.get(t.Type(), "?"), dims, const)

    self.nodes, self.folded = [], set()
    self.dynamic = False
    fp16_weights = {}
    for i in range(graph.OperatorsLength()):
      op = graph.Operators(i)
      code = model.OperatorCodes(op.OpcodeIndex())
      table, options = op.BuiltinOptions(), None
      kind = _OPTIONS.get(op.BuiltinOptionsType())
      if table is not None and kind and hasattr(schema, kind):
        options = getattr(schema, kind)()
        options.Init(table.Bytes, table.Pos)
      inputs = [tensor(t) for t in op.InputsAsNumpy()]
      outputs = [tensor(t) for t in op.OutputsAsNumpy()]
      name = tflite_file._op_name(model, op.OpcodeIndex())  # pylint: disable=protected-access
      if name == "DEQUANTIZE" and inputs[0].const and (
          inputs[0].type == "FLOAT16"):
        fp16_weights[outputs[0].index] = inputs[0]
        self.folded.add(i)
      inputs = tuple(fp16_weights.get(t.index, t) if t else t for t in inputs)
      self.nodes.append(Node(i, name, code.Version(), inputs, tuple(outputs),
                             options))
    for t in range(graph.TensorsLength()):
      signature = graph.Tensors(t).ShapeSignatureAsNumpy()
      self.dynamic |= bool(graph.Tensors(t).ShapeSignatureLength() and
                           (signature < 0).any())
    self.consumers = collections.defaultdict(list)
    self.producer = {}
    for node in self.nodes:
      for t in node.inputs:
        if t is not None and not t.const:
          self.consumers[t.index].append(node.index)
      for t in node.outputs:
        self.producer[t.index] = node.index


def _refusal(graph, node):
  """Why the delegate leaves `node` to the CPU, or None."""
  if node.op in _CUSTOM:
    return _types(node)
  if node.op not in _RULES:
    return "not in the GPU delegate's op list"
  newest, check = _RULES[node.op]
  if newest is not None and node.version > newest:
    return (f"version {node.version}: the delegate takes {node.op} up to "
            f"version {newest}")
  if node.op == "CAST":
    reason = _cast(graph, node)
  elif node.op in _LOGICAL:
    reason = _logical(graph, node)
  else:
    reason = check(node)
  return reason or _types(node)


def _partitions(nodes, supported):
  """TFLite's greedy partitioning: sizes of the runs of supported nodes."""
  produced = {t.index for n in nodes for t in n.outputs}
  ready, left, sizes = set(), list(nodes), []
  while left:
    kind, members, progress = None, [], True
    while progress:
      progress = False
      for node in list(left):
        if any(t is not None and t.index in produced and t.index not in ready
               for t in node.inputs):
          continue
        if kind is None:
          kind = supported[node.index]
        if supported[node.index] == kind:
          left.remove(node)
          members.append(node)
          ready.update(t.index for t in node.outputs)
          progress = True
    if kind:
      sizes.append(len(members))
  return sizes


# What a refused op costs where it sits: why one outside the GPU graph is
# left as it is (the converter's rewrites go after those inside it).
WHERE_MEANS = {
    "before the GPU graph": "stays: the CPU runs it first and hands the GPU "
                            "graph its result, without splitting it",
    "after the GPU graph": "stays: the CPU runs it on what the GPU graph "
                           "returns",
    "inside: splits the GPU graph": "costs a GPU -> CPU -> GPU round trip "
                                    "per inference: a rewrite should avoid it",
    "no GPU op around it": "stays: nothing around it runs on the GPU"}


def _where(graph, index, supported):
  """Whether the GPU graph runs before and after a refused node."""
  def reaches(start, step):
    seen, todo = set(), list(step(start))
    while todo:
      n = todo.pop()
      if n in seen:
        continue
      if supported[n]:
        return True
      seen.add(n)
      todo.extend(step(n))
    return False
  up = reaches(index, lambda n: [graph.producer[t.index]
                                 for t in graph.nodes[n].inputs
                                 if t is not None and t.index in graph.producer])
  down = reaches(index, lambda n: [c for t in graph.nodes[n].outputs
                                   for c in graph.consumers.get(t.index, [])])
  if up and down:
    return "inside: splits the GPU graph"
  return "after the GPU graph" if up else "before the GPU graph" if down else (
      "no GPU op around it")


def _read(model):
  if isinstance(model, (str, os.PathLike)):
    with open(model, "rb") as f:
      return f.read()
  return model


def gpu_delegate_report(model):
  """What the GPU delegate would take of a .tflite (bytes or a path).

  Returns:
    {"rules", "total_nodes", "gpu_nodes" (in the one partition the delegate
     takes by default), "gpu_partitions" (runs of nodes it could take),
     "weights_dequantize" (DEQUANTIZE of float16 weights: the delegate
     reads the weights themselves; they count as its nodes only when it
     takes the whole graph), "dynamic_shapes" (the file has -1 dimensions:
     the delegate works at the shape the interpreter is allocated at, and
     rebuilds at each resize), "refused": gpu_incompatible_ops' list}.
  """
  graph = _Graph(_read(model))
  reasons = {n.index: None if n.index in graph.folded else _refusal(graph, n)
             for n in graph.nodes}
  supported = {i: r is None and i not in graph.folded
               for i, r in reasons.items()}
  if not any(reasons.values()):
    sizes = [len(graph.nodes)] if graph.nodes else []
  else:
    sizes = _partitions(graph.nodes, supported)
  groups = collections.Counter(
      (graph.nodes[i].op, reason, _where(graph, i, supported))
      for i, reason in reasons.items() if reason)
  refused = [{"op": op, "count": count, "reason": reason, "where": where,
              "means": WHERE_MEANS[where]}
             for (op, reason, where), count in sorted(
                 groups.items(), key=lambda item: (-item[1], item[0]))]
  return {"rules": RULES, "total_nodes": len(graph.nodes),
          "gpu_nodes": max(sizes, default=0), "gpu_partitions": len(sizes),
          "weights_dequantize": len(graph.folded),
          "dynamic_shapes": graph.dynamic, "refused": refused}


def gpu_incompatible_ops(model):
  """[{"op", "count", "reason", "where"}] of the ops the GPU delegate leaves
  to the CPU, most frequent first; [] when it takes every op."""
  return gpu_delegate_report(model)["refused"]
