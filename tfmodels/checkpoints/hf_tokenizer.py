"""The tokenizer a Hugging Face model directory carries, checked against
its model before anything is imported.

    tokenizer = read_tokenizer(hf_dir, config)   # None: no tokenizer files
    tokenizer.vocab          # the pieces in id order (our vocab.txt)

A fine-tuned model is only as good as the text it is given: the same
pieces, the same casing. `save_pretrained` writes `vocab.txt` (transformers
4) or `tokenizer.json` (a WordPiece model with its vocabulary; transformers
5) beside `tokenizer_config.json`. A vocabulary larger than the word table,
special tokens other than BERT's, or a casing that disagrees with the
vocabulary or with this pipeline (which lower-cases, as uncased BERT does)
is refused in one line naming the file and field.
"""

import dataclasses
import json
import os

from tfmodels.checkpoints.weight_mapping import CheckpointError
from tfmodels.configs import ConfigError, read_json_object
from tfmodels.tokenization import SPECIAL_TOKENS, VocabError, load_vocab

# tokenizer_config.json's special-token fields and the pieces BERT's inputs
# are built from (tokenization.SPECIAL_TOKENS).
SPECIAL_FIELDS = {"pad_token": "[PAD]", "unk_token": "[UNK]",
                  "cls_token": "[CLS]", "sep_token": "[SEP]",
                  "mask_token": "[MASK]"}
# An uncased vocabulary may hold a few cased pieces (symbols of other
# scripts); a cased one holds thousands.
CASED_SHARE = 0.01


@dataclasses.dataclass(frozen=True)
class HfTokenizer:
  vocab: tuple  # the pieces in id order
  lower_case: bool
  source: str  # the file the vocabulary came from

  def vocab_text(self):
    return "".join(piece + "\n" for piece in self.vocab)


def _special_value(value):
  """A special token as tokenizer_config.json writes it: a string, or (an
  AddedToken) a dict holding it as "content"."""
  return value.get("content") if isinstance(value, dict) else value


def _config_fields(path):
  """tokenizer_config.json's object, or {} when there is none."""
  if not os.path.exists(path):
    return {}
  try:
    return read_json_object(path)
  except ConfigError as e:
    raise CheckpointError(str(e)) from None


def _wordpiece_vocab(path):
  """(pieces in id order, the normalizer's lowercase or None) of a
  tokenizer.json whose model is BERT's WordPiece."""
  try:
    tokenizer = read_json_object(path, max_bytes=1 << 28)
  except ConfigError as e:
    raise CheckpointError(str(e)) from None
  model = tokenizer.get("model")
  kind = model.get("type") if isinstance(model, dict) else None
  if kind != "WordPiece":
    raise CheckpointError(f"{path}: field 'model.type' is {kind!r}; only "
                          "BERT's WordPiece tokenizer is supported")
  prefix = model.get("continuing_subword_prefix", "##")
  if prefix != "##":
    raise CheckpointError(f"{path}: field 'model.continuing_subword_prefix'"
                          f" is {prefix!r}; BERT's WordPiece uses '##'")
  vocab = model.get("vocab")
  ids = sorted(vocab.values()) if isinstance(vocab, dict) else None
  if not vocab or ids != list(range(len(vocab))):
    raise CheckpointError(f"{path}: field 'model.vocab' is not a piece -> "
                          "id map with ids 0..N-1")
  normalizer = tokenizer.get("normalizer")
  lowercase = (normalizer.get("lowercase") if isinstance(normalizer, dict)
               else None)
  return sorted(vocab, key=vocab.get), lowercase


def read_tokenizer(directory, config):
  """The HfTokenizer of a Hugging Face directory, or None if it has neither
  vocab.txt nor tokenizer.json; CheckpointError (one line) when it
  disagrees with itself, with `config` (a ModelConfig: its vocab_size) or
  with the casing this pipeline tokenizes with."""
  settings_path = os.path.join(directory, "tokenizer_config.json")
  settings = _config_fields(settings_path)
  vocab_path = os.path.join(directory, "vocab.txt")
  json_path = os.path.join(directory, "tokenizer.json")
  normalizer_lower = None
  if os.path.exists(vocab_path):
    source, data = vocab_path, None
  elif os.path.exists(json_path):
    pieces, normalizer_lower = _wordpiece_vocab(json_path)
    source, data = json_path, "".join(p + "\n" for p in pieces).encode()
  else:
    return None
  try:
    vocab = tuple(load_vocab(source, data))
  except VocabError as e:
    raise CheckpointError(str(e)) from None
  if len(vocab) > config.vocab_size:
    raise CheckpointError(f"{source}: {len(vocab)} pieces, but config.json's "
                          f"vocab_size is {config.vocab_size}: the ids past "
                          "it have no row in the word table")
  for field, piece in SPECIAL_FIELDS.items():
    value = _special_value(settings.get(field, piece))
    if value != piece:
      raise CheckpointError(f"{settings_path}: field '{field}' is {value!r};"
                            f" BERT's inputs are built with {piece}")
  lower = settings.get("do_lower_case", normalizer_lower)
  if (normalizer_lower is not None and "do_lower_case" in settings
      and lower != normalizer_lower):
    raise CheckpointError(f"{settings_path}: field 'do_lower_case' is "
                          f"{json.dumps(lower)}, but {json_path}'s normalizer "
                          f"has lowercase {json.dumps(normalizer_lower)}")
  lower = True if lower is None else lower
  words = [p for p in vocab if p not in SPECIAL_TOKENS]
  cased = sum(p != p.lower() for p in words)
  where = settings_path if "do_lower_case" in settings else source
  if lower is not True:
    what = ("a cased vocabulary" if cased else "yet the vocabulary has no "
            "upper-case piece")
    raise CheckpointError(
        f"{where}: do_lower_case is {json.dumps(lower)} ({what}); this "
        "pipeline lower-cases every input, as uncased BERT does, so a cased "
        "model would read text it was not trained on")
  if cased > CASED_SHARE * max(len(words), 1):
    raise CheckpointError(
        f"{where}: do_lower_case is true, but {cased} of {source}'s "
        f"{len(vocab)} pieces are upper-case (a cased vocabulary): those "
        "pieces could never be produced")
  return HfTokenizer(vocab, True, source)
