"""The classifier app's Python twin: a text in, a label and its probabilities.

What an Android app does with a converted classifier through the TFLite
Task Library's BertNLClassifier, done the way this project scores it: the
vocabulary and labels the model's metadata carries (`converters/metadata.py`
attaches vocab.txt and labels.txt), `[CLS] text [SEP]` features zero padded
to the model's own input length (`tfmodels.data.glue.convert_examples`,
what `convert_tflite`'s accuracy is measured on) and the model run through
LiteRT's signature runner with its tensors looked up by name. A
dynamic-length file (convert_tflite's default) runs each text at its own
length, `[CLS]` + pieces + `[SEP]`, as BertNLClassifier runs it (the
library cuts a text longer than L inside the graph, after L pieces; the
twin keeps L - 2 pieces and the `[SEP]`).

    classifier = Classifier("spam_int8.tflite")
    label, probabilities = classifier.classify("Win a prize now!")
    # "1", {"0": 0.03, "1": 0.97}

Errors are the QA app's `QaAppError`: one line naming the model or flag.
"""

import numpy as np

from android_bench.qa_app import DEFAULT_THREADS, QaAppError
from converters.contract import CONTRACT_INPUTS, HEAD_OUTPUTS, SIGNATURE_KEY

# The one output a BertNLClassifier model has: float32 [1, labels].
OUTPUT_NAME = HEAD_OUTPUTS["classifier"][0]


def labels_of(model_path):
  """The class names the model's metadata carries (labels.txt), in output
  order; QaAppError when it carries none."""
  from converters.metadata import LABELS_NAME, associated_file
  try:
    data = associated_file(model_path, LABELS_NAME)
  except OSError as e:
    raise QaAppError(f"{model_path}: cannot read it ({e})") from None
  if data is None:
    raise QaAppError(f"{model_path}: carries no {LABELS_NAME} (no "
                     "BertNLClassifier metadata: convert_tflite writes it "
                     "unless --nometadata)")
  try:
    labels = data.decode("utf-8").splitlines()
  except UnicodeDecodeError:
    raise QaAppError(f"{model_path}: its {LABELS_NAME} is not UTF-8"
                     ) from None
  if not labels or len(set(labels)) != len(labels) or "" in labels:
    raise QaAppError(f"{model_path}: its {LABELS_NAME} does not name "
                     f"distinct labels, one a line ({labels[:5]})")
  return labels


class Classifier:
  """A converted classifier (`convert_tflite` output) on LiteRT.

  Args:
    model_path: str, the `.tflite` file, with inputs `ids`, `mask`,
      `segment_ids` (int32 [1, L]), output `probability` (float32
      [1, labels]) and BertNLClassifier metadata.
    vocab: str or None, a vocab.txt that must be the one the model carries
      (used only for a model without metadata, which then still lacks
      labels and is refused).
    num_threads: int, CPU threads of the interpreter.

  Example: `Classifier("spam_int8.tflite").classify("Win a prize now!")`.
  """

  def __init__(self, model_path, vocab=None, num_threads=DEFAULT_THREADS):
    from ai_edge_litert.interpreter import Interpreter
    from android_bench.qa_app.answering import tokenizer_for
    self.model_path = str(model_path)
    try:
      interpreter = Interpreter(model_path=self.model_path,
                                num_threads=num_threads)
    except (ValueError, RuntimeError, OSError) as e:
      first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
      raise QaAppError(f"{model_path}: cannot load the model ({first})"
                       ) from None
    signatures = interpreter.get_signature_list()
    if SIGNATURE_KEY not in signatures:
      raise QaAppError(f"{model_path}: no signature {SIGNATURE_KEY!r} (it "
                       f"has {sorted(signatures)}); convert it with "
                       "convert_tflite")
    found = signatures[SIGNATURE_KEY]
    missing = [n for n in CONTRACT_INPUTS if n not in found["inputs"]] + [
        n for n in (OUTPUT_NAME,) if n not in found["outputs"]]
    if missing:
      raise QaAppError(
          f"{model_path}: not a classifier: signature lacks "
          f"{', '.join(missing)} (it has inputs {sorted(found['inputs'])}, "
          f"outputs {sorted(found['outputs'])})")
    self._runner = interpreter.get_signature_runner(SIGNATURE_KEY)
    inputs = self._runner.get_input_details()
    shapes = {n: tuple(int(d) for d in inputs[n]["shape"])
              for n in CONTRACT_INPUTS}
    if len(set(shapes.values())) != 1 or len(shapes["ids"]) != 2 or (
        shapes["ids"][0] != 1) or any(inputs[n]["dtype"] != np.int32
                                      for n in CONTRACT_INPUTS):
      raise QaAppError(f"{model_path}: inputs must all be int32 [1, L], "
                       f"got {shapes}")
    self.sequence_length = shapes["ids"][1]
    signature = inputs["ids"].get("shape_signature")
    self.dynamic = signature is not None and list(signature) == [1, -1]
    output = self._runner.get_output_details()[OUTPUT_NAME]["shape"]
    self.labels = labels_of(self.model_path)
    if tuple(int(d) for d in output) != (1, len(self.labels)):
      raise QaAppError(f"{model_path}: output {OUTPUT_NAME} is "
                       f"{list(output)}, but its labels.txt names "
                       f"{len(self.labels)} labels")
    self.tokenizer = tokenizer_for(self.model_path, vocab)

  def features(self, texts):
    """`glue.convert_examples` of `texts` at the model's length: int32
    input_ids, input_mask, segment_ids [N, L] (longer texts truncated to
    L - 2 pieces, as convert_tflite's accuracy sees them)."""
    from tfmodels.data import glue
    examples = [glue.Example(str(i), text, None, None)
                for i, text in enumerate(texts)]
    return glue.convert_examples(examples, self.tokenizer,
                                 self.sequence_length)

  def probabilities(self, features):
    """The model's `probability` per row of `features`: float32
    [N, labels], one interpreter call per row (the app's batch of one; a
    dynamic-length file at the row's real tokens)."""
    rows = []
    for ids, mask, segments in zip(features["input_ids"],
                                   features["input_mask"],
                                   features["segment_ids"]):
      length = np.count_nonzero(mask) if self.dynamic else len(ids)
      feed = {name: np.asarray(value, np.int32).reshape(1, -1)[:, :length]
              for name, value in zip(CONTRACT_INPUTS, (ids, mask, segments))}
      rows.append(np.asarray(self._runner(**feed)[OUTPUT_NAME],
                             np.float32).reshape(-1))
    return np.stack(rows) if rows else np.zeros([0, len(self.labels)],
                                                 np.float32)

  def classify(self, text):
    """(label, {label: probability}): the most probable label (the first
    on a tie, as numpy's argmax) and every label's probability."""
    probability = self.probabilities(self.features([text]))[0]
    return (self.labels[int(np.argmax(probability))],
            {label: float(p) for label, p in zip(self.labels, probability)})
