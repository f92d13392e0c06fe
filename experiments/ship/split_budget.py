"""The budget a carved student must meet: at most a latency, a
share of the teacher's own int8 time (on emulated arm64: of its int8
instructions per inference), a share of its encoder parameters, an int8
file size. `split_search` chooses against it; `ship` checks its
flags with `budget_of` before any work (this module loads no TensorFlow,
so a bad flag is refused at once).
"""

import dataclasses

from tfmodels.command_options import option


@dataclasses.dataclass(frozen=True, kw_only=True)
class BudgetOptions:
  """The budget's flags, declared once for every command that takes them
  (ship, split_search; each calls tfmodels.flag_checks'
  refuse_nonfinite_floats on them first); `budget_of` reads them."""
  target_latency_ms: float = option(0.0, "Budget: at most this median int8 "
                                    "time on --target (0: none).")
  target_latency_share: float = option(
      0.0, "Budget: at most this share of the teacher's own int8 time on "
      "--target, measured in the same run (--target arm64: of its int8 "
      "instructions per inference; 0: none).")
  target_params: float = option(0.0, "Budget: at most this share of the "
                                "teacher's encoder parameters (0: none).")
  target_mb: float = option(0.0, "Budget: at most this int8 file size in MB "
                            "(0: none).")


def millions(instructions):
  """An instruction count as millions, 4 significant digits (597.5M)."""
  return f"{instructions / 1e6:.4g}M"


@dataclasses.dataclass(frozen=True)
class Budget:
  """At most this latency, share of the teacher's encoder parameters, int8
  file size, or share of the teacher's own int8 time (`teacher_ms`, set
  once measured: `with_teacher`) (None: no bound of that kind). With
  `teacher_instructions` (a search on emulated arm64) the share bounds
  instructions per inference instead of milliseconds."""
  latency_ms: float | None = None
  params_share: float | None = None
  int8_mb: float | None = None
  latency_share: float | None = None
  teacher_ms: float | None = None
  teacher_instructions: float | None = None

  def with_teacher(self, teacher_ms, teacher_instructions=None):
    return dataclasses.replace(self, teacher_ms=teacher_ms,
                               teacher_instructions=teacher_instructions)

  def max_latency_ms(self):
    """The tightest time bound, or None."""
    bounds = [self.latency_ms] if self.latency_ms else []
    if (self.latency_share and self.teacher_ms
        and not self.teacher_instructions):
      bounds.append(self.latency_share * self.teacher_ms)
    return min(bounds) if bounds else None

  def max_instructions(self):
    """The bound on emulated arm64 instructions per inference, or None."""
    if self.latency_share and self.teacher_instructions:
      return self.latency_share * self.teacher_instructions
    return None

  def describe(self):
    if self.teacher_instructions:
      share = (f"{self.latency_share:g} of the teacher's int8 instructions "
               f"on emulated arm64 ({millions(self.teacher_instructions)} "
               f"per inference: {millions(self.max_instructions())})"
               if self.latency_share else None)
    else:
      share = (f"{self.latency_share:g} of the teacher's int8 time"
               + (f" ({self.teacher_ms:.2f} ms: "
                  f"{self.latency_share * self.teacher_ms:.2f} ms)"
                  if self.teacher_ms else "")
               if self.latency_share else None)
    parts = [f"{self.latency_ms:g} ms" if self.latency_ms else None, share,
             f"{self.params_share:g} of the teacher's parameters"
             if self.params_share else None,
             f"{self.int8_mb:g} MB" if self.int8_mb else None]
    return " and ".join(p for p in parts if p) or "no bound"

  def admits(self, row, teacher_params):
    latency, instructions = self.max_latency_ms(), self.max_instructions()
    return ((latency is None or row.latency_ms <= latency)
            and (instructions is None or (row.instructions is not None
                                          and row.instructions <= instructions))
            and (self.params_share is None
                 or row.params <= self.params_share * teacher_params)
            and (self.int8_mb is None or row.int8_mb <= self.int8_mb))


# The budget flags of the search and of `ship` (0: no bound of that kind).
BUDGET_FLAGS = ("target_latency_ms", "target_latency_share", "target_params",
                "target_mb")


def budget_of(values):
  """The Budget of {budget flag: value}, or ValueError (one line naming
  the flag)."""
  for name in BUDGET_FLAGS:
    if values[name] < 0:
      raise ValueError(f"--{name} {values[name]}: must be >= 0")
  for name in ("target_params", "target_latency_share"):
    if values[name] >= 1:
      raise ValueError(f"--{name} {values[name]}: a share of the "
                       "teacher's, below 1")
  budget = Budget(values["target_latency_ms"] or None,
                  values["target_params"] or None,
                  values["target_mb"] or None,
                  values["target_latency_share"] or None)
  if budget == Budget():
    raise ValueError("give a budget: --target_latency_ms, "
                     "--target_latency_share, --target_params or "
                     "--target_mb")
  return budget


def check_target(target, values):
  """ValueError (one line) when the budget flags ask what `target` cannot
  measure: emulated arm64 counts instructions, so its time budget is a
  share of the teacher's."""
  if target == "arm64" and values.get("target_latency_ms"):
    raise ValueError(f"--target_latency_ms {values['target_latency_ms']:g}: "
                     "emulated arm64 counts instructions, not milliseconds; "
                     "give --target_latency_share (a share of the "
                     "teacher's instructions)")
