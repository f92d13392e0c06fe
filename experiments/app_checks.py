"""The flag checks the app-check commands share (`demo_app` for QA,
`classifier_app` for classifiers): one line each, before anything is
written."""

import os
import sys


def check_app_flags(options, required, files, count_flag):
  """SystemExit (`error: ...`, one line naming the flag) on a missing
  required flag, a file flag naming no file, a count below 1, a Task
  Library interpreter that cannot run, or an output directory that
  cannot be written."""
  for flag in required:  # one line each, where absl's check prints two
    if not getattr(options, flag):
      sys.exit(f"error: --{flag} is required")
  for flag in files:
    path = getattr(options, flag)
    if path is not None and not os.path.isfile(path):
      sys.exit(f"error: --{flag} {path}: no such file")
  if getattr(options, count_flag) < 1:
    sys.exit(f"error: --{count_flag} must be >= 1")
  python = options.task_library_python
  if python and not os.access(python, os.X_OK):
    sys.exit(f"error: --task_library_python {python}: not an executable "
             "(make setup makes .venv-task/bin/python)")
  from experiments.pipeline import check_output_dir
  from tfmodels.staging import OutputError
  try:
    check_output_dir(options.output_dir)
  except OutputError as e:
    sys.exit(f"error: {e}")
