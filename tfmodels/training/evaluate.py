"""Score a fine-tuned model directory on a split of its task.

    python -m tfmodels.training.evaluate --model_dir /tmp/spam_run \
        --data_dir data/spam --split test

Reads the task, sequence length and vocabulary `finetune` recorded in
task.json, the latest checkpoint, and prints the task's metrics as JSON
(GLUE metrics, SQuAD EM/F1, tagging token accuracy).
"""

import json
import os
import sys

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A finetune run directory.")
flags.DEFINE_string("data_dir", None, "Directory of the task's files.")
flags.DEFINE_string("split", "dev", "Split to score (dev, test, ...).")
flags.DEFINE_string("output", None, "Also write the metrics JSON here.")
flags.mark_flag_as_required("model_dir")
flags.mark_flag_as_required("data_dir")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.configs import ConfigError
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  try:
    with open(os.path.join(FLAGS.model_dir, "task.json")) as f:
      spec = json.load(f)
    model, _, _ = load_model_dir(FLAGS.model_dir)
    task = make_task(spec["task"], FLAGS.data_dir,
                     WordPieceTokenizer(spec["vocab_file"]),
                     spec["max_seq_length"])
    results = task.evaluate(model, FLAGS.split)
  except (ConfigError, VocabError, ValueError, OSError, KeyError) as e:
    sys.exit(f"error: {e}")
  text = json.dumps(results, indent=2)
  print(text)
  if FLAGS.output:
    with open(FLAGS.output, "w") as f:
      f.write(text + "\n")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
