"""Fold NoNorms into neighbouring weights, exactly, for export.

NoNorm is `n * h + m` per channel, so a NoNorm that feeds only Dense layers
folds into their kernels. Most of ours also feed a residual, so this keeps
each residual stream *unscaled*: the graph carries z with true = g * z + c
per channel, and every consumer is rewritten instead of the stream:

  Dense reading the stream:  W' = diag(g) W,  b' = b + c W
  norm(branch + stream):     z' = z + (branch + c) / g
                             -> branch's last Dense: W' = W / g,
                                b' = (b + c) / g; the stream becomes (n g, m)
  Dense + NoNorm (no residual, MobileBERT's bottlenecks): W' = W n, b' = b n + m

Every folded NoNorm becomes (1, 0), which the converter removes, and the
stream is made true again (the norm keeps (n g, m)) after the last layer, or
sooner when g leaves [1e-4, 1e4] so that 1/g stays well conditioned, or
when its channels' |g| spread more than MAX_SPREAD apart: int8 holds the
carried z in one range per tensor, so channel j loses log2(spread) bits
there. NoNorms fitted to a teacher's LayerNorms (1 / sigma per channel)
spread 5-300x each and their products 4e4x; folding them all took a carved
MiniLM's int8 QA F1 from 67 to 1.7 (docs/design.md, "Students carved from the
teacher"). NoNorms trained in from 1 (MobileBERT) stay close and fold. In real
arithmetic the sequence output is unchanged; in float32 it moves by rounding.
Other outputs (hidden states, FFN outputs) are the unscaled z: this model is
for export only.

Where a norm must stay, the same rewrite can still choose the scale the
stream carries after it: with calibration ranges (`channel_ranges`), the
norm writes z = true / s with s = (max|true| per channel)^EQUALIZE_ALPHA
and its readers' kernel rows take s (SmoothQuant's migration, Xiao et al.
2023). The outlier channels of a LayerNorm-fitted stream then stop eating
the one int8 range every other channel of the matmuls' inputs shares.

On MobileBERT this removes 6 element-wise MUL + ADD pairs per layer
(docs/design.md, "Folding NoNorm").

    folded, facts = fold_nonorms(model, config)
    ranges = channel_ranges(model, calibration_features)
    folded, facts = fold_nonorms(model, config, ranges=ranges)
"""

import numpy as np

G_RANGE = (1e-4, 1e4)
# Largest max|g| / min|g| a carried stream may have: 2 bits of int8.
MAX_SPREAD = 4.0
# How much of a channel's range an equalized stream moves into the weights
# (SmoothQuant's alpha: 0.5 splits the outliers between the two operands).
EQUALIZE_ALPHA = 0.5


class FoldError(ValueError):
  """The model has no NoNorm that can be folded exactly (says why)."""


class _Stream:
  """A residual stream's per-channel map from the graph's z to the truth,
  and the norm that last wrote it (where the truth is restored)."""

  def __init__(self, width, max_spread=MAX_SPREAD, scales=None):
    self.max_spread = max_spread
    self.scales = scales or {}  # id(norm): the scale to carry after it
    self.g = np.ones(width)
    self.c = np.zeros(width)
    self.norm = None
    self.true_norm = None  # (gamma, beta) that make `norm` write the truth
    self.how = None  # what `norm` became: "folded" or "equalized"

  @property
  def is_true(self):
    return bool(np.all(self.g == 1.0) and np.all(self.c == 0.0))


def _dense(layer):
  """(kernel, bias) variables of a plain Dense; refuses anything else."""
  kernel = getattr(layer, "kernel", None)
  bias = getattr(layer, "bias", None)
  if kernel is None or bias is None or len(kernel.shape) != 2:
    raise FoldError(f"{layer.name}: only plain Dense layers with a bias fold "
                    f"(this is {type(layer).__name__})")
  return kernel, bias


def _read(stream, layer):
  """`layer` (a Dense) now reads z instead of the true stream."""
  kernel, bias = _dense(layer)
  if stream.is_true:
    return
  w = kernel.numpy().astype(np.float64)
  b = bias.numpy().astype(np.float64)
  kernel.assign((stream.g[:, None] * w).astype(np.float32))
  bias.assign((b + stream.c @ w).astype(np.float32))


def _norm_weights(norm):
  if type(norm).__name__ != "NoNorm":
    raise FoldError(f"{norm.name}: {type(norm).__name__} is not a NoNorm")
  return (norm.gamma.numpy().astype(np.float64),
          norm.beta.numpy().astype(np.float64))


def _set_norm(norm, gamma, beta):
  norm.gamma.assign(np.asarray(gamma, np.float32))
  norm.beta.assign(np.asarray(beta, np.float32))


def _into_output(layer, norm, facts):
  """NoNorm(Dense(x)) with nothing else reading the Dense: fold into it."""
  n, m = _norm_weights(norm)
  kernel, bias = _dense(layer)
  kernel.assign((kernel.numpy() * n[None, :]).astype(np.float32))
  bias.assign((bias.numpy() * n + m).astype(np.float32))
  _set_norm(norm, np.ones_like(n), np.zeros_like(m))
  facts["folded"] += 1


def _residual(stream, branch, norm, facts):
  """norm(branch + stream): the branch's last Dense absorbs 1/g and c."""
  kernel, bias = _dense(branch)
  if not stream.is_true:
    w = kernel.numpy().astype(np.float64)
    b = bias.numpy().astype(np.float64)
    kernel.assign((w / stream.g[None, :]).astype(np.float32))
    bias.assign(((b + stream.c) / stream.g).astype(np.float32))
  _take_norm(stream, norm, facts)


def _take_norm(stream, norm, facts):
  """The stream passes `norm`: its scale moves into the stream, unless the
  product would leave G_RANGE or spread wider than the stream's bound;
  then the norm restores the truth."""
  n, m = _norm_weights(norm)
  g = n * stream.g
  magnitude = np.abs(g)
  stream.norm, stream.true_norm = norm, (g, m)
  well_conditioned = np.all(np.isfinite(g)) and np.all(
      (magnitude >= G_RANGE[0]) & (magnitude <= G_RANGE[1]))
  if well_conditioned and magnitude.max() <= (
      stream.max_spread * magnitude.min()):
    stream.g, stream.c, stream.how = g, m, "folded"
    _set_norm(norm, np.ones_like(n), np.zeros_like(m))
  elif np.all(np.isfinite(g)) and id(norm) in stream.scales:
    s = stream.scales[id(norm)]
    _set_norm(norm, g / s, m / s)
    stream.g, stream.c, stream.how = s, np.zeros_like(m), "equalized"
  else:
    _set_norm(norm, g, m)
    stream.g, stream.c, stream.how = np.ones_like(g), np.zeros_like(m), "kept"
  facts[stream.how] += 1


def _mobilebert_block(block, x, facts):
  """One MobileBertBlock; `x` is its input stream, updated to its output."""
  c = block.config
  attention = block.attention
  layer_input = x
  x_readers = [attention.query_dense, attention.key_dense,
               attention.value_dense]
  if c.use_bottleneck:
    _read(x, block.bottleneck_input)
    _into_output(block.bottleneck_input, block.bottleneck_input_norm, facts)
    layer_input = _Stream(c.intra_bottleneck_size, x.max_spread, x.scales)
    if c.use_bottleneck_attention:
      x_readers = []                      # q, k, v read layer_input (true)
    elif c.key_query_shared_bottleneck:
      _read(x, block.shared_qk)
      _into_output(block.shared_qk, block.shared_qk_norm, facts)
      x_readers = [attention.value_dense]
  for dense in x_readers:
    _read(x, dense)
  h = layer_input
  _residual(h, attention.output_dense, block.attention_norm, facts)
  for ffn in block.ffns:
    _feed_forward(ffn, h, facts)
  if not c.use_bottleneck:
    return h
  _read(h, block.bottleneck_output)
  _residual(x, block.bottleneck_output, block.bottleneck_output_norm, facts)
  return x


def _feed_forward(ffn, stream, facts):
  _read(stream, ffn.intermediate)
  _residual(stream, ffn.output_dense, ffn.norm, facts)


def _attention_block(block, stream, facts):
  attention = block.attention
  for dense in (attention.query_dense, attention.key_dense,
                attention.value_dense):
    _read(stream, dense)
  _residual(stream, attention.output_dense, block.norm, facts)


_FOLDED_TYPES = ("Embeddings", "MobileBertBlock", "SelfAttentionBlock",
                 "FeedForward")


def _layers_by_name(model):
  """The encoder's embeddings and blocks by name (one encoder only)."""
  found = {}
  embeddings = 0
  for layer in model.submodules:
    if type(layer).__name__ not in _FOLDED_TYPES:
      continue
    embeddings += type(layer).__name__ == "Embeddings"
    found.setdefault(layer.name, layer)
  if embeddings != 1:
    raise FoldError(f"the model has {embeddings} embedding layers; fold "
                    f"exactly one encoder")
  return found


def _fold_in_place(model, config, max_spread, scales):
  """Rewrites `model`'s weights; returns the counts."""
  c = config
  if c.normalization_type != "no_norm":
    raise FoldError(f"normalization_type is {c.normalization_type!r}; only "
                    f"NoNorm folds (convert with --substitute "
                    f"layernorm=nonorm first)")
  if c.model_type != "mobilebert" and c.sharing_mode != "none":
    raise FoldError(f"sharing_mode {c.sharing_mode!r}: a shared layer would "
                    f"need a different fold at each use")
  layers = _layers_by_name(model)
  embeddings = layers.get("embeddings")
  if embeddings is None or embeddings.projection is not None and (
      embeddings.project_last):
    raise FoldError("no embeddings layer, or a projection after its norm")
  facts = {"folded": 0, "equalized": 0, "kept": 0}
  stream = _Stream(embeddings.norm.gamma.shape[0], max_spread, scales)
  _take_norm(stream, embeddings.norm, facts)
  for i in range(c.num_hidden_layers):
    if c.model_type == "mobilebert":
      stream = _mobilebert_block(layers[f"layer_{i}"], stream, facts)
    else:
      _attention_block(layers[f"layer_{i}_attention"], stream, facts)
      _feed_forward(layers[f"layer_{i}_ffn"], stream, facts)
  if not stream.is_true:                      # the output must be the truth
    _set_norm(stream.norm, *stream.true_norm)
    facts[stream.how] -= 1
    facts["kept"] += 1
  if not scales:
    del facts["equalized"]
  return facts


def _no_norms(model):
  return [l for l in model.submodules if type(l).__name__ == "NoNorm"]


def channel_ranges(model, features, batch_size=16):
  """[max |output| per channel] of each NoNorm of `model` (in submodule
  order) over `features` (our feature dict): what `fold_nonorms` equalizes
  the streams by. Runs the model eagerly, one batch at a time."""
  import tensorflow as tf
  from tfmodels import inference
  # Built before the norms record: building calls them on symbolic inputs.
  view = inference.outputs_only(model, ["sequence_output"])
  norms = _no_norms(model)
  seen = [None] * len(norms)

  def recording(i, call):
    def record(inputs, *args, **kwargs):
      out = call(inputs, *args, **kwargs)
      flat = tf.reshape(tf.abs(out), [-1, out.shape[-1]])
      top = tf.reduce_max(flat, 0).numpy()
      seen[i] = top if seen[i] is None else np.maximum(seen[i], top)
      return out
    return record

  for i, norm in enumerate(norms):
    norm.call = recording(i, norm.call)
  try:  # every NoNorm is on the way to sequence_output
    for _ in inference.output_batches(view, features, ["sequence_output"],
                                      max_tokens=batch_size * 128):
      pass
  finally:
    for norm in norms:
      del norm.call  # the class's call again
  if any(r is None for r in seen):
    raise FoldError("a NoNorm never ran on the calibration features")
  return seen


def _equalizing_scales(norms, ranges, alpha):
  """{id(norm): s}: s = range^alpha per channel, at mean 1."""
  if len(ranges) != len(norms):
    raise FoldError(f"{len(ranges)} channel ranges for {len(norms)} NoNorms")
  scales = {}
  for norm, top in zip(norms, ranges):
    top = np.asarray(top, np.float64)
    top = np.maximum(top, max(top.max(), 1e-30) * 1e-6) ** alpha
    scales[id(norm)] = top / top.mean()
  return scales


def fold_nonorms(model, config, max_spread=MAX_SPREAD, ranges=None,
                 alpha=EQUALIZE_ALPHA):
  """(a copy of `model` with its NoNorms folded, {"folded", "kept"} counts,
  and "equalized" with `ranges`).

  Args:
    model: our encoder or task model (built by tfmodels from `config`).
    config: its ModelConfig.
    max_spread: the widest max|g| / min|g| a carried stream may have
      (np.inf: fold wherever it is exact).
    ranges: `channel_ranges(model, ...)`: a norm that cannot fold then
      equalizes the stream after it (the module docstring says how).
    alpha: the share of each channel's range moved into the weights.

  Raises:
    FoldError: the model cannot be folded exactly (LayerNorm, shared or
      Kronecker layers); the message says which.
  """
  import tf_keras as keras
  copy = keras.models.clone_model(model)
  copy.set_weights(model.get_weights())
  scales = ranges is not None and _equalizing_scales(_no_norms(copy), ranges,
                                                     alpha)
  return copy, _fold_in_place(copy, config, max_spread, scales)
