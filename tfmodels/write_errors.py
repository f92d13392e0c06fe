"""A write the disk refused, told in one line that names the path.

A full disk (or a file-size limit, a read-only mount) reaches a command as
a TensorFlow op error from checkpoint and SavedModel writes, its message
the kernel's name, a temporary path and the reason
(`{{function_node __wrapped__SaveV2...}} .../ckpt-2_temp/part-...; No space
left on device [Op:SaveV2]`), or as an OSError from Python's own writes.
`refused` turns either into a `WriteError`: an `OutputError`, which every
command already prints as `error: ...`, naming the output and the reason.

    try:
      tf.train.Checkpoint(model=model).write(prefix)
    except WRITE_FAILURES as e:
      raise refused(prefix, "the checkpoint", e) from None
"""

import re

import tensorflow as tf

from tfmodels.staging import OutputError

WRITE_FAILURES = (OSError, tf.errors.OpError)


class WriteError(OutputError):
  """An output the disk refused; the message names it and why."""


def reason(error):
  """The operating system's words for a failed write ("No space left on
  device"), without TensorFlow's kernel names and temporary paths."""
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  text = str(getattr(error, "message", "") or error).strip()
  text = text.splitlines()[0] if text else type(error).__name__
  text = re.sub(r"\s*\[Op:\w+\].*$", "", text)
  return text.rsplit("; ", 1)[-1].strip() or type(error).__name__


def refused(path, what, error, then=""):
  """WriteError: "PATH: cannot write WHAT (REASON)[; THEN]"."""
  return WriteError(f"{path}: cannot write {what} ({reason(error)})"
                    + (f"; {then}" if then else ""))
