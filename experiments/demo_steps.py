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

from experiments.demo_results import DEMO_MODES, MLM_MODELS, MODELS
from experiments.paths import TASK_LIBRARY_PYTHON, VOCAB, data_sources
from experiments.pipeline import Step, python_module
from experiments.real_teacher import MINILM, import_step


class DemoError(ValueError):
  """Unusable demo settings; the message names the flag or directory."""


# (step suffix, finetune --task, shipped data directory)
TASKS = (("qa", "squad", "wordnet_qa"), ("spam", "spam", "spam"))
# The converted models: the distilled student for both tasks (the app takes
# its QA model) and the teacher's QA model, to set the student's size and
# speed beside; the scratch student has the student's shape.
CONVERTED = ("pkt_qa", "pkt_spam", "teacher_qa")
APP_MODEL = ("pkt_qa", "int8")


@dataclasses.dataclass(frozen=True)
class Scale:
  """Sizes of one demo; `slices` None means the shipped data as it is."""
  teacher: str  # a named pretrained teacher (tfmodels.checkpoints.teachers)
  student_config: str
  seq_length: int  # pre-training / distillation shards
  max_predictions: int
  batch_size: int
  student_steps: int  # distillation, and the scratch student's pre-training
  learning_rate: float  # AdamW: converges in hundreds of steps, LAMB not
  qa_seq_length: int  # QA fine-tuning (WordNet QA windows are short)
  qa_export_length: int  # the converted QA model: the app's [1, L]
  spam_seq_length: int
  qa_steps: int
  spam_steps: int
  finetune_batch_size: int
  teacher_learning_rate: float  # fine-tuning the pretrained teacher
  finetune_learning_rate: float  # fine-tuning the students
  calibration_samples: int
  bench_threads: str
  bench_runs: int
  questions: int
  slices: dict = None


SCALES = {
    # Timed on the 2-core host: README, "The main job".
    "full": Scale(MINILM, "mobilebert_minilm", seq_length=64,
                  max_predictions=10, batch_size=32, student_steps=300,
                  learning_rate=1e-3, qa_seq_length=128,
                  qa_export_length=384, spam_seq_length=64, qa_steps=200,
                  spam_steps=100, finetune_batch_size=16,
                  teacher_learning_rate=1e-4, finetune_learning_rate=5e-4,
                  calibration_samples=100, bench_threads="1,2",
                  bench_runs=20, questions=20),
    "tiny": Scale(MINILM, "mobilebert_minilm", seq_length=32,
                  max_predictions=5, batch_size=4, student_steps=14,
                  learning_rate=1e-3, qa_seq_length=64,
                  qa_export_length=384,  # the Task Library's length
                  spam_seq_length=32, qa_steps=3, spam_steps=3,
                  finetune_batch_size=4, teacher_learning_rate=1e-4,
                  finetune_learning_rate=1e-3, calibration_samples=4,
                  bench_threads="1", bench_runs=5, questions=2,
                  slices={"pretraining_documents": 24, "spam_rows": (32, 24),
                          "qa_questions": (64, 16)}),
}

STAGES = {
    "data": ("slices", "data_train", "data_heldout"),
    "teacher": ("teacher",),
    "students": ("pkt", "scratch"),
    "evaluate": tuple(f"{m}_mlm" for m in MLM_MODELS),
    "finetune": tuple(f"{m}_{t}" for m in MODELS for t, _, _ in TASKS),
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

  def shards(self, split):
    """The step's output directory holds the shard directory (which
    create_pretraining_data replaces as a whole) and the step's log."""
    return self.path("data", split, "shards")

  def run(self, model):
    return self.path("runs", model)

  def finetuned(self, name):
    return self.path("finetune", name)

  def tflite(self, name):
    return self.path("tflite", name)

  def tflite_file(self, name, mode):
    return os.path.join(self.tflite(name), f"{name}_{mode}.tflite")


def data_dirs(scale, layout):
  """(slice steps, pre-training text per split, task directory per task):
  the shipped files, or the tiny demo's slices of them."""
  steps, texts, by_name = data_sources(scale.slices,
                                       layout.path("data", "slices"))
  return steps, texts, {t: by_name[d] for t, _, d in TASKS}


def build_steps(scale, layout, phone=None):
  """The demo as pipeline steps, in priority order (the QA student first:
  the app, the conversions and the benchmark wait for it)."""
  steps = []
  step = lambda *a, **k: steps.append(Step(*a, clean=True, **k))
  slice_steps, texts, task_data = data_dirs(scale, layout)
  text = texts.get
  steps += slice_steps
  data_inputs = tuple(s.output for s in slice_steps)

  for split, seed in (("train", 12345), ("heldout", 7)):
    step(f"data_{split}", python_module(
        "tfmodels.data.create_pretraining_data", "--input_file", text(split),
        "--vocab_file", VOCAB, "--output_dir", layout.shards(split),
        "--max_seq_length", scale.seq_length, "--max_predictions_per_seq",
        scale.max_predictions, "--dupe_factor", 1, "--random_seed", seed,
        "--overwrite"), layout.path("data", split), data_inputs)
  steps.append(import_step(layout.run("teacher"), teacher=scale.teacher))
  train_data = layout.path("data", "train")
  train = ("--train_data", layout.shards("train"), "--batch_size",
           scale.batch_size, "--optimizer", "adamw", "--learning_rate",
           scale.learning_rate, "--checkpoint_every", 100,
           "--keep_checkpoints", 1, "--log_every", 10)  # resume needs one

  def pretraining(name, module, *args):
    step(name, python_module(module, *args, "--model_dir", layout.run(name),
                             "--train_steps", scale.student_steps,
                             "--warmup_steps", scale.student_steps // 10,
                             *train),
         layout.run(name), (train_data,) + (
             (layout.run("teacher"),) if "--teacher_dir" in args else ()))

  def finetune(model, task):
    """The teacher from its pretrained weights; the PKT student with
    task-stage distillation from the fine-tuned teacher's soft targets
    (finetune --teacher_dir --task_kd prediction); the scratch student on
    the labels alone."""
    name = f"{model}_{task}"
    task_name, = [n for t, n, _ in TASKS if t == task]
    teacher = (layout.finetuned(f"teacher_{task}"),) if model == "pkt" \
        else ()
    kd = ("--teacher_dir", *teacher, "--task_kd", "prediction") if (
        teacher) else ()
    step(name, python_module(
        "tfmodels.training.finetune", "--task", task_name, "--data_dir",
        task_data[task], "--init_dir", layout.run(model), "--model_dir",
        layout.finetuned(name), "--vocab_file", VOCAB, "--max_seq_length",
        scale.qa_seq_length if task == "qa" else scale.spam_seq_length,
        "--train_steps", scale.qa_steps if task == "qa" else
        scale.spam_steps, "--batch_size", scale.finetune_batch_size,
        "--learning_rate", scale.teacher_learning_rate if model == "teacher"
        else scale.finetune_learning_rate, "--checkpoint_every", 1000,
        "--log_every", 10, *kd),
         layout.finetuned(name),
         (layout.run(model),) + teacher + data_inputs)

  def convert(name, scored=True):
    """Converted and validated; `scored` also measures the task metric of
    Keras and each .tflite on the dev set. The teacher's QA model is not
    scored: MiniLM at L=384 costs minutes per pass over the dev set, and
    its quality is its fine-tuning result (the same windows at L=128)."""
    task = name.split("_")[-1]
    length = (scale.qa_export_length if task == "qa"
              else scale.spam_seq_length)
    data = (("--data_dir", task_data[task]) if scored else
            ("--representative_data", _train_file(task_data[task])))
    step(f"convert_{name}", python_module(
        "converters.convert_tflite", "--model_dir", layout.finetuned(name),
        *data, "--output_dir", layout.tflite(name), "--name", name,
        "--modes", ",".join(DEMO_MODES), "--max_seq_length", length,
        "--num_calibration_samples", scale.calibration_samples,
        "--overwrite"), layout.tflite(name),
         (layout.finetuned(name),) + data_inputs)

  def evaluate(model):
    output = layout.path("eval", f"{model}_mlm")
    step(f"{model}_mlm", python_module(
        "tfmodels.training.evaluate", "--model_dir", layout.run(model),
        "--pretraining_data", layout.shards("heldout"), "--output",
        os.path.join(output, "metrics.json")), output,
        (layout.run(model), layout.path("data", "heldout")))

  # The app's model first (its teacher before it), then the other
  # converted ones, then the rest.
  app_name, app_mode = APP_MODEL
  finetune("teacher", "qa")
  pretraining("pkt", "tfmodels.training.distill", "--teacher_dir",
              layout.run("teacher"), "--student_config",
              scale.student_config, "--strategy", "pkt")
  finetune("pkt", "qa")
  convert("pkt_qa")
  app_dir = layout.path("app_assets")
  step("app", python_module(
      "experiments.demo_app", "--model",
      layout.tflite_file(app_name, app_mode), "--vocab", VOCAB, "--qa_dir",
      task_data["qa"], "--questions", scale.questions, "--output_dir",
      app_dir, *(("--task_library_python", TASK_LIBRARY_PYTHON)
                 if os.path.exists(TASK_LIBRARY_PYTHON) else ())),
       app_dir, (layout.tflite(app_name),) + data_inputs)
  finetune("teacher", "spam")
  finetune("pkt", "spam")
  convert("pkt_spam")
  convert("teacher_qa", scored=False)
  pretraining("scratch", "tfmodels.training.pretrain", "--config",
              scale.student_config)
  for model in MLM_MODELS:
    evaluate(model)
  for task, _, _ in TASKS:
    finetune("scratch", task)
  models = [layout.tflite_file(n, m) for n in CONVERTED for m in DEMO_MODES]
  bench_inputs = tuple(layout.tflite(n) for n in CONVERTED)
  bench = ("--threads", scale.bench_threads, "--num_runs", scale.bench_runs)
  step("bench_host", python_module(
      "android_bench", "run", "--target", "host", *bench, "--results_dir",
      layout.path("bench", "host"), "--name", "host", "--noplot", *models),
       layout.path("bench", "host"), bench_inputs, alone=True)
  if phone:
    step("bench_phone", python_module(
        "android_bench", "run", "--target", "adb", "--benchmark_binary",
        phone["binary"], "--serial", phone["serial"], "--threads", "1,4",
        "--num_runs", scale.bench_runs, "--results_dir",
        layout.path("bench", "phone"), "--name", phone["name"], "--noplot",
        *models), layout.path("bench", "phone"), bench_inputs, alone=True)
  report_dir = layout.path("report")
  steps.append(Step("report", python_module(
      "experiments.demo_report", "--output_dir", layout.out),
      report_dir, tuple(s.output for s in steps)))
  return steps


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
      capture_output=True, text=True)
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


def check_plan(layout, scale_name, scale):
  """Refuses an output directory holding a demo of another scale (its
  finished steps would be skipped); records this one's otherwise."""
  record = {"scale": scale_name, "vocab_file": VOCAB,
            "sizes": json.loads(json.dumps(dataclasses.asdict(scale)))}
  if os.path.exists(layout.plan):
    try:
      with open(layout.plan) as f:
        old = json.load(f)
    except (OSError, ValueError) as e:
      raise DemoError(f"--output_dir {layout.out}: unreadable {layout.plan} "
                      f"({e}); delete it or use another --output_dir"
                      ) from None
    if old.get("sizes") != record["sizes"]:
      raise DemoError(
          f"--output_dir {layout.out} holds a demo of another size "
          f"({old.get('scale')}); delete it or use another --output_dir")
  return record
