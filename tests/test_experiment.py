"""The experiments' shared skeleton (experiments/experiment.py): where the
results go, and what a failed step still leaves."""

import json
import os

import pytest

from experiments import experiment
from experiments.pipeline import Step


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
    experiment.stage_results(results, "x", {"measured": measured}, "| a |\n")
    return "the table"
  return report


def test_a_failed_step_still_reports_what_was_measured(tmp_path, capsys):
  options = experiment.Options(output_dir=str(tmp_path / "out"),
                               results_dir=str(tmp_path / "results"))
  with experiment.held_outputs(options) as (out, results):
    steps = [Step("a", _write(os.path.join(out, "a", "a.txt"), "1"),
                  os.path.join(out, "a")),
             Step("b", _fail, os.path.join(out, "b"))]
    with pytest.raises(SystemExit) as exit_:
      experiment.run_and_report(steps, options, results, _report(out))
  assert str(exit_.value).startswith("error: step 'b' failed (no data)")
  assert capsys.readouterr().out.endswith("the table\n")
  written = json.loads((tmp_path / "results" / "x.json").read_text())
  assert written == {"measured": ["a.txt"]}
  assert (tmp_path / "results" / "x.md").read_text() == "# x\n\n| a |\n"
  assert sorted(os.listdir(tmp_path / "results")) == ["x.json", "x.md"]


def test_without_results_dir_the_results_go_to_the_output_dir(tmp_path):
  options = experiment.Options(output_dir=str(tmp_path / "out"))
  with experiment.held_outputs(options) as (out, results):
    steps = [Step("a", _write(os.path.join(out, "a", "a.txt"), "1"),
                  os.path.join(out, "a"))]
    experiment.run_and_report(steps, options, results, _report(out))
  assert sorted(os.listdir(tmp_path / "out")) == ["a", "x.json", "x.md"]


def test_an_unknown_force_and_an_unusable_results_dir_are_one_line(
    tmp_path):
  options = experiment.Options(output_dir=str(tmp_path / "out"),
                               force=("c",))
  with experiment.held_outputs(options) as (out, results):
    with pytest.raises(SystemExit, match="error: --force c: not a step"):
      experiment.run_and_report([Step("a", _fail, out)], options, results,
                                _report(out))
  (tmp_path / "file").write_text("")
  options = experiment.Options(output_dir=str(tmp_path / "out2"),
                               results_dir=str(tmp_path / "file" / "r"))
  with pytest.raises(SystemExit, match="^error: --results_dir "):
    with experiment.one_line_errors():
      with experiment.held_outputs(options):
        pass
  assert sorted(os.listdir(tmp_path)) == ["file"]  # the runs made nothing


def test_stray_arguments_and_jobs_below_one_are_refused():
  with pytest.raises(SystemExit, match="unexpected arguments: extra"):
    experiment.check_command_line(["prog", "extra"], experiment.Options())
  with pytest.raises(SystemExit, match="--jobs 0: give 1 or more"):
    experiment.check_command_line(["prog"], experiment.Options(jobs=0))


def test_layout_names_the_shared_kinds_of_directory():
  layout = experiment.Layout("/o")
  assert layout.run("teacher") == "/o/runs/teacher"
  assert layout.shards("train") == "/o/data/train/shards"
  assert layout.finetuned("teacher", "qa") == "/o/finetune/teacher_qa"
  assert layout.finetuned("student") == "/o/finetune/student"


@pytest.mark.parametrize("module", [
    "demo", "distill_from_minilm", "mixed_vocab_student",
    "knowledge_transfer", "latency_benchmark"])
def test_every_experiment_command_stands_on_the_skeleton(module):
  """Its flags come from define_flags, its options extend
  experiment.Options, its command line is checked by check_command_line and
  its errors and Ctrl-C end it through one_line_errors (run_command, or
  directly: the demo, whose results are its report step), so the common
  flags, errors and Ctrl-C mean the same in each. Read from the source: the
  commands define flags when imported, and several define the same ones."""
  import ast
  import pathlib
  path = pathlib.Path(experiment.__file__).with_name(module + ".py")
  tree = ast.parse(path.read_text())
  calls = {f"{n.func.value.id}.{n.func.attr}" for n in ast.walk(tree)
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
           and isinstance(n.func.value, ast.Name)}
  bases = {f"{b.value.id}.{b.attr}" for n in ast.walk(tree)
           if isinstance(n, ast.ClassDef) for b in n.bases
           if isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name)}
  assert "experiment.define_flags" in calls
  assert ("experiment.run_command" in calls or {
      "experiment.check_command_line", "experiment.one_line_errors"} <= calls)
  assert "experiment.Options" in bases
