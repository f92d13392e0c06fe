"""The validation report: is the converted model still the Keras model?

For each mode it records the ops (and which still compute in float), the
size, how much of the graph XNNPACK takes on the host (and, for float
files, what the GPU delegate's rules refuse), max / mean |TFLite -
Keras| on real inputs, and the task metric on a dev set next to the Keras
model's. `failures` lists what breaks the thresholds; the command refuses to
leave a model behind when there are any. JSON for machines, Markdown for
people.

    result = measure_mode(data, "span", reference, inputs, task, "dev")
    report = build_report(run_facts, keras_metrics, {"float32": result},
                          max_float_diff=1e-3, max_metric_drop=1.0)
    print(markdown(report))
"""

import numpy as np
import tensorflow as tf

from converters import runtime, tflite_file
from converters.contract import INPUT_FEATURES, LENGTH_STEP
from tfmodels.markdown import table


def headline(metrics):
  """(metric name, value in points): the one number a drop is measured on.

  SQuAD's F1 is already in percent; GLUE-style metrics are fractions.
  Joint intent + slot is measured on slot F1: the paper's Table 2 figure
  that separates models (intent accuracy is near its ceiling on SNIPS).
  """
  if "f1" in metrics and ("exact_match" in metrics or "exact" in metrics):
    return "f1", float(metrics["f1"])
  if "slot_f1" in metrics:
    return "slot_f1", 100.0 * float(metrics["slot_f1"])
  name = next(iter(metrics))
  return name, 100.0 * float(metrics[name])


def contract_inputs(features, rows=slice(None)):
  """Our feature dict -> {ids, mask, segment_ids} int32 arrays."""
  return {name: np.asarray(features[ours][rows], np.int32)
          for name, ours in INPUT_FEATURES.items()}


def differences(reference, converted):
  """{"outputs": {name: {max_abs, mean_abs}}, "max_abs", "mean_abs"}."""
  per_output = {}
  for name, want in reference.items():
    diff = np.abs(np.asarray(converted[name], np.float64) -
                  np.asarray(want, np.float64))
    per_output[name] = {"max_abs": float(diff.max()),
                        "mean_abs": float(diff.mean())}
  return {"outputs": per_output,
          "max_abs": max(d["max_abs"] for d in per_output.values()),
          "mean_abs": float(np.mean([d["mean_abs"]
                                     for d in per_output.values()]))}


def shorter_length(full):
  """The second length a dynamic file is validated at: half its default,
  rounded down to a multiple of LENGTH_STEP, or None."""
  length = full // 2 // LENGTH_STEP * LENGTH_STEP
  return length if length >= LENGTH_STEP else None


def cut_inputs(inputs, length):
  """The examples cut to their first `length` tokens (mask included)."""
  return {k: np.asarray(v)[:, :length] for k, v in inputs.items()}


# Contract outputs that come back under our models' names: probabilities as
# log-probabilities (same argmax), a regression's score as it is.
_OUR_NAMES = {"probability": "logits", "score": "logits",
              "intent_probability": "intent_logits"}


class TaskModel:
  """A LiteRT model behind the interface tfmodels' tasks evaluate:
  model(features, training=False) -> {"logits" | "start_logits" |
  "intent_logits", ...}.

  The classifier's `probability` comes back as log-probabilities under
  `logits` (same argmax), a regression's `score` as `logits`, the joint
  model's `intent_probability` as log-probabilities under `intent_logits`.
  """

  def __init__(self, model):
    self.model = model

  def __call__(self, features, training=False):
    del training
    out = self.model.run_batch(contract_inputs(
        {k: np.asarray(v) for k, v in features.items()}))
    ours = {}
    for name, value in out.items():
      if name.endswith("probability"):
        value = np.log(np.maximum(value, 1e-30))
      ours[_OUR_NAMES.get(name, name)] = value
    return {k: tf.constant(v) for k, v in ours.items()}


def measure_mode(data, reference, inputs, task=None, split="dev",
                 num_threads=2, shorter=None):
  """Everything the report says about one converted model.

  Args:
    data: bytes of the .tflite file (contract names already checked).
    reference: {output name: [N, ...]} of the Keras model on `inputs`.
    inputs: {ids, mask, segment_ids} [N, L] real examples.
    task: a tfmodels.training.tasks task, or None (no metric).
    split: the split the task scores.
    shorter: (inputs cut to a shorter length, the Keras model's outputs on
      them), compared when the file's length is dynamic.

  Returns:
    dict with size_bytes, ops, float_ops, and (when LiteRT runs it on the
    host) xnnpack, difference, metrics; else `not_runnable` says why.
  """
  result = {"size_bytes": len(data), "ops": tflite_file.op_histogram(data),
            "float_ops": tflite_file.float_op_histogram(data),
            "select_tf_ops": tflite_file.select_tf_ops(data)}
  reason = runtime.probe(data)
  if reason:
    result["not_runnable"] = reason
    return result
  model = runtime.LiteRTModel(data, num_threads)
  result["xnnpack"] = model.xnnpack_coverage()
  result["difference"] = differences(reference, model.run_batch(inputs))
  signature = tflite_file.shape_signatures(data).get("ids")
  if shorter and signature and signature[-1] == -1:
    short_inputs, short_reference = shorter
    result["shorter_length"] = dict(
        differences(short_reference, model.run_batch(short_inputs)),
        length=int(short_inputs["ids"].shape[1]))
  if task is not None:
    result["metrics"] = task.evaluate(TaskModel(model), split)
  return result


def build_report(facts, keras_metrics, modes, max_float_diff=None,
                 max_metric_drop=None, original_metrics=None):
  """The report dict, with each mode's metric drop and the failures.

  Args:
    facts: dict about the run (source, head, seq_length, task, ...).
    keras_metrics: the Keras model's task metrics, or None.
    modes: {mode: measure_mode(...) result, plus whatever the caller adds}.
    max_float_diff: float32's max |TFLite - Keras| allowed, or None.
    max_metric_drop: points each mode may lose against Keras, or None.
    original_metrics: the metrics of the model before --substitute, or
      None. When given, max_metric_drop gates the drop against it (what
      the substitution lost counts), and each mode records both drops.
  """
  failures = []
  keras_score = headline(keras_metrics) if keras_metrics else None
  original = headline(original_metrics) if original_metrics else None
  for mode, result in modes.items():
    if "not_runnable" in result:
      # Flex ops cannot run on the host (LiteRT's wheel has no Flex
      # delegate): accepted unless a metric was demanded. A crash never is.
      if max_metric_drop is not None or not result["select_tf_ops"]:
        failures.append(f"{mode}: {result['not_runnable']}")
      continue
    short = result.get("shorter_length") or {}
    for diff, where in ((result["difference"]["max_abs"], ""),
                        (short.get("max_abs"),
                         f" at L = {short.get('length')}")):
      if (mode == "float32" and max_float_diff is not None
          and diff is not None and diff > max_float_diff):
        failures.append(f"float32: max |TFLite - Keras|{where} {diff:.3g} "
                        f"> --max_float_diff {max_float_diff:g}")
    if keras_score and "metrics" in result:
      name, points = headline(result["metrics"])
      result["metric"] = {"name": name, "points": points,
                          "drop": keras_score[1] - points}
      gated, against = result["metric"]["drop"], f"Keras ({keras_score[1]:.2f}"
      if original:
        gated = result["metric"]["drop_from_original"] = original[1] - points
        against = (f"the original model ({original[1]:.2f}, before "
                   f"--substitute; {result['metric']['drop']:.2f} below the "
                   f"substituted model")
      if max_metric_drop is not None and gated > max_metric_drop:
        failures.append(f"{mode}: {name} {points:.2f} is {gated:.2f} points "
                        f"below {against}; --max_metric_drop "
                        f"{max_metric_drop:g})")
  report = dict(facts)
  report["keras"] = ({"metrics": keras_metrics, "metric": {
      "name": keras_score[0], "points": keras_score[1]}}
                     if keras_metrics else None)
  if original:
    report["original"] = {"metrics": original_metrics, "metric": {
        "name": original[0], "points": original[1]}}
  report["thresholds"] = {"max_float_diff": max_float_diff,
                          "max_metric_drop": max_metric_drop}
  report["modes"] = modes
  report["failures"] = failures
  report["passed"] = not failures
  return report


def _mb(size):
  return f"{size / 1e6:.2f}"


def _histogram(counts):
  return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _substitution_lines(facts):
  """The --substitute section: metric before, right after, after recovery."""
  if not facts:
    return []
  lines = ["", "## Op substitution", "",
           "- substituted: " + ", ".join(
               f"{k} -> {v}" for k, v in facts["substitutions"].items()),
           f"- NoNorms fitted to LayerNorms: {facts['fitted_norms']}"]
  fit = facts.get("norm_fit_mse")
  if fit:
    lines.append(f"- mean squared error of the fitted NoNorms against the "
                 f"LayerNorms: {fit['fitted']:.3g} (identity: "
                 f"{fit['identity']:.3g})")
  recovery = facts.get("recovery")
  if recovery:
    lines.append(f"- recovery: {recovery['steps']} steps, distillation "
                 f"loss {recovery['loss_before']:.4g} -> "
                 f"{recovery['loss_after']:.4g}")
  points = facts.get("headline")
  if points:
    lines += ["", *table(
        ["stage", "metric", "change"],
        ([f"{stage} (Keras)", f"{value:.2f}",
          f"{value - points['original']:+.2f}"]
         for stage, value in points.items()))]
  return lines


def _selective_lines(facts):
  """What the selective search took out of full int8, and why."""
  if not facts:
    return []
  kept = facts["kept_float"]
  lines = [f"- selective candidates on this host ({len(facts['candidates'])}"
           "; the fastest within the bound is kept): " + "; ".join(
               f"{name} {c['metric']:.2f}, {c['size_mb']:.2f} MB, "
               f"{c['host_ms']:.2f} ms" + ("" if c["within_bound"]
                                           else " (outside the bound)")
               for name, c in facts["candidates"].items())
           + f". Kept: {facts['kept']}."] if facts.get("candidates") else []
  if facts.get("kept") == "dynamic":
    return lines + ["- the file is dynamic-range int8 (int8 weights, float "
                    "activations): it meets the bound and runs faster here"]
  if not facts["ranked"]:
    return lines + [f"- selective: full int8 is within the bound: dev metric "
            f"{facts['metric']:.2f} against the float model's "
            f"{facts['float_metric']:.2f} (within "
            f"{facts['max_int8_loss']:g}); no node taken out of int8"]
  lines += [f"- selective: {len(kept)} of {facts['ranked']} ranked "
           f"int8 nodes taken out of full int8, dev metric {facts['metric']:.2f} "
           f"against the float model's {facts['float_metric']:.2f} (bound: "
           f"within {facts['max_int8_loss']:g}; "
           + ("met" if facts["met"] else "NOT met even with every ranked "
              "node out of int8") + ")",
           "- tried (nodes out of int8: metric, MB): " + ", ".join(
               f"{t['float_nodes']}: {t['metric']:.2f}, {t['size_mb']:.2f}"
               for t in facts["tried"])]
  lines += [f"  - {k['op']} `{k['tensor'].split(';')[0]}`: in int8 it adds "
            f"{k['relative_error']:.1%} relative error to what it reads"
            for k in kept]
  if kept:
    lines += ["  (the fully connected ones keep int8 weights and quantize "
              "their input per row at run time; the others run in float)"]
  return lines


def _gpu_lines(gpu):
  """A float mode's GPU-delegate bullet: the ops the delegate's rules leave
  to the CPU (converters/gpu_delegate.py), and how much of the graph its
  default single partition then holds."""
  if not gpu["refused"]:
    lines = [f"- GPU delegate ({gpu['rules']} rules): all "
             f"{gpu['total_nodes']} ops supported"]
  else:
    parts = gpu["gpu_partitions"]
    weights = gpu.get("weights_dequantize")
    lines = [f"- GPU delegate ({gpu['rules']} rules): "
             f"{gpu['gpu_nodes']} of {gpu['total_nodes']} nodes in the one "
             f"partition it takes by default ({parts} partition"
             f"{'s' if parts != 1 else ''}"
             + (f"; {weights} DEQUANTIZE of float16 weights it reads "
                "directly" if weights else "") + "); it cannot take:"]
    lines += [f"  - {r['op']} {r['count']}: {r['reason']} ({r['where']}; "
              f"{r['means']})" for r in gpu["refused"]]
  if gpu.get("dynamic_shapes"):
    lines.append("  - dynamic shapes: the delegate runs at the length the "
                 "interpreter is allocated at and rebuilds at each resize")
  return lines


def markdown(report):
  """The report as Markdown: a summary table, then ops per mode."""
  lines = [f"# Conversion report: {report.get('name', 'model')}", ""]
  for key in ("source", "head", "seq_length", "task", "eval_split",
              "created"):
    if report.get(key) is not None:
      lines.append(f"- {key}: {report[key]}")
  folding = report.get("nonorm_folding")
  if folding:
    lines.append("- NoNorm folding: " + (
        f"{folding['folded']} folded into their neighbours, "
        + (f"{folding['equalized']} kept with their streams equalized for "
           "int8, " if folding.get("equalized") else "")
        + f"{folding['kept']} kept" if "folded" in folding else
        f"not done ({folding['not_folded']})"))
  keras = report.get("keras")
  if keras:
    lines.append(f"- Keras {keras['metric']['name']}: "
                 f"{keras['metric']['points']:.2f}")
  rows = []
  for mode, r in report["modes"].items():
    metric = r.get("metric")
    diff = r.get("difference")
    cover = r.get("xnnpack")
    floats = sum(r["float_ops"].values())
    rows.append([
        mode, _mb(r["size_bytes"]),
        f"{metric['name']} {metric['points']:.2f}" if metric else "-",
        (f"{metric['drop']:+.2f}" + (
            f" ({metric['drop_from_original']:+.2f} vs original)"
            if "drop_from_original" in metric else "")) if metric else "-",
        f"{diff['max_abs']:.2e}" if diff else "-",
        f"{diff['mean_abs']:.2e}" if diff else "-",
        f"{floats} / {sum(r['ops'].values())}",
        (f"{cover['delegated_nodes']} / {cover['total_nodes']} "
         f"({cover['partitions']} partitions)") if cover else
        r.get("not_runnable", "-")])
  lines += ["", *table(["mode", "size (MB)", "metric", "drop", "max abs diff",
                        "mean abs diff", "ops still float", "XNNPACK nodes"],
                       rows)]
  for mode, r in report["modes"].items():
    lines += ["", f"## {mode}", "", f"- ops: {_histogram(r['ops'])}",
              f"- still float: {_histogram(r['float_ops'])}"]
    if r.get("xnnpack"):
      lines.append("- not taken by XNNPACK: "
                   f"{_histogram(r['xnnpack']['not_delegated'])}")
    if r.get("gpu_delegate"):
      lines += _gpu_lines(r["gpu_delegate"])
    short = r.get("shorter_length")
    if short:
      lines.append(f"- at L = {short['length']} too (the file takes any "
                   f"length): max abs diff vs Keras {short['max_abs']:.2e}, "
                   f"mean {short['mean_abs']:.2e}")
    if r.get("select_tf_ops"):
      lines.append(f"- select TF ops: {', '.join(r['select_tf_ops'])}")
    if r.get("metrics"):
      lines.append("- metrics: " + ", ".join(
          f"{k} {v:.4g}" for k, v in r["metrics"].items()))
    lines += _selective_lines(r.get("selective"))
  lines += _substitution_lines(report.get("substitution"))
  lines += ["", "## Verdict", ""]
  lines += ([f"- FAILED: {f}" for f in report["failures"]]
            or ["- passed"])
  return "\n".join(lines) + "\n"
