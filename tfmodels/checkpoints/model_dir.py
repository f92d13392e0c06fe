"""Our converted-model directory: config, head, checkpoint and SavedModel.

    DIR/config.json      our ModelConfig
    DIR/head.json        which head the weights include (see `Head`)
    DIR/ckpt-1.*         tf.train.Checkpoint(model=...)
    DIR/saved_model/     serving signature: int32 input_ids, input_mask,
                         segment_ids [B, T] -> sequence_output, pooled_output
                         (+ logits, start_logits / end_logits, or
                         intent_logits / slot_logits)

Written into a staging directory and renamed, so a failed conversion leaves
nothing behind. A training run's directory is claimed by `claim_run_dir`:
one writer at a time, and only for the run it already holds.
"""

import contextlib
import dataclasses
import json
import os
import shutil

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig
from tfmodels.encoders import INPUT_NAMES, build_encoder
from tfmodels.models import (build_classifier, build_intent_slot_model,
                             build_pretrainer, build_span_model, build_tagger)
from tfmodels.staging import (OutputError, output_lock, staged_directory,
                              write_file)
from tfmodels.write_errors import WRITE_FAILURES, refused

HEAD_KINDS = ("encoder", "pretrainer", "classifier", "span", "tagger",
              "intent_slot")
CHECKPOINT_PREFIX = "ckpt"


@dataclasses.dataclass(frozen=True)
class Head:
  """What sits on the encoder: nothing, MLM + NSP/SOP, a classifier, QA,
  a token tagger, joint intent + slot tagging."""
  kind: str = "encoder"
  num_classes: int = 0  # classifier and tagger; intent_slot: the intents
  sentence_objective: str = "nsp"  # pretrainer only
  num_slots: int = 0  # intent_slot only: the slot tags

  def __post_init__(self):
    if self.kind not in HEAD_KINDS:
      raise ValueError(f"head kind {self.kind!r} is not one of {HEAD_KINDS}")
    if (self.kind == "intent_slot") != (self.num_slots > 0):
      raise ValueError(f"num_slots {self.num_slots}: an intent_slot head "
                       "needs slot tags, no other head has them")

  def to_dict(self):
    """head.json's fields; num_slots only where it means something, so the
    other heads' files read as before it existed."""
    fields = dataclasses.asdict(self)
    if self.kind != "intent_slot":
      del fields["num_slots"]
    return fields


def build_model(config: ModelConfig, head: Head, encoder=None):
  """The Keras model whose variables a checkpoint with this head fills.

  `encoder` (an already built one) shares its weights with the new model.
  """
  if head.kind == "pretrainer":
    return build_pretrainer(config, encoder,
                            sentence_objective=head.sentence_objective)
  if head.kind == "classifier":
    return build_classifier(config, head.num_classes, encoder)
  if head.kind == "span":
    return build_span_model(config, encoder)
  if head.kind == "tagger":
    return build_tagger(config, head.num_classes, encoder)
  if head.kind == "intent_slot":
    return build_intent_slot_model(config, head.num_classes, head.num_slots,
                                   encoder)
  return encoder or build_encoder(config)


def encoder_of(model):
  """The encoder keras.Model inside one of our task models (or itself)."""
  inner = [l for l in model.layers if isinstance(l, keras.Model)]
  return inner[0] if inner else model


class _Serving(tf.Module):
  """Fixed signature over the model: named int32 inputs, dict outputs."""

  def __init__(self, model, head):
    super().__init__()
    self.model = model
    self.head_kind = head.kind

  @tf.function(input_signature=[
      tf.TensorSpec([None, None], tf.int32, name=n) for n in INPUT_NAMES])
  def serve(self, input_ids, input_mask, segment_ids):
    features = {"input_ids": input_ids, "input_mask": input_mask,
                "segment_ids": segment_ids}
    if self.head_kind == "pretrainer":  # serve the encoder part
      features["masked_lm_positions"] = tf.zeros_like(input_ids[:, :1])
    out = self.model(features, training=False)
    keep = ["sequence_output", "pooled_output", "logits", "start_logits",
            "end_logits", "intent_logits", "slot_logits"]
    return {k: out[k] for k in keep if k in out}


def _description(config, head, task=None):
  """{file name: text}: what `load_model_dir` (and `evaluate`) rebuild from."""
  files = {"config.json": config.to_json() + "\n",
           "head.json": json.dumps(head.to_dict(), indent=2)}
  if task is not None:
    files["task.json"] = json.dumps(task)
  return files


def write_description(directory, config, head):
  """config.json + head.json: what `load_model_dir` needs to rebuild."""
  for name, text in _description(config, head).items():
    write_file(os.path.join(directory, name), text)


def read_task_spec(model_dir, flag="--model_dir",
                   hint="for a pretrain / distill run pass --pretraining_data"):
  """task.json of a finetune (or compress) run, or ValueError naming the
  flag, or the field that is missing or of the wrong type; `hint` says
  what to do about a directory without one."""
  path = os.path.join(model_dir, "task.json")
  if not os.path.isdir(model_dir):
    raise ValueError(f"{flag} {model_dir}: no such directory")
  try:
    with open(path) as f:
      spec = json.load(f)
  except FileNotFoundError:
    raise ValueError(f"{flag} {model_dir}: no task.json (not a finetune "
                     f"run; {hint})") from None
  except (OSError, ValueError) as e:
    raise ValueError(f"{path}: cannot read it ({e})") from None
  fields = {"task": str, "max_seq_length": int, "vocab_file": str}
  for name, kind in fields.items():
    value = spec.get(name) if isinstance(spec, dict) else None
    if type(value) is not kind or (kind is int and value < 1):  # pylint: disable=unidiomatic-typecheck
      raise ValueError(f"{path}: {name} must be a "
                       f"{'positive integer' if kind is int else 'string'}, "
                       f"got {value!r}")
  return spec



class CorruptCheckpointError(ValueError):
  """A checkpoint file that cannot be read at all; the message names it."""


class RunDirError(OutputError):
  """A --model_dir holds another run; the message names both."""


def _differences(held, wanted, limit=3):
  """'key (A there, B here)' for the first keys whose values differ."""
  keys = [k for k in sorted(set(held) | set(wanted))
          if held.get(k) != wanted.get(k)]
  text = ", ".join(f"{k} ({held.get(k)!r} there, {wanted.get(k)!r} here)"
                   for k in keys[:limit])
  return text + (f" and {len(keys) - limit} more" if len(keys) > limit
                 else "")


def _read_json(directory, name, flag):
  path = os.path.join(directory, name)
  try:
    with open(path) as f:
      value = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError) as e:
    raise RunDirError(f"{flag} {directory}: {name} is unreadable ({e}); "
                      "choose another directory") from None
  if not isinstance(value, dict):
    raise RunDirError(f"{flag} {directory}: {name} is not a JSON object; "
                      "choose another directory")
  return value


def check_run_dir(model_dir, config, head, task=None, flag="--model_dir"):
  """RunDirError unless `model_dir` is new or holds this very run.

  A run is its config (the name aside: it changes no weight), its head and,
  for `finetune`, its task.json; training another one into it would rewrite
  its description and leave checkpoints that no longer load.
  """
  if not os.path.exists(model_dir):
    return
  if not os.path.isdir(model_dir):
    raise OutputError(f"{flag} {model_dir}: exists and is not a directory")
  held_config = _read_json(model_dir, "config.json", flag)
  if held_config is None:
    if os.path.exists(os.path.join(model_dir, "checkpoint")):
      raise RunDirError(f"{flag} {model_dir}: holds checkpoints but no "
                        "config.json, so it cannot be checked against this "
                        "run; choose another directory")
    return
  here = config.to_dict()
  there = {k: held_config.get(k) for k in here}
  try:
    there = ModelConfig.from_dict(held_config).to_dict()
  except ValueError:
    pass  # compared as written; the differences name the odd field
  there["name"] = here["name"] = None
  if there != here:
    raise RunDirError(
        f"{flag} {model_dir} holds a run of config "
        f"{held_config.get('name')!r} that differs from this command's "
        f"{config.name!r} in {_differences(there, here)}; choose another "
        f"{flag} (or resume with the run's own settings)")
  held_head = _read_json(model_dir, "head.json", flag)
  if held_head is not None and held_head != head.to_dict():
    raise RunDirError(
        f"{flag} {model_dir} holds a run with a {held_head.get('kind')} "
        f"head, this command trains a {head.kind} head; they differ in "
        f"{_differences(held_head, head.to_dict())}; choose another {flag}")
  held_task = _read_json(model_dir, "task.json", flag)
  if held_task is not None and held_task != task:
    if task is None:
      raise RunDirError(f"{flag} {model_dir} holds a finetune run (task "
                        f"{held_task.get('task')!r}); choose another {flag}")
    raise RunDirError(
        f"{flag} {model_dir} holds a run of task {held_task.get('task')!r}, "
        f"this command trains {task.get('task')!r}; task.json differs in "
        f"{_differences(held_task, task)}; choose another {flag}")


@contextlib.contextmanager
def claim_run_dir(model_dir, config, head, task=None, flag="--model_dir",
                  chief=True):
  """The training run's directory, for the duration of the block.

  Locks it against a second writer (`output_lock`), refuses another run's
  directory (`check_run_dir`), then writes what of the description
  (config.json, head.json, task.json) is missing, so resuming the same run
  changes none of it. A directory this call created is removed again if the
  block fails before the first checkpoint. Non-chief workers of a
  multi-worker run share the chief's directory: they only check it.
  """
  if not chief:
    check_run_dir(model_dir, config, head, task, flag)
    yield
    return
  with output_lock(model_dir, flag):
    check_run_dir(model_dir, config, head, task, flag)
    created = not os.path.exists(model_dir)
    try:
      for name, text in _description(config, head, task).items():
        path = os.path.join(model_dir, name)
        if not os.path.exists(path):
          try:
            write_file(path, text)
          except OSError as e:
            raise refused(path, "the run's description", e) from None
      yield
    except BaseException:
      if created and not os.path.exists(os.path.join(model_dir,
                                                     "checkpoint")):
        shutil.rmtree(model_dir, ignore_errors=True)
      raise


def save_model_dir(model, config, head, output_dir, files=None,
                   owner="save_model_dir", flag="--output"):
  """Writes DIR atomically as `owner`'s output: an existing DIR is replaced
  only if `owner` wrote all of it (the command checks that before its work
  with `staging.check_output`; checked again here).

  `files` ({name: text}) join it in the same commit (a carved model's
  task.json and carving.json). A write the disk refuses is a `WriteError`
  naming output_dir; the staging is gone with it."""
  try:
    with staged_directory(output_dir, owner, flag) as staging:
      write_description(staging, config, head)
      for name, text in (files or {}).items():
        write_file(os.path.join(staging, name), text)
      tf.train.Checkpoint(model=model).write(
          os.path.join(staging, CHECKPOINT_PREFIX + "-1"))
      serving = _Serving(model, head)
      tf.saved_model.save(serving, os.path.join(staging, "saved_model"),
                          signatures={"serving_default": serving.serve})
  except WRITE_FAILURES as e:
    raise refused(output_dir, "the model", e, "nothing was written") from None


def load_model_dir(directory):
  """(model, config, head) from `save_model_dir` or a training run's dir.

  A training run's latest checkpoint is used; its optimizer state is not.
  """
  from tfmodels.configs import load_config
  config = load_config(os.path.join(directory, "config.json"))
  with open(os.path.join(directory, "head.json")) as f:
    head = Head(**json.load(f))
  model = build_model(config, head)
  prefix = tf.train.latest_checkpoint(directory) or os.path.join(
      directory, CHECKPOINT_PREFIX + "-1")
  try:
    status = tf.train.Checkpoint(model=model).read(prefix)
  except (IndexError, tf.errors.DataLossError) as e:  # a truncated file
    raise CorruptCheckpointError(
        f"{prefix}: cannot read the checkpoint ({e}); its data file is "
        "truncated or corrupt") from None
  status.expect_partial().assert_existing_objects_matched()
  return model, config, head
