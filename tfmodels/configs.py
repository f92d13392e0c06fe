"""Model configuration: one frozen dataclass for every compact BERT in the papers.

The field names are a superset of Google's `bert_config.json`, so a released
BERT, ALBERT or MobileBERT config loads unchanged; the extra fields describe
ALBERT sharing, Kronecker factorisation and mixed-vocabulary inputs. Loading
validates everything and names the offending field in the error, because a
wrong shape found deep inside Keras is much harder to trace back.

    from tfmodels.configs import load_config
    config = load_config("tfmodels/configs/mobilebert.json")
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
from typing import Any, Mapping

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")

MODEL_TYPES = ("bert", "mobilebert")
ACTIVATIONS = ("gelu", "gelu_new", "gelu_tanh", "relu", "relu6", "tanh", "linear")
NORMALIZATION_TYPES = ("layer_norm", "no_norm")
SHARING_MODES = ("none", "all", "attention", "ffn")
# The six weight matrices of a transformer block that KroneckerBERT factorises.
KRONECKER_MATRICES = ("query", "key", "value", "attention_output",
                      "intermediate", "output")
# What a carved student may hold at low rank: the block matrices and the
# word-embedding table.
LOW_RANK_MATRICES = KRONECKER_MATRICES + ("word_embeddings",)


# Upper bounds far beyond any released model (BERT-large: 24 layers, hidden
# 1024, FFN 4096, 512 positions; the largest vocabularies ~256k pieces):
# config.json comes with downloaded weights, and a corrupt or hostile value
# must be refused in one line, not found by Keras allocating it.
MAX_SIZES = {"vocab_size": 1 << 22, "mixed_vocab_size": 1 << 22,
             "max_position_embeddings": 1 << 20, "intermediate_size": 1 << 18,
             "hidden_size": 1 << 16, "embedding_size": 1 << 16,
             "intra_bottleneck_size": 1 << 16, "attention_head_size": 1 << 16,
             "kronecker_embedding_size": 1 << 16,
             "mixed_vocab_embedding_size": 1 << 16,
             "num_hidden_layers": 1 << 10, "num_attention_heads": 1 << 10,
             "num_hidden_groups": 1 << 10, "kronecker_num_sums": 1 << 10,
             "type_vocab_size": 1 << 10, "num_feedforward_networks": 1 << 6}
# A JSON description larger than this is not a config (shipped ones: < 2 KB).
MAX_JSON_BYTES = 1 << 20


class ConfigError(ValueError):
  """A config is malformed; the message names the source and the field."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Hyper-parameters of one encoder (BERT, ALBERT, MobileBERT, Kronecker...).

  Args:
    name: str, a short label used in summaries and file names.
    model_type: str, `bert` (BERT, ALBERT, KroneckerBERT, mixed-vocab) or
      `mobilebert` (IB-BERT teacher, MobileBERT, MobileBERT-TINY). Inferred
      from the MobileBERT fields when a JSON file leaves it out.
    vocab_size ... initializer_range: as in Google's `bert_config.json`.
    embedding_size: int, width of the word-embedding table; ALBERT's factorised
      size E, MobileBERT's 128. Defaults to hidden_size.
    trigram_input: bool, MobileBERT's `[e(t+1), e(t), e(t-1)]` embedding.
    trigram_zero_padding: bool, zero the neighbours at padded positions, so
      the last real token's vector does not depend on how much padding
      follows. False (the default) is the reference: Google's and Hugging
      Face's MobileBERT feed the [PAD] row there, as every released
      checkpoint was trained.
    use_bottleneck: bool, MobileBERT/IB-BERT (inverted) bottleneck blocks.
    intra_bottleneck_size: int, the width inside a bottleneck block.
    key_query_shared_bottleneck: bool, query and key from one shared
      bottleneck projection, value from the 512-d inter-block input.
    use_bottleneck_attention: bool, MobileBERT-TINY: q, k, v all from the
      bottleneck.
    num_feedforward_networks: int, stacked FFNs per block.
    normalization_type: str, `layer_norm` or `no_norm` (gamma * h + beta).
    classifier_activation: bool, pooler is dense + tanh (True) or the raw
      [CLS] vector (False, as released MobileBERT).
    layer_norm_eps: float, LayerNorm epsilon.
    mlm_layer_norm_eps: float, epsilon of the MLM head's LayerNorm when it
      differs (transformers' MobileBERT: encoder 1e-5, head layer_norm_eps);
      0 means layer_norm_eps.
    attention_mask_bias: float, added to scores at padded positions. Bounded
      (not -1e9) so that int8 attention keeps its resolution; -120 still
      underflows exp() to exactly 0 in float32, so padding is invisible.
    attention_head_size: int, the width of one attention head; the
      attention width (q, k, v and the output projection's input) is
      num_attention_heads * attention_head_size. Defaults to block width /
      heads (every released model); a student with pruned heads keeps its
      teacher's head size and hidden width, so it sets it.
    sharing_mode: str, ALBERT cross-layer sharing: all, attention, ffn, none.
    num_hidden_groups: int, ALBERT groups; layers in a group share weights.
    kronecker_factor_shapes: mapping from a block matrix name (query, key,
      value, attention_output, intermediate, output) to [m1, n1], the shape of
      factor A of W (m x n, m outputs) = sum_r A_r (x) B_r. Empty: dense.
    kronecker_num_sums: int, number of Kronecker products summed per matrix.
    low_rank_ranks: mapping from a block matrix name (as
      kronecker_factor_shapes) or `word_embeddings` to a rank r: that
      matrix is stored as two factors (n x r)(r x m), as a carved student
      holds it (tfmodels/compression). Empty: full rank.
    kronecker_embedding_size: int, length n of the embedding row vector B^E
      (table A^E is vocab x hidden/n); 0 means a dense embedding table.
    mixed_vocab_size: int, student vocabulary of a stage-I mixed-vocabulary
      teacher; ids >= vocab_size index it. 0 disables.
    mixed_vocab_embedding_size: int, width of the student embeddings that are
      projected up to hidden_size.

  Example:
    >>> ModelConfig(name="tiny", vocab_size=100, hidden_size=32,
    ...             num_hidden_layers=2, num_attention_heads=4,
    ...             intermediate_size=64).embedding_size
    32
  """

  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  name: str = "model"
  model_type: str = "bert"
  # MobileBERT.
  embedding_size: int | None = None
  trigram_input: bool = False
  trigram_zero_padding: bool = False
  use_bottleneck: bool = False
  intra_bottleneck_size: int | None = None
  key_query_shared_bottleneck: bool = False
  use_bottleneck_attention: bool = False
  num_feedforward_networks: int = 1
  normalization_type: str = "layer_norm"
  classifier_activation: bool = True
  layer_norm_eps: float = 1e-12
  mlm_layer_norm_eps: float = 0.0
  attention_mask_bias: float = -120.0
  attention_head_size: int | None = None
  # ALBERT.
  sharing_mode: str = "none"
  num_hidden_groups: int = 1
  # KroneckerBERT.
  kronecker_factor_shapes: Mapping[str, tuple[int, int]] = dataclasses.field(
      default_factory=dict)
  kronecker_num_sums: int = 1
  kronecker_embedding_size: int = 0
  # Carved students (tfmodels/compression).
  low_rank_ranks: Mapping[str, int] = dataclasses.field(default_factory=dict)
  # Mixed-vocabulary stage-I teacher.
  mixed_vocab_size: int = 0
  mixed_vocab_embedding_size: int = 0

  def __post_init__(self):
    # Normalise optional sizes so every consumer can rely on plain ints.
    if self.embedding_size is None:
      object.__setattr__(self, "embedding_size", self.hidden_size)
    if self.intra_bottleneck_size is None:
      object.__setattr__(self, "intra_bottleneck_size", self.hidden_size)
    object.__setattr__(
        self, "kronecker_factor_shapes",
        {k: tuple(v) for k, v in dict(self.kronecker_factor_shapes).items()})
    object.__setattr__(self, "low_rank_ranks", dict(self.low_rank_ranks))
    if self.attention_head_size is None:
      heads = self.num_attention_heads
      _require(heads <= 0 or self.block_size % heads == 0,
               "intra_bottleneck_size" if self.use_bottleneck
               else "hidden_size",
               f"{self.block_size} is not a multiple of num_attention_heads"
               f" ({heads}); or set attention_head_size")
      object.__setattr__(self, "attention_head_size",
                         self.block_size // heads if heads > 0 else 1)
    _validate(self)

  # Derived sizes, so callers never recompute them differently.
  @property
  def block_size(self) -> int:
    """Width inside a block: the bottleneck for MobileBERT, else hidden."""
    return self.intra_bottleneck_size if self.use_bottleneck else self.hidden_size

  @property
  def attention_width(self) -> int:
    """Width of q, k, v and of the attention output projection's input."""
    return self.num_attention_heads * self.attention_head_size

  @property
  def uses_kronecker(self) -> bool:
    return bool(self.kronecker_factor_shapes) or self.kronecker_embedding_size > 0

  def group_of_layer(self, layer_index: int) -> int:
    """ALBERT: which parameter group layer `layer_index` belongs to."""
    return layer_index * self.num_hidden_groups // self.num_hidden_layers

  def to_dict(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out["kronecker_factor_shapes"] = {
        k: list(v) for k, v in self.kronecker_factor_shapes.items()}
    # Written only where they say something, so every other model's
    # config.json reads as before these fields existed.
    if self.attention_head_size * self.num_attention_heads == self.block_size:
      del out["attention_head_size"]
    if not self.low_rank_ranks:
      del out["low_rank_ranks"]
    return out

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def replace(self, **changes) -> "ModelConfig":
    return dataclasses.replace(self, **changes)

  @classmethod
  def coerce(cls, value: "ModelConfig | Mapping[str, Any]") -> "ModelConfig":
    """A ModelConfig from itself or its dict (layers' from_config passes dicts)."""
    return value if isinstance(value, cls) else cls.from_dict(value)

  @classmethod
  def from_dict(cls, values: Mapping[str, Any],
                source: str = "config") -> "ModelConfig":
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
      raise ConfigError(f"{source}: unknown field '{unknown[0]}'"
                        f" (known fields: see tfmodels/configs.py)")
    if "vocab_size" not in values:
      raise ConfigError(f"{source}: field 'vocab_size' is required")
    values = dict(values)
    if "model_type" not in values:
      values["model_type"] = _infer_model_type(values)
    for key, value in values.items():
      _check_type(source, key, value, known[key])
    try:
      config = cls(**values)
    except ConfigError as e:
      raise ConfigError(f"{source}: {e}") from None
    check_fits_memory(config, source)
    return config


def read_regular_file(path: str, max_bytes: int) -> bytes:
  """The bytes of a file that came from elsewhere (a downloaded model
  directory), read only if it is a regular file (a FIFO would block, a
  device such as /dev/zero never end) and at most `max_bytes + 1` of them,
  so the caller can refuse a larger one. ConfigError names `path`."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
  except FileNotFoundError:
    raise ConfigError(f"{path}: no such file") from None
  except OSError as e:
    raise ConfigError(f"{path}: cannot read it ({e.strerror or e})") from None
  with os.fdopen(fd, "rb") as f:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
      raise ConfigError(f"{path}: not a regular file")
    try:
      return f.read(max_bytes + 1)
    except OSError as e:
      raise ConfigError(f"{path}: cannot read it ({e.strerror or e})"
                        ) from None


def read_json_object(path: str, max_bytes: int = MAX_JSON_BYTES) -> dict:
  """A JSON object from a file that came from elsewhere (a downloaded model
  directory), or ConfigError naming the file: not there, not a regular
  file, larger than `max_bytes`, not UTF-8, not JSON, nested too deep, or
  not an object."""
  data = read_regular_file(path, max_bytes)
  if len(data) > max_bytes:
    raise ConfigError(f"{path}: larger than {max_bytes} bytes, not a "
                      "JSON description")
  try:
    values = json.loads(data.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}: not valid JSON ({e})") from None
  except RecursionError:
    raise ConfigError(f"{path}: JSON nested too deeply") from None
  if not isinstance(values, dict):
    raise ConfigError(f"{path}: top level must be a JSON object")
  return values


def load_config(path_or_name: str) -> ModelConfig:
  """Loads a config from a JSON path, or by name from tfmodels/configs/."""
  path = path_or_name
  if not os.path.exists(path):
    candidate = os.path.join(CONFIG_DIR, path_or_name + ".json")
    if os.path.exists(candidate):
      path = candidate
    else:
      raise ConfigError(f"{path_or_name}: no such config file or shipped name")
  values = read_json_object(path)
  values.setdefault("name", os.path.splitext(os.path.basename(path))[0])
  return ModelConfig.from_dict(values, source=path)


def shipped_config_names() -> list[str]:
  return sorted(f[:-5] for f in os.listdir(CONFIG_DIR) if f.endswith(".json"))


def _infer_model_type(values: Mapping[str, Any]) -> str:
  mobile = (values.get("use_bottleneck") or values.get("trigram_input")
            or values.get("num_feedforward_networks", 1) != 1)
  return "mobilebert" if mobile else "bert"


_JSON_TYPES = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}


def _check_type(source, key, value, field):
  annotation = str(field.type)
  if value is None and "None" in annotation:
    return
  for name, py_type in (("bool", bool), ("int", int), ("float", float),
                        ("str", str)):
    if annotation.startswith(name):
      ok = isinstance(value, _JSON_TYPES[py_type])
      if py_type in (int, float) and isinstance(value, bool):
        ok = False
      if not ok:
        raise ConfigError(f"{source}: field '{key}' must be {name},"
                          f" got {value!r}")
      return
  if key == "kronecker_factor_shapes" and not isinstance(value, Mapping):
    raise ConfigError(f"{source}: field '{key}' must be an object mapping a"
                      f" matrix name to [m1, n1]")
  if key == "low_rank_ranks" and not isinstance(value, Mapping):
    raise ConfigError(f"{source}: field '{key}' must be an object mapping a"
                      f" matrix name to a rank")


def _require(condition: bool, field: str, message: str):
  if not condition:
    raise ConfigError(f"field '{field}': {message}")


def _validate(c: ModelConfig):
  for field in ("vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size", "embedding_size",
                "intra_bottleneck_size", "num_feedforward_networks",
                "num_hidden_groups", "kronecker_num_sums",
                "attention_head_size"):
    _require(getattr(c, field) > 0, field, "must be a positive integer")
  for field, bound in MAX_SIZES.items():
    value = getattr(c, field)
    _require(value <= bound, field, f"{value} is beyond any real model"
             f" (at most {bound})")
  for field in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                "initializer_range", "layer_norm_eps", "mlm_layer_norm_eps",
                "attention_mask_bias"):
    _require(_finite(getattr(c, field)), field,
             f"must be a finite number, got {getattr(c, field)!r}")
  for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
    _require(0.0 <= getattr(c, field) < 1.0, field, "must be in [0, 1)")
  _require(c.model_type in MODEL_TYPES, "model_type",
           f"must be one of {MODEL_TYPES}, got {c.model_type!r}")
  _require(c.hidden_act in ACTIVATIONS, "hidden_act",
           f"must be one of {ACTIVATIONS}, got {c.hidden_act!r}")
  _require(c.normalization_type in NORMALIZATION_TYPES, "normalization_type",
           f"must be one of {NORMALIZATION_TYPES}")
  _require(c.sharing_mode in SHARING_MODES, "sharing_mode",
           f"must be one of {SHARING_MODES}, got {c.sharing_mode!r}")
  _require(c.attention_mask_bias < 0, "attention_mask_bias", "must be < 0")
  _require(c.mlm_layer_norm_eps >= 0, "mlm_layer_norm_eps", "must be >= 0")
  _require(c.num_hidden_groups <= c.num_hidden_layers, "num_hidden_groups",
           "cannot exceed num_hidden_layers")

  if c.model_type == "bert":
    for field in ("use_bottleneck", "trigram_input", "trigram_zero_padding",
                  "key_query_shared_bottleneck", "use_bottleneck_attention"):
      _require(not getattr(c, field), field,
               "is a MobileBERT option; set model_type to 'mobilebert'")
    _require(c.num_feedforward_networks == 1, "num_feedforward_networks",
             "stacked FFNs need model_type 'mobilebert'")
  else:
    _require(c.sharing_mode == "none" and c.num_hidden_groups == 1,
             "sharing_mode", "ALBERT sharing is for model_type 'bert'")
    _require(not c.uses_kronecker, "kronecker_factor_shapes",
             "Kronecker layers are for model_type 'bert'")
    _require(c.mixed_vocab_size == 0, "mixed_vocab_size",
             "mixed vocabulary is for model_type 'bert'")
    _require(not c.low_rank_ranks, "low_rank_ranks",
             "low-rank layers are for model_type 'bert'")
    _require(not (c.use_bottleneck_attention or c.key_query_shared_bottleneck)
             or c.use_bottleneck, "use_bottleneck",
             "must be true for bottleneck attention / shared key-query")
    _require(not (c.use_bottleneck_attention
                  and c.key_query_shared_bottleneck),
             "use_bottleneck_attention",
             "excludes key_query_shared_bottleneck (pick one)")
    _require(c.trigram_input or not c.trigram_zero_padding,
             "trigram_zero_padding", "needs trigram_input")
    if not c.use_bottleneck:
      _require(c.intra_bottleneck_size == c.hidden_size,
               "intra_bottleneck_size", "needs use_bottleneck")
  if c.sharing_mode == "none":
    _require(c.num_hidden_groups == 1, "num_hidden_groups",
             "groups need a sharing_mode other than 'none'")

  unknown = sorted(set(c.kronecker_factor_shapes) - set(KRONECKER_MATRICES))
  _require(not unknown, "kronecker_factor_shapes",
           f"unknown matrix {unknown[0] if unknown else ''!r};"
           f" expected some of {KRONECKER_MATRICES}")
  for matrix, shape in c.kronecker_factor_shapes.items():
    where = f"kronecker_factor_shapes.{matrix}"
    _require(len(shape) == 2 and all(isinstance(v, int) and v > 0
                                     for v in shape),
             where, f"must be [m1, n1] positive integers, got {list(shape)}")
    m, n = kronecker_matrix_shape(c, matrix)
    _require(m % shape[0] == 0 and n % shape[1] == 0, where,
             f"A shape {list(shape)} must divide W shape [{m}, {n}]")
  for matrix, rank in c.low_rank_ranks.items():
    where = f"low_rank_ranks.{matrix}"
    _require(matrix in LOW_RANK_MATRICES, "low_rank_ranks",
             f"unknown matrix {matrix!r}; expected some of"
             f" {LOW_RANK_MATRICES}")
    _require(matrix not in c.kronecker_factor_shapes and not (
        matrix == "word_embeddings" and c.kronecker_embedding_size), where,
             "is Kronecker-factored already")
    _require(isinstance(rank, int) and not isinstance(rank, bool)
             and rank > 0, where, f"must be a positive integer, got {rank!r}")
    if matrix == "word_embeddings":
      m, n = c.embedding_size, c.vocab_size
    else:
      m, n = kronecker_matrix_shape(c, matrix)
    _require(rank < min(m, n), where, f"rank {rank} saves nothing on a"
             f" [{m}, {n}] matrix (must be below {min(m, n)})")
  if c.kronecker_embedding_size:
    _require(c.embedding_size % c.kronecker_embedding_size == 0,
             "kronecker_embedding_size",
             f"{c.kronecker_embedding_size} must divide embedding_size"
             f" ({c.embedding_size})")
  _require(c.kronecker_embedding_size >= 0, "kronecker_embedding_size",
           "must be >= 0")
  _require((c.mixed_vocab_size > 0) == (c.mixed_vocab_embedding_size > 0),
           "mixed_vocab_embedding_size",
           "set both mixed_vocab_size and mixed_vocab_embedding_size, or"
           " neither")


def _finite(value) -> bool:
  try:
    return math.isfinite(value)
  except OverflowError:  # an int too large for a float
    return False


def parameter_floor(c: ModelConfig) -> dict[str, int]:
  """{field: parameters it accounts for}, a lower bound on the encoder's
  weights (its big matrices), computed without building anything."""
  if c.kronecker_embedding_size:
    word = c.vocab_size * (c.embedding_size // c.kronecker_embedding_size)
  elif "word_embeddings" in c.low_rank_ranks:
    word = c.vocab_size * c.low_rank_ranks["word_embeddings"]
  else:
    word = c.vocab_size * c.embedding_size
  parts = {"vocab_size": word,
           "max_position_embeddings": c.max_position_embeddings
           * min(c.embedding_size, c.hidden_size),
           "mixed_vocab_size": c.mixed_vocab_size
           * c.mixed_vocab_embedding_size}
  if c.model_type == "mobilebert":
    b, layers = c.block_size, c.num_hidden_layers
    parts["intermediate_size"] = (layers * c.num_feedforward_networks * 2
                                  * b * c.intermediate_size)
    parts["num_hidden_layers"] = layers * 4 * min(b, c.hidden_size) * (
        c.attention_width)  # q, k, v, output; some read the hidden width
    return parts

  def matrix(name):
    m, n = kronecker_matrix_shape(c, name)
    if name in c.kronecker_factor_shapes:
      m1, n1 = c.kronecker_factor_shapes[name]
      return c.kronecker_num_sums * (m1 * n1 + (m // m1) * (n // n1))
    if name in c.low_rank_ranks:
      return c.low_rank_ranks[name] * (m + n)
    return m * n

  blocks = lambda shared: (c.num_hidden_groups if c.sharing_mode in shared
                           else c.num_hidden_layers)
  parts["intermediate_size"] = blocks(("all", "ffn")) * (
      matrix("intermediate") + matrix("output"))
  parts["num_hidden_layers"] = blocks(("all", "attention")) * sum(
      matrix(m) for m in ("query", "key", "value", "attention_output"))
  return parts


def physical_memory() -> int | None:
  """Bytes of RAM of this machine (None where the OS does not say)."""
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return None


def check_fits_memory(c: ModelConfig, source: str = "config"):
  """ConfigError naming the field whose size makes the config's float32
  weights alone larger than this machine's memory: each size may be sane
  on its own, their product is what Keras would try to allocate."""
  parts = parameter_floor(c)
  needed, memory = 4 * sum(parts.values()), physical_memory()
  if memory and needed > memory:
    field = max(parts, key=parts.get)
    raise ConfigError(
        f"{source}: field '{field}' is {getattr(c, field)}: the config needs"
        f" at least {sum(parts.values()):,} parameters ({needed / 1e9:.1f} GB"
        f" of float32 weights), more than this machine's memory"
        f" ({memory / 1e9:.1f} GB)")


def kronecker_matrix_shape(c: ModelConfig, matrix: str) -> tuple[int, int]:
  """(m, n) = (outputs, inputs) of a BERT block matrix, as in the paper."""
  h, i, a = c.hidden_size, c.intermediate_size, c.attention_width
  return {"intermediate": (i, h), "output": (h, i),
          "attention_output": (h, a)}.get(matrix, (a, h))


def embedding_layout(c: ModelConfig):
  """(project_first, project_last, width) of the embedding block.

  MobileBERT projects the (trigram) word vectors to hidden_size before adding
  positions; ALBERT adds positions at width E and projects after the norm.
  """
  project_first = c.model_type == "mobilebert" and (
      c.trigram_input or c.embedding_size != c.hidden_size)
  project_last = c.model_type == "bert" and c.embedding_size != c.hidden_size
  width = c.hidden_size if (project_first or not project_last) else (
      c.embedding_size)
  return project_first, project_last, width
