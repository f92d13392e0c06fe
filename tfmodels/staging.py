"""Outputs appear whole or not at all: the one way this project writes files.

Everything is written to a temporary name beside its destination (same file
system, so the final rename is atomic) and renamed into place only when it is
complete; after an exception the destination is untouched and the temporary
is removed. Three shapes:

    with staged_directory("/tmp/out") as staging:    # a whole directory
      ...write files into staging...                 # replaces /tmp/out

    out = OutputFiles("models/qa", overwrite=False)  # files joining others
    out.add("qa_int8.tflite", data)                  # in a shared directory
    out.commit()                                     # or out.discard()

    write_file("report/REPORT.md", text)             # one file
    with staged_path("plot.png") as temp:            # one file someone else
      fig.savefig(temp)                              # writes by path
"""

import contextlib
import os
import shutil
import tempfile


class OutputError(ValueError):
  """The output path cannot take the files; the message names it."""


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


@contextlib.contextmanager
def staged_path(path):
  """Yields a temporary path beside `path`; renamed onto it on success."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  base, ext = os.path.splitext(os.path.basename(path))
  fd, temp = tempfile.mkstemp(prefix=f".{base}-", suffix=ext, dir=directory)
  os.close(fd)
  try:
    yield temp
    os.replace(temp, path)
  finally:
    if os.path.exists(temp):
      os.unlink(temp)


def write_file(path, content):
  """Writes bytes or text (UTF-8, "\\n" line ends) to `path` atomically."""
  with staged_path(path) as temp:
    if isinstance(content, bytes):
      with open(temp, "wb") as f:
        f.write(content)
    else:
      with open(temp, "w", encoding="utf-8", newline="\n") as f:
        f.write(content)
  return path


def _existing_ancestor(path):
  path = os.path.abspath(path)
  while not os.path.exists(path):
    path = os.path.dirname(path)
  return path


class OutputFiles:
  """Files for a directory that may hold others: each is staged in a hidden
  directory beside it (`add`, or written by path under `staging`) and
  renamed into place on commit, sub-directories included. The staging
  directory is made first, so an unwritable output path fails before any
  work is done. `flag` names the output in errors."""

  def __init__(self, output_dir, overwrite=False, flag="--output_dir"):
    self.output_dir = output_dir
    self.overwrite = overwrite
    self.flag = flag
    self.names = []
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
      raise OutputError(f"{flag} {output_dir}: exists and is not a "
                        "directory")
    parent = _existing_ancestor(output_dir)
    if not os.path.isdir(parent):
      raise OutputError(f"{flag} {output_dir}: {parent} is not a directory")
    try:
      self.staging = tempfile.mkdtemp(prefix=".staging-", dir=parent)
    except OSError as e:
      raise OutputError(f"{flag} {output_dir}: cannot write there "
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
    """Stages a file (bytes or str; `name` may hold sub-directories)."""
    path = os.path.join(self.staging, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode) as f:
      f.write(content)
    self.names.append(name)

  def _staged_names(self):
    """What `add` staged, in order, then what was written under `staging`."""
    found = []
    for root, _, files in os.walk(self.staging):
      found += sorted(os.path.relpath(os.path.join(root, f), self.staging)
                      for f in files)
    return self.names + sorted(set(found) - set(self.names))

  def commit(self):
    """Moves every staged file into the output directory; their paths."""
    names = self._staged_names()
    try:
      for name in names:
        target = os.path.join(self.output_dir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(os.path.join(self.staging, name), target)
    except OSError as e:
      raise OutputError(f"{self.flag} {self.output_dir}: cannot write "
                        f"there ({e.strerror})") from None
    finally:
      self.discard()
    return [os.path.join(self.output_dir, n) for n in names]

  def discard(self):
    shutil.rmtree(self.staging, ignore_errors=True)
