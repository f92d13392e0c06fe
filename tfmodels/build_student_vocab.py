"""Learn a ~5K WordPiece vocabulary and report its teacher overlap.

    python -m tfmodels.build_student_vocab \\
        --corpus data/pretraining/train.txt.gz --vocab_size 5000 \\
        --output /tmp/student_vocab.txt \\
        --teacher_vocab data/vocab/uncased_vocab.txt
"""

import dataclasses
import os
import sys

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data.vocab_learning import learn_vocabulary, overlap, write_vocab
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import OutputError, check_output, lock_until_exit

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildStudentVocabOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`. --corpus and --output are needed but not
  marked required, so their absence is refused in one line by `main`."""
  corpus: tuple | None = option(None, "Text files (.txt, a line a "
                                "sentence), SQuAD files (.json: contexts "
                                "and questions) or TSVs (first column); "
                                "any gzipped.")
  vocab_size: int = option(5000, "Target size of the learned part.")
  output: str | None = option(None, "Where to write the vocab.txt.")
  teacher_vocab: str | None = option(
      None, "Teacher vocab.txt to report the overlap with.")
  do_lower_case: bool = option(True, "Uncased vocabulary.")
  max_lines: int | None = option(None, "Use only the first N lines.")
  max_unique_chars: int = option(
      1000, "Single characters kept as pieces at most (the learner's "
      "default; the printable ASCII ones are added whatever it is).")
  overwrite: bool = option(False, "Replace an existing --output.")


define_flags(BuildStudentVocabOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(BuildStudentVocabOptions, FLAGS)
  if not options.corpus or not options.output:
    sys.exit("error: --corpus and --output are required")
  for path in options.corpus:
    if not os.path.isfile(path):
      sys.exit(f"error: --corpus {path}: no such file")
  try:  # learning takes minutes: find out now that it could be written
    check_output(options.output, "--output", options.overwrite,
                 inputs=[("--corpus", c) for c in options.corpus])
    lock_until_exit(options.output, "--output")  # and one writer
  except OutputError as e:
    sys.exit(f"error: {e}")
  if options.max_lines is not None and options.max_lines < 1:
    sys.exit("error: --max_lines must be >= 1")
  if options.max_unique_chars < 1:
    sys.exit("error: --max_unique_chars must be >= 1")
  teacher = None
  if options.teacher_vocab:
    from tfmodels.tokenization import VocabError, load_vocab
    try:
      teacher = load_vocab(options.teacher_vocab)
    except VocabError as e:
      sys.exit(f"error: --teacher_vocab {e}")
  print(f"Learning a {options.vocab_size}-piece vocabulary from "
        f"{', '.join(options.corpus)}...", flush=True)
  try:
    vocab = learn_vocabulary(options.corpus, options.vocab_size,
                             options.do_lower_case, options.max_lines,
                             options.max_unique_chars)
  except ValueError as e:  # names the file or the flag's value
    sys.exit(f"error: {e}")
  try:
    write_vocab(vocab, options.output)
  except OSError as e:  # e.g. the disk filled up while learning
    sys.exit(f"error: --output {options.output}: cannot write it "
             f"({e.strerror})")
  print(f"Wrote {len(vocab)} pieces to {options.output}")
  if teacher:
    print(f"Teacher vocabulary ({len(teacher)} pieces) holds "
          f"{100 * overlap(vocab, teacher):.1f}% of them "
          "(Zhao et al. report 93.9%).")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
