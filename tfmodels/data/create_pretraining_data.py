"""Write sharded pre-training TFRecords from text (one sentence per line).

    python -m tfmodels.data.create_pretraining_data \
        --input_file data/pretraining/train.txt.gz \
        --output_dir /tmp/pretrain --vocab_file data/vocab/uncased_vocab.txt \
        --max_seq_length 128 --max_predictions_per_seq 20 --dupe_factor 5

Features are BERT's (`input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`; label 1 = random next / swapped order). With
`--student_vocab_file` (mixed-vocabulary stage I) student ids are offset by
the teacher vocabulary size and `input_vocab` / `masked_lm_vocab` mark each
token's vocabulary (0 teacher, 1 student). `meta.json` beside the shards
records the settings and counts, so readers need not be told the lengths.
"""

import collections
import json
import os
import random
import shutil
import sys
import tempfile

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Text files (.txt or .txt.gz).")
flags.DEFINE_string("output_dir", None, "Directory for the shards.")
flags.DEFINE_string("vocab_file", None, "(Teacher) BERT vocab.txt.")
flags.DEFINE_bool("do_lower_case", True, "Uncased tokenization.")
flags.DEFINE_string("student_vocab_file", None,
                    "Student vocab.txt: mixed-vocabulary stage-I mode.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked tokens, at most.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens masked.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of a shorter target length.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the input, each with "
                     "different masks.")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words.")
flags.DEFINE_integer("max_ngram", 1, "ALBERT n-gram masking: 3 (p(n) ~ 1/n).")
flags.DEFINE_enum("sentence_objective", "nsp", ["nsp", "sop"],
                  "Next-sentence or sentence-order prediction pairs.")
flags.DEFINE_float("student_vocab_prob", 0.5,
                   "p_SV: probability a word is student-segmented.")
flags.DEFINE_integer("max_teacher_predictions", 10,
                     "Mixed mode: teacher-tokenized masked tokens, at most.")
flags.DEFINE_integer("num_shards", 4, "Output shards.")
flags.DEFINE_integer("random_seed", 12345, "Seed for all random choices.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output_dir.")
for _name in ("input_file", "output_dir", "vocab_file"):
  flags.mark_flag_as_required(_name)

SHARD_NAME = "pretrain-{:05d}-of-{:05d}.tfrecord"


def instance_features(instance, vocab, max_seq_length, max_predictions):
  """Padded feature lists of one instance (dict name -> list)."""
  import numpy as np
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
  import tensorflow as tf
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
  """Writes the shards and meta.json into output_dir (must not exist)."""
  import tensorflow as tf
  writers = [tf.io.TFRecordWriter(
      os.path.join(output_dir, SHARD_NAME.format(i, num_shards)))
             for i in range(num_shards)]
  for k, inst in enumerate(instances):
    example = to_example(instance_features(
        inst, vocab, options.max_seq_length, options.max_predictions_per_seq))
    writers[k % num_shards].write(example.SerializeToString())
  for w in writers:
    w.close()


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  import dataclasses
  from tfmodels.data.pretraining import (MixedVocabulary, PretrainingOptions,
                                         create_instances, read_documents)
  from tfmodels.tokenization import VocabError, WordPieceTokenizer

  for path in FLAGS.input_file:
    if not os.path.isfile(path):
      sys.exit(f"error: --input_file {path}: no such file")
  if os.path.exists(FLAGS.output_dir) and not FLAGS.overwrite:
    sys.exit(f"error: --output_dir {FLAGS.output_dir} exists "
             "(pass --overwrite to replace it)")
  if FLAGS.num_shards < 1 or FLAGS.dupe_factor < 1:
    sys.exit("error: --num_shards and --dupe_factor must be >= 1")
  try:
    options = PretrainingOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        whole_word_mask=FLAGS.do_whole_word_mask,
        max_ngram=FLAGS.max_ngram,
        sentence_objective=FLAGS.sentence_objective,
        student_vocab_prob=FLAGS.student_vocab_prob,
        max_teacher_predictions=FLAGS.max_teacher_predictions)
  except ValueError as e:
    sys.exit(f"error: --{e}")
  try:
    teacher = WordPieceTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    student = (WordPieceTokenizer(FLAGS.student_vocab_file,
                                  FLAGS.do_lower_case)
               if FLAGS.student_vocab_file else None)
  except VocabError as e:
    sys.exit(f"error: {e}")
  vocab = MixedVocabulary(teacher, student)

  print(f"Reading {len(FLAGS.input_file)} file(s)...", flush=True)
  documents = read_documents(FLAGS.input_file, vocab)
  if len(documents) < 2:
    sys.exit(f"error: --input_file has {len(documents)} document(s); "
             "separate documents with blank lines (need at least 2)")
  print(f"{len(documents)} documents; building instances "
        f"(dupe_factor={FLAGS.dupe_factor})", flush=True)
  from tqdm import tqdm
  rng = random.Random(FLAGS.random_seed)
  with tqdm(total=len(documents) * FLAGS.dupe_factor, unit="doc",
            file=sys.stdout) as bar:
    instances = create_instances(documents, vocab, options, rng,
                                 FLAGS.dupe_factor, progress=bar.update)

  parent = os.path.dirname(os.path.abspath(FLAGS.output_dir))
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=".pretrain-", dir=parent)
  try:
    write_shards(instances, vocab, options, staging, FLAGS.num_shards)
    meta = {
        "options": dataclasses.asdict(options),
        "mixed_vocabulary": vocab.mixed,
        "teacher_vocab_size": vocab.teacher_size,
        "vocab_size": vocab.size,
        "num_shards": FLAGS.num_shards,
        "documents": len(documents),
        "dupe_factor": FLAGS.dupe_factor,
        "input_files": FLAGS.input_file,
        "random_seed": FLAGS.random_seed,
        **summarize(instances, vocab),
    }
    with open(os.path.join(staging, "meta.json"), "w") as f:
      json.dump(meta, f, indent=2)
    if os.path.exists(FLAGS.output_dir):
      shutil.rmtree(FLAGS.output_dir)
    os.rename(staging, FLAGS.output_dir)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  print(f"Wrote {meta['instances']} instances, masked fraction "
        f"{meta['masked_fraction']:.4f}, to {FLAGS.output_dir}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
