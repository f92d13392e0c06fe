"""What to convert: one of our model directories, or a SavedModel.

Both become a `Source`: a callable that takes our feature dict (`input_ids`,
`input_mask`, `segment_ids`) and returns our output dict (`start_logits`,
`logits`, `intent_logits`, `sequence_output`, ...), the head kind, and what
the model card and the defaults need (config, checkpoint, the finetune
run's task.json).

    source = load_source(model_dir="runs/squad")      # or saved_model=DIR
    source.head, source.model(features)["start_logits"]

`check_files` runs before TensorFlow is imported, so a wrong path fails fast.
"""

import dataclasses
import glob
import json
import os

from tfmodels.configs import ConfigError, load_config

_OUR_INPUTS = ("input_ids", "input_mask", "segment_ids")
_CONTRACT_INPUTS = ("ids", "mask", "segment_ids")


class SourceError(ValueError):
  """A model we cannot load; the message names the directory."""


@dataclasses.dataclass
class Source:
  """A model to convert.

  Attributes:
    model: callable(features dict, training=False) -> dict of outputs.
    head: "span", "classifier", "tagger", "intent_slot" or "encoder" (a
      pretrainer's encoder).
    path: the checkpoint prefix or SavedModel directory it came from.
    config: tfmodels ModelConfig, or None for a SavedModel.
    task: the finetune run's task.json ({} if none).
    max_seq_length: the longest input it takes (None: unknown).
    fixed_seq_length: the only length a fixed-shape SavedModel takes.
  """
  model: object
  head: str
  path: str
  config: object = None
  task: dict = dataclasses.field(default_factory=dict)
  max_seq_length: int | None = None
  fixed_seq_length: int | None = None


def check_files(model_dir=None, saved_model=None):
  """Cheap checks (no TensorFlow): the files a load needs exist and parse.

  Returns the model directory's config (None for a SavedModel).
  """
  if saved_model is not None:
    if not os.path.isfile(os.path.join(saved_model, "saved_model.pb")):
      raise SourceError(f"--saved_model {saved_model}: no saved_model.pb")
    return None
  for name in ("config.json", "head.json"):
    if not os.path.isfile(os.path.join(model_dir, name)):
      raise SourceError(f"--model_dir {model_dir}: no {name}")
  if not glob.glob(os.path.join(model_dir, "*.index")):
    raise SourceError(f"--model_dir {model_dir}: no checkpoint (*.index)")
  try:
    return load_config(os.path.join(model_dir, "config.json"))
  except (ConfigError, OSError, ValueError) as e:
    raise SourceError(f"--model_dir {model_dir}: {e}") from None


def read_task(model_dir):
  """A finetune run's task.json ({} when there is none)."""
  path = os.path.join(model_dir, "task.json")
  if not os.path.exists(path):
    return {}
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise SourceError(f"{path}: {e}") from None


def _model_variable_count(prefix):
  """Variables the checkpoint stores under `model` (not the optimizer's)."""
  import tensorflow as tf
  keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  return sum(1 for k in keys
             if k.startswith("model/") and k.endswith("VARIABLE_VALUE"))


def load_model_dir_source(model_dir):
  """A `save_model_dir` output or a pretrain / distill / finetune run."""
  import tensorflow as tf
  from tfmodels.checkpoints.model_dir import (checkpoint_prefix, encoder_of,
                                              load_model_dir)
  from tfmodels.checkpoints.weight_mapping import CheckpointError
  try:
    model, config, head = load_model_dir(model_dir)
  except (ConfigError, CheckpointError) as e:  # the message names the file
    raise SourceError(f"--model_dir {model_dir}: {e}") from None
  except (ValueError, TypeError, AssertionError, tf.errors.OpError) as e:
    reason = str(e).splitlines()[0][:300]
    raise SourceError(f"--model_dir {model_dir}: checkpoint does not match "
                      f"config.json / head.json ({reason})") from None
  prefix = checkpoint_prefix(model_dir)  # the one load_model_dir read
  # expect_partial (needed to skip optimizer slots) would also let a config
  # with fewer layers load silently from a bigger checkpoint: count them.
  stored = _model_variable_count(prefix)
  if stored != len(model.variables):
    raise SourceError(f"--model_dir {model_dir}: checkpoint does not match "
                      f"config.json (checkpoint holds {stored} model "
                      f"variables, config.json builds {len(model.variables)})")
  kind = head.kind
  if kind == "pretrainer":  # serve the encoder, as save_model_dir does
    model, kind = encoder_of(model), "encoder"
  return Source(model, kind, prefix, config, read_task(model_dir),
                max_seq_length=config.max_position_embeddings)


class _SignatureModel:
  """A SavedModel's serving signature behind our feature / output names.

  A signature fixed at batch 1 (an exported [1, L] model) is called one row
  at a time, so evaluation can still pass batches.
  """

  def __init__(self, loaded, signature, input_names, batch_size):
    self.loaded = loaded  # export tracks it, so its variables are saved
    self.signature = signature
    self.input_names = input_names
    self.batch_size = batch_size

  def __call__(self, features, training=False):
    del training
    import tensorflow as tf
    inputs = {name: features[ours]
              for name, ours in zip(self.input_names, _OUR_INPUTS)}
    if self.batch_size != 1:
      return self.signature(**inputs)
    rows = [self.signature(**{k: v[i:i + 1] for k, v in inputs.items()})
            for i in range(len(inputs[self.input_names[0]]))]
    return {k: tf.concat([r[k] for r in rows], 0) for k in rows[0]}


def _head_of_outputs(outputs, where):
  """Head kind from the signature's output specs."""
  if {"start_logits", "end_logits"} <= set(outputs):
    return "span"
  if {"intent_logits", "slot_logits"} <= set(outputs):
    return "intent_slot"
  if "logits" in outputs:
    return "classifier" if outputs["logits"].shape.rank == 2 else "tagger"
  if "sequence_output" in outputs:
    return "encoder"
  raise SourceError(f"{where}: serving outputs {sorted(outputs)} have none of "
                    "start_logits/end_logits, intent_logits/slot_logits, "
                    "logits, sequence_output")


def load_saved_model_source(directory):
  """A SavedModel whose `serving_default` takes our input names (as
  `save_model_dir` writes) or the contract's (`ids`, `mask`, ...)."""
  import tensorflow as tf
  where = f"--saved_model {directory}"
  try:
    loaded = tf.saved_model.load(directory)
  except (OSError, ValueError, tf.errors.OpError) as e:
    raise SourceError(f"{where}: cannot load ({str(e).splitlines()[0]})"
                      ) from None
  signature = loaded.signatures.get("serving_default")
  if signature is None:
    raise SourceError(f"{where}: no serving_default signature")
  specs = signature.structured_input_signature[1]
  for names in (_OUR_INPUTS, _CONTRACT_INPUTS):
    if set(specs) == set(names):
      break
  else:
    raise SourceError(f"{where}: serving inputs {sorted(specs)} are neither "
                      f"{list(_OUR_INPUTS)} nor {list(_CONTRACT_INPUTS)}")
  fixed = {specs[n].shape[1] for n in names} - {None}
  batch = specs[names[0]].shape[0]
  head = _head_of_outputs(signature.structured_outputs, where)
  return Source(_SignatureModel(loaded, signature, names, batch), head,
                directory, fixed_seq_length=fixed.pop() if fixed else None)


def load_source(model_dir=None, saved_model=None):
  if saved_model is not None:
    return load_saved_model_source(saved_model)
  return load_model_dir_source(model_dir)
