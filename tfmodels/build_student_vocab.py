"""Learn a ~5K WordPiece vocabulary and report its teacher overlap.

    python -m tfmodels.build_student_vocab \\
        --corpus data/pretraining/train.txt.gz --vocab_size 5000 \\
        --output /tmp/student_vocab.txt \\
        --teacher_vocab data/vocab/uncased_vocab.txt
"""

import os
import sys

from absl import app, flags

from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import OutputError, lock_until_exit
from tfmodels.vocab_learning import learn_vocabulary, overlap, write_vocab

FLAGS = flags.FLAGS

flags.DEFINE_list("corpus", None, "Text files (.txt or .txt.gz).")
flags.DEFINE_integer("vocab_size", 5000, "Target size of the learned part.")
flags.DEFINE_string("output", None, "Where to write the vocab.txt.")
flags.DEFINE_string("teacher_vocab", None,
                    "Teacher vocab.txt to report the overlap with.")
flags.DEFINE_bool("do_lower_case", True, "Uncased vocabulary.")
flags.DEFINE_integer("max_lines", None, "Use only the first N lines.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.corpus or not FLAGS.output:
    sys.exit("error: --corpus and --output are required")
  for path in FLAGS.corpus:
    if not os.path.isfile(path):
      sys.exit(f"error: --corpus {path}: no such file")
  if os.path.exists(FLAGS.output) and not FLAGS.overwrite:
    sys.exit(f"error: --output {FLAGS.output} exists (pass --overwrite)")
  if os.path.isdir(FLAGS.output):
    sys.exit(f"error: --output {FLAGS.output} is a directory")
  try:  # learning takes minutes: find out now that it could be written
    lock_until_exit(FLAGS.output, "--output")  # and one writer
  except OutputError as e:
    sys.exit(f"error: {e}")
  if FLAGS.max_lines is not None and FLAGS.max_lines < 1:
    sys.exit("error: --max_lines must be >= 1")
  teacher = None
  if FLAGS.teacher_vocab:
    from tfmodels.tokenization import VocabError, load_vocab
    try:
      teacher = load_vocab(FLAGS.teacher_vocab)
    except VocabError as e:
      sys.exit(f"error: --teacher_vocab {e}")
  print(f"Learning a {FLAGS.vocab_size}-piece vocabulary from "
        f"{', '.join(FLAGS.corpus)}...", flush=True)
  try:
    vocab = learn_vocabulary(FLAGS.corpus, FLAGS.vocab_size,
                             FLAGS.do_lower_case, FLAGS.max_lines)
  except ValueError as e:  # names the file or the flag's value
    sys.exit(f"error: {e}")
  try:
    write_vocab(vocab, FLAGS.output)
  except OSError as e:  # e.g. the disk filled up while learning
    sys.exit(f"error: --output {FLAGS.output}: cannot write it "
             f"({e.strerror})")
  print(f"Wrote {len(vocab)} pieces to {FLAGS.output}")
  if teacher:
    print(f"Teacher vocabulary ({len(teacher)} pieces) holds "
          f"{100 * overlap(vocab, teacher):.1f}% of them "
          "(Zhao et al. report 93.9%).")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
