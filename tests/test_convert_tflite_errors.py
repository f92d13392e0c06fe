"""convert_tflite refuses bad input with one line and writes nothing.

Most checks run before TensorFlow is imported, so these take about a second
each; a config that does not match its checkpoint needs the model built.
"""

import json
import os
import shutil

import pytest

from fixtures.converters import tiny_models


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  base = tmp_path_factory.getbasetemp()
  return tiny_models.trained_classifier(base), tiny_models.spam_data(base)


def _refused(tmp_path, *args, expect, output_dir=None, one_line=True):
  """Runs the command; asserts a one-line error mentioning `expect` and that
  nothing (no output directory, no staging directory) is left."""
  out = output_dir or tmp_path / "out"
  before = set(os.listdir(tmp_path))
  result = tiny_models.run_converter(*args, "--output_dir", out)
  assert result.returncode != 0, result.stdout
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines and lines[-1].startswith("error: "), result.stderr[-2000:]
  assert expect in lines[-1], lines[-1]
  assert "Traceback" not in result.stderr
  if one_line:  # refused before TensorFlow could log anything
    assert len(lines) == 1, result.stderr
  if output_dir is None:
    assert not os.path.exists(out)
  assert set(os.listdir(tmp_path)) == before  # no staging left behind
  return lines[-1]


def _common(classifier, *extra):
  model_dir, data = classifier
  return ("--model_dir", model_dir, "--task", "spam", "--data_dir", data,
          "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 64, *extra)


def test_missing_checkpoint(classifier, tmp_path):
  model_dir, _ = classifier
  broken = tmp_path / "no_ckpt"
  shutil.copytree(model_dir, broken,
                  ignore=shutil.ignore_patterns("ckpt-*", "checkpoint"))
  line = _refused(tmp_path, *_common(classifier)[2:], "--model_dir", broken,
                  expect="no checkpoint")
  assert str(broken) in line
  _refused(tmp_path, "--model_dir", tmp_path / "nowhere",
           expect="nowhere: no config.json")


@pytest.mark.parametrize("change, expect", [
    ({"hidden_size": 48}, "incompatible tensor"),
    ({"num_hidden_layers": 1}, "does not match config.json"),
])
def test_config_that_does_not_match_the_checkpoint(classifier, tmp_path,
                                                   change, expect):
  model_dir, _ = classifier
  edited = tmp_path / "edited"
  shutil.copytree(model_dir, edited)
  config = json.loads((edited / "config.json").read_text())
  (edited / "config.json").write_text(json.dumps({**config, **change}))
  line = _refused(tmp_path, *_common(classifier)[2:], "--model_dir", edited,
                  expect=expect, one_line=False)
  assert f"--model_dir {edited}" in line


@pytest.mark.parametrize("content, name, expect", [
    (b"", "empty.txt", "no examples (the file is empty)"),
    (b"\n\n  \n", "blank.txt", "no examples"),
    (bytes(range(256)) * 4, "binary.txt", "not UTF-8 text"),
    (b'{"version": "1.1", "articles": []}', "notsquad.json",
     "missing field 'data'"),
    (b"one\ttwo\tthree\n", "fields.txt", "3 tab-separated fields"),
], ids=["empty", "blank", "binary", "not_squad", "three_fields"])
def test_bad_representative_file(classifier, tmp_path, content, name,
                                 expect):
  path = tmp_path / name
  path.write_bytes(content)
  line = _refused(tmp_path, *_common(classifier, "--modes", "int8",
                                      "--representative_data", path),
                  expect=expect)
  assert str(path) in line


def test_representative_tsv_of_the_wrong_layout(classifier, tmp_path):
  path = tmp_path / "wrong.tsv"
  path.write_text("question\tanswer\nwhat\tthat\n")
  line = _refused(tmp_path, *_common(classifier, "--modes", "int8",
                                      "--representative_data", path),
                  expect="header lacks column", one_line=False)
  assert str(path) in line


@pytest.mark.parametrize("length, expect", [
    (128, "exceeds the model's max_position_embeddings 64"),
    (2, "at least 3"),
    (0, "at least 3"),  # was taken as "no length given"
])
def test_sequence_length_the_model_cannot_take(classifier, tmp_path, length,
                                               expect):
  args = list(_common(classifier))
  args[args.index("--max_seq_length") + 1] = length
  line = _refused(tmp_path, *args, expect=expect)
  assert line.startswith(f"error: --max_seq_length {length}")


def test_unwritable_output_path(classifier, tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("not a directory")
  _refused(tmp_path, *_common(classifier), expect="is not a directory",
           output_dir=a_file / "models")
  _refused(tmp_path, *_common(classifier), expect="cannot write there",
           output_dir="/proc/convert_tflite_test")


def test_existing_files_need_overwrite(classifier, tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "spam_float32.tflite").write_bytes(b"precious")
  _refused(tmp_path, *_common(classifier, "--name", "spam"),
           expect="spam_float32.tflite exists (pass --overwrite)",
           output_dir=out)
  assert sorted(os.listdir(out)) == ["spam_float32.tflite"]
  assert (out / "spam_float32.tflite").read_bytes() == b"precious"


@pytest.mark.parametrize("extra, expect", [
    (("--modes", "float32,int4"), "unknown mode(s) ['int4']"),
    (("--saved_model", "x"), "exactly one of --model_dir and --saved_model"),
    (("--num_threads", "0"), "--num_threads 0: must be >= 1"),
    (("--name", "../../x"), "--name ../../x: a file name stem, not a path"),
    (("--name", "sub/x"), "--name sub/x: a file name stem, not a path"),
    (("--qat_steps", "5"), "--qat_steps trains for int8: --modes must "
     "include int8"),
    (("--qat_steps", "5", "--modes", "int8,int16x8"), "and not int16x8"),
    (("--qat_steps", "-1"), "--qat_steps -1: must be >= 0"),
    (("--qat_steps", "5", "--modes", "int8", "--qat_learning_rate", "0"),
     "--qat_learning_rate must be > 0"),
    # Issue 29: nan passed `<= 0` and trained; inf disabled the gate.
    (("--qat_steps", "5", "--modes", "int8", "--qat_learning_rate", "nan"),
     "--qat_learning_rate nan: give a finite number"),
    (("--max_float_diff", "inf"), "--max_float_diff inf: give a finite "
     "number"),
])
def test_flag_mistakes(classifier, tmp_path, extra, expect):
  _refused(tmp_path, *_common(classifier, *extra), expect=expect)


def test_name_too_long_for_the_file_system(classifier, tmp_path):
  """Issue 29: Errno 36 came only when the files were written, after the
  whole conversion."""
  limit = os.pathconf(tmp_path, "PC_NAME_MAX")
  name = "n" * (limit - len("_float32.tflite"))  # fits; its card does not
  longest = len(f"{name}_float32.model_card.json")
  _refused(tmp_path, *_common(classifier, "--name", name),
           expect=f"--name: the file name {'n' * 24}... would be {longest} "
                  f"bytes; the file system of {tmp_path} takes at most "
                  f"{limit}")


def test_qat_needs_the_task_data(classifier, tmp_path):
  model_dir, data = classifier
  _refused(tmp_path, "--model_dir", model_dir, "--task", "spam",
           "--representative_data", os.path.join(data, "train.tsv"),
           "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 64,
           "--modes", "int8", "--qat_steps", 5,
           expect="--qat_steps needs --data_dir")


def test_truncated_checkpoint_is_named(classifier, tmp_path):
  model_dir, _ = classifier
  broken = tmp_path / "truncated"
  shutil.copytree(model_dir, broken)
  data = next(broken.glob("ckpt-*.data-*"))
  data.write_bytes(data.read_bytes()[:1000])
  line = _refused(tmp_path, *_common(classifier)[2:], "--model_dir", broken,
                  "--modes", "float32", expect="truncated or corrupt",
                  one_line=False)
  assert f"{broken}/ckpt-1: cannot read the checkpoint" in line


@pytest.mark.cold_start  # signals the processes it starts or reads their pids
def test_a_second_writer_into_one_output_is_refused(classifier, tmp_path):
  import subprocess
  import sys
  out = tmp_path / "shared"
  out.mkdir()
  (out / "earlier.txt").write_text("mine")
  holder = subprocess.Popen(
      [sys.executable, "-c",
       "import time\nfrom tfmodels import staging\n"
       f"with staging.output_lock({str(out)!r}):\n"
       "  print('held', flush=True); time.sleep(60)"],
      stdout=subprocess.PIPE, text=True, cwd=tiny_models.REPO)
  try:
    assert holder.stdout.readline().strip() == "held"
    line = _refused(tmp_path, *_common(classifier), "--modes", "float32",
                    output_dir=out, expect="another process")
    assert f"(pid {holder.pid}) is writing it" in line
  finally:
    holder.kill()
    holder.wait()
  assert os.listdir(out) == ["earlier.txt"]


def test_a_vocabulary_the_run_did_not_record_is_refused(classifier,
                                                         tmp_path):
  """Same size, other tokens: the .tflite would embed it and every app
  would agree with it, so the run's record decides, before any work."""
  from tfmodels.vocab_record import record_of_file
  model_dir, _ = classifier
  recorded = tmp_path / "recorded"
  shutil.copytree(model_dir, recorded)
  (recorded / "task.json").write_text(json.dumps({
      "task": "spam", "max_seq_length": 64, "vocab_file": tiny_models.VOCAB,
      "vocab": record_of_file(tiny_models.VOCAB).to_dict()}))
  tokens = open(tiny_models.VOCAB).read().split("\n")
  tokens[5], tokens[6] = tokens[6], tokens[5]
  swapped = tmp_path / "swapped.txt"
  swapped.write_text("\n".join(tokens))
  line = _refused(tmp_path, *_common(classifier)[2:], "--model_dir",
                  recorded, "--vocab_file", swapped,
                  expect="is not the vocabulary of --model_dir",
                  one_line=False)  # the tokenizer's module loads TensorFlow
  assert str(swapped) in line
