"""Op substitution before conversion: LayerNorm -> NoNorm, gelu -> relu.

MobileBERT's operational optimizations (paper section 3.3, Table 7) made
latency 3x lower, but they are trained in. This applies them to any of our
already trained encoders as a conversion step:

  * each LayerNorm becomes a NoNorm (gamma * h + beta) whose gamma / beta are
    fitted per channel by least squares on calibration data, so that it
    approximates the LayerNorm on the activations it actually sees: the
    regression of the original LayerNorm's output on the substituted model's
    input to that norm, refitted for `rounds` passes so that later norms see
    the drift of earlier ones;
  * gelu becomes relu (the config's hidden_act; no parameters).

The substituted model has the same variables (LayerNorm and NoNorm both hold
`gamma` and `beta`), so it is built from the changed config and loaded from
the original's weights. `recover` then distils it from the original with our
feature-map and attention-transfer losses (tfmodels/distillation/losses.py)
for a few steps. Or `blend` makes the swap over the first steps
of the student's training: each substituted op's output moves from the
original's to its own as a share rises from 0 to 1.

    spec = parse_spec("layernorm=nonorm,gelu=relu")
    student, config, fit = substitute(model, config, head, spec, features)
    history = recover(model, student, features, steps=200)
"""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfmodels.data.batches import batches, random_batches
from tfmodels.layers.normalization import NoNorm

# What can be substituted: {op: (replacement, config field, old, new value)}.
SUBSTITUTIONS = {
    "layernorm": ("nonorm", "normalization_type", "layer_norm", "no_norm"),
    "gelu": ("relu", "hidden_act", "gelu", "relu"),
}


class SubstitutionError(ValueError):
  """A substitution that cannot be applied (one line)."""


def parse_spec(text):
  """"layernorm=nonorm,gelu=relu" -> {"layernorm": "nonorm", ...}."""
  spec = {}
  for item in filter(None, (s.strip() for s in (text or "").split(","))):
    old, _, new = item.partition("=")
    if old not in SUBSTITUTIONS or SUBSTITUTIONS[old][0] != new:
      raise SubstitutionError(
          f"--substitute {text}: {item!r} is not one of "
          + ", ".join(f"{k}={v[0]}" for k, v in SUBSTITUTIONS.items()))
    spec[old] = new
  if not spec:
    raise SubstitutionError(f"--substitute {text!r}: nothing to substitute")
  return spec


def substituted_config(config, spec):
  """The config with the substitutions; refuses ones with nothing to do."""
  changes = {}
  for old in spec:
    _, field, before, after = SUBSTITUTIONS[old]
    if getattr(config, field) != before:
      raise SubstitutionError(
          f"--substitute {old}={spec[old]}: the model's {field} is "
          f"{getattr(config, field)!r}, not {before!r}")
    changes[field] = after
  return config.replace(**changes)


class _NormStatistics:
  """Per-channel sums of x, x^2, y, x*y over real tokens, per norm layer."""

  def __init__(self):
    self.sums = {}
    self.token_weights = None  # [B, T, 1] of the batch being run

  def add(self, key, x, y):
    w = self.token_weights
    x = tf.cast(x, tf.float64)
    y = tf.cast(y, tf.float64)
    axes = list(range(len(x.shape) - 1))
    if w is None or len(x.shape) != 3:
      w = tf.ones_like(x[..., :1])
    parts = [tf.reduce_sum(w * v, axes).numpy()
             for v in (tf.ones_like(x[..., :1]), x, x * x, y, x * y)]
    old = self.sums.get(key)
    self.sums[key] = parts if old is None else [a + b for a, b in
                                                zip(old, parts)]

  def fit(self, key):
    """(gamma, beta) of the per-channel least-squares line y = g x + b."""
    n, sx, sxx, sy, sxy = self.sums[key]
    variance = n * sxx - sx * sx
    gamma = np.where(variance > 1e-12 * n * n,
                     (n * sxy - sx * sy) / np.maximum(variance, 1e-300), 0.0)
    beta = (sy - gamma * sx) / n
    return gamma.astype(np.float32), beta.astype(np.float32)


def _norm_layers(model, kind):
  """{gamma variable name: layer} of the model's `kind` norm layers."""
  return {layer.gamma.name: layer for layer in model.submodules
          if isinstance(layer, kind)}


def _record(layers, statistics, target=None):
  """Patches each layer's call to hand (input, output) to the statistics;
  with `target` ({key: outputs list}) the output recorded is the target's.
  Returns a function that undoes the patch."""
  originals = {}
  for key, layer in layers.items():
    originals[key] = layer.call

    def call(inputs, *args, _key=key, _call=layer.call, **kwargs):
      outputs = _call(inputs, *args, **kwargs)
      if target is None:
        statistics.add(_key, inputs, outputs)
      else:
        statistics.add(_key, inputs, target[_key].pop(0))
      return outputs
    layer.call = call

  def undo():
    for key, layer in layers.items():
      layer.call = originals[key]
  return undo


def _batches(features, batch_size):
  for batch in batches(features, batch_size):
    yield {k: tf.constant(v) for k, v in batch.items()}


def _call_outputs(model, layers, batch):
  """{key: [output per call, in call order]} of `layers` on one batch."""
  outputs = {key: [] for key in layers}
  originals = {}
  for key, layer in layers.items():
    originals[key] = layer.call

    def call(inputs, *args, _key=key, _call=layer.call, **kwargs):
      result = _call(inputs, *args, **kwargs)
      outputs[_key].append(result)
      return result
    layer.call = call
  try:
    model(batch, training=False)
  finally:
    for key, layer in layers.items():
      layer.call = originals[key]
  return outputs


def _assign(no_norms, statistics):
  for key, layer in no_norms.items():
    gamma, beta = statistics.fit(key)
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)


def _call_order(model, layers, batch):
  """The keys of `layers` in the order the model calls them."""
  order = []
  originals = {}
  for key, layer in layers.items():
    originals[key] = layer.call

    def call(inputs, *args, _key=key, _call=layer.call, **kwargs):
      if _key not in order:
        order.append(_key)
      return _call(inputs, *args, **kwargs)
    layer.call = call
  try:
    model(batch, training=False)
  finally:
    for key, layer in layers.items():
      layer.call = originals[key]
  return order


def fit_nonorms(original, student, features, rounds=2, batch_size=8):
  """Fits every NoNorm of `student` that replaced a LayerNorm of `original`
  (matched by variable name) to that LayerNorm; returns how many.

  The norms are fitted one at a time in the order the model runs them,
  each on the student's own inputs to it (every norm before it already
  fitted) against the original's LayerNorm output on the same examples:
  without normalization the residual stream compounds any misfit, so a
  norm fitted on the original's inputs, or all at once, lets a deep model
  blow up. `rounds` more passes then refit every norm together. Only real
  tokens (input_mask 1) count.
  """
  layer_norms = _norm_layers(original, keras.layers.LayerNormalization)
  no_norms = {k: v for k, v in _norm_layers(student, NoNorm).items()
              if k in layer_norms}
  if not no_norms:
    return 0
  all_batches = list(_batches(features, batch_size))
  order = _call_order(student, no_norms, all_batches[0])
  # The original's LayerNorm outputs are the same in every pass: one
  # forward per batch.
  wanted = {k: layer_norms[k] for k in order}
  targets_of = [_call_outputs(original, wanted, batch)
                for batch in all_batches]
  passes = [[key] for key in order] + [order] * rounds
  for keys in passes:
    statistics = _NormStatistics()
    recorder = {key: no_norms[key] for key in keys}
    for batch, targets in zip(all_batches, targets_of):
      statistics.token_weights = tf.cast(batch["input_mask"],
                                         tf.float64)[..., None]
      targets = {k: list(targets[k]) for k in keys}
      undo = _record(recorder, statistics, targets)
      try:
        student(batch, training=False)
      finally:
        undo()
    _assign(recorder, statistics)
  return len(no_norms)


def norm_fit_errors(original, student, features, batch_size=16):
  """{norm variable: mean squared error, over real tokens, of each NoNorm's
  output in the substituted model against its LayerNorm's output in the
  original on the same examples (what the fit minimises)}, and the same
  error for an identity NoNorm (gamma 1, beta 0) as a yardstick."""
  layer_norms = _norm_layers(original, keras.layers.LayerNormalization)
  no_norms = {k: v for k, v in _norm_layers(student, NoNorm).items()
              if k in layer_norms}
  sums = {key: [0.0, 0.0, 0.0] for key in no_norms}  # fitted, identity, n
  for batch in _batches(features, batch_size):
    want = _call_outputs(original, layer_norms, batch)
    seen = {key: [] for key in no_norms}
    undo = _record(no_norms, _Collect(seen))
    try:
      student(batch, training=False)
    finally:
      undo()
    weights = tf.cast(batch["input_mask"], tf.float32)[..., None]
    for key, pairs in seen.items():
      for (x, y), target in zip(pairs, want[key]):
        w = weights if len(y.shape) == 3 else tf.ones_like(y[..., :1])
        total = sums[key]
        total[0] += float(tf.reduce_sum(w * tf.square(y - target)))
        total[1] += float(tf.reduce_sum(w * tf.square(x - target)))
        total[2] += float(tf.reduce_sum(w * tf.ones_like(y)))
  return {key: {"fitted": f / n, "identity": i / n}
          for key, (f, i, n) in sums.items() if n}


class _Collect:
  """A `_record` sink that keeps each call's (input, output) pair."""

  def __init__(self, seen):
    self.seen = seen

  def add(self, key, x, y):
    self.seen[key].append((x, y))


def substitute(original, config, head, spec, features, rounds=2,
               batch_size=8):
  """(student model, its config, fit facts) with the substitutions applied.

  Args:
    original: our task model (or encoder) built from `config`.
    config: its ModelConfig.
    head: tfmodels.checkpoints.model_dir.Head of `original`.
    spec: parse_spec's dict.
    features: our feature dict of calibration examples.
  """
  from tfmodels.checkpoints.model_dir import build_model
  new_config = substituted_config(config, spec)
  student = build_model(new_config, head)
  weights = original.get_weights()
  if [w.shape for w in student.weights] != [w.shape for w in weights]:
    raise SubstitutionError("the substituted model's variables do not line "
                            "up with the original's")
  student.set_weights(weights)
  facts = {"substitutions": dict(spec), "fitted_norms": 0}
  if "layernorm" in spec:
    facts["fitted_norms"] = fit_nonorms(original, student, features, rounds,
                                        batch_size)
  return student, new_config, facts


def blend(original, student, config, spec, share):
  """Patches `student` (substituted from `original`, whose config is
  `config`) so that each substituted op returns (1 - share) x the
  original op's output + share x its own: with `share` rising from 0 to 1
  over the first steps of training, the student starts as the original
  and ends as the substituted model, learning the task meanwhile.
  `share()` is read at every call (a tensor: the training step's). The
  original's LayerNorms keep their weights (they are not the student's
  variables); at share 1 the student is exactly the substituted model.
  Returns how many norms and activations blend."""
  from tfmodels.layers.activations import get_activation
  blended = {"norms": 0, "activations": 0}
  if "layernorm" in spec:
    layer_norms = _norm_layers(original, keras.layers.LayerNormalization)
    for key, layer in _norm_layers(student, NoNorm).items():
      if key in layer_norms:
        layer.call = _blended(layer.call, layer_norms[key], share)
        blended["norms"] += 1
  if "gelu" in spec:
    before = get_activation(config.hidden_act)
    after = get_activation(SUBSTITUTIONS["gelu"][3])
    for layer in student.submodules:
      if getattr(layer, "activation", None) is after:
        layer.activation = _blended(after, before, share)
        blended["activations"] += 1
  return blended


def _blended(own, original, share):
  def call(inputs, *args, **kwargs):
    mine = own(inputs, *args, **kwargs)
    s = tf.cast(share(), mine.dtype)
    # Past the blend the original op is not run at all (a step costs the
    # swapped model's work alone).
    return tf.cond(s < 1, lambda: s * mine + (1 - s) * tf.cast(
        original(inputs), mine.dtype), lambda: mine)
  return call


def distillation_loss(teacher_out, student_out, input_mask):
  """Feature-map transfer on every hidden state (and the embeddings) plus
  attention transfer on every layer's scores, summed (MobileBERT eqs. 2-3).

  Attention transfer compares head with head, so a layer whose student has
  other heads than its teacher (a carved student) contributes feature maps
  only."""
  from tfmodels.distillation import losses
  pairs = list(zip(teacher_out["hidden_states"], student_out["hidden_states"]))
  pairs.append((teacher_out["embedding_output"],
                student_out["embedding_output"]))
  feature_map = tf.add_n([losses.feature_map_mse(t, s, input_mask)
                          for t, s in pairs])
  attention = [
      losses.attention_transfer_loss(t, s, input_mask) for t, s in zip(
          teacher_out["attention_scores"], student_out["attention_scores"])
      if t.shape[1] == s.shape[1]]
  return feature_map, tf.add_n(attention) if attention else tf.constant(0.0)


def recover(original, student, features, steps, batch_size=16,
            learning_rate=1e-4, seed=0, log=None, eval_features=None):
  """Distils `student`'s encoder from `original`'s for `steps` Adam steps on
  random batches of `features`; returns {"loss_before", "loss_after",
  "feature_map_before", ...}: the distillation loss on `eval_features`
  (default: all of `features`) before and after."""
  from tfmodels.checkpoints.model_dir import encoder_of
  teacher, pupil = encoder_of(original), encoder_of(student)
  optimizer = keras.optimizers.Adam(learning_rate)

  def loss_on(batch):
    t = teacher(batch, training=False)
    s = pupil(batch, training=False)
    fm, at = distillation_loss(t, s, batch["input_mask"])
    return fm, at

  def evaluate():
    totals = np.zeros(2)
    n = 0
    for batch in _batches(eval_features or features, batch_size):
      fm, at = loss_on(batch)
      rows = int(batch["input_ids"].shape[0])
      totals += rows * np.array([float(fm), float(at)])
      n += rows
    return totals / n

  @tf.function
  def train_step(batch):
    with tf.GradientTape() as tape:
      fm, at = loss_on(batch)
      loss = fm + at
    variables = pupil.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  before = evaluate()
  for step, batch in enumerate(random_batches(features, batch_size, steps,
                                              seed)):
    loss = train_step(batch)
    if log and (step + 1) % max(1, steps // 5) == 0:
      log(f"recovery step {step + 1}/{steps}: loss {float(loss):.4g}")
  after = evaluate() if steps else before
  return {"steps": steps, "feature_map_before": float(before[0]),
          "attention_before": float(before[1]),
          "feature_map_after": float(after[0]),
          "attention_after": float(after[1]),
          "loss_before": float(before.sum()), "loss_after": float(after.sum())}
