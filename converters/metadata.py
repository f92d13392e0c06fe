"""TFLite metadata the Task Library reads: vocab, tokenizer, tensor names.

BertQuestionAnswerer and BertNLClassifier (TFLite Task Library) find
everything in the model file itself:

  * a `TFLITE_METADATA` buffer holding a `ModelMetadata` flatbuffer (schema
    in converters/schema/): one `TensorMetadata` per subgraph input and
    output, in the subgraph's order, named `ids` / `mask` / `segment_ids`
    and `start_logits` / `end_logits` or `probability` (the joint intent +
    slot model: `intent_probability` / `slot_logits`, no Task Library API);
  * a `BertTokenizerOptions` input process unit naming the vocabulary;
  * the vocabulary (and a classifier's labels, or the joint model's intents
    and slot tags, and the tokenizer's settings when they are not the
    defaults) as associated files: an uncompressed zip appended to the
    flatbuffer, so the file is a valid model and a valid zip at once.

    data = attach(data, head="span", vocab_file="vocab.txt")
    associated_file(data, "vocab.txt")   # what consumers read back
"""

import io
import json
import zipfile

import flatbuffers

from converters import tflite_file
from converters.schema import metadata_schema_generated as fb

METADATA_NAME = "TFLITE_METADATA"
METADATA_IDENTIFIER = b"M001"
# Process units and BertTokenizerOptions arrived in schema 1.1.0; nothing we
# write is newer.
MIN_PARSER_VERSION = "1.1.0"
VOCAB_NAME = "vocab.txt"
LABELS_NAME = "labels.txt"
SLOT_LABELS_NAME = "slot_labels.txt"
# The tokenizer's settings, when they are not BERT's uncased defaults.
SETTINGS_NAME = "tokenizer_config.json"
# The associated file naming each entry of a labelled output's last axis.
LABEL_FILES = {"probability": LABELS_NAME, "intent_probability": LABELS_NAME,
               "slot_logits": SLOT_LABELS_NAME}

_MODEL_NAMES = {"span": "BertQuestionAnswerer",
                "classifier": "BertNLClassifier",
                "intent_slot": "BertIntentSlot"}
_DESCRIPTIONS = {
    "ids": "Tokenized ids of the input text.",
    "mask": "Mask with 1 for real tokens and 0 for padding tokens.",
    "segment_ids": "0 for the first sequence, 1 for the second sequence if "
                   "exists.",
    "start_logits": "Logits of each token being the answer's first token.",
    "end_logits": "Logits of each token being the answer's last token.",
    "probability": "Probabilities of the labels respectively.",
    "score": "Regression score.",
    "logits": "Per-token tag logits.",
    "intent_probability": "Probabilities of the intents respectively.",
    "slot_logits": "Per-token slot tag logits (each word's first piece).",
    "sequence_output": "Last encoder layer's output per token.",
}


def _file(name, kind, description):
  f = fb.AssociatedFileT()
  f.name, f.type, f.description = name, kind, description
  return f


def _tensor(name, files=None):
  t = fb.TensorMetadataT()
  t.name = name
  t.description = _DESCRIPTIONS.get(name, "")
  t.content = fb.ContentT()
  t.content.contentPropertiesType = fb.ContentProperties.FeatureProperties
  t.content.contentProperties = fb.FeaturePropertiesT()
  t.associatedFiles = files
  return t


def build_metadata(head, input_order, output_order, name=None,
                   description="", version="", labelled=()):
  """The ModelMetadata flatbuffer (bytes, identifier M001).

  Args:
    head: "span", "classifier", "tagger", "intent_slot" or "encoder".
    input_order / output_order: tensor names in the subgraph's order (the
      metadata must list them in that order).
    labelled: outputs that get their LABEL_FILES file (TENSOR_AXIS_LABELS).
  """
  tokenizer = fb.BertTokenizerOptionsT()
  tokenizer.vocabFile = [_file(VOCAB_NAME, fb.AssociatedFileType.VOCABULARY,
                               "WordPiece vocabulary, one token per line.")]
  unit = fb.ProcessUnitT()
  unit.optionsType = fb.ProcessUnitOptions.BertTokenizerOptions
  unit.options = tokenizer

  def labels(output):
    return [_file(LABEL_FILES[output],
                  fb.AssociatedFileType.TENSOR_AXIS_LABELS,
                  "Class labels, one per line, in output order.")]
  graph = fb.SubGraphMetadataT()
  graph.inputTensorMetadata = [_tensor(n) for n in input_order]
  graph.outputTensorMetadata = [
      _tensor(n, labels(n) if n in labelled else None) for n in output_order]
  graph.inputProcessUnits = [unit]
  model = fb.ModelMetadataT()
  model.name = name or _MODEL_NAMES.get(head, "BertEncoder")
  model.description = description
  model.version = version
  model.subgraphMetadata = [graph]
  model.minParserVersion = MIN_PARSER_VERSION
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder), METADATA_IDENTIFIER)
  return bytes(builder.Output())


def _append_zip(data, files):
  """data + an uncompressed zip of {name: bytes} (fixed timestamps, so the
  same inputs give the same file)."""
  buffer = io.BytesIO()
  buffer.write(data)
  with zipfile.ZipFile(buffer, "a", zipfile.ZIP_STORED) as archive:
    for name, content in files.items():
      info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
      archive.writestr(info, content)
  return buffer.getvalue()


def attach(data, head, vocab_file, labels=None, description="",
           version="", settings=None):
  """The model with Task Library metadata and its associated files.

  Args:
    data: bytes of a converted model whose tensors carry the contract names.
    head: the head kind.
    vocab_file: path of the WordPiece vocab.txt the model was trained with.
    labels: a classifier's class names in output order, or {output name:
      names} for models with several labelled outputs (intent_slot's
      intent_probability and slot_logits), or None.
    settings: the tokenizer's TokenizerSettings; other than the defaults,
      they go with the vocabulary as `SETTINGS_NAME` (Hugging Face's
      tokenizer_config.json fields), which the app's tokenizers read. The
      Task Library's own tokenizer cannot take them.
  """
  if labels is not None and not isinstance(labels, dict):
    labels = {"probability": labels}
  labels = labels or {}
  unknown = set(labels) - set(LABEL_FILES)
  if unknown:
    raise ValueError(f"labels for {sorted(unknown)}: only "
                     f"{sorted(LABEL_FILES)} carry label files")
  inputs, outputs = tflite_file.io_tensor_names(data)
  payload = build_metadata(head, inputs, outputs, description=description,
                           version=version, labelled=set(labels))
  with open(vocab_file, "rb") as f:
    files = {VOCAB_NAME: f.read()}
  for output, names in labels.items():
    files[LABEL_FILES[output]] = "".join(f"{n}\n" for n in names).encode()
  if settings is not None and not settings.is_default():
    files[SETTINGS_NAME] = json.dumps(settings.to_config()).encode()
  model = tflite_file.rewrite(data, metadata={METADATA_NAME: payload})
  return _append_zip(model, files)


def associated_file(model, name=VOCAB_NAME):
  """The bytes of associated file `name` (default the vocabulary) of a
  model `attach` wrote, or None when it carries none (no metadata zip, or
  no such file).

  Args:
    model: the model's path, or its bytes.
  """
  source = io.BytesIO(model) if isinstance(model, (bytes, bytearray)) else (
      model)
  try:  # zipfile finds the zip at the end, after the flatbuffer
    with zipfile.ZipFile(source) as archive:
      return archive.read(name)
  except (zipfile.BadZipFile, KeyError):
    return None
