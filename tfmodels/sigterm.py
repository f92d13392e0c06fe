"""SIGTERM ends a command the way Ctrl-C does: as an exception.

By default SIGTERM kills Python outright, so `finally` blocks never run and
staging directories, output locks and half-made run directories stay
behind. Every command calls `exit_on_sigterm()` before `app.run(main)`; the
signal then raises SystemExit (exit status 128 + 15, as a shell reports it)
and every clean-up on the way out runs.

Python runs a signal handler between any two bytecodes, also inside an
object's `__del__` or a weakref callback, where an exception is printed
("Exception ignored in ...") and dropped: the command would go on and exit
0 as if never stopped. Such a dropped SystemExit is raised again as soon as
the main thread is back in ordinary code.
"""

import _thread
import signal
import sys
import threading

EXIT_STATUS = 128 + signal.SIGTERM
# Ctrl-C's exit status, as a shell reports a SIGINT death.
INTERRUPT_STATUS = 128 + signal.SIGINT


def _raise_system_exit(signum, frame):
  del frame
  signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM kills outright
  raise SystemExit(EXIT_STATUS)


def _raise_again_if_dropped(unraisable, previous_hook):
  """sys.unraisablehook: the SIGTERM's SystemExit dropped in a `__del__`
  is delivered to the main thread again, from another thread a moment
  later (raised here, it would be dropped with this hook's own error)."""
  previous_hook(unraisable)
  if (isinstance(unraisable.exc_value, SystemExit)
      and unraisable.exc_value.code == EXIT_STATUS
      and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
    signal.signal(signal.SIGTERM, _raise_system_exit)
    threading.Timer(0.05, _thread.interrupt_main, (signal.SIGTERM,)).start()


def exit_on_sigterm():
  """Turns SIGTERM into SystemExit in the main thread."""
  signal.signal(signal.SIGTERM, _raise_system_exit)
  previous_hook = sys.unraisablehook
  sys.unraisablehook = lambda unraisable: _raise_again_if_dropped(
      unraisable, previous_hook)
