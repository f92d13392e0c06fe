"""Hugging Face checkpoints (`config.json` + `model.safetensors`) <-> ours.

BERT, ALBERT and MobileBERT, the bare model or with the pre-training
(MLM + NSP / SOP), sequence-classification or question-answering head.
Safetensors are read and written with the package's numpy API, so PyTorch is
not needed. Things that differ from our layout, handled here:

* PyTorch `Linear.weight` is [out, in]; our kernels are [in, out].
* MobileBERT stacks `num_feedforward_networks` FFNs; Hugging Face names the
  first ones `ffn.{j}` and the last one `intermediate` / `output` (whose
  `output` also holds the bottleneck-out projection).
* MobileBERT's MLM decoder is `concat(word_embeddings^T, dense.weight)`; its
  `dense.weight` [H - E, V] is our `extra_output_weights` [V, H - E].
* Tied decoder copies (`*.decoder.weight`, `*.decoder.bias`) may or may not be
  in the file; when present they must equal what they are tied to.
* `save_pretrained` omits config values equal to the class defaults, so the
  defaults of each config class are filled in (`HF_DEFAULTS`).
* The QA models have no pooler; ours is zeroed (pooled_output is 0).
* transformers' MobileBERT LayerNorm variant ignores `layer_norm_eps` in the
  encoder (PyTorch's 1e-5) and uses it only in the MLM head: imported as
  `layer_norm_eps` 1e-5 and `mlm_layer_norm_eps`.
"""

import json
import os

import numpy as np

from tfmodels.checkpoints.weight_mapping import CheckpointError, Entry
from tfmodels.configs import ConfigError, ModelConfig, read_json_object
from tfmodels.head_spec import Head

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

_COMMON = ("vocab_size", "hidden_size", "num_hidden_layers",
           "num_attention_heads", "intermediate_size", "hidden_act",
           "hidden_dropout_prob", "attention_probs_dropout_prob",
           "max_position_embeddings", "type_vocab_size", "initializer_range",
           "layer_norm_eps")
_MOBILEBERT = ("embedding_size", "trigram_input", "use_bottleneck",
               "intra_bottleneck_size", "key_query_shared_bottleneck",
               "use_bottleneck_attention", "num_feedforward_networks",
               "normalization_type", "classifier_activation")
# Class defaults of transformers' BertConfig, AlbertConfig, MobileBertConfig.
HF_DEFAULTS = {
    "bert": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072,
                 hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2,
                 initializer_range=0.02, layer_norm_eps=1e-12),
    "albert": dict(vocab_size=30000, embedding_size=128, hidden_size=4096,
                   num_hidden_layers=12, num_hidden_groups=1,
                   num_attention_heads=64, intermediate_size=16384,
                   inner_group_num=1, hidden_act="gelu_new",
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                   max_position_embeddings=512, type_vocab_size=2,
                   initializer_range=0.02, layer_norm_eps=1e-12),
    "mobilebert": dict(vocab_size=30522, hidden_size=512,
                       num_hidden_layers=24, num_attention_heads=4,
                       intermediate_size=512, hidden_act="relu",
                       hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.1,
                       max_position_embeddings=512, type_vocab_size=2,
                       initializer_range=0.02, layer_norm_eps=1e-12,
                       embedding_size=128, trigram_input=True,
                       use_bottleneck=True, intra_bottleneck_size=128,
                       use_bottleneck_attention=False,
                       key_query_shared_bottleneck=True,
                       num_feedforward_networks=4,
                       normalization_type="no_norm",
                       classifier_activation=True),
}
_PREFIX = {"bert": "bert.", "albert": "albert.", "mobilebert": "mobilebert."}
_CLASS = {"bert": "Bert", "albert": "Albert", "mobilebert": "MobileBert"}
_ARCHITECTURE = {"encoder": "Model", "pretrainer": "ForPreTraining",
                 "classifier": "ForSequenceClassification",
                 "span": "ForQuestionAnswering",
                 "tagger": "ForTokenClassification"}
# Heads that transformers builds on an encoder without its pooler.
_NO_POOLER = ("span", "tagger")


def hf_model_type(config: ModelConfig):
  if config.model_type == "mobilebert":
    return "mobilebert"
  return "albert" if config.sharing_mode == "all" else "bert"


# --- configs ---------------------------------------------------------------

def config_from_hf(hf, source, name="imported"):
  """Our ModelConfig from a Hugging Face config dict."""
  model_type = hf.get("model_type")
  if model_type not in HF_DEFAULTS:
    raise CheckpointError(
        f"{source}: model_type {model_type!r} is not one of "
        f"{', '.join(HF_DEFAULTS)} (a config of another architecture?)")
  full = dict(HF_DEFAULTS[model_type], **hf)
  values = {k: full[k] for k in _COMMON}
  values["name"] = name
  if model_type == "albert":
    if full["inner_group_num"] != 1:
      raise CheckpointError(f"{source}: inner_group_num "
                            f"{full['inner_group_num']} is not supported (1)")
    values.update(embedding_size=full["embedding_size"], sharing_mode="all",
                  num_hidden_groups=full["num_hidden_groups"])
  elif model_type == "mobilebert":
    values.update({k: full[k] for k in _MOBILEBERT}, model_type="mobilebert")
    if full["normalization_type"] == "layer_norm":
      # transformers builds MobileBERT's encoder LayerNorms without passing
      # layer_norm_eps, so they use PyTorch's 1e-5; only the MLM head uses
      # layer_norm_eps. Match what the weights were trained with.
      values.update(layer_norm_eps=1e-5,
                    mlm_layer_norm_eps=full["layer_norm_eps"])
  try:
    return ModelConfig.from_dict(values, source)
  except ConfigError as e:
    raise CheckpointError(str(e)) from None


def config_to_hf(config: ModelConfig, head: Head):
  """A Hugging Face config dict that transformers loads for this model."""
  model_type = hf_model_type(config)
  if config.uses_kronecker or config.mixed_vocab_size or (
      config.sharing_mode not in ("none", "all")) or (
          model_type == "bert" and config.embedding_size not in (
              0, config.hidden_size)):
    raise CheckpointError(f"{config.name}: no Hugging Face architecture "
                          "holds this model")
  carved = {
      "low_rank_ranks": bool(config.low_rank_ranks),
      "attention_head_size": config.attention_width != config.block_size,
      "normalization_type": (model_type != "mobilebert"
                             and config.normalization_type != "layer_norm")}
  for field, unheld in carved.items():
    if unheld:
      raise CheckpointError(
          f"{config.name}: its {field} ({getattr(config, field)!r}) has no "
          f"place in a Hugging Face {model_type} config; export it as a "
          "model directory or convert it to TFLite instead")
  out = {"model_type": model_type,
         "architectures": [_CLASS[model_type] + _ARCHITECTURE[head.kind]],
         "pad_token_id": 0}
  out.update({k: getattr(config, k) for k in _COMMON})
  if model_type == "mobilebert" and config.normalization_type == "layer_norm":
    # The inverse of config_from_hf: the encoder's 1e-5 is implied.
    out["layer_norm_eps"] = config.mlm_layer_norm_eps or config.layer_norm_eps
  if model_type == "albert":
    out.update(embedding_size=config.embedding_size, inner_group_num=1,
               num_hidden_groups=config.num_hidden_groups)
  elif model_type == "mobilebert":
    out.update({k: getattr(config, k) for k in _MOBILEBERT})
    out["true_hidden_size"] = (config.intra_bottleneck_size
                               if config.use_bottleneck else
                               config.hidden_size)
  if head.kind in ("classifier", "tagger"):
    out["id2label"] = {str(i): f"LABEL_{i}" for i in range(head.num_classes)}
    out["label2id"] = {f"LABEL_{i}": i for i in range(head.num_classes)}
  return out


# --- tensor names ------------------------------------------------------------

def _dense(ours, theirs):
  return [Entry(f"{ours}/kernel", f"{theirs}.weight", True),
          Entry(f"{ours}/bias", f"{theirs}.bias")]


def _norm(ours, theirs):
  return [Entry(f"{ours}/gamma", f"{theirs}.weight"),
          Entry(f"{ours}/beta", f"{theirs}.bias")]


def _embeddings(config, p):
  e = "embeddings"
  entries = [
      Entry(f"{e}/word_embeddings/embeddings",
            f"{p}embeddings.word_embeddings.weight"),
      Entry(f"{e}/position_embeddings",
            f"{p}embeddings.position_embeddings.weight"),
      Entry(f"{e}/token_type_embeddings/embeddings",
            f"{p}embeddings.token_type_embeddings.weight"),
  ] + _norm(f"{e}/norm", f"{p}embeddings.LayerNorm")
  model_type = hf_model_type(config)
  if model_type == "albert":
    entries += _dense(f"{e}/embedding_transformation",
                      f"{p}encoder.embedding_hidden_mapping_in")
  elif model_type == "mobilebert":
    entries += _dense(f"{e}/embedding_transformation",
                      f"{p}embeddings.embedding_transformation")
  return entries


def _bert_layer(att, ffn, theirs, albert):
  """One BERT / ALBERT transformer layer (attention block + FFN block)."""
  if albert:
    names = {"query": "attention.query", "key": "attention.key",
             "value": "attention.value", "attention_output": "attention.dense",
             "attention_norm": "attention.LayerNorm", "intermediate": "ffn",
             "output": "ffn_output", "ffn_norm": "full_layer_layer_norm"}
  else:
    names = {"query": "attention.self.query", "key": "attention.self.key",
             "value": "attention.self.value",
             "attention_output": "attention.output.dense",
             "attention_norm": "attention.output.LayerNorm",
             "intermediate": "intermediate.dense", "output": "output.dense",
             "ffn_norm": "output.LayerNorm"}
  entries = []
  for k in ("query", "key", "value", "attention_output"):
    entries += _dense(f"{att}/self_attention/{k}", theirs + names[k])
  entries += _norm(f"{att}/norm", theirs + names["attention_norm"])
  entries += _dense(f"{ffn}/intermediate", theirs + names["intermediate"])
  entries += _dense(f"{ffn}/output", theirs + names["output"])
  entries += _norm(f"{ffn}/norm", theirs + names["ffn_norm"])
  return entries


def _mobilebert_layer(config, ours, theirs):
  entries = []
  if config.use_bottleneck:
    entries += _dense(f"{ours}/bottleneck_input",
                      theirs + "bottleneck.input.dense")
    entries += _norm(f"{ours}/bottleneck_input_norm",
                     theirs + "bottleneck.input.LayerNorm")
    if config.key_query_shared_bottleneck and (
        not config.use_bottleneck_attention):
      entries += _dense(f"{ours}/shared_query_key",
                        theirs + "bottleneck.attention.dense")
      entries += _norm(f"{ours}/shared_query_key_norm",
                       theirs + "bottleneck.attention.LayerNorm")
    entries += _dense(f"{ours}/bottleneck_output",
                      theirs + "output.bottleneck.dense")
    entries += _norm(f"{ours}/bottleneck_output_norm",
                     theirs + "output.bottleneck.LayerNorm")
  for k in ("query", "key", "value"):
    entries += _dense(f"{ours}/self_attention/{k}",
                      theirs + f"attention.self.{k}")
  entries += _dense(f"{ours}/self_attention/attention_output",
                    theirs + "attention.output.dense")
  entries += _norm(f"{ours}/attention_norm",
                   theirs + "attention.output.LayerNorm")
  last = config.num_feedforward_networks - 1
  for j in range(config.num_feedforward_networks):
    # Hugging Face keeps the last stacked FFN under BERT's names.
    ffn = theirs + (f"ffn.{j}." if j < last else "")
    entries += _dense(f"{ours}/ffn_{j}/intermediate",
                      ffn + "intermediate.dense")
    entries += _dense(f"{ours}/ffn_{j}/output", ffn + "output.dense")
    entries += _norm(f"{ours}/ffn_{j}/norm", ffn + "output.LayerNorm")
  return entries


def tensor_entries(config: ModelConfig, head: Head, prefix):
  """Every (our variable, Hugging Face tensor) pair of the model."""
  model_type = hf_model_type(config)
  p = prefix
  entries = _embeddings(config, p)
  for i in range(config.num_hidden_layers):
    if model_type == "mobilebert":
      entries += _mobilebert_layer(config, f"layer_{i}",
                                   f"{p}encoder.layer.{i}.")
    elif model_type == "bert":
      entries += _bert_layer(f"layer_{i}_attention", f"layer_{i}_ffn",
                             f"{p}encoder.layer.{i}.", albert=False)
  if model_type == "albert":
    for g in range(config.num_hidden_groups):
      entries += _bert_layer(
          f"group_{g}_attention", f"group_{g}_ffn",
          f"{p}encoder.albert_layer_groups.{g}.albert_layers.0.", albert=True)
  if head.kind in _NO_POOLER:
    pass  # transformers' QA and token classifiers have no pooler
  elif model_type == "albert":
    entries += _dense("pooler", f"{p}pooler")
  elif model_type == "bert" or config.classifier_activation:
    entries += _dense("pooler", f"{p}pooler.dense")
  if head.kind == "pretrainer":
    entries += _pretraining_head(config, model_type)
  elif head.kind == "classifier":
    entries += _dense("classifier/logits", "classifier")
  elif head.kind == "span":
    entries += _dense("span/span_logits", "qa_outputs")
  elif head.kind == "tagger":
    entries += _dense("tagger/logits", "classifier")
  return entries


def _pretraining_head(config, model_type):
  if model_type == "albert":
    return (_dense("mlm/transform", "predictions.dense")
            + _norm("mlm/transform_norm", "predictions.LayerNorm")
            + [Entry("mlm/output_bias", "predictions.bias")]
            + _dense("sop/logits", "sop_classifier.classifier"))
  entries = (_dense("mlm/transform", "cls.predictions.transform.dense")
             + _norm("mlm/transform_norm",
                     "cls.predictions.transform.LayerNorm")
             + [Entry("mlm/output_bias", "cls.predictions.bias")]
             + _dense("nsp/logits", "cls.seq_relationship"))
  if model_type == "mobilebert":
    entries.append(Entry("mlm/extra_output_weights",
                         "cls.predictions.dense.weight", True))
  return entries


def tied_copies(config: ModelConfig, prefix):
  """{tied tensor name: the tensor it must equal} (decoder weight / bias)."""
  if hf_model_type(config) == "albert":
    mlm = "predictions."
  else:
    mlm = "cls.predictions."
  return {f"{mlm}decoder.weight": f"{prefix}embeddings.word_embeddings.weight",
          f"{mlm}decoder.bias": f"{mlm}bias"}


def detect_head(model_type, shapes, source, architectures=()):
  """The head a checkpoint holds, from its tensors' names and shapes; a sequence and a
  token classifier share theirs (`classifier`), so the config's
  `architectures` tells them apart."""
  mlm = "predictions.bias" if model_type == "albert" else "cls.predictions.bias"
  sentence = ("sop_classifier.classifier.weight" if model_type == "albert"
              else "cls.seq_relationship.weight")
  if mlm in shapes:
    if sentence not in shapes:
      raise CheckpointError(f"{source}: an MLM head without its "
                            f"{'SOP' if model_type == 'albert' else 'NSP'} "
                            "head (ForMaskedLM) is not supported; use "
                            "the ForPreTraining or base model")
    return Head("pretrainer", sentence_objective="sop"
                if model_type == "albert" else "nsp")
  if "classifier.weight" in shapes:
    token = any(str(a).endswith("ForTokenClassification")
                for a in architectures or ())
    return Head("tagger" if token else "classifier",
                num_classes=shapes["classifier.weight"][0])
  if "qa_outputs.weight" in shapes:
    return Head("span")
  return Head("encoder")


# --- files -----------------------------------------------------------------

def _paths(path):
  """(config.json, model.safetensors) of a directory or a weights file."""
  directory = path if os.path.isdir(path) else os.path.dirname(path)
  config_path = os.path.join(directory, CONFIG_NAME)
  weights_path = path if path.endswith(".safetensors") else os.path.join(
      directory, WEIGHTS_NAME)
  if not os.path.exists(weights_path):
    raise CheckpointError(f"{weights_path}: no such file")
  try:
    return read_json_object(config_path), weights_path
  except ConfigError as e:
    raise CheckpointError(str(e)) from None


def _renamed(name):
  """Old checkpoints say gamma / beta."""
  return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
      "LayerNorm.beta", "LayerNorm.bias")


def read_checkpoint(path):
  """(hf config dict, {name: array}, source) from a directory or a file."""
  hf, weights_path = _paths(path)
  from safetensors import SafetensorError
  from safetensors.numpy import load_file
  try:
    tensors = load_file(weights_path)
  except (SafetensorError, OSError, ValueError) as e:
    raise CheckpointError(f"{weights_path}: cannot read safetensors ({e})"
                          ) from None
  return hf, {_renamed(k): v for k, v in tensors.items()}, weights_path


def read_shapes(path):
  """(hf config dict, {name: shape}, source): the checkpoint's header
  only, no tensor read."""
  hf, weights_path = _paths(path)
  from safetensors import SafetensorError, safe_open
  try:
    with safe_open(weights_path, "np") as f:
      shapes = {_renamed(k): tuple(f.get_slice(k).get_shape())
                for k in f.keys()}
  except (SafetensorError, OSError, ValueError) as e:
    raise CheckpointError(f"{weights_path}: cannot read safetensors ({e})"
                          ) from None
  return hf, shapes, weights_path


def check_layer_count(config, entries, shapes, prefix, source):
  """CheckpointError, before a model is built, when config.json asks for
  layers the checkpoint does not hold: `num_hidden_layers: 1024` on a
  2-layer checkpoint would otherwise build 1024 layers first."""
  layer = f"{prefix}encoder.layer."
  if not any(e.theirs.startswith(layer) for e in entries):
    return  # ALBERT: layer groups
  held = {int(k[len(layer):].split(".")[0]) for k in shapes
          if k.startswith(layer) and k[len(layer):].split(".")[0].isdigit()}
  if config.num_hidden_layers <= len(held):
    return  # a tensor missing inside a layer: `assign` names it
  config_path = os.path.join(os.path.dirname(source), CONFIG_NAME)
  raise CheckpointError(
      f"{config_path}: field 'num_hidden_layers' is "
      f"{config.num_hidden_layers}, but {source} holds {len(held)} layers")


def layout(hf, shapes, source, name):
  """(config, head, tensor prefix, entries) of a checkpoint, from its
  config and its tensors' shapes, checked against each other before
  anything is built."""
  from tfmodels.checkpoints.weight_mapping import check_table_sizes
  config = config_from_hf(hf, os.path.join(os.path.dirname(source),
                                           CONFIG_NAME), name)
  model_type = hf_model_type(config)
  prefix = _PREFIX[model_type] if any(
      k.startswith(_PREFIX[model_type]) for k in shapes) else ""
  architectures = hf.get("architectures") or []
  if not (isinstance(architectures, list)
          and all(isinstance(a, str) for a in architectures)):
    raise CheckpointError(
        f"{os.path.join(os.path.dirname(source), CONFIG_NAME)}: field "
        "'architectures' must be a list of class names, got "
        f"{json.dumps(architectures)[:40]}")
  head = detect_head(model_type, shapes, source, architectures)
  check_table_sizes(config, f"{prefix}embeddings.{{}}.weight".format, shapes,
                    os.path.join(os.path.dirname(source), CONFIG_NAME),
                    source)
  entries = tensor_entries(config, head, prefix)
  check_layer_count(config, entries, shapes, prefix, source)
  return config, head, prefix, entries


def _name(path):
  return os.path.basename(os.path.normpath(
      path if os.path.isdir(path) else os.path.dirname(path)))


def inspect_checkpoint(path, name=None):
  """(config, head) of a Hugging Face checkpoint, checked against its
  tensors' shapes without reading them or building a model: what a
  command checks before any work."""
  hf, shapes, source = read_shapes(path)
  config, head, _, _ = layout(hf, shapes, source, name or _name(path))
  return config, head


def import_checkpoint(path, name=None):
  """(model, config, head) with every weight of a Hugging Face checkpoint."""
  from tfmodels.checkpoints.model_dir import build_model
  from tfmodels.checkpoints.weight_mapping import assign
  hf, tensors, source = read_checkpoint(path)
  config, head, prefix, entries = layout(
      hf, {k: v.shape for k, v in tensors.items()}, source,
      name or _name(path))
  ignored = {k for k in tensors
             if k.endswith(("position_ids", "embeddings.token_type_ids"))}
  for copy, original in tied_copies(config, prefix).items():
    if copy in tensors:
      if original not in tensors or not np.array_equal(tensors[copy],
                                                       tensors[original]):
        raise CheckpointError(f"{source}: {copy} is not tied to {original}; "
                              "untied MLM decoders are not supported")
      ignored.add(copy)
  model = build_model(config, head)
  assign(model, entries, tensors, source,
         ignored, absent=("pooler/",) if head.kind in _NO_POOLER else ())
  return model, config, head


def export_checkpoint(model, config, head, output_dir):
  """Writes config.json + model.safetensors that transformers loads."""
  from safetensors.numpy import save_file
  from tfmodels.checkpoints.weight_mapping import extract
  hf = config_to_hf(config, head)
  prefix = _PREFIX[hf["model_type"]] if head.kind != "encoder" else ""
  tensors = extract(model, tensor_entries(config, head, prefix))
  os.makedirs(output_dir, exist_ok=True)
  save_file(tensors, os.path.join(output_dir, WEIGHTS_NAME),
            metadata={"format": "pt"})
  with open(os.path.join(output_dir, CONFIG_NAME), "w") as f:
    json.dump(hf, f, indent=2)
    f.write("\n")
