"""Issue 20 for the harness and the experiments: nothing a user had is lost.

One writer per output directory (a second run is refused in one line while
the first holds it), unwritable outputs and bad flags refused in one line
before any work, and no process or temporary left behind by SIGTERM or
kill -9. The commands run as users run them (`python -m ...`).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "android_bench")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _command(module, *args, timeout=60):
  """(exit status, stdout, stderr) of `python -m module args`; a run that
  was not refused (and so started working) is killed at `timeout`."""
  proc = subprocess.Popen([sys.executable, "-m", module, *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=ENV, cwd=REPO,
                          start_new_session=True)
  try:
    out, err = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    pytest.fail(f"{module} {args} was not refused within {timeout} s")
  return proc.returncode, out, err


def _lines(stderr):
  """stderr without TensorFlow's C++ start-up lines (not ours to print)."""
  return [l for l in stderr.strip().splitlines()
          if not l.startswith(("WARNING: All log messages", "I0000", "W0000",
                               "E0000"))]


def _gone(pid):
  """Exited (a zombie nobody reaped has exited too)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] == "Z"
  except FileNotFoundError:
    return True


def _wait_until(condition, what, seconds=30):
  deadline = time.monotonic() + seconds
  while not condition():
    if time.monotonic() > deadline:
      pytest.fail(f"still waiting for {what} after {seconds} s")
    time.sleep(0.1)


def _children(pid, needle):
  """Pids whose parent is `pid` and whose command line holds `needle`."""
  found = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, IndexError):
      continue
    if ppid == pid and needle in cmdline:
      found.append(int(entry))
  return found


def _snapshot(directory):
  """Every file under `directory` with its bytes (hidden ones too)."""
  found = {}
  for root, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, directory)] = f.read()
  return found


# --- one writer per output ---------------------------------------------------

HOLD = ("import sys\nfrom tfmodels.staging import output_lock\n"
        "with output_lock(sys.argv[1]):\n  print('held', flush=True)\n"
        "  sys.stdin.read()\n")


def _hold(directory):
  """A child process holding the output lock of `directory` until its
  stdin closes."""
  holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=ENV, cwd=REPO)
  assert holder.stdout.readline() == "held\n"
  return holder


@pytest.mark.parametrize("module, args", [
    ("experiments.demo", ["--tiny"]),
    ("experiments.papers.knowledge_transfer", ["--scale", "tiny"]),
    ("experiments.papers.distill_from_minilm", ["--scale", "tiny"]),
    ("experiments.bench.latency_benchmark", ["--models", "mobilebert_tiny",
                                       "--modes", "float32"]),
])
def test_second_writer_is_refused_while_the_first_runs(module, args,
                                                        tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "first_writer.txt").write_text("the first run's work")
  before = _snapshot(out)
  holder = _hold(out)
  try:
    status, stdout, stderr = _command(module, *args, "--output_dir", out)
    assert status == 1
    assert _lines(stderr) == [
        f"error: --output_dir {out}: another process (pid {holder.pid}) is "
        "writing it; wait for it or choose another output"]
    assert _snapshot(out) == before
  finally:
    holder.stdin.close()
    holder.wait()


def test_a_killed_writer_does_not_block_the_next(tmp_path):
  from tfmodels.staging import OutputError, output_lock
  out = tmp_path / "out"
  holder = _hold(out)
  with pytest.raises(OutputError, match=f"pid {holder.pid}"):
    with output_lock(str(out)):
      pass
  holder.kill()
  holder.wait()
  with output_lock(str(out)):  # the kernel dropped the lock with its holder
    pass


# --- unwritable outputs and bad flags: one line, before any work -----------

def _unwritable(tmp_path):
  """A path under a regular file: unwritable even for root."""
  (tmp_path / "afile").write_text("not a directory")
  return tmp_path / "afile" / "x"


@pytest.mark.parametrize("module, args, flag", [
    ("android_bench", ["run", "--target=host", "--results_dir={bad}",
                       "missing.tflite"], "--results_dir"),
    ("android_bench", ["report", "missing.json", "--output={bad}"],
     "--output"),
    ("experiments.demo", ["--tiny", "--output_dir={bad}"], "--output_dir"),
    ("experiments.papers.knowledge_transfer", ["--scale=tiny", "--output_dir={bad}"],
     "--output_dir"),
    ("experiments.papers.distill_from_minilm", ["--scale=tiny", "--output_dir={bad}"],
     "--output_dir"),
    ("experiments.papers.distill_from_minilm", ["--scale=tiny", "--output_dir={ok}",
                                         "--results_dir={bad}"],
     "--results_dir"),
    ("experiments.bench.latency_benchmark", ["--output_dir={bad}"], "--output_dir"),
    ("experiments.bench.latency_benchmark", ["--output_dir={ok}",
                                       "--work_dir={bad}"], "--work_dir"),
    ("experiments.demo.data", ["--output_dir={bad}"], "--output_dir"),
    ("android_bench.qa_app.sample_passages", ["--output={bad}"], "--output"),
])
def test_unwritable_output_is_one_line_before_any_work(module, args, flag,
                                                       tmp_path):
  bad = _unwritable(tmp_path)
  ok = tmp_path / "ok"
  status, stdout, stderr = _command(
      module, *[a.format(bad=bad, ok=ok) for a in args])
  assert status == 1
  assert _lines(stderr) == [f"error: {flag} {bad}: {bad.parent} is not a "
                            "directory"]
  assert sorted(os.listdir(tmp_path)) == ["afile"]  # nothing made


@pytest.mark.parametrize("module, args, line", [
    ("android_bench", ["run", "--target=host", "--threads=0"],
     "error: --threads: give thread counts >= 1"),
    ("android_bench", ["run", "--target=host", "--num_runs=0"],
     "error: --repeats and --num_runs must be >= 1, --warmup_runs >= 0"),
    ("android_bench", ["run", "--target=host", "--timeout=-5"],
     "error: --timeout -5: give seconds > 0"),
    ("android_bench", ["run", "--target=host", "--min_secs=-1"],
     "error: --min_secs -1: give seconds >= 0"),
    ("android_bench", ["run", "--target=host", "--min_secs=3",
                       "--max_secs=1"],
     "error: --max_secs 1 is below --min_secs 3"),
    ("android_bench", ["run", "--target=adb", "--remote_dir=data/tmp"],
     "error: --remote_dir 'data/tmp': give an absolute device directory, "
     "e.g. /data/local/tmp"),
    ("android_bench", ["run", "--target=adb", "--adb_server_port=70000"],
     "error: --adb_server_port 70000: give a TCP port, 1..65535"),
    ("experiments.demo", ["--tiny", "--jobs=0"],
     "error: --jobs 0: give 1 or more"),
    ("experiments.papers.distill_from_minilm", ["--scale=tiny", "--jobs=0"],
     "error: --jobs 0: give 1 or more"),
    ("experiments.papers.knowledge_transfer", ["--scale=tiny", "--student_steps=0"],
     "error: --student_steps 0: give 1 or more"),
    ("experiments.bench.latency_benchmark", ["--min_secs=-1"],
     "error: --min_secs -1: give seconds >= 0"),
    ("experiments.bench.latency_benchmark", ["--warmup_runs=-1"],
     "error: --warmup_runs -1: give 0 or more"),
])
def test_bad_flag_is_one_line_before_any_work(module, args, line, tmp_path):
  out = tmp_path / "out"
  flag = "--results_dir" if module == "android_bench" else "--output_dir"
  status, stdout, stderr = _command(module, *args, f"{flag}={out}",
                                    *(["model.tflite"]
                                      if module == "android_bench" else []))
  assert status == 1
  assert _lines(stderr) == [line]
  assert not out.exists()


def test_required_flag_is_one_line():
  for module in ("experiments.papers.knowledge_transfer",
                 "experiments.papers.distill_from_minilm",
                 "experiments.bench.latency_benchmark"):
    status, _, stderr = _command(module)
    assert (status, _lines(stderr)) == (1, ["error: --output_dir is "
                                            "required"]), module


# --- SIGTERM and kill -9 leave nothing running or half-written ------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  sys.path.insert(0, FIXTURES)
  from tiny_models import write_models  # pylint: disable=import-outside-toplevel
  return write_models(tmp_path_factory.mktemp("models"), ["tiny_dense"])[
      "tiny_dense"]


def _start_long_host_run(model, results_dir):
  """`android_bench run` on the host with a cell that runs for a minute;
  returns (harness process, the benchmark's pid) once the cell runs."""
  harness = subprocess.Popen(
      [sys.executable, "-m", "android_bench", "run", "--target=host",
       "--threads=1", "--num_runs=100000000", "--min_secs=60",
       "--max_secs=90", "--timeout=120", f"--results_dir={results_dir}",
       "--noplot", model], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env=ENV, cwd=REPO)
  found = []

  def started():
    assert harness.poll() is None, harness.communicate()
    found[:] = _children(harness.pid, "android_bench.benchmark_model")
    return bool(found)

  _wait_until(started, "the benchmark to start")
  return harness, found[0]


def _dead_pid():
  child = subprocess.Popen([sys.executable, "-c", ""])
  child.wait()
  return child.pid


def test_sigterm_stops_the_benchmark_and_keeps_the_run(tiny_model, tmp_path):
  # What harnesses killed mid-save left: a dead writer's half-written run
  # file goes, a live one's stays.
  results_dir = tmp_path / "results"
  results_dir.mkdir()
  stale = f".staging-20260101-000000-abcdef.json-{_dead_pid()}-k3x_9.json"
  live = f".staging-20260101-000000-fedcba.json-{os.getpid()}-q7y.json"
  for name in (stale, live):
    (results_dir / name).write_text("{")
  harness, benchmark = _start_long_host_run(tiny_model, results_dir)
  harness.send_signal(signal.SIGTERM)
  _, stderr = harness.communicate(timeout=60)
  assert harness.returncode == 128 + signal.SIGTERM
  assert "Traceback" not in stderr
  _wait_until(lambda: _gone(benchmark), "the benchmark to stop", 10)
  names = set(os.listdir(results_dir))
  assert live in names
  [name] = names - {live}  # the run, and nothing half-written
  with open(results_dir / name) as f:
    assert json.load(f)["complete"] is False


def test_kill_9_takes_the_benchmark_with_it(tiny_model, tmp_path):
  harness, benchmark = _start_long_host_run(tiny_model, tmp_path / "results")
  harness.kill()
  harness.wait()
  _wait_until(lambda: _gone(benchmark), "the orphaned benchmark to stop", 10)


RUNNER = """import sys
from experiments.common.pipeline import Step, run_steps, sole_writer
from tfmodels.sigterm import exit_on_sigterm
exit_on_sigterm()
with sole_writer(sys.argv[1]) as out:
  run_steps([Step("a", [sys.executable, "-c", sys.argv[2]], out + "/a"),
             Step("b", [sys.executable, "-c", sys.argv[2]], out + "/b")],
            jobs=int(sys.argv[3]))
"""


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_pipeline_stops_its_steps_and_frees_the_output(
    how, jobs, tmp_path):
  """No step keeps writing into an output whose runner is gone (its lock
  went with it), whether the runner was stopped or killed."""
  out, pids = tmp_path / "exp", tmp_path / "pids"
  pids.mkdir()
  step = (f"import os, time; open(os.path.join({str(pids)!r}, "
          "str(os.getpid())), 'w').close(); time.sleep(120)")
  runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(out), step,
                             str(jobs)], env=ENV, cwd=REPO,
                            stdout=subprocess.DEVNULL)
  _wait_until(lambda: len(os.listdir(pids)) == jobs, "the steps to start")
  runner.send_signal(how)
  assert runner.wait(timeout=30) == (128 + how if how == signal.SIGTERM
                                     else -how)
  for pid in os.listdir(pids):
    _wait_until(lambda pid=pid: _gone(int(pid)), "the steps to stop", 10)
  from experiments.common.pipeline import sole_writer
  with sole_writer(str(out)):
    pass


def test_latency_benchmark_clears_work_dirs_of_killed_runs(tmp_path):
  # Its own process: the command's absl flags clash with other experiments'.
  prefix = "latency-benchmark-"
  stale = tmp_path / f"{prefix}{_dead_pid()}-abc"
  live = tmp_path / f"{prefix}{os.getpid()}-def"
  other = tmp_path / "someone-elses-1-ghi"
  for d in (stale, live, other):
    (d / "runs").mkdir(parents=True)
  made = subprocess.run(
      [sys.executable, "-c", "import os, tempfile\n"
       "from experiments.bench import latency_benchmark as bench\n"
       "assert bench.WORK_PREFIX == 'latency-benchmark-'\n"
       "print(os.getpid(), bench._own_work_dir())"],
      env={**ENV, "TMPDIR": str(tmp_path)}, cwd=REPO, capture_output=True,
      text=True, check=True).stdout.split()
  pid, mine = made
  assert os.path.dirname(mine) == str(tmp_path)
  assert os.path.basename(mine).startswith(f"{prefix}{pid}-")
  assert sorted(os.listdir(tmp_path)) == sorted(
      [live.name, other.name, os.path.basename(mine)])
