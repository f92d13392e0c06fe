"""Write a whole output directory or nothing.

    with staged_directory("/tmp/out") as staging:
      ...write files into staging...
    # now /tmp/out holds them; after an exception it is untouched

The staging directory sits beside the output (same file system, so the final
rename is atomic) and is removed if anything fails.
"""

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def staged_directory(output_dir):
  """Yields a fresh directory that replaces output_dir on success."""
  parent = os.path.dirname(os.path.abspath(output_dir))
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=".staging-", dir=parent)
  try:
    yield staging
    if os.path.exists(output_dir):
      shutil.rmtree(output_dir)
    os.rename(staging, output_dir)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
