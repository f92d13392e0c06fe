"""The app contract of a converted model, and its check through LiteRT.

Apps (the Task Library, our QA app) look tensors up by name: int32 [1, L]
inputs `ids`, `mask`, `segment_ids`; float32 outputs `start_logits` /
`end_logits` (QA), `probability` (classifier; `score` for regression),
`logits` (tagger), `intent_probability` [1, intents] and `slot_logits`
[1, L, tags] (joint intent + slot) or `sequence_output` (encoder). The
check reads the converted file back through ai_edge_litert's signature
runner, so it sees what an app will see, and refuses ops an app's runtime
will not have.

    expected = output_shapes("span", seq_length=MAX_SEQ_LENGTH)
    facts = check(tflite_bytes, expected, seq_length=MAX_SEQ_LENGTH)
"""

from converters import tflite_file

# Contract input name -> our models' feature name (tfmodels.encoders), in the
# order the export declares them.
INPUT_FEATURES = {"ids": "input_ids", "mask": "input_mask",
                  "segment_ids": "segment_ids"}
CONTRACT_INPUTS = tuple(INPUT_FEATURES)
# Outputs by kind: a classifier with one output unit is a regression.
HEAD_OUTPUTS = {
    "span": ("start_logits", "end_logits"),
    "classifier": ("probability",),
    "regression": ("score",),
    "tagger": ("logits",),
    "intent_slot": ("intent_probability", "slot_logits"),
    "encoder": ("sequence_output",),
}
SIGNATURE_KEY = "serving_default"
# A file with a dynamic length (convert_tflite --dynamic_length) is run at
# multiples of this many tokens: the app's twin sizes each window so, and
# the converter validates the file at a second such length.
LENGTH_STEP = 32


class ContractError(ValueError):
  """The converted model breaks the contract; the message says how."""


def check(data, expected_outputs, seq_length, allow_select_tf_ops=False):
  """Checks names, dtypes, shapes and ops; returns what it saw.

  Args:
    data: bytes of the .tflite file.
    expected_outputs: {output name: shape tuple}.
    seq_length: int, L.
    allow_select_tf_ops: bool, accept Flex ops (the app must then ship the
      select-TF-ops runtime).

  Returns:
    {"inputs": {name: [shape, dtype]}, "outputs": {...}, "select_tf_ops":
    [...], "input_order": [...], "output_order": [...]}: the order is the
    subgraph's, which is NOT the declaration order (look up by name).

  Raises:
    ContractError: one line naming the first problem.
  """
  from ai_edge_litert.interpreter import Interpreter
  custom = tflite_file.custom_ops(data)
  if custom:
    raise ContractError(f"custom ops no runtime provides: {custom}")
  flex = tflite_file.select_tf_ops(data)
  if flex and not allow_select_tf_ops:
    raise ContractError(f"select TF ops {flex} are not TFLite builtins "
                        "(pass --allow_select_tf_ops to accept them)")
  interpreter = Interpreter(model_content=data)
  signatures = interpreter.get_signature_list()
  if list(signatures) != [SIGNATURE_KEY]:
    raise ContractError(f"signatures {list(signatures)}, expected only "
                        f"{SIGNATURE_KEY!r}")
  runner = interpreter.get_signature_runner(SIGNATURE_KEY)
  inputs = runner.get_input_details()
  outputs = runner.get_output_details()
  seen = {}
  for kind, details, want in (
      ("input", inputs, {n: ((1, seq_length), "int32")
                         for n in CONTRACT_INPUTS}),
      ("output", outputs, {n: (tuple(s), "float32")
                           for n, s in expected_outputs.items()})):
    if set(details) != set(want):
      raise ContractError(f"{kind}s {sorted(details)}, expected "
                          f"{sorted(want)}")
    for name, (shape, dtype) in want.items():
      got_shape = tuple(int(d) for d in details[name]["shape"])
      got_dtype = details[name]["dtype"].__name__
      if got_shape != shape or got_dtype != dtype:
        raise ContractError(f"{kind} {name!r} is {got_dtype}{list(got_shape)}"
                            f", expected {dtype}{list(shape)}")
      seen[name] = [list(got_shape), got_dtype]
  input_order, output_order = tflite_file.io_tensor_names(data)
  for kind, order, names in (("input", input_order, CONTRACT_INPUTS),
                             ("output", output_order, expected_outputs)):
    if sorted(order) != sorted(names):
      raise ContractError(f"{kind} tensors are named {order}, expected "
                          f"{sorted(names)}")
  return {"inputs": {n: seen[n] for n in CONTRACT_INPUTS},
          "outputs": {n: seen[n] for n in expected_outputs},
          "input_order": input_order, "output_order": output_order,
          "select_tf_ops": flex}
