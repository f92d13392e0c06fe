"""Float flags hold numbers: nan and inf are refused before any work.

absl's float parser takes "nan" and "inf", and a range check written as
`value <= 0` or `low <= value <= high` lets nan through (and inf through a
lower bound), so `convert_tflite --qat_learning_rate nan` trained. Rather
than each check remembering math.isfinite, every command with float flags
calls, first thing in main (before TensorFlow loads):

    refuse_nonfinite_floats()    # "error: --FLAG nan: ..." and exit 1

It checks every float flag the process defined, the command's own and the
shared ones alike. No flag of ours means "unbounded" by inf: a missing bound
is the flag's None default.
"""

import math
import sys

from absl import flags


def nonfinite_float_flag(flag_values=flags.FLAGS):
  """None, or one line naming the first float flag set to nan or +-inf."""
  for name in sorted(flag_values):
    flag = flag_values[name]
    if flag.name != name or not isinstance(flag.parser, flags.FloatParser):
      continue  # a short name, or not a float
    values = flag.value if isinstance(flag.value, list) else [flag.value]
    for value in values:
      if value is not None and not math.isfinite(value):
        return f"--{name} {value}: give a finite number"
  return None


def refuse_nonfinite_floats(flag_values=flags.FLAGS):
  """Exits with `error: <that line>` (status 1) if a float flag is not
  finite."""
  line = nonfinite_float_flag(flag_values)
  if line:
    sys.exit(f"error: {line}")
