"""Full-integer conversion whose graph LiteRT's XNNPACK delegate takes whole.

Why: the converter's standard int8 output is slower than dynamic-range on
the host (MobileBERT, 2 threads: ~2x), because XNNPACK refuses part of it and
every refused op splits the graph into another partition run by LiteRT's
reference-style kernels. Measured on our MobileBERT (docs/design.md,
"Fast int8"), the refusals are:

  * BATCH_MATMUL (attention's Q K^T and P V) whenever its second operand has
    a non-zero zero point, i.e. whenever K's or V's calibrated range is not
    symmetric: XNNPACK's int8 batch matmul takes a "weights-like" operand
    B with zero point 0 only;
  * SOFTMAX, GELU, SQUARED_DIFFERENCE and RSQRT in int8 (XNNPACK has them in
    float only), and int8 MUL / ADD whose input and output scales are too far
    apart (the attention mask, LayerNorm's epsilon), which XNNPACK rejects.

The recipe, on the converter's calibrated (float + ranges) model:
  1. make the calibrated range of every tensor that reaches a BATCH_MATMUL's
     second operand (through RESHAPE / TRANSPOSE, which share ranges)
     symmetric around a zero point of exactly 0 ([-128 s, 127 s]);
  2. quantize, ask LiteRT which int8 nodes XNNPACK left out, keep them and
     the element-wise component around them in float (`grow_islands`; the
     quantizer's node denylist inserts DEQUANTIZE / QUANTIZE, which XNNPACK
     runs), and repeat until XNNPACK takes every int8 node.

The weights and every matmul stay int8; what becomes float are small
element-wise islands (softmax with its mask, LayerNorm statistics, gelu),
all inside the one XNNPACK partition. A phone NPU that runs int8 softmax
would rather have the strict graph: the `standard` recipe (quantize.py) and
`--strict_int8` keep it.

    data, facts = convert(quantize.make_converter(saved_model_dir, "int8",
                                                  representative))
"""

import collections
import os

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from converters import tflite_file
from converters.native_output import native_output_to

# Ops that only move or relabel data: their input and output share a range.
_SAME_RANGE_OPS = ("RESHAPE", "TRANSPOSE")
# Not quantized at all (integer inputs), so never worth a float island.
_INTEGER_INPUT_OPS = ("GATHER", "CAST")
# Where the time goes: these stay int8, and float islands never grow into
# them (nor into the data-movement ops that feed them their operands).
_KEEP_INT8_OPS = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D",
                  "DEPTHWISE_CONV_2D", "RESHAPE", "TRANSPOSE", "STRIDED_SLICE",
                  "CONCATENATION", "PAD", "GATHER", "CAST")


def calibrate(converter):
  """The calibrated model of an int8 TFLiteConverter (quantize.py makes
  it): the float graph, each tensor carrying its [min, max] over the
  representative data."""
  converter._experimental_calibrate_only = True  # pylint: disable=protected-access
  with native_output_to(os.devnull):
    return converter.convert()


_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items()
             if not k.startswith("_")}


def _op_name(model, op):
  code = model.operatorCodes[op.opcodeIndex]
  return _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode))


def _text(value):
  return value.decode() if isinstance(value, bytes) else value


def symmetric_matmul_operands(calibrated):
  """(model bytes, tensors changed, tensor names): BATCH_MATMUL second operands (and the
  RESHAPE / TRANSPOSE chain that feeds them) get the range [-128 s, 127 s]
  with s = max|range| / 127, so they quantize to a zero point of exactly 0.
  Costs at most one bit of resolution on K and V."""
  model = schema.ModelT.InitFromPackedBuf(bytearray(calibrated), 0)
  changed = 0
  for graph in model.subgraphs:
    producer = {t: op for op in graph.operators for t in op.outputs}
    for op in graph.operators:
      if _op_name(model, op) != "BATCH_MATMUL":
        continue
      tensor, seen = op.inputs[1], set()
      while tensor not in seen:
        seen.add(tensor)
        q = graph.tensors[tensor].quantization
        if q is not None and q.min is not None and len(q.min) == 1:
          bound = float(max(abs(q.min[0]), abs(q.max[0]), 1e-8))
          q.min = np.array([-bound * 128 / 127], np.float32)
          q.max = np.array([bound], np.float32)
          changed += 1
        source = producer.get(tensor)
        if source is None or _op_name(model, source) not in _SAME_RANGE_OPS:
          break
        tensor = source.inputs[0]
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder),
                 file_identifier=tflite_file.FILE_IDENTIFIER)
  names = {_text(t.name) for g in model.subgraphs for t in g.tensors}
  return bytes(builder.Output()), changed, names


def grow_islands(calibrated, denied):
  """`denied` (output tensor names of float nodes) grown to whole islands.

  Light nodes (element-wise, reductions) that touch each other form a
  component bounded by the ops that stay int8 (matmuls and the data
  movement feeding them); a component holding any float node becomes float
  as a whole. So a LayerNorm whose RSQRT must be float is float from end to
  end (one DEQUANTIZE after the matmul, one QUANTIZE before the next)
  instead of hopping between int8 and float op by op. Measured on
  MobileBERT LayerNorm + gelu: 315 DEQUANTIZE instead of 725, and ~10%
  faster.
  """
  model = schema.ModelT.InitFromPackedBuf(bytearray(calibrated), 0)
  grown = set(denied)
  for graph in model.subgraphs:
    name = lambda op: _text(graph.tensors[op.outputs[0]].name)
    light = [op for op in graph.operators  # outputs: a numpy array
             if len(op.outputs) and _op_name(model, op) not in _KEEP_INT8_OPS]
    index = {id(op): i for i, op in enumerate(light)}
    producer = {t: op for op in light for t in op.outputs}
    parent = list(range(len(light)))

    def root(i):
      while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
      return i

    for op in light:
      for t in op.inputs:
        if t in producer:
          parent[root(index[id(producer[t])])] = root(index[id(op)])
    hit = {root(i) for i, op in enumerate(light) if name(op) in grown}
    grown |= {name(op) for i, op in enumerate(light) if root(i) in hit}
  return grown


def quantize_calibrated(calibrated, denylisted_nodes=(), strict=False):
  """The quantizer on a calibrated model; nodes named by their output tensor
  in `denylisted_nodes` stay float."""
  from tensorflow.lite.python import convert as tf_convert
  with native_output_to(os.devnull):
    return tf_convert.mlir_quantize(
        calibrated, disable_per_channel=False, fully_quantize=strict,
        denylisted_nodes=sorted(denylisted_nodes) or None)


# XNNPACK creates an int8 matmul only when input scale x weight scale /
# output scale is below 256 (checked per output channel); it does not refuse
# such a node when partitioning but fails the whole runtime when preparing.
# Residual streams that grow layer by layer (a NoNorm student) reach it.
_MATMUL_OPS = ("FULLY_CONNECTED", "CONV_2D", "BATCH_MATMUL")
MAX_REQUANTIZATION_SCALE = 256.0


def out_of_range_matmuls(data):
  """{output tensor name: op name} of the int8 matmuls XNNPACK cannot
  create (requantization scale >= 256), read without any delegate."""
  from ai_edge_litert.interpreter import Interpreter, OpResolverType
  interpreter = Interpreter(
      model_content=data,
      experimental_op_resolver_type=(
          OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
  tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
  scales = lambda i: tensors[i]["quantization_parameters"]["scales"]
  found = {}
  for node in interpreter._get_ops_details():  # pylint: disable=protected-access
    inputs, output = node["inputs"], tensors[node["outputs"][0]]
    if (node["op_name"] not in _MATMUL_OPS or output["dtype"] != np.int8
        or len(inputs) < 2 or not len(scales(inputs[1]))):
      continue
    requantization = (scales(inputs[0])[0] * scales(inputs[1])
                      / scales(output["index"])[0])
    if requantization.max() >= MAX_REQUANTIZATION_SCALE:
      found[output["name"]] = node["op_name"]
  return found


def refused_int8_nodes(data):
  """{output tensor name: op name} of the int8 nodes XNNPACK did not take
  (or, if some matmul would fail its runtime, of those matmuls)."""
  from ai_edge_litert.interpreter import Interpreter
  from converters.delegates import delegated_nodes
  out_of_range = out_of_range_matmuls(data)
  if out_of_range:
    return out_of_range
  with native_output_to(os.devnull):
    interpreter = Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
  covered, original, _ = delegated_nodes(interpreter)
  tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
  refused = {}
  for node in original:
    if node["index"] in covered or node["op_name"] in _INTEGER_INPUT_OPS:
      continue
    outputs = [tensors[t] for t in node["outputs"] if t >= 0]
    if any(t["dtype"] == np.int8 for t in outputs):
      refused[outputs[0]["name"]] = node["op_name"]
  return refused


def convert(converter, max_rounds=5):
  """Full-integer model for XNNPACK (see the module docstring) from an int8
  TFLiteConverter with its representative dataset.

  Returns:
    (bytes, facts) with facts = {"symmetric_tensors": tensors made
    symmetric, "rounds": quantizer runs, "float_ops": {op: count} kept
    float, "refused": {op: count} of int8 nodes XNNPACK still refuses
    (empty when it took every one)}.
  """
  return from_calibrated(calibrate(converter), max_rounds)


def from_calibrated(calibrated, max_rounds=5, keep_float=(),
                    dynamic_range=False):
  """`convert` from an already calibrated model; the nodes named (by
  their output tensor) in `keep_float` stay float with their islands, and
  with `dynamic_range` the fully connected ones among them get int8 weights
  (`dynamic_range_matmuls`)."""
  calibrated, changed, names = symmetric_matmul_operands(calibrated)
  denied = grow_islands(calibrated, set(keep_float)) if keep_float else set()
  for rounds in range(1, max_rounds + 1):
    data = quantize_calibrated(calibrated, denied)
    refused = refused_int8_nodes(data)
    new = {k for k in refused if k in names} - denied
    if not new:
      break
    denied = grow_islands(calibrated, denied | new)
  dynamic = 0
  if dynamic_range and keep_float:
    data, dynamic = dynamic_range_matmuls(data, set(keep_float))
  return data, {"symmetric_tensors": changed, "rounds": rounds,
                "float_ops": tflite_file.float_op_histogram(data),
                "refused": dict(collections.Counter(refused.values())),
                "dynamic_range_matmuls": dynamic}


def dynamic_range_matmuls(data, names):
  """(bytes, count): each float FULLY_CONNECTED named (by its output
  tensor) in `names` given int8 weights, symmetric per output channel, and
  its float input quantized per row at run time (asymmetric): LiteRT's
  dynamic-range kernel, which XNNPACK runs. Why: a matmul kept out of full
  int8 loses accuracy through its input's one static range (gelu's and
  LayerNorm's outlier rows); per-row ranges keep float's accuracy at about
  int8's size and a little over int8's time, where float weights cost 4x
  the bytes and the float kernel's time."""
  model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
  count = 0
  for graph in model.subgraphs:
    for op in graph.operators:
      if (_op_name(model, op) != "FULLY_CONNECTED"
          or _text(graph.tensors[op.outputs[0]].name) not in names
          or graph.tensors[op.inputs[0]].type != schema.TensorType.FLOAT32):
        continue
      weight = graph.tensors[op.inputs[1]]
      buffer = model.buffers[weight.buffer]
      if (weight.type != schema.TensorType.FLOAT32 or buffer.data is None
          or len(weight.shape) != 2):
        continue
      values = np.frombuffer(np.asarray(buffer.data, np.uint8).tobytes(),
                             np.float32).reshape(weight.shape)
      scales = np.maximum(np.abs(values).max(axis=1), 1e-12) / 127
      buffer.data = np.clip(np.round(values / scales[:, None]), -127,
                            127).astype(np.int8).view(np.uint8).ravel()
      weight.type = schema.TensorType.INT8
      weight.quantization = schema.QuantizationParametersT()
      weight.quantization.scale = scales.astype(np.float32)
      weight.quantization.zeroPoint = np.zeros(len(scales), np.int64)
      weight.quantization.quantizedDimension = 0
      op.builtinOptions.asymmetricQuantizeInputs = True
      count += 1
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder),
                 file_identifier=tflite_file.FILE_IDENTIFIER)
  return bytes(builder.Output()), count
