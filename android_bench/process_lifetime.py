"""Children stop when the process that started them dies, even by kill -9.

    subprocess.Popen(argv, preexec_fn=die_with_parent)

Why: SIGTERM unwinds our commands (`tfmodels/sigterm.py`), and each
`finally` stops the children its block started; `kill -9` runs no code at
all, so a benchmark or a pipeline step would keep running, writing into an
output whose lock went with its parent. Linux's PR_SET_PDEATHSIG has the
kernel send the child SIGTERM instead.
"""

import ctypes
import ctypes.util
import signal

_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child only makes the call.
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def die_with_parent():
  """A `preexec_fn`: the child gets SIGTERM when its parent dies."""
  _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
