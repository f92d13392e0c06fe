"""TFLite conversion of the fixed-shape SavedModel, one quantization mode each.

The modes are the QuantizationMode entries of MODES below, in the order
commands list them. Everything that differs between modes is a field of its
entry (converter settings, calibration, the int8 recipes and QAT it takes,
whether latency comparisons time it), and convert_tflite, conversion.py, the
latency benchmark and the reports read MODES: a new mode is one entry here.

int8 has two recipes: `xnnpack` (default, fast_int8.py) makes the attention
operands symmetric and keeps float islands only where XNNPACK has no int8
kernel, so the host / phone CPU runs it in one partition (2-5x faster
there); `standard` (and --strict_int8) is the converter's output as it is,
integer but for the boundary ops (what NPUs / DSPs want).

Builtin ops only, unless select TF (Flex) ops are allowed. The converter's
native log is kept off the terminal and its failure reduced to one line.

    data = convert("/tmp/qa_saved_model", "int8",
                   representative=calibration_dataset(features, 100))
"""

import dataclasses
import os
import re

from converters.native_output import native_output_to

# TensorFlow (and fast_int8's numpy) are imported where they are used, so
# that a command can check its flags against MODES before paying for them.

INT8_RECIPES = ("xnnpack", "standard")  # the first is the default


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuantizationMode:
  """One quantization mode: its name, and how it is converted and used.

  Args:
    name: str, the --modes name (and the file's: NAME_MODE.tflite).
    optimize: bool, the converter quantizes something (Optimize.DEFAULT).
    supported_types: tuple of tf dtype names the weights may take.
    calibrated: bool, needs a representative dataset (activation ranges).
    ops: tuple of tf.lite.OpsSet names the converted graph may use.
    strict_ops: tuple of OpsSet names under --strict_int8 (None: `ops`).
    int8_recipes: tuple, the INT8_RECIPES it is converted by (the first its
      default); () when none applies.
    qat: bool, --qat_steps trains for it: it is converted from the
      fake-quantized model with the learned ranges.
    searched: bool, its file is chosen by scoring candidates on the task's
      dev split (convert_tflite needs --data_dir); not part of `all`.
    timed: bool, latency comparisons time it.
  Example: QuantizationMode(name="float16", optimize=True,
    supported_types=("float16",))
  """
  name: str
  optimize: bool = False
  supported_types: tuple = ()
  calibrated: bool = False
  ops: tuple = ("TFLITE_BUILTINS",)
  strict_ops: tuple | None = None
  int8_recipes: tuple = ()
  qat: bool = False
  timed: bool = False
  searched: bool = False


_INT16X8_OPS = "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8"

# The one registry of modes (commands, benchmark and reports read it).
MODES = (
    # No optimization.
    QuantizationMode(name="float32", timed=True),
    # Weights stored as float16, dequantized at load (half the size; it
    # then runs as float32 does, so latency comparisons leave it out).
    QuantizationMode(name="float16", optimize=True,
                     supported_types=("float16",)),
    # int8 weights, activations quantized on the fly.
    QuantizationMode(name="dynamic", optimize=True, timed=True),
    # Full integer from a representative dataset; ops that cannot be
    # quantized stay float unless strict (TFLITE_BUILTINS_INT8 only).
    QuantizationMode(name="int8", optimize=True, calibrated=True,
                     strict_ops=("TFLITE_BUILTINS_INT8",),
                     int8_recipes=INT8_RECIPES, qat=True, timed=True),
    # int16 activations, int8 weights; unsupported ops (our mask Cast) fall
    # back to float unless strict. XNNPACK runs no int16 activations, so
    # there is no fast path to time.
    QuantizationMode(name="int16x8", optimize=True, calibrated=True,
                     ops=(_INT16X8_OPS, "TFLITE_BUILTINS"),
                     strict_ops=(_INT16X8_OPS,)),
    # int8 (the xnnpack recipe) with the fewest matmuls out of int8 that
    # keep the dev metric within convert_tflite's --max_int8_loss of the
    # float model's (converters/selective_int8.py).
    QuantizationMode(name="selective", optimize=True, calibrated=True,
                     searched=True),
)


def mode_names():
  """The names of MODES, in order."""
  return tuple(m.name for m in MODES)


def get_mode(name):
  """The QuantizationMode named `name`; ValueError otherwise."""
  for mode in MODES:
    if mode.name == name:
      return mode
  raise ValueError(f"unknown mode {name!r}; modes are "
                   f"{', '.join(mode_names())}")


def _labels():
  """{label: (mode name, int8 recipe)}: every mode (its default recipe, or
  None), then each mode under each other recipe as `MODE_RECIPE`."""
  labels = {m.name: (m.name, (m.int8_recipes or (None,))[0]) for m in MODES}
  for mode in MODES:
    for recipe in mode.int8_recipes[1:]:
      labels[f"{mode.name}_{recipe}"] = (mode.name, recipe)
  return labels


def mode_labels():
  """Names for reports comparing recipes: every mode, and a mode under
  each other recipe it takes as `MODE_RECIPE` (`int8_standard`)."""
  return tuple(_labels())


def parse_mode_label(label):
  """(mode name, int8 recipe or None) of a `mode_labels()` name;
  ValueError otherwise."""
  labels = _labels()
  if label not in labels:
    raise ValueError(f"unknown mode {label!r}; modes are "
                     f"{', '.join(labels)}")
  return labels[label]


def calibrated(label):
  """Whether the mode (or `mode_labels()` name) needs calibration samples."""
  return get_mode(parse_mode_label(label)[0]).calibrated


class ConversionError(ValueError):
  """The converter refused the model; one line saying which ops and why."""


def make_converter(saved_model_dir, mode, representative=None,
                   strict_int8=False, allow_select_tf_ops=False):
  """A TFLiteConverter configured for `mode` as its MODES entry says."""
  import tensorflow as tf
  spec = get_mode(mode)
  if spec.calibrated and representative is None:
    raise ValueError(f"mode {mode} needs a representative dataset")
  converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
  if spec.optimize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if spec.supported_types:
    converter.target_spec.supported_types = [
        getattr(tf, name) for name in spec.supported_types]
  if spec.calibrated:
    converter.representative_dataset = representative
  names = spec.strict_ops if strict_int8 and spec.strict_ops else spec.ops
  ops = [getattr(tf.lite.OpsSet, name) for name in names]
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

  The recipe is chosen here and only here: `xnnpack` applies to a mode
  that takes it (its MODES entry's int8_recipes) and is neither strict nor
  mixed with select TF ops."""
  from tensorflow.lite.python.convert_phase import ConverterError
  if int8_recipe not in INT8_RECIPES:
    raise ValueError(f"unknown int8 recipe {int8_recipe!r}; recipes are "
                     f"{list(INT8_RECIPES)}")
  try:
    converter = make_converter(saved_model_dir, mode, representative,
                               strict_int8, allow_select_tf_ops)
    if get_mode(mode).searched:
      if strict_int8 or allow_select_tf_ops:
        raise ValueError("selective takes nodes out of full int8, so it "
                         "goes with neither --strict_int8 nor "
                         "--allow_select_tf_ops")
      from converters import fast_int8
      calibrated = fast_int8.calibrate(converter)
      data, facts = fast_int8.from_calibrated(calibrated)
      return data, dict(facts, calibrated=calibrated)
    if (int8_recipe == "xnnpack" and int8_recipe in get_mode(
        mode).int8_recipes and not strict_int8 and not allow_select_tf_ops):
      from converters import fast_int8
      return fast_int8.convert(converter)
    with native_output_to(os.devnull):
      return converter.convert(), {}
  except (ConverterError, RuntimeError, ValueError) as e:
    raise ConversionError(_one_line(e, mode, strict_int8,
                                    allow_select_tf_ops)) from None
