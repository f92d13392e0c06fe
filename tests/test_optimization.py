"""Warm-up + polynomial decay schedule and the optimizer factory."""

import numpy as np
import pytest
import tensorflow as tf

from tfmodels.training.lamb import LAMB
from tfmodels.training.optimization import (WarmupPolynomialDecay,
                                            create_optimizer)


def test_schedule_warms_up_linearly_then_decays_to_the_end_rate():
  schedule = WarmupPolynomialDecay(1e-3, total_steps=110, warmup_steps=10,
                                   end_learning_rate=1e-5)
  lr = [float(schedule(step)) for step in range(111)]
  np.testing.assert_allclose(lr[:10], 1e-3 * np.arange(1, 11) / 10, rtol=1e-6)
  assert lr[10] == pytest.approx(1e-3, rel=1e-6)
  assert lr[60] == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5, rel=1e-6)
  assert lr[110] == pytest.approx(1e-5, rel=1e-6)
  with pytest.raises(ValueError, match="warmup_steps"):
    WarmupPolynomialDecay(1e-3, total_steps=5, warmup_steps=10)


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_weight_decay_skips_norm_and_bias_variables(name):
  optimizer = create_optimizer(name, 0.1, total_steps=10, weight_decay=0.5,
                               clip_norm=0)
  kernel = tf.Variable(np.ones(4), name="dense/kernel")
  gamma = tf.Variable(np.ones(4), name="attention_norm/gamma")
  zero = tf.zeros(4, tf.float64)
  optimizer.apply_gradients([(zero, kernel), (zero, gamma)])
  assert np.all(kernel.numpy() < 1)  # decayed with a zero gradient
  np.testing.assert_array_equal(gamma.numpy(), np.ones(4))
  assert isinstance(optimizer, LAMB) == (name == "lamb")
