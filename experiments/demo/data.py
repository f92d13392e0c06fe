"""The tiny demo's data: small slices of the shipped sets.

The full demo trains on the shipped data as it is; `--tiny` (the test) cuts
every set down so that each command runs in seconds on real text:

    python -m experiments.demo.data --output_dir DIR \
        --pretraining_documents 40 --spam_rows 64,40 --qa_questions 200,30

Each slice keeps the shipped layout (train / heldout text with blank lines
between documents, spam TSVs with their header, SQuAD JSON), so the commands
read them exactly as they read data/.
"""

import dataclasses
import json
import os
import sys

from absl import app

from experiments.common.paths import DATA
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data import squad
from tfmodels.data.text_io import open_text, read_documents
from tfmodels.staging import write_file


@dataclasses.dataclass(frozen=True, kw_only=True)
class SliceOptions:
  output_dir: str | None = option(None, "Where the slices go.")
  pretraining_documents: int = option(40, "Training documents kept (a "
                                      "quarter as many held-out ones).")
  spam_rows: tuple = option(("64", "40"), "Spam rows kept: train,dev.")
  qa_questions: tuple = option(("200", "30"), "QA questions kept: "
                               "train,dev.")


define_flags(SliceOptions)


def slice_pretraining(source, target, n_documents):
  """Every k-th document, so the slice mixes the corpus' three sources."""
  docs = read_documents(source)
  step = max(1, len(docs) // max(1, n_documents))
  kept = docs[::step][:n_documents]
  write_file(target, "\n\n".join("\n".join(d) for d in kept) + "\n")
  return len(kept)


def slice_spam(source_dir, target_dir, split, n_rows):
  """The header plus n_rows / 2 ham and n_rows / 2 spam rows of a split
  (the shipped files list one class after the other)."""
  with open_text(os.path.join(source_dir, f"{split}.tsv.gz")) as f:
    header, *rows = f.readlines()
  kept = []
  for label in ("0", "1"):
    kept += [r for r in rows if r.rstrip("\n").endswith("\t" + label)][
        :n_rows // 2]
  write_file(os.path.join(target_dir, f"{split}.tsv"), header + "".join(kept))
  return len(kept)


def slice_qa(source_dir, target_dir, split, n_questions):
  """The first n_questions articles (one question each) of a SQuAD file."""
  data = squad.load_json(os.path.join(source_dir, f"{split}.json.gz"))
  data = dict(data, data=data["data"][:n_questions])
  write_file(os.path.join(target_dir, f"{split}.json"), json.dumps(data))
  return len(data["data"])


def write_slices(directory, pretraining_documents, spam_rows, qa_questions):
  """data/ cut down under `directory` (pretraining/, spam/, wordnet_qa/)."""
  counts = {}
  for split, n in (("train", pretraining_documents),
                   ("heldout", max(2, pretraining_documents // 4))):
    counts[f"pretraining/{split}"] = slice_pretraining(
        os.path.join(DATA, "pretraining", f"{split}.txt.gz"),
        os.path.join(directory, "pretraining", f"{split}.txt"), n)
  for split, n in zip(("train", "dev"), spam_rows):
    counts[f"spam/{split}"] = slice_spam(
        os.path.join(DATA, "spam"), os.path.join(directory, "spam"), split, n)
  for split, n in zip(("train", "dev"), qa_questions):
    counts[f"wordnet_qa/{split}"] = slice_qa(
        os.path.join(DATA, "wordnet_qa"),
        os.path.join(directory, "wordnet_qa"), split, n)
  write_file(os.path.join(directory, "slices.json"),
         json.dumps(counts, indent=2) + "\n")
  return counts


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(SliceOptions)
  from experiments.common.pipeline import check_output_dir
  from tfmodels.staging import OutputError
  try:
    check_output_dir(options.output_dir)
  except OutputError as e:
    sys.exit(f"error: {e}")
  try:
    spam, qa = ([int(n) for n in counts]
                for counts in (options.spam_rows, options.qa_questions))
  except ValueError:
    sys.exit("error: --spam_rows and --qa_questions take two integers")
  if len(spam) != 2 or len(qa) != 2 or min(spam + qa) < 2 or (
      options.pretraining_documents < 1):
    sys.exit("error: --spam_rows and --qa_questions take two integers >= 2, "
             "--pretraining_documents one >= 1")
  counts = write_slices(options.output_dir, options.pretraining_documents,
                        spam, qa)
  print(", ".join(f"{k}: {v}" for k, v in counts.items()))


def run():
  app.run(main)


if __name__ == "__main__":
  run()
