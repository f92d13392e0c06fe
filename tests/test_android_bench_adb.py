"""`android_bench run --target adb` through the unmodified Debian `adb` client.

Each test starts its own adb server on a private port (adb -P) with its own
HOME, and a stand-in device (tests/fixtures/android_bench/standin_device.py)
that the server reaches with `adb connect 127.0.0.1:PORT` and talks to in
adb's device protocol. The device runs commands in a sandbox standing for /data/local/tmp,
where the "benchmark_model" binary pushed by the harness is a script around
our ai_edge_litert runner. The server is killed at the end of every test.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "android_bench")
sys.path.insert(0, FIXTURES)
from tiny_models import write_models  # noqa: E402  pylint: disable=wrong-import-position

ADB = "/usr/bin/adb"
pytestmark = pytest.mark.skipif(not os.path.exists(ADB),
                                reason="Debian package adb not installed "
                                "(make system-packages)")


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _listening(port):
  with socket.socket() as s:
    return s.connect_ex(("127.0.0.1", port)) == 0


class Lab:
  """A private adb server, optionally with the stand-in device connected."""

  def __init__(self, tmp_path):
    self.tmp = tmp_path
    self.server_port = _free_port()
    self.env = {k: v for k, v in os.environ.items()
                if not k.startswith(("ADB", "ANDROID"))}
    self.env.update(HOME=str(tmp_path / "home"), TF_CPP_MIN_LOG_LEVEL="2")
    os.makedirs(self.env["HOME"], exist_ok=True)
    self.device = None
    self.serial = None
    self.sandbox = tmp_path / "phone"
    self.adb("start-server")

  def adb(self, *args, timeout=30):
    return subprocess.run([ADB, "-P", str(self.server_port), *args],
                          capture_output=True, text=True, env=self.env,
                          timeout=timeout)

  def start_device(self, profile=None):
    """profile: DEFAULT_PROFILE keys to override (standin_device.py)."""
    port_file = self.tmp / "device.port"
    self.device_log = open(self.tmp / "device.log", "w")
    extra = []
    if profile:
      (self.tmp / "profile.json").write_text(json.dumps(profile))
      extra = [f"--profile={self.tmp / 'profile.json'}"]
    self.device = subprocess.Popen(
        [sys.executable, os.path.join(FIXTURES, "standin_device.py"),
         f"--sandbox={self.sandbox}", f"--port_file={port_file}", *extra],
        env=self.env, stdout=self.device_log, stderr=subprocess.STDOUT,
        start_new_session=True)  # its own group: killed with its children
    deadline = time.monotonic() + 60
    while not port_file.exists():
      assert self.device.poll() is None, (self.tmp / "device.log").read_text()
      assert time.monotonic() < deadline
      time.sleep(0.1)
    self.serial = f"127.0.0.1:{int(port_file.read_text())}"
    assert "connected to" in self.adb("connect", self.serial).stdout
    while self.adb("-s", self.serial, "get-state").stdout.strip() != "device":
      assert time.monotonic() < deadline
      time.sleep(0.2)

  def kill_device(self):
    os.killpg(self.device.pid, signal.SIGKILL)
    self.device.wait()

  def services(self):
    path = self.sandbox / ".standin" / "services.log"
    if not path.exists():
      return []
    return [json.loads(line)["service"] for line in
            path.read_text().splitlines()]

  def commands(self):
    """Shell command lines that reached the device, in order."""
    return [s.split(":", 1)[1] for s in self.services()
            if s.startswith("shell")]

  def device_file(self, name):
    return self.sandbox / "data" / "local" / "tmp" / name

  def cli(self, *args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "android_bench", *args, f"--adb={ADB}",
         f"--adb_server_port={self.server_port}"],
        capture_output=True, text=True, env=self.env, cwd=REPO,
        timeout=timeout)

  def close(self):
    self.adb("kill-server")
    if self.device and self.device.poll() is None:
      self.kill_device()
    if self.device:
      self.device_log.close()
    deadline = time.monotonic() + 10
    while _listening(self.server_port) and time.monotonic() < deadline:
      time.sleep(0.2)
    assert not _listening(self.server_port), "adb server still running"


@pytest.fixture
def lab(tmp_path):
  lab = Lab(tmp_path)
  try:
    yield lab
  finally:
    lab.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  return write_models(tmp_path_factory.mktemp("models"))


BANNER = "stand-in-benchmark_model-script"


def _binary(tmp_path, hang_on=None):
  """The "device's" benchmark_model: a script around our runner."""
  path = tmp_path / "benchmark_model"
  hang = (f"case \"$*\" in *{hang_on}*) echo $$ > {tmp_path}/hung.pid; "
          f"exec sleep 120;; esac\n") if hang_on else ""
  # The first line is printed at once, before Python starts.
  path.write_text(f"#!/bin/sh\necho {BANNER}\n{hang}PYTHONPATH={REPO} exec "
                  f"{sys.executable} -m android_bench.benchmark_model \"$@\"\n")
  path.chmod(0o644)  # the harness must chmod it on the device
  return str(path)


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _run_file(results_dir):
  [name] = [f for f in os.listdir(results_dir) if f.endswith(".json")]
  with open(os.path.join(results_dir, name)) as f:
    return json.load(f), os.path.join(results_dir, name)


PREFIX = "cd /data/local/tmp && echo $$ > .android_bench.pid && exec "


def test_devices_lists_the_device(lab):
  lab.start_device()
  out = lab.cli("devices")
  assert out.returncode == 0, out.stderr
  line = [l for l in out.stdout.splitlines() if l.startswith(lab.serial)][0]
  assert re.split(r"\s{2,}", line) == [
      lab.serial, "device", "Pixel 4 (stand-in)", "13", "arm64-v8a", "8",
      "1786x4 2419x3 2842x1", "4-7 (mask f0)"]
  [entry] = json.loads(lab.cli("devices", "--json").stdout)
  assert entry["product"] == "standin" and entry["sdk"] == "33"
  assert entry["cpu_max_freq_khz"] == [1785600] * 4 + [2419200] * 3 + \
      [2841600]
  assert entry["big_cores"] == [4, 5, 6, 7]


def test_run_through_real_adb(lab, models, tmp_path):
  lab.start_device()
  binary = _binary(tmp_path)
  results_dir = tmp_path / "results"
  extra = "--warmup_min_secs=0"
  out = lab.cli("run", "--target=adb", f"--serial={lab.serial}",
                f"--benchmark_binary={binary}", "--cpu_mask=big",
                "--threads=1,2", "--delegates=xnnpack,none", "--num_runs=5",
                "--min_secs=0", f"--benchmark_args={extra}", "--keep",
                f"--results_dir={results_dir}", models["tiny_qa"],
                models["tiny_cumsum"])
  assert out.returncode == 0, out.stdout + out.stderr

  # Pushed files: same bytes, and the binary made executable on the device.
  for local in (binary, models["tiny_qa"], models["tiny_cumsum"]):
    remote = lab.device_file(os.path.basename(local))
    assert _sha256(remote) == _sha256(local)
  assert os.stat(lab.device_file("benchmark_model")).st_mode & 0o777 == 0o755
  assert lab.services().count("sync:") == 3

  # The command lines that reached the device.
  run, _ = _run_file(results_dir)
  expected = []
  for model in ("tiny_cumsum", "tiny_qa"):
    for delegate in ("--use_xnnpack=true", "--use_xnnpack=false"):
      for threads in (1, 2):
        expected.append(
            f"{PREFIX}taskset f0 ./benchmark_model "
            f"--graph=/data/local/tmp/{model}.tflite --num_threads={threads}"
            f" --warmup_runs=1 --num_runs=5 --min_secs=0 {delegate} {extra}"
            + (" --input_layer=ids,mask,segment_ids --input_layer_shape="
               "1,32:1,32:1,32 --input_layer_value_range=ids,0,99:mask,0,1:"
               "segment_ids,0,1" if model == "tiny_qa" else ""))
  commands = lab.commands()
  assert [c for c in commands if c.startswith(PREFIX)] == expected
  assert [c["command"] for c in run["cells"]] == expected
  assert "chmod 755 /data/local/tmp/benchmark_model" in commands

  # Device facts and settings in the results.
  device = run["device"]
  assert (device["model"], device["android_version"], device["abi"],
          device["cores"], device["big_core_mask"]) == (
              "Pixel 4 (stand-in)", "13", "arm64-v8a", 8, "f0")
  assert device["serial"] == lab.serial and run["target"] == "adb"
  assert run["settings"]["cpu_mask_used"] == "f0"
  assert run["settings"]["transfer"] == {
      "pushed": ["benchmark_model", "tiny_cumsum.tflite", "tiny_qa.tflite"],
      "already_on_device": []}
  assert run["settings"]["benchmark_binary"]["sha256"] == _sha256(binary)

  # Parsed results.
  assert len(run["cells"]) == 8
  for cell in run["cells"]:
    assert cell["status"] == "ok", cell["error"]
    assert cell["timings_us"]["count"] == 5
    assert cell["timings_us"]["min"] <= cell["timings_us"]["median"] <= \
        cell["timings_us"]["max"]
    assert cell["thermal"]["before"] == cell["thermal"]["after"] == {
        "status": 0, "zones_c": {"cpu-0-0-usr": 36.5, "cpu-1-0-usr": 38.2,
                                 "battery": 29.0, "skin-therm": 31.0},
        "max_c": 38.2}
    assert "Graph: [" in cell["raw_output"]
    coverage = [(d["replaced_nodes"], d["total_nodes"], d["partitions"])
                for d in cell["delegate_coverage"]]
    if "--use_xnnpack=false" in cell["command"]:
      assert coverage == []
    elif cell["model"] == "tiny_cumsum.tflite":
      assert coverage == [(2, 3, 2)]
  assert "| tiny_qa.tflite | benchmark_model | none | 2 |" in out.stdout

  # Again without --keep, with one new model: only that one is pushed (the
  # rest match by checksum) and only what this run pushed is removed.
  before = len(lab.services())
  out = lab.cli("run", "--target=adb", f"--benchmark_binary={binary}",
                "--threads=2", "--num_runs=3", "--min_secs=0",
                "--benchmark_args=--warmup_min_secs=0",
                f"--results_dir={tmp_path / 'results2'}", models["tiny_qa"],
                models["tiny_dense"])
  assert out.returncode == 0, out.stdout + out.stderr
  second, _ = _run_file(tmp_path / "results2")
  assert second["settings"]["transfer"] == {
      "pushed": ["tiny_dense.tflite"],
      "already_on_device": ["benchmark_model", "tiny_qa.tflite"]}
  new = lab.services()[before:]
  assert new.count("sync:") == 1
  assert new[-1].endswith(":cd /data/local/tmp && { rm -f ./tiny_dense.tflite "
                          "./.android_bench.pid; for f in ./tiny_dense.tflite "
                          "./.android_bench.pid; do [ -e \"$f\" ] && echo "
                          "\"left $f\"; done; echo 'android_bench: listed'; "
                          "} 2>&1")
  assert not lab.device_file("tiny_dense.tflite").exists()
  assert lab.device_file("tiny_qa.tflite").exists()
  assert [c["status"] for c in second["cells"]] == ["ok", "ok"]


class _CutShortAdb:
  """An adb whose first shell output is cut short with exit status 0, as a
  dropped transport leaves it; later calls answer from `replies`."""

  serial = "cut"

  def __init__(self, replies):
    self.replies, self.commands = list(replies), []

  def shell(self, command, timeout):
    self.commands.append(command)
    return self.replies.pop(0)


def test_cleanup_never_reads_a_cut_short_listing_as_all_removed():
  """The listing ends with a marker; without it the device is asked again,
  and without a whole listing nothing is reported removed."""
  from android_bench.adb import AdbError
  from android_bench.runner import LISTED, AdbTarget, Settings
  settings = Settings()
  adb = _CutShortAdb([(0, ""), (0, f"left ./-x.tflite\n{LISTED}\n")])
  target = AdbTarget(adb, "benchmark_model", settings)
  target.pushed = ["benchmark_model", "-x.tflite"]
  with pytest.raises(AdbError, match=r"could not remove -x.tflite .*"
                     r"\(left ./-x.tflite\); removed benchmark_model"):
    target.cleanup()
  assert "rm -f" in adb.commands[0] and "rm -f" not in adb.commands[1]
  adb = _CutShortAdb([(0, "rm: cannot"), (0, "")])  # never listed whole
  target = AdbTarget(adb, "benchmark_model", settings)
  target.pushed = ["benchmark_model"]
  with pytest.raises(AdbError, match="removed nothing"):
    target.cleanup()
  adb = _CutShortAdb([(0, f"{LISTED}\n")])  # a whole listing, nothing left
  target = AdbTarget(adb, "benchmark_model", settings)
  target.pushed = ["benchmark_model"]
  assert target.cleanup() == ["benchmark_model"] and len(adb.commands) == 1


def _device_listing(lab):
  return sorted(os.listdir(lab.device_file("")))


def test_lengths_reach_the_device(lab, models, tmp_path):
  """--lengths through adb: one cell per length, each command line giving
  benchmark_model the inputs' [1, L] shape (with the value ranges)."""
  lab.start_device()
  binary = _binary(tmp_path)
  out = lab.cli("run", "--target=adb", f"--benchmark_binary={binary}",
                "--threads=1", "--lengths=8,16", "--num_runs=2",
                "--min_secs=0", "--benchmark_args=--warmup_min_secs=0",
                f"--results_dir={tmp_path / 'results'}",
                models["tiny_qa_dynamic"])
  assert out.returncode == 0, out.stdout + out.stderr
  run, _ = _run_file(tmp_path / "results")
  assert [(c["length"], c["status"]) for c in run["cells"]] == [
      (8, "ok"), (16, "ok")]
  sent = [c for c in lab.commands() if c.startswith(PREFIX)]
  assert [c["command"] for c in run["cells"]] == sent
  for length, command in zip((8, 16), sent):
    shape = ":".join([f"1,{length}"] * 3)
    assert command.endswith(
        f" --input_layer=ids,mask,segment_ids --input_layer_shape={shape} "
        "--input_layer_value_range=ids,0,99:mask,0,1:segment_ids,0,1")


def test_model_named_like_an_option_is_run_and_removed(lab, models, tmp_path):
  """`-x.tflite` reaches every device shell command as ./-x.tflite: it is
  pushed, run and removed, and the harness reports removed only what the
  device no longer holds."""
  lab.start_device()
  before = _device_listing(lab)
  binary = _binary(tmp_path)
  model_dir = tmp_path / "models"
  model_dir.mkdir()
  shutil.copy(models["tiny_dense"], model_dir / "-x.tflite")
  common = ("--target=adb", f"--benchmark_binary={binary}", "--threads=1",
            "--num_runs=2", "--min_secs=0",
            "--benchmark_args=--warmup_min_secs=0")
  out = lab.cli("run", *common, f"--results_dir={tmp_path / 'results'}",
                str(model_dir))
  assert out.returncode == 0, out.stdout + out.stderr
  run, _ = _run_file(tmp_path / "results")
  assert run["settings"]["transfer"]["pushed"] == ["benchmark_model",
                                                    "-x.tflite"]
  assert [c["status"] for c in run["cells"]] == ["ok"]
  assert "removed from the device: benchmark_model, -x.tflite" in out.stdout
  assert "warning" not in out.stdout
  assert _device_listing(lab) == before  # nothing pushed stays behind

  # A file rm cannot remove (the "benchmark" turns the model into a
  # directory) is named as left, and never reported removed.
  stubborn = tmp_path / "stubborn"
  stubborn.write_text(f"#!/bin/sh\nrm -f ./-x.tflite && mkdir ./-x.tflite\n"
                      f"exec sh {binary} \"$@\"\n")
  out = lab.cli("run", *common[:1], f"--benchmark_binary={stubborn}",
                *common[2:], f"--results_dir={tmp_path / 'results2'}",
                str(model_dir))
  assert out.returncode == 1, out.stdout + out.stderr
  # rm's error and the "left" line travel in one stream: as two streams
  # the error's pieces could land around the line and hide it.
  stubborn_run, _ = _run_file(tmp_path / "results2")
  cell = {k: stubborn_run["cells"][0].get(k) for k in (
      "status", "error", "command", "raw_output")}
  assert "removed from the device" not in out.stdout, (out.stdout, cell)
  [warning] = [l for l in out.stdout.splitlines() if "clean-up" in l]
  assert warning.startswith("warning: clean-up failed: could not remove "
                            "-x.tflite from /data/local/tmp on the device")
  assert warning.endswith("removed stubborn")
  assert lab.device_file("-x.tflite").is_dir()
  assert not lab.device_file("stubborn").exists()


def test_second_run_on_one_device_is_refused(lab, models, tmp_path):
  """Two runs on one device would share its directory (one's clean-up
  removing the other's files): the second is refused before it pushes."""
  lab.start_device()
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys\nfrom android_bench.runner import "
       "device_lock\nwith device_lock(sys.argv[1]):\n  print('held', "
       "flush=True)\n  sys.stdin.read()\n", lab.serial],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
      env=lab.env)
  try:
    assert holder.stdout.readline() == "held\n"
    out = lab.cli("run", "--target=adb",
                  f"--benchmark_binary={_binary(tmp_path)}",
                  f"--results_dir={tmp_path / 'results'}",
                  models["tiny_dense"])
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"error: device {lab.serial}: another android_bench run (pid "
        f"{holder.pid}) is using it; wait for it to finish"]
    assert "sync:" not in lab.services()  # nothing pushed
    assert not (tmp_path / "results").exists()
  finally:
    holder.stdin.close()
    holder.wait()


def test_device_killed_mid_run(lab, models, tmp_path):
  lab.start_device()
  binary = _binary(tmp_path)
  results_dir = tmp_path / "results"
  begin = time.monotonic()
  proc = subprocess.Popen(
      [sys.executable, "-m", "android_bench", "run", "--target=adb",
       f"--adb={ADB}", f"--adb_server_port={lab.server_port}",
       f"--benchmark_binary={binary}", "--threads=2", "--num_runs=5",
       "--min_secs=3", "--reconnect_wait=2", "--timeout=60",
       f"--results_dir={results_dir}", models["tiny_cumsum"],
       models["tiny_dense"], models["tiny_qa"]],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=lab.env, cwd=REPO)
  # Kill the device 1.5 s into the second benchmark (each runs >= 3.5 s).
  deadline = time.monotonic() + 120
  while sum(c.startswith(PREFIX) for c in lab.commands()) < 2:
    assert proc.poll() is None and time.monotonic() < deadline
    time.sleep(0.1)
  time.sleep(1.5)
  lab.kill_device()
  stdout, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 1
  assert "Traceback" not in stdout + stderr
  run, path = _run_file(results_dir)
  assert stderr.strip().splitlines() == [
      f"error: 2 of 3 cells did not finish ({path} keeps the rest)"]
  assert run["complete"]
  first, second, third = run["cells"]
  assert first["status"] == "ok" and first["timings_us"]["count"] >= 5
  assert second["status"] == "error"
  assert second["error"].startswith(f"device {lab.serial} disconnected")
  assert BANNER in second["raw_output"]  # what arrived is kept
  assert second["timings_us"] is None
  assert third["status"] == "skipped"
  assert third["error"].startswith("device lost earlier in the run")
  assert "| tiny_cumsum.tflite | benchmark_model | xnnpack | 2 |" in stdout
  assert time.monotonic() - begin < 90


def test_hung_benchmark_times_out_on_the_device(lab, models, tmp_path):
  lab.start_device()
  binary = _binary(tmp_path, hang_on="tiny_cumsum")
  out = lab.cli("run", "--target=adb", f"--benchmark_binary={binary}",
                "--threads=1", "--num_runs=3", "--min_secs=0",
                "--benchmark_args=--warmup_min_secs=0", "--timeout=8",
                f"--results_dir={tmp_path / 'results'}",
                models["tiny_cumsum"], models["tiny_dense"])
  assert out.returncode == 1
  run, _ = _run_file(tmp_path / "results")
  hung, fine = run["cells"]
  assert hung["status"] == "timeout"
  assert hung["error"] == ("no result after 8 s; killed benchmark_model on "
                           "the device")
  assert fine["status"] == "ok" and fine["timings_us"]["count"] == 3
  assert any(c.startswith("cd /data/local/tmp && kill -9 $(cat "
                          ".android_bench.pid)") for c in lab.commands())
  pid = int((tmp_path / "hung.pid").read_text())
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      break
    time.sleep(0.2)
  else:
    pytest.fail(f"the hung benchmark (pid {pid}) is still running")
  # Clean-up still ran: nothing this run pushed is left.
  assert not lab.device_file("tiny_cumsum.tflite").exists()


def test_no_device_is_one_line(lab, models, tmp_path):
  binary = _binary(tmp_path)
  out = lab.cli("run", "--target=adb", f"--benchmark_binary={binary}",
                models["tiny_dense"])
  assert out.returncode == 1
  assert out.stderr.strip().splitlines() == [
      "error: no device attached: adb devices lists none; connect a phone or "
      "emulator, or use --target host"]
  out = lab.cli("devices")
  assert out.returncode == 1
  assert out.stderr.strip().splitlines() == [
      "error: no device attached (adb devices lists none); connect a phone "
      "or start an emulator"]
  lab.start_device()
  out = lab.cli("run", "--target=adb", "--serial=10.9.9.9:5555",
                f"--benchmark_binary={binary}", models["tiny_dense"])
  assert out.stderr.strip().splitlines() == [
      f"error: device 10.9.9.9:5555 not found (adb devices lists: "
      f"{lab.serial})"]
  out = lab.cli("run", "--target=adb", models["tiny_dense"])
  assert out.returncode == 1 and out.stderr.startswith(
      "error: --target adb needs --benchmark_binary")


def test_an_adb_that_fails_silently_is_one_line():
  out = subprocess.run(
      [sys.executable, "-m", "android_bench", "devices", "--adb=/bin/false"],
      capture_output=True, text=True, cwd=REPO, timeout=120)
  assert out.returncode == 1
  assert out.stderr.strip().splitlines() == [
      "error: /bin/false devices failed: exit status 1"]


def _zone(celsius, status):
  return {"thermal_zones": {"cpu-1-0-usr": celsius * 1000},
          "thermal_status": status}


def test_hot_device_waits_then_marks_the_cell(lab, models, tmp_path):
  """The device is hot: the first cell waits until it cools, runs, and is
  marked because it ended hot; before the second the device stays hot, the
  wait times out, and that cell runs anyway, marked."""
  lab.start_device(profile={"thermal_readings": [
      _zone(52, 2), _zone(45, 1), {},   # cools to the profile's 38.2 C
      _zone(43, 0),                     # after cell 1: warm again
      _zone(50, 3)]})                   # and stays hot
  binary = _binary(tmp_path)
  results_dir = tmp_path / "results"
  out = lab.cli("run", "--target=adb", f"--benchmark_binary={binary}",
                "--threads=1", "--repeats=2", "--num_runs=3", "--min_secs=0",
                "--benchmark_args=--warmup_min_secs=0", "--cool_below_c=40",
                "--cool_timeout_s=2", "--cool_poll_s=0.2",
                f"--results_dir={results_dir}", models["tiny_dense"])
  assert out.returncode == 0, out.stdout + out.stderr
  run, _ = _run_file(results_dir)
  assert (run["settings"]["cool_below_c"], run["settings"]["cool_timeout_s"],
          run["settings"]["throttled_status"]) == (40, 2, 1)
  first, second = run["cells"]
  assert first["status"] == second["status"] == "ok"

  # What reached the device: T = a thermal read, B = a benchmark.
  order = "".join("T" if "dumpsys thermalservice" in c else "B"
                  for c in lab.commands()
                  if "dumpsys thermalservice" in c or c.startswith(PREFIX))
  assert order.startswith("TTTBT") and order.endswith("B" + "T")
  waits_second = order[len("TTTBT"):-2]
  assert len(waits_second) == second["thermal"]["reads"] >= 3
  assert set(waits_second) == {"T"}

  t = first["thermal"]
  assert (t["before_wait"]["max_c"], t["before_wait"]["status"]) == (52, 2)
  assert (t["before"]["max_c"], t["before"]["status"]) == (38.2, 0)
  assert t["reads"] == 3 and t["wait_timed_out"] is False
  assert 0.4 <= t["waited_s"] < 10  # two polls of 0.2 s, plus the reads
  assert t["hot_before"] == []
  assert (t["after"]["max_c"], t["hot_after"]) == (43, ["43 C >= 40 C"])
  assert first["throttled"] is True

  t = second["thermal"]
  assert t["wait_timed_out"] is True and 2 <= t["waited_s"] < 10
  assert t["before_wait"]["max_c"] == t["before"]["max_c"] == 50
  assert t["hot_before"] == t["hot_after"] == ["thermal status 3 (severe)",
                                               "50 C >= 40 C"]
  assert second["throttled"] is True
  assert second["timings_us"]["count"] == 3  # measured all the same

  assert ("[1/2] device hot (thermal status 2 (moderate); 52 C >= 40 C): "
          "waiting up to 2 s for it to cool") in out.stdout
  assert f"[1/2] cooled in {first['thermal']['waited_s']:g} s: hottest " \
      "zone 38.2 C, thermal status 0" in out.stdout
  assert "[2/2] still hot after " in out.stdout
  assert "measuring anyway, the cell is marked throttled" in out.stdout
  assert "| 2/2 | ok |" in out.stdout
  assert "! 2 of 2 cells ran hot or throttled" in out.stdout
  # The report of the saved run says the same.
  again = lab.cli("report", str(results_dir))
  assert again.returncode == 0, again.stderr
  assert "| tiny_dense.tflite | benchmark_model | xnnpack | 1 |" in \
      again.stdout and "| 2/2 | ok |" in again.stdout
