"""The suite's warm-start server: `python -m` of a project command, started
by a test or by a pipeline under test, runs in a fork of this process,
which has already imported TensorFlow and tf-keras.

Why: the suite starts a few hundred commands and each spent ~5 s of CPU
importing TensorFlow before its first line of work; that was about a
third of the suite's CPU on a 2-core host (docs/design.md). A command here runs exactly as it
would alone (its own argv, cwd, environment, stdin/stdout/stderr, exit
status; signals reach it through the process that stands in for it), only
without paying the import. Besides TensorFlow, the server imports the
library modules nearly every command loads (models, tasks, the training
loop, the converter's stages: ~1.3 s more); none defines a flag or reads
the environment when imported, and no command module is imported before
the fork, so each command's own module and flags load fresh in the child.

    python tests/warm_start/server.py SOCKET   # prints "ready" when serving

sitecustomize.py beside it is the other half: it hands a starting
`python -m` over to this server when WARM_START_SOCKET names one.
"""

import atexit
import json
import os
import random
import runpy
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import traceback

import tfmodels  # noqa: F401  TF_USE_LEGACY_KERAS, before TensorFlow loads
import numpy as np
import tensorflow  # noqa: F401
import tensorflow_text  # noqa: F401
import tf_keras  # noqa: F401

import converters.conversion  # noqa: F401
import converters.quantize  # noqa: F401
import converters.validate  # noqa: F401
import tfmodels.checkpoints.hf  # noqa: F401
import tfmodels.checkpoints.model_dir  # noqa: F401
import tfmodels.inference  # noqa: F401
import tfmodels.models  # noqa: F401
import tfmodels.tokenization  # noqa: F401
import tfmodels.training.loop  # noqa: F401
import tfmodels.training.tasks  # noqa: F401

_PR_SET_PDEATHSIG = 1


def _receive(conn):
  """(request dict, [stdin, stdout, stderr] fds) of one client."""
  data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
  if len(data) < 4:
    raise ConnectionError("short request")
  size, = struct.unpack("!I", data[:4])
  data = data[4:]
  while len(data) < size:
    more = conn.recv(size - len(data))
    if not more:
      raise ConnectionError("client left mid-request")
    data += more
  return json.loads(data), fds


def _exit_code(code):
  """A SystemExit's code as the interpreter turns it into a status."""
  if code is None:
    return 0
  if isinstance(code, int):
    return code & 0xFF
  print(code, file=sys.stderr)
  return 1


def _run_child(request, fds):
  """In the fork: become the command the client stands for, run it as
  `python -m` would, exit with its status. Never returns."""
  import ctypes
  ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
    os.close(fd)
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  tempfile.tempdir = None  # found again from the command's TMPDIR
  sys.path[0] = request["cwd"]
  # A fresh interpreter draws its seeds from the OS; so does the fork.
  random.seed()
  np.random.seed()
  unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
  for stream in (sys.stdout, sys.stderr):
    stream.reconfigure(line_buffering=stream is sys.stderr or os.isatty(
        stream.fileno()), write_through=unbuffered)
  sys.argv = [request["module"], *request["args"]]
  # As a cold start runs it: the command's module fresh as __main__, even
  # where a library the server loaded imported it by name.
  sys.modules.pop(request["module"], None)
  code = 0
  try:
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
  except SystemExit as e:
    code = _exit_code(e.code)
  except KeyboardInterrupt:
    traceback.print_exc()
    code = -signal.SIGINT
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  try:
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    sys.stdout.flush()
    sys.stderr.flush()
  finally:
    if code < 0:  # died of the signal, as the interpreter does
      signal.signal(-code, signal.SIG_DFL)
      os.kill(os.getpid(), -code)
    os._exit(code)


def serve(path):
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(64)
  print("ready", flush=True)
  running = {}  # conn -> child pid
  while True:
    readable, _, _ = select.select([listener, *running], [], [], 0.05)
    for conn in readable:
      if conn is listener:
        client, _ = listener.accept()
        try:
          request, fds = _receive(client)
        except (ConnectionError, ValueError, OSError):
          client.close()
          continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
          listener.close()
          for other in running:
            other.close()
          client.close()
          _run_child(request, fds)
        for fd in fds:
          os.close(fd)
        client.sendall(f"pid {pid}\n".encode())
        running[client] = pid
      elif not conn.recv(1):  # the client is gone (kill -9): so is its command
        try:
          os.kill(running[conn], signal.SIGKILL)
        except ProcessLookupError:
          pass
    for conn, pid in list(running.items()):
      try:
        done, status = os.waitpid(pid, os.WNOHANG)
      except ChildProcessError:
        done, status = pid, 1 << 8
      if done:
        try:
          conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
          pass
        conn.close()
        del running[conn]


if __name__ == "__main__":
  serve(sys.argv[1])
