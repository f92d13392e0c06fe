"""experiments/split_search.py: the candidate grid, the choice against a
budget from a made-up latency table, and the timing of a shape on the host
(cached: a second search does not re-time)."""

import os

import pytest

from experiments.split_search import (Budget, BudgetError, Candidate, Row,
                                     candidates, carved, choose, measure)
from tfmodels.checkpoints.model_dir import Head
from tfmodels.configs import load_config
from tfmodels.summary import count

TEACHER = load_config("tiny_bert").replace(vocab_size=100)


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


def test_a_shape_is_timed_on_the_host_once(tmp_path):
  configs = [carved(TEACHER, Candidate(TEACHER.num_attention_heads, 64)),
             carved(TEACHER, Candidate(1, 32))]
  configs = [c.replace(name=f"c{i}") for i, c in enumerate(configs)]
  settings = {"num_runs": 5, "warmup_runs": 1, "min_secs": 0.01}
  lines = []
  first = measure(configs, Head("span"), 32, 1, str(tmp_path), settings,
                  log=lines.append)
  assert set(first) == {"c0", "c1"}
  for ms, mb in first.values():
    assert ms > 0 and 0 < mb < 1
  assert first["c1"][1] < first["c0"][1]  # fewer heads and neurons: smaller
  assert sum(line.startswith("converting") for line in lines) == 2
  lines.clear()
  again = measure(configs, Head("span"), 32, 1, str(tmp_path), settings,
                  log=lines.append)
  assert again == first and not lines  # cached: nothing converted or run
  assert len([n for n in os.listdir(tmp_path) if n.endswith(".json")]) == 2


def test_the_command_chooses_and_refuses_in_one_line(tmp_path):
  """A tiny BERT spam teacher: the table, the chosen split's compress
  flags; a budget below the fastest candidate is refused naming its time,
  re-using the cached measurements."""
  import json
  import shutil
  import subprocess
  import sys
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
            "--work_dir", str(tmp_path / "work")]
  result = subprocess.run(common + ["--target_latency_ms", "1000",
                                    "--output", str(tmp_path / "s.json")],
                          capture_output=True, text=True, cwd=tiny_models.REPO,
                          env=tiny_models.env())
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads((tmp_path / "s.json").read_text())
  assert len(record["rows"]) == 4
  assert record["chosen"] == {"heads": 2, "intermediate_size": 32,
                              "table_rank": None}  # all fit: the most kept
  scores = {(r["heads"], r["table_rank"]): r["score"] for r in record["rows"]}
  assert scores[(2, None)] > scores[(1, None)] > scores[(1, 8)]
  assert "--heads 2 --intermediate_size 32" in result.stdout
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
