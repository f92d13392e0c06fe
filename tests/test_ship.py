"""experiments/ship/command.py end to end on tiny Hugging Face checkpoints written by
transformers (tests/fixtures/checkpoints/ship_qa, ship_classifier; the
classifier's tokenizer set to keep accents, every step then forced again
beside a user's file), and its refusals: a budget no split meets (one line, before any training), no
budget, a teacher whose head does not answer the data, a headless teacher
without --teacher_finetune_steps."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from android_bench.qa_app import SEQUENCE_LENGTH
from experiments.common.paths import TASK_LIBRARY_PYTHON
from experiments.ship.steps import (STEP_NAMES, Layout, Plan, build_steps,
                                    curve_lengths)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "checkpoints")
QA_TEACHER = os.path.join(FIXTURES, "ship_qa")
CLASSIFIER = os.path.join(FIXTURES, "ship_classifier")
# Small everything: numbers meaningless, every step real.
TINY = ("--train_max_seq_length", "64", "--student_steps", "3",
        "--student_heldout", "0",
        "--recover_steps", "2", "--calibration_examples", "16",
        "--num_runs", "3", "--min_secs", "0", "--app_examples", "2",
        "--qat_steps", "2",
        "--batch_size", "4", "--heads", "4,2", "--widths", "128,64",
        "--ranks", "none,32")


def _ship(*args, cwd=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, "-m", "experiments.ship", *args],
                        capture_output=True, text=True, env=env, cwd=cwd,
                        timeout=1800)


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
  """Slices of the shipped QA and spam sets (experiments.demo.data, run as
  its command: its flags would clash with other experiments' in this
  process)."""
  out = str(tmp_path_factory.mktemp("data"))
  subprocess.run([sys.executable, "-m", "experiments.demo.data",
                  "--output_dir", out, "--pretraining_documents", "2",
                  "--spam_rows", "32,16", "--qa_questions", "32,8"],
                 check=True, capture_output=True, timeout=600)
  return out


@pytest.fixture(scope="module")
def qa_data(slices):
  return os.path.join(slices, "wordnet_qa")


@pytest.fixture(scope="module")
def spam_data(slices):
  return os.path.join(slices, "spam")


def _check_task_library_answers(out, check):
  """The Task Library's answers against the twin's at the file's length:
  every answer the library found is the twin's. (This student trained 3
  steps: its logits at padding can fill the library's n-best, which leaves
  it no span in the passage; qa_app_check counts those as disagreeing.)"""
  from tfmodels.data.squad_metrics import normalize_answer
  answers = json.load(open(os.path.join(out, "app_assets",
                                        "answers.json")))["answers"]
  pairs = [(normalize_answer(a.get("fixed_answer", a["answer"])),
            normalize_answer(a["task_library_answer"])) for a in answers]
  assert all(twin == library for twin, library in pairs if library), pairs
  assert check["agree"] == sum(twin == library for twin, library in pairs)


def _summary(out):
  with open(Layout(out).summary) as f:
    return json.load(f)


def _check_summary(summary, out, metric):
  """The fields scripts rely on, each measured."""
  assert summary["metric"] == metric
  for side in ("teacher", "student"):
    for key in ("float", "int8", "params", "int8_mb"):
      assert isinstance(summary[side][key], (int, float)), (side, key)
  student = summary["student"]
  assert student["params"] < summary["teacher"]["params"]
  assert student["latency_ms"] > 0 and student["threads"] == 1
  assert student["target"] == "host"
  # The shipped files take any length: timed at each of curve_lengths,
  # the headline time being the app's length's.
  for side in (student, summary["teacher"]):
    by_length = dict(side["int8_latency_by_length"])
    assert sorted(by_length) == curve_lengths(student["max_seq_length"])
    assert by_length[student["max_seq_length"]] == side["latency_ms"]
  assert os.path.isfile(summary["assets"]["tflite"])
  rows = summary["search"]["rows"]
  assert len(rows) == 8 and sum(r["chosen"] for r in rows) == 1
  chosen, = [r for r in rows if r["chosen"]]
  assert student["split"]["heads"] == chosen["heads"]
  assert student["shape"]["heads"] == chosen["heads"]
  assert student["shape"]["intermediate_size"] == chosen[
      "intermediate_size"]
  assert student["shape"]["normalization"] == "no_norm"
  qat = os.path.isdir(Layout(out).tflite("student_qat"))
  assert qat == ("qat_int8" in student)  # QAT ran: both int8 scores shown
  if student["qat"]:  # its file ships only if it scores higher
    assert student["int8"] == student["qat_int8"] > student[
        "post_training_int8"]
  with open(Layout(out).report) as f:
    report = f.read()
  assert "## The split search" in report and "| all steps" in report
  assert "Int8 latency against the sequence length" in report


def _check_app_readme(out, summary, teacher, data, task):
  """app_assets/README.md names what this run shipped: the file, its
  card, the user's teacher, task, data and length; not the demo's."""
  with open(os.path.join(Layout(out).app, "README.md")) as f:
    readme = f.read()
  def read(path):
    with open(path, "rb") as f:
      return f.read()
  copy = read(summary["assets"]["tflite"])  # the app's copy
  shipped, = [path for path in (Layout(out).tflite_file(name, "int8")
                                for name in ("student", "student_qat"))
              if os.path.isfile(path) and read(path) == copy]
  for fact in (f"is `{os.path.basename(shipped)}`, copied from\n`{shipped}`",
               f"Teacher: `{os.path.abspath(teacher)}`", f"`{task}`",
               f"`{os.path.abspath(data)}`",
               f"Sequence length: {summary['student']['max_seq_length']} (",
               "Model card: `" + shipped.replace(".tflite", ".model_card.json"),
               f"report: `{os.path.abspath(Layout(out).report)}`"):
    assert fact in readme, fact
  wrong = ["from the demo", "MobileBERT student"] + (
      [] if "wordnet_qa" in data else ["wordnet_qa"])
  for words in wrong:
    assert words not in readme, words


def test_a_hugging_face_qa_teacher_ships_to_the_app(qa_data, tmp_path):
  out = str(tmp_path / "ship")
  # The student trains on train without 4 articles, scored on them.
  done = _ship("--teacher", QA_TEACHER, "--data_dir", qa_data,
               "--output_dir", out, "--target_params", "0.6",
               *TINY, "--student_heldout", "4")
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  summary = _summary(out)
  _check_summary(summary, out, "f1")
  student = summary["student"]
  plateau = student["plateau"]
  assert [p["steps"] for p in plateau["points"]] == [3]
  assert plateau["stopped"] == "the step cap (3 steps) was reached"
  assert "## The student's training" in open(
      os.path.join(out, "REPORT.md")).read()
  assert student["max_seq_length"] == SEQUENCE_LENGTH  # the Task Library's
  assert student["budget"] == {"target_params": 0.6}
  assert student["within_budget"] == {"params": True}
  assert student["params"] <= 0.6 * summary["search"]["teacher_params"]
  check = summary["assets"]["check"]
  assert check["asked"] == 2
  if os.path.exists(TASK_LIBRARY_PYTHON):
    _check_task_library_answers(out, check)
  _check_app_readme(out, summary, QA_TEACHER, qa_data, "squad")
  # A second run finds every step done.
  again = _ship("--teacher", QA_TEACHER, "--data_dir", qa_data,
                "--output_dir", out, "--target_params", "0.6",
                *TINY, "--student_heldout", "4")
  assert again.returncode == 0, again.stderr[-2000:]
  ran = [l for l in again.stdout.splitlines() if "finished in" in l
         and l.startswith("[")]
  assert not ran, ran
  # Other settings into the same directory: refused in one line.
  other = _ship("--teacher", QA_TEACHER, "--data_dir", qa_data,
                "--output_dir", out, "--target_params", "0.5",
                *TINY, "--student_heldout", "4")
  assert other.returncode == 1
  assert other.stderr.strip().splitlines()[-1] == (
      f"error: --output_dir {out} holds a ship run with other settings "
      "(budget); delete it or use another --output_dir")


# Lines whose pieces differ with the tokenizer's settings.
LINES = ["Résumé café 東京", "Über NAÏVE naïve!", "北京大学 and ΟΔΥΣΣΕΥΣ",
         "Привет, мир: e\u0301 re\u0301sume\u0301", "emoji 😀 مرحبا"]


def _accented_teacher(tmp_path):
  """The classifier teacher with a tokenizer that keeps accents and does
  not isolate CJK (tokenizer_config.json and tokenizer.json alike)."""
  teacher = tmp_path / "teacher"
  shutil.copytree(CLASSIFIER, teacher)
  for name, fields in (("tokenizer_config.json", {
      "strip_accents": False, "tokenize_chinese_chars": False}),
                       ("tokenizer.json", {"normalizer": dict(
                           json.loads((teacher / "tokenizer.json").read_text(
                           ))["normalizer"], strip_accents=False,
                           handle_chinese_chars=False)})):
    values = json.loads((teacher / name).read_text())
    values.update(fields)
    (teacher / name).write_text(json.dumps(values))
  return str(teacher)


def _check_tokenizer(teacher, out, shipped):
  """The shipped file carries the teacher's settings; the app's twin and
  every step's tokenizer give the teacher's own tokenizer's ids."""
  from tokenizers import Tokenizer
  from android_bench.qa_app.answering import tokenizer_for
  from converters.metadata import SETTINGS_NAME, associated_file
  from tfmodels.tokenization import TokenizerSettings, WordPieceTokenizer
  reference = Tokenizer.from_file(os.path.join(teacher, "tokenizer.json"))
  expected = [reference.encode(l, add_special_tokens=False).ids
              for l in LINES]
  assert json.loads(associated_file(shipped, SETTINGS_NAME)) == {
      "do_lower_case": True, "strip_accents": False,
      "tokenize_chinese_chars": False}
  steps = WordPieceTokenizer(os.path.join(Layout(out).imported(),
                                          "vocab.txt"))
  for tokenizer in (tokenizer_for(shipped), steps):
    assert [tokenizer.encode(l).ids for l in LINES] == expected
    assert tokenizer.ids_batch(LINES) == expected
  defaults = WordPieceTokenizer(os.path.join(teacher, "vocab.txt"),
                                settings=TokenizerSettings())
  assert [defaults.encode(l).ids for l in LINES] != expected


def _snapshot(root):
  found = {}
  for directory, _, files in os.walk(root):
    for name in files:
      with open(os.path.join(directory, name), "rb") as f:
        found[os.path.relpath(os.path.join(directory, name), root)] = f.read()
  return found


def test_a_hugging_face_classifier_ships_with_its_labels(spam_data,
                                                         tmp_path):
  """... with its tokenizer's settings, and every step forced again beside
  a user's file leaves the file as it was."""
  out = str(tmp_path / "ship")
  teacher = _accented_teacher(tmp_path)
  args = ("--teacher", teacher, "--data_dir", spam_data, "--output_dir", out,
          "--target_mb", "100", "--target_params", "0.6", *TINY)
  done = _ship(*args)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  summary = _summary(out)
  _check_summary(summary, out, "accuracy")
  assert summary["task"] == "spam"
  assert summary["student"]["within_budget"] == {"int8_mb": True,
                                                 "params": True}
  from converters.metadata import associated_file
  labels = associated_file(summary["assets"]["tflite"], "labels.txt")
  assert labels.decode().split() == ["ham", "spam"]  # the teacher's id2label
  check = summary["assets"]["check"]
  assert check["asked"] == 2
  if os.path.exists(TASK_LIBRARY_PYTHON):
    assert check["agree"] == 2
  _check_tokenizer(teacher, out, summary["assets"]["tflite"])
  _check_app_readme(out, summary, teacher, spam_data, "spam")

  # A user's file in a step's folder: refused before any work, intact.
  mine = os.path.join(Layout(out).path("report"), "mine.txt")
  with open(mine, "w") as f:
    f.write("mine")
  before = _snapshot(out)
  forced = ("--force", ",".join(STEP_NAMES))
  again = _ship(*args, *forced)
  assert again.returncode == 1 and "Traceback" not in again.stderr
  assert again.stderr.strip().splitlines()[-1] == (
      f"error: --output_dir {out}: report/mine.txt sits in a step's folder "
      "but was not written by ship (a re-run replaces that folder); move it "
      "out, or choose another --output_dir")
  assert _snapshot(out) == before
  # Beside ship's outputs: every step runs again, the user's file stays.
  os.rename(mine, os.path.join(out, "mine.txt"))
  again = _ship(*args, *forced)
  assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
  ran = {l.split(":")[0].split("] ")[-1] for l in again.stdout.splitlines()
         if l.startswith("[") and "finished in" in l}
  assert ran >= set(STEP_NAMES) - {"teacher_finetune", "heldout",
                                    "arm64"} - (
      set() if os.path.isdir(Layout(out).tflite("student_qat"))
      else {"convert_student_qat"}), again.stdout[-3000:]
  with open(os.path.join(out, "mine.txt")) as f:
    assert f.read() == "mine"
  assert not os.path.exists(tmp_path / ".ship.lock")  # none left


def test_on_arm64_the_split_costs_at_most_half_the_teachers_instructions(
    qa_data, tmp_path):
  """--target arm64 --target_latency_share 0.5: the search counts every
  candidate's and the teacher's instructions on emulated arm64 beside its
  host ms and chooses within half the teacher's; the report says so, in
  instructions, and times the files on the host."""
  from android_bench.arm64 import instruction_counting
  counting, why = instruction_counting()
  if not counting:
    pytest.skip(f"no arm64 instruction counting here: {why}")
  out = str(tmp_path / "ship")
  done = _ship("--teacher", QA_TEACHER, "--data_dir", qa_data, "--output_dir",
               out, "--target", "arm64", "--target_latency_share", "0.5",
               *TINY, "--heads", "2,1")
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  summary = _summary(out)
  search, student = summary["search"], summary["student"]
  assert search["target"] == "arm64" and len(search["rows"]) == 8
  assert all(r["arm64_instructions"] > 0 and r["latency_ms"] > 0
             for r in search["rows"])
  arm64 = student["arm64_budget"]
  assert arm64["student"] <= 0.5 * arm64["teacher"]
  assert arm64["most"] == pytest.approx(0.5 * arm64["teacher"])
  assert student["within_budget"] == {"arm64_instructions": True}
  assert student["target"] == "host" and student["latency_ms"] > 0
  report = open(Layout(out).report).read()
  assert "Chosen on emulated arm64 (qemu-aarch64 -cpu cortex-a76" in report
  assert "| ms | arm64 instructions | score |" in report
  assert "timed on the host" in report


def test_a_budget_no_split_meets_is_refused_before_any_training(qa_data,
                                                                tmp_path):
  out = str(tmp_path / "ship")
  done = _ship("--teacher", QA_TEACHER, "--data_dir", qa_data,
               "--output_dir", out, "--target_latency_ms", "0.0001", *TINY)
  assert done.returncode == 1
  last = done.stderr.strip().splitlines()[-1]
  assert last.startswith("error: no candidate split meets 0.0001 ms: the "
                         "fastest, "), last
  assert "measured" in last and "(step search; its log: " in last
  layout = Layout(out)
  assert not os.path.exists(layout.carving)
  assert not os.path.exists(layout.student)


@pytest.mark.parametrize("args, message", [
    ((), "error: give a budget: --target_latency_ms, --target_latency_share, "
         "--target_params or --target_mb"),
    (("--target_params", "1.5"), "error: --target_params 1.5: a share of the "
     "teacher's, below 1"),
    (("--target_mb", "5", "--target", "adb"), "error: --target adb needs "
     "--benchmark_binary (LiteRT's Android benchmark_model)"),
    (("--target_mb", "5", "--force", "nothing"), "error: --force nothing: "
     "not a step (steps: teacher, teacher_finetune, search, convert_teacher, "
     "carve, heldout, student, convert_student, convert_student_qat, "
     "latency, app, arm64, report)"),
    (("--target_mb", "5", "--student_max_minutes", "-1"), "error: "
     "--student_max_minutes -1: give minutes, 0 or more"),
    (("--target_mb", "5", "--min_secs", "-1"), "error: --min_secs -1: give "
     "seconds, 0 or more"),
    (("--target_latency_ms", "5", "--target", "arm64"), "error: "
     "--target_latency_ms 5: emulated arm64 counts instructions, not "
     "milliseconds; give --target_latency_share (a share of the teacher's "
     "instructions)"),
    (("--target_latency_share", "0.5", "--target", "arm64"),
     "error: --target arm64: "),
])
def test_bad_flags_are_refused_in_one_line(args, message, spam_data,
                                           tmp_path, monkeypatch):
  out = tmp_path / "ship"
  # No arm64 root: the line says how to make one (qemu-user, the root).
  monkeypatch.setenv("ARM64_ROOT", str(tmp_path / "no_root"))
  done = _ship("--teacher", CLASSIFIER, "--data_dir", spam_data,
               "--output_dir", str(out), *args)
  if message.endswith(": "):
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(message) and "make arm64-root" in last, last
    message = last
  assert done.returncode == 1
  assert done.stderr.strip().splitlines()[-1] == message
  assert not out.exists()


def test_a_teacher_whose_head_does_not_answer_the_data_is_refused(
    qa_data, tmp_path):
  out = tmp_path / "ship"
  done = _ship("--teacher", CLASSIFIER, "--data_dir", qa_data,
               "--output_dir", str(out), "--target_mb", "5")
  assert done.returncode == 1
  assert done.stderr.strip().splitlines()[-1] == (
      f"error: --teacher {CLASSIFIER}: its head answers classification, but "
      f"--data_dir {qa_data} holds squad data")
  assert not out.exists()


def test_a_headless_teacher_is_fine_tuned_only_when_asked(qa_data, tmp_path):
  """Without --teacher_finetune_steps the first step refuses it in one
  line; with it the chain fine-tunes it before the search."""
  from experiments.ship.teacher import TeacherError, TeacherOptions, check_head
  from tfmodels.checkpoints.model_dir import Head
  from tfmodels.command_options import with_defaults

  class Task:
    def head(self):
      return Head("span")

  options = with_defaults(TeacherOptions, teacher="mini", task="squad",
                          data_dir=qa_data, output="x")
  with pytest.raises(TeacherError) as refused:
    check_head(options, Head("encoder"), Task())
  assert str(refused.value) == (
      "--teacher mini: has no task head (a sentence encoder); fine-tune it "
      "first with --teacher_finetune_steps N")
  check_head(options, Head("span"), Task())
  check_head(with_defaults(TeacherOptions, teacher="mini", task="squad",
                           data_dir=qa_data, output="x", encoder_only=True),
             Head("encoder"), Task())
  plan = Plan(teacher="mini", task="squad", data_dir=qa_data,
              budget={"target_mb": 5.0}, teacher_finetune_steps=7)
  layout = Layout(str(tmp_path))
  steps = {s.name: s for s in build_steps(plan, layout)}
  assert list(steps) == ["teacher", "teacher_finetune", "search"]
  assert "--encoder_only" in steps["teacher"].command
  finetune = steps["teacher_finetune"].command
  assert finetune[finetune.index("--train_steps") + 1] == "7"
  assert steps["search"].inputs == (layout.teacher(plan),)
  assert layout.teacher(plan) != layout.imported()


def test_the_app_step_tells_the_app_commands_what_the_readme_says(tmp_path):
  """The app step's command names the teacher, the run's report and (a
  classifier) the task, for app_assets/README.md."""
  layout = Layout(str(tmp_path))
  split = {"heads": 2, "intermediate_size": 64}
  for task, module in (("squad", "experiments.apps.qa_app_check"),
                       ("sst2", "experiments.apps.classifier_app")):
    plan = Plan(teacher="/users/teacher", task=task, data_dir="/users/data",
                budget={})
    app, = [s for s in build_steps(plan, layout, split, False, "student_qat")
            if s.name == "app"]
    command = app.command
    assert module in command
    flags = dict(zip(command, command[1:]))
    assert flags["--model"] == layout.tflite_file("student_qat", "int8")
    assert flags["--teacher"] == "/users/teacher"
    assert flags["--run_report"] == os.path.abspath(layout.report)
    assert flags.get("--task") == (None if task == "squad" else "sst2")
    assert "/users/data" in command


def test_the_arm64_step_joins_a_qa_chain_where_the_root_exists(tmp_path):
  """With an arm64 root a QA run checks its shipped int8 file and the
  float32 one there (after the app step, before the report); a classifier
  run, or a machine without the root, has no such step."""
  layout = Layout(str(tmp_path))
  split = {"heads": 2, "intermediate_size": 64}

  def names(task, root):
    plan = Plan(teacher="t", task=task, data_dir="d", budget={})
    steps = build_steps(plan, layout, split, False, "student", root)
    return {s.name: s for s in steps}
  qa = names("squad", "/roots/arm64")
  assert list(qa)[-3:] == ["app", "arm64", "report"]
  command = qa["arm64"].command
  assert command[command.index("--model") + 1] == ",".join(
      [layout.tflite_file("student", "int8"),
       layout.tflite_file("student", "float32")])
  assert command[command.index("--arm64_root") + 1] == "/roots/arm64"
  assert layout.arm64 in qa["report"].inputs
  assert "arm64" not in names("squad", None)
  assert "arm64" not in names("spam", "/roots/arm64")


def test_a_tf1_checkpoint_is_a_teacher_too(qa_data, tmp_path):
  """ship's first step takes a TF1 checkpoint (here a pre-trained one:
  refused in one line without --encoder_only, which ship passes when
  --teacher_finetune_steps is given)."""
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(t + "\n" for t in (
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
      + list("abcdefghijklmnopqrstuvwxyz0123456789.,?"))))
  teacher = os.path.join(FIXTURES, "bert_pretraining_tf1")

  def teacher_step(out, *args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.ship.teacher", "--teacher",
         teacher, "--task", "squad", "--data_dir", qa_data, "--vocab_file",
         str(vocab), "--max_seq_length", "32", "--output", str(out), *args],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))

  refused = teacher_step(tmp_path / "refused")
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      f"error: --teacher {teacher}: has no task head (a pre-trained "
      "encoder); fine-tune it first with --teacher_finetune_steps N")
  assert not (tmp_path / "refused").exists()
  done = teacher_step(tmp_path / "teacher", "--encoder_only")
  assert done.returncode == 0, done.stderr[-2000:]
  written = set(os.listdir(tmp_path / "teacher"))
  assert {"config.json", "head.json", "vocab.txt"} <= written
  assert "task.json" not in written  # fine-tuned next, by finetune
  assert (tmp_path / "teacher" / "vocab.txt").read_text() == vocab.read_text()


@pytest.fixture(scope="module")
def headless_teacher(tmp_path_factory):
  """ship_qa without its QA head, saved as a BertModel: a sentence
  encoder's directory."""
  from safetensors.numpy import load_file, save_file
  out = tmp_path_factory.mktemp("headless")
  for name in os.listdir(QA_TEACHER):
    if name not in ("model.safetensors", "config.json"):
      (out / name).write_bytes(open(os.path.join(QA_TEACHER, name),
                                    "rb").read())
  import numpy as np
  tensors = {k.removeprefix("bert."): v for k, v in load_file(
      os.path.join(QA_TEACHER, "model.safetensors")).items()
             if not k.startswith("qa_outputs")}
  rng = np.random.default_rng(0)  # a BertModel has a pooler
  tensors["pooler.dense.weight"] = rng.normal(0, 0.02, (64, 64)).astype(
      np.float32)
  tensors["pooler.dense.bias"] = np.zeros(64, np.float32)
  save_file(tensors, str(out / "model.safetensors"),
            metadata={"format": "pt"})
  with open(os.path.join(QA_TEACHER, "config.json")) as f:
    config = json.load(f)
  config["architectures"] = ["BertModel"]
  (out / "config.json").write_text(json.dumps(config))
  return str(out)


def test_a_sentence_encoder_is_fine_tuned_first_when_asked(
    headless_teacher, qa_data, tmp_path):
  out = str(tmp_path / "ship")
  refused = _ship("--teacher", headless_teacher, "--data_dir", qa_data,
                  "--output_dir", out, "--target_params", "0.6", *TINY)
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1].startswith(
      f"error: --teacher {headless_teacher}: has no task head (a sentence "
      "encoder); fine-tune it first with --teacher_finetune_steps N")
  assert not os.path.exists(Layout(out).path("search"))
  # Fine-tuned first, then searched (the tiny demo ships a headless
  # teacher end to end; here a budget nothing meets stops after the search).
  tuned = _ship("--teacher", headless_teacher, "--data_dir", qa_data,
                "--output_dir", str(tmp_path / "tuned"),
                "--target_latency_ms", "0.0001", "--teacher_finetune_steps",
                "3", *TINY)
  assert tuned.returncode == 1
  assert tuned.stderr.strip().splitlines()[-1].startswith(
      "error: no candidate split meets 0.0001 ms"), tuned.stderr[-3000:]
  layout = Layout(str(tmp_path / "tuned"))
  with open(os.path.join(layout.path("finetune", "teacher"),
                         "task.json")) as f:
    assert json.load(f)["task"] == "squad"  # the fine-tuned teacher
  search = [l for l in tuned.stdout.splitlines() if "] search: " in l][0]
  assert "--teacher_dir " + layout.path("finetune", "teacher") in search
