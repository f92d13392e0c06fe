"""The demo's steps: its sizes, where each step writes, the chain itself.

    scale = SCALES["full"]
    layout = Layout("demo_output")
    steps = build_steps(scale, layout)      # pipeline Steps, in order
    run_steps(steps)

The demo is `experiments.ship` run twice on the shipped data, once per task
(QA, then spam), from the pretrained MiniLM: each run fine-tunes the
teacher, carves the demo's student out of it, distils, converts, times and
checks the app's file (OUTPUT_DIR/qa, OUTPUT_DIR/spam, each a ship output
directory); `experiments.demo.report` then sets the two runs side by side. The demo's
own choices (its sizes and its student) are here, and nowhere else.
`demo.py` is the command around it; this module has no flags, so tests and
other experiments can import it.
"""

import dataclasses
import json
import os
import shutil
import subprocess

from android_bench.qa_app import SEQUENCE_LENGTH
from experiments.common import skeleton
from experiments.common.paths import data_sources
from experiments.common.pipeline import Step, python_module
from experiments.common.real_teacher import MINILM, tiny_teacher_step
from experiments.ship.steps import MODES, STEP_NAMES
from experiments.ship.steps import Layout as ShipLayout
from tfmodels.process_lifetime import die_with_parent


class DemoError(ValueError):
  """Unusable demo settings; the message names the flag or directory."""


# (task, finetune --task, shipped data directory)
TASKS = (("qa", "squad", "wordnet_qa"), ("spam", "spam", "spam"))
# The demo's student, named once: its report entries and converted models
# (carved_qa, ...) and plan.json keys are called after it.
STUDENT = "carved"
# The models the demo fine-tunes and compares: the teacher and its student.
MODELS = ("teacher", STUDENT)
# The modes the demo converts: ship's.
DEMO_MODES = MODES
# plan.json's record of CARVED_STUDENT (an output directory holding
# another student is refused).
STUDENT_RECORD = f"{STUDENT}_student"
# ship's budget for the demo's student: at most 40% of the teacher's
# encoder parameters (CARVED_STUDENT keeps 37%).
BUDGET = ("--target_params", 0.4)
# ship's split-search flags naming the demo's student, its one candidate:
# the best 6 of MiniLM's 12 heads and 512 of its 1536 FFN neurons per
# layer, the word table as rank-128 factors (37% of the teacher's encoder
# parameters), in MobileBERT's on-device form (ship: NoNorm fitted to each
# LayerNorm, relu for gelu). FFN 512 rather than the 640 the parameter
# budget allows: its int8 runs in 43% of the teacher's time at L = 384
# instead of 49% (docs/design.md, "Choosing the carved split").
# experiments/papers/distill_from_minilm.py declares the carves it measures in
# its own CARVES.
CARVED_STUDENT = ("--heads", 6, "--widths", 512, "--ranks", 128)
# Threads the files are timed with on a phone (the host: Scale.threads).
PHONE_THREADS = 4


def task_step(model, task):
  """Model M's fine-tuned and converted model of task T, as the report
  names it (teacher_qa, carved_spam)."""
  return f"{model}_{task}"


def size_key(field):
  """A Scale field's key in plan.json's sizes: the student's fields
  (student_qa_steps) go by its name."""
  prefix = "student_"
  return (f"{STUDENT}_{field[len(prefix):]}" if field.startswith(prefix)
          else field)


@dataclasses.dataclass(frozen=True)
class Scale:
  """Sizes of one demo (ship's flags); `slices` None means the shipped
  data as it is. plan.json records them (`record`) with the student's
  fields under its name (size_key)."""
  teacher: str  # a named pretrained teacher (tfmodels.checkpoints.teachers)
  qa_max_seq_length: int  # QA fine-tuning (WordNet QA windows are short)
  qa_export_max_seq_length: int  # the converted QA model: the app's L
  spam_max_seq_length: int  # spam fine-tuning and its converted model
  teacher_qa_steps: int
  teacher_spam_steps: int
  student_qa_steps: int  # the student's task-stage distillation
  student_spam_steps: int
  finetune_batch_size: int
  teacher_learning_rate: float  # fine-tuning the pretrained teacher
  student_learning_rate: float  # the student's task stage
  recover_steps: int  # compress: feature-map recovery after substitution
  calibration_examples: int  # importances (split search, compress)
  calibration_samples: int  # convert_tflite: int8 calibration
  threads: int  # host latency
  bench_runs: int
  questions: int  # asked through the app's twin and the Task Library
  slices: dict = None
  qat_steps: int = 0  # > 0: QAT where post-training int8 loses > 1 point
  teacher_layers: int = 0  # > 0: only the teacher's first N layers
  bench_min_secs: float = 1.0  # least seconds a file is timed (ship's)

  def record(self):
    """The sizes as plan.json holds them (JSON types, size_key names)."""
    return {size_key(k): v for k, v in
            json.loads(json.dumps(dataclasses.asdict(self))).items()}


SCALES = {
    # Timed on the 2-core host: README, "The main job".
    # QA at L = 96: 99.4% of WordNet QA's question + passage pairs fit in
    # one window (median 56 pieces), and L = 128 spent a quarter of every
    # step on padding.
    "full": Scale(MINILM, qa_max_seq_length=96,
                  qa_export_max_seq_length=SEQUENCE_LENGTH,
                  spam_max_seq_length=64, teacher_qa_steps=160,
                  teacher_spam_steps=40, student_qa_steps=250,
                  student_spam_steps=40, finetune_batch_size=16,
                  teacher_learning_rate=1e-4, student_learning_rate=2e-4,
                  recover_steps=30, calibration_examples=128,
                  calibration_samples=64, threads=1, bench_runs=20,
                  questions=20),
    "tiny": Scale(MINILM, qa_max_seq_length=64, spam_max_seq_length=32,
                  qa_export_max_seq_length=SEQUENCE_LENGTH,  # the app's L
                  teacher_qa_steps=3, teacher_spam_steps=3,
                  student_qa_steps=3, student_spam_steps=3,
                  finetune_batch_size=4,
                  teacher_learning_rate=1e-4, student_learning_rate=2e-4,
                  recover_steps=2, calibration_examples=8,
                  calibration_samples=4, threads=1, bench_runs=5,
                  questions=2, teacher_layers=2, bench_min_secs=0,
                  slices={"pretraining_documents": 2, "spam_rows": (32, 24),
                          "qa_questions": (64, 16)}),
}


class Layout(skeleton.Layout):
  """Where each step writes, under the output directory: a ship output
  directory per task."""

  def __init__(self, out):
    super().__init__(out)
    self.report = os.path.join(out, "REPORT.md")

  def ship(self, task):
    """The task's ship run (qa, spam)."""
    return ShipLayout(self.path(task))


def ship_step(task):
  return f"ship_{task}"


def data_dirs(scale, layout):
  """(slice steps, task directory per task): the shipped files, or the
  tiny demo's slices of them."""
  steps, _, by_name = data_sources(scale.slices,
                                   layout.path("data", "slices"))
  return steps, {t: by_name[d] for t, _, d in TASKS}


def ship_command(scale, layout, task, task_dir, teacher, phone=None, jobs=2,
                 memory_budget_gb=12.0, force=()):
  """`experiments.ship` from the pretrained teacher (its Hugging Face
  directory) to the demo's student of `task`, at the demo's sizes."""
  task_name, = [n for t, n, _ in TASKS if t == task]
  length = getattr(scale, f"{task}_max_seq_length")
  target = (("--target", "adb", "--benchmark_binary", phone["binary"],
             "--serial", phone["serial"], "--threads", PHONE_THREADS)
            if phone else ("--target", "host", "--threads", scale.threads))
  return python_module(
      "experiments.ship", "--teacher", teacher,
      "--teacher_finetune_steps", getattr(scale, f"teacher_{task}_steps"),
      "--task", task_name, "--data_dir", task_dir, "--output_dir",
      layout.ship(task).out, *BUDGET, *CARVED_STUDENT,
      "--train_max_seq_length", length, "--max_seq_length",
      scale.qa_export_max_seq_length if task == "qa" else length,
      "--student_steps", getattr(scale, f"student_{task}_steps"),
      "--student_heldout", 0, "--task_kd", "prediction",
      "--batch_size", scale.finetune_batch_size, "--learning_rate",
      scale.student_learning_rate, "--teacher_learning_rate",
      scale.teacher_learning_rate, "--recover_steps", scale.recover_steps,
      "--calibration_examples", scale.calibration_examples,
      "--calibration_samples", scale.calibration_samples, "--qat_steps",
      scale.qat_steps, "--num_runs", scale.bench_runs, "--min_secs",
      scale.bench_min_secs, "--app_examples",
      scale.questions, *target, "--jobs", jobs, "--memory_budget_gb",
      memory_budget_gb, *(("--force", ",".join(sorted(force))) if force
                          else ()))


def build_steps(scale, layout, phone=None, jobs=2, memory_budget_gb=12.0,
                force=()):
  """The demo as pipeline steps, in order: the data (tiny: slices and the
  teacher's first layers), a ship run per task (QA first: the app's), the
  report. A ship run resumes by itself (its finished steps are skipped),
  so its step keeps its directory."""
  slice_steps, task_data = data_dirs(scale, layout)
  from tfmodels.checkpoints.teachers import teacher_dir
  cut = tiny_teacher_step(scale.teacher_layers,
                          layout.path("data", "tiny_teacher"), scale.teacher)
  steps = slice_steps + ([cut] if cut else [])
  teacher = cut.output if cut else teacher_dir(scale.teacher)
  inputs = tuple(s.output for s in steps)
  for task, _, _ in TASKS:
    steps.append(Step(ship_step(task), ship_command(
        scale, layout, task, task_data[task], teacher, phone, jobs,
        memory_budget_gb, force), layout.ship(task).out, inputs))
  steps.append(Step("report", python_module(
      "experiments.demo.report", "--output_dir", layout.out),
      layout.path("report"), tuple(s.output for s in steps), clean=True))
  return steps


# The demo's steps a run always enters: ship decides what is left of its
# own, and the report reads what they wrote.
ALWAYS = tuple(ship_step(t) for t, _, _ in TASKS) + ("report",)


def find_phone(binary, serial=None):
  """{'serial', 'name', 'binary'} of an attached device, or (None, why)."""
  if not binary:
    return None, ("no --benchmark_binary (LiteRT's Android benchmark_model; "
                  "docs/android_app.md) was given")
  if not os.path.isfile(binary):
    raise DemoError(f"--benchmark_binary {binary}: no such file")
  if not shutil.which("adb"):
    return None, "adb is not installed"
  listed = subprocess.run(
      python_module("android_bench", "devices", "--json"),
      capture_output=True, text=True, preexec_fn=die_with_parent)
  try:
    devices = [d for d in json.loads(listed.stdout or "[]")
               if d.get("state") == "device"]
  except ValueError:
    devices = []
  if serial:
    devices = [d for d in devices if d["serial"] == serial]
  if not devices:
    return None, "`adb devices` lists no device"
  device = devices[0]
  return {"serial": device["serial"], "binary": os.path.abspath(binary),
          "name": device.get("model") or device["serial"]}, None


def check_force(names):
  """--force's names: ship's steps, re-run in both tasks' runs;
  DemoError on others."""
  unknown = sorted(set(names) - set(STEP_NAMES))
  if unknown:
    raise DemoError(f"--force {','.join(unknown)}: not a step of ship "
                    f"({', '.join(STEP_NAMES)})")
  return set(names)


def check_plan(layout, scale_name, scale):
  """Refuses an output directory holding a demo of another size or
  carved student (its finished steps would be skipped); records this
  one's otherwise."""
  record = {"scale": scale_name, "sizes": scale.record(),
            STUDENT_RECORD: [str(a) for a in CARVED_STUDENT]}
  skeleton.check_plan(layout, record, "a demo")
  return record
