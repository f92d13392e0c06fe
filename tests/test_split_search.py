"""experiments/ship/split_search.py: the candidate grid, the choice against a
budget from a made-up latency table, the timing of a shape on the host as it
ships (substituted; cached: a second search does not re-time), the cache
kept apart per target and within its bound (only the records of the times,
pruned by age and size), a phone through the real adb client and the
stand-in device of test_android_bench_adb, the output's lock, and the
refusals before any work."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments.ship.split_budget import Budget
from experiments.ship import split_search
from experiments.ship.split_search import (CACHE_DAYS, CACHE_MB, BudgetError,
                                     Candidate, Device, Row, SearchOptions,
                                     attach, candidates, carved, choose,
                                     measure, prune_cache, search, shape_key,
                                     shipped)
from tfmodels.checkpoints.model_dir import Head
from tfmodels.command_options import with_defaults
from tfmodels.compression.substitution import SubstitutionError, parse_spec
from tfmodels.configs import load_config
from tfmodels.summary import count

TEACHER = load_config("tiny_bert").replace(vocab_size=100)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_grid_carves_from_the_teacher():
  grid = candidates(TEACHER, ranks=(None, 8, 64))
  heads = TEACHER.num_attention_heads
  assert {c.heads for c in grid} <= set(range(1, heads + 1))
  assert max(c.heads for c in grid) == heads
  assert max(c.intermediate_size for c in grid) == TEACHER.intermediate_size
  assert all(c.intermediate_size % 32 == 0 for c in grid)
  width = TEACHER.embedding_size or TEACHER.hidden_size
  assert {c.table_rank for c in grid} == {None, 8} and 64 >= width
  for c in grid:  # every candidate is a config the counter takes
    config = carved(TEACHER, c)
    assert config.num_attention_heads == c.heads
    assert count(config, 16)["params_encoder"] <= count(TEACHER, 16)[
        "params_encoder"]


# A made-up latency table: (heads, FFN, params, MB, ms, score).
TABLE = [(4, 128, 1000, 4.0, 20.0, 1.00), (4, 64, 800, 3.2, 15.0, 0.95),
         (2, 128, 700, 2.8, 12.0, 0.93), (2, 64, 500, 2.0, 9.0, 0.90),
         (1, 64, 400, 1.6, 7.0, 0.80), (1, 32, 350, 1.4, 6.5, 0.80)]
ROWS = [Row(Candidate(h, w), p, mb, ms, s) for h, w, p, mb, ms, s in TABLE]


@pytest.mark.parametrize("budget, chosen", [
    (Budget(latency_ms=25), (4, 128)),   # everything fits: the best score
    (Budget(latency_ms=15), (4, 64)),    # at the bound
    (Budget(latency_ms=10), (2, 64)),
    (Budget(latency_ms=7), (1, 32)),     # equal scores: the faster
    (Budget(params_share=0.75), (2, 128)),  # teacher: 1000 parameters
    (Budget(int8_mb=2.0), (2, 64)),
    (Budget(latency_ms=14, params_share=0.6), (2, 64)),
    (Budget(latency_share=0.5, teacher_ms=20.0), (2, 64)),  # 10 ms
    (Budget(latency_ms=14, latency_share=0.9, teacher_ms=30.0), (2, 128)),
])
def test_choose_takes_the_best_score_inside_the_budget(budget, chosen):
  best = choose(ROWS, budget, teacher_params=1000)
  assert (best.candidate.heads, best.candidate.intermediate_size) == chosen


# The same candidates' arm64 instructions per inference.
INSTRUCTIONS = {(4, 128): 600e6, (4, 64): 450e6, (2, 128): 330e6,
                (2, 64): 290e6, (1, 64): 200e6, (1, 32): 180e6}
ARM64_ROWS = [Row(r.candidate, r.params, r.int8_mb, r.latency_ms, r.score,
                  INSTRUCTIONS[(r.candidate.heads,
                                r.candidate.intermediate_size)])
              for r in ROWS]


def test_on_arm64_the_share_bounds_the_teachers_instructions():
  """With the teacher's instruction count the share bounds instructions,
  never host milliseconds; a miss names the fewest instructions."""
  budget = Budget(latency_share=0.5).with_teacher(20.0, 600e6)
  assert budget.max_latency_ms() is None
  assert budget.max_instructions() == 300e6
  best = choose(ARM64_ROWS, budget, teacher_params=1000)
  assert (best.candidate.heads, best.candidate.intermediate_size) == (2, 64)
  # Host milliseconds play no part: 0.55 of a 10 ms teacher would admit
  # no candidate, 0.55 of its 600M instructions admits (2, 128).
  wider = choose(ARM64_ROWS, Budget(latency_share=0.55).with_teacher(
      10.0, 600e6), teacher_params=1000)
  assert (wider.candidate.heads, wider.candidate.intermediate_size) == (
      2, 128)
  assert budget.describe() == (
      "0.5 of the teacher's int8 instructions on emulated arm64 (600M "
      "per inference: 300M)")
  with pytest.raises(BudgetError) as refused:
    choose(ARM64_ROWS, Budget(latency_share=0.1).with_teacher(20.0, 600e6),
           teacher_params=1000)
  assert str(refused.value).endswith(
      ": the fastest, 1 heads, FFN 32, measured 180M instructions per "
      "inference on emulated arm64 (1.40 MB int8, 350 encoder parameters)")


def test_a_budget_no_candidate_meets_names_the_fastest():
  with pytest.raises(BudgetError) as refused:
    choose(ROWS, Budget(latency_ms=1), teacher_params=1000)
  assert str(refused.value) == (
      "no candidate split meets 1 ms: the fastest, 1 heads, FFN 32, "
      "measured 6.50 ms (1.40 MB int8, 350 encoder parameters)")


def _keep_timed_files(monkeypatch, kept):
  """Copies every file android_bench times into `kept` (the cache does not
  keep them); the paths it was given, run by run."""
  from android_bench import runner
  real, runs = runner.run_matrix, []

  def run_matrix(target, model_paths, *args, **kwargs):
    os.makedirs(kept, exist_ok=True)
    for path in model_paths:
      shutil.copy(path, kept)
    runs.append(list(model_paths))
    return real(target, model_paths, *args, **kwargs)

  monkeypatch.setattr(runner, "run_matrix", run_matrix)
  return runs


def _ops(cache_dir, kept, config, seq_length, threads=1, device=Device()):
  """The op histogram of the int8 file `config` was timed as (its copy in
  `kept`)."""
  from converters.tflite_file import op_histogram
  key = shape_key(config, Head("span"), seq_length, threads, device.key())
  with open(os.path.join(cache_dir, key + ".json")) as f:
    name = json.load(f)["int8_file"]
  with open(os.path.join(kept, name), "rb") as f:
    return op_histogram(f.read())


def test_a_shape_is_timed_on_the_host_once_as_it_ships(tmp_path,
                                                        monkeypatch):
  """Four configs, three shapes (one twice under two names, as the teacher
  and its full-size candidate can be): three conversions, one run; the
  substituted candidate is timed as it ships, without LayerNorm's means or
  gelu, under its own key; the cache keeps the three records, no file."""
  cache, kept = tmp_path / "cache", tmp_path / "timed"
  runs = _keep_timed_files(monkeypatch, str(kept))
  full = Candidate(TEACHER.num_attention_heads, 64)
  configs = [carved(TEACHER, full), carved(TEACHER, Candidate(1, 32)),
             carved(TEACHER, full),
             shipped(TEACHER, full, parse_spec("layernorm=nonorm,gelu=relu"))]
  configs = [c.replace(name=f"c{i}") for i, c in enumerate(configs)]
  assert (configs[3].normalization_type, configs[3].hidden_act) == (
      "no_norm", "relu")
  settings = {"num_runs": 5, "warmup_runs": 1, "min_secs": 0.01}
  lines = []
  first = measure(configs, Head("span"), 32, 1, str(cache), settings,
                  log=lines.append)
  assert set(first) == {"c0", "c1", "c2", "c3"}
  for ms, mb in first.values():
    assert ms > 0 and 0 < mb < 1
  assert first["c1"][1] < first["c0"][1]  # fewer heads and neurons: smaller
  assert first["c2"] == first["c0"]  # one shape, timed once
  assert sum(line.startswith("converted ") for line in lines) == 3
  assert sum(line.startswith("run ") for line in lines) == 1
  keys = {shape_key(c, Head("span"), 32, 1, "host") for c in configs}
  assert len(keys) == 3
  assert len(runs) == 1 and len(runs[0]) == 3
  assert not any(os.path.exists(p) for p in runs[0])  # removed once timed
  plain = _ops(cache, kept, configs[0], 32)
  shipping = _ops(cache, kept, configs[3], 32)
  assert plain["MEAN"] and plain["RSQRT"] and plain["GELU"]
  assert not {"MEAN", "RSQRT", "GELU"} & set(shipping)
  lines.clear()
  again = measure(configs, Head("span"), 32, 1, str(cache), settings,
                  log=lines.append)
  assert again == first and not lines  # cached: nothing converted or run
  assert sorted(os.listdir(cache)) == sorted(f"{k}.json" for k in keys)


def test_a_host_time_never_stands_for_a_phone():
  """The cache key holds the target, and for a phone its serial, model and
  benchmark_model build; a host key is what it was before phones."""
  config = carved(TEACHER, Candidate(2, 32))

  def key(device):
    return shape_key(config, Head("span"), 32, 1, device.key())

  phone = Device("adb", "R58M123", "Pixel 4", "/b/benchmark_model", "a" * 64)
  assert Device().key() == "host"
  keys = {key(Device()), key(phone),
          key(Device("adb", "R58M999", "Pixel 4", "/b", "a" * 64)),
          key(Device("adb", "R58M123", "Pixel 7", "/b", "a" * 64)),
          key(Device("adb", "R58M123", "Pixel 4", "/b", "b" * 64))}
  assert len(keys) == 5
  assert key(phone) == key(Device("adb", "R58M123", "Pixel 4", "/elsewhere",
                                  "a" * 64, adb="/usr/bin/adb"))


def test_an_instruction_count_never_stands_for_a_time(tmp_path):
  """An arm64 count is keyed by the emulated CPU and the root's packages,
  apart from every time."""
  config = carved(TEACHER, Candidate(2, 32))
  roots = []
  for cpu, litert in (("cortex-a76", "1.4.0"), ("cortex-a76", "1.5.0"),
                      ("cortex-a55", "1.4.0")):
    root = tmp_path / f"{cpu}-{litert}"
    root.mkdir()
    (root / "arm64-root.json").write_text(json.dumps(
        {"format": 2, "cpu": cpu, "packages": {"ai-edge-litert": litert}}))
    roots.append(Device("arm64", arm64_root=str(root)))
  keys = {shape_key(config, Head("span"), 32, 1, d.key())
          for d in [Device(), *roots]}
  assert len(keys) == 4
  assert roots[0].unit == "instructions" and Device().unit == "latency_ms"


def _fake_teacher(tmp_path, hidden_act="gelu"):
  """config.json and task.json only: enough for every check before the
  work, which would fail on the missing checkpoint."""
  teacher = tmp_path / "teacher"
  teacher.mkdir()
  (teacher / "config.json").write_text(json.dumps(
      {**json.loads(open(os.path.join(REPO, "tfmodels", "configs",
                                      "tiny_bert.json")).read()),
       "hidden_act": hidden_act}))
  (teacher / "task.json").write_text(json.dumps(
      {"task": "spam", "max_seq_length": 32, "vocab_file": "vocab.txt"}))
  return str(teacher)


@pytest.mark.parametrize("flags, message", [
    ({"max_seq_length": 65}, "--max_seq_length 65: give 1..64 (the teacher's "
     "max_position_embeddings)"),
    ({"max_seq_length": -1}, "--max_seq_length -1: give 1..64"),
    ({"substitute": "layernorm=batchnorm"},
     "--substitute layernorm=batchnorm: 'layernorm=batchnorm' is not one of "
     "layernorm=nonorm, gelu=relu"),
    ({"target": "adb"}, "--target adb needs --benchmark_binary"),
    ({"target": "adb", "benchmark_binary": "/no/such"},
     "--benchmark_binary /no/such: no such file"),
    ({"serial": "R58M123"}, "--serial is for --target adb"),
    ({"threads": 0}, "--threads 0: give 1 or more"),
    ({"target": "arm64", "serial": "R58M123", "target_latency_ms": 0.0,
      "target_latency_share": 0.5}, "--serial is for --target adb"),
])
def test_bad_flags_are_refused_before_any_work(tmp_path, flags, message):
  options = with_defaults(SearchOptions, teacher_dir=_fake_teacher(tmp_path),
                          data_dir=str(tmp_path),
                          **{"target_latency_ms": 5.0, **flags})
  with pytest.raises(ValueError) as refused:
    search(options)
  assert str(refused.value).startswith(message)
  assert "\n" not in str(refused.value)


def test_arm64_without_its_root_or_with_a_ms_budget_is_one_line(
    tmp_path, monkeypatch, capsys):
  """--target arm64 says how to make the root, and refuses a budget in
  milliseconds (emulation has none), both before any work."""
  monkeypatch.setenv("ARM64_ROOT", str(tmp_path / "no_root"))
  options = with_defaults(SearchOptions, teacher_dir=_fake_teacher(tmp_path),
                          data_dir=str(tmp_path), target="arm64",
                          target_latency_share=0.5)
  with pytest.raises(ValueError) as refused:
    search(options)
  assert str(refused.value).startswith("--target arm64: ")
  assert "make arm64-root" in str(refused.value)
  assert "\n" not in str(refused.value)
  with pytest.raises(SystemExit) as exited:
    search(dataclasses.replace(options, target_latency_ms=5.0))
  assert str(exited.value) == (
      "error: --target_latency_ms 5: emulated arm64 counts instructions, not "
      "milliseconds; give --target_latency_share (a share of the teacher's "
      "instructions)")


def test_a_substitution_with_nothing_to_do_is_refused(tmp_path):
  options = with_defaults(SearchOptions, teacher_dir=_fake_teacher(
      tmp_path, hidden_act="relu"), data_dir=str(tmp_path),
                          target_latency_ms=5.0, substitute="gelu=relu")
  with pytest.raises(SubstitutionError, match="^--substitute gelu=relu: the "
                     "model's hidden_act is 'relu', not 'gelu'$"):
    search(options)


ADB = "/usr/bin/adb"


@pytest.mark.skipif(not os.path.exists(ADB), reason="Debian package adb not "
                    "installed (make system-packages)")
def test_candidates_are_timed_on_the_phone_apart_from_the_host(
    tmp_path, monkeypatch):
  """A private adb server (test_android_bench_adb's Lab): no phone is one
  line before any work; with the stand-in phone attached, a shape timed on
  the host is timed again there (converted again: the cache keeps no int8
  file) and then cached under the phone's key."""
  # The adb lab of android_bench's tests (tests/ is on the path).
  from test_android_bench_adb import PREFIX, Lab, _binary
  lab = Lab(tmp_path)
  try:
    binary = _binary(tmp_path)
    work = tmp_path / "work"
    refused = subprocess.run(
        [sys.executable, "-m", "experiments.ship.split_search", "--teacher_dir",
         _fake_teacher(tmp_path), "--data_dir", str(tmp_path),
         "--target_latency_ms", "5", "--target", "adb", "--benchmark_binary",
         binary, "--adb", ADB, "--adb_server_port", str(lab.server_port),
         "--work_dir", str(work)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={**lab.env, "TF_CPP_MIN_LOG_LEVEL": "3",
             "CUDA_VISIBLE_DEVICES": ""})
    assert refused.returncode == 1  # TensorFlow's start-up lines, then:
    assert [line for line in refused.stderr.splitlines()
            if not line.startswith(("I0000", "WARNING: All log"))] == [
                "error: no device attached: adb devices lists none; connect "
                "a phone or emulator, or use --target host"]
    assert not work.exists()

    lab.start_device()
    for name in [n for n in os.environ if n.startswith(("ADB", "ANDROID"))]:
      monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", lab.env["HOME"])
    phone = attach(binary, None, ADB, lab.server_port)
    assert (phone.target, phone.serial, phone.model) == (
        "adb", lab.serial, "Pixel 4 (stand-in)")
    config = carved(TEACHER, Candidate(1, 32)).replace(name="c")
    settings = {"num_runs": 3, "warmup_runs": 1, "min_secs": 0}
    lines = []
    host = measure([config], Head("span"), 16, 1, str(work), settings,
                   log=lines.append)
    lines.clear()
    on_phone = measure([config], Head("span"), 16, 1, str(work), settings,
                       log=lines.append, device=phone)
    # The same shape: the same size, to a few bytes (two conversions of one
    # shape need not be byte for byte the same file).
    assert on_phone["c"][0] > 0
    assert on_phone["c"][1] == pytest.approx(host["c"][1], rel=1e-3)
    assert sum(line.startswith("converting") for line in lines) == 1
    assert sorted(os.listdir(work)) == sorted(
        shape_key(config, Head("span"), 16, 1, d.key()) + ".json"
        for d in (Device(), phone))
    ran = [c for c in lab.commands() if c.startswith(PREFIX)]
    assert len(ran) == 1 and "--num_threads=1" in ran[0]
    with open(work / (shape_key(config, Head("span"), 16, 1, phone.key())
                      + ".json")) as f:
      assert json.load(f)["target"]["serial"] == lab.serial
    lines.clear()
    assert measure([config], Head("span"), 16, 1, str(work), settings,
                   log=lines.append, device=phone) == on_phone
    assert not lines  # cached under the phone's key
  finally:
    lab.close()


def _search_command(tmp_path):
  """(a tiny BERT spam teacher, the search's argv on it: 4 candidates at
  L = 32 as they ship with LayerNorm substituted)."""
  from fixtures.converters import tiny_models
  base = tmp_path.parent
  teacher = tmp_path / "teacher"
  shutil.copytree(tiny_models.trained_classifier(
      str(base), "tiny_bert", 80, "bert_classifier"), teacher)
  (teacher / "task.json").write_text(json.dumps({
      "task": "spam", "max_seq_length": tiny_models.SEQ_LENGTH,
      "vocab_file": tiny_models.VOCAB}))
  return teacher, [
      sys.executable, "-m", "experiments.ship.split_search", "--teacher_dir",
      str(teacher), "--data_dir", tiny_models.spam_data(str(base)),
      "--heads", "2,1", "--widths", "32", "--ranks", "none,8",
      "--calibration_examples", "64", "--num_runs", "5",
      "--max_seq_length", "32", "--substitute", "layernorm=nonorm",
      "--work_dir", str(tmp_path / "work")]


def test_the_command_chooses_and_refuses_in_one_line(tmp_path):
  """A tiny BERT spam teacher, its candidates timed at the app's length as
  they ship (LayerNorm substituted) and the teacher as it is: the table, the
  chosen split's compress flags, no int8 file left in the cache nor a lock
  beside the output; a budget below the fastest candidate is refused naming
  its time, re-using the cached measurements."""
  from fixtures.converters import tiny_models
  from tfmodels.checkpoints.model_dir import read_head
  teacher, common = _search_command(tmp_path)
  result = subprocess.run(common + ["--target_latency_ms", "1000",
                                    "--output", str(tmp_path / "s.json")],
                          capture_output=True, text=True, cwd=tiny_models.REPO,
                          env=tiny_models.env())
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads((tmp_path / "s.json").read_text())
  assert len(record["rows"]) == 4
  assert (record["max_seq_length"], record["target"], record["device"],
          record["substitute"]) == (32, "host", None, "layernorm=nonorm")
  assert record["teacher_latency_ms"] > 0
  assert record["teacher_int8_mb"] > max(r["int8_mb"] for r in record["rows"])
  assert sorted(os.listdir(tmp_path)) == ["s.json", "teacher", "work"]
  # The candidates as they ship (LayerNorm substituted) and the teacher as
  # it is, in one run; only their records stay.
  config, head = load_config(str(teacher / "config.json")), read_head(
      str(teacher))
  shipping = parse_spec("layernorm=nonorm")
  timed = [shipped(config, Candidate(h, 32, r), shipping)
           for h in (2, 1) for r in (None, 8)] + [config]
  assert sorted(os.listdir(tmp_path / "work")) == sorted(
      shape_key(c, head, 32, 1, "host") + ".json" for c in timed)
  assert sum(line.startswith("run ") for line in
             result.stdout.splitlines()) == 1
  assert record["chosen"] == {"heads": 2, "intermediate_size": 32,
                              "table_rank": None}  # all fit: the most kept
  scores = {(r["heads"], r["table_rank"]): r["score"] for r in record["rows"]}
  assert scores[(2, None)] > scores[(1, None)] > scores[(1, 8)]
  assert "--heads 2 --intermediate_size 32 --substitute layernorm=nonorm" in \
      result.stdout
  assert "timed on the host at length 32, 1 threads, as shipped after " \
      "--substitute layernorm=nonorm; the teacher as it is: " in result.stdout
  fastest = min(record["rows"], key=lambda r: r["latency_ms"])
  refused = subprocess.run(common + ["--target_latency_ms", "0.0001"],
                           capture_output=True, text=True,
                           cwd=tiny_models.REPO, env=tiny_models.env())
  assert refused.returncode != 0
  line = refused.stderr.strip().splitlines()[-1]
  label = Candidate(fastest["heads"], fastest["intermediate_size"],
                    fastest["table_rank"]).label()
  assert line.startswith("error: no candidate split meets 0.0001 ms: the "
                         f"fastest, {label}, measured "), line
  assert "converting" not in refused.stdout  # measured once, by shape


def test_on_arm64_the_command_chooses_by_instructions_beside_host_ms(
    tmp_path):
  """--target arm64: every candidate and the teacher timed on the host and
  counted on emulated arm64, the choice within half the teacher's
  instructions, both kinds of record in the cache under their own keys."""
  from android_bench.arm64 import instruction_counting
  from fixtures.converters import tiny_models
  counting, why = instruction_counting()
  if not counting:
    pytest.skip(f"no arm64 instruction counting here: {why}")
  _, common = _search_command(tmp_path)
  result = subprocess.run(common + [
      "--target", "arm64", "--target_latency_share", "0.9", "--output",
      str(tmp_path / "s.json")], capture_output=True, text=True,
      cwd=tiny_models.REPO, env=tiny_models.env())
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads((tmp_path / "s.json").read_text())
  assert record["target"] == "arm64" and len(record["rows"]) == 4
  teacher = record["teacher_arm64_instructions"]
  assert teacher > 0 and record["teacher_latency_ms"] > 0
  assert all(r["arm64_instructions"] > 0 and r["latency_ms"] > 0
             for r in record["rows"])
  assert record["budget"]["max_latency_ms"] is None
  assert record["budget"]["max_arm64_instructions"] == pytest.approx(
      0.9 * teacher)
  chosen, = [r for r in record["rows"] if r["chosen"]]
  assert chosen["arm64_instructions"] <= 0.9 * teacher
  inside = [r for r in record["rows"]
            if r["arm64_instructions"] <= 0.9 * teacher]
  assert chosen["score"] == max(r["score"] for r in inside)
  assert "arm64 insns" in result.stdout
  assert ("instructions per inference counted on emulated arm64 "
          "(qemu-aarch64 -cpu cortex-a76)") in result.stdout
  # One file per shape, converted once: timed on the host, then counted.
  assert result.stdout.count("converting 5 candidate shapes") == 1
  # 5 host times and 5 arm64 counts, each under its own key.
  kept = [json.loads((tmp_path / "work" / n).read_text())
          for n in os.listdir(tmp_path / "work") if n.endswith(".json")]
  assert sorted(("latency_ms" in k, "instructions" in k) for k in kept) == (
      [(False, True)] * 5 + [(True, False)] * 5)


def test_the_score_curve_ranks_as_spearman_does():
  from experiments.ship.split_score_curve import spearman
  assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
  assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
  # Ties take their mean rank: ranks (0, 1.5, 1.5, 3) against (0, 1, 2, 3).
  x, y = np.array([0, 1.5, 1.5, 3]), np.arange(4.0)
  x, y = x - x.mean(), y - y.mean()
  expected = (x * y).sum() / np.sqrt((x ** 2).sum() * (y ** 2).sum())
  assert spearman([1, 5, 5, 9], [1, 2, 3, 4]) == pytest.approx(expected)
  assert spearman([1, 1, 1], [1, 2, 3]) == 0.0  # no ordering at all


def _record(cache, name, size, age_days, now):
  """A made-up record of `size` bytes last used `age_days` ago (sparse: a
  large one costs nothing)."""
  path = os.path.join(cache, name)
  with open(path, "wb") as f:
    f.truncate(size)
  os.utime(path, (now - age_days * 86400,) * 2)
  return name


def _dead_pid():
  child = subprocess.Popen(["true"])
  child.wait()
  return child.pid


def test_the_cache_is_pruned_to_its_bound(tmp_path):
  """Records unused for CACHE_DAYS days go, then the least recently used
  until CACHE_MB remain; so do killed runs' scratch directories and the
  int8 and run files earlier versions kept. A running search's scratch and
  what split_search did not write stay; the bound is the one documented."""
  cache, now = str(tmp_path), time.time()
  hexes = iter(f"{i:020x}" for i in range(1, 100))
  old = _record(cache, next(hexes) + ".json", 200, CACHE_DAYS + 1, now)
  recent = [_record(cache, next(hexes) + ".json", 3_000_000, days, now)
            for days in (5, 4, 3, 2)]  # 12 MB, oldest first
  small = _record(cache, next(hexes) + ".json", 200, 1, now)
  legacy = _record(cache, next(hexes) + ".tflite", 5_000_000, 0, now)
  os.mkdir(os.path.join(cache, "runs"))
  _record(cache, "runs/20250101-120000-abc123.json", 100, 40, now)
  killed = f"timing-{_dead_pid()}-k1_x"
  running = f"timing-{os.getpid()}-r2_y"
  for scratch in (killed, running):
    os.mkdir(os.path.join(cache, scratch))
    _record(cache, f"{scratch}/{next(hexes)}.tflite", 50_000_000, 0, now)
  _record(cache, "notes.txt", 100, 99, now)  # not the cache's: left alone
  os.mkdir(os.path.join(cache, "mine"))

  removed = prune_cache(cache, now=now)
  assert sorted(removed) == sorted(
      [old, recent[0], legacy, killed, "runs",
       "runs/20250101-120000-abc123.json"])
  assert sorted(os.listdir(cache)) == sorted(
      recent[1:] + [small, running, "notes.txt", "mine"])
  records = [n for n in os.listdir(cache) if n.endswith(".json")]
  assert sum(os.path.getsize(os.path.join(cache, n))
             for n in records) <= CACHE_MB * 1e6
  assert prune_cache(cache, now=now) == []  # within its bound: nothing
  # A tighter bound: the least recently used first, the newest last.
  assert prune_cache(cache, max_days=2.5, max_mb=0.001, now=now) == [
      recent[1], recent[2], recent[3]]
  assert prune_cache(str(tmp_path / "none")) == []  # not made yet
  # The bound is the one --work_dir's help and the docstring state.
  from tfmodels.command_options import flag_spec
  help_text = flag_spec(SearchOptions.__dataclass_fields__["work_dir"],
                        SearchOptions)[2]
  for text in (help_text, split_search.__doc__):
    text = " ".join(text.split())
    assert f"last {CACHE_DAYS} days" in text and f"{CACHE_MB} MB" in text


def _fake_timing(monkeypatch):
  """measure without TensorFlow or a timer: the conversion writes a few
  bytes per shape, android_bench's run times each 2 ms; the files it was
  given and whether each existed then."""
  from android_bench import report, runner
  seen = []

  def convert_all(unconverted, head, seq_length, log):
    for path in unconverted:
      with open(path, "wb") as f:
        f.write(b"\0" * 1000)

  def run_matrix(target, model_paths, settings, results_dir, **kwargs):
    seen.extend((p, os.path.isfile(p)) for p in model_paths)
    return {"models": list(model_paths)}, None

  monkeypatch.setattr(split_search, "_convert_all", convert_all)
  monkeypatch.setattr(runner, "run_matrix", run_matrix)
  monkeypatch.setattr(report, "summarize", lambda run: [
      {"model": os.path.basename(p), "latency_ms": 2.0}
      for p in run["models"]])
  return seen


def test_measuring_keeps_only_the_records_and_prunes(tmp_path, monkeypatch):
  """The int8 files are timed from a scratch directory removed once they
  are; the cache ends with the records alone, pruned (an old record and an
  earlier version's int8 file go) and a record used now is kept longest."""
  seen = _fake_timing(monkeypatch)
  cache, now = str(tmp_path / "cache"), time.time()
  os.mkdir(cache)
  old = _record(cache, "f" * 20 + ".json", 100, CACHE_DAYS + 1, now)
  legacy = _record(cache, "e" * 20 + ".tflite", 1000, 0, now)
  configs = [carved(TEACHER, Candidate(h, 32)).replace(name=f"c{h}")
             for h in (1, 2)]
  measured = measure(configs, Head("span"), 16, 1, cache, log=lambda _: None)
  assert measured == {"c1": (2.0, 0.001), "c2": (2.0, 0.001)}
  assert len(seen) == 2 and all(existed for _, existed in seen)
  assert not any(os.path.exists(p) for p, _ in seen)
  keys = [shape_key(c, Head("span"), 16, 1, "host") for c in configs]
  assert sorted(os.listdir(cache)) == sorted(k + ".json" for k in keys)
  assert old not in os.listdir(cache) and legacy not in os.listdir(cache)
  # A second search reads the records and marks them used.
  first = os.path.join(cache, keys[0] + ".json")
  os.utime(first, (now - 10 * 86400,) * 2)
  seen.clear()
  assert measure(configs, Head("span"), 16, 1, cache) == measured
  assert not seen and os.path.getmtime(first) > now - 60


# split_search's command as it runs, with a stand-in search that holds its
# output's lock until killed ("hold") or returns at once ("done"). The two
# modules that import TensorFlow, which the stand-in never uses, are
# stand-ins too: the command starts in a second, not fifteen.
_COMMAND = """
import sys, time, types
def stand_in(name, **names):
  sys.modules[name] = types.ModuleType(name)
  sys.modules[name].__dict__.update(names)
stand_in("tfmodels.tokenization",
         VocabError=type("VocabError", (ValueError,), {}))
stand_in("tfmodels.compression.carve", CarveSpec=None, carved_config=None)
from experiments.ship import split_search
mode = sys.argv[1]
def search(options):
  if mode == "hold":
    print("searching", flush=True)
    time.sleep(300)
  return {"chosen": "stand-in"}
split_search.search = search
sys.argv = ["split_search"] + sys.argv[2:]
split_search.run()
"""


def test_the_output_lock_outlives_no_run(tmp_path):
  """A run holds `.NAME.lock` beside its --output (a second is refused);
  after a kill -9 the file stays but the kernel freed its lock, so the next
  run goes ahead as if it were not there and, clean, leaves none."""
  output, lock = tmp_path / "split.json", tmp_path / ".split.json.lock"
  flags_ = ["--teacher_dir", str(tmp_path), "--data_dir", str(tmp_path),
            "--target_latency_ms", "5", "--output", str(output)]

  def command(mode):
    return [sys.executable, "-c", _COMMAND, mode, *flags_]

  held = subprocess.Popen(command("hold"), stdout=subprocess.PIPE, text=True,
                          cwd=REPO)
  try:
    assert held.stdout.readline() == "searching\n"
    assert lock.read_text() == f"{held.pid}\n"
    refused = subprocess.run(command("done"), capture_output=True, text=True,
                             cwd=REPO, timeout=120)
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        f"error: --output {output}: another process (pid {held.pid}) is "
        "writing it; wait for it or choose another output")
  finally:
    held.kill()
    held.wait()
    held.stdout.close()
  assert held.returncode == -9 and lock.exists() and not output.exists()
  done = subprocess.run(command("done"), capture_output=True, text=True,
                        cwd=REPO, timeout=120)
  assert done.returncode == 0, done.stderr
  assert json.loads(output.read_text()) == {"chosen": "stand-in"}
  assert os.listdir(tmp_path) == ["split.json"]  # no lock, no staging
