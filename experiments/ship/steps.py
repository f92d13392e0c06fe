"""`ship`'s steps: where each writes, and the chain from a teacher to a
phone-ready student.

    plan = Plan(teacher="hf_dir", task="squad", data_dir="data/wordnet_qa",
                ...)                                # ship.py fills it
    layout = Layout("ship_output")
    steps = build_steps(plan, layout)               # up to the split search
    steps = build_steps(plan, layout, split)        # ... to the converted student
    steps = build_steps(plan, layout, split, qat)   # ... QAT if needed
    steps = build_steps(plan, layout, split, qat, better_int8(layout))

The chain grows as it learns: the carve needs the split the search chose
(search/split.json), quantization-aware training runs only if the
student's post-training int8 file loses more than `QAT_DROP` points
(convert_student's report), and its file ships only if it scores higher
(`better_int8`). `ship.py` runs each list in turn; a finished
step is skipped (`experiments/common/pipeline.py`). No flags here, so tests can
import it.
"""

import dataclasses
import json
import os

from android_bench.qa_app import SEQUENCE_LENGTH
from experiments.common import skeleton
from experiments.common.paths import task_library_flags
from experiments.common.pipeline import Step, python_module
from experiments.common.result_files import read_json
from experiments.ship.student_recipe import (RECIPE, carve_command,
                                        student_steps)

MODES = ("float32", "int8")
# Post-training int8 losing more than this many points of the task metric
# against the float model: quantization-aware training instead.
QAT_DROP = 1.0
# The app's sequence length per task kind: BertQuestionAnswerer feeds
# [1, SEQUENCE_LENGTH]; a classifier takes the model's own length.
APP_LENGTH = {"squad": SEQUENCE_LENGTH}
DEFAULT_APP_LENGTH = 128


# Every step a run may have, in order (--force takes these names).
STEP_NAMES = ("teacher", "teacher_finetune", "search", "convert_teacher",
              "carve", "heldout", "student", "convert_student",
              "convert_student_qat", "latency", "app", "arm64", "report")
# Held-out questions the QA files are scored on through the app's twin (the
# app step: picked vs default length; the arm64 step: host vs arm64).
DEV_QUESTIONS = 200


class ShipError(ValueError):
  """Unusable ship settings; the message names the flag or file."""


@dataclasses.dataclass(frozen=True)
class Plan:
  """Everything the steps are built from (ship's flags, resolved)."""
  teacher: str  # the user's --teacher (absolute)
  task: str  # finetune --task
  data_dir: str
  budget: dict  # split_search flags: {"target_latency_ms": 20.0, ...}
  target: str = "host"  # host, adb, or arm64 (the search; timed on host)
  threads: int = 1
  max_seq_length: int = SEQUENCE_LENGTH  # the shipped file's (the app's)
  train_max_seq_length: int = 128  # carving and distillation
  teacher_finetune_steps: int = 0  # > 0: a headless teacher fine-tuned
  # The student's recipe (experiments/ship/student_recipe.py), as ship's flags
  # may change it.
  student_steps: int = RECIPE.steps
  batch_size: int = RECIPE.batch_size
  learning_rate: float = RECIPE.learning_rate
  teacher_learning_rate: float = 1e-4
  recover_steps: int = RECIPE.recover_steps
  calibration_examples: int = RECIPE.calibration_examples
  student_heldout: int = RECIPE.heldout  # > 0: trained to its plateau
  student_max_minutes: float = RECIPE.max_minutes
  task_kd: str = RECIPE.task_kd
  calibration_samples: int = 64
  qat_steps: int = 200
  num_runs: int = 20
  min_secs: float = 1.0  # benchmark_model's own default
  app_examples: int = 20
  search_grid: tuple = ()  # extra split_search flags (--heads ...)
  vocab_file: str | None = None
  benchmark_binary: str | None = None
  serial: str | None = None

  def record(self):
    return json.loads(json.dumps(dataclasses.asdict(self)))

  def recipe(self):
    """The student recipe with this run's settings."""
    return dataclasses.replace(
        RECIPE, steps=self.student_steps, batch_size=self.batch_size,
        learning_rate=self.learning_rate, recover_steps=self.recover_steps,
        calibration_examples=self.calibration_examples,
        heldout=self.student_heldout, max_minutes=self.student_max_minutes,
        task_kd=self.task_kd)


class Layout(skeleton.Layout):
  """Where each step writes, under the output directory."""

  def __init__(self, out):
    super().__init__(out)
    self.report = os.path.join(out, "REPORT.md")
    self.summary = os.path.join(out, "report", "summary.json")

  def imported(self):
    return self.path("runs", "teacher")

  def teacher(self, plan):
    """The fine-tuned teacher every later step reads."""
    return (self.path("finetune", "teacher") if plan.teacher_finetune_steps
            else self.imported())

  @property
  def search(self):
    return self.path("search")

  @property
  def split(self):
    return self.path("search", "split.json")

  @property
  def carving(self):
    return self.path("runs", "student")

  @property
  def carved_model(self):
    return os.path.join(self.carving, "model")

  @property
  def student(self):
    return self.path("finetune", "student")

  @property
  def heldout_data(self):
    """The student's data with a slice of train held out (`heldout`)."""
    return self.path("data", "heldout")

  def tflite(self, name):
    return self.path("tflite", name)

  def tflite_file(self, name, mode):
    return os.path.join(self.tflite(name), f"{name}_{mode}.tflite")

  def report_json(self, name):
    return os.path.join(self.tflite(name), f"{name}_report.json")

  @property
  def app(self):
    return self.path("app_assets")

  @property
  def arm64(self):
    return self.path("arm64")


def bench_dir(layout, plan):
  """android_bench's results: bench/host or bench/phone (the readers of
  experiments.common.result_files look there)."""
  return layout.path("bench", "phone" if plan.target == "adb" else "host")


def read_split(layout):
  """search/split.json's chosen split, or None before the search ran."""
  record = read_json(layout.split)
  return record and record.get("chosen")


def needs_qat(layout):
  """Did the student's post-training int8 lose more than QAT_DROP points?
  None before it was converted."""
  report = read_json(layout.report_json("student"))
  if not report:
    return None
  keras = ((report.get("keras") or {}).get("metric") or {}).get("points")
  int8 = (((report.get("modes") or {}).get("int8") or {}).get("metric")
          or {}).get("points")
  if keras is None or int8 is None:
    return False
  return keras - int8 > QAT_DROP


def better_int8(layout):
  """The conversion whose int8 file scores higher on dev: QAT's
  (student_qat) only if it beats post-training int8 (student)."""
  def points(name):
    report = read_json(layout.report_json(name)) or {}
    return ((((report.get("modes") or {}).get("int8") or {}).get("metric")
             or {}).get("points"))
  qat, ptq = points("student_qat"), points("student")
  return ("student_qat" if qat is not None and (ptq is None or qat > ptq)
          else "student")


def compress_flags(split):
  """compress's flags of a chosen split (split.json's `chosen`)."""
  flags = ["--heads", split["heads"], "--intermediate_size",
           split["intermediate_size"]]
  if split.get("table_rank"):
    flags += ["--low_rank", f"word_embeddings={split['table_rank']}"]
  return flags


@dataclasses.dataclass
class _Chain:
  plan: Plan
  layout: Layout
  steps: list

  def add(self, name, command, output, inputs=(), alone=False):
    """A step that starts over when re-run (no peak measured for it in
    advance: the pipeline bounds what runs beside it by what it holds)."""
    self.steps.append(Step(name, command, output, tuple(inputs), clean=True,
                           alone=alone))


def build_steps(plan, layout, split=None, qat=None, shipped=None,
                arm64_root=None):
  """The chain as far as what is known: the teacher and the search; with
  `split` the carve, the student and the conversions; with `qat` (True or
  False) QAT if needed; with `shipped` (the conversion whose int8 file
  ships: student or student_qat) the latency, the app check and the
  report, and with `arm64_root` (a QA run, where `make arm64-root` built
  it) the shipped files on emulated arm64."""
  chain = _Chain(plan, layout, [])
  _add_teacher(chain)
  _add_search(chain)
  if split is None:
    return chain.steps
  _add_convert(chain, "teacher", layout.teacher(plan))
  _add_carve(chain, split)
  _add_student(chain)
  _add_convert(chain, "student", layout.student)
  if qat is None:
    return chain.steps
  if qat:
    _add_convert(chain, "student_qat", layout.student,
                 ("--qat_steps", plan.qat_steps, "--noqat_keras_metric"),
                 modes=("int8",))
  if shipped is None:
    return chain.steps
  _add_latency(chain, shipped)
  _add_app(chain, shipped)
  if arm64_root and plan.task == "squad":
    _add_arm64(chain, shipped, arm64_root)
  chain.add("report", python_module("experiments.ship.report",
                                    "--output_dir", layout.out),
            layout.path("report"), [s.output for s in chain.steps])
  return chain.steps


def _vocab(layout):
  """The vocabulary the teacher step checked and wrote beside it."""
  return os.path.join(layout.imported(), "vocab.txt")


def _add_teacher(chain):
  plan, layout = chain.plan, chain.layout
  vocab = ("--vocab_file", plan.vocab_file) if plan.vocab_file else ()
  headless = ("--encoder_only",) if plan.teacher_finetune_steps else ()
  chain.add("teacher", python_module(
      "experiments.ship.teacher", "--teacher", plan.teacher, "--task",
      plan.task, "--data_dir", plan.data_dir, "--max_seq_length",
      plan.train_max_seq_length, "--output", layout.imported(), *vocab,
      *headless, "--overwrite"), layout.imported())
  if plan.teacher_finetune_steps:
    chain.add("teacher_finetune", python_module(
        "tfmodels.training.finetune", "--task", plan.task, "--data_dir",
        plan.data_dir, "--init_dir", layout.imported(), "--model_dir",
        layout.teacher(plan), "--vocab_file", _vocab(layout),
        "--max_seq_length", plan.train_max_seq_length, "--train_steps",
        plan.teacher_finetune_steps, "--batch_size", plan.batch_size,
        "--learning_rate", plan.teacher_learning_rate, "--checkpoint_every",
        1000, "--log_every", 10), layout.teacher(plan), [layout.imported()])


def _add_search(chain):
  """The split search; timing runs alone (a quiet machine)."""
  plan, layout = chain.plan, chain.layout
  budget = [a for k, v in plan.budget.items() if v for a in (f"--{k}", v)]
  adb = (("--benchmark_binary", plan.benchmark_binary) if
         plan.benchmark_binary else ()) + (
             ("--serial", plan.serial) if plan.serial else ())
  chain.add("search", python_module(
      "experiments.ship.split_search", "--teacher_dir", layout.teacher(plan),
      "--data_dir", plan.data_dir, *budget, "--target", plan.target, *adb,
      "--threads", plan.threads, "--max_seq_length", plan.max_seq_length,
      "--substitute", plan.recipe().substitute, "--calibration_examples",
      plan.calibration_examples, "--num_runs", plan.num_runs,
      *plan.search_grid, "--output", layout.split),
      layout.search, [layout.teacher(plan)], alone=True)


def _class_names(layout):
  """convert_tflite's --class_names from the teacher's labels.txt."""
  path = os.path.join(layout.imported(), "labels.txt")
  if not os.path.exists(path):
    return ()
  with open(path, encoding="utf-8") as f:
    return ("--class_names", ",".join(f.read().splitlines()))


def _add_convert(chain, name, model_dir, extra=(), modes=MODES):
  """Converted at the app's length, validated against Keras and scored on
  dev (float and every file): the figures the report compares."""
  plan, layout = chain.plan, chain.layout
  chain.add(f"convert_{name}", python_module(
      "converters.convert_tflite", "--model_dir", model_dir, "--data_dir",
      plan.data_dir, "--output_dir", layout.tflite(name), "--name", name,
      "--modes", ",".join(modes), "--max_seq_length", plan.max_seq_length,
      "--num_calibration_samples", plan.calibration_samples,
      *_class_names(layout), *extra, "--overwrite"),
      layout.tflite(name), [model_dir])


def _add_carve(chain, split):
  plan, layout = chain.plan, chain.layout
  teacher = layout.teacher(plan)
  chain.add("carve", carve_command(
      plan.recipe(), teacher, plan.data_dir, layout.carved_model,
      compress_flags(split), "--evaluate", "--overwrite"),
      layout.carving, [teacher, layout.search])


def _add_student(chain):
  """The task stage: distilled from the teacher as the recipe says (with
  --student_heldout, on train without a slice that scores it as it goes
  until more steps stop helping)."""
  plan, layout = chain.plan, chain.layout
  teacher = layout.teacher(plan)
  chain.steps += student_steps(
      plan.recipe(), ("heldout", "student"), plan.task, plan.data_dir,
      layout.heldout_data, layout.carved_model, layout.student,
      _vocab(layout), plan.train_max_seq_length, teacher,
      (layout.carving, teacher), ("--checkpoint_every", 1000, "--log_every",
                                  10))


def curve_lengths(max_length):
  """The lengths the latency step times the files at (multiples of 32 up
  to 128, 256, then the app's): their latency against length."""
  return [n for n in (32, 64, 96, 128, 256) if n < max_length] + [max_length]


def _add_latency(chain, shipped):
  """Teacher and student files timed where the budget was set, at
  `curve_lengths` (the converter writes dynamic-length files)."""
  plan, layout = chain.plan, chain.layout
  name, int8 = shipped, layout.tflite_file(shipped, "int8")
  models = [layout.tflite_file("teacher", m) for m in MODES] + [
      layout.tflite_file("student", "float32"), int8]
  timed_on = "adb" if plan.target == "adb" else "host"
  target = (("--target", "adb", "--benchmark_binary", plan.benchmark_binary)
            + (("--serial", plan.serial) if plan.serial else ())
            if timed_on == "adb" else ("--target", "host"))
  out = bench_dir(layout, plan)
  chain.add("latency", python_module(
      "android_bench", "run", *target, "--threads", plan.threads,
      "--lengths", ",".join(map(str, curve_lengths(plan.max_seq_length))),
      "--num_runs", plan.num_runs, "--min_secs", plan.min_secs,
      "--benchmark_args", f"--warmup_min_secs={plan.min_secs / 2:g}",
      "--results_dir", out, "--name",
      timed_on, "--noplot", *models), out,
      [layout.tflite("teacher"), layout.tflite("student"),
       layout.tflite(name)], alone=True)


def _add_app(chain, shipped):
  """The shipped file where the app takes it, asked through the app's
  Python twin and the TFLite Task Library (when its venv exists), with a
  README.md naming the teacher, the task and the run's report."""
  plan, layout = chain.plan, chain.layout
  name, int8 = shipped, layout.tflite_file(shipped, "int8")
  library = task_library_flags()
  about = ("--teacher", plan.teacher, "--run_report",
           os.path.abspath(layout.report))
  if plan.task == "squad":
    command = python_module(
        "experiments.apps.qa_app_check", "--model", int8, "--qa_dir", plan.data_dir,
        "--questions", plan.app_examples, "--dev_questions", DEV_QUESTIONS,
        "--threads", plan.threads, "--output_dir", layout.app, *about,
        *library)
  else:
    command = python_module(
        "experiments.apps.classifier_app", "--model", int8, "--data_dir",
        plan.data_dir, "--texts", plan.app_examples, "--output_dir",
        layout.app, "--task", plan.task, *about, *library)
  chain.add("app", command, layout.app, [layout.tflite(name)])


def _add_arm64(chain, shipped, root):
  """The shipped int8 file and the student's float32 one on emulated
  arm64 (a Cortex-A76 under qemu-user): the app's questions answered as on
  the host, dev F1 both ways, instructions per inference."""
  plan, layout = chain.plan, chain.layout
  models = [layout.tflite_file(shipped, "int8"),
            layout.tflite_file("student", "float32")]
  chain.add("arm64", python_module(
      "experiments.apps.arm64_check", "--model", ",".join(models), "--qa_dir",
      plan.data_dir, "--questions", plan.app_examples, "--dev_questions",
      DEV_QUESTIONS, "--threads", plan.threads, "--arm64_root", root,
      "--output_dir", layout.arm64), layout.arm64,
      [layout.tflite(shipped), layout.tflite("student")])
