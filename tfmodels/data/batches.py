"""Batches of an in-memory feature dict (numpy arrays of equal length).

The short loops that fine-tune or score on a few hundred examples
(substitution recovery, carving statistics, QAT) read their data this way
instead of through a tf.data pipeline.
"""

import numpy as np


def batches(features, batch_size):
  """The rows in order, batch_size at a time (the last batch may be short),
  as dicts of numpy arrays."""
  n = len(features["input_ids"])
  for start in range(0, n, batch_size):
    yield {k: v[start:start + batch_size] for k, v in features.items()}


def random_batches(features, batch_size, steps, seed=0):
  """`steps` batches of up to batch_size rows, each drawn without
  replacement from numpy `features` (as tensors)."""
  import tensorflow as tf
  rng = np.random.default_rng(seed)
  n = len(features["input_ids"])
  for _ in range(steps):
    rows = rng.choice(n, min(batch_size, n), replace=False)
    yield {k: tf.constant(v[rows]) for k, v in features.items()}
