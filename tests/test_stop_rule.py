"""The doubling rule and a fine-tuning run's held-out curve (stop_rule.py,
finetune --eval_split) on scripted scores and a scripted clock."""

import json

import pytest

from tfmodels.training import stop_rule
from tfmodels.training.stop_rule import (PLATEAU, Curve, StopRule, doublings,
                                         plateau_of)


def test_doubling_stops_at_the_first_gain_below_the_threshold():
  assert list(doublings(200, 1600)) == [200, 400, 800, 1600]
  assert plateau_of([(200, 60.0)], 0.5) == (None, False)
  gain, reached = plateau_of([(200, 60.0), (400, 64.0)], 0.5)
  assert gain == pytest.approx(4.0) and not reached
  gain, reached = plateau_of([(400, 64.0), (800, 64.3)], 0.5)
  assert gain == pytest.approx(0.3) and reached
  assert plateau_of([(400, 64.0), (800, 63.0)], 0.5)[1]  # a loss


def test_points_are_the_doublings_of_the_first():
  rule = StopRule(first_steps=3, max_steps=100)
  assert [s for s in range(1, 101) if rule.is_point(s)] == [3, 6, 12, 24,
                                                            48, 96]


class _Task:
  """Scores the scripted curve: the held-out points at each call."""

  def __init__(self, scores):
    self.scores, self.asked = list(scores), []

  def evaluate(self, model, split):
    self.asked.append(split)
    return {"f1": self.scores.pop(0)}

  def points(self, results):
    return results["f1"]


def _run(tmp_path, monkeypatch, scores, start=0, minutes_per_step=0.0,
         **flags):
  """Steps start+1 ... until the curve ends it (or 1000): (the steps the
  run took, the curve)."""
  clock = [0.0]
  monkeypatch.setattr(stop_rule.time, "monotonic", lambda: clock[0])
  rule = {"first_steps": 2, "max_steps": 64, "min_gain": 0.5,
          "max_minutes": 0.0, **flags}
  task = _Task(scores)
  curve = Curve("heldout", StopRule(**rule), lambda: task.points(
      task.evaluate(None, "heldout")), str(tmp_path), start)
  step = start
  while not curve.ended and step < 1000:
    step += 1
    clock[0] += 60 * minutes_per_step
    if curve.should_stop(step):
      break
  return step, curve


def _plateau(tmp_path):
  return json.loads((tmp_path / PLATEAU).read_text())


def test_a_flat_doubling_ends_the_run(tmp_path, monkeypatch):
  step, curve = _run(tmp_path, monkeypatch, [50.0, 60.0, 60.2, 90.0])
  assert step == 8
  held = _plateau(tmp_path)
  assert [(p["steps"], p["score"]) for p in held["points"]] == [
      (2, 50.0), (4, 60.0), (8, 60.2)]
  assert held["stopped"] == "a doubling (4 -> 8 steps) gained 0.20 < 0.5 points"
  assert held["steps"] == 8 and held["split"] == "heldout"
  # Resumed from its last checkpoint (step 8), the run has ended.
  _, again = _run(tmp_path, monkeypatch, [], start=8)
  assert again.ended and again.reason == held["stopped"]


def test_a_flat_doubling_inside_the_warmup_does_not_end_it(tmp_path,
                                                          monkeypatch):
  """The rate still rises until step 6: neither 2 -> 4 nor 4 -> 8 (from
  inside the warmup) ends the run, though flat; 8 -> 16 rises, and the
  flat 16 -> 32 ends it."""
  step, _ = _run(tmp_path, monkeypatch, [50.0, 49.6, 49.8, 60.0, 60.1],
                 warmup_steps=6)
  assert step == 32
  held = _plateau(tmp_path)
  assert [p["steps"] for p in held["points"]] == [2, 4, 8, 16, 32]
  assert held["stopped"] == ("a doubling (16 -> 32 steps) gained 0.10 < 0.5 "
                             "points")
  assert held["rule"]["warmup_steps"] == 6


def test_the_run_keeps_the_weights_of_its_best_point(tmp_path, monkeypatch):
  """`snapshot` is called at each point above every earlier one; a curve
  that falls and rises again keeps its best point (`kept_steps`)."""
  clock = [0.0]
  monkeypatch.setattr(stop_rule.time, "monotonic", lambda: clock[0])
  scores, taken = [72.8, 72.1, 73.0, 73.0], []
  curve = Curve("heldout", StopRule(first_steps=2, max_steps=64,
                                    min_gain=0.5, max_minutes=0.0,
                                    warmup_steps=6),
                lambda: scores.pop(0), str(tmp_path), 0,
                snapshot=taken.append)
  step = 0
  while not curve.should_stop(step + 1):
    step += 1
  assert [p["steps"] for p in curve.points] == [2, 4, 8, 16]
  assert taken == [2, 8]  # 16 only ties 8: the earlier is kept
  assert curve.best == {"steps": 8, "score": 73.0, "minutes": 0.0}
  assert _plateau(tmp_path)["kept_steps"] == 8
  # Without a snapshot the run keeps its last weights and says nothing.
  _run(tmp_path, monkeypatch, [50.0, 60.0, 60.2])
  assert "kept_steps" not in _plateau(tmp_path)


def test_a_rising_curve_runs_to_the_step_cap(tmp_path, monkeypatch):
  step, _ = _run(tmp_path, monkeypatch, [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
                 max_steps=40)
  assert step == 40
  held = _plateau(tmp_path)
  # The cap is scored too, though it is no doubling.
  assert [p["steps"] for p in held["points"]] == [2, 4, 8, 16, 32, 40]
  assert held["stopped"] == "the step cap (40 steps) was reached"


def test_the_time_cap_ends_a_rising_run(tmp_path, monkeypatch):
  step, _ = _run(tmp_path, monkeypatch, [10.0, 20.0, 30.0],
                 minutes_per_step=1.0, max_minutes=5.0)
  assert step == 5
  held = _plateau(tmp_path)
  assert [(p["steps"], p["minutes"]) for p in held["points"]] == [
      (2, 2.0), (4, 4.0), (5, 5.0)]
  assert held["stopped"] == ("the time cap (5 minutes) was reached after 5 "
                             "steps")


def test_a_resumed_run_keeps_its_points_up_to_its_checkpoint(
    tmp_path, monkeypatch):
  _run(tmp_path, monkeypatch, [10.0, 20.0, 30.0], max_steps=8)
  assert [p["steps"] for p in _plateau(tmp_path)["points"]] == [2, 4, 8]
  # Killed after step 8's point but resumed from the step-5 checkpoint:
  # the points past it are scored again.
  step, curve = _run(tmp_path, monkeypatch, [31.0], start=5, max_steps=8)
  assert step == 8 and [p["steps"] for p in curve.points] == [2, 4, 8]
  assert curve.points[-1]["score"] == 31.0
