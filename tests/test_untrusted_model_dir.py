"""A model directory is untrusted input: refused in one line, before a build.

config.json, head.json, task.json's vocabulary record and the checkpoint
(with its `checkpoint` state file) come with downloaded weights. Each bad
field is refused naming the file and the field, as a ValueError the commands
print as `error: ...`; sizes no machine could hold are refused before Keras
allocates anything (`build_model` is made to fail here to prove it). Most
cases run in-process; a few run each command as a child process.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from fixtures.converters import tiny_models
from tfmodels import configs
from tfmodels.checkpoints import model_dir as md
from tfmodels.checkpoints import tf1
from tfmodels.checkpoints.weight_mapping import CheckpointError
from tfmodels.configs import ConfigError, load_config
from tfmodels.vocab_record import record_of_file

REPO = tiny_models.REPO
VOCAB = tiny_models.VOCAB
TF1_FIXTURE = os.path.join(REPO, "tests", "fixtures", "checkpoints",
                           "bert_pretraining_tf1")
# What TensorFlow's C++ logging prints on import, whatever the command does.
_TF_NOISE = re.compile(r"WARNING: All log messages before absl::Initialize"
                       r"Log|[IWEF]\d{4} \d\d:\d\d:\d\d")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
  """A finetune-style model directory (tiny BERT spam classifier over the
  student vocabulary, task.json with its record) and a spam data slice."""
  base = tmp_path_factory.mktemp("untrusted")
  with open(VOCAB) as f:
    vocab_size = sum(1 for _ in f)
  config = load_config("tiny_bert").replace(vocab_size=vocab_size,
                                            name="tiny")
  head = md.Head("classifier", num_classes=2)
  path = str(base / "good")
  md.save_model_dir(md.build_model(config, head), config, head, path)
  with open(os.path.join(path, "task.json"), "w") as f:
    json.dump({"task": "spam", "max_seq_length": 32, "vocab_file": VOCAB,
               "vocab": record_of_file(VOCAB).to_dict()}, f)
  data = tiny_models.write_spam_data(str(base / "spam"), 40, 20)
  return path, data


def _variant(good, tmp_path, config=None, head=None, files=None):
  """A copy of the good directory with fields of config.json / head.json
  changed and files replaced by raw bytes."""
  path = str(tmp_path / "model")
  shutil.copytree(good[0], path)
  for name, changes in (("config.json", config), ("head.json", head)):
    if changes:
      with open(os.path.join(path, name)) as f:
        values = json.load(f)
      with open(os.path.join(path, name), "w") as f:
        json.dump({**values, **changes}, f)
  for name, data in (files or {}).items():
    with open(os.path.join(path, name), "wb") as f:
      f.write(data)
  return path


@pytest.fixture
def no_build(monkeypatch):
  """Makes building a model fail the test: a refusal must come first."""
  def build(*args, **kwargs):
    raise AssertionError("a model was built before the refusal")
  monkeypatch.setattr(md, "build_model", build)


def _refused(path, error, *expect):
  with pytest.raises(error) as raised:
    md.load_model_dir(path)
  message = str(raised.value)
  assert "\n" not in message, message
  for text in expect:
    assert text in message, message
  return message


@pytest.mark.parametrize("change, field", [
    ({"intermediate_size": 10**9}, "intermediate_size"),
    ({"vocab_size": 10**9}, "vocab_size"),
    ({"max_position_embeddings": 10**9}, "max_position_embeddings"),
    ({"vocab_size": 2 * 10**7}, "vocab_size"),
    ({"num_hidden_layers": 10**6}, "num_hidden_layers"),
    ({"num_feedforward_networks": 10**4}, "num_feedforward_networks"),
    ({"type_vocab_size": 10**5}, "type_vocab_size"),
    ({"initializer_range": float("nan")}, "initializer_range"),
], ids=["ffn", "vocab", "positions", "vocab_2e7", "layers", "ffns",
        "types", "nan"])
def test_absurd_sizes_are_refused_before_a_build(good, tmp_path, no_build,
                                                 change, field):
  path = _variant(good, tmp_path, config=change)
  _refused(path, ConfigError, f"{path}/config.json: field '{field}'")


def test_a_config_larger_than_memory_names_its_biggest_field(
    good, tmp_path, no_build, monkeypatch):
  monkeypatch.setattr(configs, "physical_memory", lambda: 8 * 10**9)
  # 4M x 1024 word vectors: 16.4 GB of float32, each size sane on its own.
  path = _variant(good, tmp_path, config={"vocab_size": 4 * 10**6,
                                          "embedding_size": 1024})
  message = _refused(path, ConfigError, f"{path}/config.json: field "
                     "'vocab_size' is 4000000", "(8.0 GB)")
  assert "more than this machine's memory" in message


@pytest.mark.parametrize("head, files, expect", [
    ({"extra": 1}, None, "head.json: unknown field 'extra'"),
    ({"num_classes": "two"}, None,
     "head.json: field 'num_classes' must be an integer"),
    ({"num_classes": 10**9}, None,
     "head.json: field 'num_classes' must be an integer in [0, 65536]"),
    ({"num_classes": 0}, None,
     "head.json: field 'num_classes' must be at least 1"),
    ({"kind": "regressor"}, None, "head.json: field 'kind' must be one of"),
    ({"sentence_objective": 3}, None,
     "head.json: field 'sentence_objective' must be a string"),
    ({"num_slots": 4}, None, "head.json: num_slots 4: an intent_slot head"),
    (None, {"head.json": b"[1, 2]"}, "head.json: top level must be a JSON "
     "object"),
    (None, {"head.json": b"\xff\xfe{}"}, "head.json: not UTF-8 text"),
    (None, {"config.json": bytes(range(256))}, "config.json: not UTF-8 text"),
    (None, {"config.json": b"[" * 100_000}, "config.json: JSON nested too "
     "deeply"),
], ids=["extra_key", "string_count", "huge_count", "no_classes", "kind",
        "objective_type", "slots", "not_object", "binary_head",
        "binary_config", "deep"])
def test_bad_head_and_config_files(good, tmp_path, no_build, head, files,
                                   expect):
  path = _variant(good, tmp_path, head=head, files=files)
  _refused(path, ConfigError, f"{path}/{expect}")


@pytest.mark.parametrize("config, head, expect", [
    ({"vocab_size": 5000}, None, "config.json: field 'vocab_size' is 5000, "
     "but tensor embeddings/word_embeddings/embeddings of"),
    ({"max_position_embeddings": 128}, None,
     "config.json: field 'max_position_embeddings' is 128, but tensor "
     "embeddings/position_embeddings of"),
    ({"num_hidden_layers": 40}, None, "config.json: field "
     "'num_hidden_layers' is 40, but the checkpoint"),
    ({"num_hidden_layers": 1}, None, "config.json: field "
     "'num_hidden_layers' is 1, but the checkpoint"),
    (None, {"num_classes": 5}, "head.json: field 'num_classes' is 5, but "
     "tensor classifier/logits/kernel of"),
    (None, {"kind": "span"}, "head.json: field 'kind' is 'span', but the "
     "checkpoint"),
], ids=["vocab", "positions", "more_layers", "fewer_layers", "classes",
        "kind"])
def test_sizes_the_checkpoint_does_not_have(good, tmp_path, no_build, config,
                                            head, expect):
  path = _variant(good, tmp_path, config=config, head=head)
  message = _refused(path, CheckpointError, f"{path}/{expect}")
  assert "does not match" in message


def test_a_vocabulary_larger_than_the_word_table(good, tmp_path, no_build):
  path = _variant(good, tmp_path, config={"vocab_size": 100})
  _refused(path, ConfigError, f"{path}/config.json: field 'vocab_size' is "
           f"100, but the vocabulary {path}/task.json records has 4818 pieces")


def test_width_that_differs_is_one_line_after_the_build(good, tmp_path):
  path = _variant(good, tmp_path, config={"hidden_size": 48})
  _refused(path, md.CorruptCheckpointError, f"{path}/ckpt-1: checkpoint "
           "does not match config.json / head.json (Received incompatible "
           "tensor")


def _run_checkpoint(path, step, scale):
  """Writes the run's checkpoint at `step` as CheckpointManager does (with
  an optimizer's slots), its weights `scale` x the saved model's."""
  import tf_keras as keras
  model, _, _ = md.load_model_dir(path)
  for v in model.variables:
    v.assign(v * scale)
  optimizer = keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, optimizer=optimizer), path, 3)
  manager.save(checkpoint_number=step)
  return model


def test_the_recorded_step_is_loaded_or_named(good, tmp_path):
  path = _variant(good, tmp_path)
  written = _run_checkpoint(path, 40, 2.0)
  loaded, _, _ = md.load_model_dir(path)  # ckpt-40, not ckpt-1 beside it
  for a, b in zip(written.variables, loaded.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  for name in os.listdir(path):
    if name.startswith("ckpt-40."):
      os.remove(os.path.join(path, name))
  _refused(path, md.CorruptCheckpointError,
           f"{path}/ckpt-40: checkpoint files missing: ckpt-40.index, "
           f"ckpt-40.data-* ({path}/checkpoint records ckpt-40;")


@pytest.mark.parametrize("config_name, head, changes", [
    ("tiny_albert", md.Head("pretrainer", sentence_objective="sop"), {}),
    ("tiny_mobilebert", md.Head("intent_slot", num_classes=3, num_slots=5),
     {}),
    ("tiny_kroneckerbert", md.Head("span"), {}),
    ("tiny_mixed_vocab_teacher", md.Head("tagger", num_classes=7), {}),
    ("tiny_bert", md.Head("encoder"),
     {"low_rank_ranks": {"word_embeddings": 8, "intermediate": 8}}),
], ids=["albert", "mobilebert", "kronecker", "mixed_vocab", "low_rank"])
def test_every_kind_of_model_still_loads(tmp_path, config_name, head,
                                         changes):
  config = load_config(config_name).replace(**changes)
  model = md.build_model(config, head)
  md.write_description(str(tmp_path), config, head)
  tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt-1"))
  loaded, config_again, head_again = md.load_model_dir(str(tmp_path))
  assert (config_again, head_again) == (config, head)
  for a, b in zip(model.variables, loaded.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tf1_import_refuses_our_own_fields(tmp_path):
  with open(os.path.join(TF1_FIXTURE, "bert_config.json")) as f:
    values = json.load(f)
  prefix = os.path.join(TF1_FIXTURE, "model.ckpt")
  for changes, expect in (
      ({"low_rank_ranks": {"intermediate": 4}},
       "field 'low_rank_ranks' ({'intermediate': 4}) has no tensors in a "
       "Google TF1 bert checkpoint"),
      ({"max_position_embeddings": 128},
       "field 'max_position_embeddings' is 128, but tensor "
       "bert/embeddings/position_embeddings")):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({**values, **changes}))
    with pytest.raises(CheckpointError) as raised:
      tf1.import_checkpoint(prefix, str(path))
    assert str(raised.value).startswith(f"{path}: {expect}"), raised.value


# --- the commands, as child processes --------------------------------------

def _command(good, out, kind):
  model, data = good
  return {
      "evaluate": ["tfmodels.training.evaluate", "--data_dir", data,
                   "--model_dir"],
      "finetune_init": ["tfmodels.training.finetune", "--task", "spam",
                        "--data_dir", data, "--vocab_file", VOCAB,
                        "--max_seq_length", "32", "--model_dir", out,
                        "--init_dir"],
      "finetune_teacher": ["tfmodels.training.finetune", "--task", "spam",
                           "--data_dir", data, "--vocab_file", VOCAB,
                           "--max_seq_length", "32", "--model_dir", out,
                           "--init_dir", model, "--teacher_dir"],
      "compress": ["tfmodels.training.compress", "--data_dir", data,
                   "--heads", "2", "--model_dir", out, "--teacher_dir"],
      "convert_tflite": ["converters.convert_tflite", "--task", "spam",
                         "--data_dir", data, "--vocab_file", VOCAB,
                         "--max_seq_length", "32", "--output_dir", out,
                         "--model_dir"],
      "export_hf": ["tfmodels.checkpoints.import_export", "--to", "hf",
                    "--output", out, "--input"],
  }[kind]


def _delete_checkpoint(path):
  """A run that recorded ckpt-40, whose checkpoint files are gone."""
  for name in os.listdir(path):
    if name.startswith("ckpt-"):
      os.remove(os.path.join(path, name))
  with open(os.path.join(path, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "ckpt-40"\n'
            'all_model_checkpoint_paths: "ckpt-40"\n')


@pytest.mark.parametrize("kind, config, head, expect", [
    ("evaluate", {"vocab_size": 10**9}, None,
     "config.json: field 'vocab_size': 1000000000 is beyond any real model"),
    ("convert_tflite", {"vocab_size": 10**9}, None,
     "config.json: field 'vocab_size': 1000000000 is beyond any real model"),
    ("finetune_init", None, {"extra": 1},
     "head.json: unknown field 'extra'"),
    ("finetune_teacher", None, {"num_classes": "two"},
     "head.json: field 'num_classes' must be an integer in [0, 65536], got "
     "'two'"),
    ("compress", "deleted", None, "ckpt-40: checkpoint files missing: "
     "ckpt-40.index, ckpt-40.data-*"),
    ("export_hf", {"intermediate_size": 10**9}, None,
     "config.json: field 'intermediate_size': 1000000000 is beyond any real "
     "model"),
], ids=["evaluate", "convert_tflite", "finetune_init_dir",
        "finetune_teacher_dir", "compress_teacher_dir", "export_hf"])
def test_commands_refuse_in_one_line(good, tmp_path, kind, config, head,
                                     expect):
  path = _variant(good, tmp_path, config=config if config != "deleted"
                  else None, head=head)
  if config == "deleted":
    _delete_checkpoint(path)
  out = str(tmp_path / "out")
  before = sorted(os.listdir(tmp_path))
  result = subprocess.run(
      [sys.executable, "-m", *_command(good, out, kind), path],
      capture_output=True, text=True, env=tiny_models.env(), cwd=REPO,
      timeout=120)
  lines = [l for l in result.stderr.splitlines()
           if l.strip() and not _TF_NOISE.match(l)]
  assert result.returncode != 0
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
  assert f"{path}/{expect}" in lines[0], lines[0]
  assert sorted(os.listdir(tmp_path)) == before  # nothing written


def test_tf1_import_command_refuses_low_rank_ranks(tmp_path):
  with open(os.path.join(TF1_FIXTURE, "bert_config.json")) as f:
    values = json.load(f)
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps({**values, "low_rank_ranks": {"query": 4}}))
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.checkpoints.import_export", "--from",
       "tf1", "--input", os.path.join(TF1_FIXTURE, "model.ckpt"), "--config",
       str(config), "--output", str(tmp_path / "out")],
      capture_output=True, text=True, env=tiny_models.env(), cwd=REPO,
      timeout=120)
  lines = [l for l in result.stderr.splitlines()
           if l.strip() and not _TF_NOISE.match(l)]
  assert result.returncode != 0
  assert lines == [f"error: {config}: field 'low_rank_ranks' ({{'query': 4}})"
                   " has no tensors in a Google TF1 bert checkpoint; it "
                   "describes one of our own models (a model directory), "
                   "not this import"], result.stderr
  assert not (tmp_path / "out").exists()
