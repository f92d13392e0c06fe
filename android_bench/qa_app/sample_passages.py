"""The app's sample passages, made from the shipped WordNet QA dev set.

The dev contexts are short (a few sentences), so each sample passage joins
several of them and keeps their questions with the answers moved along; the
last passages are long enough to need several 384-token windows, to show
that the app reads a whole passage instead of cutting it off.

    python -m android_bench.qa_app.sample_passages   # rewrites the asset

The asset is JSON: {"source": ..., "passages": [{"title", "passage",
"questions": [{"question", "answer", "answer_start"}]}]}.
"""

import dataclasses
import json
import os
import sys

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option

ASSET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app", "src",
                     "main", "assets", "sample_passages.json")
SOURCE = "data/wordnet_qa/dev.json.gz"
# (number of passages, dev contexts per passage): short ones, then long ones.
LAYOUT = ((16, 5), (4, 16))

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class SamplePassagesOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  data_dir: str = option("data", "The shipped data directory.")
  output: str = option(ASSET, "The JSON asset to write.")


def define_command_flags():
  """Defines the flags, when run as a command only: tests import this
  module beside commands with a --data_dir or an --output of their own."""
  define_flags(SamplePassagesOptions)


def build_sample_passages(dev_path):
  """The asset's content (a dict) from a SQuAD-format dev file."""
  from tfmodels.data import squad
  examples = squad.read_squad(dev_path).examples
  passages, used = [], 0
  for count, size in LAYOUT:
    for _ in range(count):
      group = examples[used:used + size]
      used += size
      text, questions = "", []
      for example in group:
        start = len(text) + example.answer_start
        assert (text + example.context)[start:start + len(
            example.answer_text)] == example.answer_text
        questions.append({"question": example.question,
                          "answer": example.answer_text,
                          "answer_start": start})
        text += example.context + " "
      passages.append({"title": f"WordNet QA {len(passages) + 1} "
                                f"({len(text.split())} words)",
                       "passage": text.rstrip(" "),
                       "questions": questions})
  return {"source": SOURCE, "passages": passages}


def to_json(content):
  return json.dumps(content, ensure_ascii=False, indent=1) + "\n"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(SamplePassagesOptions, FLAGS)
  from tfmodels.data.squad import SquadError
  from tfmodels.staging import (OutputError, check_output, lock_until_exit,
                                write_file)
  dev_path = os.path.join(options.data_dir, "wordnet_qa", "dev.json.gz")
  try:
    # The command rewrites its asset (no --overwrite), but never through a
    # link, onto a directory or over the dev set it reads.
    check_output(options.output, "--output", overwrite=True,
                 inputs=[("--data_dir", dev_path)])
    lock_until_exit(options.output, "--output")  # writable, one writer
  except OutputError as e:
    sys.exit(f"error: {e}")
  try:
    content = build_sample_passages(dev_path)
  except SquadError as e:
    sys.exit(f"error: --data_dir {e}")
  try:
    write_file(options.output, to_json(content))
  except OutputError as e:  # a link put in its place meanwhile
    sys.exit(f"error: {e}")
  print(f"wrote {options.output}: {len(content['passages'])} passages")


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
