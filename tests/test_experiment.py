"""The experiments' shared skeleton (experiments/common/skeleton.py): where the
results go, and what a failed step still leaves."""

import json
import os

import pytest

from experiments.common import skeleton
from experiments.common.pipeline import Step


def _write(path, text):
  def command():
    with open(path, "w") as f:
      f.write(text)
  return command


def _fail():
  raise ValueError("no data")


def _report(out):
  """Stages what the steps wrote, as the experiments' reports do."""
  def report(results):
    measured = sorted(n for n in os.listdir(os.path.join(out, "a"))
                      if not n.startswith("."))
    skeleton.stage_results(results, "x", {"measured": measured}, "| a |\n")
    return "the table"
  return report


def test_a_failed_step_still_reports_what_was_measured(tmp_path, capsys):
  options = skeleton.Options(output_dir=str(tmp_path / "out"),
                               results_dir=str(tmp_path / "results"))
  with skeleton.held_outputs(options) as (out, results):
    steps = [Step("a", _write(os.path.join(out, "a", "a.txt"), "1"),
                  os.path.join(out, "a")),
             Step("b", _fail, os.path.join(out, "b"))]
    with pytest.raises(SystemExit) as exit_:
      skeleton.run_and_report(steps, options, results, _report(out))
  assert str(exit_.value).startswith("error: step 'b' failed (no data)")
  assert capsys.readouterr().out.endswith("the table\n")
  written = json.loads((tmp_path / "results" / "x.json").read_text())
  assert written == {"measured": ["a.txt"]}
  assert (tmp_path / "results" / "x.md").read_text() == "# x\n\n| a |\n"
  assert sorted(os.listdir(tmp_path / "results")) == ["x.json", "x.md"]


def test_without_results_dir_the_results_go_to_the_output_dir(tmp_path):
  options = skeleton.Options(output_dir=str(tmp_path / "out"))
  with skeleton.held_outputs(options) as (out, results):
    steps = [Step("a", _write(os.path.join(out, "a", "a.txt"), "1"),
                  os.path.join(out, "a"))]
    skeleton.run_and_report(steps, options, results, _report(out))
  assert sorted(os.listdir(tmp_path / "out")) == ["a", "x.json", "x.md"]


def test_an_unknown_force_and_an_unusable_results_dir_are_one_line(
    tmp_path):
  options = skeleton.Options(output_dir=str(tmp_path / "out"),
                               force=("c",))
  with skeleton.held_outputs(options) as (out, results):
    with pytest.raises(SystemExit, match="error: --force c: not a step"):
      skeleton.run_and_report([Step("a", _fail, out)], options, results,
                                _report(out))
  (tmp_path / "file").write_text("")
  options = skeleton.Options(output_dir=str(tmp_path / "out2"),
                               results_dir=str(tmp_path / "file" / "r"))
  with pytest.raises(SystemExit, match="^error: --results_dir "):
    with skeleton.one_line_errors():
      with skeleton.held_outputs(options):
        pass
  assert sorted(os.listdir(tmp_path)) == ["file"]  # the runs made nothing


def test_stray_arguments_and_jobs_below_one_are_refused():
  with pytest.raises(SystemExit, match="unexpected arguments: extra"):
    skeleton.check_command_line(["prog", "extra"], skeleton.Options())
  with pytest.raises(SystemExit, match="--jobs 0: give 1 or more"):
    skeleton.check_command_line(["prog"], skeleton.Options(jobs=0))


def test_layout_names_the_shared_kinds_of_directory():
  layout = skeleton.Layout("/o")
  assert layout.run("teacher") == "/o/runs/teacher"
  assert layout.shards("train") == "/o/data/train/shards"
  assert layout.finetuned("teacher", "qa") == "/o/finetune/teacher_qa"
  assert layout.finetuned("student") == "/o/finetune/student"


# The experiments' common options, each made by the skeleton's factory.
COMMON_OPTIONS = ("output_dir", "results_dir", "scale", "jobs", "force")


def _skeleton_problems(source):
  """What keeps an experiment's source off the skeleton: its options
  extend skeleton.Options, declare the common options it has with
  the skeleton's factories (`skeleton.output_dir_option(...)`, ...), are
  its flags (`define_flags(ThatClass)` at module level, no flag defined by
  hand), and its command line is checked by check_command_line and its
  errors and Ctrl-C end it through one_line_errors (run_command, or
  directly: the demo, whose results are its report step)."""
  import ast
  tree = ast.parse(source)
  classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

  def is_options(name, seen=()):
    """Extends skeleton.Options, itself or through a class here."""
    for base in classes[name].bases:
      if ast.unparse(base) == "skeleton.Options" or (
          isinstance(base, ast.Name) and base.id in classes
          and base.id not in seen and is_options(base.id, seen + (name,))):
        return True
    return False

  options = [name for name in classes if is_options(name)]
  defined = {ast.unparse(n.value.args[0]) for n in tree.body
             if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
             and ast.unparse(n.value.func).split(".")[-1] == "define_flags"
             and n.value.args}
  calls = {ast.unparse(n.func) for n in ast.walk(tree)
           if isinstance(n, ast.Call)}
  problems = []
  if not options:
    problems.append("no options class extends skeleton.Options")
  if not set(options) & defined:
    problems.append("no define_flags(Options) at module level")
  if any(c.split(".")[-1].startswith(("DEFINE_", "mark_flag"))
         or c == "skeleton.define_flags" for c in calls):
    problems.append("a flag defined by hand")
  for name in options:
    for field in classes[name].body:
      if (isinstance(field, ast.AnnAssign) and field.target.id in
          COMMON_OPTIONS and not (
              isinstance(field.value, ast.Call) and ast.unparse(
                  field.value.func) == f"skeleton.{field.target.id}_option")):
        problems.append(f"{name}.{field.target.id} is not "
                        f"skeleton.{field.target.id}_option(...)")
  if not ("skeleton.run_command" in calls or {
      "skeleton.check_command_line", "skeleton.one_line_errors"} <= calls):
    problems.append("neither run_command nor check_command_line + "
                    "one_line_errors")
  return problems


@pytest.mark.parametrize("module", [
    "ship/command", "demo/command", "papers/distill_from_minilm",
    "papers/mixed_vocab_student", "papers/knowledge_transfer",
    "bench/latency_benchmark"])
def test_every_experiment_command_stands_on_the_skeleton(module):
  """So the common flags, errors and Ctrl-C mean the same in each. Read
  from the source: the commands define flags when imported, and several
  define the same ones."""
  import pathlib
  path = pathlib.Path(skeleton.__file__).parents[1] / (module + ".py")
  assert _skeleton_problems(path.read_text()) == []


SKELETON = """
@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options):
  output_dir: str = skeleton.output_dir_option("Runs.")
  force: tuple = skeleton.force_option()
  size: int = option(1, "Size.")


define_flags(Options)


def main(argv):
  skeleton.run_command(argv, from_flags(Options), run_experiment)
"""


@pytest.mark.parametrize("change, problem", [
    (("define_flags(Options)", 'skeleton.define_flags("Runs.")'),
     "no define_flags(Options)"),
    (("(skeleton.Options)", ""), "no options class extends"),
    (('skeleton.force_option()', 'option((), "Steps.")'),
     "Options.force is not skeleton.force_option"),
    (('size: int = option(1, "Size.")', "size: int = 1\n"
      'flags.DEFINE_integer("size", 1, "Size.")'), "a flag defined by hand"),
    (("skeleton.run_command(argv, ", "run("), "neither run_command"),
])
def test_an_experiment_off_the_skeleton_is_found(change, problem):
  assert _skeleton_problems(SKELETON) == []
  problems = _skeleton_problems(SKELETON.replace(*change))
  assert any(p.startswith(problem) for p in problems), problems
