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

import dataclasses
import json
import os
import random
import sys

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats
from tfmodels.sigterm import exit_on_sigterm

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePretrainingDataOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(CreatePretrainingDataOptions, **values)`."""
  input_file: tuple = option(None, "Text files (.txt or .txt.gz).",
                             required=True)
  output_dir: str = option(None, "Directory for the shards.", required=True)
  vocab_file: str = option(None, "(Teacher) BERT vocab.txt.", required=True)
  do_lower_case: bool = option(True, "Uncased tokenization.")
  student_vocab_file: str | None = option(
      None, "Student vocab.txt: mixed-vocabulary stage-I mode.")
  max_seq_length: int = option(128, "Tokens per instance.")
  max_predictions_per_seq: int = option(20, "Masked tokens, at most.")
  masked_lm_prob: float = option(0.15, "Fraction of tokens masked.")
  short_seq_prob: float = option(0.1,
                                 "Probability of a shorter target length.")
  dupe_factor: int = option(10, "Passes over the input, each with different "
                            "masks.")
  do_whole_word_mask: bool = option(False, "Mask whole words.")
  max_ngram: int = option(1, "ALBERT n-gram masking: 3 (p(n) ~ 1/n).")
  sentence_objective: str = option(
      "nsp", "Next-sentence or sentence-order prediction pairs.",
      choices=("nsp", "sop"))
  student_vocab_prob: float = option(
      0.5, "p_SV: probability a word is student-segmented.")
  max_teacher_predictions: int = option(
      10, "Mixed mode: teacher-tokenized masked tokens, at most.")
  num_shards: int = option(4, "Output shards.")
  random_seed: int = option(12345, "Seed for all random choices.")
  overwrite: bool = option(False, "Replace an existing --output_dir.")


define_flags(CreatePretrainingDataOptions)

OWNER = "create_pretraining_data"  # what --overwrite may replace


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  refuse_nonfinite_floats(FLAGS)
  command = from_flags(CreatePretrainingDataOptions, FLAGS)
  from tfmodels.data.pretraining import MixedVocabulary, PretrainingOptions
  from tfmodels.staging import OutputError, output_lock
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  for path in command.input_file:
    if not os.path.isfile(path):
      sys.exit(f"error: --input_file {path}: no such file")
  if command.num_shards < 1 or command.dupe_factor < 1:
    sys.exit("error: --num_shards and --dupe_factor must be >= 1")
  try:
    options = PretrainingOptions(
        max_seq_length=command.max_seq_length,
        max_predictions_per_seq=command.max_predictions_per_seq,
        masked_lm_prob=command.masked_lm_prob,
        short_seq_prob=command.short_seq_prob,
        whole_word_mask=command.do_whole_word_mask,
        max_ngram=command.max_ngram,
        sentence_objective=command.sentence_objective,
        student_vocab_prob=command.student_vocab_prob,
        max_teacher_predictions=command.max_teacher_predictions)
  except ValueError as e:
    sys.exit(f"error: --{e}")
  try:
    teacher = WordPieceTokenizer(command.vocab_file, command.do_lower_case)
    student = (WordPieceTokenizer(command.student_vocab_file,
                                  command.do_lower_case)
               if command.student_vocab_file else None)
  except VocabError as e:
    sys.exit(f"error: {e}")
  vocab = MixedVocabulary(teacher, student)
  try:
    # One writer per output: a second run into it is refused at once.
    with output_lock(command.output_dir, "--output_dir"):
      _create(options, vocab, command)
  except OutputError as e:
    sys.exit(f"error: {e}")


def _create(options, vocab, command):
  """Refuses an existing output it may not replace, then builds and writes
  the shards (`options` the PretrainingOptions, `command` the command
  line's)."""
  from tfmodels.data.pretraining import create_instances, read_documents
  from tfmodels.data.pretraining_records import (is_own_output, summarize,
                                                 write_shards)
  from tfmodels.staging import check_output, staged_directory

  check_output(command.output_dir, "--output_dir", command.overwrite, OWNER,
               inputs=[("--input_file", f) for f in command.input_file],
               recognised=is_own_output)  # shards written before the record

  print(f"Reading {len(command.input_file)} file(s)...", flush=True)
  try:
    documents = read_documents(command.input_file, vocab)
  except ValueError as e:
    sys.exit(f"error: --input_file {e}")
  if len(documents) < 2:
    sys.exit(f"error: --input_file has {len(documents)} document(s); "
             "separate documents with blank lines (need at least 2)")
  print(f"{len(documents)} documents; building instances "
        f"(dupe_factor={command.dupe_factor})", flush=True)
  from tqdm import tqdm
  rng = random.Random(command.random_seed)
  with tqdm(total=len(documents) * command.dupe_factor, unit="doc",
            file=sys.stdout) as bar:
    instances = create_instances(documents, vocab, options, rng,
                                 command.dupe_factor, progress=bar.update)

  with staged_directory(command.output_dir, OWNER, "--output_dir",
                        is_own_output) as staging:
    write_shards(instances, vocab, options, staging, command.num_shards)
    meta = {
        "options": dataclasses.asdict(options),
        "mixed_vocabulary": vocab.mixed,
        "teacher_vocab_size": vocab.teacher_size,
        "vocab_size": vocab.size,
        "num_shards": command.num_shards,
        "documents": len(documents),
        "dupe_factor": command.dupe_factor,
        "input_files": command.input_file,
        "random_seed": command.random_seed,
        **summarize(instances, vocab),
    }
    with open(os.path.join(staging, "meta.json"), "w") as f:
      json.dump(meta, f, indent=2)
  print(f"Wrote {meta['instances']} instances, masked fraction "
        f"{meta['masked_fraction']:.4f}, to {command.output_dir}")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
