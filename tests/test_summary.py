import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from tfmodels.configs import load_config, shipped_config_names
from tfmodels.summary import PAPER_FIGURES, compare_with_papers, count



def within(ours, paper, tolerance):
  return abs(ours - paper) <= tolerance * paper


def test_flops_at_128_match_the_papers():
  assert within(count(load_config("bert_base"))["flops"], 22.5e9, 0.05)
  assert within(count(load_config("bert_base"))["flops_linear"], 21.7e9, 0.05)
  assert within(count(load_config("mobilebert_tiny"))["flops"], 3.1e9, 0.05)
  assert within(count(load_config("kroneckerbert_21"))["flops_linear"], 1.4e9,
                0.05)
  mobilebert = count(load_config("mobilebert"))["flops"]
  assert within(mobilebert, 5.4e9, 0.01)          # the careful count


def test_parameter_counts_match_the_papers():
  assert count(load_config("mobilebert"))["params_encoder"] == 24_581_888
  for name, paper in (("bert_base", 109e6), ("bert_large", 334e6),
                      ("ibbert_large", 293e6), ("kroneckerbert_21", 5.2e6),
                      ("mixed_vocab_l6_h256", 6.2e6),
                      ("mixed_vocab_l12_h256", 10.9e6),
                      ("snips_l6_h96", 1.2e6), ("snips_l6_h256", 6.2e6)):
    assert within(count(load_config(name))["params_encoder"], paper, 0.02), name


def test_every_mismatch_says_why():
  for name in PAPER_FIGURES:
    assert name in shipped_config_names()
    for row in compare_with_papers(count(load_config(name))):
      assert row["matches"] or len(row["why_different"]) > 40, (name, row)


def test_counts_scale_with_sequence_length():
  short = count(load_config("bert_base"), seq_len=64)
  long = count(load_config("bert_base"), seq_len=128)
  assert long["flops_linear"] == pytest.approx(2 * short["flops_linear"],
                                               rel=1e-3)
  assert long["flops_attention"] == 4 * short["flops_attention"]
  assert long["params_total"] == short["params_total"]


def run_cli(*args):
  return subprocess.run([sys.executable, "-m", "tfmodels.summary", *args],
                        capture_output=True, text=True, cwd=REPO,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_cli_prints_json_per_config_and_fails_cleanly():
  done = run_cli("tfmodels/configs/mobilebert.json", "bert_base", "--json")
  assert done.returncode == 0, done.stderr
  rows = [json.loads(line) for line in done.stdout.splitlines()]
  assert [r["name"] for r in rows] == ["mobilebert", "bert_base"]
  for key in ("params_total", "params_encoder", "flops"):
    assert all(isinstance(r[key], int) for r in rows)
  assert rows[0]["params_encoder"] == 24_581_888
  text = run_cli("mobilebert", "--seq_len", "384")
  assert "24,581,888" in text.stdout and "seq_len 384" in text.stdout
  bad = run_cli("no_such_model")
  assert bad.returncode != 0
  assert "no_such_model" in bad.stderr.strip().splitlines()[-1]
  negative = run_cli("mobilebert", "--seq_len", "-5")  # printed negative FLOPs
  assert negative.returncode != 0 and negative.stdout == ""
  assert negative.stderr.strip().splitlines()[-1] == (
      "error: --seq_len -5: must be >= 1")
