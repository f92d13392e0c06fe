"""What sits on an encoder (`Head`), and DIR/head.json read as untrusted
input (`read_head`). Apart from the model code so that a command that only
checks a model directory (ship before its first step, a report) does not
load TensorFlow.
"""

import dataclasses
import os

from tfmodels.configs import ConfigError, read_json_object

SENTENCE_OBJECTIVES = ("nsp", "sop")
HEAD_KINDS = ("encoder", "pretrainer", "classifier", "span", "tagger",
              "intent_slot")
# head.json's fields and their JSON types; classes (and slot tags) are labels
# someone lists, so more than this many is a corrupt or hostile file.
HEAD_FIELDS = {"kind": str, "num_classes": int, "sentence_objective": str,
               "num_slots": int}
MAX_CLASSES = 1 << 16


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


def read_head(directory):
  """DIR/head.json as a Head, or ConfigError naming the file and the field.

  It comes with downloaded weights: an unknown key, a wrong type or an
  absurd class count is refused here in one line, not found by Head() or
  by a Keras layer of that width."""
  path = os.path.join(directory, "head.json")
  values = read_json_object(path)
  for key, value in values.items():
    kind = HEAD_FIELDS.get(key)
    if kind is None:
      raise ConfigError(f"{path}: unknown field '{key}' (known: "
                        f"{', '.join(HEAD_FIELDS)})")
    if kind is str and not isinstance(value, str):
      raise ConfigError(f"{path}: field '{key}' must be a string, got "
                        f"{value!r}")
    if kind is int and (type(value) is not int  # pylint: disable=unidiomatic-typecheck
                        or not 0 <= value <= MAX_CLASSES):
      raise ConfigError(f"{path}: field '{key}' must be an integer in "
                        f"[0, {MAX_CLASSES}], got {value!r}")
  kind = values.get("kind", Head.kind)
  if kind not in HEAD_KINDS:
    raise ConfigError(f"{path}: field 'kind' must be one of {HEAD_KINDS}, "
                      f"got {kind!r}")
  objective = values.get("sentence_objective", Head.sentence_objective)
  if objective not in SENTENCE_OBJECTIVES:
    raise ConfigError(f"{path}: field 'sentence_objective' must be one of "
                      f"{SENTENCE_OBJECTIVES}, got {objective!r}")
  if kind in ("classifier", "tagger", "intent_slot") and not values.get(
      "num_classes"):
    raise ConfigError(f"{path}: field 'num_classes' must be at least 1 for "
                      f"a {kind} head")
  try:
    return Head(**values)
  except ValueError as e:
    raise ConfigError(f"{path}: {e}") from None
