"""Export: any of our models as a SavedModel in the contract, over [1, L]
inputs or, with `dynamic_length`, [1, any length].

Apps need the contract's names, so the model is wrapped in a tf.function
over int32 inputs named `ids`, `mask`, `segment_ids` whose outputs are the
contract's (see contract.py). A dynamic length becomes a TFLite shape
signature [1, -1] (conversion.py then gives the file the default shape
[1, L], the length apps that do not resize, like the Task Library's
BertQuestionAnswerer, feed).
The same `contract_outputs` maps the Keras model's outputs for validation,
so Keras and TFLite are compared on identical terms.

    export_saved_model(model, "span", MAX_SEQ_LENGTH, "/tmp/qa_saved_model")
"""

import tensorflow as tf

from converters.contract import HEAD_OUTPUTS, INPUT_FEATURES, SIGNATURE_KEY


def output_kind(head, outputs):
  """The contract's output kind: a one-unit classifier is a regression."""
  if head == "classifier" and outputs["logits"].shape[-1] == 1:
    return "regression"
  return head


# Our output each contract output of a head is made from.
_SOURCES = {"classifier": ("logits",), "regression": ("logits",),
            "intent_slot": ("intent_logits", "slot_logits"),
            "span": ("start_logits", "end_logits"), "tagger": ("logits",),
            "encoder": ("sequence_output",)}


def source_keys(head):
  """Our outputs `contract_outputs` reads for `head`: all a validation
  needs the model to compute."""
  return _SOURCES[head]


def contract_outputs(head, outputs):
  """Our model's output dict -> the contract's outputs for `head`.

  The classifier exports probabilities (softmax over the logits), as the
  Task Library's BertNLClassifier reads them; the joint model's intent
  likewise, its slots stay logits as the tagger's do (argmax is all an app
  needs per token).
  """
  kind = output_kind(head, outputs)
  if kind == "classifier":
    return {"probability": tf.nn.softmax(outputs["logits"], axis=-1)}
  if kind == "regression":
    return {"score": outputs["logits"]}
  if kind == "intent_slot":
    return {"intent_probability": tf.nn.softmax(outputs["intent_logits"],
                                                axis=-1),
            "slot_logits": outputs["slot_logits"]}
  return dict(zip(HEAD_OUTPUTS[kind], (outputs[k] for k in _SOURCES[kind])))


def features_of(contract_inputs):
  """{ids, mask, segment_ids} -> our models' {input_ids, input_mask, ...}."""
  return {INPUT_FEATURES[k]: v for k, v in contract_inputs.items()}


def _cut(values, length):
  """[1, n] -> at most [1, length]: the first length - 1 positions and the
  last one, so a text longer than L keeps its closing `[SEP]` as the fixed
  file's truncation does (n <= length: unchanged)."""
  keep = tf.minimum(tf.shape(values)[1], length) - 1
  return tf.concat([values[:, :keep], values[:, -1:]], axis=1)


class _ContractModule(tf.Module):
  """The contract signature over `model` at sequence length L, or with
  `dynamic` at any length; a dynamic classifier reads at most L tokens
  (`_cut`: the Task Library's BertNLClassifier sizes a dynamic file's
  inputs to the whole text, `[CLS]` + pieces + `[SEP]`, where it truncates
  a fixed file's text to L - 2 pieces and the `[SEP]`).

  The module tracks the model's variables, not the model: saving a Keras
  model also traces every layer's call for Keras' own SavedModel metadata,
  which the converter never reads. MiniLM at L = 384: 6 s instead of 1,
  and 180 MB more held through both conversions
  (convert_tflite's peak: 2.3 -> 2.1 GB); the .tflite files come out byte
  for byte the same.
  """

  def __init__(self, model, head, seq_length, dynamic=False):
    super().__init__()
    # The signature's variables must be reachable from this module: a
    # Keras model's (or tf.Module's), or a loaded SavedModel's.
    self.model_variables = list(getattr(model, "variables", ()))
    self.loaded = getattr(model, "loaded", None)

    cut = seq_length if dynamic and head == "classifier" else None

    def serve(ids, mask, segment_ids):  # a closure: `model` stays untracked
      inputs = {"ids": ids, "mask": mask, "segment_ids": segment_ids}
      if cut:
        inputs = {k: _cut(v, cut) for k, v in inputs.items()}
      return contract_outputs(head, model(features_of(inputs),
                                          training=False))

    self.serve = tf.function(serve, input_signature=[
        tf.TensorSpec([1, None if dynamic else seq_length], tf.int32,
                      name=name) for name in INPUT_FEATURES])


def export_saved_model(model, head, seq_length, directory,
                       dynamic_length=False):
  """Writes the SavedModel to `directory`.

  Args:
    model: callable(our feature dict, training=False) -> our output dict.
    head: "span", "classifier", "tagger", "intent_slot" or "encoder".
    seq_length: int, L.
    directory: str, must not exist yet.
    dynamic_length: inputs [1, any length].

  Raises:
    ValueError: the model cannot take [1, L] inputs (the message says why).
  """
  module = _ContractModule(model, head, seq_length, dynamic_length)
  try:
    concrete = module.serve.get_concrete_function()
  except (ValueError, TypeError, tf.errors.OpError) as e:
    length = "any length" if dynamic_length else seq_length
    raise ValueError(f"the model cannot take [1, {length}] inputs: "
                     f"{str(e).splitlines()[0][:200]}") from None
  tf.saved_model.save(module, directory, signatures={SIGNATURE_KEY: concrete})
