"""Carve a smaller student out of a trained BERT-type model's own weights.

Per layer the `heads` attention heads and `intermediate_size` FFN neurons
with the highest importance (importance.py) are kept: their columns of q, k,
v and the intermediate kernel, their rows of the attention output and FFN
output kernels. What the removed units added on average is folded into the
output biases (bias compensation), so the residual stream keeps its mean.
Matrices named in `ranks` are then stored as activation-aware low-rank
factors (factorization.py); `word_embeddings` as the best rank-r
approximation of the word table. Every other variable (embeddings, norms,
pooler, the task head) is copied. The result is a plain config plus
weights: the student loads, fine-tunes, converts and benchmarks like any
model directory.
"""

import dataclasses
import os

import numpy as np

from tfmodels.checkpoints.weight_mapping import Entry, assign
from tfmodels.compression.factorization import activation_aware_factors
from tfmodels.compression.importance import top_units
from tfmodels.configs import read_json_object
from tfmodels.distillation.low_rank_init import low_rank_factors

_ATTENTION = "layer_{l}_attention/self_attention/{name}"
_FFN = "layer_{l}_ffn/{name}"
WORD_TABLE = "embeddings/word_embeddings"


@dataclasses.dataclass(frozen=True)
class CarveSpec:
  """What the student keeps: heads and FFN neurons per layer (None: all) and
  low-rank ranks by matrix name (configs.LOW_RANK_MATRICES)."""
  heads: int | None = None
  intermediate_size: int | None = None
  ranks: dict = dataclasses.field(default_factory=dict)


def carved_config(config, spec, name=None):
  """The student's ModelConfig: same depth, hidden width and head size."""
  return config.replace(
      name=name or f"{config.name}_carved",
      num_attention_heads=spec.heads or config.num_attention_heads,
      attention_head_size=config.attention_head_size,
      intermediate_size=spec.intermediate_size or config.intermediate_size,
      low_rank_ranks=dict(spec.ranks))


def _matrix(name):
  return (_FFN if name in ("intermediate", "output") else _ATTENTION)


def carved_weights(values, config, statistics, spec):
  """({variable name: array} of the student, facts).

  Args:
    values: {variable name without ':0': array} of the teacher.
    config: the teacher's ModelConfig.
    statistics: [importance.LayerStatistics] of the teacher, per layer
      (with input moments when spec.ranks names block matrices).
    spec: CarveSpec.
  """
  out = {k: np.asarray(v, np.float64) for k, v in values.items()}
  N, Hs = config.num_attention_heads, config.attention_head_size
  heads = spec.heads or N
  neurons = spec.intermediate_size or config.intermediate_size
  facts = {"layers": []}
  for l, stats in enumerate(statistics):
    kept_heads = top_units(stats.head_scores, heads)
    kept_neurons = top_units(stats.neuron_scores, neurons)
    columns = (kept_heads[:, None] * Hs + np.arange(Hs)).reshape(-1)
    for name in ("query", "key", "value"):
      base = _ATTENTION.format(l=l, name=name)
      out[base + "/kernel"] = out[base + "/kernel"][:, columns]
      out[base + "/bias"] = out[base + "/bias"][columns]
    base = _ATTENTION.format(l=l, name="attention_output")
    out[base + "/kernel"] = out[base + "/kernel"][columns]
    dropped_heads = np.setdiff1d(np.arange(N), kept_heads)
    out[base + "/bias"] = out[base + "/bias"] + stats.head_means[
        dropped_heads].sum(0)
    base = _FFN.format(l=l, name="intermediate")
    out[base + "/kernel"] = out[base + "/kernel"][:, kept_neurons]
    out[base + "/bias"] = out[base + "/bias"][kept_neurons]
    base = _FFN.format(l=l, name="output")
    dropped = np.setdiff1d(np.arange(len(stats.neuron_scores)), kept_neurons)
    out[base + "/bias"] = out[base + "/bias"] + (
        stats.neuron_means[dropped] @ out[base + "/kernel"][dropped])
    out[base + "/kernel"] = out[base + "/kernel"][kept_neurons]
    layer_facts = {
        "kept_heads": kept_heads.tolist(),
        "head_scores": np.round(stats.head_scores, 6).tolist(),
        "kept_neurons": kept_neurons.tolist(),
        "neuron_scores": np.round(stats.neuron_scores, 6).tolist(),
        "factor_errors": {}}
    kept_inputs = {"attention_output": columns, "output": kept_neurons}
    for name, rank in spec.ranks.items():
      if name == "word_embeddings":
        continue
      base = _matrix(name).format(l=l, name=name)
      if name not in stats.inputs:
        raise ValueError(f"{name}: low rank needs the input moments "
                         "(importance.collect(inputs=True))")
      mean, covariance = stats.inputs[name]
      rows = kept_inputs.get(name)
      if rows is not None:
        mean, covariance = mean[rows], covariance[np.ix_(rows, rows)]
      u, v, shift, error = activation_aware_factors(
          out.pop(base + "/kernel"), rank, mean, covariance)
      out[base + "/kernel_u"], out[base + "/kernel_v"] = u, v
      out[base + "/bias"] = out[base + "/bias"] + shift
      layer_facts["factor_errors"][name] = round(error, 6)
    facts["layers"].append(layer_facts)
  if "word_embeddings" in spec.ranks:
    table = out.pop(WORD_TABLE + "/embeddings")
    left, right, error = low_rank_factors(table, spec.ranks["word_embeddings"])
    out[WORD_TABLE + "/table"], out[WORD_TABLE + "/projection"] = left, right
    facts["word_table_error"] = round(error, 6)
  return out, facts


def carve(model, config, head, statistics, spec, name=None):
  """(student model, its config, facts): `model` carved by `spec`.

  Args:
    model: the teacher, one of our models with head `head`.
    config, statistics, spec: as for carved_weights.
  """
  from tfmodels.checkpoints.model_dir import build_model
  student_config = carved_config(config, spec, name)
  values = {w.name.split(":")[0]: w.numpy() for w in model.weights}
  weights, facts = carved_weights(values, config, statistics, spec)
  student = build_model(student_config, head)
  names = [w.name.split(":")[0] for w in student.weights]
  missing = sorted(set(names) - set(weights))
  if missing:
    raise ValueError(f"the carved model has no value for {missing[0]}")
  assign(student, [Entry(n, n) for n in names],
         {n: weights[n] for n in names}, source=f"carving {config.name}")
  return student, student_config, facts


def kept_heads(init_dir, config, teacher_heads):
  """Per layer, the teacher head each of a carved student's heads came
  from (the kept_heads `compress` writes to its carving.json in
  `init_dir`); ValueError naming the file when it does not describe this
  student (`config`) and a teacher of `teacher_heads` heads."""
  path = os.path.join(init_dir, "carving.json")
  if not os.path.isfile(path):
    raise ValueError(f"--task_kd carved: {path} is missing (--init_dir must "
                     "be a model `compress` carved)")
  layers = read_json_object(path).get("layers")
  ok = isinstance(layers, list) and len(layers) == config.num_hidden_layers
  heads = []
  for layer in layers if ok else ():
    kept = layer.get("kept_heads") if isinstance(layer, dict) else None
    if not (isinstance(kept, list) and len(kept) == config.num_attention_heads
            and all(isinstance(h, int) and not isinstance(h, bool)
                    and 0 <= h < teacher_heads for h in kept)):
      ok = False
      break
    heads.append(kept)
  if not ok:
    raise ValueError(
        f"{path}: field 'layers' must hold, for each of the student's "
        f"{config.num_hidden_layers} layers, kept_heads: its "
        f"{config.num_attention_heads} heads' indices among the teacher's "
        f"{teacher_heads}")
  return heads
