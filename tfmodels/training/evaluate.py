"""Score a model directory: a fine-tuned task, or held-out MLM / NSP.

    python -m tfmodels.training.evaluate --model_dir /tmp/spam_run \
        --data_dir data/spam --split test
    python -m tfmodels.training.evaluate --model_dir /tmp/ibbert_run \
        --pretraining_data /tmp/heldout_shards

For a `finetune` run it reads the task, sequence length and vocabulary
recorded in task.json (a --vocab_file must be that vocabulary: task.json
records its size and hash) and prints the task's metrics (GLUE metrics, SQuAD
EM/F1, tagging token accuracy; intent_slot: intent accuracy, slot F1,
sentence exact match, slot token accuracy); with --pretraining_data (shards
made from held-out text) it prints masked-LM accuracy / loss and NSP / SOP accuracy of
a `pretrain` or `distill` run. Output is JSON.
"""

import dataclasses
import json
import sys

from absl import app, flags, logging

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.sigterm import exit_on_sigterm

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluateOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  model_dir: str = option(None, "A finetune run directory.", required=True)
  data_dir: str | None = option(None, "Directory of the task's files.")
  split: str = option("dev", "Split to score (dev, test, ...).")
  vocab_file: str | None = option(
      None, "The run's vocab.txt (default: the one task.json names); "
      "refused unless it is the vocabulary the run recorded.")
  output: str | None = option(None, "Also write the metrics JSON here.")
  overwrite: bool = option(False, "Replace an existing --output.")
  pretraining_data: str | None = option(
      None, "Held-out pre-training shards (instead of --data_dir): MLM / "
      "NSP metrics.")


define_flags(EvaluateOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(EvaluateOptions, FLAGS)
  logging.set_verbosity(logging.WARNING)
  from tfmodels.checkpoints.model_dir import load_model_dir, read_task_spec
  from tfmodels.staging import (OutputError, check_output, lock_until_exit,
                                write_file)
  from tfmodels.configs import ConfigError
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve
  if (options.data_dir is None) == (options.pretraining_data is None):
    sys.exit("error: give exactly one of --data_dir and --pretraining_data")
  if options.output:  # before scoring, which can take long
    try:  # a file, new or with --overwrite; writable, one writer
      check_output(options.output, "--output", options.overwrite)
      lock_until_exit(options.output, "--output")
    except OutputError as e:
      sys.exit(f"error: {e}")
  try:
    spec = None if options.pretraining_data else read_task_spec(
        options.model_dir)
    if spec is not None:  # before the model loads: the cheap check first
      vocab_file = resolve(options.model_dir, options.vocab_file)
    model, config, head = load_model_dir(options.model_dir)
    if options.pretraining_data:
      if head.kind != "pretrainer":
        raise ValueError(f"--model_dir {options.model_dir} has a {head.kind} "
                         "head, not MLM + NSP")
      from tfmodels.training.mlm_eval import evaluate_pretraining
      results = evaluate_pretraining(model, options.pretraining_data)
    else:
      named = "--vocab_file" if options.vocab_file else "task.json vocab_file"
      try:
        tokenizer = WordPieceTokenizer(vocab_file)
      except VocabError as e:
        raise VocabError(f"{named} {e}") from None
      if len(tokenizer) > config.vocab_size:
        raise ValueError(f"{named} {vocab_file} has "
                         f"{len(tokenizer)} pieces but the model's "
                         f"vocab_size is {config.vocab_size}")
      task = make_task(spec["task"], options.data_dir, tokenizer,
                       spec["max_seq_length"])
      results = task.evaluate(model, options.split)
  except (ConfigError, VocabError, ValueError, OSError, KeyError) as e:
    sys.exit(f"error: {e}")
  text = json.dumps(results, indent=2)
  print(text)
  if options.output:
    write_file(options.output, text + "\n")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
