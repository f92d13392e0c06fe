"""One Keras model to .tflite files, one per mode: the chain every file of
ours goes through, whether an app team converts it (convert_tflite.py, which
then checks, validates and writes them) or the latency benchmark times it.

  fold NoNorms into their neighbours (exact; nonorm_folding.py)
  -> [1, L] SavedModel in the app contract (export.py; with
     dynamic_length [1, any length], the file's default shape [1, L])
  -> one TFLite conversion per mode, int8 recipe included (quantize.py)
  -> tensors renamed to their signature names (tflite_file.py), so apps and
     benchmark_model's name,low,high:... flags find them either way

    result = convert_model(model, "span", MAX_SEQ_LENGTH,
                           ["float32", "int8"],
                           calibration_dataset(features, 100), config=config)
    data, recipe_facts = result.files["int8"]
"""

import dataclasses
import os

from converters import export, nonorm_folding, quantize, tflite_file
from tfmodels.staging import scratch_directory

# The export's scratch directory (tfmodels.staging.scratch_directory).
SCRATCH_PREFIX = "tflite-export-"


@dataclasses.dataclass
class Converted:
  """files: {mode label: (bytes, recipe facts)}; nonorm_folding: what the
  fold did ({"folded": n, ...}, {"not_folded": why}), None if not asked."""
  files: dict
  nonorm_folding: dict = None


def fold_for_export(model, config, calibration=None):
  """(model to export, facts): NoNorms folded where they fold exactly, and
  with `calibration` (our feature dict) the streams of the norms that stay
  equalized for int8; a model that cannot be folded is exported as it is,
  and the facts say why."""
  try:
    ranges = (calibration and config.normalization_type == "no_norm"
              and nonorm_folding.channel_ranges(model, calibration))
    return nonorm_folding.fold_nonorms(model, config, ranges=ranges or None)
  except nonorm_folding.FoldError as e:
    return model, {"not_folded": str(e)}


def _features(representative):
  """Our feature dict of a calibration_dataset's examples."""
  import numpy as np
  from converters.contract import INPUT_FEATURES
  rows = list(representative())
  return {ours: np.concatenate([r[name] for r in rows])
          for name, ours in INPUT_FEATURES.items()}


def convert_model(model, head, seq_length, modes, representative=None, *,
                  config=None, fold_nonorm=True, strict_int8=False,
                  allow_select_tf_ops=False, int8_recipe="xnnpack",
                  dynamic_length=True, log=lambda message: None):
  """Converts `model` once per entry of `modes`.

  Args:
    model: our Keras model (dict of features in, dict out).
    head: its head kind (contract.HEAD_OUTPUTS), "encoder" for a bare one.
    seq_length: int, L of the [1, L] inputs.
    modes: labels of quantize.mode_labels(): a mode uses `int8_recipe`,
      `int8_standard` names its recipe.
    representative: calibration dataset (representative.calibration_dataset)
      for the integer modes.
    config: the model's ModelConfig; without it nothing is folded.
    fold_nonorm, strict_int8, allow_select_tf_ops, int8_recipe,
      dynamic_length: as convert_tflite's flags of the same names.
    log: called with a progress line per stage.

  Returns:
    Converted.

  Raises:
    quantize.ConversionError: one line, naming the mode.
  """
  folding = None
  if fold_nonorm and config is not None:
    integer = any(quantize.calibrated(label) for label in modes)
    model, folding = fold_for_export(
        model, config, representative and integer and _features(
            representative))
    if "folded" in folding:
      log(f"folded {folding['folded']} NoNorms into their neighbours"
          + (f", equalized the streams of {folding['equalized']}"
             if folding.get("equalized") else ""))
  files = {}
  with scratch_directory(SCRATCH_PREFIX) as scratch:
    saved_model = os.path.join(scratch, "saved_model")
    log(f"exporting a [1, {'any length' if dynamic_length else seq_length}]"
        " SavedModel")
    export.export_saved_model(model, head, seq_length, saved_model,
                              dynamic_length)
    for label in modes:
      mode, recipe = quantize.parse_mode_label(label)
      if label == mode:
        recipe = int8_recipe
      log(f"[{label}] converting")
      data, facts = quantize.convert_with_facts(
          saved_model, mode,
          representative if quantize.calibrated(label) else None,
          strict_int8, allow_select_tf_ops, recipe)
      files[label] = (finish(data, seq_length, dynamic_length), facts)
  return Converted(files, folding)


def finish(data, seq_length, dynamic_length=True):
  """A converted file as it ships: tensors named as its signature names
  them, a dynamic one's default shape [1, seq_length]."""
  return tflite_file.rewrite(
      data, tensor_names=tflite_file.signature_tensor_names(data),
      default_length=seq_length if dynamic_length else None)
