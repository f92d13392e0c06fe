"""The model card: a JSON file beside each .tflite saying what it is.

An app team holding only `qa_int8.tflite` should still know which checkpoint
it came from, how it was quantized, how long its inputs are, how accurate it
was measured to be and when, without the report or the training run.

    card = model_card(file_name="qa_int8.tflite", data=data, mode="int8", ...)
"""

import datetime
import hashlib

import tensorflow as tf


def model_card(*, file_name, data, mode, head, seq_length, source, config,
               contract, measured, keras_metric=None, task=None,
               vocab_file=None, nonorm_folding=None, created=None):
  """The card as a dict (see the module docstring).

  Args:
    file_name: the .tflite file's name.
    data: its bytes (size and sha256 are of exactly these).
    mode: quantization mode.
    head: head kind; seq_length: L.
    source: the checkpoint prefix or SavedModel it came from.
    config: ModelConfig dict, or None for a SavedModel.
    contract: contract.check()'s facts (names, shapes, tensor order).
    measured: validate.measure_mode()'s result for this file.
    keras_metric: {"name", "points"} of the Keras model, or None.
    task: {"name", "data_dir", "split"} the metric was measured on.
    nonorm_folding: what the export did to the NoNorms ({"folded",
      "equalized", "kept"} counts): files of one model compare tensor by
      tensor only when it is the same.
  """
  from ai_edge_litert import __version__ as litert_version
  metric = measured.get("metric")
  return {
      "file": file_name,
      "size_bytes": len(data),
      "sha256": hashlib.sha256(data).hexdigest(),
      "created": created or datetime.datetime.now(
          datetime.timezone.utc).isoformat(timespec="seconds"),
      "mode": mode,
      "head": head,
      "seq_length": seq_length,
      "inputs": contract["inputs"],
      "outputs": contract["outputs"],
      "select_tf_ops": contract["select_tf_ops"],
      "source_checkpoint": source,
      "config": config,
      "vocab_file": vocab_file,
      "nonorm_folding": nonorm_folding,
      "task": task,
      "metric": metric,
      "keras_metric": keras_metric,
      "metrics": measured.get("metrics"),
      "max_abs_diff_vs_keras": (measured.get("difference") or {}).get(
          "max_abs"),
      "tools": {"tensorflow": tf.__version__, "ai_edge_litert": litert_version},
  }
