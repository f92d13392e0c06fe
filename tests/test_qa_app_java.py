"""The QA app's Java core (qa-core): compiled with javac, tested with JUnit 5.

The JUnit tests hold the Java tokenizer, windows and decoder to the golden
vectors of the Python pipeline (tests/fixtures/qa_app). Java and JUnit come
from Debian (`make system-packages` installs them), so a missing javac or
JUnit jar fails these tests instead of skipping them.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import HELDOUT_CORPUS, REPO, VOCAB
from tfmodels.data.text_io import open_text

QA_CORE = os.path.join(REPO, "android_bench", "qa_app", "qa-core")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "qa_app")
JUNIT = "/usr/share/java/junit-platform-console-standalone.jar"
MAIN = "org.compactbert.qa.TokenizeMain"


def _sources(kind):
  root = os.path.join(QA_CORE, "src", kind, "java")
  return sorted(os.path.join(d, f) for d, _, files in os.walk(root)
                for f in files if f.endswith(".java"))


def _tool(name):
  path = shutil.which(name)
  if path is None:
    pytest.fail(f"{name} not found: install openjdk-17-jdk-headless "
                "(make system-packages)")
  return path


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
  """qa-core's main and test classes, built outside the source tree."""
  javac = _tool("javac")
  if not os.path.isfile(JUNIT):
    pytest.fail(f"{JUNIT} not found: install Debian's junit5 "
                "(make system-packages)")
  out = tmp_path_factory.mktemp("qa-core")
  main, test = out / "main", out / "test"
  for target, sources, classpath in ((main, _sources("main"), []),
                                     (test, _sources("test"),
                                      ["-cp", f"{main}:{JUNIT}"])):
    result = subprocess.run(
        [javac, "--release", "17", "-Xlint:all,-serial", "-Werror",
         "-encoding", "UTF-8", "-d", str(target), *classpath, *sources],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
  return main, test


@pytest.fixture(scope="module")
def model_with_vocab(tmp_path_factory):
  """(path, vocab sha256) of a .tflite carrying VOCAB as convert_tflite
  attaches it, for ModelVocabularyTest."""
  sys.path.insert(0, FIXTURES)
  from tiny_model import export_stub_span_model, with_vocab
  from tfmodels.vocab_record import record_of_file
  base = tmp_path_factory.mktemp("model_with_vocab")
  path = with_vocab(export_stub_span_model(str(base / "stub.tflite")),
                    VOCAB, str(base / "with_vocab.tflite"))
  return path, record_of_file(VOCAB).sha256


def test_junit_suite_passes(classes, model_with_vocab):
  main, test = classes
  model, sha256 = model_with_vocab
  result = subprocess.run(
      [_tool("java"), f"-Dqa.fixtures={FIXTURES}", f"-Dqa.vocab={VOCAB}",
       f"-Dqa.model={model}", f"-Dqa.model.vocab_sha256={sha256}",
       "-jar", JUNIT, "-cp", f"{main}:{test}",
       "--select-package", "org.compactbert.qa", "--fail-if-no-tests",
       "--disable-banner", "--disable-ansi-colors", "--details=tree"],
      capture_output=True, text=True, timeout=600)
  report = result.stdout + result.stderr
  assert result.returncode == 0, report[-6000:]
  counts = {k: int(v) for v, k in re.findall(
      r"\[\s*(\d+) tests (successful|failed|skipped|aborted)\s*\]", report)}
  assert counts["failed"] == counts["skipped"] == counts["aborted"] == 0
  assert counts["successful"] >= 23, report[-3000:]
  # A dynamic-length model: each window at WindowLength.of its tokens.
  assert "aDynamicModelRunsEachWindowAtItsOwnLength()" in report
  # Answers are whole words, as the Python twin's (WholeWordTest).
  assert "aSpanOnPartsOfWordsAnswersTheWholeWords()" in report
  # The vocabulary a model carries, read by the app's core (ModelVocabulary).
  assert "readsTheVocabularyPythonAttached()" in report
  # Every code point Java 17 knows normalizes as the Python tokenizer does.
  assert "every code point Java knows agrees" in report


def _lines():
  with open_text(HELDOUT_CORPUS) as f:
    corpus = [next(f).rstrip("\n") for _ in range(400)]
  return corpus + [
      "Héllo, wörld! The café's price: $3.50 — naïve résumé.",
      "中文字符 日本語のテキスト 한국어 Ελληνικά, русский язык, العربية",
      "ǅemal ½ ﬁnal… ＦＵＬＬ 𝐁𝐨𝐥𝐝 İstanbul STRAẞE ꭰꮎꮝ 😀 𠀀",
      "crlf line\r", "", "tab\tsoft\u00adhyphen zero\u200bwidth",
      "a" * 101 + " ok"]


def test_tokenize_command_prints_what_python_prints(classes):
  main, _ = classes
  text = "\n".join(_lines()) + "\n"
  java = subprocess.run(
      [_tool("java"), "-cp", str(main), MAIN, "--vocab_file", VOCAB],
      input=text.encode("utf-8"), capture_output=True, check=True)
  python = subprocess.run(
      [sys.executable, "-m", "tfmodels.tokenize_lines", "--vocab_file", VOCAB],
      input=text.encode("utf-8"), capture_output=True, check=True,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  java_lines = java.stdout.decode("utf-8").split("\n")
  python_lines = python.stdout.decode("utf-8").split("\n")
  assert len(java_lines) == len(_lines()) + 1
  assert java_lines == python_lines
  assert java_lines[-2] == "[UNK] ok"


def test_tokenize_command_rejects_missing_vocab(classes, tmp_path):
  main, _ = classes
  missing = tmp_path / "nope.txt"
  result = subprocess.run(
      [_tool("java"), "-cp", str(main), MAIN, f"--vocab_file={missing}"],
      input=b"x\n", capture_output=True, text=False)
  assert result.returncode != 0
  assert result.stderr.decode().strip().startswith(
      f"error: --vocab_file {missing}: cannot read vocabulary")
  assert result.stdout == b""
