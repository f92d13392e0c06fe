"""The demo's report: what was trained, how well, how small, how fast.

    python -m experiments.demo.report --output_dir demo_output

Draws what `experiments.demo.results.collect` read from --output_dir as PNG figures
and tables: OUTPUT_DIR/REPORT.md, with the figures and summary.json (every
number in the report) under OUTPUT_DIR/report/. Missing pieces show as
n/a, so a half-finished demo still reports.
"""

import dataclasses
import json
import os
import sys

from absl import app

from android_bench.device_info import int8_expectation
from android_bench.plotting import pyplot, save_figure
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.staging import write_file
from experiments.ship.figures import app_latency_text, arm64_lines
from experiments.common.paths import REPO
from tfmodels.markdown import number, table
from experiments.demo.results import LABELS, TASKS, collect
from experiments.demo.steps import (BUDGET, DEMO_MODES, MODELS, STUDENT,
                                    STUDENT_RECORD, size_key, task_step)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportOptions:
  output_dir: str = option("demo_output", "The demo's output.")


define_flags(ReportOptions)


COLORS = {"teacher": "tab:blue", STUDENT: "tab:orange"}
SHORT = {"teacher": "MiniLM\nteacher", STUDENT: f"{STUDENT}\nstudent"}
# Ops of LayerNorm (mean, variance, 1/sqrt) and gelu: no int8 kernels.
LAYER_NORM_OPS = ("MEAN", "SQUARED_DIFFERENCE", "RSQRT", "GELU")


# --------------------------------------------------------------- figures
def _smooth(values, window):
  out, total = [], 0.0
  for i, v in enumerate(values):
    total += v
    if i >= window:
      total -= values[i - window]
    out.append(total / min(i + 1, window))
  return out


def _curve(ax, steps, values, label, color, style="-"):
  window = max(1, len(values) // 25)
  ax.plot(steps, values, color=color, alpha=0.2, linewidth=0.8)
  ax.plot(steps, _smooth(values, window), style, color=color, label=label)


def plot_losses(summary, path):
  """Fine-tuning loss of the teacher and the student (whose loss
  holds the soft-target term of task-stage distillation), per task."""
  plt = pyplot()
  models = summary["models"]
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for ax, task in zip(axes, TASKS):
    for m in MODELS:
      curve = models[m]["finetune_loss"].get(task) or []
      if curve:
        _curve(ax, [s for s, _ in curve], [v for _, v in curve], LABELS[m],
               COLORS[m])
    ax.set_title(f"{TASKS[task][0]}: fine-tuning loss")
    ax.set_xlabel("step")
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize=7)
  return save_figure(fig, path)


def _bars(ax, labels, values, colors, fmt="{:.1f}"):
  xs = range(len(labels))
  ax.bar(xs, [v or 0 for v in values], color=colors)
  for x, v in zip(xs, values):
    ax.text(x, v or 0, "n/a" if v is None else fmt.format(v), ha="center",
            va="bottom", fontsize=8)
  ax.set_xticks(list(xs))
  ax.set_xticklabels(labels, fontsize=8)


def plot_tasks(summary, path):
  plt = pyplot()
  models = summary["models"]
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  labels = [SHORT[m] for m in MODELS]
  colors = [COLORS[m] for m in MODELS]
  for ax, task in zip(axes, ("qa", "spam")):
    name, key, metric = TASKS[task]
    scale = 1 if task == "qa" else 100
    values = [(models[m]["tasks"].get(task) or {}).get(key) for m in MODELS]
    _bars(ax, labels, [v if v is None else v * scale for v in values],
          colors)
    ax.set_title(f"{name}: dev {metric} (%)")
  return save_figure(fig, path)


def plot_quantization(summary, path):
  plt = pyplot()
  conversions = summary["conversions"]
  if not conversions:
    return None
  fig, ax = plt.subplots(figsize=(2.4 * len(conversions) + 2, 3.8))
  names = list(conversions)
  series = [("Keras", lambda c: c["keras_metric"], "tab:green")] + [
      (mode, lambda c, mode=mode: c["modes"].get(mode, {}).get("metric"),
       color) for mode, color in zip(DEMO_MODES, ("tab:blue", "tab:red"))]
  width = 0.8 / len(series)
  for i, (label, get, color) in enumerate(series):
    xs = [x + (i - 1) * width for x in range(len(names))]
    values = [get(conversions[n]) for n in names]
    ax.bar(xs, [v or 0 for v in values], width, label=label, color=color)
    for x, v in zip(xs, values):
      ax.text(x, v or 0, "n/a" if v is None else f"{v:.1f}", ha="center",
              va="bottom", fontsize=7)
  ax.set_xticks(range(len(names)))
  ax.set_xticklabels([f"{n}\n({conversions[n]['metric_name']})"
                      for n in names], fontsize=8)
  ax.set_title("task metric: Keras vs TFLite float32 vs full int8")
  ax.legend(fontsize=8)
  return save_figure(fig, path)


def plot_sizes(summary, path):
  plt = pyplot()
  models, conversions = summary["models"], summary["conversions"]
  fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
  ax = axes[0]
  present = [m for m in MODELS if models[m]["params"]]
  emb = [models[m]["params"]["params_embedding"] / 1e6 for m in present]
  blocks = [models[m]["params"]["params_blocks"] / 1e6 for m in present]
  xs = range(len(present))
  ax.bar(xs, emb, label="embeddings", color="tab:olive")
  ax.bar(xs, blocks, bottom=emb, label="transformer blocks",
         color="tab:purple")
  for x, e, b in zip(xs, emb, blocks):
    ax.text(x, e + b, f"{e + b:.2f}M", ha="center", va="bottom", fontsize=8)
  ax.set_xticks(list(xs))
  ax.set_xticklabels([SHORT[m] for m in present], fontsize=8)
  ax.set_title("encoder parameters (millions)")
  ax.legend(fontsize=8)
  ax = axes[1]
  names = list(conversions)
  width = 0.4
  for i, mode in enumerate(DEMO_MODES):
    values = [conversions[n]["modes"].get(mode, {}).get("size_mb")
              for n in names]
    xs = [x + (i - 0.5) * width for x in range(len(names))]
    ax.bar(xs, [v or 0 for v in values], width, label=mode)
    for x, v in zip(xs, values):
      ax.text(x, v or 0, "n/a" if v is None else f"{v:.2f}", ha="center",
              va="bottom", fontsize=7)
  ax.set_xticks(range(len(names)))
  ax.set_xticklabels(names, fontsize=8)
  ax.set_title(".tflite file size (MB, with vocab metadata)")
  ax.legend(fontsize=8)
  return save_figure(fig, path)


def plot_lengths(bench_runs, path):
  """The QA files' latency against the length they run at."""
  if not bench_runs:
    return None
  from android_bench.report import plot_lengths as draw
  return path if draw(bench_runs, path) else None


# --------------------------------------------------------------- Markdown
def _fmt(value, digits=1, scale=1.0):
  return number(value, digits, "n/a", scale)


def _general(value):
  """Four significant digits (losses span many magnitudes), or n/a."""
  return "n/a" if value is None else f"{value:.4g}"


def _table(header, rows):
  return "\n".join(table(header, rows)) + "\n"


def _latency_ms(summary, model, mode):
  """The median ms of a model's mode where ship timed it (one target, one
  thread count), or None where it was not timed."""
  for r in summary["latency"]:
    if (r["model"], r["mode"]) == (model, mode) and (
        r["latency_ms"] is not None):
      return r["latency_ms"]
  return None


def _where(summary):
  """Where and with how many threads the files were timed."""
  row = next(iter(summary["latency"]), None)
  if not row:
    return "not timed yet"
  where = row["target"] + (f" ({row['device']})" if row["device"] else "")
  return f"{where}, {row['threads']} thread(s)"


def _int8_isa(summary):
  """The int8 instructions of the CPU that timed the files."""
  return next((r.get("int8_isa") for r in summary["latency"]
               if r.get("int8_isa")), None)


def highlights(summary):
  """A few sentences with the numbers a newcomer looks for first."""
  conv, lines = summary["conversions"], []
  student_qa, teacher_qa = task_step(STUDENT, "qa"), task_step("teacher",
                                                               "qa")
  student, teacher = conv.get(student_qa), conv.get(teacher_qa)
  if student and all(m in student["modes"] for m in DEMO_MODES):
    f, q = (student["modes"][m] for m in DEMO_MODES)
    lines.append(
        f"The {STUDENT} student's QA model is {f['size_mb']:.1f} MB in "
        f"float32 and {q['size_mb']:.1f} MB in full int8 "
        f"({f['size_mb'] / q['size_mb']:.1f}x smaller), F1 "
        f"{_fmt(f['metric'])} -> {_fmt(q['metric'])}" + (
            f"; the teacher's is {teacher['modes']['float32']['size_mb']:.1f}"
            " MB in float32." if teacher and "float32" in teacher["modes"]
            else "."))
  times = {(m, mode): _latency_ms(summary, m, mode)
           for m in (student_qa, teacher_qa) for mode in DEMO_MODES}
  if all(times.values()):
    lines.append(
        f"Latency ({_where(summary)}, XNNPACK): student "
        f"{times[student_qa, 'float32']:.2f} ms float32 / "
        f"{times[student_qa, 'int8']:.2f} ms int8, teacher "
        f"{times[teacher_qa, 'float32']:.2f} ms / "
        f"{times[teacher_qa, 'int8']:.2f} ms.")
    lines.append(
        f"int8 takes {times[student_qa, 'int8'] / times[student_qa, 'float32']:.2f}x "
        f"float32's time for the student, "
        f"{times[teacher_qa, 'int8'] / times[teacher_qa, 'float32']:.2f}x for "
        f"the teacher: {int8_expectation(_int8_isa(summary))}.")
  if student and teacher and "int8" in student["modes"] and (
      "int8" in teacher["modes"]):
    s8, t8 = student["modes"]["int8"], teacher["modes"]["int8"]
    layer_norm = {}
    for ops in (t8["float_op_types"], t8["not_delegated"]):
      layer_norm.update({k: v for k, v in ops.items()
                         if k in LAYER_NORM_OPS})
    lines.append(
        f"In full int8 the NoNorm / relu student keeps {s8['float_ops']} of "
        f"{s8['ops']} ops in float and XNNPACK takes {s8['xnnpack']} of its "
        f"nodes; the LayerNorm / gelu teacher keeps {t8['float_ops']} of "
        f"{t8['ops']} in float, XNNPACK takes {t8['xnnpack']}" + (
            ". LayerNorm's mean / variance / 1/sqrt and gelu are what stays "
            "out of XNNPACK's int8 path (" + ", ".join(
                f"{k} {v}" for k, v in layer_norm.items()) + "); NoNorm "
            "(element-wise scale and shift) and relu have no such ops."
            if layer_norm else "."))
  app_ = summary["app"]
  if app_ and app_["answers"]:
    right = sum(a["exact_match"] for a in app_["answers"])
    lines.append(f"The app's Python twin answered {right:.0f} of "
                 f"{len(app_['answers'])} held-out questions exactly "
                 "(see the app section).")
    latency = app_.get("latency") or {}
    if latency.get("fixed_median_ms"):
      lines.append(
          f"Run as the app runs them (each window at the smallest multiple "
          f"of 32 tokens that holds it), those questions take "
          f"{latency['median_ms']:.2f} ms of int8 model time at the median, "
          f"{100 * latency['share']:.0f}% of the "
          f"{latency['fixed_median_ms']:.2f} ms they take at "
          f"L = {latency['length']} ({latency['threads']} thread(s)).")
  return lines


def markdown(summary, figures, out):
  """REPORT.md: its sections in reading order, every number from
  `summary`; `figures` (key -> PNG path or None) are linked relative to
  `out`."""
  show = lambda key, alt: _figure(figures, out, key, alt)
  doc = (_introduction(summary) + _headline(summary) + _carving(summary) +
         _training(show) + _conversion(summary, show) +
         _latency(summary, show) + _sizes(show) + _app(summary) +
         _arm64(summary) + _steps(summary))
  return "\n".join(doc)


def _figure(figures, out, key, alt):
  """The figure as a Markdown image, or a note that it had no data."""
  if not figures.get(key):
    return f"({alt}: no data)\n"
  return f"![{alt}]({os.path.relpath(figures[key], out)})\n"


def _introduction(summary):
  """The title, and what was run at which sizes, in how long."""
  plan = summary["plan"]
  sizes = plan.get("sizes") or {}
  timed = [s for s in summary["steps"] if s["seconds"] is not None]
  total = sum(s["seconds"] for s in timed)
  span = (max(s["finished"] for s in timed) -
          min(s["finished"] - s["seconds"] for s in timed)) if timed else 0
  qat = (f", {sizes['qat_steps']} steps of quantization-aware training "
         "before its int8 conversion" if sizes.get("qat_steps") else "")
  doc = [f"# Demo report: MiniLM teacher -> {STUDENT} student -> int8 TFLite "
         "-> app\n",
         f"Scale **{plan.get('scale')}**: teacher `{sizes.get('teacher')}` "
         "(pretrained, fine-tuned here: "
         f"{sizes.get('teacher_qa_steps')} steps on QA at "
         f"L={sizes.get('qa_max_seq_length')}, "
         f"{sizes.get('teacher_spam_steps')}"
         f" on spam at L={sizes.get('spam_max_seq_length')}); the student "
         "carved out of each fine-tuned teacher by `experiments.ship "
         f"{' '.join(map(str, plan.get(STUDENT_RECORD) or []))} "
         f"{' '.join(map(str, BUDGET))}` (NoNorm + relu, "
         f"{sizes.get('calibration_examples')} calibration examples, "
         f"{sizes.get('recover_steps')} recovery steps), then distilled from "
         "that teacher's soft targets and the labels for a fixed, short run "
         f"({sizes.get(size_key('student_qa_steps'))} steps on QA, "
         f"{sizes.get(size_key('student_spam_steps'))} on spam; ship's own "
         "recipe also distils every layer and trains to the student's "
         f"plateau){qat}; batch "
         f"{sizes.get('finetune_batch_size')}; the QA models are exported at "
         f"L={sizes.get('qa_export_max_seq_length')}, the app's length. "
         "Each task is one ship run (`qa/`, `spam/`: each has its own "
         "REPORT.md). From the first step's start to "
         f"the last one's end: {span / 60:.1f} min ({total / 60:.1f} min of "
         "steps, some side by side; the table at the end has each).\n"]
  doc.append(
      "The demo's teachers are short fine-tunings, kept short so the demo "
      "ends in minutes: they stop well before more training stops helping "
      "(MiniLM fine-tuned on the same QA data until a doubling of its steps "
      "gains less than half a point reaches dev F1 81.9 after 3,200 steps: "
      "docs/results.md, \"A teacher at its best\"). Each student here is "
      "measured against the teacher it was carved from, not against that "
      "one.\n")
  if plan.get("scale") == "tiny":
    doc.append("**Tiny run** (the test's setting): the numbers measure "
               "nothing; `make demo` gives the real ones.\n")
  return doc


def _headline(summary):
  """The verdict, the models side by side, and the highlights."""
  v = summary["verdict"]
  doc = ["## Headline\n",
         f"**Does the {STUDENT} student keep "
         f"{v['target_qa_f1_share']:.0%} of the teacher's QA F1?** "
         f"{v['text']}\n"]
  doc += [f"- {line}" for line in v.get("lines", [])]
  doc += ["", _models_table(summary["models"]),
          f"\n**Teacher vs {STUDENT} student.**\n",
          _teacher_table(summary["teacher_vs_student"]), ""]
  doc += [f"- {line}" for line in highlights(summary)]
  doc.append("")
  return doc


def _models_table(models):
  """Each model's size, form and task scores."""
  rows = []
  for m in MODELS:
    r = models[m]
    p = r["params"]
    qa = r["tasks"].get("qa") or {}
    spam = r["tasks"].get("spam") or {}
    rows.append([
        r["label"], p and f"{p['params_encoder'] / 1e6:.2f}M",
        p and f"{p['heads']} heads, FFN {p['intermediate_size']}",
        p and f"{p['normalization']}, {p['act']}",
        _fmt(qa.get("f1")), _fmt(qa.get("exact_match")),
        _fmt(spam.get("accuracy"), scale=100)])
  return _table(["model", "encoder params", "per layer",
                 "norm, activation", "QA F1", "QA EM", "spam acc %"], rows)


def _carving(summary):
  """What compress kept of the teacher, per task."""
  models = summary["models"]
  return ["## Carving\n",
          _carving_table(models[STUDENT].get("carving") or {},
                         models["teacher"]["params"]),
          "\nFrom `*/runs/student/model/carving.json` (`compress`: "
          "importance scores, what each layer kept, factor errors); the "
          "recovery loss is the feature-map + attention-transfer "
          "distance to the teacher on the calibration examples.\n"]


def _training(show):
  """The fine-tuning curves and the task metrics."""
  return ["## Training\n", show("losses", "loss curves"),
          "Fine-tuning loss (faint: every step; line: moving average). "
          f"The {STUDENT} student's loss holds the soft-target term of "
          "task-stage distillation as well as the labels' loss.\n",
          show("tasks", "task metrics")]


def _conversion(summary, show):
  """Each converted model per mode: size, metric, drop, ops left float."""
  rows = []
  for name, c in summary["conversions"].items():
    for mode in DEMO_MODES:
      r = c["modes"].get(mode)
      if not r:
        continue
      rows.append([name, mode, f"{r['size_mb']:.2f}",
                   f"{c['metric_name']} {_fmt(c['keras_metric'])}",
                   _fmt(r["metric"]), _fmt(r["drop"], 2),
                   f"{r['max_abs_diff']:.2e}" if r["max_abs_diff"]
                   is not None else "n/a",
                   f"{r['float_ops']} / {r['ops']}", r["xnnpack"] or "n/a"])
  return ["## Conversion and validation (Keras vs TFLite, float32 vs "
          "int8)\n", show("quantization", "float vs int8"),
          _table(["model", "mode", "MB", "Keras", "TFLite", "drop",
                  "max abs diff", "ops still float", "XNNPACK nodes"], rows),
          "\nThe full reports (ops, contract, model cards) are "
          "`*/tflite/*/*_report.md`.\n"]


def _latency(summary, show):
  """Every benchmark cell; why there is no phone, if there is none."""
  plan = summary["plan"]
  rows = [[r["target"] + (f" ({r['device']})" if r["device"] else ""),
           r["model"], r["mode"], r["threads"], r["delegate"], r["length"],
           _fmt(r["latency_ms"], 3),
           "n/a" if r["low_ms"] is None else
           f"{r['low_ms']:.3f}..{r['high_ms']:.3f}", r["status"]]
          for r in summary["latency"]]
  doc = ["## Latency\n",
         "Every file at the app's length (XNNPACK; the files take any "
         "length, this one by default):\n",
         _table(["where", "model", "mode", "threads", "delegate", "length",
                 "median ms", "p5..p95 ms", "status"], rows)]
  doc += _length_curve(summary, show) + _questions_latency(summary)
  if not plan.get("phone"):
    doc.append(f"\nNo phone benchmark: {plan.get('no_phone')}. With a phone "
               "in `adb devices`, run the demo into another `--output_dir` "
               "with `--benchmark_binary "
               "PATH/TO/android_aarch64_benchmark_model`.\n")
  return doc


def _length_curve(summary, show):
  """The QA files' median ms at each length ship timed them at."""
  rows = [r for r in summary.get("latency_by_length") or ()
          if r["model"].endswith("_qa") and r["latency_ms"] is not None]
  lengths = sorted({r["length"] for r in rows})
  if len(lengths) < 2:
    return []
  files = list(dict.fromkeys((r["model"], r["mode"]) for r in rows))
  ms = {(r["model"], r["mode"], r["length"]): r["latency_ms"] for r in rows}
  return ["\n### Latency against length\n",
          f"The QA files timed by `android_bench run --lengths "
          f"{','.join(map(str, lengths))}` ({_where(summary)}): what a "
          "question costs at the length it runs at.\n",
          show("lengths", "latency against sequence length"),
          _table(["model", "mode"] + [f"L = {n}" for n in lengths],
                 [[m, mode] + [_fmt(ms.get((m, mode, n)), 2)
                               for n in lengths] for m, mode in files])]


def _questions_latency(summary):
  """The demo's questions as the app runs them (ship's app step)."""
  text = app_latency_text(summary["app"] or {})
  return ["\n### The demo's questions as the app runs them\n",
          "The app's twin on the shipped int8 QA file and the demo's "
          "questions. " + text + "\n"] if text else []


def _arm64(summary):
  """The shipped QA files on emulated arm64 (ship's arm64 step)."""
  lines = arm64_lines(summary.get("arm64"))
  return ["### On arm64\n", "\n".join(lines)] if lines else []


def _sizes(show):
  return ["## Model sizes\n", show("sizes", "model sizes")]


def _app(summary):
  """Where the app's files are, and the twin's (and the Task Library's)
  answers."""
  app_, spam = summary["app"], summary.get("spam_app")
  doc = ["## The Android app\n",
         f"`qa/app_assets/qa_model.tflite` (the {STUDENT} student's int8 "
         "QA model) and `qa/app_assets/vocab.txt` are where the app's "
         "Gradle build takes them (`-PqaModel`, `-PqaVocab`); "
         "`qa/app_assets/README.md` has the commands. The app's Python "
         "twin (`python -m android_bench.qa_app`) answered:\n"]
  if spam:
    doc.append(f"The spam student's int8 file (`spam/app_assets/"
               f"classifier_model.tflite`) went to the classifier's Python "
               f"twin and the Task Library's `BertNLClassifier`: "
               f"{_agreement(spam)}.\n")
  if not app_:
    return doc
  library = app_.get("task_library")
  if library:
    doc.append(f"The same questions went to the TFLite Task Library's "
               f"`BertQuestionAnswerer` (tflite-support, the API the "
               f"Android app calls) with `qa/app_assets/qa_model.tflite`: it "
               f"gave the twin's answer on {library['agree']} of "
               f"{len(app_['answers'])}.\n")
  else:
    doc.append("The Task Library's BertQuestionAnswerer was not asked "
               "(no .venv-task: `make setup` makes it).\n")
  rows = [[a["question"], a["passage"].replace("|", "/"),
           a["answers"][0], a["answer"] or "(no answer)",
           _fmt(100 * a["f1"], 0),
           a.get("task_library_answer", "n/a") or "(no answer)",
           a["timing"]]
          for a in app_["answers"]]
  doc.append(_table(["question", "passage", "gold", "twin's answer", "F1",
                     "Task Library's answer", "windows, time"], rows))
  return doc


def _agreement(check):
  """classifier_app's summary in words."""
  if check.get("agree") is None:
    return (f"the twin labelled {check.get('texts')} texts; the Task "
            "Library was not asked (no .venv-task)")
  return (f"the same label on {check['agree']} of {check.get('texts')} "
          "texts")


def _steps(summary):
  """Each step's time, peak memory and command."""
  rows = [[s["stage"], s["name"], _fmt(s["seconds"], 0),
           _fmt(s.get("peak_memory_mb"), 0), f"`{_short(s['command'])}`"]
          for s in summary["steps"]]
  return ["## Steps\n",
          _table(["stage", "step", "seconds", "peak MB", "command"], rows),
          "\nPeak MB: the step's peak resident memory when its `.done` "
          "marker records one (`peak_rss_mb=N`), n/a otherwise.\n",
          "\nEvery number above is in `report/summary.json`. Re-run "
          "a step by deleting its output directory (the steps that "
          "read it follow) or with `--force STEP` (ship's step names; "
          "both tasks' runs).\n"]


def _teacher_table(rows):
  """Teacher and student side by side, with the student's share."""
  labels = {"qa_f1": ("QA F1 (dev, Keras)", 1, 1),
            "qa_em": ("QA EM (dev, Keras)", 1, 1),
            "spam_accuracy": ("spam accuracy % (dev)", 1, 100),
            "encoder_params": ("encoder parameters (M)", 2, 1e-6),
            "qa_f1_int8": ("QA F1, int8 TFLite", 1, 1),
            "int8_size_mb": ("int8 QA model (MB)", 1, 1),
            "int8_ms": ("int8 QA latency (ms)", 2, 1),
            "peak_memory_mb": ("peak memory of its steps (MB)", 0, 1)}
  table = []
  for key, (label, digits, scale) in labels.items():
    r = rows[key]
    table.append([label, _fmt(r["teacher"], digits, scale),
                  _fmt(r["student"], digits, scale),
                  _fmt(r["student_share"], 0, 100) + (
                      "%" if r["student_share"] is not None else "")])
  return _table(["", "teacher", f"{STUDENT} student", "student / teacher"],
                table)


def _carving_table(carving, teacher_params):
  """What compress kept, per task."""
  teacher_params = teacher_params or {}
  rows = []
  for task, facts in carving.items():
    if not facts:
      rows.append([TASKS[task][0]] + ["n/a"] * 6)
      continue
    recovery = facts.get("recovery") or {}
    ranks = facts.get("low_rank_ranks") or {}
    rows.append([
        TASKS[task][0],
        f"{facts.get('heads')} of {teacher_params.get('heads', 'n/a')}",
        f"{facts.get('intermediate_size')} of "
        f"{teacher_params.get('intermediate_size', 'n/a')}",
        ", ".join(f"{k} {v}" for k, v in ranks.items()) or "none",
        _fmt(facts.get("params_share"), 1, 100) + "%",
        f"{_general(recovery.get('loss_before'))} -> "
        f"{_general(recovery.get('loss_after'))}" if recovery else "n/a",
        _fmt(facts.get("calibration_examples"), 0)])
  return _table(["task", "heads kept", "FFN width", "low rank",
                 "encoder params (share of teacher's)",
                 "recovery loss before -> after", "calibration examples"],
                rows)


def _short(command):
  """The command with this interpreter and the repository path dropped."""
  return command.replace(sys.executable, "python").replace(REPO + "/", "")


def write_report(out):
  """Writes the figures, summary.json and REPORT.md; returns REPORT.md."""
  summary, bench_runs = collect(out)
  directory = os.path.join(out, "report")
  os.makedirs(directory, exist_ok=True)
  path = lambda name: os.path.join(directory, name)
  figures = {
      "losses": plot_losses(summary, path("loss_curves.png")),
      "tasks": plot_tasks(summary, path("task_metrics.png")),
      "quantization": plot_quantization(summary, path("float_vs_int8.png")),
      "lengths": plot_lengths(bench_runs, path("lengths.png")),
      "sizes": plot_sizes(summary, path("model_sizes.png"))}
  summary["figures"] = {k: v and os.path.relpath(v, out)
                        for k, v in figures.items()}
  write_file(path("summary.json"), json.dumps(summary, indent=1) + "\n")
  report = os.path.join(out, "REPORT.md")
  write_file(report, markdown(summary, figures, out))
  return report


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  out = os.path.abspath(from_flags(ReportOptions).output_dir)
  if not os.path.exists(os.path.join(out, "plan.json")):
    sys.exit(f"error: --output_dir {out}: no demo there (no plan.json)")
  print(f"report: {write_report(out)}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
