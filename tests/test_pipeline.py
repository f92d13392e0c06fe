"""pipeline.run_steps: skips finished work, re-runs what depends on a change."""

import os
import sys
import time

import pytest

from experiments.papers.knowledge_transfer import SCALES, build_steps
from experiments.common.pipeline import (Step, StepError, run_steps, unowned_files,
                                  unowned_files_under)
from experiments.common.result_files import read_marker


def _append(log, name):
  """argv appending `name` to log (the step 'ran'), like any command."""
  return [sys.executable, "-c",
          f"open({str(log)!r}, 'a').write({name!r} + '\\n')"]


def _chain(tmp_path, log):
  a, b, c = (str(tmp_path / n) for n in "abc")
  return [Step("a", _append(log, "a"), a),
          Step("b", _append(log, "b"), b, (a,)),
          Step("c", _append(log, "c"), c)]


def _ran(log):
  ran = log.read_text().split() if log.exists() else []
  log.unlink(missing_ok=True)
  return ran


def test_skips_done_steps_and_reruns_dependents(tmp_path):
  log = tmp_path / "log.txt"
  run_steps(_chain(tmp_path, log), log=lambda _: None)
  assert _ran(log) == ["a", "b", "c"]
  run_steps(_chain(tmp_path, log), log=lambda _: None)
  assert _ran(log) == []
  # Deleting a's output re-runs a and b (which reads it), not c.
  os.remove(tmp_path / "a" / ".done")
  time.sleep(0.01)
  run_steps(_chain(tmp_path, log), log=lambda _: None)
  assert _ran(log) == ["a", "b"]
  run_steps(_chain(tmp_path, log), force={"c"}, log=lambda _: None)
  assert _ran(log) == ["c"]


def test_failure_names_the_step_and_how_to_rerun(tmp_path):
  log = tmp_path / "log.txt"
  steps = _chain(tmp_path, log)
  steps[1] = Step("b", [sys.executable, "-c", "raise SystemExit(3)"],
                  str(tmp_path / "b"), (str(tmp_path / "a"),))
  with pytest.raises(StepError, match=r"step 'b' failed .*re-run it with: "):
    run_steps(steps, log=lambda _: None)
  assert _ran(log) == ["a"]  # c never started
  assert not (tmp_path / "b" / ".done").exists()


def test_transfer_experiment_chain(tmp_path):
  steps, models = build_steps(str(tmp_path), SCALES["tiny"], kronecker=True)
  by_name = {s.name: s for s in steps}
  assert models == ["teacher", "scratch", "pkt", "jkt", "akt", "minilm",
                    "kronecker"]
  # Same total steps for every student; distilled ones read the teacher.
  for student in ("scratch", "pkt", "jkt", "akt"):
    command = by_name[student].command
    assert command[command.index("--train_steps") + 1] == str(
        SCALES["tiny"].student_steps)
  for strategy in ("pkt", "jkt", "akt"):
    assert by_name["teacher"].output in by_name[strategy].inputs
  # KroneckerBERT's task stage distils from MiniLM fine-tuned on that task.
  assert by_name["minilm_qa"].output in by_name["kronecker_qa"].inputs
  assert "minilm_mlm" not in by_name  # MiniLM ships without an MLM head
  # Each step comes after the steps it reads.
  seen = set()
  for step in steps:
    assert all(i in seen for i in step.inputs), step.name
    seen.add(step.output)


@pytest.mark.parametrize("jobs", [1, 2])
def test_marker_records_each_steps_peak_memory(tmp_path, jobs):
  """A step that holds 300 MB and one that holds little: each marker has
  its own process's peak, not the runner's or the other step's."""
  big = [sys.executable, "-c", "import time; b = bytearray(300 * 2**20); "
         "b[::4096] = b'x' * len(b[::4096]); time.sleep(1)"]
  small = [sys.executable, "-c", "import time; time.sleep(0.5)"]
  steps = [Step("big", big, str(tmp_path / "big")),
           Step("small", small, str(tmp_path / "small"))]
  run_steps(steps, log=lambda _: None, jobs=jobs, heartbeat=1000)

  def peak(name):
    return read_marker(str(tmp_path / name))["peak_memory_mb"]
  assert 300 <= peak("big") < 400
  assert peak("small") < 100


def _timed_step(tmp_path, name, memory_mb):
  """A step that notes when it ran, in its output directory."""
  out = tmp_path / name
  code = ("import sys, time; a = time.time(); time.sleep(1.5); "
          "open(sys.argv[1] + '/ran', 'w').write(f'{a} {time.time()}')")
  return Step(name, [sys.executable, "-c", code, str(out)], str(out),
              memory_mb=memory_mb)


def _overlap(tmp_path, a, b):
  (a0, a1), (b0, b1) = [map(float, (tmp_path / n / "ran").read_text().split())
                        for n in (a, b)]
  return a0 < b1 and b0 < a1


@pytest.mark.parametrize("budget_mb, side_by_side", [(1000, True),
                                                     (500, False)])
def test_steps_run_side_by_side_only_within_the_memory_budget(
    tmp_path, budget_mb, side_by_side):
  steps = [_timed_step(tmp_path, "a", 300), _timed_step(tmp_path, "b", 300)]
  lines = []
  run_steps(steps, log=lines.append, jobs=2, heartbeat=1000,
            memory_budget_mb=budget_mb)
  assert _overlap(tmp_path, "a", "b") == side_by_side
  assert any(line.endswith("MB") and "finished in" in line for line in lines)


def test_pipeline_log_ends_with_the_steps_peak_memory(tmp_path):
  big = [sys.executable, "-c", "import time; b = bytearray(200 * 2**20); "
         "b[::4096] = b'x' * len(b[::4096]); time.sleep(1)"]
  steps = [Step("big", big, str(tmp_path / "big")),
           _timed_step(tmp_path, "other", None)]
  run_steps(steps, log=lambda _: None, jobs=2, heartbeat=1000)
  last = (tmp_path / "big" / "pipeline.log").read_text().splitlines()[-1]
  assert last.startswith("pipeline: big peak resident memory ")
  assert 200 <= float(last.split()[-2]) < 300


def _write(name):
  """argv writing file `name` into the step's output (its cwd-free path)."""
  return lambda out: [sys.executable, "-c",
                      f"open({os.path.join(out, name)!r}, 'w').write('x')"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_clean_rerun_removes_only_what_the_step_wrote(tmp_path, jobs):
  """The marker lists the step's files; a user's file put in its output
  afterwards stops the re-run with one line naming it, and stays."""
  out = str(tmp_path / "step")
  step = Step("made", _write("made.txt")(out), out, clean=True)
  run_steps([step], log=lambda _: None, jobs=jobs)
  with open(os.path.join(out, ".done")) as f:
    assert f.read().splitlines()[-1] == 'files ["made.txt"]'
  assert unowned_files(out) == []
  run_steps([step], force={"made"}, log=lambda _: None, jobs=jobs)
  (tmp_path / "step" / "mine.txt").write_text("mine")
  assert unowned_files(out) == ["mine.txt"]
  assert unowned_files_under(str(tmp_path)) == ["step/mine.txt"]
  with pytest.raises(StepError, match=r"^step 'made' would start over in "
                     rf"{out}, which holds mine.txt, not written by it"):
    run_steps([step], force={"made"}, log=lambda _: None, jobs=jobs)
  assert (tmp_path / "step" / "mine.txt").read_text() == "mine"
  assert (tmp_path / "step" / "made.txt").exists()


def test_a_marker_without_its_file_list_owns_what_is_older(tmp_path):
  """Markers written before the list was kept: the files no newer than
  the marker are the step's."""
  out = tmp_path / "step"
  out.mkdir()
  (out / "made.txt").write_text("x")
  (out / ".done").write_text("1.0 s\n")
  later = time.time() + 5
  (out / "mine.txt").write_text("mine")
  os.utime(out / "mine.txt", (later, later))
  assert unowned_files(str(out)) == ["mine.txt"]
