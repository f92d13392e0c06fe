"""A Hugging Face directory's tokenizer comes with its model (issue 40,
item 3): read from tokenizer.json (transformers 5's save_pretrained, the
committed fixture) or vocab.txt (transformers 4), and refused in one line
when it disagrees with the model or with this pipeline's casing."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from tfmodels.checkpoints.hf_tokenizer import read_tokenizer
from tfmodels.checkpoints.weight_mapping import CheckpointError
from tfmodels.configs import load_config

FIXTURES = os.path.join(REPO, "tests", "fixtures", "checkpoints")
TOKENIZER = os.path.join(FIXTURES, "hf_tokenizer")  # from BertTokenizer
CONFIG = load_config("tiny_bert").replace(vocab_size=100)


def _pieces():
  with open(os.path.join(TOKENIZER, "tokenizer.json")) as f:
    vocab = json.load(f)["model"]["vocab"]
  return sorted(vocab, key=vocab.get)


def _directory(tmp_path, vocab_txt=False, settings=None, pieces=None):
  """An HF directory's tokenizer files: the fixture's, changed."""
  path = tmp_path / "hf"
  shutil.copytree(TOKENIZER, path)
  if settings:
    values = json.loads((path / "tokenizer_config.json").read_text())
    values.update(settings)
    (path / "tokenizer_config.json").write_text(json.dumps(values))
  if vocab_txt or pieces:
    (path / "tokenizer.json").unlink()
    (path / "vocab.txt").write_text("\n".join(pieces or _pieces()) + "\n")
  return path


def test_the_vocabulary_comes_from_tokenizer_json_or_vocab_txt(tmp_path):
  from_json = read_tokenizer(TOKENIZER, CONFIG)
  assert list(from_json.vocab) == _pieces() and len(from_json.vocab) == 100
  assert from_json.vocab[:5] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                 "[MASK]")
  assert from_json.lower_case
  from_txt = read_tokenizer(_directory(tmp_path, vocab_txt=True), CONFIG)
  assert from_txt.vocab == from_json.vocab
  assert from_txt.vocab_text() == "".join(p + "\n" for p in _pieces())
  assert read_tokenizer(tmp_path, CONFIG) is None  # no tokenizer files


@pytest.mark.parametrize("change, message", [
    ({"config": CONFIG.replace(vocab_size=90)},
     "tokenizer.json: 100 pieces, but config.json's vocab_size is 90"),
    ({"settings": {"do_lower_case": False}},
     "tokenizer_config.json: field 'do_lower_case' is false, but "),
    ({"settings": {"do_lower_case": False}, "vocab_txt": True},
     "tokenizer_config.json: do_lower_case is false (yet the vocabulary has "
     "no upper-case piece); this pipeline lower-cases every input"),
    ({"pieces": _pieces()[:50] + [p.upper() + "X" for p in _pieces()[50:]]},
     "tokenizer_config.json: do_lower_case is true, but 50 of "),
    ({"settings": {"cls_token": "<s>"}},
     "tokenizer_config.json: field 'cls_token' is '<s>'; BERT's inputs are "
     "built with [CLS]"),
    ({"pieces": _pieces()[1:]}, "vocab.txt: vocabulary lacks [PAD]"),
])
def test_a_disagreeing_tokenizer_is_refused_naming_the_file(tmp_path, change,
                                                            message):
  config = change.pop("config", CONFIG)
  directory = _directory(tmp_path, **change)
  with pytest.raises(CheckpointError) as refused:
    read_tokenizer(directory, config)
  line = str(refused.value)
  assert line.startswith(f"{directory}/") and message in line, line
  assert "\n" not in line


def _import(source, output):
  return subprocess.run(
      [sys.executable, "-m", "tfmodels.checkpoints.import_export", "--from",
       "hf", "--input", str(source), "--output", str(output)],
      capture_output=True, text=True, cwd=REPO,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_import_writes_the_tokenizers_vocabulary_or_refuses(tmp_path):
  model = tmp_path / "classifier"
  shutil.copytree(os.path.join(FIXTURES, "bert_classifier"), model)
  for name in os.listdir(TOKENIZER):
    shutil.copy(os.path.join(TOKENIZER, name), model)
  result = _import(model, tmp_path / "ours")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "its tokenizer's vocab.txt (100 pieces, uncased)" in result.stdout
  assert (tmp_path / "ours" / "vocab.txt").read_text().splitlines() == (
      _pieces())
  settings = json.loads((model / "tokenizer_config.json").read_text())
  (model / "tokenizer_config.json").write_text(json.dumps(
      dict(settings, do_lower_case=False)))
  refused = _import(model, tmp_path / "again")
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1].startswith(
      f"error: {model / 'tokenizer_config.json'}: field 'do_lower_case' is "
      "false")
  assert not (tmp_path / "again").exists()
