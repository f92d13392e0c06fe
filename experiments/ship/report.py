"""`ship`'s last step: REPORT.md and report/summary.json, teacher beside
student, from what the steps wrote.

    python -m experiments.ship.report --output_dir ship_output

Scripts read report/summary.json:
  metric                 "f1" (QA) or "accuracy" (classification)
  teacher, student       float (the Keras model on dev at the shipped
                         length), int8 (the int8 file on dev), params
                         (encoder parameters), int8_mb, latency_ms (at
                         max_seq_length), int8_latency_by_length ([[L, ms],
                         ...]: the dynamic-length int8 file at each length
                         timed), threads, max_seq_length; the student also
                         target
                         (where it was timed), budget (what it was asked to
                         meet), within_budget, split, qat, qat_needed (post-
                         training int8 lost more than QAT_DROP points);
                         both also dev (the fine-tuned run's own dev
                         results, at its training length), loss
                         ([[step, loss], ...] of its fine-tuning) and config
                         (parameter counts and shape)
  conversions            convert_tflite's report of each converted model
                         (teacher, student, student_qat): per mode metric,
                         size, largest difference from Keras
  latency_rows           every timed row (target, model, mode, threads,
                         length, ms, the CPU's int8 instructions);
                         latency_runs: the android_bench runs they come
                         from; int8_isa: the int8 instructions of the CPU
                         that timed them
  search                 the split search's table (candidate, params, int8
                         MB, measured ms, score, chosen)
  assets                 the shipped .tflite, its vocabulary, the check
                         through the app's twin and the Task Library
  app                    QA: `latency` (the questions' median model ms at
                         the lengths the twin picks and at the default,
                         their share, answers the same) and `dev` (F1 /
                         exact match through the twin both ways);
                         app_answers: the app check's answers.json whole
  arm64                  QA: the arm64 step's arm64.json (per file: same
                         answers, dev F1 host / arm64, max logit diff;
                         instructions per inference), or {"not_run": why}
  steps                  each step's seconds and peak memory
"""

import dataclasses
import json
import os
import sys
import time

from absl import app

from android_bench.device_info import int8_expectation
from experiments.ship.figures import app_latency_text, arm64_lines, fmt
from experiments.common.result_files import (arm64_result, config_params,
                                      conversion_summary,
                                      latency_rows, read_json, read_marker,
                                      read_scalars)
from experiments.ship.split_budget import millions
from experiments.ship.steps import Layout, needs_qat
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.markdown import table
from tfmodels.staging import write_file

# What the summary keeps of compress's carving.json.
CARVING_FACTS = ("heads", "intermediate_size", "low_rank_ranks",
                 "params_encoder", "teacher_params_encoder", "params_share",
                 "word_table_error", "calibration_examples", "substitution",
                 "recovery", "dev_teacher", "dev_carved", "dev_substituted",
                 "dev_recovered")
# finetune --task -> the metric the report compares (a key of the task's
# eval results, in points).
METRICS = {"squad": "f1"}
DEFAULT_METRIC = "accuracy"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportOptions:
  output_dir: str | None = option(None, "A ship output directory.",
                                  required=True)


define_flags(ReportOptions)


def _latency(rows, name, mode, threads, length):
  return next((r["latency_ms"] for r in rows
               if (r["model"], r["mode"], r["threads"], r["length"]) == (
                   name, mode, threads, length)
               and r["latency_ms"] is not None), None)


def _by_length(rows, name, mode, threads):
  """[[length, ms], ...] of one file over the lengths the latency step
  timed, shortest first."""
  return sorted([r["length"], r["latency_ms"]] for r in rows
                if (r["model"], r["mode"], r["threads"]) == (name, mode,
                                                             threads)
                and r["latency_ms"] is not None and r["length"])


def _model(layout, plan, name, model_dir, conversion, rows, int8_name=None):
  """One side of the comparison."""
  conversion = conversion or {}
  modes = conversion.get("modes") or {}
  int8_conversion = modes.get("int8") or {}
  params = config_params(os.path.join(model_dir, "config.json"),
                         plan["max_seq_length"]) or {}
  return {"float": conversion.get("keras_metric"),
          "float32_file": (modes.get("float32") or {}).get("metric"),
          "int8": int8_conversion.get("metric"),
          "params": params.get("params_encoder"),
          "int8_mb": int8_conversion.get("size_mb"),
          "float32_mb": (modes.get("float32") or {}).get("size_mb"),
          "latency_ms": _latency(rows, int8_name or name, "int8",
                                 plan["threads"], plan["max_seq_length"]),
          "float32_latency_ms": _latency(rows, name, "float32",
                                         plan["threads"],
                                         plan["max_seq_length"]),
          "int8_latency_by_length": _by_length(rows, int8_name or name,
                                               "int8", plan["threads"]),
          "threads": plan["threads"],
          "max_seq_length": plan["max_seq_length"],
          "shape": {k: params.get(k) for k in ("layers", "heads",
                                               "intermediate_size",
                                               "normalization", "act")},
          "config": params or None,
          "dev": read_json(os.path.join(model_dir, "eval_results.json")),
          "loss": read_scalars(os.path.join(model_dir, "summaries")).get(
              "loss", [])}


def collect(out):
  """Everything the report shows, as one JSON-able dict (None where a
  step has not written yet)."""
  layout = Layout(out)
  recorded = read_json(layout.plan) or {}
  plan = recorded.get("plan") or {}
  teacher_dir = (layout.path("finetune", "teacher")
                 if plan.get("teacher_finetune_steps") else
                 layout.imported())
  int8_name = recorded.get("shipped") or "student"
  int8_file = layout.tflite_file(int8_name, "int8")
  qat = int8_name == "student_qat"
  runs, rows = latency_rows(out)  # the run files, their rows
  conversions = {n: conversion_summary(r) for n in
                 ("teacher", "student", "student_qat")
                 if (r := read_json(layout.report_json(n)))}
  student = _model(layout, plan, "student", layout.student,
                   conversions.get("student"), rows, int8_name)
  if "student_qat" in conversions:  # QAT ran; its file ships if better
    student["post_training_int8"] = student["int8"]
    student["qat_int8"] = conversions["student_qat"]["modes"]["int8"][
        "metric"]
  if qat:
    student["int8"] = student["qat_int8"]
    student["int8_mb"] = conversions["student_qat"]["modes"]["int8"][
        "size_mb"]
  search = read_json(layout.split) or {}
  budget = {k: v for k, v in (plan.get("budget") or {}).items() if v}
  arm64_budget = _arm64_budget(search)
  # --target arm64 chooses on emulated arm64 and times on this host.
  timed_on = "host" if plan.get("target") == "arm64" else plan.get("target")
  student.update(target=timed_on, arm64_budget=arm64_budget, budget=budget,
                 qat=qat,
                 qat_needed=needs_qat(layout),
                 max_latency_ms=(search.get("budget") or {}).get(
                     "max_latency_ms"),
                 split=search.get("chosen"),
                 within_budget=_within(student, budget, search,
                                       arm64_budget),
                 plateau=read_json(os.path.join(layout.student,
                                                "plateau.json")))
  carving = read_json(os.path.join(layout.carved_model, "carving.json"))
  app_answers = read_json(os.path.join(layout.app, "answers.json"))
  metric = METRICS.get(plan.get("task"), DEFAULT_METRIC)
  steps = [dict(s, **read_marker(s["output"]))
           for s in recorded.get("steps", [])]
  return {
      "metric": metric, "task": plan.get("task"),
      "teacher": _model(layout, plan, "teacher", teacher_dir,
                        conversions.get("teacher"), rows),
      "student": student,
      "search": search, "carving": carving and {
          k: carving.get(k) for k in CARVING_FACTS},
      "conversions": conversions, "latency_rows": rows,
      "latency_runs": runs,
      "int8_isa": next((r["int8_isa"] for r in rows if r.get("int8_isa")),
                       None),
      "assets": {"tflite": os.path.join(layout.app, _app_file(plan)),
                 "source": int8_file, "check": _app_check(app_answers)},
      "app": app_answers and {k: app_answers.get(k) for k in (
          "latency", "dev")}, "app_answers": app_answers,
      "arm64": (arm64_result(layout.arm64) if plan.get("task") == "squad"
                else None),
      "plan": plan, "steps": steps,
      "seconds": sum(s["seconds"] or 0 for s in steps),
      "wall_seconds": (time.time() - recorded["began"]
                       if recorded.get("began") else None)}


def _int8_speed_lines(summary):
  """int8 / float32 time of both files, and what the CPU that timed them
  can show of int8 (its int8 instructions)."""
  t, s = summary["teacher"], summary["student"]
  ratios = [(who, side["latency_ms"] / side["float32_latency_ms"])
            for who, side in (("teacher", t), ("student", s))
            if side["latency_ms"] and side["float32_latency_ms"]]
  if not ratios:
    return []
  return [f"int8 / float32 time on the {s['target']}: " + ", ".join(
      f"{who} {r:.2f}x" for who, r in ratios) + "; " + int8_expectation(
          summary.get("int8_isa")) + ".", ""]


def _app_file(plan):
  return ("qa_model.tflite" if plan.get("task") == "squad"
          else "classifier_model.tflite")


def _arm64_budget(search):
  """A search on emulated arm64: the chosen split's and the teacher's
  instructions per inference, the bound, the emulated CPU (None for a
  search on the host or a phone)."""
  if search.get("target") != "arm64":
    return None
  chosen = next((r for r in search.get("rows") or [] if r.get("chosen")), {})
  return {"student": chosen.get("arm64_instructions"),
          "teacher": search.get("teacher_arm64_instructions"),
          "most": (search.get("budget") or {}).get("max_arm64_instructions"),
          "cpu": (search.get("device") or {}).get("model")}


def _arm64_budget_lines(arm64):
  """The sentence saying what a split chosen on emulated arm64 costs."""
  if not arm64 or not arm64.get("student") or not arm64.get("teacher"):
    return []
  bound = (f" (the budget: at most {millions(arm64['most'])})"
           if arm64.get("most") else "")
  return [f"Chosen on emulated arm64 ({arm64['cpu']}, the phone's XNNPACK "
          f"kernels): the split runs {millions(arm64['student'])} "
          "instructions per inference, "
          f"{arm64['student'] / arm64['teacher']:.0%} of the teacher's "
          f"{millions(arm64['teacher'])}{bound}. Emulation counts "
          "instructions, not milliseconds; the times below are this "
          "host's.", ""]


def _within(student, budget, search, arm64=None):
  """Does the shipped student meet each bound it was given (measured)?
  On emulated arm64 the bound is on the chosen split's instructions."""
  checks = {}
  if arm64 and arm64.get("most"):
    checks["arm64_instructions"] = (arm64["student"] is not None and
                                    arm64["student"] <= arm64["most"])
  bound = (search.get("budget") or {}).get("max_latency_ms") or budget.get(
      "target_latency_ms")
  if bound:
    checks["latency_ms"] = (student["latency_ms"] is not None and
                            student["latency_ms"] <= bound)
  if budget.get("target_mb"):
    checks["int8_mb"] = (student["int8_mb"] is not None and
                         student["int8_mb"] <= budget["target_mb"])
  if budget.get("target_params") and search.get("teacher_params"):
    checks["params"] = (student["params"] is not None and student["params"]
                        <= budget["target_params"] * search["teacher_params"])
  return checks


def _app_check(answers):
  """How many of the app check's answers the twin and the Task Library
  agree on (None where the Task Library was not asked)."""
  if not answers:
    return None
  if "summary" in answers:  # experiments.apps.classifier_app
    s = answers["summary"]
    return {"asked": s.get("texts"), "agree": s.get("agree"),
            "twin": s.get("twin_accuracy"),
            "task_library": s.get("task_library_accuracy")}
  asked = answers.get("answers") or []
  library = answers.get("task_library") or {}
  return {"asked": len(asked), "agree": library.get("agree"),
          "twin_f1": (sum(a["f1"] for a in asked) / len(asked) * 100
                      if asked else None)}


def _share(part, whole):
  return ("-" if part is None or not whole else f"{100 * part / whole:.0f}%")


def _length_lines(teacher, student):
  """The int8 files' latency against the length they run at (an app that
  sizes its inputs to the text pays the row of its token count)."""
  times = [dict(side["int8_latency_by_length"] or ())
           for side in (teacher, student)]
  lengths = sorted(set(times[0]) | set(times[1]))
  if len(lengths) < 2:
    return []
  return ["Int8 latency against the sequence length the files run at "
          f"(ms; {student['threads']} thread(s); the files take any length, "
          f"[1, {student['max_seq_length']}] by default):", "",
          *table(["length", *lengths],
                 ([name, *(fmt(t.get(n), 2) for n in lengths)]
                  for name, t in zip(("teacher", "student"), times))), ""]


def markdown(summary):
  """REPORT.md."""
  t, s, metric = summary["teacher"], summary["student"], summary["metric"]
  budget = ", ".join(f"{k} {v:g}" for k, v in s["budget"].items())
  if s.get("arm64_budget"):
    budget += " of the teacher's instructions on emulated arm64"
  met = s["within_budget"]
  verdict = ("meets" if met and all(met.values()) else
             "does NOT meet" if met else "was not checked against")
  split = s["split"] or {}
  lines = [
      f"# ship: {summary['task']} student of {summary['plan'].get('teacher')}",
      "",
      f"The student {verdict} its budget ({budget}"
      + (f": at most {s['max_latency_ms']:.2f} ms" if s.get("max_latency_ms")
         else "")
      + f"; timed on the {s['target']}, {s['threads']} thread(s), L = "
      f"{s['max_seq_length']})"
      f" and keeps {_share(s['float'], t['float'])} of the teacher's dev "
      f"{metric} in float, {_share(s['int8'], t['float'])} in int8, in "
      f"{_share(s['latency_ms'], t['latency_ms'])} of the teacher's int8 "
      "time.", "",
      *table(["", "teacher", "student"], [
          [f"dev {metric}, float (Keras)", fmt(t["float"]),
           fmt(s["float"])],
          [f"dev {metric}, int8 file", fmt(t["int8"]),
           fmt(s["int8"]) + (" (QAT)" if s["qat"] else "")],
          ["encoder parameters", fmt(t["params"], 0), fmt(s["params"], 0)],
          ["int8 file, MB", fmt(t["int8_mb"], 2), fmt(s["int8_mb"], 2)],
          ["int8 latency, ms", fmt(t["latency_ms"], 2),
           fmt(s["latency_ms"], 2)],
          ["float32 latency, ms", fmt(t["float32_latency_ms"], 2),
           fmt(s["float32_latency_ms"], 2)],
          ["shape", _shape(t["shape"]), _shape(s["shape"])]]), "",
      *_arm64_budget_lines(s.get("arm64_budget")),
      *_int8_speed_lines(summary),
      *_length_lines(t, s),
      *([f"Post-training int8 lost more than 1 point: quantization-aware "
         f"training gave {fmt(s['qat_int8'])} against "
         f"{fmt(s['post_training_int8'])}; the "
         f"{'QAT' if s['qat'] else 'post-training'} file ships.", ""]
        if "qat_int8" in s else []),
      *([f"Post-training int8 lost {s['float'] - s['int8']:.1f} points; "
         "quantization-aware training is off (--qat_steps 0).", ""]
        if s.get("qat_needed") and summary["plan"].get("qat_steps") == 0
        else []),
      f"Split: {split.get('heads')} heads, FFN "
      f"{split.get('intermediate_size')}, word table "
      f"{'rank ' + str(split['table_rank']) if split.get('table_rank') else 'whole'}"
      "; NoNorm + relu.", ""]
  rows = (summary["search"] or {}).get("rows") or []
  if rows:
    arm64 = s.get("arm64_budget") is not None
    lines += ["## The split search", "",
              "Each candidate timed as an int8 file of its shape (random "
              "weights: time depends on shape) on the "
              + ("host and counted on emulated arm64 (instructions per "
                 "inference, what the choice is made on)" if arm64
                 else "target")
              + "; score = the share of the teacher's head and neuron "
              "importance and word-table energy it keeps.", "",
              "| heads | FFN | table rank | params | int8 MB | ms | "
              + ("arm64 instructions | " if arm64 else "") + "score "
              "| chosen |",
              "| --- " * (8 + arm64) + "|"]
    for r in sorted(rows, key=lambda r: (r.get("arm64_instructions") or 0,
                                         r["latency_ms"])):
      lines.append(f"| {r['heads']} | {r['intermediate_size']} | "
                   f"{r.get('table_rank') or '-'} | {r['params']:,} | "
                   f"{r['int8_mb']:.2f} | {r['latency_ms']:.2f} | "
                   + (f"{millions(r['arm64_instructions'])} | " if arm64
                      else "")
                   + f"{r['score']:.3f} | {'yes' if r['chosen'] else ''} |")
    lines.append("")
  lines += _plateau_lines(s.get("plateau"), metric)
  carving = summary["carving"] or {}
  if carving.get("dev_carved"):
    lines += ["## Carving", "",
              f"Dev {metric} of the teacher "
              f"{fmt(_points(carving.get('dev_teacher'), metric))}, right "
              f"after the carve {fmt(_points(carving.get('dev_carved'), metric))}"
              f", after NoNorm + relu "
              f"{fmt(_points(carving.get('dev_substituted'), metric))}, "
              f"after recovery {fmt(_points(carving.get('dev_recovered'), metric))}"
              " (at the training length, before distillation).", ""]
  check = summary["assets"]["check"]
  lines += ["## App assets", "", f"`{summary['assets']['tflite']}` (with its "
            "vocabulary in the metadata and beside it)."]
  if check:
    lines.append(f"Asked {check['asked']} dev examples through the app's "
                 "Python twin" + (f"; the TFLite Task Library gave the same "
                                  f"answer to {check['agree']} of them."
                                  if check.get("agree") is not None else
                                  "; the Task Library was not available."))
  latency_text = app_latency_text(summary.get("app") or {})
  if latency_text:
    lines += ["", latency_text]
  arm64 = arm64_lines(summary.get("arm64"))
  if arm64:
    lines += ["", "## On arm64", "", *arm64]
  lines += ["", "## Steps", "", *table(
      ["step", "seconds", "peak MB"],
      ([step["name"], fmt(step["seconds"], 0),
        fmt(step["peak_memory_mb"], 0)] for step in summary["steps"]))]
  lines.append(f"| all steps (side by side: more than the wall time) | "
               f"{fmt(summary['seconds'], 0)} | |")
  if summary.get("wall_seconds") is not None:
    lines.append(f"\nWall time of this run up to its report: "
                 f"{summary['wall_seconds'] / 60:.1f} min.")
  return "\n".join(lines) + "\n"


def _plateau_lines(plateau, metric):
  """The student's held-out curve (--student_heldout) and why it ended."""
  if not plateau or not plateau.get("points"):
    return []
  points = ", ".join(f"{p['steps']} steps {p['score']:.1f}"
                     for p in plateau["points"])
  return ["## The student's training", "",
          f"Scored on the slice of train held out ({metric}, points) as it "
          f"trained: {points}. It ended after {plateau['steps']} steps: "
          f"{plateau['stopped']}{_kept(plateau)}.", ""]


def _kept(plateau):
  """Which point's weights the student ended with, when not its last."""
  kept = plateau.get("kept_steps")
  return ("" if kept in (None, plateau["steps"]) else
          f"; it kept the weights of its best point ({kept} steps)")


def _shape(shape):
  if not shape or shape.get("layers") is None:
    return "-"
  return (f"{shape['layers']} layers, {shape['heads']} heads, FFN "
          f"{shape['intermediate_size']}, {shape['normalization']} + "
          f"{shape['act']}")


def _points(results, metric):
  """A task's eval results in points (SQuAD's f1 already is one; accuracy
  is a fraction)."""
  if not results or results.get(metric) is None:
    return None
  value = results[metric]
  return value if metric == "f1" else value * 100


def write_report(out):
  summary = collect(out)
  layout = Layout(out)
  write_file(layout.summary, json.dumps(summary, indent=2))
  write_file(layout.report, markdown(summary))
  return summary


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(ReportOptions)
  if not os.path.isfile(Layout(options.output_dir).plan):
    sys.exit(f"error: --output_dir {options.output_dir}: no plan.json (not "
             "a ship output directory)")
  summary = write_report(options.output_dir)
  s = summary["student"]
  print(f"{summary['metric']}: teacher {fmt(summary['teacher']['float'])}, "
        f"student {fmt(s['float'])} float / {fmt(s['int8'])} int8, "
        f"{fmt(s['latency_ms'], 2)} ms; {Layout(options.output_dir).report}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
