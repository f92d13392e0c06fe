"""The suite's warm-start server (tests/warm_start): a command handed to it
behaves as the same command started cold, and a kill -9 of the process
standing in for it takes the command along."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, VOCAB

TOKENIZE = [sys.executable, "-m", "tfmodels.tokenize_lines", "--vocab_file",
            VOCAB]


def _cold(env=None):
  env = dict(os.environ if env is None else env)
  env.pop("WARM_START_SOCKET", None)
  return env


def _served_commands():
  """Pids of the commands this worker's server runs now (a fork keeps the
  server's command line, which names its socket)."""
  socket_path = os.environ["WARM_START_SOCKET"].encode()
  found = {}
  for entry in os.listdir("/proc"):
    try:
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        cmdline = f.read()
      with open(f"/proc/{entry}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
      continue
    if socket_path in cmdline:
      found[int(entry)] = ppid
  server = [pid for pid, ppid in found.items() if ppid not in found]
  return {pid for pid, ppid in found.items() if ppid in server}


@pytest.fixture(autouse=True)
def _needs_server():
  if not os.environ.get("WARM_START_SOCKET"):
    pytest.skip("the suite runs without its warm-start server (WARM_START=0)")


def test_a_warm_command_answers_as_a_cold_one():
  """stdin, stdout, stderr and exit status, with and without an error."""
  text = "Warm starts keep résumés whole.\nA second line\n"
  runs = [subprocess.run(TOKENIZE, input=text, capture_output=True,
                         text=True, cwd=REPO, env=env)
          for env in (None, _cold())]
  assert runs[0].returncode == runs[1].returncode == 0
  assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("\n") == 2
  bad = [subprocess.run(TOKENIZE[:3] + ["--vocab_file", "/nonexistent"],
                        input="x\n", capture_output=True, text=True, cwd=REPO,
                        env=env) for env in (None, _cold())]
  assert bad[0].returncode == bad[1].returncode != 0
  assert (bad[0].stderr.strip().splitlines()[-1]
          == bad[1].stderr.strip().splitlines()[-1])


def test_kill_9_of_the_stand_in_takes_the_command_along():
  before = _served_commands()
  stand_in = subprocess.Popen(TOKENIZE, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, cwd=REPO)
  try:
    deadline = time.time() + 60
    while not _served_commands() - before:  # waits on stdin, in the server
      assert stand_in.poll() is None and time.time() < deadline
      time.sleep(0.05)
    command, = _served_commands() - before
    stand_in.send_signal(signal.SIGKILL)
    stand_in.wait()
    deadline = time.time() + 10
    while command in _served_commands():
      assert time.time() < deadline, "the command outlived its stand-in"
      time.sleep(0.05)
  finally:
    if stand_in.poll() is None:
      stand_in.kill()
