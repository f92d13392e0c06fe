"""Import and export checkpoints: Hugging Face or Google TF1 in, ours out;
ours to HF.

    python -m tfmodels.checkpoints.import_export --from hf \
        --input path/to/hf_model_dir --output /tmp/ours
    python -m tfmodels.checkpoints.import_export --from tf1 \
        --input uncased_L-12_H-768_A-12/bert_model.ckpt \
        --config uncased_L-12_H-768_A-12/bert_config.json --output /tmp/ours
    python -m tfmodels.checkpoints.import_export --to hf --input /tmp/ours \
        --output /tmp/hf_again

Our directory holds config.json, head.json, a tf.train.Checkpoint and a
SavedModel (see `model_dir.py`), and from a Hugging Face directory with a
tokenizer its vocab.txt (checked against the model: `hf_tokenizer.py`). Every tensor must map to a variable and every
variable to a tensor, with the same shape, or nothing is written.
"""

import dataclasses
import json
import os
import sys

from absl import app, flags, logging

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.sigterm import exit_on_sigterm

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(CheckpointOptions, **values)`.
  --from, a Python keyword, is the field `from_`."""
  from_: str | None = option(None, "Import from this format.",
                             choices=("hf", "tf1"))
  to: str | None = option(None, "Export our directory to this format.",
                          choices=("hf",))
  input: str = option(None, "HF directory (or .safetensors), TF1 "
                      "checkpoint prefix, or our directory (--to).",
                      required=True)
  output: str = option(None, "Directory to write.", required=True)
  config: str | None = option(
      None, "TF1 only: Google's bert_config.json (default: bert_config.json "
      "/ albert_config.json beside the checkpoint).")
  name: str | None = option(None, "Model name recorded in our config.")
  overwrite: bool = option(False, "Replace an existing --output.")


define_flags(CheckpointOptions)

OWNER = "import_export"  # what --overwrite may replace: this command's output


def _import(options):
  """(model, config, head, files joining the model directory): a Hugging
  Face directory's tokenizer, checked against its model, becomes its
  vocab.txt."""
  if options.from_ == "hf":
    from tfmodels.checkpoints import hf
    from tfmodels.checkpoints.hf_tokenizer import read_tokenizer
    model, config, head = hf.import_checkpoint(options.input, options.name)
    directory = (options.input if os.path.isdir(options.input)
                 else os.path.dirname(options.input))
    tokenizer = read_tokenizer(directory, config)
    files = {"vocab.txt": tokenizer.vocab_text()} if tokenizer else {}
    return model, config, head, files
  from tfmodels.checkpoints import tf1
  return (*tf1.import_checkpoint(options.input, options.config,
                                 options.name), {})


def _export_tokenizer(model_dir, staging):
  """The model's vocabulary (a run's task.json names it; an imported
  directory holds it as vocab.txt) as the uncased BERT tokenizer's files
  (vocab.txt, tokenizer_config.json) that `BertTokenizer.from_pretrained`
  and our import read back; nothing for a directory without one."""
  from tfmodels.checkpoints.hf_tokenizer import SPECIAL_FIELDS
  from tfmodels.staging import write_file
  from tfmodels.vocab_record import resolve
  try:
    vocab = resolve(model_dir, model_flag="--input")
  except ValueError:  # no task.json, or it names no vocabulary
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab):
      return
  with open(vocab, encoding="utf-8") as f:
    write_file(os.path.join(staging, "vocab.txt"), f.read())
  write_file(os.path.join(staging, "tokenizer_config.json"), json.dumps(
      {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
       **SPECIAL_FIELDS}, indent=2) + "\n")


def _export_hf(options):
  from tfmodels.checkpoints.hf import export_checkpoint
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.staging import staged_directory
  from tfmodels.write_errors import WRITE_FAILURES, refused
  model, config, head = load_model_dir(options.input)
  try:
    with staged_directory(options.output, OWNER, "--output") as staging:
      export_checkpoint(model, config, head, staging)
      _export_tokenizer(options.input, staging)
  except WRITE_FAILURES as e:  # a full disk: nothing is left half-written
    raise refused(options.output, "the model", e,
                  "nothing was written") from None
  return config, head


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(CheckpointOptions, FLAGS)
  source_format = options.from_
  if (source_format is None) == (options.to is None):
    sys.exit("error: give exactly one of --from and --to")
  from tfmodels.staging import OutputError, check_output, lock_until_exit
  try:  # ours to replace, writable, and no other writer
    check_output(options.output, "--output", options.overwrite, OWNER,
                 inputs=[("--input", options.input),
                         ("--config", options.config)])
    lock_until_exit(options.output, "--output")
  except OutputError as e:
    sys.exit(f"error: {e}")
  if not os.path.exists(options.input) and not (
      source_format == "tf1" and os.path.exists(options.input + ".index")):
    sys.exit(f"error: --input {options.input}: no such file or directory")
  logging.set_verbosity(logging.WARNING)  # SavedModel writing is chatty
  from tfmodels.checkpoints.weight_mapping import CheckpointError
  from tfmodels.configs import ConfigError
  files = {}
  try:
    if options.to:
      config, head = _export_hf(options)
    else:
      from tfmodels.checkpoints.model_dir import save_model_dir
      model, config, head, files = _import(options)
      save_model_dir(model, config, head, options.output, files,
                     owner=OWNER)
  except (CheckpointError, ConfigError, OSError, OutputError) as e:
    sys.exit(f"error: {e}")
  vocabulary = (f", its tokenizer's vocab.txt "
                f"({len(files['vocab.txt'].splitlines())} pieces, uncased)"
                if "vocab.txt" in files else "")
  print(f"{config.name}: {config.model_type}, {config.num_hidden_layers} "
        f"layers, hidden {config.hidden_size}, head {head.kind}{vocabulary} "
        f"-> {options.output}")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
