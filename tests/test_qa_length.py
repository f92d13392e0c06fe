"""The QA length stands in one place per language (issue 30): Python's
`tfmodels.data.squad.MAX_SEQ_LENGTH`, which every Python user imports, and the
Java FeatureBuilder's default, held equal to it here (the app has no Python
to import). Changing it means changing those two, and this test says so."""

import io
import pathlib
import re
import tokenize

from android_bench import qa_app
from tfmodels.data import squad

ROOT = pathlib.Path(__file__).resolve().parent.parent
JAVA = (ROOT / "android_bench" / "qa_app" / "qa-core" / "src" / "main" /
        "java" / "org" / "compactbert" / "qa" / "FeatureBuilder.java")
PACKAGES = ("tfmodels", "converters", "android_bench", "experiments")


def _java_constant(name):
  match = re.search(rf"static final int {name} = (\d+);", JAVA.read_text())
  assert match, f"{JAVA.name} defines no {name}"
  return int(match.group(1))


def test_java_feature_builder_uses_the_python_settings():
  assert _java_constant("DEFAULT_MAX_SEQ_LENGTH") == squad.MAX_SEQ_LENGTH
  assert _java_constant("DEFAULT_DOC_STRIDE") == qa_app.DOC_STRIDE
  assert _java_constant("DEFAULT_MAX_QUERY_LENGTH") == qa_app.MAX_QUERY_LENGTH
  assert qa_app.SEQUENCE_LENGTH == squad.MAX_SEQ_LENGTH


def _number_literals(path, value):
  tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
  return [t.start[0] for t in tokens
          if t.type == tokenize.NUMBER and t.string == str(value)]


def test_the_qa_length_is_written_in_one_python_module():
  modules = sorted(str(path.relative_to(ROOT))
                   for package in PACKAGES
                   for path in (ROOT / package).rglob("*.py")
                   if _number_literals(path, squad.MAX_SEQ_LENGTH))
  assert modules == ["tfmodels/data/squad.py"], (
      "the QA length is a bare number in: " + ", ".join(modules)
      + "; use tfmodels.data.squad.MAX_SEQ_LENGTH")
