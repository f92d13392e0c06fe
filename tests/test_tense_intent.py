"""The Brown task's learnable intent (experiments.papers.tense_intent) and how
mixed_vocab_student reads it against the majority class."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from experiments.papers.tense_intent import relabel, tense
from tfmodels.data.tagging import read_conll

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("tags, expected", [
    (["pps", "vbd", "at", "nn", "."], "past"),            # he said the word
    (["pps", "bedz", "jj", "."], "past"),                 # it was late
    (["nns", "vb", "rb", "."], "present"),                # dogs run fast
    (["pps", "bez*", "jj"], "present"),                   # it isn't (negated)
    (["ppss+md", "vb", "."], "modal"),                    # I'll go
    (["to", "vb", ",", "pps", "vbd"], "past"),            # to go, he went
    (["to", "be", "jj", ",", "ppss", "ber"], "present"),  # to be fair, we are
    (["nn-hl", "in-hl", "nns-hl"], "none"),               # a headline
    (["vbd-hl", "nns"], "past"),                          # headline suffix
    (["fw-vbd", "nn"], "none"),                           # a foreign word
])
def test_tense_is_the_first_finite_verbs(tags, expected):
  assert tense(tags) == expected


def test_relabel_changes_only_the_label_lines(tmp_path):
  source = tmp_path / "in.conll"
  source.write_text("# label = fiction\nHe\tpps\nran\tvbd\n.\t.\n\n"
                    "# label = press\nWe\tppss\nwill\tmd\nsee\tvb\n\n")
  counts = relabel(str(source), str(tmp_path / "out.conll.gz"))
  assert counts == {"past": 1, "modal": 1}
  before, after = (read_conll(str(p)) for p in (source,
                                                tmp_path / "out.conll.gz"))
  assert [(s.words, s.tags) for s in after] == [(s.words, s.tags)
                                                for s in before]
  assert [s.label for s in after] == ["past", "modal"]


def test_the_command_relabels_every_split_and_refuses_a_missing_one(tmp_path):
  data = tmp_path / "brown"
  data.mkdir()
  for split in ("train", "dev", "test"):
    with gzip.open(data / f"{split}.conll.gz", "wt") as f:
      f.write("# label = news\nIt\tpps\nis\tbez\n\n# label = news\n"
              "It\tpps\nwas\tbedz\n\n# label = news\nThey\tppss\nwent\tvbd\n\n")
  run = lambda *a: subprocess.run(
      [sys.executable, "-m", "experiments.papers.tense_intent", *a],
      capture_output=True, text=True, cwd=REPO)
  result = run("--data_dir", str(data), "--output_dir", str(tmp_path / "out"))
  assert result.returncode == 0, result.stderr[-2000:]
  labels = json.loads((tmp_path / "out" / "labels.json").read_text())
  assert labels == {s: {"present": 1, "past": 2}
                    for s in ("train", "dev", "test")}
  assert "train: past 66.7%, present 33.3%" in result.stdout
  # Its own output is replaced whole; a folder of the user's is refused.
  again = run("--data_dir", str(data), "--output_dir", str(tmp_path / "out"))
  assert again.returncode == 0, again.stderr[-2000:]
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("keep")
  refused = run("--data_dir", str(data), "--output_dir", str(mine))
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1].startswith(
      f"error: --output_dir {mine}: was not written by tense_intent")
  assert sorted(os.listdir(mine)) == ["notes.txt"]
  os.remove(data / "test.conll.gz")
  result = run("--data_dir", str(data), "--output_dir", str(tmp_path / "b"))
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --data_dir {data}: no test.conll.gz")
  assert not (tmp_path / "b").exists()


_REPORT = """
import json, os, sys
import experiments.papers.mixed_vocab_student as mv
out = sys.argv[1]
layout = mv.Layout(out)
steps = mv.build_steps(layout, mv.SCALES["tiny"],
                       {"teacher": "t.json", "student": "s.json"})
os.makedirs(layout.task_data())
with open(os.path.join(layout.task_data(), "labels.json"), "w") as f:
  json.dump({"train": {"past": 6, "present": 4},
             "dev": {"past": 1, "present": 3},
             "test": {"past": 2, "present": 3}}, f)
for model, accuracy in (("teacher", 0.9), ("student", 0.7)):
  os.makedirs(layout.score(f"test_{model}"))
  with open(os.path.join(layout.score(f"test_{model}"), "scores.json"),
            "w") as f:
    json.dump({"intent_accuracy": accuracy, "slot_f1": 0.8}, f)
data = mv.collect(layout, mv.SCALES["tiny"], "snips_l6_h192", "cmd",
                  ("teacher", "student", "nokd"))
print(json.dumps([[s.name for s in steps], data["rows"], mv.markdown(data)]))
"""


def test_rows_read_intent_against_the_train_majority(tmp_path):
  """The intent data is the first step and what every task step reads; the
  teacher is fine-tuned in its own vocabulary; each row has its intent
  accuracy and the majority class's on test (train's commonest label)."""
  result = subprocess.run([sys.executable, "-c", _REPORT, str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  names, rows, table = json.loads(result.stdout.splitlines()[-1])
  assert names[0] == "data_intent"
  assert {"teacher", "finetune_teacher", "test_teacher", "carve",
          "finetune_carved", "test_carved"} <= set(names)
  assert "mlm_teacher" not in names and "mlm_carve" not in names
  # The carved row is cut from the fine-tuned teacher, then learns from it.
  assert names.index("finetune_teacher") < names.index("carve") < (
      names.index("finetune_carved"))
  rows = {r["name"]: r for r in rows}
  assert rows["teacher"]["intent_majority_accuracy"] == pytest.approx(0.4)
  assert rows["teacher"]["intent_accuracy"] == 0.9
  assert rows["nokd"]["intent_accuracy"] is None
  assert "(always answering train's commonest tense: 40.0%): teacher " \
         "+50.0 points, student +30.0 points, nokd n/a" in table
