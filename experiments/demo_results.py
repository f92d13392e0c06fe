"""What a demo measured, read back from its output directory, and the
verdict on the distilled student.

    summary, bench_runs = collect("demo_output")
    summary["verdict"]["text"]

`collect` reads what the demo's steps wrote (plan.json, training histories
and TensorBoard summaries, held-out MLM metrics, fine-tuning results,
convert_tflite reports, android_bench runs, the app twin's answers, the
steps' `.done` markers) into one JSON-able dict; a piece not written yet is
None, so a half-finished demo still reports. `demo_report` draws it.
"""

import json
import math
import os
import struct

MODELS = ("teacher", "pkt", "scratch")
LABELS = {"teacher": "MiniLM teacher (all-MiniLM-L6-v2, fine-tuned)",
          "pkt": "MobileBERT, distilled (PKT + PD, task KD)",
          "scratch": "MobileBERT, scratch"}
# The models with an MLM head, scored on the held-out shards (MiniLM, a
# sentence encoder, ships without one).
MLM_MODELS = ("pkt", "scratch")
TASKS = {"qa": ("QA", "f1", "F1"), "spam": ("spam", "accuracy", "accuracy")}
# The modes the demo converts: its pick of converters.quantize.MODES.
DEMO_MODES = ("float32", "int8")


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


def _marker(directory):
  """(seconds the step took, when it finished) from its `.done` marker."""
  path = os.path.join(directory, ".done")
  if not os.path.exists(path):
    return None, None
  with open(path) as f:
    text = f.read().split()
  try:
    return float(text[0]), os.path.getmtime(path)
  except (IndexError, ValueError):
    return None, None


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


def collect(out):
  """Everything the report shows, as one JSON-able dict."""
  plan = read_json(os.path.join(out, "plan.json")) or {}
  sizes = plan.get("sizes") or {}
  models = {}
  for m in MODELS:
    run = os.path.join(out, "runs", m)
    entry = {"label": LABELS[m],
             "params": _params(os.path.join(run, "config.json"),
                               sizes.get("seq_length", 128)),
             "history": read_history(os.path.join(run, "history.jsonl")),
             "mlm": read_json(os.path.join(out, "eval", f"{m}_mlm",
                                           "metrics.json")),
             "tasks": {}, "finetune_loss": {}}
    for task in TASKS:
      ft = os.path.join(out, "finetune", f"{m}_{task}")
      entry["tasks"][task] = read_json(os.path.join(ft, "eval_results.json"))
      entry["finetune_loss"][task] = read_scalars(
          os.path.join(ft, "summaries")).get("loss", [])
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
    seconds, finished = _marker(step["output"])
    steps.append(dict(step, stage=stage, seconds=seconds,
                      finished=finished))
  summary = {"plan": {k: plan.get(k) for k in ("scale", "sizes", "phone",
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
def _metric(summary, model, what):
  """(value in points, examples it was measured on) of one comparison
  metric, or None."""
  m = summary["models"][model]
  if what == "mlm":
    r = m["mlm"]
    return r and (100 * r["mlm_accuracy"], r["masked_tokens"])
  r = m["tasks"].get(what)
  if not r:
    return None
  if what == "qa":
    return r["f1"], r.get("total")
  return 100 * r["accuracy"], summary["plan"].get("spam_dev_rows")


def verdict(summary):
  """Does the distilled student beat the scratch one? With reasons.

  A difference counts when it is larger than the 95% sampling interval of
  a difference of two proportions measured on n examples (the dev sets are
  small: a few hundred questions or e-mails).
  """
  comparisons = []
  for what, label in (("mlm", "held-out MLM accuracy"),
                      ("qa", "QA F1 (dev)"), ("spam", "spam accuracy (dev)")):
    pkt, scratch = (_metric(summary, m, what) for m in ("pkt", "scratch"))
    if not pkt or not scratch:
      continue
    n = pkt[1]
    p = max(1e-3, min(1 - 1e-3, (pkt[0] + scratch[0]) / 200))
    noise = 100 * 1.96 * math.sqrt(2 * p * (1 - p) / n) if n else 0.0
    diff = pkt[0] - scratch[0]
    outcome = ("better" if diff > noise else "worse" if diff < -noise
               else "within noise")
    comparisons.append({"metric": label, "key": what, "pkt": pkt[0],
                        "scratch": scratch[0], "difference": diff,
                        "noise": noise, "n": n, "outcome": outcome})
  if not comparisons:
    return {"comparisons": [], "beats": None, "lines": [],
            "text": "No student was scored yet."}
  better = [c for c in comparisons if c["outcome"] == "better"]
  worse = [c for c in comparisons if c["outcome"] == "worse"]
  sizes = summary["plan"].get("sizes") or {}
  lines = []
  for c in comparisons:
    noise = f", 95% noise ±{c['noise']:.1f}" if c["noise"] else ""
    lines.append(f"{c['metric']}: distilled {c['pkt']:.1f} vs scratch "
                 f"{c['scratch']:.1f} ({c['difference']:+.1f} points{noise}"
                 f"; {c['outcome']})")
  beats = bool(better) and not worse
  if beats:
    head = ("The distilled student beats the scratch one on " +
            ", ".join(c["metric"] for c in better) + ".")
  else:
    head = "The distilled student did not beat the scratch one on every " \
           "measure. Why:"
  reasons = []
  if not beats:
    if any(c["outcome"] == "within noise" for c in comparisons):
      reasons.append(
          "differences within the noise band are what a few hundred dev "
          "examples cannot resolve at this training budget (a few hundred "
          "steps, loss still falling)")
    if worse:
      reasons.append(
          "PKT spends half of its " f"{sizes.get('student_steps')} steps on "
          "layer-by-layer feature-map transfer with the lower layers frozen, "
          "which does not train the MLM / NSP heads; in so short a run the "
          "scratch student's full-model MLM steps can come out ahead on " +
          ", ".join(c["metric"] for c in worse))
  return {"comparisons": comparisons, "beats": beats, "lines": lines,
          "text": " ".join([head] + ([("; ".join(reasons) + ".")]
                                     if reasons else []))}


def teacher_vs_student(summary):
  """The distilled student's share of the teacher: QA F1, spam accuracy,
  encoder parameters, int8 file size and host int8 latency (1 thread).
  Each entry is None until both sides are measured."""
  models, conv = summary["models"], summary["conversions"]

  def task(model, name, key):
    return (models[model]["tasks"].get(name) or {}).get(key)

  def params(model):
    return (models[model]["params"] or {}).get("params_encoder")

  def int8(model, key):
    return ((conv.get(f"{model}_qa") or {}).get("modes", {}).get("int8")
            or {}).get(key)

  def latency(model):
    return next((r["latency_ms"] for r in summary["latency"]
                 if (r["target"], r["model"], r["mode"], r["threads"]) ==
                 ("host", f"{model}_qa", "int8", 1)), None)

  def pair(get, *args):
    return {"teacher": get("teacher", *args), "student": get("pkt", *args)}

  rows = {"qa_f1": pair(task, "qa", "f1"),
          "spam_accuracy": pair(task, "spam", "accuracy"),
          "encoder_params": pair(params),
          "qa_f1_int8": pair(int8, "metric"),
          "int8_size_mb": pair(int8, "size_mb"),
          "int8_ms_1_thread": pair(latency)}
  for row in rows.values():
    t, s = row["teacher"], row["student"]
    row["student_share"] = s / t if t and s is not None else None
  return rows
