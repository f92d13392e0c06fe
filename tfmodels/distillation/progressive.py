"""MobileBERT's knowledge-transfer strategies as stages (Sun et al., sec. 3.6).

* AKT (auxiliary): one stage, every layer's transfer loss plus pre-training
  distillation, all variables trained.
* JKT (joint): all layers' transfer losses together, then PD.
* PKT (progressive): one stage per layer l, training layer l on its own
  transfer loss with the layers below frozen (or, `lower_layer_lr` > 0, at
  that fraction of the learning rate), then PD.
For JKT and PKT the embeddings and the pre-training heads are first copied
from the teacher (`copy_from_teacher`; a narrower word table starts as the
teacher's low-rank factor, `low_rank_init.py`) and take no part in the
transfer stages. Every strategy uses the same total number of steps; the transfer
stages get `kt_fraction` of them.

Layer transfer loss = MobileBERT's feature-map transfer (normalized + mean +
variance terms) on the layer's output + attention transfer on its scores.
"""

import dataclasses
import re

import tensorflow as tf

from tfmodels.distillation.losses import (attention_transfer_loss,
                                          feature_map_transfer_loss,
                                          pretraining_distillation_loss)

STRATEGIES = ("akt", "jkt", "pkt")
COPIED_PREFIXES = ("embeddings/", "mlm/", "nsp/", "sop/", "pooler/")


@dataclasses.dataclass(frozen=True)
class Stage:
  name: str
  end_step: int  # global step at which the stage ends
  transfer_layers: tuple  # layers whose transfer losses are in the loss
  distill: bool  # pre-training distillation (eq. 4) in the loss
  trained: str | None = None  # regex of trained variables; None: all
  lr_multipliers: tuple = ()  # ((regex, factor), ...) for LAMB


def layer_pattern(layers):
  """Regex of the variables of the given encoder layers."""
  return r"^layer_(%s)[/_]" % "|".join(str(l) for l in layers)


def plan(strategy, num_layers, total_steps, kt_fraction=0.5,
         lower_layer_lr=0.0, teacher_has_mlm=True):
  """The stages of a strategy, ending at total_steps.

  A teacher without an MLM head (MiniLM) gives PD no soft targets; its
  distillation stage keeps every layer's transfer loss beside the student's
  own MLM + NSP, so the student does not drift from the teacher's features
  while its MLM head learns.
  """
  if strategy not in STRATEGIES:
    raise ValueError(f"strategy {strategy!r} is not one of {STRATEGIES}")
  all_layers = tuple(range(num_layers))
  pd_layers = () if teacher_has_mlm else all_layers
  if strategy == "akt":
    return [Stage("akt", total_steps, all_layers, True)]
  transfer_steps = int(total_steps * kt_fraction)
  if not 0 < transfer_steps < total_steps:
    raise ValueError(f"kt_fraction={kt_fraction} leaves no steps for one of "
                     "the stages")
  if strategy == "jkt":
    stages = [Stage("jkt-transfer", transfer_steps, all_layers, False,
                    trained=layer_pattern(all_layers))]
  else:
    per_layer = transfer_steps // num_layers
    if per_layer < 1:
      raise ValueError(f"{transfer_steps} transfer steps for {num_layers} "
                       "layers")
    stages = []
    for l in all_layers:
      lower = tuple(range(l))
      if lower and lower_layer_lr > 0:
        trained = layer_pattern(lower + (l,))
        multipliers = ((layer_pattern(lower), lower_layer_lr),)
      else:
        trained, multipliers = layer_pattern((l,)), ()
      end = transfer_steps if l == num_layers - 1 else (l + 1) * per_layer
      stages.append(Stage(f"pkt-layer-{l}", end, (l,), False, trained,
                          multipliers))
  return stages + [Stage("distillation", total_steps, pd_layers, True)]


def trained_variables(model, stage):
  if stage.trained is None:
    return list(model.trainable_variables)
  return [v for v in model.trainable_variables
          if re.search(stage.trained, v.name)]


def copy_from_teacher(student, teacher, prefixes=COPIED_PREFIXES):
  """Copies same-named, same-shaped variables under prefixes; returns names."""
  teacher_vars = {v.name: v for v in teacher.weights}
  copied = []
  for v in student.weights:
    source = teacher_vars.get(v.name)
    if v.name.startswith(prefixes) and source is not None and (
        source.shape == v.shape):
      v.assign(source)
      copied.append(v.name.split(":")[0])
  return copied


def layer_transfer_terms(teacher_outputs, student_outputs, input_mask,
                         layers, attention=True, teacher_heads=None):
  """{"fmt_l": eq. 2, "at_l": eq. 3} for each transferred layer l; without
  `attention` only the feature maps (a student whose heads differ). With
  `teacher_heads` (per layer, the teacher head each student head was carved
  from) eq. 3 compares each student head with its own teacher head."""
  terms = {}
  for l in layers:
    terms[f"fmt_{l}"] = feature_map_transfer_loss(
        teacher_outputs["hidden_states"][l],
        student_outputs["hidden_states"][l], input_mask)
    if not attention:
      continue
    teacher_scores = teacher_outputs["attention_scores"][l]
    if teacher_heads is not None:
      teacher_scores = tf.gather(teacher_scores, teacher_heads[l], axis=1)
    terms[f"at_{l}"] = attention_transfer_loss(
        teacher_scores, student_outputs["attention_scores"][l], input_mask)
  return terms


def stage_loss(student, teacher, stage, alpha=0.5):
  """loss_fn(batch) -> (loss, metrics) of a stage."""
  def loss_fn(batch):
    features = {k: batch[k] for k in student.input}
    s = student(features, training=True)
    t = teacher({k: batch[k] for k in teacher.input}, training=False)
    metrics = layer_transfer_terms(t, s, batch["input_mask"],
                                   stage.transfer_layers)
    total = sum(metrics.values())
    if stage.distill:
      pd = pretraining_distillation_loss(
          batch["masked_lm_ids"], batch["masked_lm_weights"],
          s["mlm_logits"], t.get("mlm_logits"), batch["next_sentence_labels"],
          s["sentence_logits"], alpha)
      metrics["pd"] = pd
      total += pd
    return total, metrics
  return loss_fn


LAYER_TRANSFER_FIELDS = ("num_hidden_layers", "hidden_size",
                         "num_attention_heads", "vocab_size")


def check_compatible(teacher_config, student_config,
                     fields=LAYER_TRANSFER_FIELDS,
                     why="layer-wise transfer needs them equal"):
  """The configs agree on `fields` (by default what layer-wise transfer
  needs: equal depth, feature-map width and heads), or ValueError."""
  for field in fields:
    t, s = getattr(teacher_config, field), getattr(student_config, field)
    if t != s:
      raise ValueError(f"teacher {field} {t} != student {field} {s}: {why}")
