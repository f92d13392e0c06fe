"""experiments.papers.lexical_probe (the command and its functions): the word a
table alone picks, on hand-built tables whose right answer is known."""

import json
import subprocess
import sys

from absl import flags
import numpy as np
import pytest

from conftest import REPO, write_lines
from experiments.papers.lexical_probe import (ProbeOptions, define_command_flags,
                                       probe, read_questions, run_probe)
from tfmodels.command_options import from_flags, with_defaults
from tfmodels.tokenization import SPECIAL_TOKENS, WordPieceTokenizer

WORDS = ["large", "animal", "small", "feline", "elephant", "kitten", "dog",
         "barked", "sat", "slept", "ran", "cat"]
QUESTIONS = [("large animal", "The elephant sat. A cat ran.", "elephant"),
             ("small feline", "The dog barked. The kitten slept.", "kitten")]


def _squad(questions):
  paragraphs = [{"context": c, "qas": [{
      "id": f"wn-{i}", "question": f"Which word means: {d}?",
      "answers": [{"text": a, "answer_start": c.index(a)}]}]}
                for i, (d, c, a) in enumerate(questions)]
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


@pytest.fixture()
def vocab(tmp_path):
  return write_lines(tmp_path / "vocab.txt", list(SPECIAL_TOKENS) + WORDS)


def _table(vocab_file, rows=None, meanings=()):
  """One-hot rows, except each word of `meanings` = the sum of others."""
  tokenizer = WordPieceTokenizer(vocab_file)
  table = np.eye(rows or len(tokenizer.vocab))
  for word, parts in meanings:
    table[tokenizer.token_to_id[word]] = sum(
        table[tokenizer.token_to_id[p]] for p in parts)
  return tokenizer, table


def test_picks_the_word_whose_vector_matches_the_definition(vocab):
  tokenizer, table = _table(vocab, meanings=[
      ("elephant", ("large", "animal")), ("kitten", ("small", "feline"))])
  assert probe(table, tokenizer, QUESTIONS) == {
      "correct": 2, "total": 2, "exact_match": 100.0}
  # Each definition now matches a distractor of its context instead.
  tokenizer, table = _table(vocab, meanings=[
      ("cat", ("large", "animal")), ("dog", ("small", "feline"))])
  assert probe(table, tokenizer, QUESTIONS)["correct"] == 0


def _model_dir(vocab, directory, files=None):
  """A tiny_bert model whose table answers QUESTIONS with `vocab`."""
  from tfmodels.checkpoints.model_dir import (Head, build_model, encoder_of,
                                              save_model_dir)
  from tfmodels.configs import load_config
  config = load_config("tiny_bert")
  _, table = _table(vocab, rows=config.vocab_size, meanings=[
      ("elephant", ("large", "animal")), ("kitten", ("small", "feline"))])
  table = table[:, :config.hidden_size]  # 17 words fit in 32 columns
  model = build_model(config, Head("encoder"))
  encoder_of(model).get_layer("embeddings").word_embeddings.embeddings.assign(
      table.astype(np.float32))
  save_model_dir(model, config, Head("encoder"), str(directory), files=files)
  return str(directory)


def _data(directory, questions=QUESTIONS):
  data = directory / "qa" / "dev.json"
  data.parent.mkdir(exist_ok=True)
  data.write_text(json.dumps(_squad(questions)))
  return data


def test_command_reads_a_model_dir_and_refuses_other_questions(vocab,
                                                               tmp_path):
  _model_dir(vocab, tmp_path / "model")
  data = _data(tmp_path)
  assert [q[0] for q in read_questions(str(data))] == [
      "large animal", "small feline"]

  command = [sys.executable, "-m", "experiments.papers.lexical_probe",
             "--model_dir", str(tmp_path / "model"), "--data_dir",
             str(data.parent), "--vocab_file", vocab]
  run = subprocess.run(command + ["--output", str(tmp_path / "out.json")],
                       capture_output=True, text=True, cwd=REPO)
  assert run.returncode == 0, run.stderr
  assert "answers 2 of 2 questions exactly (100.0%)" in run.stdout
  assert json.loads((tmp_path / "out.json").read_text())["correct"] == 2
  # An existing --output is replaced only with --overwrite.
  (tmp_path / "out.json").write_text("an earlier run's")
  run = subprocess.run(command + ["--output", str(tmp_path / "out.json")],
                       capture_output=True, text=True, cwd=REPO)
  assert run.returncode == 1 and run.stdout == ""
  assert run.stderr.strip().splitlines()[-1] == (
      f"error: --output {tmp_path}/out.json: exists (pass --overwrite)")
  assert (tmp_path / "out.json").read_text() == "an earlier run's"
  run = subprocess.run(command + ["--output", str(tmp_path / "out.json"),
                                  "--overwrite"],
                       capture_output=True, text=True, cwd=REPO)
  assert run.returncode == 0, run.stderr
  assert json.loads((tmp_path / "out.json").read_text())["correct"] == 2

  blocker = tmp_path / "file"
  blocker.write_text("")
  run = subprocess.run(command + ["--output", str(blocker / "out.json")],
                       capture_output=True, text=True, cwd=REPO)
  assert run.returncode == 1
  assert run.stderr.strip().splitlines()[-1] == (
      f"error: --output {blocker}/out.json: {blocker} is not a directory")

  other = _squad(QUESTIONS)
  other["data"][0]["paragraphs"][1]["qas"][0]["question"] = "Who barked?"
  data.write_text(json.dumps(other))
  run = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
  assert run.returncode == 1
  assert run.stderr.strip().splitlines()[-1] == (
      f"error: {data}: question wn-1 is not a WordNet QA question "
      "('Which word means: '...)")


def test_command_uses_the_runs_vocabulary_and_refuses_another(vocab,
                                                              tmp_path):
  """A wrong vocabulary of the same size scored with exit 0."""
  from tfmodels.vocab_record import record_of_file, with_record
  spec = with_record({"task": "squad", "max_seq_length": 16,
                      "vocab_file": vocab}, WordPieceTokenizer(vocab).vocab)
  run = _model_dir(vocab, tmp_path / "run",
                   files={"task.json": json.dumps(spec)})
  data = _data(tmp_path)
  command = [sys.executable, "-m", "experiments.papers.lexical_probe",
             "--model_dir", run, "--data_dir", str(data.parent)]
  # No --vocab_file: the run's own (the shipped default would not fit).
  result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
  assert result.returncode == 0, result.stderr
  assert "answers 2 of 2 questions exactly (100.0%)" in result.stdout

  swapped = write_lines(tmp_path / "swapped.txt", list(SPECIAL_TOKENS) + [
      w if w not in ("elephant", "cat") else
      {"elephant": "cat", "cat": "elephant"}[w] for w in WORDS])
  # Refused after the output's checks: the folders its lock made for a
  # new --output go with it.
  result = subprocess.run(command + ["--vocab_file", swapped, "--output",
                                     str(tmp_path / "new" / "o.json")],
                          capture_output=True, text=True, cwd=REPO)
  assert result.returncode == 1
  assert not (tmp_path / "new").exists()
  given, own = record_of_file(swapped), record_of_file(vocab)
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --vocab_file {swapped} ({given.size} tokens, sha256 "
      f"{given.sha256[:12]}) is not the vocabulary of --model_dir {run} "
      f"({own.size} tokens, sha256 {own.sha256[:12]})")
  assert result.stdout == ""


def test_an_empty_question_set_is_refused(tmp_path):
  """It printed "0 of 0 (0.0%)" with exit 0; the command turns this error
  into its one line, as for the other question above."""
  data = _data(tmp_path, [])
  with pytest.raises(ValueError, match=f"^{data}: no questions to probe$"):
    read_questions(str(data))


def test_the_options_are_the_flags_and_importing_defines_none():
  """Importing the module (as this test does) defines no flags, so it
  cannot clash with another command's; a bare command line gives the
  options' defaults, and run_probe takes them without any flags."""
  assert not flags.FLAGS.flags_by_module_dict().get(
      "experiments.papers.lexical_probe")
  values = flags.FlagValues()
  define_command_flags(values)
  values(["lexical_probe"])
  assert from_flags(ProbeOptions, values) == with_defaults(ProbeOptions)
  with pytest.raises(SystemExit, match="^error: --model_dir is required$"):
    run_probe(ProbeOptions())


def test_model_checkpoint_prefix_is_the_model_directorys():
  """lexical_probe names it without importing TensorFlow."""
  from experiments.papers.lexical_probe import MODEL_CHECKPOINT
  from tfmodels.checkpoints.model_dir import CHECKPOINT_PREFIX
  assert MODEL_CHECKPOINT == CHECKPOINT_PREFIX


def _probe(*args):
  return subprocess.run([sys.executable, "-m", "experiments.papers.lexical_probe",
                         *map(str, args)], capture_output=True, text=True,
                        cwd=REPO)


def _snapshot(top):
  """{relative path: bytes, or the link's target} of everything under
  `top`."""
  found = {}
  for path in sorted(top.rglob("*")):
    key = str(path.relative_to(top))
    found[key] = (f"-> {path.readlink()}" if path.is_symlink() else
                  path.read_bytes() if path.is_file() else "dir")
  return found


def test_output_is_refused_before_any_work(tmp_path):
  """--output onto a folder or a path it cannot write failed with a
  traceback after the probe; onto a file it replaced it silently (no
  --overwrite). Each case is now one line naming --output, before the
  model loads (the model directory here holds no model: loading it would
  fail with another message), and leaves every file as it was."""
  model = tmp_path / "model"
  model.mkdir()
  (model / "config.json").write_text("{}")
  (tmp_path / "folder").mkdir()
  (tmp_path / "folder" / "mine.txt").write_text("the user's")
  (tmp_path / "kept.json").write_text("the user's figures")
  (tmp_path / "link.json").symlink_to(tmp_path / "kept.json")
  (tmp_path / "afile").write_text("not a directory")
  vocab = write_lines(tmp_path / "vocab.txt", list(SPECIAL_TOKENS))
  before = _snapshot(tmp_path)
  common = ["--model_dir", model, "--vocab_file", vocab]
  cases = [
      (["--output", tmp_path / "folder"],
       f"--output {tmp_path}/folder: exists (pass --overwrite)"),
      (["--output", tmp_path / "folder", "--overwrite"],
       f"--output {tmp_path}/folder: is a directory; give the path of a "
       "file"),
      (["--output", tmp_path / "kept.json"],
       f"--output {tmp_path}/kept.json: exists (pass --overwrite)"),
      (["--output", tmp_path / "link.json", "--overwrite"],
       f"--output {tmp_path}/link.json: is a symbolic link; refusing to "
       "write through it (give the real path)"),
      (["--output", model / "config.json", "--overwrite"],
       f"--output {model}/config.json: would replace --model_dir "
       f"{model}/config.json, this command's input; choose another "
       "--output"),
      (["--output", vocab, "--overwrite"],
       f"--output {vocab}: would replace --vocab_file {vocab}, this "
       "command's input; choose another --output"),
      (["--output", tmp_path / "afile" / "out.json"],
       f"--output {tmp_path}/afile/out.json: {tmp_path}/afile is not a "
       "directory"),
      # /proc takes no new file (as root: found when the lock is made).
      (["--output", "/proc/probe.json"],
       "--output /proc/probe.json: cannot write there ("),
  ]
  for args, line in cases:
    run = _probe(*common, *args)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1, (args, run.stderr)
    assert lines[0] == f"error: {line}" or (
        line.endswith("(") and lines[0].startswith(f"error: {line}")), (
            args, lines)
    assert run.stdout == ""
    assert _snapshot(tmp_path) == before, args  # no lock, no file
