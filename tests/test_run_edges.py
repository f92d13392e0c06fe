"""Data and resource edges of the training commands (issue 29, item 4).

Empty or header-only splits are one line naming the file, for every task
and split; eval labels the train split lacks are counted wrong, never
right; a full disk during a checkpoint or an export is one line naming the
path, leaves no partial files, and the run resumes exactly; a resume given
start flags other than its run's is refused. The full disk is real: a small
tmpfs mounted in an unprivileged user namespace (`unshare -Urm`).
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

from conftest import REPO, VOCAB, write_lines
from tfmodels.checkpoints.model_dir import Head, build_model, write_description
from tfmodels.configs import ModelConfig
from tfmodels.training import run_start
from tfmodels.training.tasks import make_task

TINY = ModelConfig.from_dict({
    "name": "tiny_edges", "vocab_size": 30522, "hidden_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 32,
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
SPAM = ["sentence\tlabel"] + [f"{w} offer number {i}\t{i % 2}"
                              for i, w in enumerate(["free", "hello"] * 6)]
SQUAD = {"version": "1.1", "data": [{"paragraphs": [{
    "context": "The cat sat on the mat.",
    "qas": [{"id": "q1", "question": "Where did the cat sit?",
             "answers": [{"text": "on the mat", "answer_start": 12}]}]}]}]}
EMPTY_SQUAD = {"version": "1.1", "data": []}
CONLL = ["# label = Greet", "hello\tB-x", "there\tO", ""]


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
          "CUDA_VISIBLE_DEVICES": ""}


def _last_line(result):
  return result.stderr.strip().splitlines()[-1]


def _write_split(directory, task, split, empty):
  directory.mkdir(exist_ok=True)
  if task == "spam":
    write_lines(directory / f"{split}.tsv", SPAM[:1] if empty else SPAM)
  elif task == "squad":
    (directory / f"{split}.json").write_text(
        json.dumps(EMPTY_SQUAD if empty else SQUAD))
  else:
    write_lines(directory / f"{split}.conll", [""] if empty else CONLL)


# --- empty splits ---------------------------------------------------------

@pytest.mark.parametrize("task", ["spam", "squad", "tagging", "intent_slot"])
@pytest.mark.parametrize("empty", ["train", "dev"])
def test_an_empty_split_is_named_wherever_it_is_read(tmp_path, tokenizer,
                                                     task, empty):
  data = tmp_path / "data"
  for split in ("train", "dev"):
    _write_split(data, task, split, split == empty)
  extension = {"spam": "tsv", "squad": "json"}.get(task, "conll")
  what = {"spam": "examples", "squad": "questions"}.get(task, "sentences")
  message = (re.escape(f"{data / empty}.{extension}: no {what} (an empty "
                       f"{empty} split"))
  t = make_task(task, str(data), tokenizer, 16)
  with pytest.raises(ValueError, match=message):  # finetune, before work
    t.check_split(empty)
  with pytest.raises(ValueError, match=message):  # training, compress
    t.features(empty)
  with pytest.raises(ValueError, match=message):  # evaluate, convert
    t.evaluate(lambda batch, training: {}, empty)


@pytest.mark.parametrize("task", ["spam", "squad", "tagging", "intent_slot"])
def test_the_first_rows_of_a_split_come_from_its_first_examples_alone(
    tmp_path, tokenizer, task):
  # Converters compare or probe a few dev rows: tokenizing the whole split
  # for them would make their cost grow with it.
  data = tmp_path / "data"
  data.mkdir()
  if task == "spam":
    write_lines(data / "dev.tsv", SPAM)
  elif task == "squad":
    article = json.loads(json.dumps(SQUAD))
    qas = article["data"][0]["paragraphs"][0]["qas"]
    qas += [dict(qas[0], id=f"q{i}") for i in range(2, 6)]
    (data / "dev.json").write_text(json.dumps(article))
  else:
    write_lines(data / "dev.conll", CONLL * 5)
  write_lines(data / "train.conll", CONLL)  # the tagging tasks' tag set
  t = make_task(task, str(data), tokenizer, 16)
  whole, first = t.features("dev"), t.features("dev", 2)
  rows = len(first["input_ids"])
  assert 2 <= rows < len(whole["input_ids"])
  for name, values in first.items():
    np.testing.assert_array_equal(values, whole[name][:rows])


def test_mnli_dev_is_its_matched_dev(tmp_path, tokenizer):
  # finetune checks "dev" before it trains, so MNLI needs one.
  rows = ["index\tsentence1\tsentence2\tgold_label", "0\ta cat\ta pet\t"
          "entailment", "1\ta cat\ta dog\tneutral"]
  write_lines(tmp_path / "train.tsv", rows)
  write_lines(tmp_path / "dev_matched.tsv", rows[:2])
  task = make_task("mnli", str(tmp_path), tokenizer, 16)
  task.check_split("dev")
  assert list(task.features("dev")["label_ids"]) == [1]


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
  """A pretrainer's run directory (no SavedModel: faster to write)."""
  path = tmp_path_factory.mktemp("init") / "init"
  path.mkdir()
  write_description(str(path), TINY, Head("pretrainer"))
  tf.train.Checkpoint(model=build_model(TINY, Head("pretrainer"))).write(
      str(path / "ckpt-1"))
  return path


def _finetune(init, data, model_dir, *extra, task="spam"):
  return [sys.executable, "-m", "tfmodels.training.finetune", "--task", task,
          "--data_dir", str(data), "--init_dir", str(init), "--model_dir",
          str(model_dir), "--vocab_file", VOCAB, "--max_seq_length", "16",
          "--batch_size", "4", "--learning_rate", "1e-3",
          *map(str, extra)]


@pytest.mark.parametrize("task,empty", [("spam", "train"),
                                        ("squad", "dev")])
def test_finetune_on_an_empty_split_is_one_line(tmp_path, init_dir, task,
                                                empty):
  data = tmp_path / "data"
  for split in ("train", "dev"):
    _write_split(data, task, split, split == empty)
  result = subprocess.run(
      _finetune(init_dir, data, tmp_path / "run", "--train_steps", 2,
                task=task), capture_output=True, text=True, env=_env())
  assert result.returncode != 0
  extension = "tsv" if task == "spam" else "json"
  assert _last_line(result).startswith(
      f"error: {data / empty}.{extension}: no ")
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "run").exists()


def test_a_resume_does_not_append_through_a_linked_history(tmp_path,
                                                          init_dir):
  """Issue 39: a run whose history.jsonl had become a link to an outside
  file appended the resumed steps to that file."""
  data = tmp_path / "data"
  for split in ("train", "dev"):
    _write_split(data, "spam", split, False)
  run = tmp_path / "run"
  first = subprocess.run(_finetune(init_dir, data, run, "--train_steps", 2,
                                   "--checkpoint_every", 2),
                         capture_output=True, text=True, env=_env())
  assert first.returncode == 0, first.stderr[-2000:]
  outside = tmp_path / "outside.txt"
  outside.write_text("the user's\n")
  (run / "history.jsonl").unlink()
  (run / "history.jsonl").symlink_to(outside)
  again = subprocess.run(_finetune(init_dir, data, run, "--train_steps", 4,
                                   "--checkpoint_every", 2),
                         capture_output=True, text=True, env=_env())
  assert again.returncode != 0
  assert _last_line(again) == (
      f"error: --model_dir {run / 'history.jsonl'}: is a symbolic link; "
      "refusing to write through it (give the real path)")
  assert "Traceback" not in again.stderr
  assert outside.read_text() == "the user's\n"
  assert _checkpoint_steps(run) == [2]


def _checkpoint_steps(run):
  return sorted(int(n[5:-6]) for n in os.listdir(run)
                if re.fullmatch(r"ckpt-\d+\.index", n))


# --- labels only an eval split has ----------------------------------------

def _constant_model(sentence=(), token=()):
  """A model predicting one class everywhere: `sentence` and `token` are
  (output key, class, classes) per example and per position."""
  def model(batch, training=False):
    rows, length = tf.shape(batch["input_ids"])[0], tf.shape(
        batch["input_ids"])[1]
    out = {}
    for key, index, n in sentence:
      out[key] = tf.tile(tf.one_hot(index, n)[None] * 5, [rows, 1])
    for key, index, n in token:
      out[key] = tf.tile(tf.one_hot(index, n)[None, None] * 5,
                         [rows, length, 1])
    return out
  return model


def test_intents_and_tags_only_dev_has_count_as_wrong(tmp_path, tokenizer):
  write_lines(tmp_path / "train.conll",
              ["# label = PlayMusic", "play\tO", "jazz\tB-genre", ""])
  write_lines(tmp_path / "dev.conll",
              ["# label = GetWeather", "rain\tB-kind", "today\tB-kind", ""])
  task = make_task("intent_slot", str(tmp_path), tokenizer, 8)
  assert task.intents == ["GetWeather", "PlayMusic"]
  assert task.tags == ["B-genre", "B-kind", "O"]
  # A model that puts the dev-only intent and tag first (their outputs
  # were never trained) used to score 1.0 on them.
  fluke = _constant_model([("intent_logits", 0, 2)],
                          [("slot_logits", 1, 3)])
  assert task.evaluate(fluke, "dev") == {
      "intent_accuracy": 0.0, "slot_f1": 0.0, "sentence_exact_match": 0.0,
      "slot_accuracy": 0.0}
  tagging = make_task("tagging", str(tmp_path), tokenizer, 8)
  assert tagging.evaluate(_constant_model(token=[("logits", 1, 3)]),
                          "dev") == {"token_accuracy": 0.0}
  # What the train split has is still scored as predicted.
  assert task.evaluate(_constant_model([("intent_logits", 1, 2)],
                                       [("slot_logits", 2, 3)]), "train")[
                                           "intent_accuracy"] == 1.0
  with pytest.raises(ValueError, match="the model predicts 5 intents but "
                     "the data's splits name 2"):
    task.evaluate(_constant_model([("intent_logits", 0, 5)],
                                  [("slot_logits", 1, 3)]), "dev")


def test_a_glue_label_the_train_split_lacks_counts_as_wrong(tmp_path,
                                                            tokenizer):
  write_lines(tmp_path / "train.tsv", ["sentence\tlabel", "fine\t0",
                                       "good\t0"])
  write_lines(tmp_path / "dev.tsv", ["sentence\tlabel", "spam\t1",
                                     "win\t1"])
  task = make_task("spam", str(tmp_path), tokenizer, 8)
  # Label 1's output was never trained: ranking it first used to score 1.0.
  assert task.evaluate(_constant_model([("logits", 1, 2)]), "dev")[
      "accuracy"] == 0.0


# --- start flags on a resume ---------------------------------------------

def _checkpoint(model_dir):
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                             str(model_dir), 3).save()


def test_resume_holds_to_the_recorded_start_flags(tmp_path):
  run, a, b = tmp_path / "run", tmp_path / "a", tmp_path / "b"
  for d in (run, a, b):
    d.mkdir()
  start = run_start.start_flags(init_dir=str(a), teacher_dir=None)
  assert run_start.check_resume(str(run), start) is None  # fresh
  run_start.record_start(str(run), start)
  _checkpoint(run)
  same = run_start.start_flags(init_dir=os.path.relpath(a), teacher_dir=None)
  assert run_start.check_resume(str(run), same) is None
  assert run_start.check_resume(
      str(run), {"init_dir": None, "teacher_dir": None},
      optional=("init_dir",)) is None
  with pytest.raises(run_start.ResumeError,
                     match=rf"--init_dir {b}: --model_dir {run} holds a run "
                     rf"started with --init_dir {a}, which a resume keeps"):
    run_start.check_resume(str(run), run_start.start_flags(
        init_dir=str(b), teacher_dir=None))
  with pytest.raises(run_start.ResumeError,
                     match=rf"--teacher_dir {a}: .* started with no "
                     "--teacher_dir"):
    run_start.check_resume(str(run), run_start.start_flags(
        init_dir=str(a), teacher_dir=str(a)))
  (run / "start.json").unlink()  # a run from before start.json
  assert run_start.check_resume(
      str(run), start, optional=("init_dir",)) == (
          f"note: --init_dir not applied: --model_dir {run} resumes from "
          "its own checkpoint")


# --- a full disk ----------------------------------------------------------

def _user_namespaces():
  return shutil.which("unshare") is not None and subprocess.run(
      ["unshare", "-Urm", "true"], capture_output=True).returncode == 0


def _weights(model_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
      str(model_dir)))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if "save_counter" not in name
          and name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


@pytest.mark.cold_start  # its commands run in their own mount namespace
@pytest.mark.skipif(not _user_namespaces(), reason="a small tmpfs needs "
                    "unprivileged user namespaces (unshare -Urm)")
def test_full_disk_is_one_line_leaves_nothing_and_the_run_resumes_exactly(
    tmp_path, init_dir):
  data = tmp_path / "data"
  for split in ("train", "dev"):
    _write_split(data, "spam", split, False)
  disk, small, out = tmp_path / "disk", tmp_path / "small", tmp_path / "out"
  for d in (disk, small, out):
    d.mkdir()
  flags = ("--train_steps", 3, "--checkpoint_every", 1)
  whole_err = open(tmp_path / "whole.err", "w")
  whole = subprocess.Popen(_finetune(init_dir, data, tmp_path / "whole",
                                     *flags), stdout=subprocess.DEVNULL,
                           stderr=whole_err, env=_env())
  finetune = " ".join(_finetune(init_dir, data, disk / "run", *flags))
  export = " ".join([sys.executable, "-m", "tfmodels.checkpoints.import_export",
                     "--from", "hf", "--input", os.path.join(
                         REPO, "tests", "fixtures", "checkpoints",
                         "bert_classifier"), "--output", str(small / "m")])
  # One checkpoint (~6 MB) fits in 10 MB, two do not; the export's
  # description fits in 20 kB, its checkpoint does not.
  script = f"""
    mount -t tmpfs -o size=10m tmpfs {disk}
    mount -t tmpfs -o size=20k tmpfs {small}
    ({export} >/dev/null 2>{out}/export.err; echo $? >{out}/export.rc) &
    {finetune} >/dev/null 2>{out}/full.err; echo $? >{out}/full.rc
    wait
    ls -a {disk}/run >{out}/full.ls
    ls -a {small} >{out}/export.ls
    mkdir {disk}/run/ckpt-9_temp  # as a save killed mid-write leaves it
    mount -o remount,size=64m {disk}
    {finetune} >{out}/resume.out 2>{out}/resume.err; echo $? >{out}/resume.rc
    cp -r {disk}/run {out}/run
  """
  full = subprocess.Popen(["unshare", "-Urm", "sh", "-c", script],
                          env=_env())
  with whole_err:
    assert whole.wait(timeout=600) == 0, (
        tmp_path / "whole.err").read_text()[-1000:]

  # Meanwhile: the uninterrupted run, resumed from another --init_dir of
  # the same config, is refused (it used to be ignored) and left as it was.
  other = tmp_path / "other_init"
  shutil.copytree(init_dir, other)
  refused = subprocess.run(
      _finetune(other, data, tmp_path / "whole", "--train_steps", 4),
      capture_output=True, text=True, env=_env())
  assert refused.returncode != 0
  assert _last_line(refused) == (
      f"error: --init_dir {os.path.realpath(other)}: --model_dir "
      f"{tmp_path / 'whole'} holds a run started with --init_dir "
      f"{os.path.realpath(init_dir)}, which a resume keeps; give the same, "
      "or choose another --model_dir")
  assert tf.train.latest_checkpoint(str(tmp_path / "whole")).endswith(
      "ckpt-3")
  assert full.wait(timeout=600) == 0

  def read(name):
    return (out / name).read_text()
  assert read("full.rc").strip() != "0"
  assert read("full.err").strip().splitlines()[-1] == (
      f"error: {disk}/run/ckpt-2: cannot write the checkpoint (No space "
      "left on device); removed its partial files; the run resumes from "
      "ckpt-1")
  assert "Traceback" not in read("full.err")
  assert not [n for n in read("full.ls").split() if n.startswith("ckpt-2")]
  assert read("export.rc").strip() != "0"
  assert read("export.err").strip().splitlines()[-1] == (
      f"error: {small}/m: cannot write the model (No space left on device); "
      "nothing was written")
  assert read("export.ls").split() == [".", ".."]

  assert read("resume.rc").strip() == "0", read("resume.err")[-1000:]
  assert "resumed from" in read("resume.out")
  assert not (out / "run" / "ckpt-9_temp").exists()
  history = [json.loads(line) for line in
             (out / "run" / "history.jsonl").read_text().splitlines()]
  reference = [json.loads(line) for line in
               (tmp_path / "whole" / "history.jsonl").read_text()
               .splitlines()]
  assert [r["step"] for r in history] == [1, 2, 3]
  np.testing.assert_allclose([r["loss"] for r in history],
                             [r["loss"] for r in reference], rtol=1e-6)
  ours, theirs = _weights(out / "run"), _weights(tmp_path / "whole")
  assert ours.keys() == theirs.keys()
  for name in ours:
    np.testing.assert_allclose(ours[name], theirs[name], atol=1e-6,
                               err_msg=name)
