"""tf.data reader of the pre-training shards `create_pretraining_data` writes.

    ds = pretraining_dataset("/tmp/pretrain", batch_size=32)
    batch = next(iter(ds))   # dict of int32 / float32 tensors

Each element is one dict: the model inputs of `models.build_pretrainer`
(`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`) and the
labels (`masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`, and in
mixed-vocabulary mode `input_vocab`, `masked_lm_vocab`). Lengths come from
the `meta.json` beside the shards.
"""

import glob
import json
import os

import tensorflow as tf

from tfmodels.data.pretraining_records import SHARD_NAME

def read_meta(directory):
  path = os.path.join(directory, "meta.json")
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f"{path}: cannot read pre-training metadata ({e})"
                     ) from None


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
  meta = read_meta(directory)
  options = meta["options"]
  pattern = os.path.join(directory, SHARD_NAME.replace("{:05d}", "*"))
  files = sorted(glob.glob(pattern))
  if not files:
    raise ValueError(f"{directory}: no shards matching {pattern}")
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
