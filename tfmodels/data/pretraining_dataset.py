"""tf.data reader of pre-training shards: ours, Google's and the Model Garden's.

    ds = pretraining_dataset("/tmp/pretrain", batch_size=32)
    batch = next(iter(ds))   # dict of int32 / float32 tensors

Each element is one dict: the model inputs of `models.build_pretrainer`
(`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`) and the
labels (`masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`, and in
mixed-vocabulary mode `input_vocab`, `masked_lm_vocab`). Lengths come from
the `meta.json` that `create_pretraining_data` writes beside its shards.

Google's BERT and the Model Garden's `create_pretraining_data` write the
same features without a `meta.json`: a directory (or a file, or a glob) of
their TFRecords is read with the lengths taken from its first record and
the vocabulary size from the largest id in the first `VOCAB_SCAN_RECORDS`
records (`meta_from_records`). Their sentence labels are NSP's.
"""

import glob
import json
import os
import re

import tensorflow as tf

from tfmodels.data.pretraining_records import SHARD_NAME

META = "meta.json"
VOCAB_SCAN_RECORDS = 10_000
# What Google's and the Model Garden's scripts name their output files.
FOREIGN_SHARDS = ("*.tfrecord*", "*.tf_record*", "*.tfrec")
LENGTH_FEATURES = {"input_ids": "max_seq_length",
                   "masked_lm_positions": "max_predictions_per_seq"}


def read_meta(path, verify=True):
  """Shard metadata: `meta.json` beside our shards, else from the records.

  Always holds "files", the shards to read, besides what meta.json says.
  With `verify` every record of every shard is read and parsed first
  (`verify_shards`), so a truncated or corrupt shard is named before a run
  starts rather than failing it midway.
  """
  if os.path.isdir(path) and os.path.exists(os.path.join(path, META)):
    meta_path = os.path.join(path, META)
    try:
      with open(meta_path) as f:
        meta = json.load(f)
    except (OSError, ValueError) as e:
      raise ValueError(f"{meta_path}: cannot read pre-training metadata "
                       f"({e})") from None
    _check_meta(meta, meta_path)
    pattern = os.path.join(path, SHARD_NAME.replace("{:05d}", "*"))
    files = sorted(glob.glob(pattern))
    if not files:
      raise ValueError(f"{path}: no shards matching {pattern}")
    meta = dict(meta, files=files)
  else:
    meta = meta_from_records(_foreign_files(path))
  if verify:
    verify_shards(meta)
  return meta


def _check_meta(meta, meta_path):
  """ValueError naming the first field of meta.json a reader relies on that
  is missing or of the wrong type."""
  def fail(field, wanted, value):
    raise ValueError(f"{meta_path}: {field} must be {wanted}, got "
                     f"{value!r}")
  if not isinstance(meta, dict):
    fail("the top level", "a JSON object", type(meta).__name__)
  options = meta.get("options")
  if not isinstance(options, dict):
    fail("options", "an object", options)
  for key in ("max_seq_length", "max_predictions_per_seq"):
    value = options.get(key)
    if not (type(value) is int and value > 0):  # pylint: disable=unidiomatic-typecheck
      fail(f"options.{key}", "a positive integer", value)
  if options.get("sentence_objective") not in ("nsp", "sop"):
    fail("options.sentence_objective", '"nsp" or "sop"',
         options.get("sentence_objective"))
  if not isinstance(meta.get("mixed_vocabulary"), bool):
    fail("mixed_vocabulary", "true or false", meta.get("mixed_vocabulary"))
  for key in ("vocab_size", "teacher_vocab_size"):  # trainers read them
    if key in meta and not (type(meta[key]) is int and meta[key] >= 0):  # pylint: disable=unidiomatic-typecheck
      fail(key, "a non-negative integer", meta[key])


def verify_shards(meta, batch_size=512):
  """ValueError naming the shard (and record) that is truncated, fails its
  CRC or does not parse as the pre-training features meta says it holds."""
  options = meta["options"]
  spec = feature_spec(options["max_seq_length"],
                      options["max_predictions_per_seq"],
                      meta["mixed_vocabulary"])
  for path in meta["files"]:
    start = 0
    try:
      for records in tf.data.TFRecordDataset(path).batch(batch_size):
        _parse_or_name(records, spec, path, start)
        start += int(records.shape[0])
    except tf.errors.DataLossError as e:
      raise ValueError(f"{path}: record {_first_bad(path, start)} is "
                       f"truncated or corrupt ({_reason(e)})") from None
    except tf.errors.OpError as e:
      raise ValueError(f"{path}: cannot read TFRecords "
                       f"({_reason(e)})") from None


def _reason(error):
  """The readable core of a tf.data error: 'corrupted record at byte 4864'."""
  found = re.search(r"(truncated|corrupted) record at (\d+)", error.message)
  if found:
    return f"{found.group(1)} record at byte {found.group(2)}"
  message = re.sub(r"\{\{.*?\}\}\s*", "", error.message.splitlines()[0])
  return re.sub(r"\s*\[Op:.*$", "", message)


def _first_bad(path, start):
  """Index of the first unreadable record at or after `start`."""
  index = start
  try:
    for _ in tf.data.TFRecordDataset(path).skip(start):
      index += 1
  except tf.errors.DataLossError:
    pass
  return index


def _parse_or_name(records, spec, path, start):
  try:
    tf.io.parse_example(records, spec)
  except tf.errors.InvalidArgumentError:
    for i, record in enumerate(records):
      try:
        tf.io.parse_single_example(record, spec)
      except tf.errors.InvalidArgumentError as e:
        raise ValueError(f"{path}: record {start + i} is not a pre-training "
                         "record of the lengths meta.json gives "
                         f"({e.message.splitlines()[0]})") from None
    raise


def check_fits(meta, config, flag="--config"):
  """ValueError unless `config` can read these shards: its positions hold
  their sequences and its vocabulary their ids."""
  length = meta["options"]["max_seq_length"]
  if length > config.max_position_embeddings:
    raise ValueError(f"{flag} max_position_embeddings is "
                     f"{config.max_position_embeddings} but the shards' "
                     f"sequences are {length} long")
  if "vocab_size" not in meta:
    raise ValueError(f"{meta['files'][0]}: the shards' meta.json has no "
                     "vocab_size")
  if not meta["mixed_vocabulary"] and meta["vocab_size"] > config.vocab_size:
    raise ValueError(f"{flag} vocab_size is {config.vocab_size} but the "
                     f"shards' ids reach {meta['vocab_size']}")


def _foreign_files(path):
  """TFRecord files named by a directory, a file or a glob."""
  if os.path.isdir(path):
    files = sorted({f for pattern in FOREIGN_SHARDS
                    for f in glob.glob(os.path.join(path, pattern))})
    if not files:
      raise ValueError(f"{path}: no {META} and no TFRecord files "
                       f"({', '.join(FOREIGN_SHARDS)})")
    return files
  files = sorted(f for f in glob.glob(path) if os.path.isfile(f))
  if not files:
    raise ValueError(f"{path}: no such shard directory, file or pattern")
  return files


def meta_from_records(files):
  """meta.json's fields that the readers need, from the records themselves."""
  first = None
  vocab_size = 0
  try:
    records = tf.data.TFRecordDataset(files).take(VOCAB_SCAN_RECORDS)
    for record in records:
      example = tf.train.Example.FromString(record.numpy())
      features = example.features.feature
      if first is None:
        first = features
        missing = [k for k in feature_spec(1, 1) if k not in features]
        if missing:
          raise ValueError(f"{files[0]}: not a pre-training record (no "
                           f"{', '.join(missing)})")
      for key in ("input_ids", "masked_lm_ids"):
        ids = features[key].int64_list.value
        vocab_size = max(vocab_size, max(ids, default=0) + 1)
  except tf.errors.OpError as e:
    raise ValueError(f"{', '.join(files)}: cannot read TFRecords "
                     f"({e.message.splitlines()[0]})") from None
  if first is None:
    raise ValueError(f"{', '.join(files)}: no records")
  options = {field: len(first[key].int64_list.value)
             for key, field in LENGTH_FEATURES.items()}
  return {"options": dict(options, sentence_objective="nsp"),
          "mixed_vocabulary": False, "vocab_size": vocab_size,
          "files": files, "source": "records"}


def feature_spec(seq_length, max_predictions, mixed_vocabulary=False):
  spec = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([max_predictions],
                                                   tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions],
                                                 tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }
  if mixed_vocabulary:
    spec["input_vocab"] = tf.io.FixedLenFeature([seq_length], tf.int64)
    spec["masked_lm_vocab"] = tf.io.FixedLenFeature([max_predictions],
                                                    tf.int64)
  return spec


def pretraining_dataset(directory, batch_size, is_training=True, seed=None,
                        input_context=None, skip_batches=0):
  """Batched dicts from the shards in `directory` (see module docstring).

  Training shuffles shards and records (deterministically for a given
  seed) and repeats forever; evaluation reads each record once in order.
  `input_context` (tf.distribute) gives each input pipeline every k-th
  record of the common stream;
  `skip_batches` resumes a training stream where a checkpoint left it.
  """
  meta = read_meta(directory, verify=False)  # the command verified them
  options, files = meta["options"], meta["files"]
  spec = feature_spec(options["max_seq_length"],
                      options["max_predictions_per_seq"],
                      meta["mixed_vocabulary"])
  ds = tf.data.Dataset.from_tensor_slices(files)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed).repeat()
  ds = ds.interleave(tf.data.TFRecordDataset,
                     cycle_length=min(len(files), 4),
                     num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=True)
  if is_training:
    ds = ds.shuffle(10_000, seed=seed)
  if input_context and input_context.num_input_pipelines > 1:
    # Every pipeline runs the same seeded stream and keeps every k-th
    # record, so k workers' batches together are exactly one worker's.
    ds = ds.shard(input_context.num_input_pipelines,
                  input_context.input_pipeline_id)
  ds = ds.batch(batch_size, drop_remainder=is_training)
  if skip_batches:
    ds = ds.skip(skip_batches)
  ds = ds.map(lambda records: _decode(records, spec),
              num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def _decode(records, spec):
  parsed = tf.io.parse_example(records, spec)
  out = {}
  for name, tensor in parsed.items():
    out[name] = tf.cast(tensor, tf.int32) if tensor.dtype == tf.int64 else (
        tensor)
  out["next_sentence_labels"] = tf.squeeze(out["next_sentence_labels"], -1)
  return out
