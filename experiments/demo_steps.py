"""The demo's steps: sizes, where each step writes, the chain itself.

    scale = SCALES["full"]
    layout = Layout("demo_output")
    steps = build_steps(scale, layout)      # pipeline Steps, priority order
    run_steps(steps, jobs=2)

`demo.py` is the command around it (flags, the phone, the run); this module
has no flags, so tests and other experiments can import it.
"""

import dataclasses
import json
import os
import shutil
import subprocess

from android_bench.qa_app import SEQUENCE_LENGTH
from experiments.paths import TASK_LIBRARY_PYTHON, VOCAB, data_sources
from experiments.pipeline import Step, python_module
from experiments.real_teacher import MINILM, import_step
from tfmodels.process_lifetime import die_with_parent


class DemoError(ValueError):
  """Unusable demo settings; the message names the flag or directory."""


# (step suffix, finetune --task, shipped data directory)
TASKS = (("qa", "squad", "wordnet_qa"), ("spam", "spam", "spam"))
# The demo's student, named once: its steps, run directories, converted
# models, plan.json keys and report entries are all called after it
# (task_step, Layout.carving, size_key).
STUDENT = "carved"
# The models the demo fine-tunes and compares: the teacher and its student.
MODELS = ("teacher", STUDENT)
# The modes the demo converts: its pick of converters.quantize.MODES.
DEMO_MODES = ("float32", "int8")
# plan.json's record of CARVED_STUDENT (an output directory holding
# another student is refused).
STUDENT_RECORD = f"{STUDENT}_student"


def task_step(model, task):
  """The step of model M on task T: its fine-tuning (teacher_qa), and the
  name of its fine-tuned and converted models."""
  return f"{model}_{task}"


def carve_step(task):
  """The step carving the student out of the task's fine-tuned teacher."""
  return f"carve_{task}"


def convert_step(model, task):
  """The step converting model M's fine-tuned model of task T."""
  return f"convert_{task_step(model, task)}"


def size_key(field):
  """A Scale field's key in plan.json's sizes: the student's fields
  (student_qa_steps) go by its name."""
  prefix = "student_"
  return (f"{STUDENT}_{field[len(prefix):]}" if field.startswith(prefix)
          else field)


# The flags of `tfmodels.training.compress` that carve the student out of
# each fine-tuned teacher: the best 6 of MiniLM's 12 heads and 512 of its
# 1536 FFN neurons per layer, the word table as rank-128 factors (37% of
# the teacher's encoder parameters), and MobileBERT's on-device form
# (NoNorm fitted to each LayerNorm, relu for gelu). FFN 512 rather than the
# 640 a budget of 40% of the parameters allows: its int8 runs in 43% of the
# teacher's time at L = 384 instead of 49% (BUILD_NOTES, "Choosing the
# carved split"). The demo's own: experiments/distill_from_minilm.py
# declares the carves it measures in its CARVES.
CARVED_STUDENT = ("--heads", 6, "--intermediate_size", 512, "--low_rank",
                  "word_embeddings=128", "--substitute",
                  "layernorm=nonorm,gelu=relu")
# The converted models: the carved student for both tasks (the app takes
# its QA model) and the teacher's QA model, to set the student's size and
# speed beside.
CONVERTED = (task_step(STUDENT, "qa"), task_step(STUDENT, "spam"),
             task_step("teacher", "qa"))
APP_MODEL = (task_step(STUDENT, "qa"), "int8")


@dataclasses.dataclass(frozen=True)
class Scale:
  """Sizes of one demo; `slices` None means the shipped data as it is.
  plan.json records them (`record`) with the student's fields under its
  name (size_key)."""
  teacher: str  # a named pretrained teacher (tfmodels.checkpoints.teachers)
  qa_max_seq_length: int  # QA fine-tuning (WordNet QA windows are short)
  qa_export_max_seq_length: int  # the converted QA model: the app's L
  spam_max_seq_length: int
  teacher_qa_steps: int
  teacher_spam_steps: int
  student_qa_steps: int  # the student's task-stage distillation
  student_spam_steps: int
  finetune_batch_size: int
  teacher_learning_rate: float  # fine-tuning the pretrained teacher
  student_learning_rate: float  # the student's task stage
  recover_steps: int  # compress: feature-map recovery after substitution
  calibration_examples: int  # compress: examples the importances are on
  calibration_samples: int  # convert_tflite: int8 calibration
  bench_threads: str
  bench_runs: int
  questions: int
  slices: dict = None
  qat_steps: int = 0  # > 0: quantization-aware training of the QA student
  # {step: its peak resident MB, measured}: what the scheduler reserves
  # for a step before it starts (pipeline.run_steps' memory budget).
  step_memory_mb: dict = None

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
                  calibration_samples=64, bench_threads="1,2",
                  bench_runs=20, questions=20,
                  # Peaks of a fresh-clone `make demo` (2026-11-26),
                  # rounded up to 100 MB: README, "Memory".
                  step_memory_mb={
                      "teacher": 1200, task_step("teacher", "qa"): 2000,
                      task_step("teacher", "spam"): 2000,
                      carve_step("qa"): 2100, carve_step("spam"): 1800,
                      task_step(STUDENT, "qa"): 1600,
                      task_step(STUDENT, "spam"): 1600,
                      convert_step(STUDENT, "qa"): 1800,
                      convert_step(STUDENT, "spam"): 1800,
                      convert_step("teacher", "qa"): 2300, "app": 1000,
                      "bench_host": 100}),
    "tiny": Scale(MINILM, qa_max_seq_length=64, spam_max_seq_length=32,
                  qa_export_max_seq_length=SEQUENCE_LENGTH,  # the app's L
                  teacher_qa_steps=3, teacher_spam_steps=3,
                  student_qa_steps=3, student_spam_steps=3,
                  finetune_batch_size=4,
                  teacher_learning_rate=1e-4, student_learning_rate=2e-4,
                  recover_steps=2, calibration_examples=8,
                  calibration_samples=4, bench_threads="1", bench_runs=5,
                  questions=2,
                  slices={"pretraining_documents": 2, "spam_rows": (32, 24),
                          "qa_questions": (64, 16)}),
}

STAGES = {
    "data": ("slices",),
    "teacher": ("teacher",),
    "carve": tuple(carve_step(t) for t, _, _ in TASKS),
    "finetune": tuple(task_step(m, t) for m in MODELS for t, _, _ in TASKS),
    "convert": tuple(f"convert_{c}" for c in CONVERTED),
    "benchmark": ("bench_host", "bench_phone"),
    "app": ("app",),
    "report": ("report",),
}


class Layout:
  """Where each step writes, under the output directory."""

  def __init__(self, out):
    self.out = out
    self.plan = os.path.join(out, "plan.json")
    self.report = os.path.join(out, "REPORT.md")

  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def run(self, model):
    return self.path("runs", model)

  def carving(self, task):
    """The carving step's directory (its log and marker):
    runs/STUDENT_TASK."""
    return self.run(task_step(STUDENT, task))

  def student_model(self, task):
    """The carved model directory, one level below the step's output."""
    return os.path.join(self.carving(task), "model")

  def finetuned(self, name):
    return self.path("finetune", name)

  def tflite(self, name):
    return self.path("tflite", name)

  def tflite_file(self, name, mode):
    return os.path.join(self.tflite(name), f"{name}_{mode}.tflite")


def data_dirs(scale, layout):
  """(slice steps, task directory per task): the shipped files, or the
  tiny demo's slices of them."""
  steps, _, by_name = data_sources(scale.slices,
                                   layout.path("data", "slices"))
  return steps, {t: by_name[d] for t, _, d in TASKS}


@dataclasses.dataclass
class _Chain:
  """What the demo's steps are built from, and the steps so far."""
  scale: Scale
  layout: Layout
  task_data: dict  # task -> its data directory
  data_inputs: tuple  # the slice steps' outputs (none: the shipped data)
  steps: list

  def memory_mb(self, name):
    """The step's measured peak, or None (the scale has none for it)."""
    return (self.scale.step_memory_mb or {}).get(name)

  def add(self, name, *args, **kwargs):
    """A step that starts over when re-run, with its measured peak."""
    self.steps.append(Step(name, *args, clean=True,
                           memory_mb=self.memory_mb(name), **kwargs))


def build_steps(scale, layout, phone=None):
  """The demo as pipeline steps, in priority order (the QA chain first:
  the app, the conversions and the benchmark wait for it)."""
  slice_steps, task_data = data_dirs(scale, layout)
  chain = _Chain(scale, layout, task_data,
                 tuple(s.output for s in slice_steps), list(slice_steps))
  chain.steps.append(dataclasses.replace(
      import_step(layout.run("teacher"), teacher=scale.teacher),
      memory_mb=chain.memory_mb("teacher")))
  # The app's model first (its teacher before it), then the other
  # converted ones, then the rest.
  _add_finetune(chain, "teacher", "qa")
  _add_carve(chain, "qa")
  _add_finetune(chain, STUDENT, "qa")
  _add_convert(chain, STUDENT, "qa", qat_steps=scale.qat_steps)
  _add_app(chain)
  _add_finetune(chain, "teacher", "spam")
  _add_carve(chain, "spam")
  _add_finetune(chain, STUDENT, "spam")
  _add_convert(chain, STUDENT, "spam")
  _add_convert(chain, "teacher", "qa", scored=False)
  _add_benchmarks(chain, phone)
  chain.steps.append(Step("report", python_module(
      "experiments.demo_report", "--output_dir", layout.out),
      layout.path("report"), tuple(s.output for s in chain.steps)))
  return chain.steps


def _add_finetune(chain, model, task):
  """The teacher from its pretrained weights; the carved student from
  its carved weights, with task-stage distillation from the fine-tuned
  teacher of the same task (finetune --teacher_dir --task_kd
  prediction: soft targets + labels)."""
  scale, layout = chain.scale, chain.layout
  name = task_step(model, task)
  task_name, = [n for t, n, _ in TASKS if t == task]
  if model == "teacher":
    init, inputs, kd = layout.run("teacher"), (layout.run("teacher"),), ()
    steps, lr = (getattr(scale, f"teacher_{task}_steps"),
                 scale.teacher_learning_rate)
  else:
    teacher = layout.finetuned(task_step("teacher", task))
    init = layout.student_model(task)
    # The carving step's directory holds the marker the pipeline
    # compares; the model directory one level down has none.
    inputs = (layout.carving(task), teacher)
    kd = ("--teacher_dir", teacher, "--task_kd", "prediction")
    steps, lr = (getattr(scale, f"student_{task}_steps"),
                 scale.student_learning_rate)
  command = python_module(
      "tfmodels.training.finetune", "--task", task_name, "--data_dir",
      chain.task_data[task], "--init_dir", init, "--model_dir",
      layout.finetuned(name), "--vocab_file", VOCAB, "--max_seq_length",
      (scale.qa_max_seq_length if task == "qa"
       else scale.spam_max_seq_length),
      "--train_steps", steps, "--batch_size", scale.finetune_batch_size,
      "--learning_rate", lr, "--checkpoint_every", 1000, "--log_every",
      10, *kd)
  chain.add(name, command, layout.finetuned(name),
            inputs + chain.data_inputs)


def _add_carve(chain, task):
  """The student cut out of the fine-tuned teacher of the task."""
  scale, layout = chain.scale, chain.layout
  teacher = layout.finetuned(task_step("teacher", task))
  command = python_module(
      "tfmodels.training.compress", "--teacher_dir", teacher,
      "--data_dir", chain.task_data[task], "--model_dir",
      layout.student_model(task), *CARVED_STUDENT, "--recover_steps",
      scale.recover_steps, "--calibration_examples",
      scale.calibration_examples, "--overwrite")
  chain.add(carve_step(task), command, layout.carving(task),
            (teacher,) + chain.data_inputs)


def _add_convert(chain, model, task, scored=True, qat_steps=0):
  """Converted and validated; `scored` also measures the task metric of
  Keras and each .tflite on the dev set. The teacher's QA model is not
  scored: MiniLM at L=384 costs minutes per pass over the dev set, and
  its quality is its fine-tuning result (the same windows at L=128)."""
  scale, layout = chain.scale, chain.layout
  name = task_step(model, task)
  length = (scale.qa_export_max_seq_length if task == "qa"
            else scale.spam_max_seq_length)
  data = (("--data_dir", chain.task_data[task]) if scored else
          ("--representative_data", _train_file(chain.task_data[task])))
  qat = ("--qat_steps", qat_steps) if qat_steps > 0 else ()
  command = python_module(
      "converters.convert_tflite", "--model_dir", layout.finetuned(name),
      *data, "--output_dir", layout.tflite(name), "--name", name,
      "--modes", ",".join(DEMO_MODES), "--max_seq_length", length,
      "--num_calibration_samples", scale.calibration_samples, *qat,
      "--overwrite")
  chain.add(convert_step(model, task), command, layout.tflite(name),
            (layout.finetuned(name),) + chain.data_inputs)


def _add_app(chain):
  """The app's model and vocabulary where its build takes them, and its
  Python twin asked the held-out questions (the Task Library too, when
  its environment exists)."""
  layout = chain.layout
  app_name, app_mode = APP_MODEL
  app_dir = layout.path("app_assets")
  command = python_module(
      "experiments.demo_app", "--model",
      layout.tflite_file(app_name, app_mode), "--vocab", VOCAB, "--qa_dir",
      chain.task_data["qa"], "--questions", chain.scale.questions,
      "--output_dir", app_dir,
      *(("--task_library_python", TASK_LIBRARY_PYTHON)
        if os.path.exists(TASK_LIBRARY_PYTHON) else ()))
  chain.add("app", command, app_dir,
            (layout.tflite(app_name),) + chain.data_inputs)


def _add_benchmarks(chain, phone):
  """Every converted model timed on the host, and on the phone if one is
  attached; each benchmark runs alone."""
  scale, layout = chain.scale, chain.layout
  models = [layout.tflite_file(n, m) for n in CONVERTED for m in DEMO_MODES]
  inputs = tuple(layout.tflite(n) for n in CONVERTED)
  bench = ("--threads", scale.bench_threads, "--num_runs", scale.bench_runs)
  host = layout.path("bench", "host")
  chain.add("bench_host", python_module(
      "android_bench", "run", "--target", "host", *bench, "--results_dir",
      host, "--name", "host", "--noplot", *models), host, inputs, alone=True)
  if phone:
    on_phone = layout.path("bench", "phone")
    command = python_module(
        "android_bench", "run", "--target", "adb", "--benchmark_binary",
        phone["binary"], "--serial", phone["serial"], "--threads", "1,4",
        "--num_runs", scale.bench_runs, "--results_dir", on_phone,
        "--name", phone["name"], "--noplot", *models)
    chain.add("bench_phone", command, on_phone, inputs, alone=True)


def _train_file(task_dir):
  """The SQuAD train file of a task directory (calibration text)."""
  names = ("train.json", "train.json.gz")
  return next((os.path.join(task_dir, n) for n in names
               if os.path.exists(os.path.join(task_dir, n))),
              os.path.join(task_dir, names[0]))


def find_phone(binary, serial=None):
  """{'serial', 'name', 'binary'} of an attached device, or (None, why)."""
  if not binary:
    return None, ("no --benchmark_binary (LiteRT's Android benchmark_model; "
                  "BUILD_NOTES.md) was given")
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


def _gb(mb):
  """MB as --memory_budget_gb takes it, rounded up to 0.01 GB."""
  return f"{-(-mb * 100 // 1024) / 100:g}"


def check_memory_budget(steps, budget_gb):
  """DemoError (one line) if --memory_budget_gb is below the measured peak
  of every step the budget schedules (all but the benchmarks, which run
  alone anyway): the scheduler would start each step alone, over the
  budget (`experiments.pipeline._fits`), so the budget would bound
  nothing."""
  needs = {s.name: s.memory_mb for s in steps
           if s.memory_mb and not s.alone}
  if not needs:  # the tiny demo measures none
    return
  smallest = min(needs, key=needs.get)
  if budget_gb * 1024 < needs[smallest]:
    raise DemoError(
        f"--memory_budget_gb {budget_gb:g}: below every step's measured "
        f"peak (the smallest: {smallest}, {needs[smallest]:.0f} MB); give "
        f"at least {_gb(needs[smallest])}")


def _upstream(steps):
  """{step name: names of the steps it reads from, directly or not}."""
  producer = {s.output: s.name for s in steps}
  direct = {s.name: {producer[i] for i in s.inputs if i in producer}
            for s in steps}
  found = {}
  for step in steps:  # in order: a step's inputs come before it
    found[step.name] = set(direct[step.name])
    for name in direct[step.name]:
      found[step.name] |= found.get(name, set())
  return found


def schedule(steps, jobs, budget_gb):
  """(how many steps run at a time, as the run's header says it; a
  warning line, or None). What `pipeline.run_steps` does with the budget:
  steps that read nothing of each other start side by side (up to
  `jobs`, benchmarks alone) only while their measured peaks add up to at
  most the budget, and one that peaks above the whole budget still
  starts, alone."""
  import itertools
  budget_mb = budget_gb * 1024
  upstream = _upstream(steps)
  shared = [s for s in steps if not s.alone]

  def together(group):  # no step of it reads another's output
    return all(a.name not in upstream[b.name] and
               b.name not in upstream[a.name]
               for a, b in itertools.combinations(group, 2))

  def need(group):
    return sum(s.memory_mb or 0.0 for s in group)

  # The most steps ever ready together, and the most of those that fit.
  ready = side_by_side = 1
  always = True  # every group ready together fits
  for size in range(2, jobs + 1):
    groups = [g for g in itertools.combinations(shared, size)
              if together(g)]
    if not groups:
      break
    ready = size
    fitting = sum(need(g) <= budget_mb for g in groups)
    if fitting:
      side_by_side = size
    always = always and fitting == len(groups)
  budget = f"--memory_budget_gb {budget_gb:g}"
  if side_by_side == 1 and ready > 1:
    at_a_time = (f"one at a time (no two steps' measured peaks fit in "
                 f"{budget})")
  elif side_by_side == 1:
    at_a_time = "one at a time"
  elif always:
    at_a_time = f"{side_by_side} at a time"
  else:
    at_a_time = (f"up to {side_by_side} at a time (as their measured "
                 f"peaks fit in {budget})")
  over = sorted((s.memory_mb, s.name) for s in steps
                if (s.memory_mb or 0.0) > budget_mb)
  warning = None
  if over:
    warning = (f"warning: {budget}: the measured peak of {len(over)} of "
               f"{len(steps)} steps is above it (the largest: "
               f"{over[-1][1]}, {over[-1][0]:.0f} MB); each of them runs "
               "alone, over the budget")
  return at_a_time, warning


def expand_force(names):
  """Stage and step names -> step names; UsageError on unknown ones."""
  steps = set()
  known = {s for names_ in STAGES.values() for s in names_}
  for name in names:
    if name in STAGES:
      steps.update(STAGES[name])
    elif name in known:
      steps.add(name)
    else:
      raise DemoError(
          f"--force {name}: not a stage ({', '.join(STAGES)}) or step "
          f"({', '.join(sorted(known))})")
  return steps


# Scale fields renamed since plan.json first recorded them (issue 30: one
# name for a sequence length): an older demo's plan.json reads as today's.
RENAMED_SIZES = {"qa_seq_length": "qa_max_seq_length",
                 "spam_seq_length": "spam_max_seq_length",
                 "qa_export_length": "qa_export_max_seq_length"}


def read_plan(path):
  """plan.json as a dict, its sizes under today's names; ValueError or
  OSError if it cannot be read."""
  with open(path) as f:
    plan = json.load(f)
  if isinstance(plan.get("sizes"), dict):
    plan["sizes"] = {RENAMED_SIZES.get(k, k): v
                     for k, v in plan["sizes"].items()}
  return plan


def check_plan(layout, scale_name, scale):
  """Refuses an output directory holding a demo of another scale or
  carved student (its finished steps would be skipped); records this
  one's otherwise."""
  record = {"scale": scale_name, "vocab_file": VOCAB,
            "sizes": scale.record(),
            STUDENT_RECORD: [str(a) for a in CARVED_STUDENT]}
  if os.path.exists(layout.plan):
    try:
      old = read_plan(layout.plan)
    except (OSError, ValueError) as e:
      raise DemoError(f"--output_dir {layout.out}: unreadable {layout.plan} "
                      f"({e}); delete it or use another --output_dir"
                      ) from None
    if (old.get("sizes"), old.get(STUDENT_RECORD)) != (
        record["sizes"], record[STUDENT_RECORD]):
      raise DemoError(
          f"--output_dir {layout.out} holds a demo of another size or "
          f"student ({old.get('scale')}); delete it or use another "
          "--output_dir")
  return record
