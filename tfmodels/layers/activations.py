"""Activations by config name: relu, relu6 (QAT), exact (erf) and tanh gelu."""

import math

import tensorflow as tf


def gelu_exact(x):
  """BERT's gelu, 0.5 x (1 + erf(x / sqrt 2)); TFLite has a builtin GELU."""
  return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
  """The tanh approximation (Hugging Face's `gelu_new`)."""
  return 0.5 * x * (1.0 + tf.tanh(
      math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


_ACTIVATIONS = {
    "gelu": gelu_exact,
    "gelu_new": gelu_tanh,
    "gelu_tanh": gelu_tanh,
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "tanh": tf.tanh,
    "linear": tf.identity,
}


def get_activation(name: str):
  try:
    return _ACTIVATIONS[name]
  except KeyError:
    raise ValueError(f"unknown activation {name!r};"
                     f" expected one of {sorted(_ACTIVATIONS)}") from None
