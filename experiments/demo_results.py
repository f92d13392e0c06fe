"""What a demo measured, read back from its output directory, and the
verdict on the carved student.

    summary, bench_runs = collect("demo_output")
    summary["verdict"]["text"]

`collect` reads what the demo's steps wrote (plan.json, the carving facts,
fine-tuning results and TensorBoard summaries, convert_tflite reports,
android_bench runs, the app twin's answers, the steps' `.done` markers)
into one JSON-able dict; a piece not written yet is None, so a
half-finished demo still reports. `demo_report` draws it.
"""

import json
import math
import os
import struct

MODELS = ("teacher", "carved")
LABELS = {"teacher": "MiniLM teacher (all-MiniLM-L6-v2, fine-tuned)",
          "carved": "carved student (pruned, NoNorm + relu, task KD)"}
TASKS = {"qa": ("QA", "f1", "F1"), "spam": ("spam", "accuracy", "accuracy")}
# The modes the demo converts: its pick of converters.quantize.MODES.
DEMO_MODES = ("float32", "int8")
# The target: the shipped student keeps this share of the teacher's
# QA F1.
QA_F1_TARGET = 0.9
# The steps of each model's chain (the teacher's import and fine-tunings;
# the student's carvings and task stages), for its peak memory.
CHAIN_STEPS = {"teacher": ("teacher", "teacher_qa", "teacher_spam"),
               "carved": ("carve_qa", "carve_spam", "carved_qa",
                          "carved_spam")}
# What the report shows of compress's carving.json.
CARVING_FACTS = ("heads", "intermediate_size", "low_rank_ranks",
                 "params_encoder", "teacher_params_encoder", "params_share",
                 "word_table_error", "calibration_examples", "substitution",
                 "recovery")


def read_json(path):
  """The JSON object at path, or None when the file is not there yet."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_history(path):
  """history.jsonl rows by step (a resumed run appends; the last wins)."""
  if not os.path.exists(path):
    return []
  rows = {}
  with open(path) as f:
    for line in f:
      if line.strip():
        row = json.loads(line)
        rows[row["step"]] = row
  return [rows[s] for s in sorted(rows)]


def read_scalars(directory):
  """{tag: [(step, value)]} from a run's TensorBoard event files.

  Event files are TFRecords of `Event` protos; TensorBoard's own protos
  parse them without loading TensorFlow (the report must stay quick).
  """
  if not os.path.isdir(directory):
    return {}
  from tensorboard.compat.proto import event_pb2
  from tensorboard.util import tensor_util
  scalars = {}
  for name in sorted(os.listdir(directory)):
    if ".tfevents." not in name:
      continue
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
    pos = 0
    while pos + 12 <= len(data):  # length (8), its CRC (4), data, CRC (4)
      (length,) = struct.unpack("<Q", data[pos:pos + 8])
      record = data[pos + 12:pos + 12 + length]
      pos += 16 + length
      if len(record) < length:
        break  # the last record of a file still being written
      event = event_pb2.Event.FromString(record)
      for value in event.summary.value:
        if value.HasField("tensor"):
          number = float(tensor_util.make_ndarray(value.tensor))
        elif value.HasField("simple_value"):
          number = value.simple_value
        else:
          continue
        scalars.setdefault(value.tag, {})[event.step] = number
  return {tag: sorted(by_step.items()) for tag, by_step in scalars.items()}


def read_marker(directory):
  """{"seconds", "finished", "peak_memory_mb"} of a step's `.done` marker
  (None each when missing). The marker's first token is the seconds the
  step took ("SECONDS s"); a later token `peak_rss_mb=N`, if the pipeline
  writes one, is the step's peak memory. Anything else is ignored."""
  facts = {"seconds": None, "finished": None, "peak_memory_mb": None}
  path = os.path.join(directory, ".done")
  try:
    with open(path) as f:
      tokens = f.read().split()
    facts["finished"] = os.path.getmtime(path)
  except (OSError, UnicodeDecodeError):
    return facts
  facts["seconds"] = _number(tokens[0]) if tokens else None
  for token in tokens[1:]:
    name, _, value = token.partition("=")
    if name == "peak_rss_mb":
      facts["peak_memory_mb"] = _number(value)
  return facts


def _number(text):
  """A finite, non-negative float, or None."""
  try:
    value = float(text)
  except ValueError:
    return None
  return value if math.isfinite(value) and value >= 0 else None


def _marker(directory):
  """(seconds the step took, when it finished) from its `.done` marker."""
  facts = read_marker(directory)
  if facts["seconds"] is None:
    return None, None
  return facts["seconds"], facts["finished"]


def step_seconds(directory):
  """Seconds a pipeline step took (its marker), None if it has not run."""
  return _marker(directory)[0]


def _params(config_file, seq_length):
  """Analytic parameter counts (tfmodels.summary) of a run's config."""
  if not os.path.exists(config_file):
    return None
  from tfmodels.configs import load_config
  from tfmodels.summary import count
  config = load_config(config_file)
  counts = count(config, min(seq_length, config.max_position_embeddings))
  return {k: counts[k] for k in ("params_encoder", "params_embedding",
                                 "params_blocks", "flops")} | {
      "name": config.name, "layers": config.num_hidden_layers,
      "heads": config.num_attention_heads,
      "intermediate_size": config.intermediate_size,
      "normalization": config.normalization_type, "act": config.hidden_act}


def latency_rows(out):
  """(runs, rows) of the host and phone benchmarks."""
  from android_bench import report, results
  runs, rows = [], []
  for target in ("host", "phone"):
    directory = os.path.join(out, "bench", target)
    if not os.path.isdir(directory):
      continue
    for path in results.find_runs([directory]):
      try:
        run = results.load_run(path)
      except results.ResultsError:
        continue
      runs.append(run)
      for row in report.summarize(run):
        stem = row["model"].rsplit(".", 1)[0]
        name, _, mode = stem.rpartition("_")
        rows.append({"target": target, "device": (run.get("device") or {})
                     .get("model"), "model": name, "mode": mode,
                     "threads": row["threads"], "delegate": row["delegate"],
                     "latency_ms": row.get("latency_ms"),
                     "low_ms": row.get("low_ms"),
                     "high_ms": row.get("high_ms"),
                     "status": ",".join(row["statuses"])})
  return runs, rows


def model_dir(out, model):
  """Where a model's encoder config is before it is fine-tuned: the
  imported teacher, or the carved QA student (the one the app ships)."""
  if model == "teacher":
    return os.path.join(out, "runs", "teacher")
  return os.path.join(out, "runs", "carved_qa", "model")


def carving_facts(out, task):
  """What compress kept and measured for a task (None before it ran)."""
  facts = read_json(os.path.join(out, "runs", f"carved_{task}", "model",
                                 "carving.json"))
  return facts and {k: facts.get(k) for k in CARVING_FACTS}


def collect(out):
  """Everything the report shows, as one JSON-able dict."""
  plan = read_json(os.path.join(out, "plan.json")) or {}
  sizes = plan.get("sizes") or {}
  models = {}
  for m in MODELS:
    entry = {"label": LABELS[m],
             "params": _params(os.path.join(model_dir(out, m),
                                            "config.json"),
                               sizes.get("qa_seq_length", 128)),
             "tasks": {}, "finetune_loss": {}}
    for task in TASKS:
      ft = os.path.join(out, "finetune", f"{m}_{task}")
      entry["tasks"][task] = read_json(os.path.join(ft, "eval_results.json"))
      entry["finetune_loss"][task] = read_scalars(
          os.path.join(ft, "summaries")).get("loss", [])
    if m == "carved":
      entry["carving"] = {task: carving_facts(out, task) for task in TASKS}
    models[m] = entry
  conversions = {}
  tflite = os.path.join(out, "tflite")
  for name in sorted(os.listdir(tflite)) if os.path.isdir(tflite) else ():
    report = read_json(os.path.join(tflite, name, f"{name}_report.json"))
    if report:
      conversions[name] = conversion_summary(report)
  bench_runs, latency = latency_rows(out)
  app_answers = read_json(os.path.join(out, "app_assets", "answers.json"))
  steps = []
  for step in plan.get("steps", []):
    stage = next((k for k, v in plan.get("stages", {}).items()
                  if step["name"] in v), "")
    steps.append(dict(step, stage=stage, **read_marker(step["output"])))
  summary = {"plan": {k: plan.get(k) for k in ("scale", "sizes",
                                               "carved_student", "phone",
                                               "no_phone", "vocab_file",
                                               "task_data")},
             "steps": steps, "models": models, "conversions": conversions,
             "latency": latency, "app": app_answers}
  spam = (plan.get("task_data") or {}).get("spam")
  summary["plan"]["spam_dev_rows"] = _tsv_rows(spam, "dev") if spam else None
  summary["verdict"] = verdict(summary)
  summary["teacher_vs_student"] = teacher_vs_student(summary)
  return summary, bench_runs


def _tsv_rows(directory, split):
  """Examples in a GLUE-layout split (rows after the header)."""
  from tfmodels.data.glue import split_path
  from tfmodels.data.text_io import read_lines
  try:
    return sum(1 for line in read_lines(split_path(directory, split))[1:]
               if line)
  except (ValueError, OSError):
    return None


def conversion_summary(report):
  """The parts of a convert_tflite report the demo shows."""
  modes = {}
  for mode, r in report.get("modes", {}).items():
    xnn = r.get("xnnpack") or {}
    modes[mode] = {
        "size_mb": r.get("size_bytes", 0) / 1e6,
        "metric": (r.get("metric") or {}).get("points"),
        "drop": (r.get("metric") or {}).get("drop"),
        "max_abs_diff": (r.get("difference") or {}).get("max_abs"),
        "mean_abs_diff": (r.get("difference") or {}).get("mean_abs"),
        "float_ops": sum((r.get("float_ops") or {}).values()),
        "float_op_types": r.get("float_ops") or {},
        "ops": sum((r.get("ops") or {}).values()),
        "xnnpack": (f"{xnn.get('delegated_nodes')}/{xnn.get('total_nodes')}"
                    if xnn else None),
        "not_delegated": xnn.get("not_delegated") or {}}
  keras = (report.get("keras") or {}).get("metric") or {}
  return {"task": report.get("task"), "seq_length": report.get("seq_length"),
          "metric_name": keras.get("name"), "keras_metric": keras.get("points"),
          "modes": modes, "passed": report.get("passed"),
          "failures": report.get("failures")}


# ------------------------------------------------------------ the verdict
def _task(summary, model, task, key):
  return ((summary["models"].get(model) or {}).get("tasks", {}).get(task)
          or {}).get(key)


def _tflite_metric(summary, name, mode):
  return (((summary["conversions"].get(name) or {}).get("modes") or {})
          .get(mode) or {}).get("metric")


def verdict(summary):
  """Does the shipped (carved) student keep at least QA_F1_TARGET of the
  teacher's QA F1 (dev, both fine-tuned models scored the same way)?

  Also stated: the spam accuracy gap (teacher minus student, points, with
  the 95% sampling interval of a difference of two proportions on the dev
  rows) and what int8 costs the shipped QA model (TFLite float32 F1 minus
  int8 F1 at the app's length, and the int8 file's share of the teacher's
  F1). Entries not measured yet are None.
  """
  teacher_f1 = _task(summary, "teacher", "qa", "f1")
  student_f1 = _task(summary, "carved", "qa", "f1")
  share = (student_f1 / teacher_f1 if teacher_f1 and student_f1 is not None
           else None)
  keeps = None if share is None else share >= QA_F1_TARGET
  teacher_acc = _task(summary, "teacher", "spam", "accuracy")
  student_acc = _task(summary, "carved", "spam", "accuracy")
  gap = noise = None
  if teacher_acc is not None and student_acc is not None:
    gap = 100 * (teacher_acc - student_acc)
    n = summary["plan"].get("spam_dev_rows")
    p = max(1e-3, min(1 - 1e-3, (teacher_acc + student_acc) / 2))
    noise = 100 * 1.96 * math.sqrt(2 * p * (1 - p) / n) if n else None
  float_f1 = _tflite_metric(summary, "carved_qa", "float32")
  int8_f1 = _tflite_metric(summary, "carved_qa", "int8")
  int8_drop = (float_f1 - int8_f1 if None not in (float_f1, int8_f1)
               else None)
  int8_share = (int8_f1 / teacher_f1 if teacher_f1 and int8_f1 is not None
                else None)
  target = f"{QA_F1_TARGET:.0%}"
  lines = []
  if share is not None:
    lines.append(f"QA F1 (dev): carved student {student_f1:.1f} vs teacher "
                 f"{teacher_f1:.1f}: {share:.1%} of the teacher's (target "
                 f"{target})")
  if gap is not None:
    band = f", 95% noise ±{noise:.1f}" if noise is not None else ""
    outcome = ("" if noise is None else "; within noise" if abs(gap) <= noise
               else "; beyond noise")
    lines.append(f"spam accuracy (dev): carved student "
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
    text = "The carved student's QA F1 is not measured yet."
  elif keeps:
    text = (f"The carved student keeps {share:.1%} of the teacher's QA F1: "
            f"the {target} target is met.")
  else:
    text = (f"The carved student keeps {share:.1%} of the teacher's QA F1: "
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
  carving = ((summary["models"].get("carved") or {}).get("carving")
             or {}).get("qa") or {}
  parts = []
  if carving.get("params_share") is not None:
    parts.append(f"{carving['params_share']:.0%} of the teacher's encoder "
                 "parameters")
  if sizes.get("carved_qa_steps") is not None:
    parts.append(f"{sizes.get('recover_steps')} recovery and "
                 f"{sizes['carved_qa_steps']} task-distillation steps")
  return (" with " + ", ".join(parts)) if parts else ""


def teacher_vs_student(summary):
  """The carved student's share of the teacher: QA F1 / EM, spam accuracy,
  encoder parameters, int8 file size, host int8 latency (1 thread) and the
  peak memory of each model's steps. Each entry is None until both sides
  are measured."""
  models, conv = summary["models"], summary["conversions"]

  def task(model, name, key):
    return _task(summary, model, name, key)

  def params(model):
    return (models[model]["params"] or {}).get("params_encoder")

  def int8(model, key):
    return ((conv.get(f"{model}_qa") or {}).get("modes", {}).get("int8")
            or {}).get(key)

  def latency(model):
    return next((r["latency_ms"] for r in summary["latency"]
                 if (r["target"], r["model"], r["mode"], r["threads"]) ==
                 ("host", f"{model}_qa", "int8", 1)), None)

  def peak(model):
    peaks = [s.get("peak_memory_mb") for s in summary["steps"]
             if s["name"] in CHAIN_STEPS[model]]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None

  def pair(get, *args):
    return {"teacher": get("teacher", *args), "student": get("carved", *args)}

  rows = {"qa_f1": pair(task, "qa", "f1"),
          "qa_em": pair(task, "qa", "exact_match"),
          "spam_accuracy": pair(task, "spam", "accuracy"),
          "encoder_params": pair(params),
          "qa_f1_int8": pair(int8, "metric"),
          "int8_size_mb": pair(int8, "size_mb"),
          "int8_ms_1_thread": pair(latency),
          "peak_memory_mb": pair(peak)}
  for row in rows.values():
    t, s = row["teacher"], row["student"]
    row["student_share"] = s / t if t and s is not None else None
  return rows
