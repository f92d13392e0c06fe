"""The classifier app's Python twin and `experiments.apps.classifier_app` on a
tiny converted spam classifier: the twin is the interpreter on
convert_tflite's features with the metadata's labels, the command ships
the model with its vocab and labels, and the Task Library's
BertNLClassifier gives the twin's labels (when its venv exists)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fixtures.converters import tiny_models
from fixtures.task_library import task_library_python

TEXTS = 8


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """(float32 spam classifier .tflite at L = 64, its data directory)."""
  base = tmp_path_factory.getbasetemp()
  model_dir = tiny_models.trained_classifier(base)
  data = tiny_models.spam_data(base)

  def build(path):
    result = tiny_models.run_converter(
        "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
        "--vocab_file", tiny_models.VOCAB, "--max_seq_length",
        tiny_models.SEQ_LENGTH, "--output_dir", path, "--modes", "float32",
        "--name", "spam", "--num_compare", 4)
    assert result.returncode == 0, result.stderr[-3000:]
  out = tiny_models.cached(base, "classifier_app_tflite", build)
  return os.path.join(out, "spam_float32.tflite"), data


def _classifier_app(*args):
  return subprocess.run(
      [sys.executable, "-m", "experiments.apps.classifier_app", *map(str, args)],
      capture_output=True, text=True, env=tiny_models.env(),
      cwd=tiny_models.REPO)


def test_twin_is_the_interpreter_on_convert_tflites_features(converted):
  from ai_edge_litert.interpreter import Interpreter
  from android_bench.classifier_app import Classifier
  from converters.metadata import associated_file
  from tfmodels.data import glue
  from tfmodels.tokenization import WordPieceTokenizer
  model, data = converted
  classifier = Classifier(model)
  assert classifier.sequence_length == tiny_models.SEQ_LENGTH
  assert classifier.labels == ["0", "1"]
  assert associated_file(model, "labels.txt").decode().splitlines() == (
      classifier.labels)
  examples = glue.read_split("spam", data, "dev")[::10]
  long_text = " ".join(["offer"] * 500)  # cut to L - 2 pieces
  examples.append(glue.Example("long", long_text, None, "1"))
  features = glue.convert_examples(examples, WordPieceTokenizer(
      tiny_models.VOCAB), tiny_models.SEQ_LENGTH, ("0", "1"))
  assert features["input_mask"][-1].sum() == tiny_models.SEQ_LENGTH
  runner = Interpreter(model_path=model).get_signature_runner()
  for row, example in enumerate(examples):
    expected = runner(ids=features["input_ids"][row:row + 1],
                      mask=features["input_mask"][row:row + 1],
                      segment_ids=features["segment_ids"][row:row + 1]
                      )["probability"][0]
    label, probabilities = classifier.classify(example.text_a)
    assert list(probabilities) == ["0", "1"]
    np.testing.assert_allclose(list(probabilities.values()), expected,
                               atol=1e-6)
    assert sum(probabilities.values()) == pytest.approx(1, abs=1e-5)
    assert label == ("0", "1")[int(np.argmax(expected))]


def test_command_ships_the_model_with_its_vocab_and_labels(converted,
                                                           tmp_path):
  model, data = converted
  out = tmp_path / "app_assets"
  out.mkdir()
  (out / "README.md").write_text("an old README about another model\n")
  result = _classifier_app("--model", model, "--data_dir", data, "--texts",
                           TEXTS, "--output_dir", out, "--teacher",
                           "my-org/my-teacher", "--run_report",
                           "/runs/REPORT.md")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (out / "classifier_model.tflite").read_bytes() == open(
      model, "rb").read()
  # README.md says what this file is: its card, the task, data and length.
  readme = (out / "README.md").read_text()
  card = json.loads(open(model.replace(".tflite", ".model_card.json")
                         ).read())
  for fact in (f"`classifier_model.tflite` is `spam_float32.tflite`, copied "
               f"from\n`{model}`", "`vocab.txt` and `labels.txt`",
               "(`spam`: a text in, one of 2 labels out: 0, 1)",
               f"`{data}`", f"Sequence length: {tiny_models.SEQ_LENGTH} (",
               f"`{card['source_checkpoint']}`", "(float32, classifier head)",
               f"accuracy {card['metric']['points']:.2f} for this file",
               card["sha256"], "Teacher: `my-org/my-teacher`",
               "report: `/runs/REPORT.md`", "BertNLClassifier"):
    assert fact in readme, fact
  for wrong in ("another model", "from the demo", "wordnet_qa", "-PqaModel"):
    assert wrong not in readme, wrong
  assert (out / "vocab.txt").read_bytes() == open(tiny_models.VOCAB,
                                                  "rb").read()
  assert (out / "labels.txt").read_bytes() == b"0\n1\n"
  answers = json.loads((out / "answers.json").read_text())
  assert answers["sequence_length"] == tiny_models.SEQ_LENGTH
  assert answers["task_library"] is None
  rows = answers["answers"]
  assert len(rows) == TEXTS
  assert {r["gold"] for r in rows} == {"0", "1"}  # spread over the split
  for r in rows:
    p = r["twin_probabilities"]
    assert r["twin_label"] == max(p, key=p.get)
    assert r["task_library_label"] is None
  assert answers["summary"] == {
      "texts": TEXTS, "twin_accuracy": pytest.approx(
          sum(r["twin_label"] == r["gold"] for r in rows) / TEXTS),
      "task_library_accuracy": None, "agree": None,
      "max_probability_diff": None}


def test_task_library_gives_the_twins_labels(converted, tmp_path):
  python = task_library_python()
  model, data = converted
  out = tmp_path / "app_assets"
  result = _classifier_app("--model", model, "--data_dir", data, "--texts",
                           TEXTS, "--output_dir", out,
                           "--task_library_python", python)
  assert result.returncode == 0, result.stderr[-3000:]
  answers = json.loads((out / "answers.json").read_text())
  assert answers["task_library"].endswith("BertNLClassifier")
  summary = answers["summary"]
  assert summary["texts"] == TEXTS and summary["agree"] == TEXTS
  # Both run the (dynamic-length) file at each text's own length, a text
  # longer than L cut to L - 2 pieces and its [SEP] (the twin's features,
  # the export's cut of the library's whole text).
  assert summary["max_probability_diff"] <= 1e-5
  assert summary["task_library_accuracy"] == summary["twin_accuracy"]
  for r in answers["answers"]:
    assert r["task_library_label"] == r["twin_label"]
    assert set(r["task_library_scores"]) == {"0", "1"}


def test_a_fixed_length_file_gives_the_twins_probabilities(
    converted, tmp_path, tmp_path_factory):
  """convert_tflite --nodynamic_length: BertNLClassifier pads each text to
  the file's L, as the twin does, so the two agree to float round-off."""
  python = task_library_python()
  model_dir = tiny_models.trained_classifier(tmp_path_factory.getbasetemp())
  _, data = converted
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--vocab_file", tiny_models.VOCAB, "--max_seq_length",
      tiny_models.SEQ_LENGTH, "--output_dir", tmp_path / "tflite", "--modes",
      "float32", "--name", "spam", "--num_compare", 4, "--nodynamic_length")
  assert result.returncode == 0, result.stderr[-3000:]
  out = tmp_path / "app_assets"
  model = tmp_path / "tflite" / "spam_float32.tflite"
  done = _classifier_app("--model", model, "--data_dir", data, "--texts",
                         TEXTS, "--output_dir", out,
                         "--task_library_python", python)
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((out / "answers.json").read_text())["summary"]
  assert summary["agree"] == TEXTS
  assert summary["max_probability_diff"] <= 1e-5


def test_task_library_script_refuses_a_bad_model_in_one_line(tmp_path):
  python = task_library_python()
  bad = tmp_path / "bad.tflite"
  bad.write_text("not a model")
  texts = tmp_path / "texts.json"
  texts.write_text('["hello"]')
  script = os.path.join(tiny_models.REPO, "android_bench", "classifier_app",
                        "task_library.py")
  result = subprocess.run([python, script, "--model", bad, "--texts", texts],
                          capture_output=True, text=True)
  assert result.returncode == 1 and result.stdout == ""
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"error: --model {bad}: the Task Library refused it")
  texts.write_text('{"text": "hello"}')
  result = subprocess.run([python, script, "--model", bad, "--texts", texts],
                          capture_output=True, text=True)
  assert result.returncode == 1
  assert result.stderr.strip() == (f"error: --texts {texts}: expected a "
                                   "JSON list of strings")


def test_a_file_that_is_no_model_is_refused_in_one_line(converted, tmp_path):
  _, data = converted
  bad = tmp_path / "model.tflite"
  bad.write_text("not a model")
  out = tmp_path / "app_assets"
  result = _classifier_app("--model", bad, "--data_dir", data,
                           "--output_dir", out)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  errors = [line for line in result.stderr.splitlines()
            if line.startswith("error:")]
  assert len(errors) == 1 and errors[0].startswith(
      f"error: --model {bad}: cannot load the model (")
  assert not out.exists()


def test_the_app_commands_refuse_bad_flags_in_one_line(tmp_path):
  """qa_app_check and classifier_app share their flag checks: each refusal
  is one line naming the flag, before anything is written."""
  from types import SimpleNamespace
  from experiments.apps.app_checks import check_app_flags
  model = tmp_path / "model.tflite"
  model.write_bytes(b"x")
  a_file = tmp_path / "a_file"
  a_file.write_text("")

  def refusal(**changes):
    options = SimpleNamespace(**{
        "model": str(model), "data_dir": str(tmp_path), "texts": 2,
        "task_library_python": None,
        "output_dir": str(tmp_path / "out"), **changes})
    with pytest.raises(SystemExit) as e:
      check_app_flags(options, ("model", "data_dir"), ("model",), "texts")
    return str(e.value)

  assert refusal(data_dir=None) == "error: --data_dir is required"
  assert refusal(model=str(tmp_path / "no.tflite")) == (
      f"error: --model {tmp_path}/no.tflite: no such file")
  assert refusal(texts=0) == "error: --texts must be >= 1"
  assert refusal(task_library_python=str(a_file)) == (
      f"error: --task_library_python {a_file}: not an executable (make "
      "setup makes .venv-task/bin/python)")
  assert refusal(output_dir=str(a_file)).startswith(
      f"error: --output_dir {a_file}")
  assert not (tmp_path / "out").exists()
