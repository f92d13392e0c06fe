"""Pre-training instances as TFRecord shards, and their statistics.

Feature names are BERT's; in mixed-vocabulary mode `input_vocab` and
`masked_lm_vocab` mark each position's vocabulary (0 teacher, 1 student).
Shared by the `create_pretraining_data` command (writer) and
`pretraining_dataset` (reader).
"""

import collections
import os

import numpy as np
import tensorflow as tf

SHARD_NAME = "pretrain-{:05d}-of-{:05d}.tfrecord"


def instance_features(instance, vocab, max_seq_length, max_predictions):
  """Padded feature lists of one instance (dict name -> list)."""
  n = len(instance.tokens)
  pad = max_seq_length - n
  p = len(instance.masked_lm_positions)
  ppad = max_predictions - p
  features = collections.OrderedDict(
      input_ids=instance.tokens + [0] * pad,
      input_mask=[1] * n + [0] * pad,
      segment_ids=instance.segment_ids + [0] * pad,
      masked_lm_positions=instance.masked_lm_positions + [0] * ppad,
      masked_lm_ids=instance.masked_lm_ids + [0] * ppad,
      masked_lm_weights=[1.0] * p + [0.0] * ppad,
      next_sentence_labels=[int(instance.is_random_next)])
  if vocab.mixed:
    # Which vocabulary segmented each position, masked ones included.
    original = np.asarray(instance.tokens)
    original[instance.masked_lm_positions] = instance.masked_lm_ids
    features["input_vocab"] = (original >= vocab.teacher_size).astype(
        int).tolist() + [0] * pad
    features["masked_lm_vocab"] = [
        vocab.vocab_of(t) for t in instance.masked_lm_ids] + [0] * ppad
  return features


def to_example(features):
  feature = {}
  for name, values in features.items():
    if isinstance(values[0], float):
      feature[name] = tf.train.Feature(
          float_list=tf.train.FloatList(value=values))
    else:
      feature[name] = tf.train.Feature(
          int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(feature=feature))


def summarize(instances, vocab):
  """Counts the tests and the demo report read back from meta.json."""
  tokens = masked = replaced_mask = kept = 0
  ngrams = collections.Counter()
  for inst in instances:
    tokens += len(inst.tokens)
    masked += len(inst.masked_lm_positions)
    for pos, orig in zip(inst.masked_lm_positions, inst.masked_lm_ids):
      replaced_mask += inst.tokens[pos] == vocab.mask_id
      kept += inst.tokens[pos] == orig
    ngrams.update(inst.ngram_lengths)
  return {
      "instances": len(instances),
      "tokens": tokens,
      "masked_tokens": masked,
      "masked_fraction": masked / max(tokens, 1),
      "mask_token_fraction": replaced_mask / max(masked, 1),
      "kept_fraction": kept / max(masked, 1),
      "random_next_fraction":
          sum(i.is_random_next for i in instances) / max(len(instances), 1),
      "ngram_counts": {str(k): v for k, v in sorted(ngrams.items())},
  }


def write_shards(instances, vocab, options, output_dir, num_shards):
  """Writes `num_shards` shards into output_dir, round-robin."""
  writers = [tf.io.TFRecordWriter(
      os.path.join(output_dir, SHARD_NAME.format(i, num_shards)))
             for i in range(num_shards)]
  for k, inst in enumerate(instances):
    example = to_example(instance_features(
        inst, vocab, options.max_seq_length, options.max_predictions_per_seq))
    writers[k % num_shards].write(example.SerializeToString())
  for w in writers:
    w.close()


def is_own_output(directory):
  """True if directory holds only shards and meta.json (safe to replace)."""
  pattern = SHARD_NAME.split("{")[0]
  return all(name == "meta.json" or name.startswith(pattern)
             for name in os.listdir(directory))
