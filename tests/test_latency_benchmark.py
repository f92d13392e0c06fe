"""experiments/bench/latency_benchmark.py on tiny configs: converts, times through
android_bench's host runner and writes the JSON / Markdown / PNG schema."""

import json
import os
import string
import subprocess
import sys

import pytest

from fixtures.converters import tiny_models

REPO = tiny_models.REPO


def _vocab(path):
  """A 100-token WordPiece vocab (tiny configs have vocab_size 100)."""
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens += list(string.ascii_lowercase + string.digits + ".,;:'\"-()!?")
  tokens += ("the of and to in is that for it as was with be by on not he "
             "this are or his from at which but have an they you were her "
             "she there been").split()
  path.write_text("\n".join(tokens[:100]) + "\n")
  return path


def _run(*args):
  return subprocess.run(
      [sys.executable, "-m", "experiments.bench.latency_benchmark", *map(str, args)],
      capture_output=True, text=True, env=tiny_models.env(), cwd=REPO)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
  base = tmp_path_factory.mktemp("bench")
  out, work = base / "out", base / "work"
  result = _run(
      "--output_dir", out, "--work_dir", work, "--models", "tiny_mobilebert",
      "--variants", "nonorm_relu,layernorm_gelu",
      "--modes", "float32,int8,int8_standard", "--threads", "2",
      "--max_seq_length", 32, "--num_runs", 3, "--min_secs", 0.05,
      "--warmup_runs", 1, "--repeats", 2, "--num_calibration_samples", 8,
      "--vocab_file", _vocab(base / "vocab.txt"))
  assert result.returncode == 0, result.stderr[-3000:]
  return out, work, json.loads((out / "benchmark.json").read_text())


def test_rows_cover_the_matrix_with_the_schema(bench):
  out, work, rows = bench
  keys = {(r["model"], r["variant"], r["mode"], r["threads"]) for r in rows}
  assert keys == {("tiny_mobilebert", v, m, t)
                  for v in ("nonorm_relu", "layernorm_gelu")
                  for m in ("float32", "int8", "int8_standard")
                  for t in (2,)}
  for r in rows:
    assert r["target"] == "host"
    assert 0 < r["p5_ms"] <= r["median_ms"] <= r["p95_ms"]
    assert r["repeats"] == 2 and r["runs"] >= 6  # 2 repeats x >= 3 runs
    path = work / "models" / f"{r['model']}_{r['variant']}_{r['mode']}.tflite"
    assert r["size_mb"] == pytest.approx(path.stat().st_size / 1e6, abs=1e-3)
    # Ours fold their NoNorms before export, as convert_tflite does.
    assert (r["nonorm_folding"] is not None) == (
        r["variant"] == "nonorm_relu"), r
  size = {(r["variant"], r["mode"]): r["size_mb"] for r in rows}
  assert size[("nonorm_relu", "int8")] < 0.8 * size[("nonorm_relu",
                                                      "float32")]


def test_our_int8_runs_in_one_xnnpack_partition(bench):
  _, _, rows = bench
  by = {(r["variant"], r["mode"]): r for r in rows}
  for variant in ("nonorm_relu", "layernorm_gelu"):
    ours = by[(variant, "int8")]
    assert ours["xnnpack_partitions"] == 1
    assert ours["recipe"]["refused"] == {}
    assert ours["recipe"]["symmetric_tensors"] > 0
  # The converter's own output leaves LayerNorm / gelu / softmax to LiteRT's
  # kernels, which splits the graph.
  assert by[("layernorm_gelu", "int8_standard")]["xnnpack_partitions"] > 5


def test_markdown_and_plot(bench):
  out, _, rows = bench
  text = (out / "benchmark.md").read_text()
  assert "Command: `python -m experiments.bench.latency_benchmark --output_dir" in text
  assert "| model | variant | mode | threads | target | median ms |" in text
  assert text.count("| tiny_mobilebert |") == len(rows)
  png = (out / "benchmark.png").read_bytes()
  assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_rerun_reuses_the_cache_and_refuses_existing_outputs(bench, tmp_path):
  out, work, _ = bench
  common = ["--work_dir", work, "--models", "tiny_mobilebert", "--variants",
            "nonorm_relu,layernorm_gelu", "--modes", "float32,int8",
            "--cells", "*/nonorm_relu/float32", "--threads", "1",
            "--max_seq_length", 32, "--num_runs", 2, "--min_secs", 0.01,
            "--repeats", 1]
  refused = _run("--output_dir", out, *common)
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1] == (
      f"error: {out / 'benchmark.json'} exists (pass --overwrite)")
  before = os.path.getmtime(work / "models" /
                            "tiny_mobilebert_nonorm_relu_float32.tflite")
  again = _run("--output_dir", tmp_path / "again", *common)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "converting" not in again.stdout  # cached
  rows = json.loads((tmp_path / "again" / "benchmark.json").read_text())
  assert [(r["variant"], r["mode"]) for r in rows] == [("nonorm_relu",
                                                        "float32")]
  assert os.path.getmtime(work / "models" /
                          "tiny_mobilebert_nonorm_relu_float32.tflite") == (
                              before)


@pytest.mark.parametrize("flag, value, message", [
    ("--variants", "nonorm_tanh", "--variants nonorm_tanh: use"),
    ("--modes", "float16", "--modes float16: use"),
    ("--models", "no_such_model", "unknown ['no_such_model']"),
    ("--threads", "0", "--threads: give thread counts >= 1"),
    ("--cells", "bert_base/*/*", "--cells bert_base/*/*: no model")])
def test_bad_flags_fail_with_one_line_and_no_outputs(tmp_path, flag, value,
                                                     message):
  out = tmp_path / "out"
  result = _run("--output_dir", out, "--models", "tiny_mobilebert", flag,
                value)
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error:") and message in last, last
  assert not out.exists()


def test_xnnpack_int8_is_as_accurate_as_the_standard_int8(bench):
  """Float islands and symmetric K / V must not cost accuracy: against the
  float32 file, our int8 errs no more than the converter's own int8."""
  import numpy as np
  from converters.runtime import LiteRTModel
  _, work, _ = bench
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 100, (8, 32)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[4:, 20:] = 0
  inputs = {"ids": ids * mask, "mask": mask, "segment_ids": 0 * ids}
  for variant in ("nonorm_relu", "layernorm_gelu"):
    out = {mode: LiteRTModel((work / "models" / (
        f"tiny_mobilebert_{variant}_{mode}.tflite")).read_bytes()).run_batch(
            inputs)["sequence_output"]
           for mode in ("float32", "int8", "int8_standard")}
    ours = np.abs(out["int8"] - out["float32"]).mean()
    standard = np.abs(out["int8_standard"] - out["float32"]).mean()
    scale = np.abs(out["float32"]).mean()
    assert ours < 0.1 * scale, variant
    assert ours <= 1.25 * standard, (variant, ours, standard)


def test_peer_mobilebert_converts_the_standard_way(tmp_path):
  # requirements-bench.txt is installed by the set-up: no skip.
  out = tmp_path / "out"
  result = _run(
      "--output_dir", out, "--work_dir", tmp_path / "work", "--models",
      "peer_mobilebert", "--peer_config", "tiny_mobilebert", "--variants",
      "nonorm_relu", "--modes", "float32,int8", "--threads", "1",
      "--max_seq_length", 32, "--num_runs", 2, "--min_secs", 0.01, "--repeats",
      1, "--num_calibration_samples", 4, "--vocab_file",
      _vocab(tmp_path / "vocab.txt"))
  assert result.returncode == 0, result.stderr[-3000:]
  rows = json.loads((out / "benchmark.json").read_text())
  assert {(r["model"], r["mode"]) for r in rows} == {
      ("peer_mobilebert", "float32"), ("peer_mobilebert", "int8")}
  assert all(r["median_ms"] > 0 for r in rows)
  int8 = next(r for r in rows if r["mode"] == "int8")
  assert int8["recipe"] is None  # the converter's standard int8


def test_checks_decide_the_issue_and_skip_oversubscribed_host_rows():
  from experiments.bench import latency_report
  def row(model, variant, mode, threads, ms, target="host"):
    return dict(model=model, variant=variant, mode=mode, threads=threads,
                target=target, median_ms=ms)
  rows = [row("mobilebert", "nonorm_relu", "float32", 2, 16.0),
          row("mobilebert", "nonorm_relu", "dynamic", 2, 7.0),
          row("mobilebert", "nonorm_relu", "int8", 2, 6.8),
          row("peer_mobilebert", "nonorm_relu", "float32", 2, 15.5),
          row("mobilebert", "nonorm_relu", "int8", 4, 14.0),
          row("mobilebert", "nonorm_relu", "dynamic", 4, 13.0)]
  found = {what: ok for what, ok, _ in latency_report.checks(rows, host_cores=2)}
  assert found == {
      "MobileBERT int8 <= dynamic (host, 2 thr)": True,
      "MobileBERT int8 <= float32 / 2 (host, 2 thr)": True,
      "MobileBERT float32 <= peer float32 (host, 2 thr)": False}
  with_4 = latency_report.checks(rows, host_cores=4)
  assert ("MobileBERT int8 <= dynamic (host, 4 thr)", False,
          "14.00 vs 13.00 ms") in with_4


def test_library_takes_options_not_flags(tmp_path):
  """Issue 30: only main() reads FLAGS; the checks and the cache key run on
  a BenchmarkOptions built without parsing a command line. Its own process:
  the command's absl flags clash with other experiments'."""
  vocab = _vocab(tmp_path / "vocab.txt")
  script = (
      "import dataclasses, json\n"
      "from experiments.bench import latency_benchmark as bench\n"
      "from tfmodels.command_options import with_defaults\n"
      "o = with_defaults(bench.BenchmarkOptions, models=('tiny_mobilebert',),"
      " variants=('nonorm_relu', 'layernorm_gelu'), modes=('float32',"
      " 'int8_standard'), threads=('2', '1'), max_seq_length=32,"
      " calibration_data="
      f"{str(vocab)!r}, vocab_file={str(vocab)!r})\n"
      "cells, threads = bench.check_flags(o)\n"
      "order = sorted(cells, key=lambda c: bench._timing_order(c, o))\n"
      "float_cell = cells[0]\n"
      "unfolded = dataclasses.replace(o, fold_nonorm=False)\n"
      "print(json.dumps({'stems': [c.stem for c in order],"
      " 'threads': threads,"
      " 'same_key': bench._key(float_cell, o) == bench._key(float_cell,"
      " dataclasses.replace(o, num_calibration_samples=3)),"
      " 'int8_key_moves': bench._key(cells[1], o) != bench._key(cells[1],"
      " dataclasses.replace(o, num_calibration_samples=3)),"
      " 'fold_moves': bench._key(float_cell, o) != bench._key(float_cell,"
      " unfolded)}))\n"
      "try:\n"
      "  bench.check_flags(dataclasses.replace(o, threads=('0',)))\n"
      "except bench.BenchmarkError as e:\n"
      "  print(e)\n")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, env=tiny_models.env(), cwd=REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  found, error = result.stdout.strip().splitlines()
  assert json.loads(found) == {
      "stems": ["tiny_mobilebert_nonorm_relu_float32",
                "tiny_mobilebert_layernorm_gelu_float32",
                "tiny_mobilebert_nonorm_relu_int8_standard",
                "tiny_mobilebert_layernorm_gelu_int8_standard"],
      "threads": [2, 1], "same_key": True, "int8_key_moves": True,
      "fold_moves": True}
  assert error == "--threads: give thread counts >= 1"


def _tree(top):
  """{relative path: bytes, "dir" or the link's target} under `top`."""
  return {str(p.relative_to(top)): (
      f"-> {os.readlink(p)}" if p.is_symlink() else
      p.read_bytes() if p.is_file() else "dir")
          for p in sorted(top.rglob("*"))}


def _last_line(result):
  return result.stderr.strip().splitlines()[-1:]


@pytest.mark.parametrize("models, length, line", [
    # bert_base, mobilebert (and the rest of the defaults): 512 positions;
    # 100000 failed after 9 s, in the export, leaving an empty models/.
    ((), 100000, "--max_seq_length 100000: at most 512, the "
     "max_position_embeddings of bert_base"),
    (("--models", "tiny_mobilebert,peer_mobilebert", "--peer_config",
      "tiny_mobilebert"), 65, "--max_seq_length 65: at most 64, the "
     "max_position_embeddings of tiny_mobilebert"),
    (("--models", "peer_mobilebert", "--peer_config", "tiny_mobilebert"), 65,
     "--max_seq_length 65: at most 64, the max_position_embeddings of "
     "peer_mobilebert (tiny_mobilebert's sizes)"),
    ((), 0, "--max_seq_length 0: at least 3 ([CLS], a word piece, [SEP])"),
    (("--models", "peer_mobilebert", "--peer_config", "nonexistent"), 32,
     "--peer_config nonexistent: no such config file or shipped name"),
])
def test_max_seq_length_beyond_the_models_is_refused_first(tmp_path, models,
                                                           length, line):
  result = _run("--output_dir", tmp_path / "a" / "out", "--work_dir",
                tmp_path / "b" / "work", *models, "--max_seq_length", length)
  assert (result.returncode, _last_line(result)) == (1, [f"error: {line}"])
  assert result.stdout == ""
  assert os.listdir(tmp_path) == []  # no folder made


def test_overwrite_replaces_only_its_own_files(tmp_path):
  """--overwrite may replace benchmark.json / .md / .png of an earlier run,
  nothing else: one of those names held by a folder or a link, and a link
  as --output_dir or --work_dir, are refused before any work."""
  out = tmp_path / "out"
  (out / "benchmark.md").mkdir(parents=True)
  (out / "benchmark.md" / "notes.txt").write_text("the user's")
  (tmp_path / "elsewhere.png").write_text("the user's")
  (out / "benchmark.png").symlink_to(tmp_path / "elsewhere.png")
  (tmp_path / "link").symlink_to(out)
  before = _tree(tmp_path)
  common = ["--models", "tiny_mobilebert", "--modes", "float32",
            "--max_seq_length", 32, "--overwrite"]
  for args, line in [
      (["--output_dir", out], f"--output_dir {out}: benchmark.md is a "
       "directory, which this command did not write; --overwrite replaces "
       "only its own files (move it away or choose another --output_dir)"),
      (["--output_dir", tmp_path / "link"], f"--output_dir {tmp_path}/link: "
       "is a symbolic link; refusing to write through it (give the real "
       "path)"),
      (["--output_dir", tmp_path / "new", "--work_dir", tmp_path / "link"],
       f"--work_dir {tmp_path}/link: is a symbolic link; refusing to write "
       "through it (give the real path)")]:
    result = _run(*common, *args)
    assert (result.returncode, _last_line(result)) == (
        1, [f"error: {line}"]), args
    assert _tree(tmp_path) == before, args
  (out / "benchmark.md" / "notes.txt").unlink()
  (out / "benchmark.md").rmdir()
  result = _run(*common, "--output_dir", out)
  assert _last_line(result) == [
      f"error: --output_dir {out}: benchmark.png is a symbolic link, which "
      "this command did not write; --overwrite replaces only its own files "
      "(move it away or choose another --output_dir)"]
  assert (tmp_path / "elsewhere.png").read_text() == "the user's"


def test_a_refused_run_leaves_no_folder_it_made(tmp_path):
  """--work_dir held by another benchmark: refused after --output_dir (and
  the folders above it) were made for the run; they go with it."""
  from tfmodels.staging import output_lock
  work = tmp_path / "work"
  with output_lock(str(work), "--work_dir"):
    result = _run("--output_dir", tmp_path / "new" / "deeper" / "out",
                  "--work_dir", work, "--models", "tiny_mobilebert",
                  "--modes", "float32", "--max_seq_length", 32)
  assert result.returncode == 1
  assert _last_line(result) == [
      f"error: --work_dir {work}: another process (pid {os.getpid()}) is "
      "writing it; wait for it or choose another output"]
  assert os.listdir(tmp_path) == []


def test_no_empty_folder_helpers(tmp_path):
  from experiments.common.skeleton import missing_dirs, remove_empty_dirs
  (tmp_path / "had").mkdir()
  made = missing_dirs(tmp_path / "a" / "b" / "c", tmp_path / "had" / "x",
                      None)
  # Deepest first, so a parent is empty once its children are gone.
  assert made == [str(tmp_path / "a" / "b" / "c"), str(tmp_path / "a" / "b"),
                  str(tmp_path / "had" / "x"), str(tmp_path / "a")]
  (tmp_path / "a" / "b" / "c").mkdir(parents=True)
  (tmp_path / "had" / "x").mkdir()
  (tmp_path / "a" / "b" / "kept.txt").write_text("output")
  remove_empty_dirs(made)
  assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
      "a", "a/b", "a/b/kept.txt", "had"]
