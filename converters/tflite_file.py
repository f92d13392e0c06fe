"""What is inside a .tflite file, read and rewritten through its flatbuffer.

The LiteRT interpreter hides op codes, tensor types, custom (Flex) ops and
metadata; these come from the flatbuffer itself, through the classes
ai_edge_litert generates from TFLite's schema.fbs.

    ops = op_histogram(data)          # {"FULLY_CONNECTED": 24, ...}
    float_ops = float_op_histogram(data)
    data = rewrite(data, tensor_names=signature_tensor_names(data),
                   metadata={"TFLITE_METADATA": payload})
"""

import collections

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

FILE_IDENTIFIER = b"TFL3"
_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items()
             if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items()
               if not k.startswith("_")}
_FLOAT_TYPES = (schema.TensorType.FLOAT32, schema.TensorType.FLOAT16)


class TFLiteFileError(ValueError):
  """Bytes that are not a TFLite flatbuffer we can read."""


def read_model(data):
  """The root `Model` table; refuses anything without TFLite's identifier."""
  if len(data) < 8 or bytes(data[4:8]) != FILE_IDENTIFIER:
    raise TFLiteFileError("not a TFLite flatbuffer (no TFL3 identifier)")
  return schema.Model.GetRootAs(data, 0)


def _op_name(model, opcode_index):
  code = model.OperatorCodes(opcode_index)
  # builtin_code replaced the int8 deprecated_builtin_code once codes passed
  # 127; old writers fill only the latter, so take the larger of the two.
  builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
  if builtin == schema.BuiltinOperator.CUSTOM:
    return (code.CustomCode() or b"?").decode()
  return _OP_NAMES.get(builtin, f"BUILTIN_{builtin}")


def operators(data):
  """(op name, output tensor type names) of every op in every subgraph."""
  model = read_model(data)
  for s in range(model.SubgraphsLength()):
    graph = model.Subgraphs(s)
    for i in range(graph.OperatorsLength()):
      op = graph.Operators(i)
      types = [_TYPE_NAMES.get(graph.Tensors(t).Type(), "?")
               for t in op.OutputsAsNumpy() if t >= 0] if (
                   op.OutputsLength()) else []
      yield _op_name(model, op.OpcodeIndex()), types


def op_histogram(data):
  """{op name: count}, most frequent first."""
  counts = collections.Counter(name for name, _ in operators(data))
  return dict(counts.most_common())


def float_op_histogram(data):
  """Ops that still compute in float (an output is float32 / float16).

  In a float model that is every op; after int8 quantization it is what stays
  float (LayerNorm's mean / rsqrt, the mask Cast, the final Dequantize).
  """
  counts = collections.Counter(
      name for name, types in operators(data)
      if any(getattr(schema.TensorType, t, None) in _FLOAT_TYPES
             for t in types))
  return dict(counts.most_common())


def select_tf_ops(data):
  """Sorted names of the Flex (select TensorFlow) ops the model needs."""
  return sorted({name[len("Flex"):] for name, _ in operators(data)
                 if name.startswith("Flex")})


def custom_ops(data):
  """Sorted names of custom ops other than Flex ones (no runtime has them)."""
  builtin = set(_OP_NAMES.values())
  return sorted({name for name, _ in operators(data)
                 if name not in builtin and not name.startswith("Flex")
                 and not name.startswith("BUILTIN_")})


def signatures(data):
  """{signature key: {"inputs": {name: tensor index}, "outputs": {...},
  "subgraph": index}} as stored in the file."""
  model = read_model(data)
  out = {}
  for i in range(model.SignatureDefsLength()):
    sig = model.SignatureDefs(i)
    maps = {}
    for kind, length, get in (("inputs", sig.InputsLength, sig.Inputs),
                              ("outputs", sig.OutputsLength, sig.Outputs)):
      maps[kind] = {get(j).Name().decode(): get(j).TensorIndex()
                    for j in range(length())}
    out[sig.SignatureKey().decode()] = dict(maps,
                                            subgraph=sig.SubgraphIndex())
  return out


def io_tensor_names(data, subgraph=0):
  """(input tensor names, output tensor names) in the subgraph's order."""
  graph = read_model(data).Subgraphs(subgraph)
  name = lambda t: graph.Tensors(t).Name().decode()
  return ([name(t) for t in graph.InputsAsNumpy()],
          [name(t) for t in graph.OutputsAsNumpy()])


def shape_signatures(data, subgraph=0):
  """{input / output tensor name: its shape signature (-1: dynamic)}."""
  graph = read_model(data).Subgraphs(subgraph)
  out = {}
  for t in list(graph.InputsAsNumpy()) + list(graph.OutputsAsNumpy()):
    tensor = graph.Tensors(t)
    signature = (tensor.ShapeSignatureAsNumpy()
                 if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy())
    out[tensor.Name().decode()] = [int(d) for d in signature]
  return out


def signature_tensor_names(data, key="serving_default"):
  """{tensor index: signature name} for the inputs and outputs of `key`."""
  sig = signatures(data)[key]
  return {index: name for kind in ("inputs", "outputs")
          for name, index in sig[kind].items()}


def metadata_buffers(data):
  """{metadata name: bytes} of the model's metadata entries."""
  model = read_model(data)
  out = {}
  for i in range(model.MetadataLength()):
    entry = model.Metadata(i)
    buffer = model.Buffers(entry.Buffer())
    out[entry.Name().decode()] = (buffer.DataAsNumpy().tobytes()
                                  if buffer.DataLength() else b"")
  return out


def _text(value):
  return value.decode() if isinstance(value, bytes) else value


def rewrite(data, tensor_names=None, metadata=None, subgraph=0,
            default_length=None):
  """The model with tensors renamed and metadata entries added or replaced.

  Args:
    data: bytes of a .tflite file (no appended zip: it would be dropped).
    tensor_names: {tensor index: new name} in `subgraph`.
    metadata: {entry name: bytes}, e.g. {"TFLITE_METADATA": ...}.
    default_length: L for the dynamic dimension (-1 in the shape signature)
      of the subgraph's inputs and outputs: their default shape, the one an
      interpreter allocates until it is resized (the converter writes 1).
  """
  read_model(data)  # validates the identifier
  model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
  graph = model.subgraphs[subgraph]
  tensors = graph.tensors
  for index, name in (tensor_names or {}).items():
    tensors[index].name = name
  if default_length:
    for index in list(graph.inputs) + list(graph.outputs):
      tensor = tensors[index]
      if tensor.shapeSignature is not None and -1 in list(
          tensor.shapeSignature):
        tensor.shape = np.array([default_length if d == -1 else d
                                 for d in tensor.shapeSignature], np.int32)
  metadata = metadata or {}
  model.metadata = [m for m in model.metadata or []
                    if _text(m.name) not in metadata]
  for name, payload in metadata.items():
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(payload, np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = name
    entry.buffer = len(model.buffers) - 1
    model.metadata.append(entry)
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder), file_identifier=FILE_IDENTIFIER)
  return bytes(builder.Output())
