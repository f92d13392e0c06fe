"""Which vocabulary a model was trained with: its size and hash, kept with it.

Token ids index the model's word table, so another vocabulary gives either a
crash (a larger one overruns the table) or confident nonsense with exit 0
(one of the same size). Writers of a run or model directory record the
vocabulary in its task.json (`"vocab": {"size", "sha256"}`, beside
`vocab_file`); consumers compare the vocabulary they are given with that
record (or with the one a `.tflite` carries) and refuse a mismatch in one
line naming both.

The hash is of the tokens as `load_vocab` reads them, one per line ending in
"\\n": for an ordinary vocab.txt it is `sha256sum vocab.txt`, and CRLF line
ends or trailing blank lines, which read as the same tokens, do not change
it. The Java core (`Vocabulary.sha256`) hashes the same way.

    path = resolve(run_dir, given=None)   # the run's own vocab.txt, checked
"""

import dataclasses
import hashlib
import json
import os
import re

KEY = "vocab"  # task.json's field
_SHA256 = re.compile(r"[0-9a-f]{64}")


class VocabMismatchError(ValueError):
  """A vocabulary that is not the model's; the message names both."""


@dataclasses.dataclass(frozen=True)
class VocabRecord:
  size: int
  sha256: str

  def __str__(self):
    return f"{self.size} tokens, sha256 {self.sha256[:12]}"

  def to_dict(self):
    return {"size": self.size, "sha256": self.sha256}


def record_of(tokens):
  """The record of a token list (`load_vocab`'s, a tokenizer's `vocab`)."""
  text = "".join(t + "\n" for t in tokens)
  return VocabRecord(len(tokens), hashlib.sha256(text.encode()).hexdigest())


def record_of_file(vocab_file, data=None):
  """The record of a vocab.txt (`data`: its bytes); VocabError if unusable."""
  from tfmodels.tokenization import load_vocab
  return record_of(load_vocab(vocab_file, data))


def check(given, given_name, model, model_name, model_source=None,
          hint=""):
  """VocabMismatchError unless record `given` is `model`'s vocabulary.

  `model_source` says where the model's record comes from, `hint` what to
  do instead (both end up in the one-line message)."""
  if given != model:
    where = f"{model_source}: " if model_source else ""
    raise VocabMismatchError(f"{given_name} ({given}) is not the vocabulary "
                             f"of {model_name} ({where}{model}){hint}")


def read_task(model_dir):
  """A model directory's task.json ({} when it has none)."""
  path = os.path.join(model_dir, "task.json")
  try:
    with open(path) as f:
      spec = json.load(f)
  except FileNotFoundError:
    return {}
  except (OSError, ValueError) as e:
    raise ValueError(f"{path}: cannot read it ({e})") from None
  if not isinstance(spec, dict):
    raise ValueError(f"{path}: not a JSON object")
  return spec


def recorded(spec, source="task.json"):
  """The VocabRecord of a task.json, or None (written before records)."""
  value = spec.get(KEY)
  if value is None:
    return None
  size = value.get("size") if isinstance(value, dict) else None
  if not (isinstance(size, int) and not isinstance(size, bool) and size > 0
          and isinstance(value.get("sha256"), str)
          and _SHA256.fullmatch(value["sha256"])):
    raise ValueError(f"{source}: {KEY} must be {{\"size\": tokens, "
                     f"\"sha256\": 64 hex digits}}, got {value!r}")
  return VocabRecord(value["size"], value["sha256"])


def with_record(spec, tokens, model_dir=None):
  """task.json `spec` plus the record of `tokens`.

  A run in `model_dir` whose task.json has no record (written before
  records existed) gets none, so resuming it finds its task.json unchanged.
  """
  if model_dir is not None:
    try:
      held = read_task(model_dir)
    except ValueError:
      held = {}  # the run directory check names the unreadable file
    if held and KEY not in held:
      return spec
  return {**spec, KEY: record_of(tokens).to_dict()}


def resolve(model_dir, given=None, flag="--vocab_file", default=None,
            model_flag="--model_dir"):
  """The vocab.txt to read `model_dir`'s model with, checked against it.

  With `given` (a flag's value) that file, refused unless it is the
  vocabulary task.json records; else task.json's `vocab_file`, refused if
  it changed since; else `default`. A directory written before records
  (task.json names only the file) is compared with that file when it is
  still readable, and accepted otherwise.

  Raises VocabMismatchError, VocabError (an unreadable given file) or
  ValueError (nothing to use, a malformed task.json).
  """
  from tfmodels.tokenization import VocabError
  task_json = os.path.join(model_dir, "task.json")
  spec = read_task(model_dir)
  record = recorded(spec, task_json)
  named = spec.get("vocab_file")
  if named is not None and not isinstance(named, str):
    raise ValueError(f"{task_json}: vocab_file must be a string, got "
                     f"{named!r}")
  model_name = f"{model_flag} {model_dir}"
  if given is not None:
    path, label = given, flag
  elif named is not None:
    path, label = named, f"{task_json}'s vocab_file"
  elif default is not None:
    path, label = default, f"{flag} (default)"
  else:
    raise ValueError(f"{model_name}: no vocabulary recorded (no task.json "
                     f"vocab_file); pass {flag}")
  source = None
  if record is None and given is not None and named is not None:
    try:  # written before records: hold the given file to the one named
      record = record_of_file(named)
      source = f"{task_json}'s vocab_file {named}"
    except VocabError:
      pass  # gone or unusable: nothing to compare with
  hint = "" if given is not None else (
      f"; pass {flag} with the vocabulary it was trained with")
  if record is not None:
    try:
      found = record_of_file(path)
    except VocabError as e:
      raise VocabError(f"{label} {e}{hint}") from None
    check(found, f"{label} {path}", record, model_name, source, hint)
  return path
