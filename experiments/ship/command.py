r"""From your fine-tuned teacher and your data to a phone-ready int8 student
that meets a budget: one command.

    python -m experiments.ship --teacher MY_HF_MODEL --data_dir MY_DATA \
        --output_dir ship_output --target_latency_ms 20 [--target adb \
        --benchmark_binary benchmark_model] [--threads 4]
    python -m experiments.ship ... --target_params 0.4     # or --target_mb 10
    python -m experiments.ship ... --target_latency_share 0.45  # of the
                                      # teacher's int8 time, timed alongside
    python -m experiments.ship ... --target arm64 --target_latency_share 0.5
                                      # of its instructions on emulated arm64

--teacher is a Hugging Face directory saved from BertForQuestionAnswering,
BertForSequenceClassification or BertForTokenClassification (config.json,
model.safetensors, its tokenizer files), one of our run directories, or a
TF1 checkpoint; --data_dir holds the task's train and dev splits (SQuAD
JSON, a sentence<TAB>label TSV, CoNLL). The task follows from the teacher's
head and the data (--task overrides). A teacher without a task head (a
sentence encoder) is fine-tuned first with --teacher_finetune_steps N.

The steps (each a command of this project; the log prints each one, so any
can be re-run by hand; a finished step is skipped on the next run):
  teacher          import, tokenizer checked against the model
                   (experiments.ship.teacher); teacher_finetune if headless
  search           candidate splits (heads, FFN width, word-table rank)
                   timed as int8 files of their shape where the budget is
                   set, scored by the importance they keep; the best inside
                   the budget is chosen (experiments.ship.split_search); a budget
                   none meets stops here, before any training
  convert_teacher  the teacher at the app's length, float32 and int8, scored
                   on dev: the baseline every figure is compared with
  carve            the chosen split cut out of the teacher, NoNorm + relu,
                   feature-map recovery (tfmodels.training.compress)
  student          task-stage distillation from the teacher (finetune
                   --task_kd carved: its soft logits, every layer's hidden
                   states and the kept heads' attention), on train without
                   a held-out slice it is scored on until more steps stop
                   helping (experiments.ship.student_recipe)
  convert_student  float32 and int8, validated against Keras, scored on dev;
                   convert_student_qat when post-training int8 loses more
                   than 1 point (its file ships if it scores higher)
  latency          teacher and student files timed on the target at
                   lengths up to the app's (android_bench run --lengths:
                   the converted files take any length)
  app              the int8 file where the app takes it, answering through
                   the app's Python twin (each window at the length it
                   picks, and at the app's: time and dev F1 both ways) and
                   the TFLite Task Library
  arm64            QA, when `make arm64-root` built the arm64 root: the
                   int8 and float32 files answer the same questions on
                   emulated arm64 (experiments.apps.arm64_check)
  report           REPORT.md and report/summary.json, teacher beside student

Steps whose inputs are ready run two at a time (--jobs) while their
measured peaks fit in --memory_budget_gb; the search and the latency run
alone.
"""

import dataclasses
import json
import os
import sys
import time

from absl import app

from experiments.common import skeleton
from experiments.common.pipeline import StepError, run_steps, sole_writer
from experiments.ship.steps import (APP_LENGTH, DEFAULT_APP_LENGTH, Layout,
                                    STEP_NAMES, Plan, ShipError, better_int8,
                                    build_steps, needs_qat, read_split)
from experiments.ship.split_budget import (BUDGET_FLAGS, BudgetOptions,
                                          budget_of, check_target)
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import refuse_link, write_file

_PLAN_DEFAULTS = Plan(teacher="", task="", data_dir="", budget={})


def _default(name):
  return getattr(_PLAN_DEFAULTS, name)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options, BudgetOptions):
  """ship's flags: the skeleton's common ones, the budget's, its own."""
  teacher: str | None = option(None, "Your fine-tuned teacher: a Hugging "
                               "Face directory, our run directory or a TF1 "
                               "checkpoint.", required=True)
  data_dir: str | None = option(None, "The task's data (train and dev "
                                "splits).", required=True)
  output_dir: str | None = skeleton.output_dir_option(
      "Where everything goes: a new or empty folder, or an earlier ship "
      "run's (resumed).", required=True)
  task: str | None = option(None, "The task (finetune --task; default: from "
                            "the teacher's head and the data files).")
  target: str = option("host", "Where latency is measured: this host, or "
                       "the phone adb reaches; arm64: the split chosen by "
                       "instructions per inference on emulated arm64 (the "
                       "phone's XNNPACK kernels; make arm64-root), the files "
                       "timed on this host.",
                       choices=("host", "adb", "arm64"))
  threads: int = option(1, "Threads the files are timed with.")
  benchmark_binary: str | None = option(
      None, "--target adb: LiteRT's benchmark_model for the phone's ABI.")
  serial: str | None = option(None, "--target adb: the device's serial when "
                              "several are attached.")
  max_seq_length: int = option(0, "The shipped file's sequence length "
                               "(0: the app's, 384 for QA, else 128).")
  train_max_seq_length: int = option(0, "Carving and distillation length "
                                     "(0: the teacher run's, else 128).")
  teacher_finetune_steps: int = option(0, "Fine-tune a teacher without a "
                                       "task head for this many steps.")
  student_steps: int = option(_default("student_steps"), "Task-stage "
                              "distillation steps of the student (with "
                              "--student_heldout: at most).")
  student_heldout: int = option(
      _default("student_heldout"), "Training examples (QA articles, spam "
      "rows, CoNLL sentences) held out to score the student as it trains; "
      "it stops at the first doubling of its steps that gains less than "
      "half a point (0: a fixed --student_steps run on all of train).")
  task_kd: str = option(
      _default("task_kd"), "What the student learns of the teacher besides "
      "the labels: prediction (its soft logits) or carved (also every "
      "layer's hidden states and each kept head's attention).",
      choices=("prediction", "carved"))
  student_max_minutes: float = option(
      _default("student_max_minutes"), "With --student_heldout: the "
      "student's training stops after this many minutes (0: no cap).")
  batch_size: int = option(_default("batch_size"), "Training batch size.")
  learning_rate: float = option(_default("learning_rate"), "The student's "
                                "peak learning rate.")
  teacher_learning_rate: float = option(
      _default("teacher_learning_rate"), "The peak learning rate of "
      "--teacher_finetune_steps.")
  recover_steps: int = option(_default("recover_steps"), "Feature-map "
                              "recovery steps after the carve.")
  calibration_examples: int = option(_default("calibration_examples"),
                                     "Training examples the importances "
                                     "are measured on.")
  calibration_samples: int = option(_default("calibration_samples"),
                                    "Examples int8 is calibrated on "
                                    "(convert_tflite).")
  qat_steps: int = option(_default("qat_steps"), "Quantization-aware "
                          "training steps, when post-training int8 loses "
                          "more than 1 point (0: never).")
  num_runs: int = option(_default("num_runs"), "Timed runs per file.")
  min_secs: float = option(_default("min_secs"), "Least seconds each file "
                           "is timed for at each length (benchmark_model "
                           "--min_secs); it is warmed up for half as long.")
  app_examples: int = option(_default("app_examples"), "Dev examples asked "
                             "through the twin and the Task Library.")
  heads: tuple = option((), "Heads per layer the search tries (default: "
                        "fractions of the teacher's).")
  widths: tuple = option((), "FFN widths the search tries.")
  ranks: tuple = option((), "Word-table ranks the search tries (none: "
                        "whole).")
  vocab_file: str | None = option(None, "The teacher's vocab.txt when it "
                                  "carries none (TF1).")
  jobs: int = skeleton.jobs_option(2)
  memory_budget_gb: float = option(12.0, "Steps start side by side only "
                                   "while their measured peaks add up to "
                                   "at most this.")
  force: tuple = skeleton.force_option(
      "Steps to re-run even if done, e.g. student,report.")


define_flags(Options)


def detect_task(teacher, data_dir, head):
  """The task of the teacher's head (a Head, or None for a TF1 checkpoint)
  and the data files, or ShipError."""
  by_data = next((t for t, ext in (("squad", "json"), ("spam", "tsv"),
                                   ("tagging", "conll"))
                  for n in (f"train.{ext}", f"train.{ext}.gz")
                  if os.path.exists(os.path.join(data_dir, n))), None)
  head = head and {"span": "squad", "classifier": "classification",
                   "tagger": "tagging"}.get(head.kind)
  if by_data is None:
    raise ShipError(f"--data_dir {data_dir}: no train.json, train.tsv or "
                    "train.conll (SQuAD, sentence/label TSV, CoNLL); or "
                    "name the task with --task")
  if head == "classification" and by_data == "spam":
    return by_data
  if head is not None and head != by_data:
    raise ShipError(f"--teacher {teacher}: its head answers {head}, but "
                    f"--data_dir {data_dir} holds {by_data} data")
  return by_data


def _own_task(teacher):
  """The task of a teacher that is one of our fine-tuned runs (task.json),
  or None."""
  from experiments.ship.teacher import OURS, teacher_format
  path = os.path.join(teacher, "task.json")
  if teacher_format(teacher) != OURS or not os.path.exists(path):
    return None
  from tfmodels.checkpoints.model_dir import read_task_spec
  return read_task_spec(teacher, "--teacher")["task"]


def make_plan(options):
  """Plan of the flags, checked (one line naming the flag) before work."""
  budget = {n: getattr(options, n) for n in BUDGET_FLAGS}
  try:
    check_target(options.target, budget)
    budget_of(budget)
  except ValueError as e:
    raise ShipError(str(e)) from None
  if options.target == "arm64":
    from android_bench.arm64 import Arm64Error, counting_root
    try:
      counting_root()
    except Arm64Error as e:
      raise ShipError(f"--target arm64: {e}") from None
  for name in ("teacher", "data_dir"):
    if not os.path.exists(getattr(options, name)):
      raise ShipError(f"--{name} {getattr(options, name)}: no such file or "
                      "directory")
  if options.target == "adb" and not options.benchmark_binary:
    raise ShipError("--target adb needs --benchmark_binary (LiteRT's "
                    "Android benchmark_model)")
  if options.benchmark_binary and not os.path.isfile(
      options.benchmark_binary):
    raise ShipError(f"--benchmark_binary {options.benchmark_binary}: no "
                    "such file")
  for name in ("threads", "student_steps", "batch_size", "num_runs",
               "app_examples", "calibration_examples",
               "calibration_samples"):
    if getattr(options, name) < 1:
      raise ShipError(f"--{name} {getattr(options, name)}: must be >= 1")
  for name in ("recover_steps", "qat_steps", "teacher_finetune_steps",
               "max_seq_length", "train_max_seq_length", "student_heldout"):
    if getattr(options, name) < 0:
      raise ShipError(f"--{name} {getattr(options, name)}: must be >= 0")
  for name in ("learning_rate", "teacher_learning_rate"):
    if not getattr(options, name) > 0:
      raise ShipError(f"--{name} {getattr(options, name)}: must be above 0")
  if not 0 <= options.student_max_minutes < float("inf"):
    raise ShipError(f"--student_max_minutes {options.student_max_minutes:g}"
                    ": give minutes, 0 or more")
  if not 0 <= options.min_secs < float("inf"):
    raise ShipError(f"--min_secs {options.min_secs:g}: give seconds, 0 or "
                    "more")
  if not options.memory_budget_gb > 0:
    raise ShipError(f"--memory_budget_gb {options.memory_budget_gb}: give a "
                    "size in GB above 0")
  from experiments.ship.teacher import inspect_teacher
  _, head, _, _, _ = inspect_teacher(options.teacher, options.vocab_file)
  task = options.task or _own_task(options.teacher) or detect_task(
      options.teacher, options.data_dir, head)
  train_length = options.train_max_seq_length or _teacher_length(
      options.teacher) or 128
  grid = [a for name in ("heads", "widths", "ranks")
          if getattr(options, name)
          for a in (f"--{name}", ",".join(getattr(options, name)))]
  return Plan(
      teacher=os.path.abspath(options.teacher), task=task,
      data_dir=os.path.abspath(options.data_dir), budget=budget,
      target=options.target, threads=options.threads,
      max_seq_length=options.max_seq_length or APP_LENGTH.get(
          task, DEFAULT_APP_LENGTH),
      train_max_seq_length=train_length,
      teacher_finetune_steps=options.teacher_finetune_steps,
      student_steps=options.student_steps, batch_size=options.batch_size,
      learning_rate=options.learning_rate,
      teacher_learning_rate=options.teacher_learning_rate,
      recover_steps=options.recover_steps,
      calibration_examples=options.calibration_examples,
      student_heldout=options.student_heldout,
      student_max_minutes=options.student_max_minutes,
      task_kd=options.task_kd,
      calibration_samples=options.calibration_samples,
      qat_steps=options.qat_steps, num_runs=options.num_runs,
      min_secs=options.min_secs,
      app_examples=options.app_examples, search_grid=tuple(grid),
      vocab_file=(os.path.abspath(options.vocab_file) if options.vocab_file
                  else None),
      benchmark_binary=(os.path.abspath(options.benchmark_binary)
                        if options.benchmark_binary else None),
      serial=options.serial)


def _teacher_length(teacher):
  """The training length of a teacher that is one of our runs."""
  if not os.path.isfile(os.path.join(teacher, "task.json")):
    return None
  from tfmodels.checkpoints.model_dir import read_task_spec
  return read_task_spec(teacher, "--teacher")["max_seq_length"]


def check_output_is_ships(layout):
  """ShipError unless --output_dir is ship's to write: new, empty, or a
  ship run's (its plan.json) whose steps' outputs hold only what the steps
  wrote (their markers list it), so no re-run removes a user's file."""
  from experiments.common.pipeline import LOG, MARKER, unowned_files_under
  names = sorted(set(os.listdir(layout.out)) - {LOG, MARKER})  # a demo's
  if not names:
    return
  if not os.path.exists(layout.plan):
    raise ShipError(f"--output_dir {layout.out}: holds {_shown(names)}, "
                    "which ship did not write; give a new or empty folder")
  foreign = unowned_files_under(layout.out)
  if foreign:
    raise ShipError(f"--output_dir {layout.out}: {_shown(foreign)} sits in "
                    "a step's folder but was not written by ship (a re-run "
                    "replaces that folder); move it out, or choose another "
                    "--output_dir")


def _shown(names, limit=3):
  more = f" and {len(names) - limit} more" if len(names) > limit else ""
  return ", ".join(names[:limit]) + more


def _error_line(error, steps):
  """The failed step's own `error:` line (from its log) when it has one:
  the user's mistake in one line, not the runner's."""
  step = next((s for s in steps if f"step {s.name!r} failed" in str(error)),
              None)
  log = step and os.path.join(step.output, "pipeline.log")
  try:
    with open(log, errors="replace") as f:
      lines = [l.strip() for l in f if l.startswith("error: ")]
  except (OSError, TypeError):
    lines = []
  return (f"{lines[-1]} (step {step.name}; its log: {log})" if lines
          else f"error: {error}")


def run_ship(options, plan, out, force):
  began = time.time()
  layout = Layout(out)
  check_output_is_ships(layout)
  record = plan.record()
  skeleton.check_plan(layout, record, "a ship run",
                      recorded=lambda old: old.get("plan"))
  ran = set()  # a forced step runs once, not again in each later round

  def run(steps, shipped=None):
    write_file(layout.plan, json.dumps(
        {"plan": record, "shipped": shipped, "began": began,
         "steps": [{"name": s.name, "output": s.output,
                    "command": s.describe()} for s in steps]}, indent=2))
    try:
      run_steps(steps, force=force - ran, jobs=options.jobs,
                log=lambda line: print(line, flush=True),
                memory_budget_mb=options.memory_budget_gb * 1024)
      ran.update(s.name for s in steps)
    except StepError as e:
      sys.exit(_error_line(e, steps))

  print(f"ship: {plan.task} teacher {plan.teacher} -> {out}", flush=True)
  run(build_steps(plan, layout))
  split = read_split(layout)
  run(build_steps(plan, layout, split))
  qat = plan.qat_steps > 0 and bool(needs_qat(layout))
  if qat:
    run(build_steps(plan, layout, split, qat))
  shipped = better_int8(layout) if qat else "student"
  from android_bench.arm64 import arm64_root
  root, _ = arm64_root()  # the report says why not, when not
  run(build_steps(plan, layout, split, qat, shipped, root), shipped)
  print(f"\nship finished in {time.time() - began:.0f} s; the report is "
        f"{layout.report}")


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  options = from_flags(Options)
  skeleton.check_command_line(argv, options)
  refuse_nonfinite_floats()
  with skeleton.one_line_errors(ValueError, OSError):  # ShipError, ...
    plan = make_plan(options)
    unknown = sorted(set(options.force) - set(STEP_NAMES))
    if unknown:
      raise ShipError(f"--force {','.join(unknown)}: not a step (steps: "
                      f"{', '.join(STEP_NAMES)})")
    refuse_link(os.path.normpath(options.output_dir), "--output_dir")
    with sole_writer(options.output_dir) as out:
      run_ship(options, plan, out, set(options.force))


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
