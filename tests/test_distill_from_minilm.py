"""The distil-from-MiniLM recipe: the student's shape, and the whole chain
run on slices of the shipped data with the real teacher's first two layers
(its width, heads and vocabulary)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tfmodels.configs import load_config
from tfmodels.distillation.progressive import check_compatible
from tfmodels.summary import count

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Steps of `--models carved,carved_small_vocab`: slices, MiniLM's first
# layers (tiny), its import, the student vocabulary, the teacher's QA and spam, 3 conversions, 4 carvings
# and their QA / spam runs, the small-vocabulary student asked as an app,
# the teacher's 2 word-table probes, the benchmark.
STEPS_RUN = 1 + 1 + 1 + 1 + 2 + 3 + 4 + 4 + 1 + 2 + 1


def test_student_fits_the_teacher_and_the_budget():
  from tfmodels.checkpoints.hf import CONFIG_NAME, config_from_hf
  from tfmodels.checkpoints.teachers import teacher_dir
  path = os.path.join(teacher_dir("all-minilm-l6-v2"), CONFIG_NAME)
  with open(path) as f:
    minilm = config_from_hf(json.load(f), path)
  student = load_config("mobilebert_minilm")
  check_compatible(minilm, student)  # FMT and AT apply head for head
  share = (count(student, 384)["params_encoder"] /
           count(minilm, 384)["params_encoder"])
  assert 0.30 < share <= 0.40
  assert count(student, 384)["flops"] < 0.3 * count(minilm, 384)["flops"]


def _pairs(flags):
  """{--flag: value} of compress's flags."""
  return dict(zip(flags[::2], flags[1::2]))


def _ranks(value):
  return {k: int(v) for k, v in (kv.split("=") for kv in value.split(","))}


def _in_child(script):
  """The JSON `script` prints last, run in a child: the command defines its
  flags on import, which would clash with another experiment's imported by
  an earlier test in this process."""
  child = subprocess.run([sys.executable, "-c", script], cwd=REPO,
                         capture_output=True, text=True)
  assert child.returncode == 0, child.stderr[-3000:]
  return json.loads(child.stdout.splitlines()[-1])


_OWN_CARVES = """
import json, sys
import experiments.papers.distill_from_minilm as recipe
loaded = [m for m in sys.modules if m.startswith("experiments.demo")]
from experiments.demo import steps as demo_steps
layout = recipe.Layout("/out")
before = recipe.build_steps(layout, recipe.SCALES["full"])
demo_steps.STUDENT, demo_steps.CARVED_STUDENT = "other", ("--heads", 4)
same = recipe.build_steps(layout, recipe.SCALES["full"]) == before
print(json.dumps([loaded, same, {k: list(v) + [
    "--substitute", recipe.student_recipe(recipe.SCALES["full"], k, "qa")
    .substitute] for k, v in recipe.CARVES.items()}]))
"""


def test_the_carves_are_the_experiments_own_not_the_demos():
  """The demo's student (demo_steps.STUDENT, CARVED_STUDENT) can change
  without changing this experiment or its committed results: it loads no
  module of the demo, its steps ignore the demo's student, and its carved
  rows are the carves its committed results measured (what is cut, and the
  ops their student recipe substitutes)."""
  loaded, same_steps, carves = _in_child(_OWN_CARVES)
  assert loaded == [] and same_steps
  with open(os.path.join(REPO, "experiments", "results",
                         "distill_from_minilm.json")) as f:
    rows = {r["name"]: r for r in json.load(f)["rows"]}
  carved, low_rank = (_pairs(carves[m])
                      for m in ("carved", "carved_low_rank"))
  facts = rows["carved"]["carving"]
  assert (facts["heads"], facts["intermediate_size"]) == (
      carved["--heads"], carved["--intermediate_size"])
  assert facts["low_rank_ranks"] == _ranks(carved["--low_rank"])
  assert facts["substitution"]["substitutions"] == dict(
      kv.split("=") for kv in carved["--substitute"].split(","))
  assert rows["carved_low_rank"]["carving"]["low_rank_ranks"] == _ranks(
      low_rank["--low_rank"])
  assert low_rank["--substitute"] == "" and not rows["carved_low_rank"][
      "carving"].get("substitution")


_TRAINING_STEPS = """
import json
import experiments.papers.distill_from_minilm as recipe
steps = recipe.build_steps(recipe.Layout("/out"), recipe.SCALES["full"],
                           ("teacher", "carved", "carved_small_vocab"))
print(json.dumps({s.name: s.clean for s in steps
                  if "tfmodels.training.finetune" in s.command
                  or "tfmodels.training.compress" in s.command
                  or "experiments.papers.plateau" in s.command}))
"""


def test_a_training_step_run_again_starts_over():
  """A fine-tuning run forced or re-run after its teacher changed starts
  from an empty directory (pipeline `clean`): resuming the finished run's
  last checkpoint under another step count would train a schedule no
  `--train_steps` gives, against the old teacher's first steps."""
  clean = _in_child(_TRAINING_STEPS)
  assert {"carved_qa", "carved_small_vocab_spam", "teacher_qa",
          "carve_carved_spam"} <= set(clean)
  assert all(clean.values()), clean


_LEVER_ROWS = """
import json
import experiments.papers.distill_from_minilm as recipe
rows = ("carved",) + recipe.PLATEAU_ROWS
steps = recipe.build_steps(recipe.Layout("/out"), recipe.SCALES["full"],
                           ("teacher",) + rows)
print(json.dumps({s.name: s.command[3:] for s in steps
                  if any(s.name.startswith((m + "_qa", "carve_" + m + "_qa"))
                         for m in rows)}))
"""


def test_the_levers_rows_add_one_lever_each_on_the_same_carve():
  """Today's recipe, + its plateau, + layer-wise KD, + augmentation,
  LayerNorm + gelu kept, and the swap blended in by the student's run: each
  row one change from the layer-wise row (or the row before it)."""
  def flags(line):
    return {a: b for a, b in zip(line, line[1:] + [None])
            if a.startswith("--")}
  steps = {n: flags(c) for n, c in _in_child(_LEVER_ROWS).items()}
  cut = ("--heads", "--intermediate_size", "--low_rank")
  carved = steps["carve_carved_qa"]
  for row in ("carved_plateau", "carved_layerwise", "carved_augmented",
              "carved_layernorm", "carved_blended"):
    carve, student = steps[f"carve_{row}_qa"], steps[f"{row}_qa"]
    assert [carve[f] for f in cut] == [carved[f] for f in cut], row
    assert (student["--eval_split"], student["--eval_first_steps"],
            student["--train_steps"], student["--min_gain"]) == (
                "heldout", "200", "6400", "0.5"), row
    assert student["--task_kd"] == (
        "prediction" if row == "carved_plateau" else "carved"), row
    assert student["--data_dir"].endswith("_augmented") == (
        row == "carved_augmented"), row
    swaps_at_carve = row not in ("carved_layernorm", "carved_blended")
    assert carve.get("--substitute") == (
        "layernorm=nonorm,gelu=relu" if swaps_at_carve else None), row
    assert carve["--recover_steps"] == ("200" if swaps_at_carve else "0")
    assert (student.get("--substitute"), student.get("--blend_steps")) == ((
        "layernorm=nonorm,gelu=relu", "100") if row == "carved_blended"
                                         else (None, None)), row
  assert steps["carved_augmented_qa_augment"]["--copies"] == "2"
  today = steps["carved_qa"]
  assert (today["--task_kd"], today["--train_steps"]) == ("prediction", "400")
  assert "--eval_split" not in today


_CURVE_LINES = """
import json
import experiments.papers.distill_from_minilm as recipe
rows = [{"name": "teacher", "role": "teacher", "plateau": {"qa": {
             "steps": [200], "heldout_score": [60.0]}}},
        {"name": "carved_plateau", "role": "student", "plateau": {
             "qa": {"points": [{"steps": 200, "score": 61.25},
                               {"steps": 400, "score": 61.5}],
                    "steps": 400, "stopped": "a doubling gained 0.25"},
             "spam": None}},
        {"name": "carved_layerwise", "role": "student", "plateau": {
             "qa": {"points": [{"steps": 200, "score": 61.5},
                               {"steps": 400, "score": 61.0}],
                    "steps": 400, "stopped": "a doubling lost 0.5",
                    "kept_steps": 200}}},
        {"name": "carved", "role": "student"}]
print(json.dumps(recipe._student_curve_lines(rows)))
"""


def test_the_results_show_each_students_curve_and_why_it_ended():
  lines = _in_child(_CURVE_LINES)
  assert lines[-2] == ("- carved_plateau, qa: 200 steps 61.2, 400 steps "
                       "61.5; ended after 400 steps: a doubling gained 0.25")
  assert lines[-1] == ("- carved_layerwise, qa: 200 steps 61.5, 400 steps "
                       "61.0; ended after 400 steps: a doubling lost 0.5; "
                       "kept the weights of its best point (200 steps)")
  assert len([l for l in lines if l.startswith("- ")]) == 2


def test_unusable_results_dir_is_refused_before_any_work(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  result = subprocess.run(
      [sys.executable, "-m", "experiments.papers.distill_from_minilm", "--scale",
       "tiny", "--output_dir", str(tmp_path / "out"), "--results_dir",
       str(blocker / "results")], capture_output=True, text=True, cwd=REPO)
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --results_dir") and str(blocker) in last
  assert not (tmp_path / "out" / "data").exists()


def test_tiny_recipe_end_to_end(tmp_path):
  """The teacher and the carved rows (the teacher's vocabulary and its
  own) run at tiny scale; the PKT, scratch,
  KroneckerBERT and carved low-rank rows (their commands tested on their own:
  test_compression covers the low-rank carve) are carried over from the
  committed results, as `--models` does for a user."""
  out, results = tmp_path / "out", tmp_path / "results"
  results.mkdir()
  committed = os.path.join(REPO, "experiments", "results",
                           "distill_from_minilm.json")
  with open(committed) as f:
    committed_results = json.load(f)
  before = {r["name"]: r for r in committed_results["rows"]}
  shutil.copy(committed, results)
  command = [sys.executable, "-m", "experiments.papers.distill_from_minilm",
             "--scale", "tiny", "--output_dir", str(out), "--results_dir",
             str(results), "--jobs", "2", "--models",
             "carved,carved_small_vocab"]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  result = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                          env=env)
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  data = json.loads((results / "distill_from_minilm.json").read_text())
  assert set(data) == {"command", "host", "rows"}
  assert "--scale tiny" in data["command"] and "cores" in data["host"]
  rows = {r["name"]: r for r in data["rows"]}
  levers = ["carved_plateau", "carved_layerwise", "carved_augmented",
            "carved_layernorm", "carved_blended"]
  assert list(rows) == ["teacher", "student", "baseline", "kronecker",
                        "carved", "carved_low_rank", "carved_small_vocab",
                        *levers]
  assert [r["role"] for r in data["rows"]] == [
      "teacher", "student", "baseline", "student", "student", "student",
      "student", *["student"] * len(levers)]
  fields = {"name", "role", "method", "encoder_params", "qa_f1", "qa_em",
            "spam_acc", "qa_f1_float_int8_length", "qa_f1_int8",
            "int8_size_mb", "seq_length",
            "int8_ms", "word_table_em", "init", "norm", "activation",
            "kd_steps", "train_steps", "minutes", "carving", "vocab_size",
            "table_params", "task_library"}
  for name in ("student", "baseline", "kronecker",
               "carved_low_rank"):  # carried, with the teacher they faced
    assert set(rows[name]) == fields | {"measured_by", "teacher_int8_ms",
                                        "teacher_qa_f1", "teacher_spam_acc"}
    assert rows[name]["teacher_int8_ms"] == before[name].get(
        "teacher_int8_ms", before["teacher"]["int8_ms"])
    assert rows[name]["teacher_qa_f1"] == before[name].get(
        "teacher_qa_f1", before["teacher"]["qa_f1"])
    assert rows[name]["vocab_size"] == 30522
    assert rows[name]["qa_f1"] == before[name]["qa_f1"]
    assert rows[name]["measured_by"] == before[name].get(
        "measured_by", committed_results["command"])
    assert not (out / "runs" / name).exists()
  for name in levers:  # carried too, each with its curve and recipe
    assert rows[name]["qa_f1"] == before[name]["qa_f1"]
    assert rows[name]["plateau"] == before[name]["plateau"]
    assert rows[name]["measured_by"] == before[name].get(
        "measured_by", committed_results["command"])
    assert not (out / "runs" / name).exists()
  for name in ("teacher", "carved", "carved_small_vocab"):
    r = rows[name]
    assert set(r) == fields | ({"plateau"} if name == "teacher" else set())
    assert (r["vocab_size"] == 30522) == (name != "carved_small_vocab")
    assert r["minutes"] is not None and r["minutes"] >= 0
    assert r["seq_length"] == 64
    assert 0 <= r["qa_f1"] <= 100 and 0 <= r["qa_f1_int8"] <= 100
    assert 0 <= r["qa_f1_float_int8_length"] <= 100
    assert 0 <= r["spam_acc"] <= 100
    assert set(r["int8_ms"]) == {"1", "2"} and min(r["int8_ms"].values()) > 0
  assert all(0 <= v <= 100 for v in rows["teacher"]["word_table_em"].values())
  # The tiny scale's teacher: MiniLM's first 2 of 6 layers.
  teacher_params = 22_713_216 - 4 * 1_774_464
  assert rows["teacher"]["encoder_params"] == teacher_params
  # The teacher ran to its plateau: doublings from 2 steps, capped at 4
  # (tiny scale), each scored on the slice held out of train.
  for task in ("qa", "spam"):
    curve = rows["teacher"]["plateau"][task]
    assert curve["steps"] == [2, 4] and curve["chosen_steps"] == 4
    assert len(curve["heldout_score"]) == 2 and curve["heldout_examples"] == 4
    assert curve["last_doubling_gain"] == pytest.approx(
        curve["heldout_score"][1] - curve["heldout_score"][0], abs=0.011)
  assert rows["teacher"]["train_steps"] == 2 * (2 + 4)
  assert [rows[m]["init"] for m in rows] == [
      "teacher", "random", "random", "teacher", "teacher", "teacher",
      "teacher", *["teacher"] * len(levers)]
  assert (rows["teacher"]["norm"], rows["teacher"]["activation"]) == (
      "layer_norm", "gelu")
  assert (rows["student"]["norm"], rows["student"]["activation"]) == (
      "no_norm", "relu")
  # The carved students: what compress kept, in the on-device form.
  carved, low_rank = rows["carved"], rows["carved_low_rank"]
  assert (carved["norm"], carved["activation"]) == ("no_norm", "relu")
  assert carved["carving"]["heads"] == 6
  assert carved["encoder_params"] <= 0.4 * teacher_params
  assert carved["kd_steps"] == 2 * 2 + 2 + 2  # recovery per task + task KD
  assert low_rank["carving"]["low_rank_ranks"]["query"] == 96
  assert low_rank["norm"] == "layer_norm"
  # int8 files: the carved student's is the smaller.
  assert carved["int8_size_mb"] < rows["teacher"]["int8_size_mb"]
  # The small-vocabulary student: carved narrower (FFN 384, table rank
  # 96), on its learned vocabulary (300 pieces asked, plus every ASCII
  # character), a smaller table and file.
  small = rows["carved_small_vocab"]
  assert 300 <= small["vocab_size"] <= 300 + 2 * 94
  assert small["carving"]["vocabulary"]["vocab_size"] == small["vocab_size"]
  assert small["carving"]["heads"] == carved["carving"]["heads"]
  assert small["carving"]["intermediate_size"] == 384
  assert small["table_params"] == small["vocab_size"] * 96 + 96 * 384
  assert carved["table_params"] == 30522 * 128 + 128 * 384
  # Per layer (2): 128 fewer FFN neurons (two kernels and a bias).
  assert small["encoder_params"] == carved["encoder_params"] - (
      carved["table_params"] - small["table_params"]) - 2 * 128 * (
          2 * 384 + 1)
  assert small["int8_size_mb"] < carved["int8_size_mb"] - 3
  assert 0 <= small["qa_f1"] <= 100 and 0 <= small["spam_acc"] <= 100
  # Its int8 QA file asked as an app asks, with the vocabulary it carries:
  # the twin here (the Task Library feeds [1, 384] alone, and the tiny
  # scale exports at 64; test_vocab_transfer asks it of a 384 file).
  assert carved["task_library"] is None and small["task_library"] is None
  answers = json.loads((out / "app" / "carved_small_vocab" /
                        "answers.json").read_text())["answers"]
  assert len(answers) == 2 and all(isinstance(a["answer"], str)
                                   for a in answers)
  table = (results / "distill_from_minilm.md").read_text()
  assert "| teacher: all-MiniLM-L6-v2" in table
  assert "of the teacher's QA F1" in table and "last doubling" in table
  assert "| carved: carved from the fine-tuned MiniLM" in table
  assert ("| carved_small_vocab: carved from the fine-tuned MiniLM: 6 of 12 "
          "heads, 384 of 1536") in table
  assert "| 30,522 (3.96M) |" in table
  assert "steps," in table and " min |" in table
  assert "Rows carried over from an earlier run" in table
  assert (results / "distill_from_minilm.png").stat().st_size > 10_000
  # A re-run finds every step done and only rewrites the results.
  again = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                         env=env)
  assert again.returncode == 0
  assert again.stdout.count("done, skipped") == STEPS_RUN, again.stdout[-2000:]


_TEACHER_STEPS = """
import dataclasses, json
import experiments.papers.distill_from_minilm as recipe
scale = dataclasses.replace(recipe.SCALES["full"], teacher_steps=(3200, 0))
steps = recipe.build_steps(recipe.Layout("/out"), scale, ("teacher",))
print(json.dumps({s.name: s.command for s in steps
                  if "experiments.papers.plateau" in s.command}))
"""


def test_a_known_plateau_trains_the_teacher_once():
  """--teacher_qa_steps 3200: the QA teacher's curve is the one run of
  3,200 steps (first point and cap alike); spam still finds its plateau."""
  commands = _in_child(_TEACHER_STEPS)

  def flag(task, name):
    command = commands[f"teacher_{task}"]
    return command[command.index(name) + 1]

  assert (flag("qa", "--first_steps"), flag("qa", "--max_steps")) == (
      "3200", "3200")
  assert (flag("spam", "--first_steps"), flag("spam", "--max_steps")) == (
      "100", "6400")


_PLOT = """
import json, os, sys, tempfile
import experiments.papers.distill_from_minilm as recipe
out = tempfile.mkdtemp()
rows = [{"name": m, "int8_ms": {"1": 10.0 + i}, "qa_f1_int8": 50.0 + i}
        for i, m in enumerate(recipe.MODELS)]
path = os.path.join(out, "plot.png")
recipe.plot(recipe.Layout(out), {"rows": rows}, path)
print(json.dumps([len(recipe.MODELS), os.path.getsize(path)]))
"""


def test_the_plot_has_a_colour_for_every_row():
  models, size = _in_child(_PLOT)
  assert models == 12 and size > 10_000
