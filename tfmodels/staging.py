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
import errno
import fcntl
import os
import re
import shutil
import tempfile


class OutputError(ValueError):
  """The output path cannot take the files; the message names it."""


def _umask():
  mask = os.umask(0)
  os.umask(mask)
  return mask


def _honour_umask(path, directory):
  """mkdtemp / mkstemp make 0700 / 0600; outputs get what the user's umask
  gives any new file or directory."""
  os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def process_running(pid):
  """Whether process `pid` exists (someone else's counts): a temporary named
  with a pid that is gone was left by a killed writer."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _staging_prefix(name):
  """Staging names carry the destination and the writer's pid, so a later
  writer in the same directory can clear what a killed one left."""
  return f".staging-{name}-{os.getpid()}-"


# A staging name: destination, writer's pid, mkdtemp's random part (no "-"),
# and for a file its extension.
_STAGING = re.compile(r"\.staging-.+-(\d+)-[a-z0-9_]+(\.[^-]*)?")


def clear_stale_staging(directory):
  """Removes the staging that writers killed mid-write (their pid gone)
  left in `directory`; every staged writer calls it first."""
  try:
    names = os.listdir(directory)
  except OSError:
    return
  for name in names:
    match = _STAGING.fullmatch(name)
    if not match or process_running(int(match.group(1))):
      continue
    stale = os.path.join(directory, name)
    if os.path.isdir(stale) and not os.path.islink(stale):
      shutil.rmtree(stale, ignore_errors=True)
    else:
      with contextlib.suppress(OSError):  # another writer cleared it first
        os.unlink(stale)


def temporary_directory(prefix):
  """A scratch directory under the system's temporary root, named with this
  process's pid; those of killed processes with the same prefix go first."""
  root = tempfile.gettempdir()
  own = re.compile(rf"{re.escape(prefix)}(\d+)-[a-z0-9_]+")
  for name in os.listdir(root):
    match = own.fullmatch(name)
    if match and not process_running(int(match.group(1))):
      shutil.rmtree(os.path.join(root, name), ignore_errors=True)
  return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")


@contextlib.contextmanager
def scratch_directory(prefix):
  """temporary_directory for one block, removed when it ends: unlike
  tempfile.TemporaryDirectory, what a kill -9 leaves is removed by the next
  process that asks for the same prefix."""
  path = temporary_directory(prefix)
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)


def check_name_length(directory, names, flag):
  """OutputError (one line naming `flag`) if the longest of `names` (the
  file names a command will create in `directory`, staging names
  included) is longer than its file system takes: otherwise Errno 36
  comes only when the file is written, after the work."""
  where = _existing_ancestor(directory)
  try:
    limit = os.pathconf(where, "PC_NAME_MAX")
  except (OSError, ValueError):  # no limit known: nothing to check
    return
  longest = max(names, key=lambda n: len(os.fsencode(n)))
  size = len(os.fsencode(longest))
  if size > limit:
    raise OutputError(f"{flag}: the file name {longest[:24]}... would be "
                      f"{size} bytes; the file system of {where} takes at "
                      f"most {limit}")


def _make_staging(parent, name, flag, output):
  clear_stale_staging(parent)
  try:
    return tempfile.mkdtemp(prefix=_staging_prefix(name), dir=parent)
  except OSError as e:
    raise OutputError(f"{flag} {output}: cannot write there "
                      f"({e.strerror})") from None


def check_writable(path, flag="--output_dir"):
  """OutputError (one line naming the flag and path) unless `path` could be
  created or replaced: called before any work, so a long run does not fail
  at its end."""
  path = os.path.abspath(path)
  if os.path.isdir(path):
    where = path
  else:
    where = _existing_ancestor(os.path.dirname(path))
    if not os.path.isdir(where):
      raise OutputError(f"{flag} {path}: {where} is not a directory")
  if not os.access(where, os.W_OK | os.X_OK):
    raise OutputError(f"{flag} {path}: cannot write there ({where} is not "
                      "writable)")


@contextlib.contextmanager
def output_lock(path, flag="--output_dir"):
  """One writer per output: holds an exclusive lock on `.NAME.lock` beside
  `path` while the block runs; a second writer gets an OutputError naming
  the first's pid. The kernel drops the lock when its process dies, so a
  killed writer leaves nothing that blocks the next run."""
  path = os.path.abspath(path)
  parent, name = os.path.split(path)
  check_writable(path, flag)
  lock_path = os.path.join(parent, f".{name}.lock")
  while True:
    try:  # os.access trusts root; creating the file is the real test
      os.makedirs(parent, exist_ok=True)
      fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    except OSError as e:
      raise OutputError(f"{flag} {path}: cannot write there "
                        f"({e.strerror})") from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EAGAIN, errno.EACCES):
        raise
      holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
      os.close(fd)
      raise OutputError(f"{flag} {path}: another process (pid {holder}) "
                        "is writing it; wait for it or choose another "
                        "output") from None
    try:  # the previous holder may have removed the file we opened
      if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
        break
    except FileNotFoundError:
      pass
    os.close(fd)
  try:
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    yield
  finally:
    with contextlib.suppress(OSError):
      os.unlink(lock_path)
    os.close(fd)


def lock_until_exit(path, flag="--output_dir"):
  """output_lock for a command's one output, held until the process exits
  (released by atexit, so sys.exit and SIGTERM's SystemExit also free it)."""
  import atexit
  held = contextlib.ExitStack()
  held.enter_context(output_lock(path, flag))
  atexit.register(held.close)


@contextlib.contextmanager
def staged_directory(output_dir):
  """Yields a fresh directory that replaces output_dir on success."""
  parent, name = os.path.split(os.path.abspath(output_dir))
  os.makedirs(parent, exist_ok=True)
  staging = _make_staging(parent, name, "output", output_dir)
  try:
    yield staging
    _honour_umask(staging, directory=True)
    if os.path.exists(output_dir):
      shutil.rmtree(output_dir)
    os.rename(staging, output_dir)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise


@contextlib.contextmanager
def staged_path(path):
  """Yields a temporary path beside `path`; renamed onto it on success."""
  directory, name = os.path.split(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  clear_stale_staging(directory)
  ext = os.path.splitext(name)[1]
  fd, temp = tempfile.mkstemp(prefix=_staging_prefix(name), suffix=ext,
                              dir=directory)
  os.close(fd)
  try:
    yield temp
    _honour_umask(temp, directory=False)
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
    self.staging = _make_staging(
        parent, os.path.basename(os.path.abspath(output_dir)), flag,
        output_dir)

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
