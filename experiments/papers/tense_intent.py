"""A learnable intent for the Brown intent + slot task: the sentence's tense.

    python -m experiments.papers.tense_intent --output_dir /tmp/brown_tense

data/brown_pos labels each sentence with its Brown genre (15 of them). A
genre is a property of the whole text a sentence was cut from, not of the
sentence: "He said it was late." is as likely in press reportage as in
fiction, so no model reaches far past the majority class from one sentence
(the committed run: 8% intent accuracy, teacher and students alike, with
the slots learned). An intent in the SNIPS sense is what the utterance itself
says. Here it is the tense of the sentence's first finite verb, read off its
own tags (`tense`): past (was, said, had, did), present (is, says, has, go),
modal (will, can, would) or none (a fragment or headline with no finite
verb). It is a function of the sentence's words: the POS tags that define it
are the slots the same model predicts, so a teacher that tags well can learn
it, and its majority class (past, from fiction and reportage) leaves room to
measure.

The output keeps data/brown_pos's sentences, words, tags and splits; only
each `# label = ` line changes. It is written whole or not at all, and
replaces only this command's own earlier output.
"""

import collections
import dataclasses
import gzip
import json
import os
import sys

from absl import app

from tfmodels.command_options import define_flags, from_flags, option

SPLITS = ("train", "dev", "test")
TENSES = ("past", "present", "modal", "none")
# Brown's finite verb tags, by tense (be, have and do have their own).
PAST = {"vbd", "bed", "bedz", "hvd", "dod"}
PRESENT = {"vbz", "bez", "ber", "bem", "hvz", "doz", "do", "vb", "hv", "be"}
MODAL = {"md"}
# A base form after these is not finite: "to go", "will go", "did go".
NOT_FINITE_AFTER = {"to"}
OWNER = "tense_intent"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TenseOptions:
  """The command line; `main` builds it with `command_options.from_flags`."""
  data_dir: str = option(None, "CoNLL splits with `# label = ` lines "
                         "(default: data/brown_pos).")
  output_dir: str = option(None, "Where {train,dev,test}.conll.gz go.")



def define_command_flags():
  """Defines the flags, when run as a command only (its tests import it
  beside other commands' flags)."""
  define_flags(TenseOptions)


def _parts(tag):
  """A Brown tag's words' tags: contractions ("ppss+md") have one per
  word; negation (`*`) and headline / title suffixes (-hl, -tl, -nc) go."""
  return [p.rstrip("*").split("-")[0] for p in tag.lower().split("+")
          if not p.startswith("fw")]


def tense(tags):
  """past / present / modal / none: the tense of the first finite verb."""
  previous = None
  for tag in tags:
    for part in _parts(tag):
      if part in MODAL:
        return "modal"
      if part in PAST:
        return "past"
      if part in PRESENT and previous not in NOT_FINITE_AFTER:
        return "present"
      previous = part
  return "none"


def relabel(source, target):
  """Copies a CoNLL file, each sentence's label replaced by its tense;
  returns the count per tense."""
  from tfmodels.data.tagging import read_conll
  from tfmodels.staging import write_file
  sentences = read_conll(source)
  counts = collections.Counter()
  lines = []
  for s in sentences:
    label = tense(s.tags)
    counts[label] += 1
    lines.append(f"# label = {label}\n" + "".join(
        f"{w}\t{t}\n" for w, t in zip(s.words, s.tags)) + "\n")
  write_file(target, gzip.compress("".join(lines).encode("utf-8"), mtime=0))
  return dict(counts)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(TenseOptions)
  from experiments.common.paths import DATA
  data_dir = options.data_dir or os.path.join(DATA, "brown_pos")
  if not options.output_dir:
    sys.exit("error: --output_dir is required")
  sources = {s: os.path.join(data_dir, f"{s}.conll.gz") for s in SPLITS}
  for split, path in sources.items():
    if not os.path.isfile(path):
      sys.exit(f"error: --data_dir {data_dir}: no {split}.conll.gz")
  from tfmodels.staging import (OutputError, check_output, staged_directory,
                                write_file)
  try:  # its own earlier output only is replaced, whole
    check_output(options.output_dir, "--output_dir", True, OWNER)
  except OutputError as e:
    sys.exit(f"error: {e}")
  counts = {}
  with staged_directory(options.output_dir, OWNER, "--output_dir") as out:
    for split, path in sources.items():
      try:
        counts[split] = relabel(path, os.path.join(out, f"{split}.conll.gz"))
      except ValueError as e:
        sys.exit(f"error: {e}")
    write_file(os.path.join(out, "labels.json"),
               json.dumps(counts, indent=2) + "\n")
  for split, c in counts.items():
    total = sum(c.values())
    print(f"{split}: " + ", ".join(
        f"{t} {100 * c.get(t, 0) / total:.1f}%" for t in TENSES))


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
