"""Quantization-aware training (QAT): fine-tune a model under int8 fake
quantization, so that the int8 file loses less than post-training int8.

Why not `tfmot.quantization.keras.quantize_model`: it refuses our models
(an encoder Model nested in the task Model), and even on a flat rebuild its
QuantizeWrapper calls a layer with one input and quantizes one output, while
our blocks take (hidden, mask) and return (hidden, scores) or a dict
(docs/design.md, "Quantization-aware training"). So the placement is ours and
the activations use tensorflow-model-optimization's default 8-bit
quantizer (its FakeQuant ops are what the TFLite converter reads ranges
from):

  * every Dense kernel: rounded to TFLite's per-channel int8 grid with a
    straight-through gradient (`rounded_kernel` says why not tfmot's
    LastValueQuantizer);
  * every Dense input and output, and the matmul's output before an
    activation (gelu, relu): MovingAverageQuantizer (asymmetric, per
    tensor). Inputs cover the embeddings, norms and activations that feed
    a matmul; the query / key / value outputs are the attention matmuls'
    inputs;
  * every NoNorm's input and output: the input is the residual sum, which
    int8 holds in one range with its outliers;
  * every embedding table: rounded to a per-tensor int8 grid (what the
    converter makes of a GATHER's table);
  * the keys and values (the attention matmuls' second operands):
    symmetric around 0 for the xnnpack recipe, as fast_int8.py makes them;
  * attention: the scores (the Q K^T matmul's output) and the
    probabilities on softmax's fixed int8 grid (steps of 1 / 256), through
    MultiHeadAttention's masked_scores and attention_probabilities.

The `xnnpack` recipe (fast_int8.py) keeps LayerNorm with the residual add
before it, softmax with its mask, and gelu in float islands, so QAT leaves
them float too: rounding what the file does not round costs more than it
teaches (all-MiniLM-L6-v2 on QA: fake-quant F1 51 with LayerNorm inputs
rounded, 61 without, float 65). The `standard` recipe rounds every op, so
for it QAT also rounds each LayerNorm's input (the residual sum, held in
one range with its outliers), mean, variance, rsqrt and output, and the
masked scores (their range holds the -120 mask adder, so int8 holds them
coarsely).

The ranges start from a calibration pass over the representative data (the
post-training recipe's min / max) and then follow the training batches by
tfmot's moving average. The fake-quantized model exports with
FakeQuantWithMinMaxVars ops, which the TFLite converter turns into int8 with
these learned ranges (quantize.py, any int8 recipe). NoNorms are folded
before QAT (conversion.fold_for_export), so QAT trains the graph that ships.

    qat = QuantizationAware(model, int8_recipe="xnnpack")
    qat.calibrate(features)
    facts = train(qat, task, features, steps=300)
    data = conversion.convert_model(qat, head, 128, ["int8"], dataset,
                                    fold_nonorm=False).files["int8"][0]

`convert_tflite --qat_steps N` runs it; `qat_report` measures it against
post-training int8 (experiments/results/qat.{json,md}).
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from converters.quantize import INT8_RECIPES
from tfmodels.layers.attention import MultiHeadAttention
from tfmodels.layers.dense import dense_product
from tfmodels.layers.normalization import NoNorm


class QatError(ValueError):
  """A model QAT cannot handle (one line)."""


def _activation_quantizer(symmetric=False):
  """tfmot's 8-bit activation quantizer (per tensor; asymmetric, or
  symmetric with a zero point of exactly 0: [-128 s, 127 s])."""
  import tensorflow_model_optimization as tfmot
  return tfmot.quantization.keras.quantizers.MovingAverageQuantizer(
      num_bits=8, per_axis=False, symmetric=symmetric, narrow_range=False)


def rounded_table(table):
  """An embedding table on a per-tensor symmetric int8 grid, straight
  through."""
  scale = tf.maximum(tf.reduce_max(tf.abs(table)), 1e-12) / 127.0
  return table + tf.stop_gradient(tf.round(table / scale) * scale - table)


def quantized_probabilities(probabilities):
  """Softmax output as int8 holds it: multiples of 1 / 256 in [0, 1)."""
  return tf.quantization.fake_quant_with_min_max_args(
      probabilities, min=0.0, max=255.0 / 256.0, num_bits=8)


def rounded_kernel(kernel):
  """The kernel on TFLite's int8 grid (per output channel, symmetric,
  scale max|w| / 127), with a straight-through gradient.

  Not tfmot's LastValueQuantizer: its per-channel FakeQuant on a [in, out]
  kernel stops the converter ("'tfl.transpose' op has mismatched quantized
  axes", TF 2.21), and per tensor is coarser than the converter's own
  per-channel weights. The rounded kernel folds into a constant the
  converter's per-channel quantization reproduces exactly.
  """
  scale = tf.maximum(tf.reduce_max(tf.abs(kernel), axis=0), 1e-12) / 127.0
  rounded = tf.round(kernel / scale) * scale
  return kernel + tf.stop_gradient(rounded - kernel)


class _Point:
  """One fake-quantized tensor: its quantizer and range variables."""

  def __init__(self, name, quantizer, variables):
    self.name, self.quantizer, self.variables = name, quantizer, variables
    self.symmetric = quantizer.symmetric
    self.seen = None  # (min, max) during calibration

  def __call__(self, x, mode):
    if mode == "calibrate":
      low, high = float(tf.reduce_min(x)), float(tf.reduce_max(x))
      self.seen = (low, high) if self.seen is None else (
          min(self.seen[0], low), max(self.seen[1], high))
      return x
    return self.quantizer(x, mode == "train", self.variables)

  def range(self):
    return np.stack([self.variables["min_var"].numpy(),
                     self.variables["max_var"].numpy()])


class _Untracked:
  """Holds an object out of tf.Module's dependency tracking."""

  def __init__(self, value):
    self.value = value


class QuantizationAware(tf.Module):
  """`model` (ours: feature dict in, dict out) with int8 fake quantization
  on its Dense layers, norms, embedding tables and attention (the module
  docstring lists where); callable like the model.

  It changes `model`'s layers in place (their `call`), so give it a model
  of its own (fold_for_export's copy, or a freshly loaded one). Modes:
  `calibrate` (records ranges, no quantization), `train` (moving-average
  ranges, fake quantization), otherwise inference with the stored ranges.
  """

  def __init__(self, model, int8_recipe="xnnpack"):
    super().__init__(name="quantization_aware")
    if int8_recipe not in INT8_RECIPES:
      raise QatError(f"unknown int8 recipe {int8_recipe!r}")
    # The export must find the variables but not the Keras layers: Keras'
    # SavedModel serialization cannot trace the patched calls.
    self._untracked = _Untracked(model)
    self.mode = "infer"
    self.holder = keras.layers.Layer(name="qat_ranges")  # owns the ranges
    act_q = _activation_quantizer()
    # The xnnpack recipe makes what reaches a BATCH_MATMUL's second operand
    # (the keys, the values) symmetric around a zero point of 0.
    sym_q = _activation_quantizer(symmetric=int8_recipe == "xnnpack")
    second_operands = {id(d) for l in model.submodules
                       if isinstance(l, MultiHeadAttention)
                       for d in (l.key_dense, l.value_dense)}
    self.activations = []
    odd = [l.name for l in model.submodules
           if type(l).__name__ in ("KroneckerDense", "KroneckerEmbedding")]
    if odd:
      raise QatError(f"QAT handles Dense and Embedding layers, not "
                     f"Kronecker ones ({odd[0]})")
    # What the standard recipe rounds and xnnpack's keeps float.
    standard = int8_recipe == "standard"
    norms = (NoNorm, keras.layers.LayerNormalization)
    layers = [l for l in model.submodules
              if isinstance(l, (keras.layers.Dense, MultiHeadAttention)
                            + norms)]
    if not any(isinstance(l, keras.layers.Dense) for l in layers):
      raise QatError("the model has no Dense layer to quantize")
    for layer in model.submodules:
      if isinstance(layer, keras.layers.Embedding):
        self._patch_embedding(layer)
    for i, layer in enumerate(layers):
      if not layer.built:
        raise QatError(f"layer {layer.name} is not built")
      point = lambda where, q=act_q: self._point(q, f"{i}_{where}")
      if isinstance(layer, keras.layers.Dense):
        activated = layer.activation not in (None, keras.activations.linear)
        self._patch_dense(layer, point("dense_in"),
                          point("dense_matmul") if activated else None,
                          point("dense_out", sym_q if id(layer) in
                                second_operands else act_q))
      elif isinstance(layer, MultiHeadAttention):
        self._patch_attention(layer, point("scores"),
                              point("masked_scores") if standard else None)
      elif isinstance(layer, NoNorm):
        self._patch_norm(layer, point("norm_in"), point("norm_out"))
      elif standard:
        self._patch_layer_norm(layer, point("norm_in"), point("norm_mean"),
                               point("norm_variance"), point("norm_rsqrt"),
                               point("norm_out"))
    self.saved_variables = list(model.variables) + list(self.holder.weights)

  @property
  def model(self):
    return self._untracked.value

  def _point(self, quantizer, name):
    point = _Point(name, quantizer,
                   quantizer.build(tf.TensorShape(()), name, self.holder))
    self.activations.append(point)
    return point

  def _patch_dense(self, layer, inputs, matmul, outputs):
    # Closures, not default arguments: SavedModel encodes those.
    def call(x):
      x = inputs(x, self.mode)
      w = layer.kernel if self.mode == "calibrate" else rounded_kernel(
          layer.kernel)
      y = dense_product(x, w)  # one FULLY_CONNECTED at any length
      if layer.use_bias:
        y = tf.nn.bias_add(y, layer.bias)
      if matmul is not None:
        y = layer.activation(matmul(y, self.mode))
      return outputs(y, self.mode)
    layer.call = call

  # Explicit signatures: Keras' SavedModel traces `call` by its arguments.
  def _patch_norm(self, layer, inputs, outputs):
    original = layer.call

    def call(x):
      return outputs(original(inputs(x, self.mode)), self.mode)
    layer.call = call

  def _patch_layer_norm(self, layer, inputs, mean, variance, rsqrt,
                       outputs):
    """LayerNorm written out as the converter lowers it, each statistic
    rounded as the standard recipe's MEAN, MEAN and RSQRT outputs are."""
    def call(x):
      x = inputs(x, self.mode)
      mu = mean(tf.reduce_mean(x, -1, keepdims=True), self.mode)
      var = variance(tf.reduce_mean(tf.math.squared_difference(x, mu), -1,
                                    keepdims=True), self.mode)
      inverse = rsqrt(tf.math.rsqrt(var + layer.epsilon), self.mode)
      return outputs((x - mu) * inverse * layer.gamma + layer.beta,
                     self.mode)
    layer.call = call

  def _patch_attention(self, layer, scores, masked):
    """Raw scores as BATCH_MATMUL's int8 output; masked scores (the range
    holds the mask adder) where the recipe feeds int8 to SOFTMAX;
    probabilities on softmax's int8 grid."""
    original = layer.masked_scores

    def masked_scores(raw, attention_mask):
      out = original(scores(raw, self.mode), attention_mask)
      return masked(out, self.mode) if masked else out

    def attention_probabilities(x):
      probabilities = tf.nn.softmax(x, axis=-1)
      return probabilities if self.mode == "calibrate" else (
          quantized_probabilities(probabilities))
    layer.masked_scores = masked_scores
    layer.attention_probabilities = attention_probabilities

  def _patch_embedding(self, layer):
    def call(ids):
      table = layer.embeddings if self.mode == "calibrate" else (
          rounded_table(layer.embeddings))
      return tf.gather(table, tf.cast(ids, tf.int32))
    layer.call = call

  def __call__(self, features, training=False):
    previous = self.mode
    self.mode = "train" if training else (
        previous if previous == "calibrate" else "infer")
    try:
      return self.model(features, training=training)
    finally:
      self.mode = previous

  @property
  def trainable_variables(self):
    return self.model.trainable_variables

  def calibrate(self, features, batch_size=16):
    """Sets every activation range to its min / max over `features`, as
    post-training calibration does."""
    from tfmodels.inference import model_inputs
    self.mode = "calibrate"
    try:
      for batch in _batches(model_inputs(features), batch_size):
        self.model(batch, training=False)
    finally:
      self.mode = "infer"
    for point in self.activations:
      if point.seen is None:
        raise QatError("a quantized layer never ran during calibration")
      # A range must hold 0 (TFLite's zero point is an integer in range).
      low, high = min(point.seen[0], 0.0), max(point.seen[1], 0.0)
      if point.symmetric:  # as tfmot's quantizer widens a batch's range
        high = max(high, -low * 127 / 128)
        low = -high * 128 / 127
      point.variables["min_var"].assign(low)
      point.variables["max_var"].assign(high)

  def ranges(self, where=""):
    """[2, n] array of the activation ranges (min row, max row) whose
    point name ends with `where` (dense_in, dense_out, norm_in, scores...;
    default all)."""
    return np.concatenate([p.range()[:, None] for p in self.activations
                           if p.name.endswith(where)], 1)


def _batches(features, batch_size):
  n = len(features["input_ids"])
  for start in range(0, n, batch_size):
    yield {k: tf.constant(v[start:start + batch_size])
           for k, v in features.items()}


def mean_loss(qat, task, features, batch_size=32):
  """The task loss of the fake-quantized model (inference ranges, no
  dropout) over `features`."""
  from tfmodels.inference import model_inputs
  total, n = 0.0, 0
  for batch in _batches(features, batch_size):
    outputs = qat(model_inputs(batch), training=False)
    rows = int(batch["input_ids"].shape[0])
    total += rows * float(task.supervised_loss(outputs, batch))
    n += rows
  return total / n


def train(qat, task, features, steps, batch_size=16, learning_rate=1e-5,
          seed=0, eval_features=None, log=None):
  """Fine-tunes the fake-quantized model on the task loss for `steps`
  AdamW steps (warm-up + linear decay: tfmodels' create_optimizer) on
  random batches of `features`; returns {steps, loss_before, loss_after,
  range_shift}: the task loss of the fake-quantized model on
  `eval_features` (default: `features`) before and after, and the mean
  |change| of the activation range bounds relative to their width."""
  from tfmodels.data.batches import random_batches
  from tfmodels.training.optimization import create_optimizer
  eval_features = eval_features or features
  before = mean_loss(qat, task, eval_features)
  ranges_before = qat.ranges()
  optimizer = create_optimizer("adamw", learning_rate, max(steps, 1),
                               warmup_steps=steps // 10)

  @tf.function
  def step(batch):
    with tf.GradientTape() as tape:
      loss, _ = task.loss(qat, batch)
    variables = qat.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  batches = random_batches(features, batch_size, steps, seed)
  for i, batch in enumerate(batches):
    loss = step(batch)
    if log and (i + 1) % max(1, steps // 5) == 0:
      log(f"QAT step {i + 1}/{steps}: loss {float(loss):.4g}")
  after = mean_loss(qat, task, eval_features)
  ranges_after = qat.ranges()
  width = np.maximum(ranges_before[1] - ranges_before[0], 1e-12)
  shift = np.abs(ranges_after - ranges_before) / width
  return {"steps": steps, "batch_size": batch_size,
          "learning_rate": learning_rate,
          "loss_before": before, "loss_after": after,
          "quantized_tensors": len(qat.activations),
          "range_shift": float(shift.mean())}


def markdown_lines(facts):
  """The report's QAT section (none without QAT)."""
  if not facts:
    return []
  lines = ["", "## Quantization-aware training", "",
           f"- {facts['steps']} steps (batch {facts['batch_size']}, "
           f"learning rate {facts['learning_rate']:g}) under fake "
           f"quantization of {facts['quantized_tensors']} tensors and every "
           "Dense kernel",
           f"- task loss of the fake-quantized model: "
           f"{facts['loss_before']:.4g} -> {facts['loss_after']:.4g}",
           f"- mean shift of the activation ranges: "
           f"{100 * facts['range_shift']:.2f}% of their width"]
  if "headline" in facts:
    lines.append(f"- fake-quantized Keras model: {facts['headline']:.2f}")
  return lines
