"""SIGTERM ends a command the way Ctrl-C does: as an exception.

By default SIGTERM kills Python outright, so `finally` blocks never run and
staging directories, output locks and half-made run directories stay
behind. Every command calls `exit_on_sigterm()` before `app.run(main)`; the
signal then raises SystemExit (exit status 128 + 15, as a shell reports it)
and every clean-up on the way out runs.
"""

import signal

EXIT_STATUS = 128 + signal.SIGTERM
# Ctrl-C's exit status, as a shell reports a SIGINT death.
INTERRUPT_STATUS = 128 + signal.SIGINT


def _raise_system_exit(signum, frame):
  del frame
  signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM kills outright
  raise SystemExit(EXIT_STATUS)


def exit_on_sigterm():
  """Turns SIGTERM into SystemExit in the main thread."""
  signal.signal(signal.SIGTERM, _raise_system_exit)
