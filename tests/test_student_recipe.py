"""The student recipe is said once: ship, distill_from_minilm and
mixed_vocab_student build their carve and student steps from it, and a flag
of the commands it drives that no longer exists fails as the steps are
built."""

import json
import os
import subprocess
import sys

import pytest

from experiments.ship import student_recipe
from experiments.ship.student_recipe import command, command_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each consumer imported after RECIPE's defaults change (the experiments
# define flags on import: one child each); prints every compress and
# finetune command line of its carved student.
_CHANGED = """
import dataclasses, json, sys
from experiments.ship import student_recipe
student_recipe.RECIPE = dataclasses.replace(
    student_recipe.RECIPE, substitute="gelu=relu", recover_learning_rate=3e-4,
    task_kd="hidden", learning_rate=7e-4, warmup_fraction=0.25,
    hidden_kd_weight=0.5,
    **json.loads(sys.argv[2]))
consumer = sys.argv[1]
if consumer == "ship":
  from experiments.ship import steps as ship_steps
  plan = ship_steps.Plan(teacher="/t", task="squad", data_dir="/d",
                         budget={"target_params": 0.4})
  steps = ship_steps.build_steps(plan, ship_steps.Layout("/out"), {
      "heads": 2, "intermediate_size": 64, "table_rank": None})
  names = ("carve", "student")
elif consumer == "distill_from_minilm":
  from experiments.papers import distill_from_minilm as e
  steps = e.build_steps(e.Layout("/out"), e.SCALES["full"],
                        ("teacher", "carved_layerwise"))
  names = ("carve_carved_layerwise_qa", "carved_layerwise_qa",
           "carve_carved_layerwise_spam", "carved_layerwise_spam")
else:
  from experiments.papers import mixed_vocab_student as e
  steps = e.build_steps(e.Layout("/out"), e.SCALES["full"],
                        {"teacher": "/t.json", "student": "/s.json"},
                        ("teacher", "carved"))
  names = ("carve", "finetune_carved")
print(json.dumps({s.name: [s.command, s.output, s.inputs] for s in steps
                  if s.name in names or s.name.startswith("heldout")
                  or s.name.endswith("_augment")}))
"""


def _flags(command_line):
  """{--flag: value} of a `python -m module --flag value ...` line."""
  args = command_line[3:]
  return {a: b for a, b in zip(args, args[1:] + [None])
          if a.startswith("--")}


def _consumer_steps(consumer, **changed):
  """{step name: [command, output, inputs]} of `consumer`'s carved student
  when RECIPE's defaults change (and by `changed`)."""
  child = subprocess.run([sys.executable, "-c", _CHANGED, consumer,
                          json.dumps(changed)],
                         cwd=REPO, capture_output=True, text=True)
  assert child.returncode == 0, child.stderr[-3000:]
  return json.loads(child.stdout.splitlines()[-1])


@pytest.mark.parametrize("consumer", ["ship", "distill_from_minilm",
                                      "mixed_vocab_student"])
def test_a_changed_default_reaches_every_student(consumer):
  steps = _consumer_steps(consumer)
  commands = {name: step[0] for name, step in steps.items()
              if step[0][2] in ("tfmodels.training.compress",
                                "tfmodels.training.finetune")}
  assert len(commands) in (2, 4), commands
  for name, line in commands.items():
    flags = _flags(line)
    if "tfmodels.training.compress" in line:
      assert (flags["--substitute"], flags["--recover_learning_rate"]) == (
          "gelu=relu", "0.0003"), name
    else:
      assert "tfmodels.training.finetune" in line, name
      assert (flags["--learning_rate"], flags["--warmup_fraction"]) == (
          "0.0007", "0.25"), name
      if consumer == "mixed_vocab_student":  # another vocabulary: logits
        assert flags["--task_kd"] == "prediction", name
        continue
      assert flags["--task_kd"] == "hidden", name
      assert (flags["--hidden_kd_weight"], flags["--attention_kd_weight"]) == (
          "0.5", "1.0"), name


# distill_from_minilm's rows take the slice's sizes from its scale (its
# test_distill_from_minilm), mixed_vocab_student trains for fixed steps.
@pytest.mark.parametrize("consumer", ["ship"])
def test_a_held_out_slice_reaches_every_student(consumer):
  """recipe.heldout > 0: a step holds the slice out of train, and the
  student trains on the rest, scored on the slice until it plateaus."""
  steps = _consumer_steps(consumer, heldout=50, eval_first_steps=25,
                          max_minutes=30.0)
  held = {n: s for n, s in steps.items() if n.startswith("heldout")}
  trained = {n: s for n, s in steps.items()
             if "tfmodels.training.finetune" in s[0]}
  assert len(held) == len(trained) in (1, 2), list(steps)
  for (_, (cut, out, _)), (name, (line, _, inputs)) in zip(
      sorted(held.items()), sorted(trained.items())):
    assert "tfmodels.data.heldout" in cut and _flags(cut)["--examples"] == "50"
    assert _flags(cut)["--output_dir"] == out
    flags = _flags(line)
    assert flags["--data_dir"] == out and out in inputs, name
    assert (flags["--eval_split"], flags["--eval_first_steps"],
            flags["--min_gain"], flags["--max_minutes"]) == (
                "heldout", "25", "0.5", "30.0"), name
  assert not any("--eval_split" in s[0] for s in _consumer_steps(
      consumer, heldout=0).values())


@pytest.mark.parametrize("consumer", ["ship", "distill_from_minilm"])
def test_augmented_copies_reach_every_student(consumer):
  """recipe.augment_copies > 0: a step augments train after the slice is
  held out, with the teacher's word table, and the student trains on it."""
  steps = _consumer_steps(consumer, heldout=50, augment_copies=3,
                          augment_share=0.3)
  made = {n: s for n, s in steps.items() if n.endswith("_augment")}
  held = {n: s for n, s in steps.items() if n.startswith("heldout")}
  trained = {n: s for n, s in steps.items()
             if "tfmodels.training.finetune" in s[0]}
  assert len(made) == len(held) == len(trained) in (1, 2), list(steps)
  for (_, (line, out, inputs)), (_, (_, held_out, _)), (name, (
      student, _, student_inputs)) in zip(sorted(made.items()),
                                          sorted(held.items()),
                                          sorted(trained.items())):
    flags, taught = _flags(line), _flags(student)
    assert "tfmodels.data.augment" in line
    assert (flags["--copies"], flags["--replace_share"], flags[
        "--neighbours"]) == ("3", "0.3", "15")
    assert flags["--data_dir"] == held_out and held_out in inputs
    assert flags["--teacher_dir"] == taught["--teacher_dir"]
    assert flags["--output_dir"] == out == taught["--data_dir"], name
    assert out in student_inputs
  assert not any(n.endswith("_augment") for n in _consumer_steps(consumer))


# ship_report defines its flags on import: read in a child.
_PLATEAU_LINES = """
import json, sys
from experiments.ship.report import _plateau_lines
plateau = json.loads(sys.argv[1])
print(json.dumps([_plateau_lines(plateau, "f1"), _plateau_lines(None, "f1"),
                  _plateau_lines(dict(plateau, kept_steps=100), "f1")]))
"""


def test_the_report_shows_the_students_curve():
  plateau = {"points": [{"steps": 100, "score": 61.25},
                        {"steps": 200, "score": 61.5}], "steps": 200,
             "stopped": "a doubling (100 -> 200 steps) gained 0.25 < 0.5 "
                        "points"}
  child = subprocess.run([sys.executable, "-c", _PLATEAU_LINES,
                          json.dumps(plateau)], cwd=REPO,
                         capture_output=True, text=True)
  assert child.returncode == 0, child.stderr[-3000:]
  lines, none, kept = json.loads(child.stdout.splitlines()[-1])
  assert lines[2] == (
      "Scored on the slice of train held out (f1, points) as it trained: "
      "100 steps 61.2, 200 steps 61.5. It ended after 200 steps: a doubling "
      "(100 -> 200 steps) gained 0.25 < 0.5 points.")
  assert none == []
  assert kept[2] == lines[2][:-1] + (
      "; it kept the weights of its best point (100 steps).")


def test_a_flag_the_command_lacks_fails_as_the_steps_are_built(monkeypatch):
  from experiments.ship import steps as ship_steps
  plan = ship_steps.Plan(teacher="/t", task="squad", data_dir="/d",
                         budget={"target_params": 0.4})
  split = {"heads": 2, "intermediate_size": 64, "table_rank": 32}
  layout = ship_steps.Layout("/out")
  assert any(s.name == "student" for s in
             ship_steps.build_steps(plan, layout, split))
  renamed = command_flags("tfmodels.training.finetune") - {"task_kd"}
  monkeypatch.setattr(student_recipe, "command_flags", lambda module: (
      renamed if module == "tfmodels.training.finetune" else
      command_flags(module)))
  with pytest.raises(ValueError, match="^tfmodels.training.finetune has no "
                     "flag --task_kd$"):
    ship_steps.build_steps(plan, layout, split)


def test_command_checks_flags_and_keeps_the_line(tmp_path, monkeypatch):
  (tmp_path / "tool_options_probe.py").write_text(
      "import dataclasses\n"
      "from tfmodels.command_options import define_flags, option\n"
      "from tfmodels.training.run_flags import RunOptions\n"
      "@dataclasses.dataclass(frozen=True, kw_only=True)\n"
      "class ProbeOptions(RunOptions):\n"
      "  from_: str = option('', 'a keyword')\n"
      "  steps: int = option(1, 'steps')\n"
      "  plain: int = dataclasses.field(default=0)  # no flag\n"
      "define_flags(ProbeOptions)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  assert command("tool_options_probe", "--from", "x", "--steps", 3,
                 "--train_steps=4") == [
                     sys.executable, "-m", "tool_options_probe", "--from",
                     "x", "--steps", "3", "--train_steps=4"]
  for wrong in ("--plain", "--from_", "--nope"):
    with pytest.raises(ValueError, match=f"has no flag {wrong}$"):
      command("tool_options_probe", wrong, 1)


_REAL_FLAGS = """
import importlib, json, sys
from tfmodels.command_options import flag_name, option_fields
module = importlib.import_module(sys.argv[1])
print(json.dumps(sorted(flag_name(f) for f in option_fields(
    getattr(module, sys.argv[2])))))
"""


@pytest.mark.parametrize("module, options", [
    ("tfmodels.training.compress", "CompressOptions"),
    ("tfmodels.training.finetune", "FinetuneOptions"),
    ("tfmodels.data.augment", "AugmentOptions")])
def test_the_flags_read_from_source_are_the_commands_own(module, options):
  child = subprocess.run([sys.executable, "-c", _REAL_FLAGS, module, options],
                         cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert child.returncode == 0, child.stderr[-3000:]
  assert sorted(command_flags(module)) == json.loads(
      child.stdout.splitlines()[-1])
