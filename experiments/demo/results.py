"""What a demo measured, read back from its output directory, and the
verdict on its student.

    summary, bench_runs = collect("demo_output")
    summary["verdict"]["text"]

`collect` reads the report/summary.json of the demo's two ship runs
(OUTPUT_DIR/qa and OUTPUT_DIR/spam: each ship run's whole record, see
`experiments.ship.report`) into one JSON-able dict, the models named as
the demo names them (teacher_qa, carved_spam); a run whose report is not
written yet gives None, so a half-finished demo still reports.
`experiments.demo.report` draws it.
"""

import math

from experiments.demo.steps import (MODELS, STUDENT, STUDENT_RECORD, Layout,
                                    size_key, task_step)
from experiments.common.result_files import read_json, tsv_rows

LABELS = {"teacher": "MiniLM teacher (all-MiniLM-L6-v2, fine-tuned)",
          STUDENT: f"{STUDENT} student (heads and FFN neurons cut, "
                   "NoNorm + relu, task KD)"}
TASKS = {"qa": ("QA", "f1", "F1"), "spam": ("spam", "accuracy", "accuracy")}
# The demo's target: the shipped student keeps this share of the teacher's
# QA F1.
QA_F1_TARGET = 0.9
# ship's steps of each model's chain (the teacher's import and
# fine-tuning; the student's carving and task stage), for its peak memory.
CHAIN_STEPS = {"teacher": ("teacher", "teacher_finetune"),
               STUDENT: ("carve", "student")}
# ship's model names -> the demo's, per task.
SHIP_NAMES = {"teacher": "teacher", "student": STUDENT,
              "student_qat": f"{STUDENT}_qat"}


def demo_name(ship_name, task):
  """A ship run's model (student) as the demo names it (carved_qa)."""
  return task_step(SHIP_NAMES.get(ship_name, ship_name), task)


def shipped(out):
  """{task: the task's ship run's report/summary.json, or {} before its
  report step ran}."""
  layout = Layout(out)
  return {task: read_json(layout.ship(task).summary) or {} for task in TASKS}


def collect(out):
  """Everything the report shows, as one JSON-able dict, and the QA
  run's android_bench runs (for the latency-against-length figure)."""
  layout = Layout(out)
  plan = read_json(layout.plan) or {}
  runs = shipped(out)
  models = {}
  for m in MODELS:
    side = "teacher" if m == "teacher" else "student"
    qa = runs["qa"].get(side) or {}
    entry = {"label": LABELS[m], "params": qa.get("config"),
             "tasks": {t: (runs[t].get(side) or {}).get("dev")
                       for t in TASKS},
             "finetune_loss": {t: (runs[t].get(side) or {}).get("loss", [])
                               for t in TASKS}}
    if m == STUDENT:
      entry["carving"] = {t: runs[t].get("carving") for t in TASKS}
    models[m] = entry
  conversions, by_length, steps = {}, [], []
  for task, summary in runs.items():
    conversions.update({demo_name(n, task): c for n, c in
                        (summary.get("conversions") or {}).items()})
    by_length += [dict(r, model=demo_name(r["model"], task))
                  for r in summary.get("latency_rows") or ()]
    steps += [dict(s, stage=task) for s in summary.get("steps") or ()]
  from android_bench import results
  bench_runs = [results.load_run(p)
                for p in runs["qa"].get("latency_runs") or ()]
  spam_app = runs["spam"].get("app_answers") or {}
  summary = {"plan": {k: plan.get(k) for k in ("scale", "sizes",
                                               STUDENT_RECORD, "phone",
                                               "no_phone", "task_data")},
             "steps": steps, "models": models, "conversions": conversions,
             "latency": at_app_length(by_length),
             "latency_by_length": by_length,
             "app": runs["qa"].get("app_answers"),
             "arm64": runs["qa"].get("arm64"),
             "spam_app": spam_app.get("summary")}
  spam = (plan.get("task_data") or {}).get("spam")
  summary["plan"]["spam_dev_rows"] = tsv_rows(spam, "dev") if spam else None
  summary["verdict"] = verdict(summary)
  summary["teacher_vs_student"] = teacher_vs_student(summary)
  return summary, bench_runs


def at_app_length(rows):
  """The latency rows at each file's own length (the app's: ship times
  the dynamic-length files at several, the longest being the default)."""
  longest = {}
  for r in rows:
    key = (r["target"], r["model"], r["mode"], r["threads"], r["delegate"])
    longest[key] = max(longest.get(key, 0), r["length"] or 0)
  return [r for r in rows if (r["length"] or 0) == longest[
      (r["target"], r["model"], r["mode"], r["threads"], r["delegate"])]]


# ------------------------------------------------------------ the verdict
def _task(summary, model, task, key):
  return ((summary["models"].get(model) or {}).get("tasks", {}).get(task)
          or {}).get(key)


def _tflite_metric(summary, name, mode):
  return (((summary["conversions"].get(name) or {}).get("modes") or {})
          .get(mode) or {}).get("metric")


def verdict(summary):
  """Does the shipped student keep at least QA_F1_TARGET of the
  teacher's QA F1 (dev, both fine-tuned models scored the same way)?

  Also stated: the spam accuracy gap (teacher minus student, points, with
  the 95% sampling interval of a difference of two proportions on the dev
  rows) and what int8 costs the shipped QA model (TFLite float32 F1 minus
  int8 F1 at the app's length, and the int8 file's share of the teacher's
  F1). Entries not measured yet are None.
  """
  teacher_f1 = _task(summary, "teacher", "qa", "f1")
  student_f1 = _task(summary, STUDENT, "qa", "f1")
  share = (student_f1 / teacher_f1 if teacher_f1 and student_f1 is not None
           else None)
  keeps = None if share is None else share >= QA_F1_TARGET
  teacher_acc = _task(summary, "teacher", "spam", "accuracy")
  student_acc = _task(summary, STUDENT, "spam", "accuracy")
  gap = noise = None
  if teacher_acc is not None and student_acc is not None:
    gap = 100 * (teacher_acc - student_acc)
    n = summary["plan"].get("spam_dev_rows")
    p = max(1e-3, min(1 - 1e-3, (teacher_acc + student_acc) / 2))
    noise = 100 * 1.96 * math.sqrt(2 * p * (1 - p) / n) if n else None
  student_qa = task_step(STUDENT, "qa")
  float_f1 = _tflite_metric(summary, student_qa, "float32")
  int8_f1 = _tflite_metric(summary, student_qa, "int8")
  int8_drop = (float_f1 - int8_f1 if None not in (float_f1, int8_f1)
               else None)
  int8_share = (int8_f1 / teacher_f1 if teacher_f1 and int8_f1 is not None
                else None)
  target = f"{QA_F1_TARGET:.0%}"
  lines = []
  if share is not None:
    lines.append(f"QA F1 (dev): {STUDENT} student {student_f1:.1f} vs teacher "
                 f"{teacher_f1:.1f}: {share:.1%} of the teacher's (target "
                 f"{target})")
  if gap is not None:
    band = f", 95% noise ±{noise:.1f}" if noise is not None else ""
    outcome = ("" if noise is None else "; within noise" if abs(gap) <= noise
               else "; beyond noise")
    lines.append(f"spam accuracy (dev): {STUDENT} student "
                 f"{100 * student_acc:.1f}% vs teacher "
                 f"{100 * teacher_acc:.1f}% ({abs(gap):.1f} points "
                 f"{'below' if gap >= 0 else 'above'} the teacher{band}"
                 f"{outcome})")
  if int8_drop is not None:
    lines.append(
        f"int8 vs float32 (TFLite, QA F1 at the app's length): "
        f"{float_f1:.1f} -> {int8_f1:.1f} ({int8_drop:.1f} points lost)" + (
            f"; the shipped int8 model keeps {int8_share:.1%} of the "
            "teacher's F1" if int8_share is not None else ""))
  if keeps is None:
    text = f"The {STUDENT} student's QA F1 is not measured yet."
  elif keeps:
    text = (f"The {STUDENT} student keeps {share:.1%} of the teacher's QA F1: "
            f"the {target} target is met.")
  else:
    text = (f"The {STUDENT} student keeps {share:.1%} of the teacher's QA F1: "
            f"it misses the {target} target" + _why(summary) + ".")
  return {"target_qa_f1_share": QA_F1_TARGET,
          "qa_f1_teacher": teacher_f1, "qa_f1_student": student_f1,
          "qa_f1_share": share, "keeps_90_percent_qa_f1": keeps,
          "spam_accuracy_teacher": teacher_acc,
          "spam_accuracy_student": student_acc,
          "spam_accuracy_gap": gap, "spam_noise": noise,
          "qa_f1_float32": float_f1, "qa_f1_int8": int8_f1,
          "int8_f1_drop": int8_drop, "qa_f1_share_int8": int8_share,
          "lines": lines, "text": text}


def _why(summary):
  """The budget the student had, for a verdict that missed."""
  sizes = summary["plan"].get("sizes") or {}
  carving = ((summary["models"].get(STUDENT) or {}).get("carving")
             or {}).get("qa") or {}
  parts = []
  if carving.get("params_share") is not None:
    parts.append(f"{carving['params_share']:.0%} of the teacher's encoder "
                 "parameters")
  steps = sizes.get(size_key("student_qa_steps"))
  if steps is not None:
    parts.append(f"{sizes.get('recover_steps')} recovery and "
                 f"{steps} task-distillation steps")
  return (" with " + ", ".join(parts)) if parts else ""


def teacher_vs_student(summary):
  """The student's share of the teacher: QA F1 / EM, spam accuracy,
  encoder parameters, int8 file size, host int8 latency (1 thread) and the
  peak memory of each model's steps. Each entry is None until both sides
  are measured."""
  models, conv = summary["models"], summary["conversions"]

  def task(model, name, key):
    return _task(summary, model, name, key)

  def params(model):
    return (models[model]["params"] or {}).get("params_encoder")

  def int8(model, key):
    return ((conv.get(task_step(model, "qa")) or {}).get("modes", {})
            .get("int8") or {}).get(key)

  def latency(model):  # ship times one target at one thread count
    return next((r["latency_ms"] for r in summary["latency"]
                 if (r["model"], r["mode"]) == (task_step(model, "qa"),
                                                "int8")), None)

  def peak(model):
    peaks = [s.get("peak_memory_mb") for s in summary["steps"]
             if s["name"] in CHAIN_STEPS[model]]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None

  def pair(get, *args):
    return {"teacher": get("teacher", *args), "student": get(STUDENT, *args)}

  rows = {"qa_f1": pair(task, "qa", "f1"),
          "qa_em": pair(task, "qa", "exact_match"),
          "spam_accuracy": pair(task, "spam", "accuracy"),
          "encoder_params": pair(params),
          "qa_f1_int8": pair(int8, "metric"),
          "int8_size_mb": pair(int8, "size_mb"),
          "int8_ms": pair(latency),
          "peak_memory_mb": pair(peak)}
  for row in rows.values():
    t, s = row["teacher"], row["student"]
    row["student_share"] = s / t if t and s is not None else None
  return rows
