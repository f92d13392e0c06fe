"""experiments.papers.plateau: the held-out slice, the doubling rule, the command."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from experiments.papers import plateau

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _squad(n):
  return {"version": "1.1", "data": [
      {"title": f"a{i}", "paragraphs": [{"context": f"word{i} here", "qas": [
          {"id": f"q{i}", "question": "which?", "answers": [
              {"text": f"word{i}", "answer_start": 0}]}]}]}
      for i in range(n)]}


def test_squad_slice_is_held_out_of_train_and_fixed_by_the_seed(tmp_path):
  source = tmp_path / "qa"
  source.mkdir()
  with gzip.open(source / "train.json.gz", "wt") as f:
    json.dump(_squad(20), f)
  counts = plateau.split_heldout("squad", str(source), 5, 7, str(tmp_path / "a"))
  plateau.split_heldout("squad", str(source), 5, 7, str(tmp_path / "b"))
  assert counts == (15, 5)
  ids = {split: [a["title"] for a in json.loads(
      (tmp_path / "a" / f"{split}.json").read_text())["data"]]
         for split in ("train", "dev")}
  assert len(ids["dev"]) == 5 and not set(ids["dev"]) & set(ids["train"])
  assert sorted(ids["dev"] + ids["train"]) == sorted(f"a{i}" for i in range(20))
  assert (tmp_path / "a" / "dev.json").read_text() == (
      tmp_path / "b" / "dev.json").read_text()
  other = plateau.split_heldout("squad", str(source), 5, 8, str(tmp_path / "c"))
  assert other == counts and (tmp_path / "c" / "dev.json").read_text() != (
      tmp_path / "a" / "dev.json").read_text()


def test_spam_slice_keeps_the_header_and_every_row_once(tmp_path):
  source = tmp_path / "spam"
  source.mkdir()
  rows = [f"text {i}\t{i % 2}\n" for i in range(30)]
  (source / "train.tsv").write_text("sentence\tlabel\n" + "".join(rows))
  assert plateau.split_heldout("spam", str(source), 6, 7,
                               str(tmp_path / "out")) == (24, 6)
  train, dev = ((tmp_path / "out" / f"{s}.tsv").read_text().splitlines(True)
                for s in ("train", "dev"))
  assert train[0] == dev[0] == "sentence\tlabel\n"
  assert sorted(train[1:] + dev[1:]) == sorted(rows) and len(dev) == 7


def test_a_slice_as_large_as_train_is_refused(tmp_path):
  source = tmp_path / "spam"
  source.mkdir()
  (source / "train.tsv").write_text("sentence\tlabel\na\t0\nb\t1\n")
  with pytest.raises(ValueError, match="--heldout 2: .*train.tsv has 2"):
    plateau.split_heldout("spam", str(source), 2, 7, str(tmp_path / "out"))


def test_the_curve_runs_until_a_doubling_gains_too_little(tmp_path,
                                                          monkeypatch):
  """Scripted scores 50, 60, 60.3, 61: the third point gains 0.3 < 0.5, so
  there is no fourth run and the teacher is the 800-step run."""
  source = tmp_path / "spam"
  source.mkdir()
  (source / "train.tsv").write_text("sentence\tlabel\n" + "".join(
      f"t{i}\t{i % 2}\n" for i in range(20)))
  scores = {200: 0.50, 400: 0.60, 800: 0.603, 1600: 0.61}
  ran = []

  def fake_finetune(options, data_dir, steps, model_dir):
    ran.append(steps)
    assert sorted(os.listdir(data_dir)) == ["counts.json", "dev.tsv",
                                            "train.tsv"]
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "eval_results.json"), "w") as f:
      json.dump({"accuracy": scores[steps]}, f)

  monkeypatch.setattr(plateau, "_finetune", fake_finetune)
  options = plateau.PlateauOptions(
      task="spam", data_dir=str(source), init_dir="unused",
      model_dir=str(tmp_path / "teacher"), heldout=4, first_steps=200,
      max_steps=6400)
  curve, run_dir = plateau.curve_runs(options)
  assert ran == [200, 400, 800]
  assert curve == [(200, 50.0), (400, 60.0), (800, pytest.approx(60.3))]
  assert run_dir.endswith("steps_800")
  # A second call finds every point scored and trains nothing.
  assert plateau.curve_runs(options)[0] == curve and ran == [200, 400, 800]


def test_a_folder_of_the_users_is_never_written_into(tmp_path):
  """A --model_dir that holds files and no curve/ of an earlier run is
  refused before any work, and left as it was."""
  init = tmp_path / "init"
  init.mkdir()
  (init / "config.json").write_text("{}")
  (tmp_path / "data").mkdir()
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("keep")
  result = subprocess.run(
      [sys.executable, "-m", "experiments.papers.plateau", "--data_dir",
       str(tmp_path / "data"), "--init_dir", str(init), "--model_dir",
       str(mine)], capture_output=True, text=True, cwd=REPO)
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --model_dir {mine}: holds notes.txt and no curve/ of an "
      "earlier plateau run; choose an empty or new directory")
  assert sorted(os.listdir(mine)) == ["notes.txt"]


@pytest.mark.parametrize("flags, named", [
    (["--first_steps", "0"], "--first_steps"),
    (["--max_steps", "100"], "--max_steps"),
    (["--min_gain", "0"], "--min_gain"),
    (["--min_gain", "nan"], "--min_gain nan"),
    (["--learning_rate", "0"], "--learning_rate"),
    (["--data_dir", "/nonexistent"], "--data_dir")])
def test_bad_flags_are_refused_in_one_line_before_any_work(tmp_path, flags,
                                                           named):
  init = tmp_path / "init"
  init.mkdir()
  (init / "config.json").write_text("{}")
  (tmp_path / "data").mkdir()
  base = {"--data_dir": str(tmp_path / "data"), "--init_dir": str(init),
          "--model_dir": str(tmp_path / "out")}
  base.update(dict(zip(flags[::2], flags[1::2])))
  result = subprocess.run(
      [sys.executable, "-m", "experiments.papers.plateau",
       *[x for kv in base.items() for x in kv]],
      capture_output=True, text=True, cwd=REPO)
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"error: {named}"), last
  assert not (tmp_path / "out").exists()
