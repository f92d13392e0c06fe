"""What android_bench refuses, in one line and before any work: a report
--output holding files report did not write, a link, or the report's own
input; a device lock that is a link or sits outside this user's private
directory; a sample_passages --output that is a link, a directory or its
dev set; and a .tflite that is empty, truncated or not TFLite at all.
Nothing here runs a benchmark; the one model is built from TFLite's schema
(no TensorFlow), so every test takes well under a second or two."""

import json
import os
import stat
import subprocess
import sys
import tempfile

import flatbuffers
import numpy as np
import pytest

from android_bench import results
from android_bench.model_facts import ModelError, check_model
from android_bench.runner import SetupError, device_lock, device_lock_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
OWNER = "android_bench report"


def _command(module, *args):
  out = subprocess.run([sys.executable, "-m", module, *map(str, args)],
                       capture_output=True, text=True, env=ENV, cwd=REPO,
                       timeout=120)
  return out.returncode, out.stdout, out.stderr.strip().splitlines()


def _snapshot(directory):
  """{relative path: bytes, or "-> target" for a link} of a tree."""
  found = {}
  for root, dirs, files in os.walk(directory):
    for name in dirs + files:
      path = os.path.join(root, name)
      key = os.path.relpath(path, directory)
      if os.path.islink(path):
        found[key] = "-> " + os.readlink(path)
      elif os.path.isfile(path):
        with open(path, "rb") as f:
          found[key] = f.read()
      else:
        found[key] = "dir"
  return found


# --- report --output: --overwrite replaces only what report wrote ----------

def _results_dir(tmp_path):
  """A results directory with one run (one measured cell, so the report
  has a plot too)."""
  run = results.new_run("host", {"kind": "host"}, {}, {}, ["x"], "r")
  run["cells"] = [{
      "model": "m.tflite", "runner": "litert", "delegate": "xnnpack",
      "threads": 1, "repeat": 0, "status": "ok", "error": None,
      "timings_us": {"count": 5, "min": 900, "median": 1000, "mean": 1000,
                     "max": 1100, "std": 50, "first": 1100, "p5": 910,
                     "p95": 1090}}]
  directory = tmp_path / "results"
  results.save_run(run, str(directory))
  return directory


def _report(*args):
  return _command("android_bench", "report", *args)


def test_report_overwrite_keeps_a_users_folder(tmp_path):
  runs = _results_dir(tmp_path)
  folder = tmp_path / "folder"
  folder.mkdir()
  (folder / "notes.txt").write_text("mine\n")
  before = _snapshot(tmp_path)
  status, stdout, lines = _report(runs, f"--output={folder}", "--overwrite")
  assert status == 1
  assert lines == [
      f"error: --output {folder}: was not written by {OWNER} (it holds "
      f"notes.txt); --overwrite replaces only {OWNER}'s own output (remove "
      "it yourself or choose another --output)"]
  assert stdout == ""  # refused before the table
  assert _snapshot(tmp_path) == before  # no staging, no lock file left


def test_report_replaces_only_its_own_output(tmp_path):
  runs = _results_dir(tmp_path)
  out = tmp_path / "report"
  status, _, lines = _report(runs, f"--output={out}")
  assert status == 0, lines
  assert sorted(os.listdir(out)) == [".written_by.json", "latency.png",
                                     "report.md"]
  with open(out / ".written_by.json") as f:
    record = json.load(f)
  assert record["command"] == OWNER
  assert set(record["files"]) >= {"latency.png", "report.md"}
  status, _, lines = _report(runs, f"--output={out}")
  assert (status, lines) == (1, [f"error: --output {out}: exists (pass "
                                 "--overwrite)"])
  (out / "report.md").write_text("stale\n")
  status, _, lines = _report(runs, f"--output={out}", "--overwrite")
  assert status == 0, lines  # its own: replaced
  assert (out / "report.md").read_text().startswith("# android_bench report")
  # A file the user put in it makes it theirs too: refused, all kept.
  (out / "notes.txt").write_text("mine\n")
  before = _snapshot(tmp_path)
  status, _, lines = _report(runs, f"--output={out}", "--overwrite")
  assert status == 1
  assert lines == [
      f"error: --output {out}: holds notes.txt, which {OWNER} did not "
      f"write; --overwrite replaces only {OWNER}'s own output (remove it "
      "yourself or choose another --output)"]
  assert _snapshot(tmp_path) == before


def test_report_from_before_the_record_is_replaced(tmp_path):
  """A report written before reports carried their record (report.md with
  its title, the plots, nothing else) is still report's to replace; a
  report.md without the title is not."""
  runs = _results_dir(tmp_path)
  old = tmp_path / "old"
  old.mkdir()
  (old / "report.md").write_text("# android_bench report\n\nold\n")
  (old / "compare.png").write_bytes(b"\x89PNG")
  status, _, lines = _report(runs, f"--output={old}", "--overwrite")
  assert status == 0, lines
  assert sorted(os.listdir(old)) == [".written_by.json", "latency.png",
                                     "report.md"]
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "report.md").write_text("# my report\n")
  status, _, lines = _report(runs, f"--output={mine}", "--overwrite")
  assert status == 1 and lines[0].startswith(
      f"error: --output {mine}: was not written by {OWNER} (it holds "
      "report.md)"), lines
  assert (mine / "report.md").read_text() == "# my report\n"


@pytest.mark.parametrize("case", ["link", "results_dir", "run_parent"])
def test_report_output_link_or_input_is_refused(case, tmp_path):
  runs = _results_dir(tmp_path)
  [run_file] = runs.iterdir()
  source = runs
  if case == "link":
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("keep\n")
    out = tmp_path / "link"
    out.symlink_to(target)
    expect = (f"error: --output {out}: is a symbolic link; refusing to "
              "write through it (give the real path)")
  elif case == "results_dir":
    out = runs
    expect = (f"error: --output {out}: would replace results directory "
              f"{runs}, this command's input; choose another --output")
  else:  # the directory holding the run file named
    out, source = runs, run_file
    expect = (f"error: --output {out}: would replace run {run_file}, this "
              "command's input; choose another --output")
  before = _snapshot(tmp_path)
  status, stdout, lines = _report(source, f"--output={out}", "--overwrite")
  assert (status, lines, stdout) == (1, [expect], "")
  assert _snapshot(tmp_path) == before


# --- the device lock: in this user's private directory, never a link --------

SERIAL = "emulator-5554"
LOCK = f".android_bench-device-{SERIAL}.lock"


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
  """The system temporary root, here a directory of the test's own."""
  root = tmp_path / "tmp"
  root.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(root))
  return root


def test_device_lock_lives_in_a_private_directory(temp_root):
  # What another user could plant at the old shared path is never used.
  victim = temp_root / "victim"
  victim.write_text("keep\n")
  (temp_root / LOCK).symlink_to(victim)
  private = temp_root / f"android_bench-{os.getuid()}"
  with device_lock(SERIAL):
    assert stat.S_IMODE(os.lstat(private).st_mode) == 0o700
    assert os.listdir(private) == [LOCK]
    assert device_lock_path(SERIAL) == str(private / LOCK[1:-len(".lock")])
    with pytest.raises(SetupError, match=(
        rf"^device {SERIAL}: another android_bench run \(pid "
        rf"{os.getpid()}\) is using it; wait for it to finish$")):
      with device_lock(SERIAL):
        pass
  assert os.listdir(private) == []  # released: the lock file goes
  assert victim.read_text() == "keep\n" and (temp_root / LOCK).is_symlink()


@pytest.mark.parametrize("dangling", [False, True])
def test_device_lock_refuses_a_link(temp_root, dangling):
  private = temp_root / f"android_bench-{os.getuid()}"
  private.mkdir(mode=0o700)
  victim = temp_root / "victim"
  if not dangling:
    victim.write_text("keep\n")
  link = private / LOCK
  link.symlink_to(victim)
  with pytest.raises(SetupError) as refused:
    with device_lock(SERIAL):
      pytest.fail("locked through a link")
  assert str(refused.value) == (
      f"device {SERIAL} lock {link}: is a symbolic link; refusing to write "
      "through it (give the real path)")
  assert link.is_symlink() and os.readlink(link) == str(victim)
  if dangling:
    assert not victim.exists()  # not created through the link
  else:
    assert victim.read_text() == "keep\n"


@pytest.mark.parametrize("case", ["shared", "link"])
def test_device_lock_refuses_a_private_directory_others_can_write(temp_root,
                                                                  case):
  private = temp_root / f"android_bench-{os.getuid()}"
  if case == "shared":
    private.mkdir()
    private.chmod(0o777)
  else:
    (temp_root / "other").mkdir(mode=0o700)
    private.symlink_to(temp_root / "other")
  with pytest.raises(SetupError) as refused:
    with device_lock(SERIAL):
      pytest.fail("locked in a directory others control")
  assert str(refused.value) == (
      f"{private}: is not a directory only this user can write (a link, a "
      "file, or another user's); remove it")
  assert os.listdir(temp_root / ("other" if case == "link" else private.name)
                    ) == []


# --- sample_passages --output: a file, never through a link ----------------

@pytest.mark.parametrize("case", ["link", "dangling_link", "directory",
                                  "dev_set"])
def test_sample_passages_output_is_refused(case, tmp_path):
  args = []
  if case in ("link", "dangling_link"):
    out = tmp_path / "asset.json"
    victim = tmp_path / "victim.json"
    if case == "link":
      victim.write_text("keep\n")
    out.symlink_to(victim)
    expect = (f"error: --output {out}: is a symbolic link; refusing to "
              "write through it (give the real path)")
  elif case == "directory":
    out = tmp_path / "assets"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    expect = f"error: --output {out}: is a directory; give the path of a file"
  else:
    data = tmp_path / "data"
    out = data / "wordnet_qa" / "dev.json.gz"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"the dev set")
    args = [f"--data_dir={data}"]
    expect = (f"error: --output {out}: would replace --data_dir {out}, this "
              "command's input; choose another --output")
  before = _snapshot(tmp_path)
  status, stdout, lines = _command("android_bench.qa_app.sample_passages",
                                   *args, f"--output={out}")
  assert (status, lines, stdout) == (1, [expect], "")
  assert _snapshot(tmp_path) == before


def test_sample_passages_writes_a_file(tmp_path):
  out = tmp_path / "asset.json"
  status, stdout, lines = _command("android_bench.qa_app.sample_passages",
                                   f"--output={out}")
  assert status == 0, lines
  assert stdout == f"wrote {out}: 20 passages\n"
  from android_bench.qa_app.sample_passages import ASSET
  with open(ASSET, "rb") as f:
    assert out.read_bytes() == f.read()
  assert os.listdir(tmp_path) == ["asset.json"]  # no lock or staging left


# --- run: a model that is not a whole TFLite file, before any run ----------

def tiny_tflite(width=64):
  """A TFLite flatbuffer, y = x + w (float [1, width]), built from TFLite's
  schema: the interpreter loads and runs it; no TensorFlow needed."""
  from ai_edge_litert import schema_py_generated as schema
  model = schema.ModelT()
  model.version = 3
  code = schema.OperatorCodeT()
  code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.ADD
  code.version = 1
  model.operatorCodes = [code]
  weights = schema.BufferT()
  weights.data = np.arange(width, dtype=np.float32).view(np.uint8)
  model.buffers = [schema.BufferT(), schema.BufferT(), weights,
                   schema.BufferT()]
  tensors = []
  for name, buffer in (("x", 1), ("w", 2), ("y", 3)):
    tensor = schema.TensorT()
    tensor.name, tensor.buffer = name, buffer
    tensor.shape = np.array([1, width], np.int32)
    tensor.type = schema.TensorType.FLOAT32
    tensors.append(tensor)
  op = schema.OperatorT()
  op.opcodeIndex = 0
  op.inputs, op.outputs = np.array([0, 1], np.int32), np.array([2], np.int32)
  op.builtinOptionsType = schema.BuiltinOptions.AddOptions
  op.builtinOptions = schema.AddOptionsT()
  graph = schema.SubGraphT()
  graph.tensors, graph.operators, graph.name = tensors, [op], "main"
  graph.inputs, graph.outputs = np.array([0], np.int32), np.array([2],
                                                                  np.int32)
  model.subgraphs = [graph]
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
  return bytes(builder.Output())


def test_tiny_model_is_a_whole_tflite_file(tmp_path):
  from ai_edge_litert import interpreter as litert
  path = tmp_path / "tiny.tflite"
  path.write_bytes(tiny_tflite())
  check_model(str(path))
  interpreter = litert.Interpreter(model_path=str(path))
  interpreter.allocate_tensors()
  interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                         np.ones((1, 64), np.float32))
  interpreter.invoke()
  out = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
  assert out[0, :3].tolist() == [1.0, 2.0, 3.0]


def _broken(kind):
  """(bytes, what the one line says after the path) of a broken model."""
  data = tiny_tflite()
  junk = np.random.default_rng(0).integers(0, 256, 1000, np.uint8).tobytes()
  return {
      "empty": (b"", "is empty (0 bytes); not a TFLite model"),
      "truncated": (data[:len(data) // 2],
                    f"truncated or corrupt TFLite flatbuffer "
                    f"({len(data) // 2} bytes; LiteRT's verifier rejects it)"),
      "junk": (junk, "not a TFLite flatbuffer (no TFL3 identifier; 1000 "
               "bytes)"),
      "junk_with_identifier": (
          junk[:4] + b"TFL3" + junk[8:],
          "truncated or corrupt TFLite flatbuffer (1000 bytes; LiteRT's "
          "verifier rejects it)"),
  }[kind]


@pytest.mark.parametrize("kind", ["empty", "truncated", "junk",
                                  "junk_with_identifier"])
def test_check_model_names_what_is_wrong(kind, tmp_path):
  data, said = _broken(kind)
  path = tmp_path / "m.tflite"
  path.write_bytes(data)
  with pytest.raises(ModelError) as refused:
    check_model(str(path))
  assert str(refused.value) == f"{path}: {said}"


def test_every_truncation_is_refused(tmp_path):
  """Whatever length a copy stopped at, the verifier sees it is short."""
  data = tiny_tflite()
  path = tmp_path / "m.tflite"
  for size in range(1, len(data), 7):
    path.write_bytes(data[:size])
    with pytest.raises(ModelError, match="truncated|no TFL3 identifier"):
      check_model(str(path))


@pytest.mark.parametrize("kind", ["empty", "truncated", "junk"])
def test_run_refuses_a_broken_model_before_any_run(kind, tmp_path):
  """Named in one line, exit 1, nothing run or written; a good model beside
  it in the directory does not start either."""
  data, said = _broken(kind)
  models = tmp_path / "models"
  models.mkdir()
  (models / "good.tflite").write_bytes(tiny_tflite())
  bad = models / f"{kind}.tflite"
  bad.write_bytes(data)
  results_dir = tmp_path / "results"
  status, stdout, lines = _command(
      "android_bench", "run", "--target=host", "--threads=1",
      "--num_runs=1", f"--results_dir={results_dir}", models)
  assert (status, lines, stdout) == (1, [f"error: {bad}: {said}"], "")
  assert not results_dir.exists()
