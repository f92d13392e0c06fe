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

from experiments.demo_results import MODELS, DEMO_MODES
from experiments.paths import VOCAB, data_sources
from experiments.pipeline import Step, python_module
from tfmodels.staging import write_file


class DemoError(ValueError):
  """Unusable demo settings; the message names the flag or directory."""


# (step suffix, finetune --task, shipped data directory)
TASKS = (("qa", "squad", "wordnet_qa"), ("spam", "spam", "spam"))
# The converted models: the distilled student for both tasks (the app takes
# its QA model) and the teacher's QA model for the LayerNorm / gelu vs
# NoNorm / relu comparison; the scratch student has the student's shape.
CONVERTED = ("pkt_qa", "pkt_spam", "teacher_qa")
APP_MODEL = ("pkt_qa", "int8")


@dataclasses.dataclass(frozen=True)
class Scale:
  """Sizes of one demo; `slices` None means the shipped data as it is."""
  teacher_config: str
  student_config: str
  config_overrides: dict
  seq_length: int  # pre-training
  max_predictions: int
  batch_size: int
  teacher_steps: int
  student_steps: int
  learning_rate: float  # AdamW: converges in hundreds of steps, LAMB not
  qa_seq_length: int
  spam_seq_length: int
  qa_steps: int
  spam_steps: int
  finetune_learning_rate: float
  calibration_samples: int
  bench_threads: str
  bench_runs: int
  questions: int
  slices: dict = None


SCALES = {
    # 10.3 min of pipeline on the quiet 2-core host (11.4 min for `make
    # demo` from a fresh clone, .venv included); 21 min when shared with
    # 3-4 other CPU-bound jobs.
    "full": Scale("demo_ibbert", "demo_mobilebert", {}, seq_length=64,
                  max_predictions=10, batch_size=32, teacher_steps=400,
                  student_steps=300, learning_rate=1e-3, qa_seq_length=128,
                  spam_seq_length=64, qa_steps=300, spam_steps=150,
                  finetune_learning_rate=1e-3, calibration_samples=100,
                  bench_threads="1,2", bench_runs=50, questions=5),
    "tiny": Scale("tiny_ibbert", "tiny_mobilebert", {"vocab_size": 30522},
                  seq_length=32, max_predictions=5, batch_size=8,
                  teacher_steps=6, student_steps=6, learning_rate=1e-3,
                  qa_seq_length=64, spam_seq_length=32, qa_steps=4,
                  spam_steps=4, finetune_learning_rate=1e-3,
                  calibration_samples=4, bench_threads="1", bench_runs=5,
                  questions=1,
                  slices={"pretraining_documents": 24, "spam_rows": (32, 24),
                          "qa_questions": (64, 16)}),
}

STAGES = {
    "data": ("slices", "data_train", "data_heldout"),
    "teacher": ("teacher",),
    "students": ("pkt", "scratch"),
    "evaluate": tuple(f"{m}_mlm" for m in MODELS),
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


def write_configs(scale, layout):
  """The teacher and student configs the runs use (with the overrides)."""
  from tfmodels.configs import load_config
  paths = {}
  for role, name in (("teacher", scale.teacher_config),
                     ("student", scale.student_config)):
    config = load_config(name).replace(**scale.config_overrides)
    text = json.dumps(dataclasses.asdict(config), indent=2) + "\n"
    paths[role] = layout.path("configs", f"{role}.json")
    if not os.path.exists(paths[role]) or open(paths[role]).read() != text:
      write_file(paths[role], text)
  return paths


def data_dirs(scale, layout):
  """(slice steps, pre-training text per split, task directory per task):
  the shipped files, or the tiny demo's slices of them."""
  steps, texts, by_name = data_sources(scale.slices,
                                       layout.path("data", "slices"))
  return steps, texts, {t: by_name[d] for t, _, d in TASKS}


def build_steps(scale, layout, phone=None):
  """The demo as pipeline steps, in priority order (the QA student first:
  the app, the conversions and the benchmark wait for it)."""
  configs = write_configs(scale, layout)
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
  train_data = layout.path("data", "train")
  train = ("--train_data", layout.shards("train"), "--batch_size",
           scale.batch_size, "--optimizer", "adamw", "--learning_rate",
           scale.learning_rate, "--checkpoint_every", 100,
           "--keep_checkpoints", 1, "--log_every", 10)  # resume needs one

  def pretraining(name, module, steps_, *args):
    step(name, python_module(module, *args, "--model_dir", layout.run(name),
                             "--train_steps", steps_, "--warmup_steps",
                             steps_ // 10, *train),
         layout.run(name), (train_data,) + (
             (layout.run("teacher"),) if "--teacher_dir" in args else ()))

  pretraining("teacher", "tfmodels.training.pretrain", scale.teacher_steps,
              "--config", configs["teacher"])
  pretraining("scratch", "tfmodels.training.pretrain", scale.student_steps,
              "--config", configs["student"])
  pretraining("pkt", "tfmodels.training.distill", scale.student_steps,
              "--teacher_dir", layout.run("teacher"), "--student_config",
              configs["student"], "--strategy", "pkt")

  def finetune(model, task):
    name = f"{model}_{task}"
    task_name, = [n for t, n, _ in TASKS if t == task]
    length = scale.qa_seq_length if task == "qa" else scale.spam_seq_length
    step(name, python_module(
        "tfmodels.training.finetune", "--task", task_name, "--data_dir",
        task_data[task], "--init_dir", layout.run(model), "--model_dir",
        layout.finetuned(name), "--vocab_file", VOCAB, "--max_seq_length",
        length, "--train_steps",
        scale.qa_steps if task == "qa" else scale.spam_steps, "--batch_size",
        scale.batch_size, "--learning_rate", scale.finetune_learning_rate,
        "--checkpoint_every", 1000, "--log_every", 10),
         layout.finetuned(name), (layout.run(model),) + data_inputs)

  def convert(name):
    task = name.split("_")[-1]
    step(f"convert_{name}", python_module(
        "converters.convert_tflite", "--model_dir", layout.finetuned(name),
        "--data_dir", task_data[task], "--output_dir", layout.tflite(name),
        "--name", name, "--modes", ",".join(DEMO_MODES),
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

  # The app's model first, then the other converted ones, then the rest.
  app_name, app_mode = APP_MODEL
  finetune("pkt", "qa")
  convert("pkt_qa")
  app_dir = layout.path("app_assets")
  step("app", python_module(
      "experiments.demo_app", "--model",
      layout.tflite_file(app_name, app_mode), "--vocab", VOCAB, "--qa_dir",
      task_data["qa"], "--questions", scale.questions, "--output_dir",
      app_dir), app_dir, (layout.tflite(app_name),) + data_inputs)
  finetune("pkt", "spam")
  convert("pkt_spam")
  finetune("teacher", "qa")
  convert("teacher_qa")
  for model in MODELS:
    evaluate(model)
  for model in MODELS:
    for task, _, _ in TASKS:
      if f"{model}_{task}" not in {s.name for s in steps}:
        finetune(model, task)
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
    with open(layout.plan) as f:
      old = json.load(f)
    if old.get("sizes") != record["sizes"]:
      raise DemoError(
          f"--output_dir {layout.out} holds a demo of another size "
          f"({old.get('scale')}); delete it or use another --output_dir")
  return record
