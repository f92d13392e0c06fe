"""Thermal-aware benchmarking without a device: the hot / cool verdict, the
wait for a device to cool (on a fake clock), run_matrix on a fake target
whose temperature the test scripts, and how reports mark throttled cells,
old runs included. The stand-in adb device's hot run is in
test_android_bench_adb.py."""

import json
import os

import pytest

from android_bench import report, results, thermal
from android_bench.runner import Settings, run_matrix

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "fixtures", "android_bench")
POLICY = thermal.ThermalPolicy(limit_c=40, throttled_status=1, timeout_s=30,
                               poll_s=5)


def reading(max_c, status=0):
  return {"status": status, "zones_c": {"cpu": max_c}, "max_c": max_c}


class FakeClock:
  """time.monotonic / time.sleep where sleeping only moves the clock, and
  every thermal read costs `read_s`."""

  def __init__(self, readings, read_s=0.5):
    self.now, self.readings, self.read_s, self.slept = 100.0, readings, \
        read_s, []

  def clock(self):
    return self.now

  def sleep(self, seconds):
    self.slept.append(seconds)
    self.now += seconds

  def read(self):
    self.now += self.read_s
    return self.readings.pop(0) if len(self.readings) > 1 else \
        self.readings[0]


def test_hot_reasons():
  assert thermal.hot_reasons(reading(39.9), POLICY) == []
  assert thermal.hot_reasons(reading(40.0), POLICY) == ["40 C >= 40 C"]
  assert thermal.hot_reasons(reading(52.5, 2), POLICY) == [
      "thermal status 2 (moderate)", "52.5 C >= 40 C"]
  # No limit: the status alone; a higher status threshold lets light pass.
  assert thermal.hot_reasons(reading(90, 1), thermal.ThermalPolicy()) == [
      "thermal status 1 (light)"]
  assert thermal.hot_reasons(
      reading(30, 1), thermal.ThermalPolicy(throttled_status=2)) == []
  # A device that reports nothing (host without zones, old Android).
  assert thermal.hot_reasons({"status": None, "zones_c": {}, "max_c": None},
                             POLICY) == []
  assert thermal.hot_reasons(None, POLICY) == []


def test_wait_until_cool_polls_until_below_the_limit():
  fake = FakeClock([reading(52, 2), reading(45, 1), reading(38)])
  lines = []
  wait = thermal.wait_until_cool(fake.read, POLICY, log=lines.append,
                                 clock=fake.clock, sleep=fake.sleep)
  # Three reads of 0.5 s, two sleeps of poll_s = 5 s.
  assert fake.slept == [5, 5]
  assert wait == {"before": reading(38), "before_wait": reading(52, 2),
                  "waited_s": 11.5, "reads": 3, "wait_timed_out": False,
                  "hot_before": []}
  assert lines == [
      "device hot (thermal status 2 (moderate); 52 C >= 40 C): waiting up "
      "to 30 s for it to cool",
      "cooled in 11.5 s: hottest zone 38 C, thermal status 0"]


def test_wait_until_cool_gives_up_at_the_timeout():
  fake = FakeClock([reading(50, 3)], read_s=1.0)
  lines = []
  policy = thermal.ThermalPolicy(limit_c=40, timeout_s=12, poll_s=5,
                                 progress_s=10)
  wait = thermal.wait_until_cool(fake.read, policy, log=lines.append,
                                 clock=fake.clock, sleep=fake.sleep)
  # 1 + 5 + 1 + 5 (= 12) + ... the last sleep is cut to what is left.
  assert fake.slept == [5, 5]
  assert wait["reads"] == 3 and wait["waited_s"] == 13.0
  assert wait["wait_timed_out"] is True
  assert wait["hot_before"] == ["thermal status 3 (severe)", "50 C >= 40 C"]
  assert lines[1] == ("still hot after 13 s: hottest zone 50 C, thermal "
                      "status 3")
  assert lines[-1].startswith("still hot after 13 s (thermal status 3 "
                              "(severe); 50 C >= 40 C): measuring anyway")
  # A zero timeout: one read, no sleep, still marked.
  fake = FakeClock([reading(50, 3)])
  wait = thermal.wait_until_cool(
      fake.read, thermal.ThermalPolicy(limit_c=40, timeout_s=0),
      log=lambda _: None, clock=fake.clock, sleep=fake.sleep)
  assert (fake.slept, wait["reads"], wait["wait_timed_out"]) == ([], 1, True)


def test_no_limit_never_waits_but_judges_the_status():
  fake = FakeClock([reading(80, 2), reading(30)])
  lines = []
  wait = thermal.wait_until_cool(fake.read, thermal.ThermalPolicy(),
                                 log=lines.append, clock=fake.clock,
                                 sleep=fake.sleep)
  assert (fake.slept, lines, wait["reads"], wait["waited_s"]) == (
      [], [], 1, 0.0)
  assert wait["wait_timed_out"] is False and wait["before_wait"] is None
  record = thermal.cell_record(wait, reading(30), thermal.ThermalPolicy())
  assert record["hot_before"] == ["thermal status 2 (moderate)"]
  assert record["hot_after"] == []
  assert thermal.is_throttled(record) is True


class ScriptedTarget:
  """A target whose cells print a recorded benchmark_model transcript and
  whose thermal readings follow a script: phases[k] are the readings after
  k cells ran, one per read, the last repeated."""

  name = "adb"
  runners = ["benchmark_model"]

  def __init__(self, phases):
    self.phases = [list(p) for p in phases]
    self.cells_run = 0
    self.reads = 0
    with open(os.path.join(FIXTURES, "plain_percentiles.txt")) as f:
      self.output = f.read()

  def facts(self):
    return {"model": "scripted phone"}

  def prepare(self, model_paths):
    return {}

  def cell_mask(self):
    return None

  def thermal(self):
    self.reads += 1
    readings = self.phases[min(self.cells_run, len(self.phases) - 1)]
    return readings.pop(0) if len(readings) > 1 else readings[0]

  def run_cell(self, model, runner, threads, delegate, facts=None,
               length=None):
    self.cells_run += 1
    return "ok", self.output, f"./benchmark_model --graph={model}", None

  def ensure_alive(self):
    pass

  def cleanup(self):
    return []


def test_run_matrix_waits_then_marks(tmp_path):
  model = tmp_path / "m.tflite"
  model.write_bytes(b"not a real model")  # facts record a load error
  # Cell 1: hot, hot, cool -> runs; ends hot. Cell 2: too hot until the
  # timeout (0.3 s), runs anyway. Cell 3: cool before and after.
  target = ScriptedTarget([[reading(52, 2), reading(45, 1), reading(38)],
                           [reading(43, 1), reading(50, 3)],
                           [reading(35)]])
  settings = Settings(repeats=3, cool_below_c=40, cool_timeout_s=0.3,
                      cool_poll_s=0.01)
  lines = []
  run, path = run_matrix(target, [str(model)], settings, str(tmp_path / "r"),
                         log=lines.append)
  first, second, third = run["cells"]
  assert [c["status"] for c in run["cells"]] == ["ok"] * 3
  assert first["thermal"]["reads"] == 3 and first["thermal"]["before"] == \
      reading(38)
  assert first["thermal"]["before_wait"] == reading(52, 2)
  assert first["thermal"]["hot_before"] == []
  assert first["thermal"]["hot_after"] == ["thermal status 1 (light)",
                                           "43 C >= 40 C"]
  assert first["throttled"] is True
  assert second["thermal"]["wait_timed_out"] is True
  assert second["thermal"]["waited_s"] >= 0.3
  assert second["thermal"]["hot_before"] == ["thermal status 3 (severe)",
                                             "50 C >= 40 C"]
  assert second["throttled"] is True
  # The wait is not part of the cell's wall time.
  assert second["wall_s"] < second["thermal"]["waited_s"]
  assert third["thermal"]["waited_s"] == 0.0 and third["throttled"] is False
  assert third["thermal"]["before_wait"] is None
  assert run["settings"]["cool_below_c"] == 40
  done = "m.tflite benchmark_model xnnpack 4 threads #{}: 62.511 ms median " \
      "over 50 runs"
  assert lines[1:] == [
      "[1/3] device hot (thermal status 2 (moderate); 52 C >= 40 C): "
      "waiting up to 0.3 s for it to cool",
      f"[1/3] cooled in {first['thermal']['waited_s']:g} s: hottest zone "
      f"38 C, thermal status 0",
      f"[1/3] {done.format(0)} [throttled]",
      "[2/3] device hot (thermal status 3 (severe); 50 C >= 40 C): waiting "
      "up to 0.3 s for it to cool",
      f"[2/3] still hot after {second['thermal']['waited_s']:g} s (thermal "
      f"status 3 (severe); 50 C >= 40 C): measuring anyway, the cell is "
      f"marked throttled",
      f"[2/3] {done.format(1)} [throttled]", f"[3/3] {done.format(2)}"]
  # The saved file holds the same and loads back.
  assert results.load_run(path)["cells"][1]["thermal"] == second["thermal"]

  [row] = report.summarize(run)
  assert (row["throttled"], row["thermal_known"]) == (2, 3)
  assert row["cool_wait_s"] == pytest.approx(
      first["thermal"]["waited_s"] + second["thermal"]["waited_s"])
  table = report.markdown_table([run])
  assert "| m.tflite | benchmark_model | xnnpack | 4 | 62.51! |" in table
  assert "| 2/3 | ok |" in table
  assert table.rstrip().splitlines()[-1].startswith(
      "! 2 of 3 cells ran hot or throttled")


def test_defaults_do_not_wait(tmp_path):
  """Settings() as experiments/ build them: one read before, one after."""
  model = tmp_path / "m.tflite"
  model.write_bytes(b"x")
  target = ScriptedTarget([[reading(70, 0)]])
  run, _ = run_matrix(target, [str(model)], Settings(), str(tmp_path),
                      log=lambda _: None)
  [cell] = run["cells"]
  assert target.reads == 2
  assert cell["thermal"]["reads"] == 1 and cell["thermal"]["waited_s"] == 0
  assert cell["throttled"] is False  # 70 C, but no limit and status 0
  assert "| no | ok |" in report.markdown_table([run])


def test_a_limit_without_temperatures_warns_once(tmp_path):
  model = tmp_path / "m.tflite"
  model.write_bytes(b"x")
  blind = {"status": 0, "zones_c": {}, "max_c": None}
  lines = []
  run, _ = run_matrix(ScriptedTarget([[blind]]), [str(model)],
                      Settings(repeats=2, cool_below_c=40), str(tmp_path),
                      log=lines.append)
  assert [l for l in lines if l.startswith("warning")] == [
      "warning: cool_below_c 40: the device reports no thermal zone "
      "temperature; cells wait on the thermal status only"]
  assert [c["throttled"] for c in run["cells"]] == [False, False]


def _old_cell(before_status, after_status, thermal_record=True):
  cell = {"model": "a.tflite", "runner": "benchmark_model",
          "delegate": "xnnpack", "threads": 4, "repeat": 0, "status": "ok",
          "error": None, "timings_us": {
              "count": 50, "min": 9000, "median": 10000, "mean": 10000,
              "max": 11000, "std": 10, "p5": 9500, "p95": 10500}}
  if thermal_record:
    cell["thermal"] = {"before": {"status": before_status, "zones_c": {},
                                  "max_c": None},
                       "after": {"status": after_status, "zones_c": {},
                                 "max_c": None}}
  return cell


def test_old_runs_load_and_are_judged_by_status(tmp_path):
  run = results.new_run("adb", {"model": "Pixel 4"}, {}, {}, [], "old")
  run["cells"] = [_old_cell(0, 0), _old_cell(0, 2), _old_cell(None, None),
                  _old_cell(0, 0, thermal_record=False)]
  path = tmp_path / "old.json"
  path.write_text(json.dumps(run))
  loaded = results.load_run(str(path))
  assert [thermal.cell_throttled(c) for c in loaded["cells"]] == [
      False, True, None, None]
  [row] = report.summarize(loaded)
  assert (row["throttled"], row["thermal_known"], row["cool_wait_s"]) == (
      1, 2, 0)
  assert "| 10! |" in report.markdown_table([loaded])
  assert "| 1/2 | ok |" in report.markdown_table([loaded])
  cool = results.new_run("adb", {}, {}, {}, [], "new")
  cool["cells"] = [_old_cell(0, 0)]
  table, _ = report.compare(loaded, cool)
  assert "| a.tflite | benchmark_model | xnnpack | 4 | 10! | 10 | 1.000 |" \
      in table
  assert table.rstrip().endswith("ran hot or throttled.")
