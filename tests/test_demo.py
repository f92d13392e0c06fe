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

from experiments import demo_steps as demo
from experiments.demo_results import (QA_F1_TARGET, teacher_vs_student,
                                      verdict)
from experiments.pipeline import Step, StepError, run_steps
from experiments.result_files import read_marker

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
  layout = demo.Layout(str(tmp_path))
  scale = demo.SCALES["full"]
  steps = demo.build_steps(scale, layout)
  by_name = {s.name: s for s in steps}
  assert [s.name for s in steps] == [
      "teacher", "teacher_qa", "carve_qa", "carved_qa", "convert_carved_qa",
      "app", "teacher_spam", "carve_spam", "carved_spam",
      "convert_carved_spam", "convert_teacher_qa", "bench_host", "report"]
  # The scheduler's memory budget knows every step's measured peak.
  assert {n for n, s in by_name.items() if s.memory_mb} == set(by_name) - {
      "report"}
  # Every step belongs to a stage; stage names are what --force takes.
  staged = {n for names in demo.STAGES.values() for n in names}
  assert set(by_name) <= staged
  assert demo.expand_force(["convert", "teacher"]) == {
      "teacher", "convert_carved_qa", "convert_carved_spam",
      "convert_teacher_qa"}
  assert demo.expand_force(["carve"]) == {"carve_qa", "carve_spam"}
  assert demo.expand_force(["finetune"]) == {
      "teacher_qa", "teacher_spam", "carved_qa", "carved_spam"}
  for gone in ("students", "evaluate", "pkt", "scratch", "data_train"):
    with pytest.raises(Exception, match=f"--force {gone}: not a stage"):
      demo.expand_force([gone])
  # Each step comes after the steps it reads; only the report reads all.
  seen = set()
  for step in steps:
    assert all(i in seen for i in step.inputs), step.name
    seen.add(step.output)
  assert set(by_name["report"].inputs) == seen - {by_name["report"].output}
  flags = {name: _flags(s.command) for name, s in by_name.items()}
  # The teacher is the real MiniLM, fine-tuned as before.
  assert flags["teacher"]["--from"] == "hf"
  assert flags["teacher"]["--name"] == "all-minilm-l6-v2"
  assert flags["teacher_qa"]["--train_steps"] == "160"
  assert flags["teacher_spam"]["--train_steps"] == "40"
  assert "--teacher_dir" not in flags["teacher_qa"]
  # The student is carved out of the fine-tuned teacher of each task, with
  # the one set of carving flags, into a model directory one level below
  # the step's output (which holds the step's log and marker).
  assert demo.CARVED_STUDENT == (
      "--heads", 6, "--intermediate_size", 512, "--low_rank",
      "word_embeddings=128", "--substitute", "layernorm=nonorm,gelu=relu")
  for task, data in (("qa", "wordnet_qa"), ("spam", "spam")):
    carve, teacher = by_name[f"carve_{task}"], layout.finetuned(
        f"teacher_{task}")
    f = flags[f"carve_{task}"]
    assert carve.command[2] == "tfmodels.training.compress"
    assert f["--teacher_dir"] == teacher and teacher in carve.inputs
    assert f["--data_dir"].endswith(os.path.join("data", data))
    assert carve.output == layout.path("runs", f"carved_{task}")
    assert f["--model_dir"] == os.path.join(carve.output, "model")
    assert (f["--heads"], f["--intermediate_size"], f["--low_rank"],
            f["--substitute"]) == ("6", "512", "word_embeddings=128",
                                   "layernorm=nonorm,gelu=relu")
    assert f["--recover_steps"] == "30"
    assert f["--calibration_examples"] == "128"
    assert "--overwrite" in carve.command and carve.clean
    # Task-stage distillation of the carved student from the same task's
    # fine-tuned teacher (soft targets + labels).
    ft = flags[f"carved_{task}"]
    assert ft["--init_dir"] == f["--model_dir"]
    assert ft["--teacher_dir"] == teacher
    assert ft["--task_kd"] == "prediction"
    assert ft["--learning_rate"] == "0.0002"
    assert ft["--batch_size"] == "16"
    assert set(by_name[f"carved_{task}"].inputs) >= {carve.output, teacher}
  assert flags["carved_qa"]["--train_steps"] == "250"
  assert flags["carved_spam"]["--train_steps"] == "40"
  assert flags["carved_qa"]["--max_seq_length"] == "96"
  # Conversions: both carved students, scored on dev; the teacher's QA
  # model calibrated on text only. QA models go out at the app's length.
  for name in ("carved_qa", "carved_spam"):
    assert flags[f"convert_{name}"]["--model_dir"] == layout.finetuned(name)
    assert "--data_dir" in flags[f"convert_{name}"]
    assert flags[f"convert_{name}"]["--modes"] == "float32,int8"
  assert "--data_dir" not in flags["convert_teacher_qa"]
  for name in ("carved_qa", "teacher_qa"):
    assert flags[f"convert_{name}"]["--max_seq_length"] == "384"
  assert not any("--qat_steps" in s.command for s in steps)
  # The app gets the carved student's int8 QA model; the benchmark times
  # every converted model.
  assert demo.APP_MODEL == ("carved_qa", "int8")
  assert flags["app"]["--model"] == layout.tflite_file("carved_qa", "int8")
  assert layout.tflite_file("carved_spam", "int8") in by_name[
      "bench_host"].command
  assert by_name["bench_host"].alone and "bench_phone" not in by_name
  # Nothing of the random-layer students is left.
  for step in steps:
    assert not any(w in " ".join(step.command) for w in (
        "pkt", "scratch", "create_pretraining_data", "distill",
        "--pretraining_data", "mobilebert_minilm")), step.name
  # A demo of another size in the same directory is refused.
  json.dump({"sizes": {"student_steps": 1}}, open(layout.plan, "w"))
  with pytest.raises(Exception, match="holds a demo of another size"):
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


def test_a_plan_with_the_old_length_names_is_the_same_demo(tmp_path):
  # Sequence lengths are called max_seq_length everywhere now; a demo
  # whose plan.json has the old names is still this demo, not refused.
  layout = demo.Layout(str(tmp_path))
  record = demo.check_plan(layout, "full", demo.SCALES["full"])
  old_names = {v: k for k, v in demo.RENAMED_SIZES.items()}
  old = dict(record, sizes={old_names.get(k, k): v
                            for k, v in record["sizes"].items()})
  assert "qa_seq_length" in old["sizes"]
  json.dump(old, open(layout.plan, "w"))
  assert demo.check_plan(layout, "full", demo.SCALES["full"]) == record
  assert demo.read_plan(layout.plan)["sizes"] == record["sizes"]
  assert demo.task_step(demo.STUDENT, "qa") == "carved_qa"
  assert demo.convert_step(demo.STUDENT, "spam") == "convert_carved_spam"


def test_demo_qat_steps_reach_the_carved_qa_conversion(tmp_path):
  import dataclasses
  layout = demo.Layout(str(tmp_path))
  scale = dataclasses.replace(demo.SCALES["full"], qat_steps=50)
  by_name = {s.name: s for s in demo.build_steps(scale, layout)}
  assert _flags(by_name["convert_carved_qa"].command)["--qat_steps"] == "50"
  assert "--qat_steps" not in by_name["convert_carved_spam"].command
  assert "--qat_steps" not in by_name["convert_teacher_qa"].command


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
  # Every experiment takes the repository's place from experiments.paths.
  from experiments import paths
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
  summary["steps"] = [{"name": "teacher_qa", "peak_memory_mb": 1800.0},
                      {"name": "carve_qa", "peak_memory_mb": 2100.0},
                      {"name": "carved_qa", "peak_memory_mb": None}]
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
  assert rows["int8_ms_1_thread"]["student"] is None


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


# ------------------------------------------------- the memory budget
def test_a_budget_no_step_fits_in_is_refused_before_any_work(tmp_path):
  """--memory_budget_gb 0.5 was taken although every step the budget
  schedules needs more (the scheduler then starts each alone, over it),
  and the header still said "2 at a time"."""
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
         "CUDA_VISIBLE_DEVICES": ""}
  out = tmp_path / "out"
  result = subprocess.run(
      [sys.executable, "-m", "experiments.demo", "--output_dir", str(out),
       "--memory_budget_gb", "0.5"], capture_output=True, text=True,
      env=env, cwd=REPO, timeout=120)  # a run that was not refused: killed
  lines = [l for l in result.stderr.strip().splitlines()
           if not l.startswith(("WARNING: All log messages", "I0000",
                                "W0000", "E0000"))]
  assert (result.returncode, lines, result.stdout) == (1, [
      "error: --memory_budget_gb 0.5: below every step's measured peak "
      "(the smallest: app, 1000 MB); give at least 0.98"], "")
  assert os.listdir(tmp_path) == []


def test_the_header_says_how_many_steps_run_at_a_time(tmp_path):
  """What pipeline.run_steps does with the budget: steps that read nothing
  of each other start side by side while their measured peaks fit, and
  one above the whole budget still runs, alone."""
  full = demo.build_steps(demo.SCALES["full"], demo.Layout(str(tmp_path)))
  assert demo.schedule(full, 2, 12.0) == ("2 at a time", None)
  assert demo.schedule(full, 3, 12.0) == ("3 at a time", None)
  # At most three steps are ever ready together (the QA chain, the spam
  # chain, the teacher's QA conversion).
  assert demo.schedule(full, 8, 100.0) == ("3 at a time", None)
  assert demo.schedule(full, 3, 4.0) == (
      "up to 2 at a time (as their measured peaks fit in "
      "--memory_budget_gb 4)", None)
  # README: "--memory_budget_gb 2.5, the steps run one at a time".
  assert demo.schedule(full, 2, 2.5) == (
      "one at a time (no two steps' measured peaks fit in "
      "--memory_budget_gb 2.5)", None)
  assert demo.schedule(full, 2, 0.98) == (
      "one at a time (no two steps' measured peaks fit in "
      "--memory_budget_gb 0.98)",
      "warning: --memory_budget_gb 0.98: the measured peak of 10 of 13 "
      "steps is above it (the largest: convert_teacher_qa, 2300 MB); each "
      "of them runs alone, over the budget")
  assert demo.schedule(full, 1, 12.0) == ("one at a time", None)
  demo.check_memory_budget(full, 0.98)  # app's 1000 MB fits
  with pytest.raises(demo.DemoError, match=r"give at least 0\.98$"):
    demo.check_memory_budget(full, 0.97)
  # The tiny demo measures no peak: the budget holds nothing back.
  tiny = demo.build_steps(demo.SCALES["tiny"], demo.Layout(str(tmp_path)))
  demo.check_memory_budget(tiny, 0.01)
  assert demo.schedule(tiny, 3, 0.01) == ("3 at a time", None)


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
  """Names of the steps a run started."""
  return {line.split("] ", 1)[1].split(":")[0]
          for line in stdout.splitlines()
          if line.startswith("[") and ": done, skipped" not in line
          and "finished in" not in line}


def test_tiny_demo_end_to_end(tmp_path):
  out = tmp_path / "demo_output"
  stdout, _ = _demo(out)
  assert f"the report is {out}/REPORT.md" in stdout
  plan = json.loads((out / "plan.json").read_text())
  assert _ran(stdout) == {s["name"] for s in plan["steps"]}
  assert plan["carved_student"] == [str(a) for a in demo.CARVED_STUDENT]

  # The report, its figures and every number in it.
  report = (out / "REPORT.md").read_text()
  for section in ("## Headline", "## Carving", "## Training",
                  "## Conversion and validation", "## Latency",
                  "## Model sizes", "## The Android app", "## Steps",
                  "**Teacher vs carved student.**",
                  "**Does the carved student keep 90% of the teacher's QA "
                  "F1?**"):
    assert section in report
  for gone in ("MLM", "scratch", "PKT", "pkt"):
    assert gone not in report, gone
  summary = json.loads((out / "report" / "summary.json").read_text())
  assert set(summary["figures"]) == {"losses", "tasks", "quantization",
                                     "latency", "sizes"}
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
  assert teacher["params_encoder"] == 22_713_216
  assert (teacher["heads"], teacher["normalization"], teacher["act"]) == (
      12, "layer_norm", "gelu")
  assert (carved["heads"], carved["normalization"], carved["act"]) == (
      6, "no_norm", "relu")
  assert carved["intermediate_size"] < teacher["intermediate_size"]
  # The carving facts, for both tasks, as compress wrote them.
  for task in ("qa", "spam"):
    facts = summary["models"]["carved"]["carving"][task]
    assert facts["heads"] == 6
    assert 0 < facts["params_share"] <= 0.4
    assert facts["intermediate_size"] % 32 == 0
    assert facts["low_rank_ranks"] == {"word_embeddings": 128}
    assert facts["calibration_examples"] == plan["sizes"][
        "calibration_examples"]
    assert facts["recovery"]["steps"] == plan["sizes"]["recover_steps"]
    for key in ("loss_before", "loss_after"):
      assert facts["recovery"][key] >= 0
    assert (out / "runs" / f"carved_{task}" / "model" /
            "carving.json").is_file()
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
             for k, r in sides.items()
             if k not in ("qa_f1_int8", "peak_memory_mb")), sides
  assert sides["qa_f1_int8"]["student"] is not None  # the teacher's: n/a
  assert sides["encoder_params"]["student_share"] <= 0.4
  assert sides["int8_size_mb"]["student_share"] < 0.6
  for step in summary["steps"]:  # the report's own marker is not there yet
    assert "peak_memory_mb" in step
    assert step["name"] == "report" or step["seconds"] > 0, step

  # Conversion reports and the .tflite files they describe.
  for name in demo.CONVERTED:
    conv = json.loads((out / "tflite" / name / f"{name}_report.json")
                      .read_text())
    assert conv["passed"] and set(conv["modes"]) == {"float32", "int8"}
    assert conv["modes"]["float32"]["difference"]["max_abs"] < 1e-3
    for mode in ("float32", "int8"):
      with open(out / "tflite" / name / f"{name}_{mode}.tflite", "rb") as f:
        assert f.read(8)[4:] == b"TFL3"
  int8 = summary["conversions"]["carved_qa"]["modes"]["int8"]
  assert int8["size_mb"] < summary["conversions"]["carved_qa"]["modes"][
      "float32"]["size_mb"]

  # The host benchmark: every model x mode measured.
  from android_bench.results import find_runs, load_run
  runs = [load_run(p) for p in find_runs([str(out / "bench" / "host")])]
  assert len(runs) == 1
  assert {c["status"] for c in runs[0]["cells"]} == {"ok"}
  assert {(r["model"], r["mode"]) for r in summary["latency"]} == {
      (n, m) for n in demo.CONVERTED for m in ("float32", "int8")}

  # The app's files and the twin's answers.
  assets = out / "app_assets"
  assert (assets / "qa_model.tflite").read_bytes() == (
      out / "tflite" / "carved_qa" / "carved_qa_int8.tflite").read_bytes()
  assert (assets / "vocab.txt").read_bytes() == open(
      os.path.join(REPO, "data", "vocab", "uncased_vocab.txt"), "rb").read()
  assert "-PqaModel=" in (assets / "README.md").read_text()
  answers = json.loads((assets / "answers.json").read_text())["answers"]
  assert len(answers) == plan["sizes"]["questions"]
  for a in answers:
    assert a["question"].startswith("Which word means")
    assert isinstance(a["answer"], str) and "window(s)" in a["timing"]
    assert 0 <= a["f1"] <= 1
  # The Task Library's BertQuestionAnswerer read the app's model (make
  # setup installs it; CI always has it).
  from experiments.paths import TASK_LIBRARY_PYTHON
  if os.environ.get("CI") or os.path.exists(TASK_LIBRARY_PYTHON):
    library = json.loads((assets / "answers.json").read_text())[
        "task_library"]
    assert library["api"].endswith("BertQuestionAnswerer")
    assert all(isinstance(a["task_library_answer"], str) for a in answers)
    assert "Task Library's `BertQuestionAnswerer`" in report

  # Re-running skips every step (and is quick).
  stdout, seconds = _demo(out)
  assert _ran(stdout) == set()
  assert stdout.count("done, skipped") == len(plan["steps"])
  assert seconds < 30

  # Deleting one step's output re-runs it and what reads it, nothing else.
  before = (out / "report" / "summary.json").stat().st_mtime
  subprocess.run(["rm", "-r", str(out / "tflite" / "carved_spam")],
                 check=True)
  stdout, _ = _demo(out)
  assert _ran(stdout) == {"convert_carved_spam", "bench_host", "report"}
  assert (out / "report" / "summary.json").stat().st_mtime > before
