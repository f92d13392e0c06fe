"""LAMB against its update rule, computed step by step in numpy."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfmodels.training.lamb import LAMB


def _numpy_lamb(w, grads, lr, b1, b2, eps, wd, decay, adapt):
  m = np.zeros_like(w)
  v = np.zeros_like(w)
  out = []
  for t, g in enumerate(grads, 1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    if decay:
      u = u + wd * w
    r = 1.0
    if adapt and np.linalg.norm(w) > 0 and np.linalg.norm(u) > 0:
      r = np.linalg.norm(w) / np.linalg.norm(u)
    w = w - lr * r * u
    out.append(w.copy())
  return out


def test_matches_the_update_rule_for_decayed_and_excluded_variables():
  rng = np.random.default_rng(0)
  kernel0 = rng.normal(size=(4, 3)).astype(np.float64)
  bias0 = rng.normal(size=(3,)).astype(np.float64)
  kernel = tf.Variable(kernel0, name="layer/kernel")
  bias = tf.Variable(bias0, name="layer/bias")
  grads = [(rng.normal(size=(4, 3)), rng.normal(size=(3,))) for _ in range(4)]
  opt = LAMB(learning_rate=0.01, beta_1=0.9, beta_2=0.99, epsilon=1e-6,
             weight_decay_rate=0.1)
  lr = float(np.float32(0.01))  # Keras keeps the learning rate in float32
  expected_k = _numpy_lamb(kernel0, [g[0] for g in grads], lr, 0.9, 0.99,
                           1e-6, 0.1, decay=True, adapt=True)
  expected_b = _numpy_lamb(bias0, [g[1] for g in grads], lr, 0.9, 0.99,
                           1e-6, 0.1, decay=False, adapt=False)
  for step, (gk, gb) in enumerate(grads):
    opt.apply_gradients([(tf.constant(gk), kernel), (tf.constant(gb), bias)])
    np.testing.assert_allclose(kernel.numpy(), expected_k[step], rtol=1e-8)
    np.testing.assert_allclose(bias.numpy(), expected_b[step], rtol=1e-8)
  # The trust ratio makes the kernel's step size lr * ||w|| per step.
  step_norm = np.linalg.norm(expected_k[1] - expected_k[0])
  assert abs(step_norm - lr * np.linalg.norm(expected_k[0])) < 1e-12


def test_norm_variables_are_excluded_by_name_and_zero_weights_are_safe():
  gamma = tf.Variable(np.ones(3), name="encoder/attention_norm/gamma")
  zero = tf.Variable(np.zeros(3), name="layer/kernel")
  opt = LAMB(learning_rate=0.1, weight_decay_rate=0.5)
  g = tf.constant([1.0, -2.0, 0.5], tf.float64)
  opt.apply_gradients([(g, gamma), (g, zero)])
  # First step: m_hat = g, v_hat = g^2, so u = sign(g) (up to epsilon).
  np.testing.assert_allclose(gamma.numpy(), 1 - 0.1 * np.sign(g), atol=1e-6)
  np.testing.assert_allclose(zero.numpy(), -0.1 * np.sign(g), atol=1e-6)


def test_trains_a_keras_model_and_round_trips_its_config():
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.layers.Dense(8, activation="relu"),
                            keras.layers.Dense(1)])
  x = np.random.default_rng(1).normal(size=(64, 4)).astype("float32")
  y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32")
  opt = LAMB(learning_rate=0.05, weight_decay_rate=0.0, global_clipnorm=1.0)
  model.compile(opt, "mse")
  first = model.evaluate(x, y, verbose=0)
  model.fit(x, y, epochs=40, batch_size=16, verbose=0)
  assert model.evaluate(x, y, verbose=0) < 0.2 * first
  again = LAMB.from_config(opt.get_config())
  assert again.get_config()["exclude_from_weight_decay"] == ["norm", "bias"]


def test_learning_rate_multipliers_scale_the_step_of_matching_variables():
  low = tf.Variable(np.ones(3), name="layer_0/ffn/kernel")
  high = tf.Variable(np.ones(3), name="layer_1/ffn/kernel")
  opt = LAMB(learning_rate=0.1, weight_decay_rate=0.0,
             learning_rate_multipliers=[("layer_0/", 0.1)])
  g = tf.constant([1.0, 1.0, 1.0], tf.float64)
  opt.apply_gradients([(g, low), (g, high)])
  step_low, step_high = 1 - low.numpy(), 1 - high.numpy()
  np.testing.assert_allclose(step_low, 0.1 * step_high, rtol=1e-6)
