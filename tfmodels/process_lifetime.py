"""Children stop when the process that started them dies, even by kill -9.

    subprocess.Popen(argv, preexec_fn=die_with_parent)
    status = run_owned(argv)      # and SIGTERM / Ctrl-C reach the child too

Why: SIGTERM unwinds our commands (`tfmodels/sigterm.py`), and each
`finally` stops the children its block started; `kill -9` runs no code at
all, so a conversion, a benchmark or a pipeline step would keep running,
writing into an output whose lock went with its parent. Linux's
PR_SET_PDEATHSIG has the kernel send the child SIGTERM instead. It lives
in stage 1 because every stage starts children (convert_tflite's LiteRT
probe, qat_report's conversions, the harness's benchmarks, the pipeline).
"""

import ctypes
import ctypes.util
import signal
import subprocess

_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child only makes the call.
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def die_with_parent():
  """A `preexec_fn`: the child gets SIGTERM when its parent dies."""
  _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def run_owned(argv, **popen_kwargs):
  """Runs a command to its end and returns its exit status; the child dies
  with us (kill -9 included), and when we are stopped (SIGTERM's
  SystemExit, Ctrl-C) it gets SIGTERM and is waited for, so it unwinds
  its own staging instead of being killed mid-write (subprocess.run
  SIGKILLs it)."""
  process = subprocess.Popen(argv, preexec_fn=die_with_parent,
                             **popen_kwargs)
  try:
    return process.wait()
  except BaseException:
    process.terminate()
    process.wait()
    raise
