"""Encoder + head models, each a keras.Model with dict inputs and dict outputs.

Every builder takes the config (or an already built encoder, to share its
weights between pre-training and fine-tuning) and returns a model whose
inputs are the encoder's (`input_ids`, `input_mask`, `segment_ids`, plus
`masked_lm_positions` for pre-training).

    from tfmodels.configs import load_config
    from tfmodels.data.squad import MAX_SEQ_LENGTH
    from tfmodels.models import build_span_model
    model = build_span_model(load_config("mobilebert"),
                             seq_length=MAX_SEQ_LENGTH)
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig
from tfmodels.encoders import build_encoder, float32_model as _model
from tfmodels.head_spec import SENTENCE_OBJECTIVES
from tfmodels.heads import (ClassificationHead, JointIntentSlotHead,
                            MaskedLMHead, SpanHead, TokenTaggingHead)



# The layers heads add beside the encoder, itself a layer of the model named
# after its config: a model called "classifier" (an imported directory's
# name, say) must not collide with them.
_HEAD_LAYERS = ("mlm", "nsp", "sop", "classifier", "span", "tagger",
                "intent_slot")


def _encoder_and_inputs(config, encoder, seq_length):
  if encoder is None:
    encoder = build_encoder(config, seq_length, name=(
        f"{config.name}_encoder" if config.name in _HEAD_LAYERS else None))
  inputs = {name: keras.Input(shape=t.shape[1:], dtype=t.dtype, name=name)
            for name, t in encoder.input.items()}
  return encoder, inputs, encoder(inputs)


def build_pretrainer(config: ModelConfig, encoder=None, seq_length=None,
                     max_predictions=None, sentence_objective="nsp"):
  """MLM (at `masked_lm_positions`) + NSP or SOP; also returns the encoder dict.

  Outputs: `mlm_logits` [B, P, V] (`mlm_student_logits` for a mixed-vocab
  teacher), `sentence_logits` [B, 2], and every encoder output.
  """
  if sentence_objective not in SENTENCE_OBJECTIVES:
    raise ValueError(f"sentence_objective must be one of {SENTENCE_OBJECTIVES},"
                     f" got {sentence_objective!r}")
  encoder, inputs, enc = _encoder_and_inputs(config, encoder, seq_length)
  inputs["masked_lm_positions"] = keras.Input(
      shape=(max_predictions,), dtype=tf.int32, name="masked_lm_positions")
  mlm = MaskedLMHead(config, encoder.get_layer("embeddings"), name="mlm")(
      enc["sequence_output"], inputs["masked_lm_positions"])
  sentence = ClassificationHead(
      2, config.hidden_dropout_prob, config.initializer_range,
      name=sentence_objective)(enc["pooled_output"])
  outputs = dict(enc, mlm_logits=mlm["logits"], sentence_logits=sentence)
  if "student_logits" in mlm:
    outputs["mlm_student_logits"] = mlm["student_logits"]
  return _model(inputs, outputs, f"{config.name}_pretrainer")


def build_classifier(config: ModelConfig, num_classes: int, encoder=None,
                     seq_length=None):
  """Sequence classification (num_classes >= 2) or regression (1): `logits`."""
  encoder, inputs, enc = _encoder_and_inputs(config, encoder, seq_length)
  logits = ClassificationHead(num_classes, config.hidden_dropout_prob,
                              config.initializer_range, name="classifier")(
                                  enc["pooled_output"])
  return _model(inputs, dict(enc, logits=logits), f"{config.name}_classifier")


def build_span_model(config: ModelConfig, encoder=None, seq_length=None):
  """SQuAD v1.1 / v2.0: `start_logits`, `end_logits` [B, T]."""
  encoder, inputs, enc = _encoder_and_inputs(config, encoder, seq_length)
  spans = SpanHead(config.initializer_range, name="span")(enc["sequence_output"])
  return _model(inputs, dict(enc, **spans), f"{config.name}_squad")


def build_tagger(config: ModelConfig, num_tags: int, encoder=None,
                 seq_length=None):
  """Token tagging: `logits` [B, T, num_tags]."""
  encoder, inputs, enc = _encoder_and_inputs(config, encoder, seq_length)
  logits = TokenTaggingHead(num_tags, config.hidden_dropout_prob,
                            config.initializer_range, name="tagger")(
                                enc["sequence_output"])
  return _model(inputs, dict(enc, logits=logits), f"{config.name}_tagger")


def build_intent_slot_model(config: ModelConfig, num_intents: int,
                            num_slots: int, encoder=None, seq_length=None):
  """Joint intent + slot (mixed-vocab paper, SNIPS): `intent_logits`, `slot_logits`."""
  encoder, inputs, enc = _encoder_and_inputs(config, encoder, seq_length)
  out = JointIntentSlotHead(num_intents, num_slots, config.hidden_dropout_prob,
                            config.initializer_range, name="intent_slot")(
                                enc["pooled_output"], enc["sequence_output"])
  return _model(inputs, dict(enc, **out), f"{config.name}_intent_slot")


# The encoder outputs each task head reads (the builders above), by the
# head layer's name.
_HEAD_READS = {"span": ("sequence_output",), "classifier": ("pooled_output",),
               "tagger": ("sequence_output",),
               "intent_slot": ("pooled_output", "sequence_output")}


def outputs_only(model, keys):
  """A model of the same layers and weights computing only `keys` of one
  of the task models above. Their encoder, a model inside the model,
  returns every hidden state and attention score, and holds them all
  until the call ends; here it returns only what the head and `keys` read.
  Anything else (a pretrainer, a LiteRT or fake-quantized wrapper) is
  returned as it is."""
  inner = [l for l in getattr(model, "layers", ()) if isinstance(l, keras.Model)]
  heads = [l for l in getattr(model, "layers", ()) if l.name in _HEAD_READS]
  if len(inner) != 1 or len(heads) != 1 or not isinstance(inner[0].output,
                                                          dict):
    return model
  encoder, head = inner[0], heads[0]
  reads = _HEAD_READS[head.name]
  kept = [k for k in encoder.output if k in keys or k in reads]
  slim = keras.Model(encoder.input, {k: encoder.output[k] for k in kept})
  inputs = {name: keras.Input(shape=t.shape[1:], dtype=t.dtype, name=name)
            for name, t in encoder.input.items()}
  enc = slim(inputs)
  out = head(*(enc[k] for k in reads))
  everything = dict(enc, **(out if isinstance(out, dict) else {"logits": out}))
  return _model(inputs, {k: everything[k] for k in keys},
                f"{model.name}_outputs")
