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
from experiments.demo_results import verdict
from experiments.pipeline import Step, StepError, run_steps

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
def test_demo_chain(tmp_path):
  layout = demo.Layout(str(tmp_path))
  scale = demo.SCALES["full"]
  steps = demo.build_steps(scale, layout)
  by_name = {s.name: s for s in steps}
  # Every step belongs to a stage; stage names are what --force takes.
  staged = {n for names in demo.STAGES.values() for n in names}
  assert set(by_name) <= staged
  assert demo.expand_force(["convert", "teacher"]) == {
      "teacher", "convert_pkt_qa", "convert_pkt_spam", "convert_teacher_qa"}
  with pytest.raises(Exception, match="--force nope: not a stage"):
    demo.expand_force(["nope"])
  # Each step comes after the steps it reads; only the report reads all.
  seen = set()
  for step in steps:
    assert all(i in seen for i in step.inputs), step.name
    seen.add(step.output)
  assert set(by_name["report"].inputs) == seen - {by_name["report"].output}
  # Same budget for both students; the distilled one reads the teacher.
  arg = lambda name, flag: by_name[name].command[
      by_name[name].command.index(flag) + 1]
  assert arg("pkt", "--train_steps") == arg("scratch", "--train_steps") == \
      str(scale.student_steps)
  assert arg("pkt", "--strategy") == "pkt"
  assert layout.run("teacher") in by_name["pkt"].inputs
  assert layout.run("teacher") not in by_name["scratch"].inputs
  # The teacher is the real MiniLM; the students' shape takes its
  # feature-map width, heads and depth (so FMT and AT apply as written).
  assert arg("teacher", "--from") == "hf"
  assert arg("teacher", "--name") == "all-minilm-l6-v2"
  assert arg("pkt", "--student_config") == arg(
      "scratch", "--config") == "mobilebert_minilm"
  # Task-stage distillation: the distilled student's fine-tuning reads the
  # fine-tuned teacher of the same task; the scratch student's does not.
  for task in ("qa", "spam"):
    teacher = layout.finetuned(f"teacher_{task}")
    assert arg(f"pkt_{task}", "--teacher_dir") == teacher
    assert teacher in by_name[f"pkt_{task}"].inputs
    assert "--teacher_dir" not in by_name[f"scratch_{task}"].command
  # QA models go out at the app's length.
  for name in ("pkt_qa", "teacher_qa"):
    assert arg(f"convert_{name}", "--max_seq_length") == "384"
  # The app gets the distilled student's int8 QA model.
  assert arg("app", "--model") == layout.tflite_file("pkt_qa", "int8")
  assert by_name["bench_host"].alone and "bench_phone" not in by_name
  # A demo of another size in the same directory is refused.
  json.dump({"sizes": {"student_steps": 1}}, open(layout.plan, "w"))
  with pytest.raises(Exception, match="holds a demo of another size"):
    demo.check_plan(layout, "full", scale)


def _summary(pkt_mlm, scratch_mlm, teacher_mlm, pkt_f1, scratch_f1):
  mlm = lambda acc: {"mlm_accuracy": acc, "masked_tokens": 30000}
  qa = lambda f1: {"f1": f1, "total": 1000}
  return {"plan": {"sizes": {"student_steps": 300}},
          "models": {
              "teacher": {"mlm": mlm(teacher_mlm), "tasks": {}},
              "pkt": {"mlm": mlm(pkt_mlm), "tasks": {"qa": qa(pkt_f1)}},
              "scratch": {"mlm": mlm(scratch_mlm),
                          "tasks": {"qa": qa(scratch_f1)}}}}


def test_experiments_find_the_shipped_data():
  # Every experiment takes the repository's place from experiments.paths.
  from experiments import paths
  assert paths.REPO == REPO
  assert os.path.isfile(os.path.join(paths.DATA, "pretraining", "train.txt.gz"))
  assert os.path.isfile(paths.VOCAB)


def test_verdict_says_who_won_and_why_not():
  v = verdict(_summary(0.12, 0.10, 0.11, 16.0, 15.5))
  assert v["beats"] is True
  mlm, qa = v["comparisons"]
  assert mlm["outcome"] == "better" and mlm["noise"] == pytest.approx(
      100 * 1.96 * (2 * 0.11 * 0.89 / 30000) ** 0.5)
  assert qa["outcome"] == "within noise"  # 0.5 F1 on 1000 questions
  assert v["text"].startswith("The distilled student beats the scratch "
                              "one on held-out MLM accuracy")
  v = verdict(_summary(0.08, 0.10, 0.09, 15.0, 15.0))
  assert v["beats"] is False
  assert "did not beat" in v["text"]
  assert "PKT spends half" in v["text"]


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

  # The report, its figures and every number in it.
  report = (out / "REPORT.md").read_text()
  for section in ("## Headline", "## Training", "## Conversion and "
                  "validation", "## Latency", "## Model sizes",
                  "## The Android app", "## Steps", "Distilled vs scratch"):
    assert section in report
  summary = json.loads((out / "report" / "summary.json").read_text())
  for key, figure in summary["figures"].items():
    assert figure, f"no {key} figure"
    assert f"]({figure})" in report
    with open(out / figure, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n", figure
  for model in ("teacher", "pkt", "scratch"):
    m = summary["models"][model]
    assert 0 <= m["tasks"]["qa"]["f1"] <= 100
    assert 0 <= m["tasks"]["spam"]["accuracy"] <= 1
    assert m["params"]["params_encoder"] > 0
  for model in ("pkt", "scratch"):  # MiniLM has no MLM head
    m = summary["models"][model]
    assert 0 <= m["mlm"]["mlm_accuracy"] <= 1 and m["mlm"]["masked_tokens"]
    assert m["history"][-1]["step"] == plan["sizes"]["student_steps"]
  assert summary["models"]["teacher"]["params"]["params_encoder"] == \
      22_713_216
  assert {c["key"] for c in summary["verdict"]["comparisons"]} == {
      "mlm", "qa", "spam"}
  assert summary["verdict"]["text"]
  # Teacher and student side by side, every entry measured.
  sides = summary["teacher_vs_student"]
  assert all(r["teacher"] is not None and r["student"] is not None
             for k, r in sides.items() if k != "qa_f1_int8"), sides
  assert sides["qa_f1_int8"]["student"] is not None  # the teacher's: n/a
  assert sides["encoder_params"]["student_share"] < 0.4
  assert sides["int8_size_mb"]["student_share"] < 0.5
  assert "**Teacher vs distilled student.**" in report

  # Conversion reports and the .tflite files they describe.
  for name in demo.CONVERTED:
    conv = json.loads((out / "tflite" / name / f"{name}_report.json")
                      .read_text())
    assert conv["passed"] and set(conv["modes"]) == {"float32", "int8"}
    assert conv["modes"]["float32"]["difference"]["max_abs"] < 1e-3
    for mode in ("float32", "int8"):
      with open(out / "tflite" / name / f"{name}_{mode}.tflite", "rb") as f:
        assert f.read(8)[4:] == b"TFL3"
  int8 = summary["conversions"]["pkt_qa"]["modes"]["int8"]
  assert int8["size_mb"] < summary["conversions"]["pkt_qa"]["modes"][
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
      out / "tflite" / "pkt_qa" / "pkt_qa_int8.tflite").read_bytes()
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
  subprocess.run(["rm", "-r", str(out / "eval" / "pkt_mlm")], check=True)
  stdout, _ = _demo(out)
  assert _ran(stdout) == {"pkt_mlm", "report"}
  assert (out / "report" / "summary.json").stat().st_mtime > before
