"""TFLite conversion of the fixed-shape SavedModel, one quantization mode each.

  float32   no optimization
  float16   weights stored as float16, dequantized at load (half the size)
  dynamic   int8 weights, activations quantized on the fly (Optimize.DEFAULT)
  int8      full integer from a representative dataset; ops that cannot be
            quantized stay float unless strict (TFLITE_BUILTINS_INT8 only).
            Recipe `xnnpack` (default, fast_int8.py): symmetric attention
            operands and float islands only where XNNPACK has no int8
            kernel, so the host / phone CPU runs it in one partition (2-5x
            faster there); `standard` (and strict): the converter's output
            as it is, integer but for the boundary ops (what NPUs / DSPs
            want)
  int16x8   int16 activations, int8 weights; unsupported ops (our mask Cast)
            fall back to float unless strict

Builtin ops only, unless select TF (Flex) ops are allowed. The converter's
native log is kept off the terminal and its failure reduced to one line.

    data = convert("/tmp/qa_saved_model", "int8",
                   representative=calibration_dataset(features, 100))
"""

import os
import re

from converters import fast_int8
from converters.native_output import native_output_to

# TensorFlow is imported where it is used, so that the command can check its
# flags against MODES before paying for it.

# The one list of modes (commands, benchmark and reports take it from here).
MODES = ("float32", "float16", "dynamic", "int8", "int16x8")
INTEGER_MODES = ("int8", "int16x8")  # calibrated on a representative set
INT8_RECIPES = ("xnnpack", "standard")  # the first is the default


def mode_labels():
  """Names for reports comparing recipes: every mode, and int8 under each
  other recipe as `int8_RECIPE` (`int8_standard`)."""
  return MODES + tuple(f"int8_{r}" for r in INT8_RECIPES[1:])


def parse_mode_label(label):
  """(mode, int8 recipe) of a `mode_labels()` name; ValueError otherwise."""
  if label in MODES:
    return label, INT8_RECIPES[0]
  mode, _, recipe = label.partition("_")
  if mode == "int8" and recipe in INT8_RECIPES:
    return mode, recipe
  raise ValueError(f"unknown mode {label!r}; modes are "
                   f"{', '.join(mode_labels())}")


def calibrated(label):
  """Whether the mode (or `mode_labels()` name) needs calibration samples:
  its mode is one of INTEGER_MODES."""
  return parse_mode_label(label)[0] in INTEGER_MODES


class ConversionError(ValueError):
  """The converter refused the model; one line saying which ops and why."""


def make_converter(saved_model_dir, mode, representative=None,
                   strict_int8=False, allow_select_tf_ops=False):
  """A TFLiteConverter configured for `mode` (see the module docstring)."""
  import tensorflow as tf
  if mode not in MODES:
    raise ValueError(f"unknown mode {mode!r}; modes are {list(MODES)}")
  if calibrated(mode) and representative is None:
    raise ValueError(f"mode {mode} needs a representative dataset")
  converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
  ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if mode != "float32":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if mode == "float16":
    converter.target_spec.supported_types = [tf.float16]
  if calibrated(mode):
    converter.representative_dataset = representative
  if mode == "int8" and strict_int8:
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
  if mode == "int16x8":
    int16 = (tf.lite.OpsSet.
             EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8)
    ops = [int16] if strict_int8 else [int16, tf.lite.OpsSet.TFLITE_BUILTINS]
  if allow_select_tf_ops:
    ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
  converter.target_spec.supported_ops = ops
  return converter


def _one_line(error, mode, strict_int8, allow_select_tf_ops):
  """The converter's error (pages of MLIR) as one line."""
  ops = sorted({e.operator.name for e in getattr(error, "errors", [])
                if e.operator.name})
  text = str(error)
  if not ops:
    ops = sorted(set(re.findall(r"'(tf\.\w+)' op is neither", text)))
  if ops and "neither a custom op nor a flex op" in text:
    hint = "" if allow_select_tf_ops else " (try --allow_select_tf_ops)"
    return f"{mode}: ops {ops} are not TFLite builtins{hint}"
  quantizer = re.search(r"Quantization to \S+ not yet supported for op: "
                        r"'?(\w+)'?", text)
  if quantizer:
    return (f"{mode}: op {quantizer.group(1)} cannot be quantized"
            + (" (--strict_int8)" if strict_int8 else ""))
  if ops:
    return f"{mode}: conversion failed at ops {ops}"
  lines = [l.strip() for l in text.splitlines() if "error" in l.lower()]
  return f"{mode}: {(lines or text.splitlines() or ['conversion failed'])[0]}"


def convert(saved_model_dir, mode, representative=None, strict_int8=False,
            allow_select_tf_ops=False, int8_recipe="xnnpack"):
  """Bytes of the .tflite model; ConversionError (one line) on failure."""
  return convert_with_facts(saved_model_dir, mode, representative,
                            strict_int8, allow_select_tf_ops, int8_recipe)[0]


def convert_with_facts(saved_model_dir, mode, representative=None,
                       strict_int8=False, allow_select_tf_ops=False,
                       int8_recipe="xnnpack"):
  """(bytes, recipe facts): `convert`, with what the xnnpack int8 recipe
  did (fast_int8.convert's facts; {} for every other mode and recipe).

  The recipe is chosen here and only here: `xnnpack` applies to int8 that
  is neither strict nor mixed with select TF ops."""
  from tensorflow.lite.python.convert_phase import ConverterError
  if int8_recipe not in INT8_RECIPES:
    raise ValueError(f"unknown int8 recipe {int8_recipe!r}; recipes are "
                     f"{list(INT8_RECIPES)}")
  try:
    converter = make_converter(saved_model_dir, mode, representative,
                               strict_int8, allow_select_tf_ops)
    if (mode == "int8" and int8_recipe == "xnnpack" and not strict_int8
        and not allow_select_tf_ops):
      return fast_int8.convert(converter)
    with native_output_to(os.devnull):
      return converter.convert(), {}
  except (ConverterError, RuntimeError, ValueError) as e:
    raise ConversionError(_one_line(e, mode, strict_int8,
                                    allow_select_tf_ops)) from None
