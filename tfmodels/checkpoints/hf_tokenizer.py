"""The tokenizer a Hugging Face model directory carries, checked against
its model before anything is imported.

    tokenizer = read_tokenizer(hf_dir, config)   # None: no tokenizer files
    tokenizer.vocab          # the pieces in id order (our vocab.txt)

A fine-tuned model is only as good as the text it is given: the same
pieces, the same normalization. `save_pretrained` writes `vocab.txt`
(transformers 4) or `tokenizer.json` (a WordPiece model with its vocabulary
and its BertNormalizer; transformers 5) beside `tokenizer_config.json`.
The settings (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`)
are read from both and carried on as `TokenizerSettings`. A vocabulary
larger than the word table, special tokens other than BERT's, a vocab.txt
and tokenizer.json with other pieces, settings the two files disagree on,
a normalizer or pre-tokenizer other than BERT's, or a cased model (this
pipeline lower-cases, as uncased BERT does) is refused in one line naming
the file and field.
"""

import dataclasses
import json
import os

from tfmodels.checkpoints.weight_mapping import CheckpointError
from tfmodels.configs import ConfigError, read_json_object
from tfmodels.tokenization import (SPECIAL_TOKENS, TokenizerSettings,
                                   VocabError, load_vocab)

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
  settings: TokenizerSettings
  source: str  # the file the vocabulary came from

  @property
  def lower_case(self):
    return self.settings.lower_case

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


# tokenizer.json's BertNormalizer fields by tokenizer_config.json's names.
_NORMALIZER_FIELDS = {"do_lower_case": "lowercase",
                      "strip_accents": "strip_accents",
                      "tokenize_chinese_chars": "handle_chinese_chars"}


def _wordpiece_file(path):
  """(pieces in id order, the normalizer's settings as tokenizer_config.json
  fields) of a tokenizer.json that is BERT's: WordPiece, BertNormalizer,
  BertPreTokenizer; CheckpointError naming the field otherwise."""
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
  kind = normalizer.get("type") if isinstance(normalizer, dict) else None
  if kind != "BertNormalizer":
    raise CheckpointError(f"{path}: field 'normalizer.type' is {kind!r}; "
                          "only BERT's BertNormalizer is supported")
  if normalizer.get("clean_text", True) is not True:
    raise CheckpointError(f"{path}: field 'normalizer.clean_text' is "
                          f"{json.dumps(normalizer.get('clean_text'))}; "
                          "this pipeline always cleans text, as BERT does")
  pre = tokenizer.get("pre_tokenizer")
  kind = pre.get("type") if isinstance(pre, dict) else None
  if kind != "BertPreTokenizer":
    raise CheckpointError(f"{path}: field 'pre_tokenizer.type' is {kind!r}; "
                          "only BERT's BertPreTokenizer is supported")
  fields = {ours: normalizer[theirs] for ours, theirs in
            _NORMALIZER_FIELDS.items() if theirs in normalizer}
  return sorted(vocab, key=vocab.get), fields


def _read_vocab(source, data=None):
  try:
    return tuple(load_vocab(source, data))
  except VocabError as e:
    raise CheckpointError(str(e)) from None


def read_tokenizer(directory, config):
  """The HfTokenizer of a Hugging Face directory, or None if it has neither
  vocab.txt nor tokenizer.json; CheckpointError (one line naming the file
  and field) when its files disagree with each other (vocab.txt and
  tokenizer.json's pieces, tokenizer_config.json's settings and
  tokenizer.json's normalizer), with `config` (a ModelConfig: its
  vocab_size) or with what this pipeline can honour (an uncased model)."""
  settings_path = os.path.join(directory, "tokenizer_config.json")
  settings = _config_fields(settings_path)
  vocab_path = os.path.join(directory, "vocab.txt")
  json_path = os.path.join(directory, "tokenizer.json")
  vocab = normalizer = None
  if os.path.exists(json_path):
    pieces, normalizer = _wordpiece_file(json_path)
    source, vocab = json_path, _read_vocab(
        json_path, "".join(p + "\n" for p in pieces).encode())
  if os.path.exists(vocab_path):
    from_txt = _read_vocab(vocab_path)
    if vocab is not None and from_txt != vocab:
      differ = next((i for i, (a, b) in enumerate(zip(from_txt, vocab))
                     if a != b), min(len(from_txt), len(vocab)))
      raise CheckpointError(
          f"{vocab_path} and {json_path} disagree (id {differ}: "
          f"{_piece(from_txt, differ)} against {_piece(vocab, differ)}); "
          "keep the one the model was trained with")
    source, vocab = vocab_path, from_txt
  if vocab is None:
    return None
  if len(vocab) > config.vocab_size:
    raise CheckpointError(f"{source}: {len(vocab)} pieces, but config.json's "
                          f"vocab_size is {config.vocab_size}: the ids past "
                          "it have no row in the word table")
  for field, piece in SPECIAL_FIELDS.items():
    value = _special_value(settings.get(field, piece))
    if value != piece:
      raise CheckpointError(f"{settings_path}: field '{field}' is {value!r};"
                            f" BERT's inputs are built with {piece}")
  fields = dict(normalizer or {})
  for field in _NORMALIZER_FIELDS:
    if field not in settings:
      continue
    if normalizer is not None and field in normalizer and (
        settings[field] is not normalizer[field]):
      raise CheckpointError(
          f"{settings_path}: field '{field}' is "
          f"{json.dumps(settings[field])}, but {json_path}'s normalizer has "
          f"{_NORMALIZER_FIELDS[field]} {json.dumps(normalizer[field])}")
    fields[field] = settings[field]
  try:
    chosen = TokenizerSettings.from_config(
        fields, settings_path if settings else source)
  except VocabError as e:
    raise CheckpointError(str(e)) from None
  words = [p for p in vocab if p not in SPECIAL_TOKENS]
  cased = sum(p != p.lower() for p in words)
  where = settings_path if "do_lower_case" in settings else source
  if not chosen.lower_case:
    what = ("a cased vocabulary" if cased else "yet the vocabulary has no "
            "upper-case piece")
    raise CheckpointError(
        f"{where}: do_lower_case is false ({what}); this pipeline "
        "lower-cases every input, as uncased BERT does, so a cased model "
        "would read text it was not trained on")
  if cased > CASED_SHARE * max(len(words), 1):
    raise CheckpointError(
        f"{where}: do_lower_case is true, but {cased} of {source}'s "
        f"{len(vocab)} pieces are upper-case (a cased vocabulary): those "
        "pieces could never be produced")
  return HfTokenizer(vocab, chosen, source)


def _piece(vocab, index):
  return repr(vocab[index]) if index < len(vocab) else "no piece"
