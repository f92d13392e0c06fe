"""How much each attention head and FFN neuron contributes, on task data.

A unit's importance is the size of what it adds to the residual stream,
averaged over real tokens (input_mask 1) of calibration batches:
  * head h of layer l: E ||c_h W_O[h]||_2, its context c_h [H] through its
    rows of the attention output projection (the norm-based view of
    Kobayashi et al., 2020);
  * neuron i of layer l: E |a_i| * ||W_2[i]||_2, its activation times its
    outgoing row (the score the issue's probe found to keep most).
Both read the encoder's own outputs (`attention_contexts`,
`ffn_activations`). The means of what each unit adds are kept too, so a
carve can fold the removed units' average into the bias (bias
compensation), and, when low-rank factors are wanted, the mean and
covariance of every block matrix's input (activation-aware SVD).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from tfmodels.checkpoints.model_dir import encoder_of

ATTENTION_MATRICES = ("query", "key", "value", "attention_output")
FFN_MATRICES = ("intermediate", "output")


@dataclasses.dataclass
class LayerStatistics:
  """One block's sums over real tokens (divide by `tokens` for means)."""
  head_scores: np.ndarray           # [N] mean contribution norm
  head_means: np.ndarray            # [N, D] mean contribution vector
  neuron_scores: np.ndarray         # [I]
  neuron_means: np.ndarray          # [I] mean activation
  # matrix name -> (mean [n], covariance [n, n]) of its input; only when
  # collected with inputs=True.
  inputs: dict = dataclasses.field(default_factory=dict)


def _layer_weights(encoder, layer):
  """(attention output kernel [A, D], FFN output kernel [I, D]) of a BERT
  block as numpy."""
  attention = encoder.get_layer(f"layer_{layer}_attention").attention
  ffn = encoder.get_layer(f"layer_{layer}_ffn")
  return (_kernel(attention.output_dense), _kernel(ffn.output_dense))


def _kernel(dense):
  kernel = getattr(dense, "kernel", None)
  if kernel is None:
    raise ValueError(f"{dense.name}: only a plain Dense layer can be scored "
                     f"(this one is {type(dense).__name__})")
  return kernel.numpy().astype(np.float64)


class _Moments:
  """Running token-weighted sums of x and x x^T for one matrix's input."""

  def __init__(self, width):
    self.sum = np.zeros(width)
    self.outer = np.zeros((width, width))

  def add(self, x, weights):
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)[weights > 0]
    self.sum += x.sum(0)
    self.outer += x.T @ x

  def finish(self, tokens):
    mean = self.sum / tokens
    return mean, self.outer / tokens - np.outer(mean, mean)


def collect(model, config, batches, inputs=False):
  """[LayerStatistics per layer] and the token count, from `batches`.

  Args:
    model: one of our task models (or an encoder) built from `config`, a
      `model_type: bert` stack without ALBERT sharing or Kronecker layers.
    config: its ModelConfig.
    batches: iterable of feature dicts (input_ids, input_mask, segment_ids).
    inputs: also collect every block matrix's input moments (for
      activation-aware low-rank factors; costs an n x n product per matrix).
  """
  c = config
  if c.model_type != "bert" or c.sharing_mode != "none" or c.uses_kronecker:
    raise ValueError(f"{c.name}: carving needs a BERT-type encoder without "
                     "ALBERT sharing or Kronecker layers")
  encoder = encoder_of(model)
  L, N, Hs = c.num_hidden_layers, c.num_attention_heads, c.attention_head_size
  weights = [_layer_weights(encoder, l) for l in range(L)]
  out_norms = [np.linalg.norm(w_out, axis=1) for _, w_out in weights]
  head_scores = np.zeros((L, N))
  head_means = np.zeros((L, N, c.hidden_size))
  neuron_scores = np.zeros((L, c.intermediate_size))
  neuron_means = np.zeros((L, c.intermediate_size))
  moments = [{} for _ in range(L)]
  tokens = 0.0
  for batch in batches:
    features = {k: tf.constant(batch[k]) for k in
                ("input_ids", "input_mask", "segment_ids")}
    out = encoder(features, training=False)
    mask = np.asarray(batch["input_mask"], np.float64).reshape(-1)
    tokens += mask.sum()
    for l in range(L):
      w_attention_out, _ = weights[l]
      context = out["attention_contexts"][l].numpy().reshape(-1, N, Hs)
      per_head = np.einsum("tnh,nhd->tnd", context.astype(np.float64),
                           w_attention_out.reshape(N, Hs, -1))
      head_scores[l] += mask @ np.linalg.norm(per_head, axis=-1)
      head_means[l] += np.einsum("t,tnd->nd", mask, per_head)
      act = out["ffn_activations"][l].numpy().reshape(
          -1, c.intermediate_size).astype(np.float64)
      neuron_scores[l] += mask @ np.abs(act) * out_norms[l]
      neuron_means[l] += mask @ act
      if inputs:
        previous = (out["embedding_output"] if l == 0
                    else out["hidden_states"][l - 1])
        sources = {"query": previous,
                   "attention_output": out["attention_contexts"][l],
                   "intermediate": out["attention_outputs"][l],
                   "output": out["ffn_activations"][l]}
        for name, tensor in sources.items():
          x = tensor.numpy()
          x = x.reshape(-1, int(np.prod(x.shape[2:])))
          moments[l].setdefault(name, _Moments(x.shape[-1])).add(x, mask)
  if not tokens:
    raise ValueError("no real tokens in the calibration batches")
  layers = []
  for l in range(L):
    stats = LayerStatistics(head_scores[l] / tokens, head_means[l] / tokens,
                            neuron_scores[l] / tokens,
                            neuron_means[l] / tokens)
    for name, m in moments[l].items():
      stats.inputs[name] = m.finish(tokens)
    # q, k and v read the same input.
    if "query" in stats.inputs:
      stats.inputs["key"] = stats.inputs["value"] = stats.inputs["query"]
    layers.append(stats)
  return layers, int(tokens)


def teacher_calibration(task, head, teacher_dir, examples, seed):
  """(the task's training inputs, at most `examples` of them chosen by
  `seed`: what the importance scores are taken on). ValueError naming
  --teacher_dir when its `head` is not the one `task` trains."""
  if head != task.head():
    raise ValueError(f"--teacher_dir {teacher_dir}: a {head.kind} head, the "
                     f"task {task.name} needs {task.head().kind}")
  features = {k: v for k, v in task.features("train").items()
              if k in ("input_ids", "input_mask", "segment_ids")}
  return features, calibration_sample(features, examples, seed)


def calibration_sample(features, examples, seed):
  """At most `examples` rows of `features` (a feature dict), chosen by
  `seed`, in their order."""
  n = len(features["input_ids"])
  rows = np.sort(np.random.default_rng(seed).choice(
      n, min(n, examples), replace=False))
  return {k: v[rows] for k, v in features.items()}


def top_units(scores, keep):
  """Indices of the `keep` highest scores, in their original order (ties go
  to the lower index, so the choice is deterministic)."""
  scores = np.asarray(scores)
  if not 0 < keep <= len(scores):
    raise ValueError(f"cannot keep {keep} of {len(scores)} units")
  order = np.lexsort((np.arange(len(scores)), -scores))
  return np.sort(order[:keep])
