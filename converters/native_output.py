"""Keep native (C++) logging off the terminal.

The TFLite converter prints pages of MLIR and calibration chatter, and every
LiteRT interpreter announces its XNNPACK delegate, straight to file
descriptors 1 and 2, where Python's redirection cannot reach. A command that
promises one-line errors redirects the descriptors themselves.

    with native_output_to(os.devnull):
      converter.convert()
"""

import contextlib
import os
import sys


@contextlib.contextmanager
def native_output_to(path):
  """Sends fds 1 and 2 (stdout, stderr) to `path` for the duration."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = [os.dup(1), os.dup(2)]
  with open(path, "wb") as sink:
    try:
      os.dup2(sink.fileno(), 1)
      os.dup2(sink.fileno(), 2)
      yield
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved[0], 1)
      os.dup2(saved[1], 2)
      for fd in saved:
        os.close(fd)
