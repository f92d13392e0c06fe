"""Library code takes options, not flags: only a command's main() reads
absl's FLAGS (issue 30). A function that read FLAGS could not be called
from another command or a test without defining flags."""

import ast
import dataclasses
import pathlib

from absl import flags
import pytest

from tfmodels.command_options import from_flags, with_defaults

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("tfmodels", "converters", "android_bench", "experiments")


def _flag_reads_outside_main(path):
  """(line, function) of every read of FLAGS not inside a `main`."""
  found = []

  def walk(node, function):
    for child in ast.iter_child_nodes(node):
      inner = function
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
        inner = child.name if function is None else function
      if (isinstance(child, ast.Name) and child.id == "FLAGS"
          and isinstance(child.ctx, ast.Load) and inner != "main"):
        found.append((child.lineno, inner or "<module>"))
      walk(child, inner)

  walk(ast.parse(path.read_text(), str(path)), None)
  return found


def test_no_function_but_main_reads_flags():
  offenders = [f"{path.relative_to(ROOT)}:{line} in {function}"
               for package in PACKAGES
               for path in sorted((ROOT / package).rglob("*.py"))
               for line, function in _flag_reads_outside_main(path)]
  assert not offenders, "FLAGS read outside main():\n" + "\n".join(offenders)


def test_the_check_finds_a_read_in_a_helper(tmp_path):
  source = tmp_path / "command.py"
  source.write_text("FLAGS = flags.FLAGS\n"
                    "def helper():\n  return FLAGS.x\n"
                    "def main(argv):\n  def inner():\n    return FLAGS.y\n"
                    "  return helper(), inner()\n")
  assert _flag_reads_outside_main(source) == [(3, "helper")]


@dataclasses.dataclass(frozen=True)
class _Options:
  name: str
  sizes: tuple
  extra: int = 0


def test_options_are_filled_from_flags_and_frozen():
  values = flags.FlagValues()
  flags.DEFINE_string("name", "a", "", flag_values=values)
  flags.DEFINE_list("sizes", ["1"], "", flag_values=values)
  values(["prog", "--name=b", "--sizes=2,3"])
  options = from_flags(_Options, values, extra=5)
  assert options == _Options("b", ("2", "3"), 5)
  with pytest.raises(dataclasses.FrozenInstanceError):
    options.name = "c"
  assert with_defaults(_Options, values) == _Options("a", ("1",))
