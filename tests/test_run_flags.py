"""Training commands check their flags before any work (issue 20): a zero
interval or a negative rate is one line naming the flag, and nothing is
written (before, `--checkpoint_every 0` failed mid-run with a
ZeroDivisionError and `distill --alpha -3` only when its stage started)."""

import os
import re
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


def test_nonfinite_float_flag_names_the_first_one():
  from absl import flags
  from tfmodels.flag_checks import nonfinite_float_flag
  values = flags.FlagValues()
  flags.DEFINE_float("rate", 1e-3, "", flag_values=values, short_name="r")
  flags.DEFINE_float("bound", None, "", flag_values=values)
  flags.DEFINE_multi_float("seconds", [1.0], "", flag_values=values)
  flags.DEFINE_string("word", "nan", "", flag_values=values)
  values(["x"])
  assert nonfinite_float_flag(values) is None  # None and "nan" strings pass
  values(["x", "-r", "nan"])
  assert nonfinite_float_flag(values) == "--rate nan: give a finite number"
  values(["x", "--rate", "1", "--seconds", "2", "--seconds", "-inf"])
  assert nonfinite_float_flag(values) == (
      "--seconds -inf: give a finite number")


@pytest.mark.parametrize("module, args, message", [
    ("tfmodels.training.compress",
     ["--teacher_dir", "t", "--data_dir", "d", "--model_dir", "m",
      "--recover_learning_rate", "inf"],
     "error: --recover_learning_rate inf: give a finite number"),
    ("android_bench.benchmark_model", ["--graph=m.tflite",
                                       "--min_secs=nan"],
     "ERROR: --min_secs nan: give a finite number"),  # the tool's format
])
def test_nan_and_inf_are_refused_before_any_work(tmp_path, module, args,
                                                 message):
  """Issue 29: absl takes "nan" and "inf" for a float, and range checks
  such as `<= 0` let nan through (convert_tflite and qat_report have their
  own cases in their tests)."""
  result = subprocess.run(
      [sys.executable, "-m", module, *args], capture_output=True, text=True,
      cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                         "PYTHONPATH": REPO}, timeout=300)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [message]
  assert os.listdir(tmp_path) == []


def test_every_command_with_float_flags_checks_them():
  """A float flag is checked by `tfmodels.flag_checks` (directly, or
  through run_flags.check_run_flags) in every module that defines one."""
  from test_import_direction import product_modules
  float_option = re.compile(
      r":\s*float(\s*\|\s*None)?\s*=\s*(option|redefault)\(|\(RunOptions\)")
  unchecked, with_floats = [], []
  for module, path in product_modules().items():
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if float_option.search(text):
      with_floats.append(module)
      if not any(check in text for check in ("nonfinite_float_flag",
                                             "refuse_nonfinite_floats",
                                             "check_run_flags")):
        unchecked.append(module)
  assert unchecked == []
  assert len(with_floats) >= 8, with_floats  # the search finds them
