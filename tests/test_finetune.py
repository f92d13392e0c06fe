"""finetune + evaluate: a tiny encoder learns a real (synthetic) task."""

import json
import os
import random
import subprocess
import sys

import numpy as np

from conftest import STUDENT_VOCAB, VOCAB, write_lines
from tfmodels.checkpoints.model_dir import Head, build_model, save_model_dir
from tfmodels.configs import load_config
from tfmodels.tokenization import load_vocab
from tfmodels.vocab_record import record_of_file, with_record

GOOD = ["good", "great", "fine", "nice", "happy"]
BAD = ["bad", "awful", "poor", "sad", "terrible"]
FILLER = ["the", "movie", "was", "really", "a", "plot", "and", "story"]


def _sst_rows(rng, n):
  rows = ["sentence\tlabel"]
  for _ in range(n):
    label = rng.randrange(2)
    words = rng.sample(FILLER, 4) + [rng.choice(GOOD if label else BAD)]
    rng.shuffle(words)
    rows.append(f"{' '.join(words)}\t{label}")
  return rows


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def test_finetune_learns_and_evaluate_agrees(tmp_path):
  rng = random.Random(0)
  data = tmp_path / "sst"
  data.mkdir()
  write_lines(data / "train.tsv", _sst_rows(rng, 400))
  write_lines(data / "dev.tsv", _sst_rows(rng, 100))
  config = load_config("tiny_bert").replace(vocab_size=30522)
  init = tmp_path / "init"
  save_model_dir(build_model(config, Head("pretrainer")), config,
                 Head("pretrainer"), str(init))
  run = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.finetune", "--task", "sst-2",
       "--data_dir", str(data), "--init_dir", str(init), "--model_dir",
       str(run), "--vocab_file", VOCAB, "--max_seq_length", "16",
       "--train_steps", "150", "--batch_size", "32", "--learning_rate",
       "3e-3", "--checkpoint_every", "50"],
      capture_output=True, text=True, env=_env())
  assert result.returncode == 0, result.stderr[-1000:]
  results = json.loads((run / "eval_results.json").read_text())
  assert results["accuracy"] > 0.9, results
  assert json.loads((run / "head.json").read_text()) == {
      "kind": "classifier", "num_classes": 2, "sentence_objective": "nsp"}
  # The run records its vocabulary, which evaluate then holds others to.
  assert json.loads((run / "task.json").read_text())["vocab"] == (
      record_of_file(VOCAB).to_dict())
  scored = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.evaluate", "--model_dir",
       str(run), "--data_dir", str(data), "--split", "dev"],
      capture_output=True, text=True, env=_env())
  assert scored.returncode == 0, scored.stderr[-1000:]
  again = json.loads(scored.stdout[scored.stdout.index("{"):])
  assert np.isclose(again["accuracy"], results["accuracy"])
  assert again == results  # SST-2 reports accuracy only


def test_evaluate_refuses_a_vocabulary_the_run_did_not_record(tmp_path):
  """Another vocabulary gave wrong metrics (same size) or a crash (larger);
  it is refused before the model loads, in one line naming both."""
  spec = {"task": "sst-2", "max_seq_length": 16, "vocab_file": VOCAB}
  run = tmp_path / "run"  # its task.json is all the check reads
  run.mkdir()
  (run / "task.json").write_text(json.dumps(
      with_record(spec, load_vocab(VOCAB))))
  scored = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.evaluate", "--model_dir",
       str(run), "--data_dir", str(tmp_path), "--vocab_file", STUDENT_VOCAB],
      capture_output=True, text=True, env=_env())
  assert scored.returncode == 1
  given, own = record_of_file(STUDENT_VOCAB), record_of_file(VOCAB)
  assert scored.stderr.strip().splitlines()[-1] == (
      f"error: --vocab_file {STUDENT_VOCAB} ({given}) is not the vocabulary "
      f"of --model_dir {run} ({own})")
  assert scored.stdout == ""


def _sst_run(tmp_path, *flags):
  """finetune on a synthetic SST from a tiny BERT (LayerNorm + gelu)."""
  rng = random.Random(0)
  data = tmp_path / "sst"
  if not data.exists():
    data.mkdir()
    write_lines(data / "train.tsv", _sst_rows(rng, 400))
    write_lines(data / "dev.tsv", _sst_rows(rng, 100))
    write_lines(data / "heldout.tsv", _sst_rows(rng, 50))
    config = load_config("tiny_bert").replace(vocab_size=30522)
    save_model_dir(build_model(config, Head("pretrainer")), config,
                   Head("pretrainer"), str(tmp_path / "init"))
  return subprocess.run(
      [sys.executable, "-m", "tfmodels.training.finetune", "--task", "sst-2",
       "--data_dir", str(data), "--init_dir", str(tmp_path / "init"),
       "--model_dir", str(tmp_path / "run"), "--vocab_file", VOCAB,
       "--max_seq_length", "16", "--batch_size", "32", "--learning_rate",
       "3e-3", *flags], capture_output=True, text=True, env=_env())


def test_finetune_swaps_ops_blending_them_over_the_first_steps(tmp_path):
  result = _sst_run(tmp_path, "--train_steps", "150", "--substitute",
                    "layernorm=nonorm,gelu=relu", "--blend_steps", "40",
                    "--eval_split", "heldout", "--eval_first_steps", "50",
                    "--min_gain", "0")
  assert result.returncode == 0, result.stderr[-1000:]
  assert "blend from the original ops over the first 40 steps" in (
      result.stdout)
  run = tmp_path / "run"
  written = load_config(str(run / "config.json"))
  assert (written.normalization_type, written.hidden_act) == (
      "no_norm", "relu")
  assert json.loads((run / "eval_results.json").read_text())[
      "accuracy"] > 0.9
  # The written model is the swapped one alone: evaluate, which builds it
  # from config.json without any blend, scores dev the same.
  scored = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.evaluate", "--model_dir",
       str(run), "--data_dir", str(tmp_path / "sst"), "--split", "dev"],
      capture_output=True, text=True, env=_env())
  assert scored.returncode == 0, scored.stderr[-1000:]
  assert json.loads(scored.stdout[scored.stdout.index("{"):]) == json.loads(
      (run / "eval_results.json").read_text())


def test_blend_flags_are_refused_before_any_work(tmp_path):
  alone = _sst_run(tmp_path, "--blend_steps", "10")
  assert alone.returncode != 0
  assert "--blend_steps: blends the ops of --substitute" in alone.stderr
  past = _sst_run(tmp_path, "--substitute", "gelu=relu", "--blend_steps",
                  "60", "--eval_split", "heldout", "--eval_first_steps", "50")
  assert past.returncode != 0
  assert "--blend_steps 60: more than --eval_first_steps 50" in past.stderr
  assert not (tmp_path / "run").exists()
