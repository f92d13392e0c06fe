"""Our converted-model directory: config, head, checkpoint and SavedModel.

    DIR/config.json      our ModelConfig
    DIR/head.json        which head the weights include (see `Head`)
    DIR/ckpt-1.*         tf.train.Checkpoint(model=...)
    DIR/saved_model/     serving signature: int32 input_ids, input_mask,
                         segment_ids [B, T] -> sequence_output, pooled_output
                         (+ logits, start_logits / end_logits, or
                         intent_logits / slot_logits)

Written into a staging directory and renamed, so a failed conversion leaves
nothing behind. A training run's directory is claimed by `claim_run_dir`:
one writer at a time, and only for the run it already holds.
"""

import contextlib
import glob
import json
import os
import re
import shutil

import tensorflow as tf
import tf_keras as keras

from tfmodels.checkpoints.weight_mapping import CheckpointError, check_sizes
from tfmodels.configs import (MAX_JSON_BYTES, ConfigError, ModelConfig,
                              load_config, read_json_object)
from tfmodels.encoders import INPUT_NAMES, build_encoder
from tfmodels.head_spec import (HEAD_KINDS, SENTENCE_OBJECTIVES, Head,
                                read_head)
from tfmodels.models import (build_classifier, build_intent_slot_model,
                             build_pretrainer, build_span_model,
                             build_tagger)
from tfmodels.staging import (OutputError, output_lock, staged_directory,
                              write_file)
from tfmodels.write_errors import WRITE_FAILURES, refused

CHECKPOINT_PREFIX = "ckpt"


def build_model(config: ModelConfig, head: Head, encoder=None):
  """The Keras model whose variables a checkpoint with this head fills.

  `encoder` (an already built one) shares its weights with the new model.
  """
  if head.kind == "pretrainer":
    return build_pretrainer(config, encoder,
                            sentence_objective=head.sentence_objective)
  if head.kind == "classifier":
    return build_classifier(config, head.num_classes, encoder)
  if head.kind == "span":
    return build_span_model(config, encoder)
  if head.kind == "tagger":
    return build_tagger(config, head.num_classes, encoder)
  if head.kind == "intent_slot":
    return build_intent_slot_model(config, head.num_classes, head.num_slots,
                                   encoder)
  return encoder or build_encoder(config)


def encoder_of(model):
  """The encoder keras.Model inside one of our task models (or itself)."""
  inner = [l for l in model.layers if isinstance(l, keras.Model)]
  return inner[0] if inner else model


class _Serving(tf.Module):
  """Fixed signature over the model: named int32 inputs, dict outputs.

  Only the model's variables are tracked (the signature needs nothing
  else): saving then walks a list, not the Keras object graph, which took
  about five times as long."""

  def __init__(self, model, head):
    super().__init__()
    self.model_variables = list(model.variables)

    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32, name=n) for n in INPUT_NAMES])
    def serve(input_ids, input_mask, segment_ids):
      features = {"input_ids": input_ids, "input_mask": input_mask,
                  "segment_ids": segment_ids}
      if head.kind == "pretrainer":  # serve the encoder part
        features["masked_lm_positions"] = tf.zeros_like(input_ids[:, :1])
      out = model(features, training=False)
      keep = ["sequence_output", "pooled_output", "logits", "start_logits",
              "end_logits", "intent_logits", "slot_logits"]
      return {k: out[k] for k in keep if k in out}

    self.serve = serve


def _description(config, head, task=None):
  """{file name: text}: what `load_model_dir` (and `evaluate`) rebuild from."""
  files = {"config.json": config.to_json() + "\n",
           "head.json": json.dumps(head.to_dict(), indent=2)}
  if task is not None:
    files["task.json"] = json.dumps(task)
  return files


def write_description(directory, config, head):
  """config.json + head.json: what `load_model_dir` needs to rebuild."""
  for name, text in _description(config, head).items():
    write_file(os.path.join(directory, name), text)


def read_task_spec(model_dir, flag="--model_dir",
                   hint="for a pretrain / distill run pass --pretraining_data"):
  """task.json of a finetune (or compress) run, or ValueError naming the
  flag, or the field that is missing or of the wrong type; `hint` says
  what to do about a directory without one."""
  path = os.path.join(model_dir, "task.json")
  if not os.path.isdir(model_dir):
    raise ValueError(f"{flag} {model_dir}: no such directory")
  if not os.path.lexists(path):
    raise ValueError(f"{flag} {model_dir}: no task.json (not a finetune "
                     f"run; {hint})")
  try:
    spec = read_json_object(path)
  except ConfigError as e:
    raise ValueError(str(e)) from None
  fields = {"task": str, "max_seq_length": int, "vocab_file": str}
  for name, kind in fields.items():
    value = spec.get(name) if isinstance(spec, dict) else None
    if type(value) is not kind or (kind is int and value < 1):  # pylint: disable=unidiomatic-typecheck
      raise ValueError(f"{path}: {name} must be a "
                       f"{'positive integer' if kind is int else 'string'}, "
                       f"got {value!r}")
  return spec



class CorruptCheckpointError(CheckpointError):
  """A model directory's checkpoint that is missing, cannot be read, or does
  not hold what config.json / head.json describe; the message names it."""


class RunDirError(OutputError):
  """A --model_dir holds another run; the message names both."""


def _differences(held, wanted, limit=3):
  """'key (A there, B here)' for the first keys whose values differ."""
  keys = [k for k in sorted(set(held) | set(wanted))
          if held.get(k) != wanted.get(k)]
  text = ", ".join(f"{k} ({held.get(k)!r} there, {wanted.get(k)!r} here)"
                   for k in keys[:limit])
  return text + (f" and {len(keys) - limit} more" if len(keys) > limit
                 else "")


def _read_json(directory, name, flag):
  path = os.path.join(directory, name)
  try:
    with open(path) as f:
      value = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError) as e:
    raise RunDirError(f"{flag} {directory}: {name} is unreadable ({e}); "
                      "choose another directory") from None
  if not isinstance(value, dict):
    raise RunDirError(f"{flag} {directory}: {name} is not a JSON object; "
                      "choose another directory")
  return value


def check_run_dir(model_dir, config, head, task=None, flag="--model_dir"):
  """RunDirError unless `model_dir` is new or holds this very run.

  A run is its config (the name aside: it changes no weight), its head and,
  for `finetune`, its task.json; training another one into it would rewrite
  its description and leave checkpoints that no longer load.
  """
  if not os.path.exists(model_dir):
    return
  if not os.path.isdir(model_dir):
    raise OutputError(f"{flag} {model_dir}: exists and is not a directory")
  held_config = _read_json(model_dir, "config.json", flag)
  if held_config is None:
    if os.path.exists(os.path.join(model_dir, "checkpoint")):
      raise RunDirError(f"{flag} {model_dir}: holds checkpoints but no "
                        "config.json, so it cannot be checked against this "
                        "run; choose another directory")
    return
  here = config.to_dict()
  there = {k: held_config.get(k) for k in here}
  try:
    there = ModelConfig.from_dict(held_config).to_dict()
  except ValueError:
    pass  # compared as written; the differences name the odd field
  there["name"] = here["name"] = None
  if there != here:
    raise RunDirError(
        f"{flag} {model_dir} holds a run of config "
        f"{held_config.get('name')!r} that differs from this command's "
        f"{config.name!r} in {_differences(there, here)}; choose another "
        f"{flag} (or resume with the run's own settings)")
  held_head = _read_json(model_dir, "head.json", flag)
  if held_head is not None and held_head != head.to_dict():
    raise RunDirError(
        f"{flag} {model_dir} holds a run with a {held_head.get('kind')} "
        f"head, this command trains a {head.kind} head; they differ in "
        f"{_differences(held_head, head.to_dict())}; choose another {flag}")
  held_task = _read_json(model_dir, "task.json", flag)
  if held_task is not None and held_task != task:
    if task is None:
      raise RunDirError(f"{flag} {model_dir} holds a finetune run (task "
                        f"{held_task.get('task')!r}); choose another {flag}")
    raise RunDirError(
        f"{flag} {model_dir} holds a run of task {held_task.get('task')!r}, "
        f"this command trains {task.get('task')!r}; task.json differs in "
        f"{_differences(held_task, task)}; choose another {flag}")


@contextlib.contextmanager
def claim_run_dir(model_dir, config, head, task=None, flag="--model_dir",
                  chief=True):
  """The training run's directory, for the duration of the block.

  Locks it against a second writer (`output_lock`), refuses another run's
  directory (`check_run_dir`), then writes what of the description
  (config.json, head.json, task.json) is missing, so resuming the same run
  changes none of it. A directory this call created is removed again if the
  block fails before the first checkpoint. Non-chief workers of a
  multi-worker run share the chief's directory: they only check it.
  """
  if not chief:
    check_run_dir(model_dir, config, head, task, flag)
    yield
    return
  with output_lock(model_dir, flag):
    check_run_dir(model_dir, config, head, task, flag)
    created = not os.path.exists(model_dir)
    try:
      for name, text in _description(config, head, task).items():
        path = os.path.join(model_dir, name)
        if not os.path.exists(path):
          try:
            write_file(path, text)
          except OSError as e:
            raise refused(path, "the run's description", e) from None
      yield
    except BaseException:
      if created and not os.path.exists(os.path.join(model_dir,
                                                     "checkpoint")):
        shutil.rmtree(model_dir, ignore_errors=True)
      raise


def save_model_dir(model, config, head, output_dir, files=None,
                   owner="save_model_dir", flag="--output"):
  """Writes DIR atomically as `owner`'s output: an existing DIR is replaced
  only if `owner` wrote all of it (the command checks that before its work
  with `staging.check_output`; checked again here).

  `files` ({name: text}) join it in the same commit (a carved model's
  task.json and carving.json). A write the disk refuses is a `WriteError`
  naming output_dir; the staging is gone with it."""
  try:
    with staged_directory(output_dir, owner, flag) as staging:
      write_description(staging, config, head)
      for name, text in (files or {}).items():
        write_file(os.path.join(staging, name), text)
      tf.train.Checkpoint(model=model).write(
          os.path.join(staging, CHECKPOINT_PREFIX + "-1"))
      serving = _Serving(model, head)
      tf.saved_model.save(serving, os.path.join(staging, "saved_model"),
                          signatures={"serving_default": serving.serve})
  except WRITE_FAILURES as e:
    raise refused(output_dir, "the model", e, "nothing was written") from None


def checkpoint_prefix(directory):
  """The checkpoint of DIR to load, with its files checked to be there.

  A training run's `checkpoint` state file records the step it reached:
  that step is the one loaded, or refused naming its missing files, never
  an older one (or ckpt-1) in its place. Without a state file it is
  ckpt-1, as `save_model_dir` writes. The recorded name is looked for beside
  the state file: a copied run's file may hold the writer's absolute path.
  """
  state = os.path.join(directory, "checkpoint")
  name, recorded = CHECKPOINT_PREFIX + "-1", ""
  if os.path.exists(state):
    try:
      with open(state, "rb") as f:
        text = f.read(MAX_JSON_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
      raise CorruptCheckpointError(f"{state}: cannot read the checkpoint "
                                   f"state file ({e})") from None
    found = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', text, re.M)
    if not found:
      raise CorruptCheckpointError(f"{state}: records no "
                                   "model_checkpoint_path")
    name = os.path.basename(found.group(1))
    recorded = f" ({state} records {name}; its files were deleted or not " \
               "copied)"
  prefix = os.path.join(directory, name)
  missing = [] if os.path.isfile(prefix + ".index") else [name + ".index"]
  shards = [re.search(r"\.data-(\d+)-of-(\d+)$", path) for path in
            glob.glob(glob.escape(prefix) + ".data-*-of-*")]
  shards = [m for m in shards if m]
  if not shards:
    missing.append(name + ".data-*")
  else:
    total = shards[0].group(2)
    missing += sorted({f"{name}.data-{i:0{len(total)}d}-of-{total}"
                       for i in range(int(total))}
                      - {os.path.basename(m.string) for m in shards})
  if missing:
    raise CorruptCheckpointError(f"{prefix}: checkpoint files missing: "
                                 f"{', '.join(missing)}{recorded}")
  return prefix


def _unreadable(prefix, e):
  return CorruptCheckpointError(
      f"{prefix}: cannot read the checkpoint ({_first_line(e)}); its data "
      "file is truncated or corrupt")


def _first_line(e):
  text = str(e).strip()
  return text.splitlines()[0][:300] if text else type(e).__name__


def stored_shapes(prefix):
  """{our variable name: shape} of the model variables a checkpoint holds,
  from its object graph: read from the files, without building a model."""
  from google.protobuf.message import DecodeError
  from tensorflow.core.protobuf import trackable_object_graph_pb2
  graph_key = "_CHECKPOINTABLE_OBJECT_GRAPH"
  try:
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    if graph_key not in shapes:
      return {}
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(graph_key))
  except (tf.errors.OpError, ValueError, IndexError, DecodeError) as e:
    raise _unreadable(prefix, e) from None
  return {a.full_name.split(":")[0]: shapes[a.checkpoint_key]
          for node in graph.nodes for a in node.attributes
          if a.checkpoint_key.startswith("model/")
          and ".OPTIMIZER_SLOT" not in a.checkpoint_key
          and a.checkpoint_key in shapes}


def _block_names(c):
  """The transformer blocks' layer names the encoder of `c` has."""
  if c.model_type == "mobilebert":
    return {f"layer_{i}" for i in range(c.num_hidden_layers)}
  names = set()
  for i in range(c.num_hidden_layers):
    g = c.group_of_layer(i)
    for part, shared in (("attention", ("all", "attention")),
                         ("ffn", ("all", "ffn"))):
      names.add(f"group_{g}_{part}" if c.sharing_mode in shared
                else f"layer_{i}_{part}")
  return names


def _check_against_checkpoint(directory, prefix, config, head):
  """CheckpointError naming the config.json / head.json field whose size
  the checkpoint's tensors do not have: checked on the stored shapes, so
  a vocab_size, max_position_embeddings or layer count that the weights
  do not have is refused before Keras allocates it."""
  shapes = stored_shapes(prefix)
  config_path = os.path.join(directory, "config.json")
  c, e = config, "embeddings/"
  check_sizes({
      e + "word_embeddings/embeddings": ("vocab_size", c.vocab_size, 0),
      e + "word_embeddings/kronecker_a": ("vocab_size", c.vocab_size, 0),
      e + "word_embeddings/table": ("vocab_size", c.vocab_size, 0),
      e + "position_embeddings": ("max_position_embeddings",
                                  c.max_position_embeddings, 0),
      e + "token_type_embeddings/embeddings": ("type_vocab_size",
                                               c.type_vocab_size, 0),
      e + "student_word_embeddings/embeddings": ("mixed_vocab_size",
                                                 c.mixed_vocab_size, 0),
  }, shapes, config_path, prefix)
  classes = {"classifier": {"classifier/logits/kernel": "num_classes"},
             "tagger": {"tagger/logits/kernel": "num_classes"},
             "intent_slot": {"intent_slot/intent/logits/kernel":
                             "num_classes",
                             "intent_slot/slots/logits/kernel": "num_slots"}}
  head_path = os.path.join(directory, "head.json")
  check_sizes({name: (field, getattr(head, field), 1)
               for name, field in classes.get(head.kind, {}).items()},
              shapes, head_path, prefix)
  # Heads of equal shapes (a 2-class classifier, a span head) would load
  # into each other silently: the checkpoint's layer names say which it is.
  layer_kinds = {"mlm": "pretrainer", **{k: k for k in HEAD_KINDS}}
  held_kinds = {layer_kinds[n.split("/")[0]] for n in shapes
                if n.split("/")[0] in layer_kinds}
  objectives = {n.split("/")[0] for n in shapes} & set(SENTENCE_OBJECTIVES)
  for field, value, held in (("kind", head.kind, held_kinds),
                             ("sentence_objective", head.sentence_objective,
                              objectives if head.kind == "pretrainer"
                              else set())):
    if value != "encoder" and held and value not in held:
      raise CheckpointError(
          f"{head_path}: field '{field}' is {value!r}, but the checkpoint "
          f"{prefix} holds a {'/'.join(sorted(held))} head; the checkpoint "
          "does not match head.json")
  block = re.compile(r"((?:layer|group)_\d+(?:_attention|_ffn)?)/")
  held = {m.group(1) for m in map(block.match, shapes) if m}
  wanted = _block_names(config)
  if held and held != wanted:
    order = lambda n: (int(re.search(r"\d+", n).group()), n)
    absent, extra = sorted(wanted - held, key=order), sorted(
        held - wanted, key=order)
    sharing = "" if c.sharing_mode == "none" else (
        f" (sharing_mode {c.sharing_mode!r}, num_hidden_groups "
        f"{c.num_hidden_groups})")
    found = (f"has no block {absent[0]}" if absent
             else f"also holds block {extra[0]}")
    raise CheckpointError(
        f"{config_path}: field 'num_hidden_layers' is {c.num_hidden_layers}"
        f"{sharing}, but the checkpoint {prefix} {found}; the checkpoint "
        "does not match config.json")


def _check_vocabulary(directory, config):
  """ConfigError when the vocabulary the directory's task.json records has
  more pieces than the word table: their ids would index past it."""
  from tfmodels.vocab_record import read_task, recorded
  path = os.path.join(directory, "task.json")
  try:
    record = recorded(read_task(directory), path)
  except ValueError as e:
    raise ConfigError(str(e)) from None
  if record is not None and record.size > config.vocab_size:
    raise ConfigError(
        f"{os.path.join(directory, 'config.json')}: field 'vocab_size' is "
        f"{config.vocab_size}, but the vocabulary {path} records has "
        f"{record.size} pieces")


def load_model_dir(directory):
  """(model, config, head) from `save_model_dir` or a training run's dir.

  A model directory is downloaded input: config.json and head.json are
  validated (bounds included), then held against the vocabulary task.json
  records and the checkpoint's stored shapes, all before a model is built;
  a refusal is one line naming the file and the field (ConfigError,
  CheckpointError or CorruptCheckpointError, all ValueErrors). A training
  run's recorded checkpoint is used (see `checkpoint_prefix`); its
  optimizer state is not.
  """
  config = load_config(os.path.join(directory, "config.json"))
  head = read_head(directory)
  _check_vocabulary(directory, config)
  prefix = checkpoint_prefix(directory)
  _check_against_checkpoint(directory, prefix, config, head)
  model = build_model(config, head)
  try:
    status = tf.train.Checkpoint(model=model).read(prefix)
    status.expect_partial().assert_existing_objects_matched()
  except (IndexError, tf.errors.DataLossError) as e:  # a truncated file
    raise _unreadable(prefix, e) from None
  except (ValueError, AssertionError) as e:  # a width or head that differs
    raise CorruptCheckpointError(
        f"{prefix}: checkpoint does not match config.json / head.json "
        f"({_first_line(e)})") from None
  return model, config, head
