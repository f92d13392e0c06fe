"""A slice held out of train, to tell when more training stops helping.

    python -m tfmodels.data.heldout --task squad --data_dir data/wordnet_qa \\
        --examples 800 --output_dir /tmp/qa_heldout

--output_dir gets train (train without the slice), heldout (the slice) and
dev (the data's own, copied) in the data's own format, and counts.json. A
run trained there is scored on `heldout` as it goes (`finetune
--eval_split heldout`) and on dev, which it never chose by, at the end. QA
holds out whole articles, so no passage is on both sides; spam holds out
rows, tagging and intent_slot (CoNLL) sentences. Which examples go is fixed
by --seed.
"""

import dataclasses
import json
import os
import random
import re
import shutil
import sys

from absl import app

from tfmodels.command_options import define_flags, from_flags, option

# task -> its file per split
PATTERNS = {"squad": "{}.json", "spam": "{}.tsv", "tagging": "{}.conll",
            "intent_slot": "{}.conll"}
COUNTS = "counts.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldoutOptions:
  task: str = option("squad", "The task's data format.",
                     choices=tuple(PATTERNS))
  data_dir: str = option(None, "The task's files (train and dev).",
                         required=True)
  examples: int = option(800, "Examples held out: QA articles, spam rows, "
                         "CoNLL sentences.")
  seed: int = option(7, "Which examples are held out.")
  output_dir: str = option(None, "Where train, heldout and dev go.",
                           required=True)


def source_file(task, data_dir, split):
  """data_dir's file of `split`, gzipped or plain."""
  path = os.path.join(data_dir, PATTERNS[task].format(split))
  return path + ".gz" if os.path.exists(path + ".gz") else path


def split(task, data_dir, n, seed, out, names=("train", "heldout"),
          flag="--examples"):
  """Writes out/<names[0]> (train without the slice) and out/<names[1]>
  (the n held-out examples); returns (train, held-out) counts. ValueError
  naming the file and `flag` when it cannot spare n examples."""
  from tfmodels.data.squad import load_json
  from tfmodels.data.text_io import open_text
  from tfmodels.staging import write_file
  source = source_file(task, data_dir, "train")
  if task == "squad":
    data = load_json(source)
    examples = list(data["data"])
    random.Random(seed).shuffle(examples)
    parts = examples[n:], examples[:n]
    texts = [json.dumps(dict(data, data=p)) for p in parts]
  elif PATTERNS[task].endswith(".conll"):  # sentences between blank lines
    with open_text(source) as f:
      examples = [b for b in re.split(r"\n[ \t]*\n", f.read()) if b.strip()]
    random.Random(seed).shuffle(examples)
    parts = examples[n:], examples[:n]
    texts = ["\n\n".join(b.strip("\n") for b in p) + "\n" for p in parts]
  else:
    with open_text(source) as f:
      header, *examples = f.readlines()
    random.Random(seed).shuffle(examples)
    parts = examples[n:], examples[:n]
    texts = [header + "".join(p) for p in parts]
  if not parts[0] or len(parts[1]) < n:
    raise ValueError(f"{flag} {n}: {source} has {len(examples)} "
                     "examples; hold out fewer")
  for name, text in zip(names, texts):
    write_file(os.path.join(out, PATTERNS[task].format(name)), text)
  return len(parts[0]), len(parts[1])


def write_heldout(task, data_dir, n, seed, out):
  """train, heldout, dev and counts.json in `out` (see the docstring)."""
  from tfmodels.staging import write_file
  counts = split(task, data_dir, n, seed, out)
  dev = source_file(task, data_dir, "dev")
  shutil.copyfile(dev, os.path.join(out, os.path.basename(dev)))
  write_file(os.path.join(out, COUNTS), json.dumps(
      {"train": counts[0], "heldout": counts[1]}))
  return counts


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(HeldoutOptions)
  if options.examples < 1:
    sys.exit(f"error: --examples must be >= 1, got {options.examples}")
  from tfmodels.staging import OutputError, check_output, staged_directory
  try:
    for split_name in ("train", "dev"):
      path = source_file(options.task, options.data_dir, split_name)
      if not os.path.isfile(path):
        raise ValueError(f"--data_dir {options.data_dir}: no "
                         f"{os.path.basename(path)}")
    check_output(options.output_dir, "--output_dir", True, "heldout",
                 inputs=(("--data_dir", options.data_dir),))
    with staged_directory(options.output_dir, "heldout",
                          "--output_dir") as out:
      counts = write_heldout(options.task, options.data_dir,
                             options.examples, options.seed, out)
  except (OSError, OutputError, ValueError) as e:
    sys.exit(f"error: {e}")
  print(f"{options.output_dir}: {counts[0]} train, {counts[1]} held out "
        f"({options.task})")


def define_command_flags():
  """Defines the flags, when run as a command only (experiments.papers.plateau
  imports `split` beside its own flags)."""
  define_flags(HeldoutOptions)


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
