"""experiments/split_search.py: the candidate grid, the choice against a
budget from a made-up latency table, the timing of a shape on the host as it
ships (substituted; cached: a second search does not re-time), the cache
kept apart per target, a phone through the real adb client and the stand-in
device of test_android_bench_adb, and the refusals before any work."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments.split_budget import Budget
from experiments.split_search import (BudgetError, Candidate, Device, Row,
                                     SearchOptions, attach, candidates,
                                     carved, choose, measure, search,
                                     shape_key, shipped)
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


def test_a_budget_no_candidate_meets_names_the_fastest():
  with pytest.raises(BudgetError) as refused:
    choose(ROWS, Budget(latency_ms=1), teacher_params=1000)
  assert str(refused.value) == (
      "no candidate split meets 1 ms: the fastest, 1 heads, FFN 32, "
      "measured 6.50 ms (1.40 MB int8, 350 encoder parameters)")


def _ops(cache_dir, config, seq_length, threads=1, device=Device()):
  """The op histogram of the int8 file `config` was timed as."""
  from converters.tflite_file import op_histogram
  key = shape_key(config, Head("span"), seq_length, threads, device.key())
  with open(os.path.join(cache_dir, key + ".json")) as f:
    name = json.load(f)["int8_file"]
  with open(os.path.join(cache_dir, name), "rb") as f:
    return op_histogram(f.read())


def test_a_shape_is_timed_on_the_host_once_as_it_ships(tmp_path):
  """Four configs, three shapes (one twice under two names, as the teacher
  and its full-size candidate can be): three conversions, one run; the
  substituted candidate is timed as it ships, without LayerNorm's means or
  gelu, under its own key."""
  full = Candidate(TEACHER.num_attention_heads, 64)
  configs = [carved(TEACHER, full), carved(TEACHER, Candidate(1, 32)),
             carved(TEACHER, full),
             shipped(TEACHER, full, parse_spec("layernorm=nonorm,gelu=relu"))]
  configs = [c.replace(name=f"c{i}") for i, c in enumerate(configs)]
  assert (configs[3].normalization_type, configs[3].hidden_act) == (
      "no_norm", "relu")
  settings = {"num_runs": 5, "warmup_runs": 1, "min_secs": 0.01}
  lines = []
  first = measure(configs, Head("span"), 32, 1, str(tmp_path), settings,
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
  plain, shipping = _ops(tmp_path, configs[0], 32), _ops(tmp_path,
                                                         configs[3], 32)
  assert plain["MEAN"] and plain["RSQRT"] and plain["GELU"]
  assert not {"MEAN", "RSQRT", "GELU"} & set(shipping)
  lines.clear()
  again = measure(configs, Head("span"), 32, 1, str(tmp_path), settings,
                  log=lines.append)
  assert again == first and not lines  # cached: nothing converted or run
  assert len([n for n in os.listdir(tmp_path) if n.endswith(".json")]) == 3


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
])
def test_bad_flags_are_refused_before_any_work(tmp_path, flags, message):
  options = with_defaults(SearchOptions, teacher_dir=_fake_teacher(tmp_path),
                          data_dir=str(tmp_path), target_latency_ms=5.0,
                          **flags)
  with pytest.raises(ValueError) as refused:
    search(options)
  assert str(refused.value).startswith(message)
  assert "\n" not in str(refused.value)


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
  the host is timed again there (its file reused, not converted again) and
  then cached under the phone's key."""
  # The adb lab of android_bench's tests (tests/ is on the path).
  from test_android_bench_adb import PREFIX, Lab, _binary
  lab = Lab(tmp_path)
  try:
    binary = _binary(tmp_path)
    work = tmp_path / "work"
    refused = subprocess.run(
        [sys.executable, "-m", "experiments.split_search", "--teacher_dir",
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
    assert on_phone["c"][0] > 0 and on_phone["c"][1] == host["c"][1]
    assert not any(line.startswith("converting") for line in lines)
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


def test_the_command_chooses_and_refuses_in_one_line(tmp_path):
  """A tiny BERT spam teacher, its candidates timed at the app's length as
  they ship (LayerNorm substituted) and the teacher as it is: the table, the
  chosen split's compress flags; a budget below the fastest candidate is
  refused naming its time, re-using the cached measurements."""
  import shutil
  from converters.tflite_file import op_histogram
  from fixtures.converters import tiny_models
  base = tmp_path.parent
  teacher = tmp_path / "teacher"
  shutil.copytree(tiny_models.trained_classifier(
      str(base), "tiny_bert", 80, "bert_classifier"), teacher)
  (teacher / "task.json").write_text(json.dumps({
      "task": "spam", "max_seq_length": tiny_models.SEQ_LENGTH,
      "vocab_file": tiny_models.VOCAB}))
  common = [sys.executable, "-m", "experiments.split_search", "--teacher_dir",
            str(teacher), "--data_dir", tiny_models.spam_data(str(base)),
            "--heads", "2,1", "--widths", "32", "--ranks", "none,8",
            "--calibration_examples", "64", "--num_runs", "5",
            "--max_seq_length", "32", "--substitute", "layernorm=nonorm",
            "--work_dir", str(tmp_path / "work")]
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
  files = [tmp_path / "work" / n for n in os.listdir(tmp_path / "work")
           if n.endswith(".tflite")]
  assert len(files) == 5  # the candidates and the teacher, in one run
  assert len(os.listdir(tmp_path / "work" / "runs")) == 1
  assert sum("MEAN" in op_histogram(f.read_bytes()) for f in files) == 1
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


def test_the_score_curve_ranks_as_spearman_does():
  from experiments.split_score_curve import spearman
  assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
  assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
  # Ties take their mean rank: ranks (0, 1.5, 1.5, 3) against (0, 1, 2, 3).
  x, y = np.array([0, 1.5, 1.5, 3]), np.arange(4.0)
  x, y = x - x.mean(), y - y.mean()
  expected = (x * y).sum() / np.sqrt((x ** 2).sum() * (y ** 2).sum())
  assert spearman([1, 5, 5, 9], [1, 2, 3, 4]) == pytest.approx(expected)
  assert spearman([1, 1, 1], [1, 2, 3]) == 0.0  # no ordering at all
