"""tfmodels.staging: every writer's outputs appear whole or not at all."""

import os

import pytest

from tfmodels import staging


def test_output_files_are_staged_then_renamed(tmp_path):
  out = staging.OutputFiles(str(tmp_path / "new" / "dir"))
  out.add("a.txt", "text")
  out.add("b.bin", b"\x00")
  assert not (tmp_path / "new").exists()  # nothing visible yet
  out.commit()
  assert sorted(os.listdir(tmp_path / "new" / "dir")) == ["a.txt", "b.bin"]
  assert sorted(os.listdir(tmp_path)) == ["new"]  # staging removed
  again = staging.OutputFiles(str(tmp_path / "new" / "dir"))
  with pytest.raises(staging.OutputError, match="a.txt exists"):
    again.refuse_existing(["a.txt"])
  assert sorted(os.listdir(tmp_path)) == ["new"]


def test_output_files_name_the_flag_of_an_unusable_path(tmp_path):
  (tmp_path / "file").write_text("mine")
  with pytest.raises(staging.OutputError,
                     match=r"^--output /.*file: exists and is not a "):
    staging.OutputFiles(str(tmp_path / "file"), flag="--output")
  assert (tmp_path / "file").read_text() == "mine"


def test_write_file_replaces_whole_or_leaves_the_old_file(tmp_path):
  path = tmp_path / "sub" / "report.md"
  staging.write_file(str(path), "first\n")
  staging.write_file(str(path), "second\n")
  assert path.read_text() == "second\n"
  staging.write_file(str(tmp_path / "b.bin"), b"\x00\x01")
  assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
  with pytest.raises(RuntimeError):
    with staging.staged_path(str(path)) as temp:
      with open(temp, "w") as f:
        f.write("half")
      raise RuntimeError("writer died")
  assert path.read_text() == "second\n"
  assert sorted(os.listdir(tmp_path / "sub")) == ["report.md"]  # no temps


def test_staged_path_keeps_the_extension_for_writers_that_read_it(tmp_path):
  with staging.staged_path(str(tmp_path / "plot.png")) as temp:
    assert temp.endswith(".png") and os.path.dirname(temp) == str(tmp_path)
    with open(temp, "wb") as f:
      f.write(b"png")
  assert (tmp_path / "plot.png").read_bytes() == b"png"


def test_staged_directory_replaces_the_directory_or_nothing(tmp_path):
  out = tmp_path / "out"
  with staging.staged_directory(str(out), "cmd") as staged:
    open(os.path.join(staged, "old.txt"), "w").close()
  with pytest.raises(RuntimeError):
    with staging.staged_directory(str(out), "cmd") as staged:
      open(os.path.join(staged, "new.txt"), "w").close()
      raise RuntimeError("died")
  assert sorted(os.listdir(out)) == [staging.OWNER_RECORD, "old.txt"]
  assert sorted(os.listdir(tmp_path)) == ["out"]
  with staging.staged_directory(str(out), "cmd") as staged:
    open(os.path.join(staged, "new.txt"), "w").close()
  assert sorted(os.listdir(out)) == [staging.OWNER_RECORD, "new.txt"]


def _users_folder(path):
  path.mkdir()
  (path / "notes.txt").write_text("mine")
  (path / "sub").mkdir()
  (path / "sub" / "more.txt").write_text("mine too")
  return path


def _intact(path):
  return ((path / "notes.txt").read_text() == "mine"
          and (path / "sub" / "more.txt").read_text() == "mine too")


def test_overwrite_replaces_only_the_commands_own_directory(tmp_path):
  """Issue 39: --overwrite used to delete whatever folder was there."""
  users = _users_folder(tmp_path / "users")
  with pytest.raises(staging.OutputError, match=
                     r"^--model_dir .*users: exists \(pass --overwrite\)$"):
    staging.check_output(str(users), "--model_dir", False, "compress")
  with pytest.raises(staging.OutputError, match=
                     r"^--model_dir .*users: was not written by compress "
                     r"\(it holds notes.txt, sub\); --overwrite replaces "
                     r"only compress's own output"):
    staging.check_output(str(users), "--model_dir", True, "compress")
  assert _intact(users)
  ours = tmp_path / "ours"  # compress's output: replaced
  with staging.staged_directory(str(ours), "compress") as staged:
    os.makedirs(os.path.join(staged, "saved_model"))
    open(os.path.join(staged, "saved_model", "a.pb"), "w").close()
  staging.check_output(str(ours), "--model_dir", True, "compress")
  with pytest.raises(staging.OutputError, match="was not written by "
                     "import_export"):  # another command's output
    staging.check_output(str(ours), "--output", True, "import_export")
  (ours / "saved_model" / "notes.txt").write_text("added later")
  with pytest.raises(staging.OutputError, match=
                     r"holds saved_model/notes.txt, which compress did not "
                     "write"):
    staging.check_output(str(ours), "--model_dir", True, "compress")
  with pytest.raises(staging.OutputError, match="did not write"):  # at the
    with staging.staged_directory(str(ours), "compress"):          # end too
      pass
  assert (ours / "saved_model" / "notes.txt").exists()
  empty = tmp_path / "empty"
  empty.mkdir()
  (empty / staging.RUNNER_LOG).write_text("the step runner's log")
  staging.check_output(str(empty), "--model_dir", True, "compress")


def test_overwrite_never_replaces_the_commands_own_input(tmp_path):
  ours = tmp_path / "run"
  with staging.staged_directory(str(ours), "compress") as staged:
    open(os.path.join(staged, "ckpt"), "w").close()
  for output in (ours, tmp_path):  # the input, or a folder holding it
    with pytest.raises(staging.OutputError, match=
                       rf"^--model_dir {output}: would replace --teacher_dir "
                       rf"{ours}, this command's input"):
      staging.check_output(str(output), "--model_dir", True, "compress",
                           inputs=[("--teacher_dir", str(ours))])


def test_a_file_output_is_not_a_directory_and_not_a_link(tmp_path):
  users = _users_folder(tmp_path / "users")
  with pytest.raises(staging.OutputError,
                     match=r"^--output .*users: is a directory"):
    staging.check_output(str(users), "--output", True)
  precious = tmp_path / "precious.txt"
  precious.write_text("mine")
  link = tmp_path / "out.json"
  link.symlink_to(precious)
  with pytest.raises(staging.OutputError, match=r"^--output .*out.json: is "
                     "a symbolic link; refusing to write through it"):
    staging.check_output(str(link), "--output", True)
  with pytest.raises(staging.OutputError, match="is a symbolic link"):
    staging.write_file(str(link), "x")
  with pytest.raises(staging.OutputError, match="is a symbolic link"):
    staging.open_own(str(link), "a")
  assert precious.read_text() == "mine" and _intact(users)


def test_locks_are_not_taken_through_a_planted_link(tmp_path):
  """Issue 39: `ln -s precious.txt X/.out.lock` made the lock write a pid
  into precious.txt."""
  precious = tmp_path / "precious.txt"
  precious.write_text("mine")
  (tmp_path / ".out.lock").symlink_to(precious)
  with pytest.raises(staging.OutputError, match=r"\.out\.lock: is a symbolic "
                     "link; refusing to write through it"):
    with staging.output_lock(str(tmp_path / "out"), "--output"):
      pass
  assert precious.read_text() == "mine"


def test_private_directory_is_this_users_alone(tmp_path, monkeypatch):
  monkeypatch.setattr(staging.tempfile, "tempdir", str(tmp_path))
  path = staging.private_directory("locks")
  assert os.stat(path).st_mode & 0o777 == 0o700
  assert staging.private_directory("locks") == path
  os.rmdir(path)
  os.symlink(str(tmp_path), path)  # planted by someone else
  with pytest.raises(staging.OutputError, match="is not a directory only "
                     "this user can write"):
    staging.private_directory("locks")


def test_output_files_take_files_written_by_path_and_subdirectories(tmp_path):
  out_dir = tmp_path / "data"
  out_dir.mkdir()
  (out_dir / "keep.txt").write_text("mine")
  out = staging.OutputFiles(str(out_dir), overwrite=True)
  os.makedirs(os.path.join(out.staging, "spam"))
  with open(os.path.join(out.staging, "spam", "train.tsv"), "w") as f:
    f.write("written by a writer that takes a directory")
  out.add("manifest.json", "{}")
  out.add("vocab/student.txt", "[PAD]\n")
  written = out.commit()
  assert written == [str(out_dir / n) for n in
                     ("manifest.json", "vocab/student.txt", "spam/train.tsv")]
  assert (out_dir / "spam" / "train.tsv").read_text().startswith("written")
  assert (out_dir / "keep.txt").read_text() == "mine"
  assert sorted(os.listdir(tmp_path)) == ["data"]


def test_outputs_honour_the_umask(tmp_path):
  old = os.umask(0o022)
  try:
    staging.write_file(str(tmp_path / "f.txt"), "x")
    with staging.staged_directory(str(tmp_path / "d"), "cmd") as d:
      open(os.path.join(d, "a"), "w").close()
  finally:
    os.umask(old)
  assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
  assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_a_later_writer_clears_staging_its_killed_predecessor_left(tmp_path):
  import subprocess
  dead = subprocess.Popen(["true"])
  dead.wait()  # a pid that no longer runs
  stale_dir = tmp_path / f".staging-out-{dead.pid}-abc_12"
  stale_dir.mkdir()
  stale_file = tmp_path / f".staging-r.md-{dead.pid}-x1.md"
  stale_file.write_text("half")
  alive = tmp_path / f".staging-out-{os.getppid()}-zz"  # a live writer's
  alive.mkdir()
  mine = tmp_path / ".staging-notes"  # not a staging name: the user's
  mine.mkdir()
  with staging.staged_directory(str(tmp_path / "out"), "cmd"):
    pass
  assert not stale_dir.exists() and not stale_file.exists()
  assert alive.exists() and mine.exists()
  stale_dir.mkdir()
  staging.write_file(str(tmp_path / "r.md"), "whole")  # any writer clears
  assert not stale_dir.exists() and alive.exists()


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(
    tmp_path):
  import subprocess
  import sys
  import time
  out = tmp_path / "run"
  holder = subprocess.Popen(
      [sys.executable, "-c",
       "import sys, time\nfrom tfmodels import staging\n"
       f"with staging.output_lock({str(out)!r}):\n"
       "  print('held', flush=True); time.sleep(30)"],
      stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(staging.OutputError,
                       match=rf"^--model_dir {out}: another process "
                             rf"\(pid {holder.pid}\) is writing it"):
      with staging.output_lock(str(out), flag="--model_dir"):
        pass
  finally:
    holder.kill()  # kill -9: the kernel drops its lock
    holder.wait()
  time.sleep(0.1)
  with staging.output_lock(str(out)):
    assert (tmp_path / ".run.lock").exists()
  assert not (tmp_path / ".run.lock").exists()


def test_check_writable_names_the_flag_before_any_work(tmp_path):
  (tmp_path / "file").write_text("")
  with pytest.raises(staging.OutputError, match="is not a directory"):
    staging.check_writable(str(tmp_path / "file" / "x"), "--output")
  staging.check_writable(str(tmp_path / "new" / "deeper"))
  locked = tmp_path / "ro"
  locked.mkdir()
  locked.chmod(0o555)
  try:
    if os.access(locked, os.W_OK):
      pytest.skip("root writes anywhere: the read-only case needs a user")
    with pytest.raises(staging.OutputError,
                       match=r"^--output_dir .*ro/x: cannot write there"):
      staging.check_writable(str(locked / "x"))
  finally:
    locked.chmod(0o755)


def test_scratch_directory_of_a_killed_process_goes_with_the_next(
    tmp_path, monkeypatch):
  """Issue 29: a tempfile.TemporaryDirectory outlives a kill -9 for good;
  a scratch directory carries its pid, so the next one with the prefix
  removes it (conversion.py's export and runtime.py's probe use it)."""
  import subprocess
  import tempfile
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  dead = subprocess.Popen(["true"])
  dead.wait()
  stale = tmp_path / f"tflite-export-{dead.pid}-abc_12"
  stale.mkdir()
  live = tmp_path / f"tflite-export-{os.getppid()}-zz"
  live.mkdir()
  with staging.scratch_directory("tflite-export-") as scratch:
    assert os.path.basename(scratch).startswith(
        f"tflite-export-{os.getpid()}-")
    assert not stale.exists() and live.exists()
  assert not os.path.exists(scratch)
  assert sorted(os.listdir(tmp_path)) == [live.name]


def test_a_name_too_long_for_the_file_system_is_refused_first(tmp_path):
  limit = os.pathconf(tmp_path, "PC_NAME_MAX")
  staging.check_name_length(str(tmp_path / "new"), ["a" * limit], "--name")
  with pytest.raises(staging.OutputError,
                     match=rf"^--name: the file name a+\.\.\. would be "
                           rf"{limit + 1} bytes; the file system of "
                           rf"{tmp_path} takes at most {limit}$"):
    staging.check_name_length(str(tmp_path / "new"),
                              ["short", "a" * (limit + 1)], "--name")


def test_files_joining_a_folder_replace_files_never_folders_or_links(
    tmp_path):
  out_dir = _users_folder(tmp_path / "models")
  (tmp_path / "precious.txt").write_text("mine")
  (out_dir / "qa.tflite").symlink_to(tmp_path / "precious.txt")
  for name, reason in (("sub", "sub is a directory"),
                       ("qa.tflite", "is a symbolic link")):
    out = staging.OutputFiles(str(out_dir), overwrite=True)
    with pytest.raises(staging.OutputError, match=reason):
      out.refuse_existing(["report.md", name])
  out = staging.OutputFiles(str(out_dir), overwrite=False)
  (out_dir / "report.md").write_text("old")
  with pytest.raises(staging.OutputError, match=r"report.md exists \(pass "
                     "--overwrite\\)"):
    out.refuse_existing(["report.md"])
  out = staging.OutputFiles(str(out_dir), overwrite=True)
  out.refuse_existing(["report.md"])
  out.add("report.md", "new")
  out.commit()
  assert (out_dir / "report.md").read_text() == "new" and _intact(out_dir)
  assert (tmp_path / "precious.txt").read_text() == "mine"
  assert sorted(os.listdir(tmp_path)) == ["models", "precious.txt"]
