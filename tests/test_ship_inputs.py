"""ship loses nothing and trusts nothing: its output folder is its own
(a user's folder, a user's file in a step's folder, a link: refused in one
line before any work, the files intact), every file of the teacher's
folder is read as untrusted input before any step (one line naming the
file), class names that could not pass through every consumer are refused
at once, and Ctrl-C ends it with one line and exit 130. (A whole run with
every step forced beside a user's file, and a teacher whose tokenizer
keeps accents: tests/test_ship.py.)"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "checkpoints")
CLASSIFIER = os.path.join(FIXTURES, "ship_classifier")
TINY = ("--train_max_seq_length", "32", "--max_seq_length", "32",
        "--student_steps", "2", "--recover_steps", "1",
        "--calibration_examples", "8", "--calibration_samples", "8",
        "--num_runs", "2", "--min_secs", "0", "--app_examples", "2",
        "--qat_steps", "0",
        "--batch_size", "4", "--heads", "2", "--widths", "64",
        "--ranks", "none", "--target_params", "0.9")


def _ship(*args, timeout=900):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, "-m", "experiments.ship", *args],
                        capture_output=True, text=True, env=env,
                        timeout=timeout)


def _refused(done, *named):
  """One `error:` line naming each of `named`, exit 1, no traceback."""
  assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
  assert "Traceback" not in done.stderr, done.stderr[-3000:]
  last = done.stderr.strip().splitlines()[-1]
  assert last.startswith("error: "), done.stderr[-2000:]
  for name in named:
    assert name in last, last
  return last


def _snapshot(root):
  """{relative path: bytes} of every file under root."""
  found = {}
  for directory, _, files in os.walk(root):
    for name in files:
      path = os.path.join(directory, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, root)] = f.read()
  return found


@pytest.fixture(scope="module")
def spam_data(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("data"))
  subprocess.run([sys.executable, "-m", "experiments.demo.data",
                  "--output_dir", out, "--pretraining_documents", "2",
                  "--spam_rows", "24,12", "--qa_questions", "4,2"],
                 check=True, capture_output=True, timeout=600)
  return os.path.join(out, "spam")


def _teacher(tmp_path, config=None, files=None, tokenizer=None):
  """A copy of the tiny classifier teacher, its config.json fields
  replaced by `config`, its files by `files` ({name: text, or a callable
  making the path}), its tokenizer.json normalizer fields by `tokenizer`."""
  path = tmp_path / "teacher"
  shutil.copytree(CLASSIFIER, path)
  if config is not None:
    values = json.loads((path / "config.json").read_text())
    values.update(config)
    (path / "config.json").write_text(json.dumps(values))
  if tokenizer is not None:
    values = json.loads((path / "tokenizer.json").read_text())
    values["normalizer"].update(tokenizer)
    (path / "tokenizer.json").write_text(json.dumps(values))
  for name, content in (files or {}).items():
    (path / name).unlink()
    if callable(content):
      content(str(path / name))
    else:
      (path / name).write_text(content)
  return str(path)


# --- the output folder is ship's ---------------------------------------------

def test_a_users_folder_is_refused_with_every_file_intact(spam_data,
                                                          tmp_path):
  user = tmp_path / "mine"
  for name, text in (("REPORT.md", "my report"),
                     ("report/summary.json", "{}"),
                     ("app_assets/README.md", "my readme"),
                     ("report/mine.txt", "mine")):
    (user / name).parent.mkdir(parents=True, exist_ok=True)
    (user / name).write_text(text)
  before = _snapshot(user)
  done = _ship("--teacher", CLASSIFIER, "--data_dir", spam_data,
               "--output_dir", str(user), *TINY)
  _refused(done, f"--output_dir {user}", "which ship did not write")
  assert _snapshot(user) == before


def test_a_link_as_output_dir_is_refused(spam_data, tmp_path):
  target = tmp_path / "elsewhere"
  target.mkdir()
  link = tmp_path / "out"
  link.symlink_to(target)
  done = _ship("--teacher", CLASSIFIER, "--data_dir", spam_data,
               "--output_dir", str(link), *TINY)
  _refused(done, f"--output_dir {link}", "symbolic link")
  assert not os.listdir(target)


# --- the teacher's files are untrusted input ---------------------------------

def _fifo(path):
  os.mkfifo(path)


def _zero(path):
  os.symlink("/dev/zero", path)


CASES = {
    "list": (None, {"config.json": "[1, 2, 3]"},
             ("config.json", "JSON object")),
    "architectures": ({"architectures": 5}, None,
                      ("config.json", "'architectures'")),
    "not-json": (None, {"config.json": "{not json"},
                 ("config.json", "not valid JSON")),
    "empty": (None, {"config.json": ""}, ("config.json", "not valid JSON")),
    "dev-zero": (None, {"config.json": _zero},
                 ("config.json", "not a regular file")),
    "padded": (None, {"config.json": '{"model_type": "bert"' + " " * (2 << 20)
                      + "}"}, ("config.json", "larger than")),
    "fifo-settings": (None, {"tokenizer_config.json": _fifo},
                      ("tokenizer_config.json", "not a regular file")),
    "fifo-vocab": (None, {"vocab.txt": _fifo},
                   ("vocab.txt", "not a regular file")),
    "layers": ({"num_hidden_layers": 1024}, None,
               ("config.json", "'num_hidden_layers' is 1024",
                "holds 2 layers")),
    "comma": ({"id2label": {"0": "ham, legit", "1": "spam"}}, None,
              ("config.json id2label", "holds a comma")),
    "carriage-return": ({"id2label": {"0": "ham\r", "1": "spam"}}, None,
                        ("config.json id2label",
                         "control or separator character")),
    "blank": ({"id2label": {"0": " ", "1": "spam"}}, None,
              ("config.json id2label", "is empty")),
    "twice": ({"id2label": {"0": "spam", "1": "spam"}}, None,
              ("config.json id2label", "must be distinct")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_teachers_files_are_read_as_untrusted_input(case, tmp_path):
  """What ship checks before any step (experiments.ship.teacher.
  inspect_teacher; the teacher step checks it again): one line naming the
  file and what is wrong with it, in seconds."""
  from experiments.ship.teacher import inspect_teacher
  config, files, named = CASES[case]
  teacher = _teacher(tmp_path, config, files)
  began = time.time()
  with pytest.raises(ValueError) as error:
    inspect_teacher(teacher)
  assert time.time() - began < 30
  message = str(error.value)
  assert len(message.splitlines()) == 1, message
  for name in (teacher, *named):
    assert name in message, message


@pytest.mark.parametrize("case", ["fifo-settings", "layers", "comma"])
def test_ship_refuses_such_a_teacher_before_any_step(case, spam_data,
                                                     tmp_path):
  config, files, named = CASES[case]
  teacher = _teacher(tmp_path, config, files)
  out = tmp_path / "ship"
  done = _ship("--teacher", teacher, "--data_dir", spam_data,
               "--output_dir", str(out), *TINY, timeout=120)
  _refused(done, teacher, *named)
  assert not out.exists()


def test_vocab_txt_and_tokenizer_json_that_disagree_are_refused(tmp_path):
  from experiments.ship.teacher import inspect_teacher
  teacher = _teacher(tmp_path)
  path = os.path.join(teacher, "tokenizer.json")
  with open(path) as f:
    values = json.load(f)
  vocab = values["model"]["vocab"]
  a, b = (p for p, i in vocab.items() if i in (1000, 1001))
  vocab[a], vocab[b] = vocab[b], vocab[a]
  with open(path, "w") as f:
    json.dump(values, f)
  with pytest.raises(ValueError, match=(
      f"^{teacher}/vocab.txt and {teacher}/tokenizer.json disagree "
      r"\(id 1000: ")):
    inspect_teacher(teacher)


# --- Ctrl-C ------------------------------------------------------------------

def _sigint_default():
  signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.cold_start  # signals the processes it starts or reads their pids
def test_ctrl_c_ends_ship_in_one_line_with_its_steps_stopped(spam_data,
                                                             tmp_path):
  out = tmp_path / "ship"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  process = subprocess.Popen(
      [sys.executable, "-m", "experiments.ship", "--teacher", CLASSIFIER,
       "--data_dir", spam_data, "--output_dir", str(out), *TINY],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
      # Its own process group with Ctrl-C's default action, as a terminal's
      # job has, whatever the suite inherited: a suite started as a shell's
      # background job ignores SIGINT, and an ignored signal stays ignored
      # through exec (ship then runs to its end).
      start_new_session=True, preexec_fn=_sigint_default)
  try:
    deadline = time.time() + 300
    while not os.path.exists(out / "runs" / "teacher" / "pipeline.log"):
      assert process.poll() is None and time.time() < deadline
      time.sleep(0.2)
    time.sleep(1.0)  # the teacher step is importing TensorFlow
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does
    stdout, stderr = process.communicate(timeout=120)
  finally:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
  assert process.returncode == 130, stdout[-3000:] + stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  said = [l for l in stderr.strip().splitlines()
          if not re.match(r"[IWEF]\d{4} |WARNING: All log messages", l)]
  assert said == ["interrupted; run the same command again to resume"]
  left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True,
                        text=True).stdout.split()
  assert not left  # the steps were stopped with it
  assert not os.path.exists(tmp_path / ".ship.lock")


# --- the teacher's tokenizer settings, honoured ---------------------------

LINES = ["Résumé café 東京", "Über NAÏVE naïve!", "北京大学 and ΟΔΥΣΣΕΥΣ",
         "Привет, мир: e\u0301 re\u0301sume\u0301", "emoji 😀 مرحبا",
         "Ångström Øre ﬁne ǅ"]


@pytest.fixture(scope="module")
def span_tflite():
  """A tiny converted model with the contract's inputs, for metadata."""
  import tensorflow as tf

  @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.int32, name=n)
                                for n in ("ids", "mask", "segment_ids")])
  def span(ids, mask, segment_ids):
    x = tf.cast(ids + mask + segment_ids, tf.float32)
    return {"start_logits": x, "end_logits": -x}
  return tf.lite.TFLiteConverter.from_concrete_functions(
      [span.get_concrete_function()], span).convert()


@pytest.mark.parametrize("strip", [None, True, False])
@pytest.mark.parametrize("chinese", [True, False])
def test_the_teachers_tokenizer_settings_reach_every_tokenizer(
    strip, chinese, spam_data, span_tflite, tmp_path):
  """ship's teacher step writes the settings beside the vocabulary; the
  steps' tokenizer and the app's twin (the settings the converted file
  carries) give Hugging Face `tokenizers`' ids, the teacher's own
  tokenizer.json's, for every setting. (The Java core: its own test.)"""
  from tokenizers import Tokenizer
  from android_bench.qa_app.answering import tokenizer_for
  from converters.metadata import attach
  from experiments.ship.teacher import TeacherOptions, write_teacher
  from tfmodels.tokenization import WordPieceTokenizer, settings_beside
  teacher = _teacher(tmp_path, tokenizer={"strip_accents": strip,
                                          "handle_chinese_chars": chinese})
  path = os.path.join(teacher, "tokenizer_config.json")
  with open(path) as f:
    values = dict(json.load(f), strip_accents=strip,
                  tokenize_chinese_chars=chinese)
  with open(path, "w") as f:
    json.dump(values, f)
  out = str(tmp_path / "imported")
  write_teacher(TeacherOptions(teacher=teacher, task="spam",
                               data_dir=spam_data, max_seq_length=32,
                               output=out))
  reference = Tokenizer.from_file(os.path.join(teacher, "tokenizer.json"))
  expected = [reference.encode(l, add_special_tokens=False).ids
              for l in LINES]
  vocab = os.path.join(out, "vocab.txt")
  steps = WordPieceTokenizer(vocab)
  model = tmp_path / "model.tflite"
  model.write_bytes(attach(span_tflite, "span", vocab,
                           settings=settings_beside(vocab)))
  for tokenizer in (steps, tokenizer_for(str(model))):
    assert [tokenizer.encode(l).ids for l in LINES] == expected
    assert tokenizer.ids_batch(LINES) == expected


def test_a_cased_teacher_is_refused_in_one_line(tmp_path):
  from experiments.ship.teacher import inspect_teacher
  teacher = _teacher(tmp_path, tokenizer={"lowercase": False})
  path = os.path.join(teacher, "tokenizer_config.json")
  with open(path) as f:
    values = dict(json.load(f), do_lower_case=False)
  with open(path, "w") as f:
    json.dump(values, f)
  with pytest.raises(ValueError, match=f"^{path}: do_lower_case is false"):
    inspect_teacher(teacher)


def test_settings_the_two_files_disagree_on_are_refused(tmp_path):
  from experiments.ship.teacher import inspect_teacher
  teacher = _teacher(tmp_path, tokenizer={"strip_accents": False})
  with pytest.raises(ValueError, match=(
      f"^{teacher}/tokenizer_config.json: field 'strip_accents' is null, but "
      f"{teacher}/tokenizer.json's normalizer has strip_accents false$")):
    inspect_teacher(teacher)
