"""How much of WordNet QA a model's word table answers by itself.

    python -m experiments.lexical_probe --model_dir RUN [--rank 128]

The table's answer to "which word means ...?" is the context word nearest
the definition in word vectors (`word_table_probe`); no encoder runs.
What it scores is knowledge the table already holds: an
encoder that scores far below it on the same questions loses that
knowledge, one that scores above it adds to it. `--rank k` first truncates
the table to rank k (Eckart-Young, as `low_rank_init` starts a student's).
The vocabulary is the run's own (task.json's); a --vocab_file must be that
one (another gives a confident wrong score), and is the shipped uncased one
for a directory that records none.
"""

import json
import os
import sys

from absl import app, flags

from experiments.paths import DATA, VOCAB
from experiments.word_table_probe import probe, read_questions, word_table

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A model or run directory.")
flags.DEFINE_string("data_dir", os.path.join(DATA, "wordnet_qa"),
                    "WordNet QA (SQuAD v1.1 JSON, as `finetune --task squad` "
                    "reads it).")
flags.DEFINE_string("split", "dev", "The split probed.")
flags.DEFINE_string("vocab_file", None, "The model's vocab.txt (default: "
                    "the one its task.json records, else the shipped "
                    "uncased one); refused unless it is the recorded one.")
flags.DEFINE_integer("rank", 0, "Truncate the table to this rank first "
                     "(0: as it is).")
flags.DEFINE_string("output", None, "Also write the figures here (JSON).")


def main(argv):
  del argv
  from tfmodels.staging import check_writable, write_file
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import split_file
  from tfmodels.vocab_record import resolve
  if not FLAGS.model_dir:
    sys.exit("error: --model_dir is required")
  if FLAGS.rank < 0:
    sys.exit(f"error: --rank {FLAGS.rank}: must be >= 0")
  try:
    if FLAGS.output:
      check_writable(FLAGS.output, "--output")
    questions = read_questions(split_file(FLAGS.data_dir, FLAGS.split,
                                          "json"))
    vocab_file = resolve(FLAGS.model_dir, FLAGS.vocab_file, default=VOCAB)
    tokenizer = WordPieceTokenizer(vocab_file, True)
    table = word_table(FLAGS.model_dir, FLAGS.rank)
    if len(tokenizer.vocab) > len(table):
      raise ValueError(f"--vocab_file {vocab_file} has "
                       f"{len(tokenizer.vocab)} pieces but the table has "
                       f"{len(table)} rows")
  except (OSError, ValueError) as e:
    sys.exit(f"error: {e}")
  result = probe(table, tokenizer, questions)
  result.update(model_dir=FLAGS.model_dir, rank=FLAGS.rank or None,
                data_dir=FLAGS.data_dir, split=FLAGS.split)
  rank = f" at rank {FLAGS.rank}" if FLAGS.rank else ""
  print(f"{FLAGS.model_dir}: the word table{rank} answers "
        f"{result['correct']} of {result['total']} questions exactly "
        f"({result['exact_match']:.1f}%) by nearest word vector")
  if FLAGS.output:
    write_file(FLAGS.output, json.dumps(result, indent=2) + "\n")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
