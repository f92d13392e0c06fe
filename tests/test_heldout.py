"""tfmodels.data.heldout: train without a slice, the slice, dev, for a
student scored as it trains (finetune --eval_split heldout)."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _heldout(*args):
  return subprocess.run([sys.executable, "-m", "tfmodels.data.heldout",
                         *map(str, args)], capture_output=True, text=True,
                        cwd=REPO)


def _sentences(n):
  return [f"# label = l{i % 2}\nword{i} NN\nthere RB" for i in range(n)]


def test_conll_sentences_are_held_out_whole_and_dev_is_copied(tmp_path):
  data = tmp_path / "intent"
  data.mkdir()
  (data / "train.conll").write_text("\n\n".join(_sentences(12)) + "\n")
  (data / "dev.conll").write_text("\n\n".join(_sentences(3)) + "\n")
  out = tmp_path / "out"
  done = _heldout("--task", "intent_slot", "--data_dir", data, "--examples",
                  4, "--output_dir", out)
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == f"{out}: 8 train, 4 held out (intent_slot)"
  blocks = {split: (out / f"{split}.conll").read_text().strip().split("\n\n")
            for split in ("train", "heldout")}
  assert (len(blocks["train"]), len(blocks["heldout"])) == (8, 4)
  assert sorted(blocks["train"] + blocks["heldout"]) == sorted(
      _sentences(12))
  assert (out / "dev.conll").read_text() == (data / "dev.conll").read_text()
  assert json.loads((out / "counts.json").read_text()) == {
      "train": 8, "heldout": 4}
  # The same seed holds out the same sentences.
  again = _heldout("--task", "intent_slot", "--data_dir", data, "--examples",
                   4, "--output_dir", tmp_path / "again")
  assert again.returncode == 0
  assert (tmp_path / "again" / "heldout.conll").read_text() == (
      out / "heldout.conll").read_text()


def test_spam_rows_keep_their_header_and_too_many_are_refused(tmp_path):
  data = tmp_path / "spam"
  data.mkdir()
  rows = [f"text {i}\t{i % 2}\n" for i in range(6)]
  (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(rows))
  (data / "dev.tsv").write_text("sentence\tlabel\nx\t0\n")
  out = tmp_path / "out"
  assert _heldout("--task", "spam", "--data_dir", data, "--examples", 2,
                  "--output_dir", out).returncode == 0
  train = (out / "train.tsv").read_text().splitlines(keepends=True)
  held = (out / "heldout.tsv").read_text().splitlines(keepends=True)
  assert train[0] == held[0] == "sentence\tlabel\n"
  assert sorted(train[1:] + held[1:]) == sorted(rows) and len(held) == 3
  refused = _heldout("--task", "spam", "--data_dir", data, "--examples", 6,
                     "--output_dir", tmp_path / "none")
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      f"error: --examples 6: {data}/train.tsv has 6 examples; hold out fewer")
  assert not (tmp_path / "none").exists()
  missing = _heldout("--task", "squad", "--data_dir", data, "--examples", 1,
                     "--output_dir", tmp_path / "none")
  assert missing.stderr.strip().splitlines()[-1] == (
      f"error: --data_dir {data}: no train.json")
