"""Which .tflite files a run measures, and the facts recorded about each.

    paths = find_models(["models/", "extra/qa_int8.tflite"])
    for path in paths:
      check_model(path)   # ModelError: empty, not TFLite, truncated
    facts = model_facts(paths[0])  # name, path, bytes, sha256, md5, inputs...

Why checksums: results are compared across days and devices, so every row
must say exactly which file it measured (sha256), and the adb target skips
pushing a file the device already holds (md5 too, since older toybox builds
have only `md5sum`). Input and output signatures come from LiteRT's
interpreter (no delegate is applied, so reading them costs nothing).
"""

import hashlib
import os


class ModelError(ValueError):
  """A named model path that is missing or not a .tflite file."""


# LiteRT's flatbuffer verifier (tflite/core/model_builder.cc) says this of a
# file whose offsets or sizes leave it: truncated, or corrupt.
_NOT_VERIFIED = "The model is not a valid Flatbuffer buffer"


def find_models(paths):
  """Expands files and directories (recursively) into sorted .tflite paths."""
  found = []
  for path in paths:
    if os.path.isdir(path):
      for root, _, files in os.walk(path):
        found.extend(os.path.join(root, f) for f in files
                     if f.endswith(".tflite"))
    elif os.path.isfile(path):
      if not path.endswith(".tflite"):
        raise ModelError(f"{path}: not a .tflite file")
      found.append(path)
    else:
      raise ModelError(f"{path}: no such file or directory")
  found = sorted(dict.fromkeys(os.path.abspath(p) for p in found))
  names = [os.path.basename(p) for p in found]
  for name in set(names):
    if names.count(name) > 1:
      same = [p for p in found if os.path.basename(p) == name]
      raise ModelError(f"two models share the file name {name} ({same[0]}, "
                       f"{same[1]}): results are keyed by name, rename one")
  return found


def check_model(path):
  """ModelError (one line naming the file) unless `path` holds a whole
  TFLite flatbuffer: not empty, TFLite's identifier (bytes 4..8 "TFL3"),
  and accepted by LiteRT's flatbuffer verifier, which checks every offset
  and size against the file (run by building an interpreter, no delegate,
  nothing allocated). A model that verifies but that this host's LiteRT
  cannot build (Flex or custom ops) passes: a device may run it, and
  `model_facts` records why the host could not load it."""
  from converters.tflite_file import FILE_IDENTIFIER
  try:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
      head = f.read(8)
  except OSError as e:
    raise ModelError(f"{path}: cannot read it ({e.strerror})") from None
  if size == 0:
    raise ModelError(f"{path}: is empty (0 bytes); not a TFLite model")
  if len(head) < 8 or head[4:8] != FILE_IDENTIFIER:
    raise ModelError(f"{path}: not a TFLite flatbuffer (no "
                     f"{FILE_IDENTIFIER.decode()} identifier; {size} bytes)")
  from ai_edge_litert import interpreter as litert
  try:
    litert.Interpreter(model_path=path, experimental_op_resolver_type=(
        litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
  except (ValueError, RuntimeError) as e:
    if _NOT_VERIFIED in str(e):
      raise ModelError(f"{path}: truncated or corrupt TFLite flatbuffer "
                       f"({size} bytes; LiteRT's verifier rejects it)"
                       ) from None


def file_digests(path):
  """(sha256, md5) hex digests of a file, read once."""
  sha256, md5 = hashlib.sha256(), hashlib.md5()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      sha256.update(block)
      md5.update(block)
  return sha256.hexdigest(), md5.hexdigest()


def _tensors(details):
  return [{"name": d["name"], "shape": [int(x) for x in d["shape"]],
           "shape_signature": [int(x) for x in d.get(
               "shape_signature", d["shape"])],
           "dtype": getattr(d["dtype"], "__name__", str(d["dtype"]))}
          for d in details]


def dynamic_length(facts):
  """Whether a model's inputs take any sequence length (convert_tflite's
  shape signature [1, -1]): the lengths `--lengths` may time it at."""
  inputs = facts.get("inputs") or []
  return bool(inputs) and all(
      len(t["shape_signature"]) == 2 and t["shape_signature"][1] == -1
      for t in inputs)


# Ops that pass integer ids through unchanged in value (their data input is
# 0); a dynamic-length classifier cuts its inputs to L first (slices joined
# by a CONCATENATION: converters/export.py's `_cut`).
_PASS_THROUGH = ("CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY",
                 "STRIDED_SLICE", "SLICE", "CONCATENATION")


def index_ranges(ops, tensors, inputs):
  """Inclusive value ranges for the integer inputs that index a table.

  benchmark_model fills integer inputs with 0..99 unless told otherwise, so
  a BERT's `segment_ids` (2 token types) overruns its table and the run
  fails; a gather's table gives the valid range exactly. An input that
  feeds several tables gets the smallest; a `mask` that indexes nothing gets
  0..1. The harness passes them to the tool with `input_flags`.
  """
  shapes = {t["index"]: [int(x) for x in t["shape"]] for t in tensors}
  ranges = {}
  for detail in inputs:
    if getattr(detail["dtype"], "__name__", "") not in ("int32", "int64"):
      continue
    frontier, tables = {int(detail["index"])}, []
    while frontier:
      tensor = frontier.pop()
      for op in ops:
        op_inputs = [int(i) for i in op["inputs"]]
        if op["op_name"] == "GATHER" and op_inputs[1:2] == [tensor]:
          tables.append(shapes[op_inputs[0]][0])
        elif op["op_name"] == "EMBEDDING_LOOKUP" and op_inputs[:1] == [tensor]:
          tables.append(shapes[op_inputs[1]][0])
        elif op["op_name"] in _PASS_THROUGH and op_inputs[:1] == [tensor]:
          frontier.update(int(o) for o in op["outputs"])
    if tables:
      ranges[detail["name"]] = [0, min(tables) - 1]
    elif "mask" in detail["name"].lower():
      ranges[detail["name"]] = [0, 1]
  return ranges


# Ops through which a sequence length (the SHAPE of an input) reaches the
# end of a slice, or the positions a table is gathered at, unchanged: picked
# out of the shape, packed with the other bounds, cast, or counted up to by
# RANGE (positions 0..L-1). Anything else (a MINIMUM: a dynamic classifier
# first cuts its inputs to L, converters/export.py's `_cut`, so it takes any
# length; arithmetic) ends the trace: a limit it cannot read goes unchecked.
_CARRY_DATA = ("STRIDED_SLICE", "SLICE", "GATHER", "CAST", "RESHAPE",
               "SQUEEZE", "EXPAND_DIMS", "IDENTITY")
_CARRY_ANY = ("PACK", "CONCATENATION", "RANGE")


def position_limit(ops, tensors, inputs):
  """The longest sequence a dynamic-length model takes: the rows of its
  position table, or None where the graph shows none.

  The encoder adds `position_embeddings[:L]` (tfmodels/layers/embeddings.py):
  a STRIDED_SLICE of a constant [max_positions, hidden] table (or
  [1, max_positions, hidden]) whose end is the ids' length; other exports
  gather the table at positions RANGE(L), or at a constant position-id
  buffer sliced to L. Past the table's rows the slice stops short, and
  the model fails on the first op that adds it to the word vectors. Read
  here from the interpreter's op list: every constant (not computed from an
  input) that an input's length slices or gathers bounds the length.
  """
  shapes = {int(t["index"]): [int(x) for x in t.get("shape_signature",
                                                      t["shape"])]
            for t in tensors}
  dtypes = {int(t["index"]): getattr(t["dtype"], "__name__", "")
            for t in tensors}
  ops = [(op["op_name"], [int(i) for i in op["inputs"]],
          [int(o) for o in op["outputs"]]) for op in ops]
  producers = {o: (name, op_inputs) for name, op_inputs, op_outputs in ops
               for o in op_outputs}
  input_ids = {int(d["index"]) for d in inputs}
  computed = set(input_ids)  # tensors that depend on an input
  for _, op_inputs, op_outputs in ops:  # ops are in execution order
    if computed.intersection(op_inputs):
      computed.update(op_outputs)

  def constant(tensor):
    return tensor >= 0 and tensor not in computed and -1 not in shapes.get(
        tensor, [-1])

  # The inputs (and their casts) whose shape is the sequence length.
  same = set(input_ids)
  for name, op_inputs, op_outputs in ops:
    if name in ("CAST", "IDENTITY") and op_inputs[:1] and \
        op_inputs[0] in same:
      same.update(op_outputs)
  lengths = {o for name, op_inputs, op_outputs in ops
             if name == "SHAPE" and op_inputs[:1] and op_inputs[0] in same
             for o in op_outputs}
  limits = []
  for name, op_inputs, op_outputs in ops:
    if not lengths.intersection(op_inputs):
      continue
    data = op_inputs[0] if op_inputs else -1
    if name in ("STRIDED_SLICE", "SLICE") and op_inputs[2:3] and \
        op_inputs[2] in lengths and constant(data):
      # The end (STRIDED_SLICE) or size (SLICE) holds the length: at the
      # places PACK put it, else on the one axis the output leaves open.
      packed = producers.get(op_inputs[2])
      if packed and packed[0] == "PACK":
        axes = [a for a, t in enumerate(packed[1]) if t in lengths]
      else:
        axes = [a for a, size in enumerate(shapes[op_outputs[0]])
                if size == -1]
        axes = axes if len(axes) == 1 else []
      limits += [shapes[data][a] for a in axes if a < len(shapes[data])]
    elif name == "GATHER" and op_inputs[1:2] and op_inputs[1] in lengths \
        and constant(data):
      limits.append(shapes[data][0])
    elif name == "EMBEDDING_LOOKUP" and data in lengths and \
        op_inputs[1:2] and constant(op_inputs[1]):
      limits.append(shapes[op_inputs[1]][0])
    # Positions too: a constant position-id buffer sliced to L, or gathered.
    if name in _CARRY_ANY or (name in _CARRY_DATA and (
        data in lengths or constant(data))):
      lengths.update(o for o in op_outputs
                     if dtypes.get(o) in ("int32", "int64"))
  limits = [n for n in limits if n > 0]
  return min(limits) if limits else None


def input_flags(inputs, ranges, length=None):
  """benchmark_model flags that give `ranges` to the model's inputs and,
  with `length`, the shape [1, length] to a dynamic-length model's.

  The tool takes a value range only for a name listed in --input_layer, and
  --input_layer must list every input, in the interpreter's order, with
  its shape in --input_layer_shape (it aborts otherwise); it resizes an
  input to the shape given there.
  """
  if not inputs or not (ranges or length):
    return []
  shapes = [[length if length and d == -1 else s
             for s, d in zip(t["shape"], t.get("shape_signature", t["shape"]))]
            for t in inputs]
  flags = ["--input_layer=" + ",".join(t["name"] for t in inputs),
           "--input_layer_shape=" + ":".join(
               ",".join(str(d) for d in shape) for shape in shapes)]
  if ranges:
    flags.append("--input_layer_value_range=" + ":".join(
        f"{t['name']},{ranges[t['name']][0]},{ranges[t['name']][1]}"
        for t in inputs if t["name"] in ranges))
  return flags


def _interpreter(path):
  from ai_edge_litert import interpreter as litert
  return litert.Interpreter(model_path=path, experimental_op_resolver_type=(
      litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))


def length_facts(path):
  """{"inputs", "max_length"} of one model, what `--lengths` is checked
  against before anything runs (model_facts' values, without reading the
  whole file for its checksums). Both None when this host's LiteRT cannot
  load the model (Flex or custom ops): its limit is then unknown, and the
  lengths go unchecked."""
  try:
    interpreter = _interpreter(path)
    ops = interpreter._get_ops_details()  # pylint: disable=protected-access
    return {"inputs": _tensors(interpreter.get_input_details()),
            "max_length": position_limit(ops,
                                         interpreter.get_tensor_details(),
                                         interpreter.get_input_details())}
  except (ValueError, RuntimeError):
    return {"inputs": None, "max_length": None}


def model_facts(path):
  """The facts a results file records about one model. `max_length`: the
  longest sequence it takes (`position_limit`), None when unknown."""
  sha256, md5 = file_digests(path)
  facts = {"name": os.path.basename(path), "path": os.path.abspath(path),
           "size_bytes": os.path.getsize(path), "sha256": sha256, "md5": md5,
           "inputs": None, "outputs": None, "nodes": None,
           "index_ranges": {}, "max_length": None}
  try:
    interpreter = _interpreter(path)
    facts["inputs"] = _tensors(interpreter.get_input_details())
    facts["outputs"] = _tensors(interpreter.get_output_details())
    ops = interpreter._get_ops_details()  # pylint: disable=protected-access
    facts["nodes"] = len(ops)
    facts["index_ranges"] = index_ranges(
        ops, interpreter.get_tensor_details(),
        interpreter.get_input_details())
    facts["max_length"] = position_limit(
        ops, interpreter.get_tensor_details(),
        interpreter.get_input_details())
    histogram = {}
    for op in ops:
      histogram[op["op_name"]] = histogram.get(op["op_name"], 0) + 1
    facts["op_counts"] = dict(sorted(histogram.items()))
  except (ValueError, RuntimeError) as e:
    # Still measurable on a device whose runtime knows more ops (Flex).
    facts["load_error"] = str(e).splitlines()[0] if str(e) else repr(e)
  return facts
