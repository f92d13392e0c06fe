"""Layers whose `call` Keras need not rewrite with AutoGraph.

Keras runs a subclassed layer's `call` through AutoGraph each time it builds
a model from it or traces it, to turn Python `if` and `for` over tensors
into graph ops. The zoo's layers branch only on Python values (their
config, static shapes, `training` as a bool), so the rewrite buys nothing
and costs about a second of CPU in every command that builds a small model,
half of the build. `plain_call` marks `call` as
`tf.autograph.experimental.do_not_convert` marks what it wraps, without
that wrapper: it would hide `call`'s signature, from which Keras reads
whether the layer takes `training` and `mask`.
"""

# The attribute by which AutoGraph knows a function it must leave as it is
# (tensorflow/python/autograph/impl/api.py, `autograph_artifact`).
_LEAVE_AS_IS = "autograph_info__"


def plain_call(layer_class):
  """Class decorator: AutoGraph runs the class's own `call` as written."""
  call = vars(layer_class).get("call")
  if call is None:
    raise TypeError(f"{layer_class.__name__} has no call of its own")
  setattr(call, _LEAVE_AS_IS, None)
  return layer_class


def is_plain(layer):
  """Does AutoGraph leave this layer's (or layer class's) `call` as is?"""
  return hasattr(layer.call, _LEAVE_AS_IS)
