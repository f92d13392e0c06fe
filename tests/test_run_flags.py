"""Training commands check their flags before any work (issue 20): a zero
interval or a negative rate is one line naming the flag, and nothing is
written (before, `--checkpoint_every 0` failed mid-run with a
ZeroDivisionError and `distill --alpha -3` only when its stage started)."""

import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize("command, flag, message", [
    ("pretrain", ["--checkpoint_every", "0"],
     "--checkpoint_every must be >= 1, got 0"),
    ("pretrain", ["--log_every", "0"], "--log_every must be >= 1, got 0"),
    ("pretrain", ["--warmup_steps", "20", "--train_steps", "10"],
     "--warmup_steps 20 exceeds --train_steps 10"),
    ("distill", ["--alpha", "-3"], "--alpha must be in [0.0, 1.0], got -3.0"),
    ("finetune", ["--learning_rate", "-1"],
     "--learning_rate must be > 0, got -1.0"),
    ("finetune", ["--keep_checkpoints", "0"],
     "--keep_checkpoints must be >= 1, got 0"),
])
def test_bad_flag_is_one_line_before_any_work(tmp_path, command, flag,
                                              message):
  model_dir = tmp_path / "run"
  required = {
      "pretrain": ["--config", "tiny_bert", "--train_data",
                   str(tmp_path / "shards")],
      "distill": ["--student_config", "tiny_mobilebert", "--teacher",
                  "all-minilm-l6-v2", "--train_data", str(tmp_path / "x")],
      "finetune": ["--task", "spam", "--data_dir", str(tmp_path / "x"),
                   "--init_dir", str(tmp_path / "y")],
  }[command]
  result = subprocess.run(
      [sys.executable, "-m", f"tfmodels.training.{command}", *required,
       "--model_dir", str(model_dir), *flag], capture_output=True, text=True,
      cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == f"error: {message}"
  assert not model_dir.exists()
