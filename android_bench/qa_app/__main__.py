"""The QA app without a phone: answer a question about a passage file.

    python -m android_bench.qa_app --model qa.tflite --passage passage.txt \
        --question "Which word means: a large natural stream of water?"

Prints the answer on stdout (an empty line if no span qualifies) and, on
stderr, the windows and the model time, as the app shows them. The
vocabulary is the one the model carries (convert_tflite attaches it);
--vocab must be that very vocabulary (it is refused otherwise) and is needed
only for a model without metadata.
"""

import dataclasses
import sys

from absl import app, flags

from android_bench.qa_app import DEFAULT_THREADS
from tfmodels.command_options import define_flags, from_flags, option

FLAGS = flags.FLAGS
# Needed, but checked by `main` (one line each, where absl's check prints
# two), not marked required.
REQUIRED = ("model", "passage", "question")


@dataclasses.dataclass(frozen=True, kw_only=True)
class QaAppOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  model: str | None = option(None, "Converted span model (.tflite) with "
                             "inputs ids, mask, segment_ids and outputs "
                             "start_logits, end_logits.")
  vocab: str | None = option(None, "BERT vocab.txt the model was trained "
                             "with (default: the one its metadata "
                             "carries).")
  do_lower_case: bool = option(True, "Lower-case (uncased vocabularies; "
                               "accents and CJK as the tokenizer settings "
                               "the model carries say).")
  passage: str | None = option(None, "Text file (UTF-8, plain or gzip) "
                               "holding the passage.")
  question: str | None = option(None, "The question.")
  num_threads: int = option(DEFAULT_THREADS, "Interpreter threads.")


define_flags(QaAppOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(QaAppOptions, FLAGS)
  # The cheap checks first: TensorFlow (the tokenizer) takes seconds to load.
  for name in REQUIRED:
    value = getattr(options, name)
    if value is None:
      sys.exit(f"error: --{name} is required")
    if not value.strip():
      sys.exit(f"error: --{name} is empty"
               + (": give a passage file (UTF-8 text)" if name == "passage"
                  else ""))
  if options.num_threads < 1:
    sys.exit(f"error: --num_threads must be >= 1, got {options.num_threads}")
  if options.vocab is not None and not options.vocab.strip():
    sys.exit("error: --vocab is empty (leave it out to use the model's own)")
  from tfmodels.data.text_io import open_text
  try:
    with open_text(options.passage) as f:
      passage = f.read()
  except UnicodeDecodeError:
    sys.exit(f"error: --passage {options.passage}: not UTF-8 text")
  except ValueError as e:  # open_text names the file
    sys.exit(f"error: --passage {e}")
  except (OSError, EOFError) as e:
    sys.exit(f"error: --passage {options.passage}: cannot read ({e})")
  if not passage.strip():  # nothing to answer from
    sys.exit(f"error: --passage {options.passage}: the passage is empty")
  from android_bench.qa_app import QaAppError
  from android_bench.qa_app.span_model import SpanModel
  try:
    model = SpanModel(options.model, num_threads=options.num_threads)
  except QaAppError as e:
    sys.exit(f"error: --model {e}")
  from android_bench.qa_app.answering import (predict, timing_line,
                                               tokenizer_for)
  try:
    tokenizer = tokenizer_for(options.model, options.vocab,
                              options.do_lower_case)
  except QaAppError as e:
    sys.exit(f"error: {e}")
  # Text of only control or zero-width characters tokenizes to nothing: the
  # model would see no passage (or no question) and answer "" with exit 0.
  for name, text in (("--passage " + options.passage, passage),
                     ("--question", options.question)):
    if not tokenizer.tokenize(text):
      sys.exit(f"error: {name}: no words in it (only control, format or "
               "zero-width characters)")
  prediction = predict(passage, options.question, tokenizer, model)
  print(prediction.answer)
  print(timing_line(prediction, model.sequence_length, options.num_threads),
        file=sys.stderr)


def run():
  app.run(main)


if __name__ == "__main__":
  run()
