"""Files written all at once at the end, or not at all.

The output directory may hold other models, so it is not replaced as a
whole (tfmodels.staging does that): each file is staged in a hidden
directory beside it and renamed into place on commit. The staging directory
is made first, so an unwritable output path fails before any work is done.

    out = OutputFiles("models/qa", overwrite=False)  # checks the path
    out.add("qa_int8.tflite", data)
    out.commit()                                     # or out.discard()
"""

import os
import shutil
import tempfile


class OutputError(ValueError):
  """The output path cannot take the files; the message names it."""


def _existing_ancestor(path):
  path = os.path.abspath(path)
  while not os.path.exists(path):
    path = os.path.dirname(path)
  return path


class OutputFiles:
  """Staged output files for one directory."""

  def __init__(self, output_dir, overwrite=False):
    self.output_dir = output_dir
    self.overwrite = overwrite
    self.names = []
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
      raise OutputError(f"--output_dir {output_dir}: exists and is not a "
                        "directory")
    parent = _existing_ancestor(output_dir)
    if not os.path.isdir(parent):
      raise OutputError(f"--output_dir {output_dir}: {parent} is not a "
                        "directory")
    try:
      self.staging = tempfile.mkdtemp(prefix=".convert_tflite-", dir=parent)
    except OSError as e:
      raise OutputError(f"--output_dir {output_dir}: cannot write there "
                        f"({e.strerror})") from None

  def refuse_existing(self, names):
    """OutputError if any of `names` exists already (without overwrite)."""
    if self.overwrite:
      return
    for name in names:
      if os.path.exists(os.path.join(self.output_dir, name)):
        self.discard()
        raise OutputError(f"{os.path.join(self.output_dir, name)} exists "
                          "(pass --overwrite)")

  def add(self, name, content):
    """Stages a file (bytes or str)."""
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(os.path.join(self.staging, name), mode) as f:
      f.write(content)
    self.names.append(name)

  def drop(self, name):
    """Unstages a file."""
    os.remove(os.path.join(self.staging, name))
    self.names.remove(name)

  def commit(self):
    """Moves every staged file into the output directory."""
    try:
      os.makedirs(self.output_dir, exist_ok=True)
      for name in self.names:
        os.replace(os.path.join(self.staging, name),
                   os.path.join(self.output_dir, name))
    except OSError as e:
      raise OutputError(f"--output_dir {self.output_dir}: cannot write "
                        f"there ({e.strerror})") from None
    finally:
      self.discard()
    return [os.path.join(self.output_dir, n) for n in self.names]

  def discard(self):
    shutil.rmtree(self.staging, ignore_errors=True)
