"""The QA app without a phone: answer a question about a passage file.

    python -m android_bench.qa_app --model qa.tflite --passage passage.txt \
        --question "Which word means: a large natural stream of water?"

Prints the answer on stdout (an empty line if no span qualifies) and, on
stderr, the windows and the model time, as the app shows them. The
vocabulary is the one the model carries (convert_tflite attaches it);
--vocab must be that very vocabulary (it is refused otherwise) and is needed
only for a model without metadata.
"""

import sys

from absl import app, flags

from android_bench.qa_app import DEFAULT_THREADS

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Converted span model (.tflite) with "
                    "inputs ids, mask, segment_ids and outputs start_logits, "
                    "end_logits.")
flags.DEFINE_string("vocab", None, "BERT vocab.txt the model was trained "
                    "with (default: the one its metadata carries).")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case and strip accents (uncased vocabularies).")
flags.DEFINE_string("passage", None, "Text file (UTF-8, plain or gzip) holding "
                    "the passage.")
flags.DEFINE_string("question", None, "The question.")
flags.DEFINE_integer("num_threads", DEFAULT_THREADS, "Interpreter threads.")
REQUIRED = ("model", "passage", "question")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  # The cheap checks first: TensorFlow (the tokenizer) takes seconds to load.
  for name in REQUIRED:  # one line each, where absl's check prints two
    if FLAGS[name].value is None:
      sys.exit(f"error: --{name} is required")
    if not FLAGS[name].value.strip():
      sys.exit(f"error: --{name} is empty"
               + (": give a passage file (UTF-8 text)" if name == "passage"
                  else ""))
  if FLAGS.num_threads < 1:
    sys.exit(f"error: --num_threads must be >= 1, got {FLAGS.num_threads}")
  if FLAGS.vocab is not None and not FLAGS.vocab.strip():
    sys.exit("error: --vocab is empty (leave it out to use the model's own)")
  from tfmodels.data.text_io import open_text
  try:
    with open_text(FLAGS.passage) as f:
      passage = f.read()
  except UnicodeDecodeError:
    sys.exit(f"error: --passage {FLAGS.passage}: not UTF-8 text")
  except ValueError as e:  # open_text names the file
    sys.exit(f"error: --passage {e}")
  except (OSError, EOFError) as e:
    sys.exit(f"error: --passage {FLAGS.passage}: cannot read ({e})")
  if not passage.strip():  # nothing to answer from
    sys.exit(f"error: --passage {FLAGS.passage}: the passage is empty")
  from android_bench.qa_app import QaAppError
  from android_bench.qa_app.span_model import SpanModel
  try:
    model = SpanModel(FLAGS.model, num_threads=FLAGS.num_threads)
  except QaAppError as e:
    sys.exit(f"error: --model {e}")
  from android_bench.qa_app.answering import (predict, timing_line,
                                               tokenizer_for)
  try:
    tokenizer = tokenizer_for(FLAGS.model, FLAGS.vocab, FLAGS.do_lower_case)
  except QaAppError as e:
    sys.exit(f"error: {e}")
  # Text of only control or zero-width characters tokenizes to nothing: the
  # model would see no passage (or no question) and answer "" with exit 0.
  for name, text in (("--passage " + FLAGS.passage, passage),
                     ("--question", FLAGS.question)):
    if not tokenizer.tokenize(text):
      sys.exit(f"error: {name}: no words in it (only control, format or "
               "zero-width characters)")
  prediction = predict(passage, FLAGS.question, tokenizer, model)
  print(prediction.answer)
  print(timing_line(prediction, model.sequence_length, FLAGS.num_threads),
        file=sys.stderr)


def run():
  app.run(main)


if __name__ == "__main__":
  run()
