"""Move weights between our Keras variables and a flat dict of named arrays.

An importer or exporter is just a list of `Entry`s (our variable name, the
other format's tensor name, whether the kernel is stored transposed); this
module applies it and refuses, naming the tensor, anything that does not
line up: a tensor it cannot place, a variable left without a tensor, a shape
that differs.
"""

import dataclasses
import os

import numpy as np


class CheckpointError(ValueError):
  """A checkpoint that does not fit the model; the message names the tensor."""


@dataclasses.dataclass(frozen=True)
class Entry:
  ours: str  # Keras variable name without ":0"
  theirs: str  # tensor name in the other format
  transpose: bool = False  # PyTorch Linear weights are [out, in]


def check_sizes(sizes, shapes, config_path, source):
  """CheckpointError unless each stored tensor has the size its config field
  says, checked on the shapes alone, before a model is built: a vocab_size
  or max_position_embeddings that the weights do not have would otherwise
  be allocated first (and may not fit in memory) and refused only after.

  Args:
    sizes: {tensor name: (config field, value, axis)}; a name the checkpoint
      does not hold is skipped (the mapping refuses it later).
    shapes: {tensor name: shape} of the checkpoint.
    config_path: the file the fields come from, for the message.
    source: the checkpoint, for the message.
  """
  for name, (field, value, axis) in sizes.items():
    shape = shapes.get(name)
    if shape is not None and (len(shape) <= axis or shape[axis] != value):
      raise CheckpointError(
          f"{config_path}: field '{field}' is {value}, but tensor {name} of "
          f"{source} has shape {list(shape)}; the checkpoint does not match "
          f"{os.path.basename(config_path)}")


def check_table_sizes(config, table, shapes, config_path, source):
  """check_sizes of the three embedding tables, `table(kind)` naming the
  stored tensor of each ("word_embeddings", "position_embeddings",
  "token_type_embeddings") in the checkpoint's own naming."""
  check_sizes({
      table("word_embeddings"): ("vocab_size", config.vocab_size, 0),
      table("position_embeddings"): ("max_position_embeddings",
                                     config.max_position_embeddings, 0),
      table("token_type_embeddings"): ("type_vocab_size",
                                       config.type_vocab_size, 0),
  }, shapes, config_path, source)


def variables_by_name(model):
  """{name without ':0': variable}; names are unique in our models."""
  return {v.name.split(":")[0]: v for v in model.weights}


def assign(model, entries, tensors, source, ignored=(), absent=()):
  """Assigns `tensors[e.theirs]` to each of our variables.

  Args:
    model: keras.Model built for the checkpoint's config.
    entries: list of Entry covering every variable of the model.
    tensors: {name: np.ndarray} read from the checkpoint.
    source: file or directory name for error messages.
    ignored: tensor names that may be present and are not loaded (buffers,
      tied copies checked by the caller).
    absent: prefixes of our variables the format does not have (a QA
      model's pooler); they are set to zero, so what they compute is plain.
  """
  variables = variables_by_name(model)
  mapped = {e.ours for e in entries}
  zeroed = [v for n, v in variables.items()
            if n not in mapped and n.startswith(tuple(absent))]
  mapped |= {v.name.split(":")[0] for v in zeroed}
  unmapped_vars = sorted(set(variables) - mapped)
  if unmapped_vars:
    raise CheckpointError(f"{source}: no tensor maps to our variable "
                          f"{unmapped_vars[0]} (internal mapping gap)")
  used = {e.theirs for e in entries} | set(ignored)
  extra = sorted(set(tensors) - used)
  if extra:
    raise CheckpointError(f"{source}: tensor {extra[0]!r} is not mapped to "
                          "any variable of the model (unsupported head or "
                          "architecture?)")
  values = []
  for e in entries:
    if e.theirs not in tensors:
      raise CheckpointError(f"{source}: missing tensor {e.theirs!r}")
    value = np.asarray(tensors[e.theirs])
    if e.transpose:
      value = value.T
    variable = variables[e.ours]
    if tuple(value.shape) != tuple(variable.shape):
      expected = list(variable.shape)[::-1 if e.transpose else 1]
      raise CheckpointError(
          f"{source}: tensor {e.theirs!r} has shape "
          f"{list(np.asarray(tensors[e.theirs]).shape)}, expected {expected}")
    values.append((variable, value))
  for variable, value in values:  # only once everything is known to fit
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))
  for variable in zeroed:
    variable.assign(np.zeros(variable.shape, variable.dtype.as_numpy_dtype))


def extract(model, entries):
  """{their name: np.ndarray} of every entry, transposed back as stored."""
  variables = variables_by_name(model)
  out = {}
  for e in entries:
    value = variables[e.ours].numpy()
    out[e.theirs] = np.ascontiguousarray(value.T if e.transpose else value)
  return out
