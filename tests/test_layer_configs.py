"""Every class the product registers for Keras serialization round-trips
its config (issue 30), like keras-hub's shared layer test.

The registered classes are found, not listed: each product module whose
source registers something (`register_keras_serializable`, or writes the
custom-object table) is imported, and Keras's global registry is read for
the classes of the product's packages. The modules are chosen by their
text so that no other command is imported (its flags would be defined).
CASES says how to build each one small; a registered class without a case
fails, so no layer can be added without its round trip.

The round trip: build the object, call it so it has weights, then
`cls.from_config` of its config written to JSON and read back gives the
same config, builds, and with the same weights gives the same output; the
registered name revives the same class.
"""

import dataclasses
import importlib
import json
import pathlib
from typing import Any, Callable

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from conftest import REPO

PACKAGES = ("tfmodels", "converters", "android_bench", "experiments")
REGISTERS = ("register_keras_serializable", "get_custom_objects")


def registering_modules(root=REPO):
  """Dotted names of the product modules whose source registers a class."""
  modules = []
  for package in PACKAGES:
    for path in sorted(pathlib.Path(root, package).rglob("*.py")):
      text = path.read_text(encoding="utf-8")
      if any(word in text for word in REGISTERS):
        parts = path.relative_to(root).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__"
                                else parts))
  return modules


def registered_classes():
  """{registered name: class} of the product's registered objects."""
  for module in registering_modules():
    importlib.import_module(module)
  return {name: obj for name, obj in keras.saving.get_custom_objects().items()
          if getattr(obj, "__module__", "").split(".")[0] in PACKAGES}


REGISTERED = registered_classes()


def _x(*shape):
  return tf.constant(np.random.default_rng(0).normal(size=shape), tf.float32)


def _ids(*shape, high=100):
  return tf.constant(np.random.default_rng(0).integers(0, high, size=shape),
                     tf.int32)


def _tiny(name="tiny_mobilebert"):
  from tfmodels.configs import load_config
  return load_config(name)


def _tied_embeddings():
  """The tiny encoder's Embeddings, built (the head reads its tables)."""
  from tfmodels.layers.embeddings import Embeddings
  embeddings = Embeddings(_tiny(), name="embeddings")
  embeddings(_ids(1, 4), _ids(1, 4, high=2))
  return embeddings


@dataclasses.dataclass(frozen=True)
class Case:
  """kwargs: the constructor's (or a function giving them, for objects
  that need a config or a layer); inputs: a function giving the call's
  positional arguments (a schedule's steps, an optimizer's gradient)."""
  kwargs: dict[str, Any] | Callable[[], dict[str, Any]]
  inputs: Callable[[], tuple]


_MASK = lambda: tf.constant([[[[1.0, 1.0, 1.0, 0.0]]]])

CASES = {
    "tfmodels>NoNorm": Case({}, lambda: (_x(2, 3, 8),)),
    "tfmodels>Dense": Case(dict(units=6, activation="relu"),
                           lambda: (_x(2, 3, 8),)),
    "tfmodels>LowRankDense": Case(
        dict(units=6, rank=2, activation="relu", initializer_range=0.5),
        lambda: (_x(2, 8),)),
    "tfmodels>LowRankEmbedding": Case(
        dict(vocab_size=20, embedding_size=8, rank=3, initializer_range=0.5),
        lambda: (_ids(2, 3, high=20),)),
    "tfmodels>KroneckerDense": Case(
        dict(units=8, a_shape=(2, 4), num_sums=2, activation="gelu"),
        lambda: (_x(2, 3, 12),)),
    "tfmodels>KroneckerEmbedding": Case(
        dict(vocab_size=20, embedding_size=8, row_vector_size=4),
        lambda: (_ids(2, 3, high=20),)),
    "tfmodels>FeedForward": Case(
        dict(intermediate_size=16, activation="relu", dropout=0.1,
             normalization_type="no_norm",
             kronecker_shapes={"intermediate": (4, 2)}, kronecker_num_sums=2,
             low_rank_ranks={"output": 2}),
        lambda: (_x(2, 3, 8),)),
    "tfmodels>MultiHeadAttention": Case(
        dict(num_heads=2, head_size=4, output_size=6, mask_bias=-50.0,
             kronecker_shapes={"query": (2, 2)}, low_rank_ranks={"value": 2}),
        lambda: (_x(1, 4, 8), _x(1, 4, 8), _x(1, 4, 6), _MASK())),
    "tfmodels>SelfAttentionBlock": Case(
        dict(num_heads=2, head_size=3, output_size=8, epsilon=1e-6,
             low_rank_ranks={"key": 2}),
        lambda: (_x(1, 4, 8), _MASK())),
    "tfmodels>Embeddings": Case(
        lambda: dict(config=_tiny()),
        lambda: (_ids(1, 4), _ids(1, 4, high=2), tf.ones([1, 4], tf.int32))),
    "tfmodels>MobileBertBlock": Case(
        lambda: dict(config=_tiny()), lambda: (_x(1, 4, 32), _MASK())),
    "tfmodels>MaskedLMHead": Case(
        lambda: dict(config=_tiny(), embeddings=_tied_embeddings()),
        lambda: (_x(1, 4, 32), tf.constant([[0, 2]]))),
    "tfmodels>ClassificationHead": Case(
        dict(num_classes=3, dropout=0.2, initializer_range=0.5),
        lambda: (_x(2, 8),)),
    "tfmodels>TokenTaggingHead": Case(dict(num_classes=5),
                                      lambda: (_x(1, 4, 8),)),
    "tfmodels>SpanHead": Case(dict(initializer_range=0.5),
                              lambda: (_x(1, 5, 8),)),
    "tfmodels>JointIntentSlotHead": Case(
        dict(num_intents=3, num_slots=4, dropout=0.0),
        lambda: (_x(1, 8), _x(1, 4, 8))),
    "tfmodels>WarmupPolynomialDecay": Case(
        dict(peak_learning_rate=1e-3, total_steps=10, warmup_steps=2,
             end_learning_rate=1e-5, power=2.0),
        lambda: (tf.constant([0, 1, 2, 5, 10, 12]),)),
    "tfmodels>LAMB": Case(
        lambda: dict(
            learning_rate=REGISTERED["tfmodels>WarmupPolynomialDecay"](
                0.1, total_steps=10, warmup_steps=0),
            weight_decay_rate=0.01, exclude_from_weight_decay=["bias"],
            learning_rate_multipliers=[("layer_0", 0.5)]),
        lambda: (_x(3, 2),)),
}


def _as_json(config):
  """The config as a saved file holds it (tuples become lists; fails on
  what JSON cannot hold)."""
  return json.loads(json.dumps(config))


def _outputs(obj, inputs):
  """What the object computes from `inputs`: a layer's outputs, a
  schedule's rates, the variables after one optimizer step."""
  if isinstance(obj, keras.layers.Layer):
    return obj(*inputs)
  if isinstance(obj, keras.optimizers.schedules.LearningRateSchedule):
    return obj(*inputs)
  if isinstance(obj, keras.optimizers.Optimizer):
    (gradient,) = inputs
    variables = [tf.Variable(tf.ones_like(gradient), name=name)
                 for name in ("layer_0/kernel", "layer_1/bias")]
    obj.apply_gradients([(gradient, v) for v in variables])
    return [v.read_value() for v in variables]
  raise TypeError(f"{type(obj).__name__}: say how CASES call it in _outputs")


def _weights(obj):
  return obj.get_weights() if isinstance(obj, keras.layers.Layer) else []


def test_every_registered_class_has_a_round_trip_case():
  # The registry was read: the layers and heads of the zoo are in it.
  assert {"tfmodels>NoNorm", "tfmodels>Embeddings",
          "tfmodels>MaskedLMHead"} <= set(REGISTERED)
  missing = sorted(set(REGISTERED) - set(CASES))
  assert not missing, ("registered for serialization without a case in "
                       f"tests/test_layer_configs.py CASES: {missing}")
  stale = sorted(set(CASES) - set(REGISTERED))
  assert not stale, f"CASES of classes no longer registered: {stale}"


def test_registering_modules_are_found_by_their_text(tmp_path):
  files = {"tfmodels/__init__.py": "",
           "tfmodels/layer.py": "@keras.utils.register_keras_serializable()",
           "tfmodels/sub/__init__.py": "keras.saving.get_custom_objects()",
           "converters/plain.py": "import tf_keras as keras\n"}
  for name, text in files.items():
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text)
  assert registering_modules(tmp_path) == ["tfmodels.layer", "tfmodels.sub"]


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_config_round_trips(name):
  cls = REGISTERED[name]
  if name not in CASES:
    pytest.fail(f"{name} has no case in CASES")
  case = CASES[name]
  kwargs = case.kwargs() if callable(case.kwargs) else dict(case.kwargs)
  original = cls(**kwargs)
  inputs = case.inputs()
  expected = _outputs(original, inputs)
  config = _as_json(original.get_config())

  clone = cls.from_config(_as_json(config))
  assert type(clone) is cls
  assert _as_json(clone.get_config()) == config
  if isinstance(original, keras.layers.Layer):
    _outputs(clone, inputs)  # builds it
    assert [w.shape for w in clone.weights] == [
        w.shape for w in original.weights]
    clone.set_weights(_weights(original))
  tf.nest.map_structure(
      lambda want, got: np.testing.assert_allclose(got, want, rtol=1e-6,
                                                   atol=1e-7),
      expected, _outputs(clone, inputs))

  # The registered name brings back the same class (a saved model's way).
  revived = keras.saving.deserialize_keras_object(
      _as_json(keras.saving.serialize_keras_object(original)))
  assert type(revived) is cls
  assert _as_json(revived.get_config()) == config
