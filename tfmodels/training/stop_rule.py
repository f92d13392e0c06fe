"""When more training stops helping: the doubling rule.

A run is scored on a slice held out of train at S, 2S, 4S ... steps; the
curve has reached its plateau when one doubling gains less than `min_gain`
points (F1 for QA, accuracy x 100 for classification). A teacher's points
are whole runs (`experiments.papers.plateau`); a student's are points within one
run (`finetune --eval_split`), which also stops at a cap in steps and one
in minutes. Within a run, a doubling from a point still inside the
learning rate's warmup does not end it: there the rate is still rising,
and a flat or falling score says nothing about the plateau (a carved
student scored 75.1 at 200 steps and 74.7 at 400, 640 steps into a
warmup of 640, and ended at 76.9 dev F1 where the same recipe past its
warmup reached 78.3).

    rule = StopRule(first_steps=200, max_steps=6400, min_gain=0.5,
                    max_minutes=60)
    rule.is_point(400)                     # True: a point of the curve
    rule.reason([(200, 61.0), (400, 61.2)], step=400, minutes=12)
    # -> "a doubling (200 -> 400 steps) gained 0.20 < 0.5 points"
"""

import dataclasses
import json
import os
import time


def doublings(first, max_steps):
  """S, 2S, 4S ... up to max_steps."""
  steps = first
  while steps <= max_steps:
    yield steps
    steps *= 2


def plateau_of(curve, min_gain):
  """(last doubling's gain or None, reached?) of [(steps, score)]."""
  if len(curve) < 2:
    return None, False
  gain = curve[-1][1] - curve[-2][1]
  return gain, gain < min_gain


@dataclasses.dataclass(frozen=True)
class StopRule:
  """The points of a run's curve and why it ends. `max_minutes` 0: none;
  doublings from a point before `warmup_steps` do not end it."""
  first_steps: int
  max_steps: int
  min_gain: float = 0.5
  max_minutes: float = 0.0
  warmup_steps: int = 0

  def is_point(self, step):
    """Is `step` S * 2^k (a doubling of the first point)?"""
    steps = self.first_steps
    while steps < step:
      steps *= 2
    return steps == step

  def out_of_time(self, minutes):
    return bool(self.max_minutes) and minutes >= self.max_minutes

  def reason(self, curve, step, minutes):
    """Why the run ends at `step` (None: it goes on). `curve` is the
    [(steps, score)] scored so far, its last point at `step` if any."""
    gain, reached = plateau_of(curve, self.min_gain)
    if reached and curve[-1][0] == step and (
        curve[-2][0] >= self.warmup_steps):
      return (f"a doubling ({curve[-2][0]} -> {curve[-1][0]} steps) gained "
              f"{gain:.2f} < {self.min_gain:g} points")
    if step >= self.max_steps:
      return f"the step cap ({self.max_steps} steps) was reached"
    if self.out_of_time(minutes):
      return (f"the time cap ({self.max_minutes:g} minutes) was reached "
              f"after {step} steps")
    return None


PLATEAU = "plateau.json"


class Curve:
  """A run's held-out curve (finetune --eval_split): `score()` (points) at
  the rule's points and where the run ends; written to `model_dir`'s
  plateau.json after each point (by the chief), so a run resumed from
  `start_step` keeps its points up to there. `snapshot(step)` is called at
  each point that scores above every earlier one, so the run can end with
  its best weights (`best`) rather than its last: a student's held-out
  score can fall while the learning rate is still high."""

  def __init__(self, split, rule, score, model_dir, start_step, chief=True,
               snapshot=None):
    self.split, self.rule, self.score, self.chief = split, rule, score, chief
    self.snapshot = snapshot
    self.path = os.path.join(model_dir, PLATEAU)
    held = read_plateau(self.path) if start_step else {}
    self.points = [p for p in held.get("points", [])
                   if p["steps"] <= start_step]
    self.reason = (held.get("stopped") if held.get("steps") == start_step
                   else None)
    self.ended = self.reason is not None or start_step >= rule.max_steps
    self.minutes_before = self.points[-1]["minutes"] if self.points else 0.0
    self.began = time.monotonic()

  def should_stop(self, step):
    """Trainer.train's `should_stop`: scores the split at a point (or where
    a cap ends the run) and says whether the run ends here."""
    minutes = self.minutes_before + (time.monotonic() - self.began) / 60
    ends = step >= self.rule.max_steps or self.rule.out_of_time(minutes)
    if not (self.rule.is_point(step) or ends):
      return False
    points = self.score()
    best = self.best
    self.points.append({"steps": step, "score": round(points, 4),
                        "minutes": round(minutes, 3)})
    if self.snapshot is not None and (best is None
                                      or points > best["score"]):
      self.snapshot(step)
    self.reason = self.reason_at(step, minutes)
    print(f"{self.split} at step {step}: {points:.2f}"
          + (f"; the run ends: {self.reason}" if self.reason else ""),
          flush=True)
    if self.chief:
      self._write(step)
    return self.reason is not None

  @property
  def best(self):
    """The point that scored highest (the earliest of equals), or None."""
    return max(self.points, key=lambda p: p["score"], default=None)

  def reason_at(self, step, minutes):
    return self.rule.reason([(p["steps"], p["score"]) for p in self.points],
                            step, minutes)

  def _write(self, step):
    from tfmodels.staging import write_file
    from tfmodels.write_errors import refused
    try:
      write_file(self.path, json.dumps({
          "split": self.split, "rule": dataclasses.asdict(self.rule),
          "points": self.points, "steps": step, "stopped": self.reason,
          **({"kept_steps": self.best["steps"]} if self.snapshot else {})},
          indent=2))
    except OSError as e:
      raise refused(self.path, "the held-out curve", e) from None


def read_plateau(path):
  """A run's plateau.json ({} when absent or unreadable: the points are
  scored again)."""
  try:
    with open(path) as f:
      held = json.load(f)
  except (OSError, ValueError):
    return {}
  if not (isinstance(held, dict) and isinstance(held.get("points"), list)
          and all(isinstance(p, dict) and isinstance(p.get("steps"), int)
                  for p in held["points"])):
    return {}
  return held
