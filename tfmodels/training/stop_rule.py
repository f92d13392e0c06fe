"""When more training stops helping: the doubling rule.

A run is scored on a slice held out of train at S, 2S, 4S ... steps; the
curve has reached its plateau when one doubling gains less than `min_gain`
points (F1 for QA, accuracy x 100 for classification). A teacher's points
are whole runs (`experiments.plateau`); a student's are points within one
run (`finetune --eval_split`), which also stops at a cap in steps and one
in minutes.

    rule = StopRule(first_steps=200, max_steps=6400, min_gain=0.5,
                    max_minutes=60)
    rule.is_point(400)                     # True: a point of the curve
    rule.reason([(200, 61.0), (400, 61.2)], step=400, minutes=12)
    # -> "a doubling (200 -> 400 steps) gained 0.20 < 0.5 points"
"""

import dataclasses


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
  """The points of a run's curve and why it ends. `max_minutes` 0: none."""
  first_steps: int
  max_steps: int
  min_gain: float = 0.5
  max_minutes: float = 0.0

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
    if reached and curve[-1][0] == step:
      return (f"a doubling ({curve[-2][0]} -> {curve[-1][0]} steps) gained "
              f"{gain:.2f} < {self.min_gain:g} points")
    if step >= self.max_steps:
      return f"the step cap ({self.max_steps} steps) was reached"
    if self.out_of_time(minutes):
      return (f"the time cap ({self.max_minutes:g} minutes) was reached "
              f"after {step} steps")
    return None
