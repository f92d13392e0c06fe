"""Print the WordPieces of each stdin line, separated by single spaces.

So anyone can check our tokenization against another tokenizer:

    echo "Héllo, wörld!" | python -m tfmodels.tokenize_lines \
        --vocab_file data/vocab/uncased_vocab.txt
    # hello , world !
"""

import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_file", None, "BERT vocab.txt.")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case and strip accents (uncased models).")
flags.mark_flag_as_required("vocab_file")

_LINES_PER_BATCH = 2048


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  try:
    tokenizer = WordPieceTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  except VocabError as e:
    sys.exit(f"error: --vocab_file {e}")
  stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace",
               newline="\n", closefd=False)
  batch = []
  for line in stdin:
    batch.append(line.rstrip("\n").rstrip("\r"))
    if len(batch) == _LINES_PER_BATCH:
      _emit(tokenizer, batch)
      batch = []
  _emit(tokenizer, batch)


def _emit(tokenizer, lines):
  for pieces in tokenizer.tokenize_batch(lines):
    sys.stdout.write(" ".join(pieces) + "\n")
  sys.stdout.flush()


def run():
  app.run(main)


if __name__ == "__main__":
  run()
