"""Outputs appear whole or not at all: the one way this project writes files.

Everything is written to a temporary name beside its destination (same file
system, so the final rename is atomic) and renamed into place only when it is
complete; after an exception the destination is untouched and the temporary
is removed. Three shapes:

    check_output("/tmp/out", "--output", overwrite, owner="compress")
    with staged_directory("/tmp/out", "compress") as staging:  # a directory
      ...write files into staging...       # replaces /tmp/out, if ours

    out = OutputFiles("models/qa", overwrite=False)  # files joining others
    out.add("qa_int8.tflite", data)                  # in a shared directory
    out.commit()                                     # or out.discard()

    write_file("report/REPORT.md", text)             # one file
    with staged_path("plot.png") as temp:            # one file someone else
      fig.savefig(temp)                              # writes by path

`--overwrite` replaces only what the command wrote (`check_output`): a
whole directory carries a record of its writer and files
(`OWNER_RECORD`), and one that lacks it, holds anything else or is the
command's own input is refused. Nothing here writes through a symbolic
link it did not make (`refuse_link`, `open_own`).
"""

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile


class OutputError(ValueError):
  """The output path cannot take the files; the message names it."""


# In every directory a command writes whole: which command, which files.
OWNER_RECORD = ".written_by.json"
# What the experiments' step runner keeps in the directory it hands a
# command (experiments/common/pipeline.py reads these names from here): its
# done-marker and the step's log, never the user's.
RUNNER_MARKER = ".done"
RUNNER_LOG = "pipeline.log"
_BOOKKEEPING = {OWNER_RECORD, RUNNER_MARKER, RUNNER_LOG}


def refuse_link(path, flag=None):
  """OutputError if `path` is a symbolic link: a write would land in the
  file it points at, which the user never named as an output."""
  if os.path.islink(path):
    where = f"{flag} {path}" if flag else path
    raise OutputError(f"{where}: is a symbolic link; refusing to write "
                      "through it (give the real path)")


def open_own(path, mode="a", flag=None):
  """open(path, mode) ("a", "ab", "w", "wb") that refuses a symbolic link
  as the final component (O_NOFOLLOW): logs and histories appended to
  across runs are not written through a link someone put in their place."""
  flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
  flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
  try:
    fd = os.open(path, flags, 0o666 & ~_umask())
  except OSError as e:
    if e.errno == errno.ELOOP:
      refuse_link(path, flag)
    raise
  return os.fdopen(fd, mode)


def _overlaps(output, source):
  """Whether replacing `output` would remove `source`."""
  output, source = os.path.realpath(output), os.path.realpath(source)
  return source == output or source.startswith(output + os.sep)


def files_under(directory):
  """Every file and link under `directory`, relative to it."""
  found = []
  for root, dirs, files in os.walk(directory):
    links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
    found += [os.path.relpath(os.path.join(root, f), directory)
              for f in files + links]
  return sorted(found)


def _shown(names, limit=3):
  more = f" and {len(names) - limit} more" if len(names) > limit else ""
  return ", ".join(names[:limit]) + more


def _not_written_by(directory, owner, recognised=None):
  """None if `owner` may replace `directory` (empty, recognised, or every
  file in it named by its record of `owner`); else what is foreign."""
  names = sorted(set(os.listdir(directory)) - _BOOKKEEPING)
  if not names or (recognised and recognised(directory)):
    return None
  try:
    with open(os.path.join(directory, OWNER_RECORD)) as f:
      record = json.load(f)
    ours = record["command"] == owner and set(record["files"])
  except (OSError, ValueError, KeyError, TypeError):
    ours = None
  if not ours:
    return f"was not written by {owner} (it holds {_shown(names)})"
  foreign = [n for n in files_under(directory)
             if n not in ours and n not in _BOOKKEEPING]
  if foreign:
    return f"holds {_shown(foreign)}, which {owner} did not write"
  return None


def check_output(path, flag, overwrite, owner=None, inputs=(),
                 recognised=None):
  """Before any work: OutputError (one line naming `flag`) unless `path`
  may take the output. A link, or a path whose replacement would remove
  one of `inputs` ((flag, path) pairs), is refused; an existing path only
  with `overwrite`, and then: a file output (`owner` None) only if it is
  not a directory; a directory output only if it is empty, or
  `recognised(path)`, or everything in it was written by `owner` (its
  `OWNER_RECORD`, written by `staged_directory`)."""
  refuse_link(path, flag)
  for input_flag, source in inputs:
    if source and os.path.exists(source) and _overlaps(path, source):
      raise OutputError(f"{flag} {path}: would replace {input_flag} "
                        f"{source}, this command's input; choose another "
                        f"{flag}")
  if os.path.exists(path):
    if not overwrite:
      raise OutputError(f"{flag} {path}: exists (pass --overwrite)")
    if owner is None and os.path.isdir(path):
      raise OutputError(f"{flag} {path}: is a directory; give the path of "
                        "a file")
    if owner is not None:
      if not os.path.isdir(path):
        raise OutputError(f"{flag} {path}: exists and is not a directory")
      foreign = _not_written_by(path, owner, recognised)
      if foreign:
        raise OutputError(f"{flag} {path}: {foreign}; --overwrite replaces "
                          f"only {owner}'s own output (remove it yourself "
                          f"or choose another {flag})")
  check_writable(path, flag)


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


def private_directory(name):
  """`NAME-UID` under the system's temporary root, made 0700 for this user:
  where machine-wide locks live, so no other user can put a link (or
  anything else) at their paths. OutputError if it is a link, not a
  directory, another user's, or writable by others."""
  path = os.path.join(tempfile.gettempdir(), f"{name}-{os.getuid()}")
  with contextlib.suppress(FileExistsError):
    os.mkdir(path, 0o700)
  info = os.lstat(path)
  if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
      or info.st_mode & 0o022):
    raise OutputError(f"{path}: is not a directory only this user can "
                      "write (a link, a file, or another user's); remove it")
  return path


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
      fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                   0o666 & ~_umask())
    except OSError as e:
      if e.errno == errno.ELOOP:
        refuse_link(lock_path, flag)
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
def staged_directory(output_dir, owner, flag="output", recognised=None):
  """Yields a fresh directory that replaces output_dir on success, with
  `owner`'s record of its files; an existing output_dir is replaced only
  if `owner` wrote all of it (`check_output`, checked again here in case
  something joined it during the work)."""
  parent, name = os.path.split(os.path.abspath(output_dir))
  os.makedirs(parent, exist_ok=True)
  staging = _make_staging(parent, name, flag, output_dir)
  try:
    yield staging
    _honour_umask(staging, directory=True)
    with open(os.path.join(staging, OWNER_RECORD), "w") as f:
      json.dump({"command": owner, "files": files_under(staging)}, f,
                indent=1)
    if os.path.lexists(output_dir):
      check_output(output_dir, flag, True, owner, recognised=recognised)
      shutil.rmtree(output_dir)
    os.rename(staging, output_dir)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise


@contextlib.contextmanager
def staged_path(path):
  """Yields a temporary path beside `path`; renamed onto it on success."""
  directory, name = os.path.split(os.path.abspath(path))
  refuse_link(path)
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
    """OutputError if any of `names` exists already (without overwrite),
    or is a directory or a link (overwrite replaces files it names, never
    a folder or what a link points at)."""
    for name in names:
      path = os.path.join(self.output_dir, name)
      try:
        if os.path.islink(path) or os.path.isdir(path):
          refuse_link(path, self.flag)
          raise OutputError(f"{self.flag} {self.output_dir}: {name} is a "
                            "directory; it is not replaced by a file")
        if os.path.exists(path) and not self.overwrite:
          raise OutputError(f"{path} exists (pass --overwrite)")
      except OutputError:
        self.discard()
        raise

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
