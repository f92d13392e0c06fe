"""Google's original TF1 checkpoints (BERT, ALBERT, MobileBERT) -> ours.

Read with `tf.train.load_checkpoint`, under the variable names of Google's
`modeling.py` / `run_pretraining.py` / `run_classifier.py` / `run_squad.py`
(tests/fixtures/checkpoints/README.md lists them with their sources).
Kernels are already [in, out]; only the `output_weights` of the NSP/SOP,
classifier and SQuAD heads are [classes, hidden]. MobileBERT's NoNorm
variables live under `FakeLayerNorm`. Optimizer slots are skipped.

ALBERT's "gelu" is the tanh approximation, so it becomes our `gelu_new`.
Google's BERT code also used the tanh form for "gelu"; like transformers, the
import keeps "gelu" exact (outputs differ by ~1e-3 from Google's TF1 runs;
set "hidden_act": "gelu_new" in the config to reproduce those).
"""

import os

import tensorflow as tf

from tfmodels.checkpoints.model_dir import Head, build_model
from tfmodels.checkpoints.weight_mapping import (CheckpointError, Entry,
                                                 assign, check_table_sizes)
from tfmodels.configs import ConfigError, ModelConfig, read_json_object

_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/lamb_m",
                       "/lamb_v")
_OPTIMIZER_NAMES = ("global_step", "beta1_power", "beta2_power")
# albert_config.json fields with no counterpart here, and their only value
# that we can represent.
_ALBERT_ONLY = {"inner_group_num": 1, "net_structure_type": 0,
                "gap_size": 0, "num_memory_blocks": 0,
                "down_scale_factor": 1}


def _dense(ours, theirs):
  return [Entry(f"{ours}/kernel", f"{theirs}/kernel"),
          Entry(f"{ours}/bias", f"{theirs}/bias")]


def _norm(ours, theirs):
  return [Entry(f"{ours}/gamma", f"{theirs}/gamma"),
          Entry(f"{ours}/beta", f"{theirs}/beta")]


def _output(ours, theirs):
  """Google's heads keep output_weights as [classes, hidden]."""
  return [Entry(f"{ours}/kernel", f"{theirs}output_weights", True),
          Entry(f"{ours}/bias", f"{theirs}output_bias")]


# Google's names, within one layer, of BERT's and ALBERT's sub-layers.
_BERT_NAMES = {"self": "attention/self/",
               "attention_output": "attention/output/dense",
               "attention_norm": "attention/output/LayerNorm",
               "intermediate": "intermediate/dense", "output": "output/dense",
               "ffn_norm": "output/LayerNorm"}
_ALBERT_NAMES = {"self": "attention_1/self/",
                 "attention_output": "attention_1/output/dense",
                 "attention_norm": "LayerNorm",
                 "intermediate": "ffn_1/intermediate/dense",
                 "output": "ffn_1/intermediate/output/dense",
                 "ffn_norm": "LayerNorm_1"}


def _bert_layer(att, ffn, t, names):
  """One BERT / ALBERT layer: attention block `att`, FFN block `ffn`."""
  entries = []
  for k in ("query", "key", "value"):
    entries += _dense(f"{att}/self_attention/{k}", f"{t}{names['self']}{k}")
  entries += _dense(f"{att}/self_attention/attention_output",
                    t + names["attention_output"])
  entries += _norm(f"{att}/norm", t + names["attention_norm"])
  entries += _dense(f"{ffn}/intermediate", t + names["intermediate"])
  entries += _dense(f"{ffn}/output", t + names["output"])
  entries += _norm(f"{ffn}/norm", t + names["ffn_norm"])
  return entries


def architecture(names):
  if any(n.startswith("bert/encoder/transformer/group_") for n in names):
    return "albert"
  if any("/bottleneck/" in n or "FakeLayerNorm" in n
         or n.startswith("bert/embeddings/embedding_transformation")
         for n in names):
    return "mobilebert"
  return "bert"


def tensor_entries(config: ModelConfig, head: Head, arch):
  norm = ("FakeLayerNorm" if config.normalization_type == "no_norm"
          else "LayerNorm")
  e = "bert/embeddings"
  entries = [
      Entry("embeddings/word_embeddings/embeddings", f"{e}/word_embeddings"),
      Entry("embeddings/position_embeddings", f"{e}/position_embeddings"),
      Entry("embeddings/token_type_embeddings/embeddings",
            f"{e}/token_type_embeddings"),
  ] + _norm("embeddings/norm",
             f"{e}/{norm if arch == 'mobilebert' else 'LayerNorm'}")
  if arch == "albert":
    entries += _dense("embeddings/embedding_transformation",
                      "bert/encoder/embedding_hidden_mapping_in")
    for g in range(config.num_hidden_groups):
      entries += _bert_layer(
          f"group_{g}_attention", f"group_{g}_ffn",
          f"bert/encoder/transformer/group_{g}/inner_group_0/", _ALBERT_NAMES)
  elif arch == "mobilebert":
    entries += _dense("embeddings/embedding_transformation",
                      f"{e}/embedding_transformation")
    for i in range(config.num_hidden_layers):
      entries += _mobilebert_layer(config, f"layer_{i}",
                                   f"bert/encoder/layer_{i}/", norm)
  else:
    for i in range(config.num_hidden_layers):
      entries += _bert_layer(f"layer_{i}_attention", f"layer_{i}_ffn",
                             f"bert/encoder/layer_{i}/", _BERT_NAMES)
  if arch != "mobilebert" or config.classifier_activation:
    entries += _dense("pooler", "bert/pooler/dense")
  if head.kind == "pretrainer":
    entries += (_dense("mlm/transform", "cls/predictions/transform/dense")
                + _norm("mlm/transform_norm",
                        "cls/predictions/transform/LayerNorm")
                + [Entry("mlm/output_bias", "cls/predictions/output_bias")]
                + _output(f"{head.sentence_objective}/logits",
                          "cls/seq_relationship/"))
    if arch == "mobilebert":
      entries.append(Entry("mlm/extra_output_weights",
                           "cls/predictions/extra_output_weights"))
  elif head.kind == "classifier":
    entries += _output("classifier/logits", "")
  elif head.kind == "span":
    entries += _output("span/span_logits", "cls/squad/")
  return entries


def _mobilebert_layer(config, ours, t, norm):
  entries = []
  if config.use_bottleneck:
    entries += _dense(f"{ours}/bottleneck_input", f"{t}bottleneck/input/dense")
    entries += _norm(f"{ours}/bottleneck_input_norm",
                     f"{t}bottleneck/input/{norm}")
    if config.key_query_shared_bottleneck and (
        not config.use_bottleneck_attention):
      entries += _dense(f"{ours}/shared_query_key",
                        f"{t}bottleneck/attention/dense")
      entries += _norm(f"{ours}/shared_query_key_norm",
                       f"{t}bottleneck/attention/{norm}")
    entries += _dense(f"{ours}/bottleneck_output",
                      f"{t}output/bottleneck/dense")
    entries += _norm(f"{ours}/bottleneck_output_norm",
                     f"{t}output/bottleneck/{norm}")
  for k in ("query", "key", "value"):
    entries += _dense(f"{ours}/self_attention/{k}", f"{t}attention/self/{k}")
  entries += _dense(f"{ours}/self_attention/attention_output",
                    f"{t}attention/output/dense")
  entries += _norm(f"{ours}/attention_norm", f"{t}attention/output/{norm}")
  last = config.num_feedforward_networks - 1
  for j in range(config.num_feedforward_networks):
    ffn = t + (f"ffn_layer_{j}/" if j < last else "")
    entries += _dense(f"{ours}/ffn_{j}/intermediate",
                      f"{ffn}intermediate/dense")
    entries += _dense(f"{ours}/ffn_{j}/output", f"{ffn}output/dense")
    entries += _norm(f"{ours}/ffn_{j}/norm", f"{ffn}output/{norm}")
  return entries


def detect_head(names, source):
  if "cls/predictions/output_bias" in names:
    if "cls/seq_relationship/output_weights" not in names:
      raise CheckpointError(f"{source}: MLM head without its NSP/SOP head")
    return "pretrainer"
  if "cls/squad/output_weights" in names:
    return "span"
  if "output_weights" in names:
    return "classifier"
  return "encoder"


def read_config(path, arch):
  """Google's bert_config.json / albert_config.json as our ModelConfig."""
  try:
    values = read_json_object(path)
  except ConfigError as e:
    raise CheckpointError(str(e)) from None
  if arch == "albert":
    for key, only in _ALBERT_ONLY.items():
      if values.pop(key, only) != only:
        raise CheckpointError(f"{path}: {key} other than {only} is not "
                              "supported")
    values["sharing_mode"] = "all"
    # ALBERT's modeling.py computes "gelu" with the tanh approximation.
    if values.get("hidden_act") == "gelu":
      values["hidden_act"] = "gelu_new"
  values.setdefault("name", os.path.basename(os.path.dirname(
      os.path.abspath(path))))
  try:
    config = ModelConfig.from_dict(values, path)
  except ConfigError as e:
    raise CheckpointError(str(e)) from None
  if (config.model_type == "mobilebert") != (arch == "mobilebert"):
    raise CheckpointError(f"{path}: a {config.model_type} config for a "
                          f"{arch} checkpoint")
  for field, ours_only in _not_in_tf1(config, arch).items():
    if ours_only:
      raise CheckpointError(
          f"{path}: field '{field}' ({getattr(config, field)!r}) has no "
          f"tensors in a Google TF1 {arch} checkpoint; it describes one of "
          "our own models (a model directory), not this import")
  return config


def _not_in_tf1(config, arch):
  """{field: set}: what our config can say that Google's checkpoints have
  no tensors for (carved, Kronecker, mixed-vocabulary or partly shared
  models; a BERT embedding projection), refused before a model is built."""
  return {
      "low_rank_ranks": bool(config.low_rank_ranks),
      "kronecker_factor_shapes": bool(config.kronecker_factor_shapes),
      "kronecker_embedding_size": config.kronecker_embedding_size > 0,
      "mixed_vocab_size": config.mixed_vocab_size > 0,
      "sharing_mode": arch == "bert" and config.sharing_mode != "none",
      "embedding_size": arch == "bert" and (
          config.embedding_size != config.hidden_size),
  }


def _default_config_path(prefix, arch):
  directory = os.path.dirname(os.path.abspath(prefix))
  for name in (("albert_config.json",) if arch == "albert" else ()) + (
      "bert_config.json", "config.json"):
    if os.path.exists(os.path.join(directory, name)):
      return os.path.join(directory, name)
  raise CheckpointError(f"{directory}: no bert_config.json beside the "
                        "checkpoint (pass --config)")


def import_checkpoint(prefix, config_path=None, name=None):
  """(model, config, head) with every weight of a Google TF1 checkpoint."""
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise CheckpointError(f"{prefix}: cannot read TF1 checkpoint "
                          f"({message})") from None
  names = [n for n in reader.get_variable_to_shape_map()
           if not n.endswith(_OPTIMIZER_SUFFIXES) and n not in _OPTIMIZER_NAMES]
  arch = architecture(names)
  config_path = config_path or _default_config_path(prefix, arch)
  config = read_config(config_path, arch)
  if name:
    config = config.replace(name=name)
  check_table_sizes(config, "bert/embeddings/{}".format,  # before the build
                    reader.get_variable_to_shape_map(), config_path, prefix)
  kind = detect_head(set(names), prefix)
  if kind == "classifier":
    head = Head(kind, num_classes=reader.get_variable_to_shape_map()[
        "output_weights"][0])
  else:
    head = Head(kind, sentence_objective="sop" if arch == "albert" else "nsp")
  entries = tensor_entries(config, head, arch)
  shapes = reader.get_variable_to_shape_map()
  missing = next((e.theirs for e in entries if e.theirs not in shapes), None)
  if missing:  # before the build: 1024 layers on a 2-layer checkpoint
    raise CheckpointError(f"{prefix}: missing tensor {missing!r}; does "
                          f"{config_path} (num_hidden_layers "
                          f"{config.num_hidden_layers}) describe it?")
  model = build_model(config, head)
  tensors = {}
  for n in names:
    try:
      tensors[n] = reader.get_tensor(n)
    except (tf.errors.OpError, IndexError, ValueError) as e:  # truncated
      message = str(e).splitlines()[0] if str(e) else type(e).__name__
      raise CheckpointError(f"{prefix}: cannot read tensor {n} ({message}); "
                            "the checkpoint's data file is truncated or "
                            "corrupt") from None
  assign(model, entries, tensors, prefix)
  return model, config, head
