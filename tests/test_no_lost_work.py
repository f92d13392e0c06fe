"""Nothing a user had is ever lost (issue 20), tfmodels' commands.

A re-run with another config, head or task leaves the run byte for byte;
two writers into one output never both succeed; a corrupt shard or an
unwritable output is one line naming it, before any work; SIGTERM runs the
clean-up; training history is appended as it happens and a resumed run's
is whole, without repeated steps.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import HELDOUT_CORPUS, REPO, VOCAB
from tfmodels.checkpoints.model_dir import Head, RunDirError, claim_run_dir
from tfmodels.configs import load_config
from tfmodels.data.pretraining_dataset import read_meta
from tfmodels.staging import OutputError

TINY = {"name": "tiny_no_lost_work", "vocab_size": 30522, "hidden_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "max_position_embeddings": 32}


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def _command(module, *args):
  return [sys.executable, "-m", module, *map(str, args)]


def _run(module, *args):
  return subprocess.run(_command(module, *args), capture_output=True,
                        text=True, cwd=REPO, env=_env(), timeout=300)


def _start(module, *args):
  return subprocess.Popen(_command(module, *args), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=REPO,
                          env=_env())


def _last_line(result):
  return result.stderr.strip().splitlines()[-1]


def _snapshot(directory):
  """{relative path: bytes} of every file under directory."""
  files = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        files[os.path.relpath(path, directory)] = f.read()
  return files


def _wait_for(path, process, seconds=120):
  deadline = time.time() + seconds
  while not os.path.exists(path):
    assert process.poll() is None, process.stderr.read()[-1500:]
    assert time.time() < deadline, f"{path} never appeared"
    time.sleep(0.05)


def _pretrain_args(data, model_dir, config, steps=2):
  return ("--config", config, "--train_data", data, "--model_dir", model_dir,
          "--train_steps", steps, "--batch_size", 4, "--checkpoint_every",
          2, "--log_every", 1)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """(shard directory, tiny config path), made by the real command."""
  root = tmp_path_factory.mktemp("no_lost_work")
  made = _run("tfmodels.data.create_pretraining_data", "--input_file",
              HELDOUT_CORPUS, "--output_dir", root / "shards", "--vocab_file",
              VOCAB, "--dupe_factor", 1, "--max_seq_length", 32,
              "--max_predictions_per_seq", 5, "--num_shards", 2)
  assert made.returncode == 0, made.stderr[-1500:]
  config = root / "tiny.json"
  config.write_text(json.dumps(TINY))
  return root / "shards", config


def test_rerun_with_another_config_or_head_leaves_the_run_whole(shards,
                                                                tmp_path):
  data, config = shards
  run = tmp_path / "run"
  first = _run("tfmodels.training.pretrain",
               *_pretrain_args(data, run, config))
  assert first.returncode == 0, first.stderr[-1500:]
  before = _snapshot(run)
  wider = tmp_path / "wider.json"
  wider.write_text(json.dumps(dict(TINY, hidden_size=32)))
  again = _run("tfmodels.training.pretrain",
               *_pretrain_args(data, run, wider))
  assert again.returncode != 0
  assert _last_line(again).startswith(
      f"error: --model_dir {run} holds a run of config 'tiny_no_lost_work' "
      "that differs from this command's 'tiny_no_lost_work' in "), (
          again.stderr[-1500:])
  assert "hidden_size (16 there, 32 here)" in _last_line(again)
  # finetune pointed at the pretrain run: another head, refused as well.
  finetune = _run("tfmodels.training.finetune", "--task", "spam",
                  "--data_dir", "data/spam", "--init_dir", run,
                  "--model_dir", run, "--vocab_file", VOCAB)
  assert finetune.returncode != 0
  assert _last_line(finetune).startswith(
      f"error: --model_dir {run} holds a run with a pretrainer head, this "
      "command trains a classifier head"), finetune.stderr[-1500:]
  assert _snapshot(run) == before
  assert sorted(os.listdir(tmp_path)) == ["run", "wider.json"]  # no litter

  # A crash after logging steps 3 and 4 (checkpoint still at 2), half a
  # line last: the resumed run trains 3 and 4 again and records them once.
  with open(run / "history.jsonl", "a") as f:
    f.write('{"loss": -1, "step": 3}\n{"loss": -1, "step": 4}\n{"loss": ')
  resumed = _run("tfmodels.training.pretrain",
                 *_pretrain_args(data, run, config, steps=4))
  assert resumed.returncode == 0, resumed.stderr[-1500:]
  history = [json.loads(line) for line in
             (run / "history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == [1, 2, 3, 4]
  assert all(h["loss"] > 0 for h in history)
  assert {k: before[k] for k in ("config.json", "head.json")} == {
      k: (run / k).read_bytes() for k in ("config.json", "head.json")}


@pytest.mark.cold_start  # signals the processes it starts or reads their pids
def test_second_trainer_is_refused_while_the_first_finishes_whole(shards,
                                                                  tmp_path):
  data, config = shards
  run = tmp_path / "run"
  first = _start("tfmodels.training.pretrain",
                 *_pretrain_args(data, run, config, steps=6))
  try:
    _wait_for(tmp_path / ".run.lock", first)
    first.send_signal(signal.SIGSTOP)  # holds the lock while the second tries
    second = _run("tfmodels.training.pretrain",
                  *_pretrain_args(data, run, config, steps=6))
  finally:
    first.send_signal(signal.SIGCONT)
  assert second.returncode != 0
  assert _last_line(second) == (
      f"error: --model_dir {run}: another process (pid {first.pid}) is "
      "writing it; wait for it or choose another output")
  _, err = first.communicate(timeout=300)
  assert first.returncode == 0, err[-1500:]
  history = [json.loads(line) for line in
             (run / "history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == [1, 2, 3, 4, 5, 6]
  assert (run / "ckpt-6.index").exists()
  assert sorted(os.listdir(tmp_path)) == ["run"]  # the lock file is gone


@pytest.mark.cold_start  # signals the processes it starts or reads their pids
def test_second_data_writer_is_refused_and_sigterm_cleans_up(tmp_path):
  # (The training test below shows the first writer finishing whole.)
  out = tmp_path / "shards"
  # Work for a minute or more, so the first writer is still at it when it
  # is stopped and then terminated, however late a loaded machine lets
  # this test send those signals (with a second's work it had finished).
  args = ("--input_file", HELDOUT_CORPUS, "--output_dir", out,
          "--vocab_file", VOCAB, "--dupe_factor", 60, "--max_seq_length", 32,
          "--max_predictions_per_seq", 5, "--num_shards", 2)
  first = _start("tfmodels.data.create_pretraining_data", *args)
  try:
    _wait_for(tmp_path / ".shards.lock", first)
    first.send_signal(signal.SIGSTOP)
    second = _run("tfmodels.data.create_pretraining_data", *args)
  finally:
    first.send_signal(signal.SIGCONT)
  assert second.returncode != 0
  assert _last_line(second) == (
      f"error: --output_dir {out}: another process (pid {first.pid}) is "
      "writing it; wait for it or choose another output")
  # SIGTERM: the first's clean-up runs; no lock, staging or output is left.
  first.send_signal(signal.SIGTERM)
  _, stderr = first.communicate(timeout=120)
  assert first.returncode == 128 + signal.SIGTERM, stderr[-1500:]
  assert sorted(os.listdir(tmp_path)) == []


# SIGTERM landing while Python runs a `__del__` (which drops exceptions):
# the command must still stop, its clean-up run, not finish with status 0.
SIGTERM_IN_DEL = """import os, signal, time
from tfmodels.sigterm import exit_on_sigterm
exit_on_sigterm()
class Finalized:
  def __del__(self):
    os.kill(os.getpid(), signal.SIGTERM)
    sum(range(1000))  # the handler runs here, inside __del__
try:
  Finalized()
  time.sleep(30)
  print("finished")
finally:
  print("cleaned up")
"""


def test_sigterm_dropped_in_a_finalizer_still_stops_the_command():
  result = subprocess.run([sys.executable, "-c", SIGTERM_IN_DEL],
                          capture_output=True, text=True, cwd=REPO,
                          env=_env(), timeout=60)
  assert "Exception ignored" in result.stderr  # it did land in __del__
  assert result.returncode == 128 + signal.SIGTERM
  assert result.stdout.split() == ["cleaned", "up"]


def _corrupt(source, target, how):
  target.mkdir()
  for name in os.listdir(source):
    (target / name).write_bytes((source / name).read_bytes())
  shard = target / "pretrain-00001-of-00002.tfrecord"
  data = bytearray(shard.read_bytes())
  if how == "truncated":
    del data[-100:]
  else:
    data[5000] ^= 0x10
  shard.write_bytes(bytes(data))
  return shard


@pytest.mark.parametrize("how, reason", [
    ("truncated", "truncated record at byte"),
    ("bit-flipped", "corrupted record at byte")])
def test_corrupt_shard_is_named_before_any_work(shards, tmp_path, how,
                                                reason):
  data, config = shards
  shard = _corrupt(data, tmp_path / "bad", how)
  with pytest.raises(ValueError, match=(
      rf"^{shard}: record \d+ is truncated or corrupt \({reason}")):
    read_meta(str(tmp_path / "bad"))


def test_corrupt_shard_unwritable_dir_zero_interval_are_one_line(shards,
                                                                 tmp_path):
  data, config = shards
  shard = _corrupt(data, tmp_path / "bad", "truncated")
  result = _run("tfmodels.training.pretrain",
                *_pretrain_args(tmp_path / "bad", tmp_path / "run", config))
  assert result.returncode != 0
  assert _last_line(result).startswith(
      f"error: {shard}: record "), result.stderr[-1500:]
  (tmp_path / "afile").write_text("mine")
  result = _run("tfmodels.training.distill", "--teacher", "all-minilm-l6-v2",
                "--student_config", config, "--train_data", data,
                "--model_dir", tmp_path / "afile" / "run")
  assert result.returncode != 0
  assert _last_line(result) == (
      f"error: --model_dir {tmp_path / 'afile' / 'run'}: "
      f"{tmp_path / 'afile'} is not a directory")
  assert sorted(os.listdir(tmp_path)) == ["afile", "bad"]
  assert (tmp_path / "afile").read_text() == "mine"


def test_evaluate_output_is_refused_before_scoring(tmp_path):
  (tmp_path / "metrics.json").write_text("mine")
  result = _run("tfmodels.training.evaluate", "--model_dir",
                tmp_path / "none", "--data_dir", "data/spam", "--output",
                tmp_path / "metrics.json")
  assert result.returncode != 0
  assert _last_line(result) == (f"error: --output {tmp_path / 'metrics.json'}"
                                ": exists (pass --overwrite)")
  assert (tmp_path / "metrics.json").read_text() == "mine"


def test_claim_refuses_another_head_or_task_and_removes_what_it_made(
    tmp_path):
  config = load_config("tiny_bert")
  head = Head("classifier", num_classes=2)
  task = {"task": "spam", "max_seq_length": 32, "vocab_file": VOCAB}
  run = tmp_path / "run"
  with pytest.raises(RuntimeError):  # fails before its first checkpoint
    with claim_run_dir(str(run), config, head, task):
      assert (run / "task.json").exists()
      raise RuntimeError("no checkpoint yet")
  assert sorted(os.listdir(tmp_path)) == []
  with claim_run_dir(str(run), config, head, task):
    (run / "checkpoint").write_text("model_checkpoint_path: 'ckpt-1'\n")
  before = _snapshot(run)
  for other_head, other_task, message in [
      (Head("classifier", num_classes=3), task,
       "differ in num_classes (2 there, 3 here)"),
      (head, dict(task, task="sst-2"),
       "holds a run of task 'spam', this command trains 'sst-2'"),
      (Head("pretrainer"), None, "holds a run with a classifier head")]:
    with pytest.raises(RunDirError, match=re.escape(message)):
      with claim_run_dir(str(run), config, other_head, other_task):
        pass
  with claim_run_dir(str(run), config, head, task):  # the same run resumes
    with pytest.raises(OutputError, match="another process"):
      with claim_run_dir(str(run), config, head, task):
        pass
  assert _snapshot(run) == before
  assert sorted(os.listdir(tmp_path)) == ["run"]
