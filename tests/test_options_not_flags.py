"""Library code takes options, not flags: only a command's main() reads
absl's FLAGS (issue 30). A function that read FLAGS could not be called
from another command or a test without defining flags. And each option is
declared once, as a field of its command's options dataclass that
`define_flags` turns into the flag (issue 38): no command defines a flag by
hand, and every flag a command has is one of its options' fields."""

import ast
import dataclasses
import pathlib
import subprocess
import sys

from absl import flags
import pytest

from tfmodels.command_options import (define_flags, flag_name, flag_spec,
                                      from_flags, option, option_fields,
                                      redefault, with_defaults)

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


def _hand_made_flags(path):
  """Lines that define or mark a flag by hand (absl's DEFINE_*, mark_*)."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Call):
      name = getattr(node.func, "attr", getattr(node.func, "id", ""))
      if name.startswith(("DEFINE_", "mark_flag")):
        found.append(node.lineno)
  return found


def test_no_command_defines_a_flag_by_hand():
  offenders = [f"{path.relative_to(ROOT)}:{line}"
               for package in PACKAGES
               for path in sorted((ROOT / package).rglob("*.py"))
               if path.name != "command_options.py"
               for line in _hand_made_flags(path)]
  assert not offenders, ("flags defined outside an options dataclass "
                         "(use command_options.option):\n"
                         + "\n".join(offenders))


def _command_modules():
  """Every module of the four stages that defines flags from options."""
  return sorted(
      ".".join(path.relative_to(ROOT).with_suffix("").parts)
      for package in PACKAGES for path in (ROOT / package).rglob("*.py")
      if "define_flags(" in path.read_text()
      and path.name not in ("command_options.py", "skeleton.py"))


# Run in a child: each command module is imported alone into a clean flag
# registry, its flags compared with its options' fields, then dropped.
_EACH_FLAG_IS_A_FIELD = r"""
import dataclasses, importlib, sys
from absl import flags
from tfmodels.command_options import (flag_name as flag_of, flag_spec,
                                      option_fields)
FLAGS = flags.FLAGS
problems, checked = [], 0
for name in sys.argv[1:]:
  before = set(FLAGS)
  module = importlib.import_module(name)
  run = getattr(module, "define_command_flags", None)
  if run:  # a module that defines its flags when run, not on import
    run()
  mine = {f.name: f for f in FLAGS.get_flags_for_module(module)}
  fields = {}
  for value in vars(module).values():
    if isinstance(value, type) and dataclasses.is_dataclass(value):
      for field in option_fields(value):
        fields.setdefault(flag_of(field), []).append((field, value))
  if not mine:
    problems.append(f"{name}: defines no flags")
  for flag_name, flag in mine.items():
    specs = {flag_spec(field, cls)[:3] for field, cls in fields.get(
        flag_name, [])}
    if not specs:
      problems.append(f"{name}: --{flag_name} is no option field")
      continue
    kind = {"bool": "bool", "int": "integer", "float": "float",
            "comma separated list of strings": "list",
            "string enum": "enum"}.get(flag.flag_type(), "string")
    default = (tuple(flag.default) if isinstance(flag.default, list)
               else flag.default)
    help = flag.help.split(": ", 1)[-1] if kind == "enum" else flag.help
    if not any(k == kind and d == default and help.startswith(h)
               for k, d, h in specs):
      problems.append(f"{name}: --{flag_name} ({kind}, {default!r}) is "
                      f"none of its fields {sorted(specs)}")
    checked += 1
  for flag_name in set(FLAGS) - before:
    delattr(FLAGS, flag_name)
print(checked)
if problems:
  sys.exit("\n".join(problems))
"""


def test_every_flag_of_every_command_is_one_options_field():
  modules = _command_modules()
  assert len(modules) >= 20, modules
  result = subprocess.run(
      [sys.executable, "-c", _EACH_FLAG_IS_A_FIELD, *modules], cwd=ROOT,
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  assert int(result.stdout.split()[-1]) >= 250  # every command's flags


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
  name: str = option("a", "A name.")
  sizes: tuple = option(("1",), "Sizes.", choices=("1", "2", "3"))
  mode: str = option("x", "A mode.", choices=("x", "y"))
  extra: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Longer(_Options):
  name: str = redefault(_Options, "name", "b")


def test_options_are_the_flags_and_are_frozen():
  values = flags.FlagValues()
  define_flags(_Options, values)
  assert sorted(values) == ["mode", "name", "sizes"]  # extra is no flag
  assert values["name"].help == "A name." and values["mode"].default == "x"
  values(["prog", "--name=b", "--sizes=2,3", "--mode=y"])
  options = from_flags(_Options, values, extra=5)
  assert options == _Options(name="b", sizes=("2", "3"), mode="y", extra=5)
  with pytest.raises(dataclasses.FrozenInstanceError):
    options.name = "c"
  assert with_defaults(_Options) == _Options(name="a", sizes=("1",))


def test_an_enum_or_list_option_refuses_other_values():
  values = flags.FlagValues()
  define_flags(_Options, values)
  with pytest.raises(flags.IllegalFlagValueError, match="mode"):
    values(["prog", "--mode=z"])
  values = flags.FlagValues()
  define_flags(_Options, values)
  with pytest.raises(flags.IllegalFlagValueError, match="sizes"):
    values(["prog", "--sizes=1,4"])


def test_a_subclass_changes_a_default_not_the_help():
  field, = [f for f in option_fields(_Longer) if f.name == "name"]
  assert flag_spec(field, _Longer)[1:3] == ("b", "A name.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Keyword:
  from_: str | None = option(None, "A format.", choices=("a", "b"))


def test_a_keyword_option_is_its_flag_without_the_underscore():
  values = flags.FlagValues()
  define_flags(_Keyword, values)
  assert sorted(values) == ["from"]
  assert [flag_name(f) for f in option_fields(_Keyword)] == ["from"]
  values(["prog", "--from=b"])
  assert from_flags(_Keyword, values) == _Keyword(from_="b")


def test_an_option_that_is_no_flag_is_an_error():
  values = flags.FlagValues()
  values(["prog"])
  with pytest.raises(KeyError, match="--name of _Options"):
    from_flags(_Options, values)
