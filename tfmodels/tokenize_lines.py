"""Print the WordPieces of each stdin line, separated by single spaces.

So anyone can check our tokenization against another tokenizer:

    echo "Héllo, wörld!" | python -m tfmodels.tokenize_lines \
        --vocab_file data/vocab/uncased_vocab.txt
    # hello , world !

The settings are the flags' (Hugging Face's names), as the Java core's
TokenizeMain takes them, not a tokenizer_config.json beside the vocabulary.
"""

import dataclasses
import sys

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenizeLinesOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  vocab_file: str = option(None, "BERT vocab.txt.", required=True)
  do_lower_case: bool = option(
      True, "Lower-case and strip accents (uncased models).")
  strip_accents: str = option(
      "none", "Strip accents: true, false, or none (when lower-casing).",
      choices=("true", "false", "none"))
  tokenize_chinese_chars: bool = option(
      True, "Each CJK ideograph a word of its own.")


define_flags(TokenizeLinesOptions)

_LINES_PER_BATCH = 2048


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(TokenizeLinesOptions, FLAGS)
  from tfmodels.tokenization import (TokenizerSettings, VocabError,
                                     WordPieceTokenizer)
  settings = TokenizerSettings(
      options.do_lower_case,
      {"true": True, "false": False, "none": None}[options.strip_accents],
      options.tokenize_chinese_chars)
  try:
    tokenizer = WordPieceTokenizer(options.vocab_file, settings=settings)
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
