"""The zoo's layers are built without AutoGraph rewriting their `call`
(tfmodels.layers.plain_call): every one is marked, AutoGraph then hands the
call back untouched, and an unmarked layer would still be rewritten."""

import importlib
import inspect
import pkgutil

import pytest
import tensorflow as tf
import tf_keras as keras

import tfmodels.heads
import tfmodels.layers
from tfmodels.layers.normalization import NoNorm
from tfmodels.layers.plain_call import is_plain, plain_call


def _zoo_layer_classes():
  modules = [tfmodels.heads] + [
      importlib.import_module(f"tfmodels.layers.{info.name}")
      for info in pkgutil.iter_modules(tfmodels.layers.__path__)]
  return {cls for module in modules for _, cls in inspect.getmembers(
      module, inspect.isclass) if issubclass(cls, keras.layers.Layer)
      and cls.__module__ == module.__name__ and "call" in vars(cls)}


def _rewritten(layer):
  """What Keras calls when it builds a model from `layer`."""
  return tf.__internal__.autograph.tf_convert(
      layer.call, tf.__internal__.autograph.control_status_ctx())


def test_every_zoo_layer_with_a_call_is_plain():
  classes = _zoo_layer_classes()
  assert len(classes) >= 15  # the registry was read
  assert sorted(c.__name__ for c in classes if not is_plain(c)) == []


def test_autograph_leaves_a_plain_call_and_rewrites_an_unmarked_one():
  layer = NoNorm()
  assert _rewritten(layer).__func__ is NoNorm.call

  class Unmarked(keras.layers.Layer):
    def call(self, inputs):
      return inputs

  assert getattr(_rewritten(Unmarked()), "__func__", None) is not Unmarked.call


def test_a_plain_layer_computes_the_same_eagerly_and_in_a_model():
  layer = NoNorm()
  x = tf.random.stateless_normal([2, 3, 4], seed=[1, 2])
  inputs = keras.Input([3, 4])
  model = keras.Model(inputs, layer(inputs))
  tf.debugging.assert_near(model(x), layer(x))
  traced = tf.function(lambda t: model(t, training=False))
  tf.debugging.assert_near(traced(x), layer(x))


def test_a_class_without_a_call_of_its_own_is_refused():
  class Inherits(NoNorm):
    pass

  with pytest.raises(TypeError, match="Inherits has no call of its own"):
    plain_call(Inherits)
