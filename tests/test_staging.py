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
  out.mkdir()
  (out / "old.txt").write_text("old")
  with pytest.raises(RuntimeError):
    with staging.staged_directory(str(out)) as staged:
      open(os.path.join(staged, "new.txt"), "w").close()
      raise RuntimeError("died")
  assert os.listdir(out) == ["old.txt"]
  assert sorted(os.listdir(tmp_path)) == ["out"]
  with staging.staged_directory(str(out)) as staged:
    open(os.path.join(staged, "new.txt"), "w").close()
  assert os.listdir(out) == ["new.txt"]


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
    with staging.staged_directory(str(tmp_path / "d")) as d:
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
  with staging.staged_directory(str(tmp_path / "out")):
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
