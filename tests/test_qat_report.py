"""qat_report owns the conversions it starts (issue 29): every flag is
checked before the first one, they die with it, and a re-run after a
failure redoes only the conversion that is missing, without --overwrite.

The commands run as users run them; a tiny spam classifier (test_qat's
session fixture) keeps each conversion under a minute on two cores.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from fixtures.converters import tiny_models


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
  """(model_dir, data_dir): test_qat's tiny BERT classifier as a finetune
  run (its task.json names the task, length and vocabulary, as qat_report
  needs)."""
  base = tmp_path_factory.getbasetemp()
  model_dir = tiny_models.trained_classifier(base, "tiny_bert", 80,
                                             "bert_classifier")

  def build(path):
    shutil.copytree(model_dir, path)
    with open(os.path.join(path, "task.json"), "w") as f:
      json.dump({"task": "spam", "max_seq_length": tiny_models.SEQ_LENGTH,
                 "vocab_file": tiny_models.VOCAB}, f)
  return (tiny_models.cached(base, "qat_report_classifier", build),
          tiny_models.spam_data(base))


def _argv(finetuned, tmp_path, *extra):
  model_dir, data = finetuned
  return [sys.executable, "-m", "experiments.papers.qat_report", "--model_dir",
          model_dir, "--data_dir", data, "--work_dir", tmp_path / "work",
          "--results_dir", tmp_path / "results", "--qat_steps", 2, *extra]


def _start(argv, tmp_path, log, cold=False):
  """The report, started in the background; `cold`: as a fresh interpreter
  (not from the suite's warm-start server), so that its pid is the
  command's and its conversions are its children."""
  env = {**tiny_models.env(), "TMPDIR": str(tmp_path / "tmp")}
  if cold:
    env.pop("WARM_START_SOCKET", None)
  return subprocess.Popen(
      [str(a) for a in argv], stdout=open(tmp_path / log, "w"),
      stderr=subprocess.STDOUT, text=True, cwd=tiny_models.REPO, env=env)


def _conversion(pid, needle="converters.convert_tflite"):
  """The pid of `pid`'s child whose command line holds `needle`, or None."""
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, IndexError):
      continue
    if ppid == pid and needle in cmdline:
      return int(entry)
  return None


def _gone(pid):
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] == "Z"
  except FileNotFoundError:
    return True


def _wait_for(condition, what, seconds):
  deadline = time.monotonic() + seconds
  while not (found := condition()):
    if time.monotonic() > deadline:
      pytest.fail(f"still waiting for {what} after {seconds} s")
    time.sleep(0.1)
  return found


@pytest.mark.parametrize("flag, line", [
    (("--qat_batch_size", "-1"), "--qat_batch_size -1: must be >= 1"),
    (("--qat_learning_rate", "nan"),
     "--qat_learning_rate nan: give a finite number"),
    (("--qat_learning_rate", "-1e-5"),
     "--qat_learning_rate -1e-05: must be > 0"),
    (("--eval_split", "test"), "no test split (test.*)"),
])
def test_bad_flag_is_refused_before_any_conversion(finetuned, tmp_path,
                                                   flag, line):
  """Before: --qat_batch_size -1 was found by the second convert_tflite,
  after a whole PTQ conversion, which stayed in --work_dir."""
  result = subprocess.run(
      [str(a) for a in _argv(finetuned, tmp_path, *flag)],
      capture_output=True, text=True, cwd=tiny_models.REPO,
      env=tiny_models.env(), timeout=120)
  assert result.returncode == 1
  assert "convert_tflite" not in result.stdout  # no conversion started
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
  assert line in lines[0]
  assert os.listdir(tmp_path) == []  # nothing written


def test_kill_9_takes_the_conversion_with_it(finetuned, tmp_path):
  (tmp_path / "tmp").mkdir()
  report = _start(_argv(finetuned, tmp_path), tmp_path, "log", cold=True)
  child = None
  try:
    child = _wait_for(lambda: _conversion(report.pid), "the conversion", 60)
    report.kill()
    report.wait()
    _wait_for(lambda: _gone(child), "the orphaned conversion to stop", 30)
  finally:
    if report.poll() is None:
      report.kill()
    if child and not _gone(child):  # before issue 29: still converting
      os.kill(child, signal.SIGKILL)


def test_rerun_after_a_failed_conversion_redoes_only_it(finetuned, tmp_path):
  """The QAT conversion fails (stopped); the re-run keeps the finished PTQ
  conversion and needs no --overwrite. It also removes the export scratch
  a killed conversion left (pid-named, tfmodels.staging.scratch_directory),
  where tempfile's were left for good."""
  (tmp_path / "tmp").mkdir()
  first = _start(_argv(finetuned, tmp_path), tmp_path, "first.log",
                 cold=True)
  try:
    qat = _wait_for(lambda: _conversion(first.pid, "--qat_steps"),
                    "the QAT conversion (after PTQ)", 240)
    os.kill(qat, signal.SIGTERM)
    assert first.wait(timeout=60) == 1
  finally:
    if first.poll() is None:
      first.kill()
  log = (tmp_path / "first.log").read_text()
  assert "error: the qat conversion (convert_tflite) " in log
  ptq_report = tmp_path / "work" / "ptq_standard" / "model_report.json"
  made = ptq_report.stat().st_mtime_ns
  assert not (tmp_path / "work" / "qat_standard" / "model_report.json"
              ).exists()
  dead = subprocess.Popen(["true"])
  dead.wait()
  stale = tmp_path / "tmp" / f"tflite-export-{dead.pid}-abc_12"
  (stale / "saved_model").mkdir(parents=True)

  second = _start(_argv(finetuned, tmp_path), tmp_path, "second.log")
  assert second.wait(timeout=400) == 0, (tmp_path / "second.log").read_text()
  log = (tmp_path / "second.log").read_text()
  assert "ptq: kept" in log
  commands = [l for l in log.splitlines() if l.startswith("$ ")]
  assert len(commands) == 1 and "--qat_steps 2" in commands[0]
  assert ptq_report.stat().st_mtime_ns == made
  [row] = json.loads((tmp_path / "results" / "qat.json").read_text())["rows"]
  assert row["qat_steps"] == 2 and row["recipe"] == "standard"
  assert not stale.exists()
  # A finished conversion made with other flags is the user's: refused
  # before any work, as convert_tflite refuses existing files.
  third = subprocess.run(
      [str(a) for a in _argv(finetuned, tmp_path, "--qat_steps", 3)],
      capture_output=True, text=True, cwd=tiny_models.REPO,
      env=tiny_models.env(), timeout=120)
  assert third.returncode == 1 and "$ " not in third.stdout
  assert third.stderr.strip().endswith(
      "qat_standard holds a conversion made with other flags (pass "
      "--overwrite)")


def test_parts_come_from_options_not_flags(tmp_path):
  """Issue 30: only main() reads FLAGS; the parts are planned from a
  QatReportOptions built without a command line (its own process: the
  command's absl flags clash with other commands')."""
  script = (
      "import json, os, sys\n"
      "from experiments.papers import qat_report\n"
      "from tfmodels.command_options import with_defaults\n"
      "top = sys.argv[1]\n"
      "o = with_defaults(qat_report.QatReportOptions, model_dir=os.path.join("
      "top, 'm'), data_dir=os.path.join(top, 'd'), work_dir=os.path.join("
      "top, 'w'), int8_recipe='strict', qat_steps=5)\n"
      "print(json.dumps([(p.name, p.output_dir, p.flags, p.state())"
      " for p in qat_report._parts(o)]))\n")
  result = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                          capture_output=True, text=True,
                          cwd=tiny_models.REPO, env=tiny_models.env(),
                          timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  common = ["--model_dir", str(tmp_path / "m"), "--data_dir",
            str(tmp_path / "d"), "--eval_split", "dev"]
  ptq, qat = (str(tmp_path / "w" / f"{n}_strict") for n in ("ptq", "qat"))
  assert json.loads(result.stdout) == [
      ["ptq", ptq, [*common, "--output_dir", ptq, "--name", "model",
                    "--modes", "float32,int8", "--strict_int8"], "missing"],
      ["qat", qat, [*common, "--output_dir", qat, "--name", "model",
                    "--modes", "int8", "--strict_int8", "--qat_steps", "5",
                    "--qat_learning_rate", "1e-05", "--qat_batch_size",
                    "16"], "missing"]]


def _tree(top):
  """{relative path: bytes, "dir" or the link's target} under `top`."""
  return {str(p.relative_to(top)): (
      f"-> {os.readlink(p)}" if p.is_symlink() else
      p.read_bytes() if p.is_file() else "dir")
          for p in sorted(top.rglob("*"))}


def test_only_its_own_parts_are_redone(finetuned, tmp_path):
  """A part is redone in place (convert_tflite --overwrite replaces its
  files), with --overwrite or after a failure: a folder of a part's name
  that qat_report did not write (a user's, with a model_*.tflite of theirs)
  was taken as a failed part and its files replaced. Refused now, before
  any conversion, as is a link; a part it wrote (its marker, convert_tflite's
  files, a killed conversion's staging) is its own."""
  work = tmp_path / "work"
  user = work / "ptq_standard"
  user.mkdir(parents=True)
  (user / "model_float32.tflite").write_bytes(b"the user's model")
  (user / "notes.txt").write_text("the user's")
  (tmp_path / "elsewhere").mkdir()
  (work / "qat_standard").symlink_to(tmp_path / "elsewhere")
  (tmp_path / "link").symlink_to(work)
  before = _tree(tmp_path)

  def refused(*extra):
    result = subprocess.run(
        [str(a) for a in _argv(finetuned, tmp_path, *extra)],
        capture_output=True, text=True, cwd=tiny_models.REPO,
        env=tiny_models.env(), timeout=120)
    assert result.returncode == 1 and "$ " not in result.stdout, (
        result.stdout + result.stderr)
    assert _tree(tmp_path) == before
    return result.stderr.strip().splitlines()

  foreign = [f"error: --work_dir {user}: was not written by qat_report (it "
             "holds model_float32.tflite, notes.txt); --overwrite replaces "
             "only qat_report's own output (remove it yourself or choose "
             "another --work_dir)"]
  assert refused() == foreign
  assert refused("--overwrite") == foreign
  assert refused("--work_dir", tmp_path / "link") == [
      f"error: --work_dir {tmp_path}/link: is a symbolic link; refusing to "
      "write through it (give the real path)"]
  # The part as qat_report leaves it: past the check, to the flags check.
  (user / "notes.txt").unlink()
  (user / "qat_report.done").write_text('{"flags": ["other"]}\n')
  (user / "model_report.json").write_text("{}")
  (user / ".staging-ptq_standard-1-abc").mkdir()
  before = _tree(tmp_path)
  assert refused() == [
      f"error: --work_dir {work}/qat_standard: is a symbolic link; refusing "
      "to write through it (give the real path)"]
  (work / "qat_standard").unlink()
  before = _tree(tmp_path)
  assert refused()[-1].endswith(
      "ptq_standard holds a conversion made with other flags (pass "
      "--overwrite)")
  # A part is never the model it converts.
  model = work / "qat_standard" / "model"
  shutil.copytree(finetuned[0], model)
  before = _tree(tmp_path)
  assert refused("--model_dir", model) == [
      f"error: --work_dir {work}/qat_standard: would replace --model_dir "
      f"{model}, this command's input; choose another --work_dir"]
