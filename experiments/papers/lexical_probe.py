"""How much of WordNet QA a model's word table answers by itself.

    python -m experiments.papers.lexical_probe --model_dir RUN [--rank 128] \
        [--output probe.json [--overwrite]]

The table's answer to "which word means ...?" is the context word nearest
the definition in word vectors (`probe`); no encoder runs.
What it scores is knowledge the table already holds: an
encoder that scores far below it on the same questions loses that
knowledge, one that scores above it adds to it. `--rank k` first truncates
the table to rank k (Eckart-Young, as `low_rank_init` starts a student's).
The vocabulary is the run's own (task.json's); a --vocab_file must be that
one (another gives a confident wrong score), and is the shipped uncased one
for a directory that records none.

Each question asks which context word has a given definition; `probe`
answers with the context word whose word-piece vectors (averaged) lie
nearest, by cosine, to the average of the definition's word-piece vectors.
Only `main` reads the flags (into `ProbeOptions`), and they are defined
only when the module runs as a command, so tests import its functions.
"""

import atexit
import dataclasses
import json
import os
import re
import sys

from absl import app, flags
import numpy as np

from experiments.common.skeleton import missing_dirs, remove_empty_dirs
from experiments.common.paths import DATA, VOCAB
from tfmodels.command_options import define_flags, from_flags, option

WORD = re.compile(r"[\w'-]+")
# The prefix of a model directory's checkpoint files
# (tfmodels.checkpoints.model_dir.CHECKPOINT_PREFIX, which imports
# TensorFlow: the output is checked before that).
MODEL_CHECKPOINT = "ckpt"
# Function words never answer a WordNet QA question; in the definition
# they would pull every vector towards the same few pieces.
STOP_WORDS = frozenset(
    "a an the of or and to in by for with that which is as on at from be "
    "its it".split())


def _content_words(text):
  return [w for w in WORD.findall(text) if w.lower() not in STOP_WORDS]


def _mean_vector(table, ids):
  v = table[ids].mean(axis=0)
  return v / (np.linalg.norm(v) or 1.0)


def nearest_word(table, piece_ids, definition, context):
  """The context word nearest the definition (None if nothing is left).

  piece_ids: {word: its word pieces' ids}, for every content word.
  """
  query = [i for w in _content_words(definition) for i in piece_ids[w]]
  if not query:
    return None
  target = _mean_vector(table, query)
  best, best_score = None, -np.inf
  for word in _content_words(context):
    ids = piece_ids[word]
    if ids:
      score = float(_mean_vector(table, ids) @ target)
      if score > best_score:
        best, best_score = word, score
  return best


def probe(table, tokenizer, questions):
  """{"correct", "total", "exact_match"} over (definition, context,
  answer) triples; a word is right when it equals the answer, ignoring
  case. `tokenizer` is a `WordPieceTokenizer` of the table's vocabulary."""
  words = sorted({w for d, c, _ in questions
                  for w in _content_words(f"{d} {c}")})
  piece_ids = dict(zip(words, tokenizer.ids_batch(words)))
  correct = sum(
      (nearest_word(table, piece_ids, d, c) or "").lower() == a.lower()
      for d, c, a in questions)
  return {"correct": correct, "total": len(questions),
          "exact_match": 100.0 * correct / max(len(questions), 1)}


def read_questions(path):
  """(definition, context, answer) of each question of a WordNet QA file."""
  from tfmodels.data.squad import read_squad
  from tfmodels.data.wordnet_qa import QUESTION
  prefix = QUESTION.split("{")[0]
  questions = []
  for example in read_squad(path).examples:
    if not example.question.startswith(prefix):
      raise ValueError(f"{path}: question {example.qas_id} is not a WordNet "
                       f"QA question ({prefix!r}...)")
    questions.append((example.question[len(prefix):].rstrip("?"),
                      example.context, example.answer_text))
  if not questions:  # "0 of 0 (0.0%)" would read as a score
    raise ValueError(f"{path}: no questions to probe")
  return questions


def word_table(model_dir, rank=0):
  """The model's [vocab, E] word table, truncated to `rank` if > 0."""
  from tfmodels.checkpoints.model_dir import encoder_of, load_model_dir
  from tfmodels.distillation.low_rank_init import low_rank_factors
  model, config, _ = load_model_dir(model_dir)
  embeddings = encoder_of(model).get_layer("embeddings")
  if getattr(embeddings, "word_embeddings", None) is None:
    raise ValueError(f"--model_dir {model_dir}: {config.name} has no plain "
                     "word table (Kronecker or mixed-vocabulary embeddings)")
  table = embeddings.word_embeddings.embeddings.numpy().astype(np.float64)
  if rank:
    left, right, _ = low_rank_factors(table, rank)
    table = left @ right
  return table


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeOptions:
  """The command's options, each its flag (`define_command_flags`)."""
  model_dir: str | None = option(None, "A model or run directory.")
  data_dir: str = option(os.path.join(DATA, "wordnet_qa"),
                         "WordNet QA (SQuAD v1.1 JSON, as `finetune --task "
                         "squad` reads it).")
  split: str = option("dev", "The split probed.")
  vocab_file: str | None = option(
      None, "The model's vocab.txt (default: the one its task.json records, "
      "else the shipped uncased one); refused unless it is the recorded one.")
  rank: int = option(0, "Truncate the table to this rank first (0: as it "
                     "is).")
  output: str | None = option(None, "Also write the figures here (JSON).")
  overwrite: bool = option(False, "Replace an existing --output file.")


def _inputs(options):
  """(flag, path) of what the probe reads, for `check_output`: the model
  directory and the files of it that rebuild the model, the data (the
  split's file too) and the vocabulary, given or recorded."""
  model_dir, data_dir = options.model_dir, options.data_dir
  inputs = [("--model_dir", model_dir), ("--data_dir", data_dir),
            ("--vocab_file", options.vocab_file)]
  inputs += [("--data_dir", os.path.join(data_dir, f"{options.split}.json"
                                         + gz)) for gz in ("", ".gz")]
  try:
    names = os.listdir(model_dir)
  except OSError:
    names = []
  inputs += [("--model_dir", os.path.join(model_dir, n)) for n in names
             if n in ("config.json", "head.json", "task.json", "checkpoint")
             or n.startswith(MODEL_CHECKPOINT)]
  try:  # the vocabulary task.json records (read again by `resolve`)
    with open(os.path.join(model_dir, "task.json")) as f:
      recorded = json.load(f).get("vocab_file")
    if isinstance(recorded, str):
      inputs.append(("--model_dir's task.json vocab_file", recorded))
  except (OSError, ValueError, AttributeError):
    pass
  return inputs


def run_probe(options):
  """Probes options.model_dir's table, prints the line and writes
  options.output; exits with one line on a bad option or input. The
  output is checked (new, or a file with --overwrite; no link, not one of
  the inputs, writable) and held against a second writer before any
  work."""
  from tfmodels.staging import (OutputError, check_output, lock_until_exit,
                                write_file)
  if not options.model_dir:
    sys.exit("error: --model_dir is required")
  if options.rank < 0:
    sys.exit(f"error: --rank {options.rank}: must be >= 0")
  if options.output:  # before the model and the questions load
    try:
      check_output(options.output, "--output", options.overwrite,
                   inputs=_inputs(options))
      # The lock makes the output's folder; a run that fails leaves none
      # empty (atexit: this runs after the lock is released).
      atexit.register(remove_empty_dirs,
                      missing_dirs(os.path.dirname(os.path.abspath(
                          options.output))))
      lock_until_exit(options.output, "--output")
    except OutputError as e:
      sys.exit(f"error: {e}")
  from tfmodels.tokenization import WordPieceTokenizer  # TensorFlow: after
  from tfmodels.training.tasks import split_file
  from tfmodels.vocab_record import resolve
  try:
    questions = read_questions(split_file(options.data_dir, options.split,
                                          "json"))
    vocab_file = resolve(options.model_dir, options.vocab_file,
                         default=VOCAB)
    tokenizer = WordPieceTokenizer(vocab_file, True)
    table = word_table(options.model_dir, options.rank)
    if len(tokenizer.vocab) > len(table):
      raise ValueError(f"--vocab_file {vocab_file} has "
                       f"{len(tokenizer.vocab)} pieces but the table has "
                       f"{len(table)} rows")
  except (OSError, ValueError) as e:
    sys.exit(f"error: {e}")
  result = probe(table, tokenizer, questions)
  result.update(model_dir=options.model_dir, rank=options.rank or None,
                data_dir=options.data_dir, split=options.split)
  rank = f" at rank {options.rank}" if options.rank else ""
  print(f"{options.model_dir}: the word table{rank} answers "
        f"{result['correct']} of {result['total']} questions exactly "
        f"({result['exact_match']:.1f}%) by nearest word vector")
  if options.output:
    try:
      write_file(options.output, json.dumps(result, indent=2) + "\n")
    except OSError as e:  # the disk full, say: one line, not a traceback
      sys.exit(f"error: --output {options.output}: cannot write it "
               f"({e.strerror or e})")


def main(argv):
  del argv
  run_probe(from_flags(ProbeOptions))


def define_command_flags(flag_values=flags.FLAGS):
  """The flags of `ProbeOptions`, defined only when the module runs as a
  command: tests import it, and its flags would clash with others'."""
  define_flags(ProbeOptions, flag_values)


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
