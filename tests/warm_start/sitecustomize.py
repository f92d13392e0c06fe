"""The client half of the suite's warm-start server (server.py beside it):
on PYTHONPATH while the suite runs, so every Python the tests start loads
it. A `python -m` of a project command that imports TensorFlow is handed
to the server, which runs it in a fork of an interpreter that has
imported TensorFlow already; this process stands in for it: it forwards
the signals it gets and exits with the command's status. Anything else,
or no server, starts as usual."""

import os
import sys

# Packages whose commands import TensorFlow; android_bench's do not (and
# its benchmark measures its own memory, which a fork would inflate).
_WARM = ("tfmodels", "converters", "experiments")


def _command():
  """The module of `python -m MODULE ...` when it is one to hand over."""
  argv = getattr(sys, "orig_argv", ())
  if len(argv) < 3 or argv[1] != "-m":
    return None
  return argv[2] if argv[2].split(".")[0] in _WARM else None


def _hand_over(path, module):
  import json
  import signal
  import socket
  import struct
  conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    conn.connect(path)
  except OSError:
    return  # no server: start as usual
  request = json.dumps({"module": module, "args": sys.orig_argv[3:],
                        "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
  socket.send_fds(conn, [struct.pack("!I", len(request)) + request],
                  [0, 1, 2])
  replies = conn.makefile("r")
  pid = int(replies.readline().split()[1])

  def forward(signum, _):
    try:
      os.kill(pid, signum)
    except ProcessLookupError:
      pass

  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                 signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, forward)
  line = ""
  while not line:
    try:
      line = replies.readline()
    except InterruptedError:
      continue
    if not line:  # the server died: so did the command
      os._exit(1)
  status = int(line.split()[1])
  if status < 0:  # killed by a signal: so is its stand-in
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
  os._exit(status)


_path, _module = os.environ.get("WARM_START_SOCKET"), _command()
if _path and _module:
  _hand_over(_path, _module)
