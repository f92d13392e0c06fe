"""Our converted-model directory: config, head, checkpoint and SavedModel.

    DIR/config.json      our ModelConfig
    DIR/head.json        which head the weights include (see `Head`)
    DIR/ckpt-1.*         tf.train.Checkpoint(model=...)
    DIR/saved_model/     serving signature: int32 input_ids, input_mask,
                         segment_ids [B, T] -> sequence_output, pooled_output
                         (+ logits, start_logits / end_logits, or
                         intent_logits / slot_logits)

Written into a staging directory and renamed, so a failed conversion leaves
nothing behind.
"""

import dataclasses
import json
import os

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig
from tfmodels.encoders import INPUT_NAMES, build_encoder
from tfmodels.models import (build_classifier, build_intent_slot_model,
                             build_pretrainer, build_span_model, build_tagger)
from tfmodels.staging import staged_directory, write_file

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


def write_description(directory, config, head):
  """config.json + head.json: what `load_model_dir` needs to rebuild."""
  write_file(os.path.join(directory, "config.json"), config.to_json() + "\n")
  write_file(os.path.join(directory, "head.json"),
             json.dumps(head.to_dict(), indent=2))


def save_model_dir(model, config, head, output_dir, overwrite=False):
  """Writes DIR atomically; refuses an existing DIR unless overwrite."""
  if os.path.exists(output_dir) and not overwrite:
    raise FileExistsError(f"{output_dir} exists (pass --overwrite)")
  with staged_directory(output_dir) as staging:
    write_description(staging, config, head)
    tf.train.Checkpoint(model=model).write(
        os.path.join(staging, CHECKPOINT_PREFIX + "-1"))
    serving = _Serving(model, head)
    tf.saved_model.save(serving, os.path.join(staging, "saved_model"),
                        signatures={"serving_default": serving.serve})


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
  tf.train.Checkpoint(model=model).read(prefix).expect_partial(
      ).assert_existing_objects_matched()
  return model, config, head
