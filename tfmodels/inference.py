"""Running a model over many examples in memory that does not grow with them.

Our models return every encoder output (hidden states, per-head attention
scores, ...) beside the head's, and a call holds them all until it ends:
64 rows of MiniLM at L = 384 hold 450 MB of scores per layer, and
`convert_tflite` of its QA model peaked at 11.8 GB scoring the dev set.
Here the model computes only the outputs asked for (`outputs_only`: the
encoder's other tensors are freed as its layers go), on batches of at most
MAX_TOKENS positions and MAX_PAIRS query-key pairs (rows x length^2: the
attention scores grow with the square of the length), and with `trim` on
the real rows only: a batch is cut after its longest row plus one padding
position (which MobileBERT's 3-gram embedding reads), as no metric reads
the outputs at padding.

The pair bound matters beyond the call: TensorFlow's CPU allocator (with
oneDNN, a pool that only grows) keeps the largest batch's memory for the
rest of the process, and the TFLite converter, which allocates its own,
cannot reuse it. `convert_tflite` compares 32 untrimmed rows of MiniLM at
L = 384 with TFLite: in batches of 21 rows they left 0.9 GB behind, one
row at a time 10 MB (the command's peak: 3.0 -> 2.3 GB by this alone).

    for rows, outputs in output_batches(model, features, ["start_logits"]):
      ...
    predict(model, features, ["start_logits", "end_logits"], trim=True)
"""

import numpy as np
import tensorflow as tf

from tfmodels.models import outputs_only

INPUTS = ("input_ids", "input_mask", "segment_ids")
MAX_TOKENS = 8192  # positions per batch: 21 rows at L = 384, 64 at L = 128
# Query-key pairs per batch (rows x run length^2): 16 rows at L = 128, one
# at 384 or 512; trimmed WordNet QA dev batches (21 rows of at most 109
# positions at L = 384) fit whole.
MAX_PAIRS = 1 << 18
MAX_ROWS = 64


def model_inputs(features):
  """The encoder's inputs of a feature dict (labels and the rest left)."""
  return {k: features[k] for k in INPUTS}


def rows_per_batch(seq_length, max_tokens=MAX_TOKENS, max_rows=MAX_ROWS):
  """Rows a batch starts from: at most `max_tokens` positions of L."""
  return max(1, min(max_rows, max_tokens // max(seq_length, 1)))


def rows_within_pairs(rows, length, max_pairs=MAX_PAIRS):
  """At most `rows` rows, and no more than `max_pairs` query-key pairs
  (rows x length^2) when each runs `length` positions (one row at least)."""
  return max(1, min(rows, max_pairs // max(length, 1) ** 2))


def _sequence_outputs(model, keys):
  """The `keys` whose second dimension is the sequence (any length) when
  `model` takes any length; None when it takes one length only."""
  if not getattr(model, "_is_graph_network", False) or any(
      len(t.shape) != 2 or t.shape[1] is not None
      for t in tf.nest.flatten(model.inputs)):
    return None
  return {k for k in keys if len(model.output[k].shape) >= 2
          and model.output[k].shape[1] is None}


def output_batches(model, features, keys, trim=False,
                   max_tokens=MAX_TOKENS, max_pairs=MAX_PAIRS):
  """Yields (rows slice, {key: numpy outputs}) batch by batch. With `trim`
  (and a model that takes any length), positions after a batch's longest
  row + 1 are not run, and sequence outputs are zero there."""
  model_of_keys = outputs_only(model, keys)
  inputs = model_inputs(features)
  n = len(inputs["input_ids"])
  seq_length = np.shape(inputs["input_ids"])[1] if n else 0
  sequence = _sequence_outputs(model_of_keys, keys) if trim else None
  step = rows_per_batch(seq_length, max_tokens)
  real = None if sequence is None else np.asarray(
      inputs["input_mask"]).sum(-1)

  def run_length(begin, end):
    if real is None:
      return seq_length
    return min(seq_length, int(real[begin:end].max()) + 1)

  begin = 0
  while begin < n:
    end = min(n, begin + step)
    length = run_length(begin, end)
    fit = rows_within_pairs(end - begin, length, max_pairs)
    if fit < end - begin:  # fewer rows; they run no longer than before
      end = begin + fit
      length = run_length(begin, end)
    rows, begin = slice(begin, end), end
    result = model_of_keys({k: tf.constant(np.asarray(v[rows])[:, :length])
                            for k, v in inputs.items()}, training=False)
    out = {k: result[k].numpy() for k in keys}
    for k in sequence or ():
      pad = [(0, 0), (0, seq_length - length)] + [(0, 0)] * (out[k].ndim - 2)
      out[k] = np.pad(out[k], pad)
    yield rows, out


def predict(model, features, keys, trim=False, max_tokens=MAX_TOKENS,
            max_pairs=MAX_PAIRS):
  """{key: outputs over every row}, concatenated."""
  out = {k: [] for k in keys}
  for _, batch in output_batches(model, features, keys, trim, max_tokens,
                                 max_pairs):
    for k, value in batch.items():
      out[k].append(value)
  return {k: np.concatenate(v) for k, v in out.items()}
