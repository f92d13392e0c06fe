"""`ship`'s first step: the user's teacher as one of our fine-tuned model
directories, whatever it came as.

    python -m experiments.ship.teacher --teacher HF_OR_RUN_OR_TF1 \
        --task squad --data_dir DATA --max_seq_length 96 --output OUT

--teacher is a Hugging Face directory (config.json + model.safetensors and
its tokenizer files), one of our model or run directories, or a TF1
checkpoint (a directory holding bert_config.json and one checkpoint, or the
checkpoint's prefix). OUT is a model directory every later step reads as a
`finetune` run: the weights, its head, vocab.txt (the tokenizer's, checked
against the model), tokenizer_config.json beside it (the tokenizer's
settings: do_lower_case, strip_accents, tokenize_chinese_chars, which every
later step's tokenizer and the converted files follow), task.json (the
task, the training length and the vocabulary's record) and labels.txt (a
classifier's class names from `id2label`, when they are not transformers'
LABEL_i defaults; a name that could not pass through every consumer, with
a comma or a control character, or empty, is refused).

The head must be the task's (a QA model for SQuAD data, a classifier with
as many classes as the task has labels); a teacher without a task head (a
sentence encoder) is written without task.json only with --encoder_only,
for `ship --teacher_finetune_steps` to fine-tune it next.
"""

import dataclasses
import json
import os
import sys
import unicodedata

from absl import app, logging

from experiments.common.paths import VOCAB
from tfmodels.command_options import (define_flags, from_flags, option,
                                      run_command)

OWNER = "ship_teacher"  # what --overwrite may replace
LABELS_FILE = "labels.txt"
HF_FORMAT, OURS, TF1_FORMAT = "Hugging Face", "our model directory", "TF1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TeacherOptions:
  teacher: str | None = option(None, "Hugging Face directory, our model or "
                               "run directory, or TF1 checkpoint.",
                               required=True)
  task: str | None = option(None, "The task its head must answer "
                            "(finetune --task).", required=True)
  data_dir: str | None = option(None, "The task's data.", required=True)
  max_seq_length: int = option(128, "The training length task.json "
                               "records (carving and distillation use it).")
  vocab_file: str | None = option(None, "Its vocab.txt when the teacher "
                                  "carries none (TF1; default: the shipped "
                                  "uncased vocabulary).")
  output: str | None = option(None, "The model directory to write.",
                              required=True)
  encoder_only: bool = option(False, "Accept a teacher without a task head "
                              "(written without task.json, to be "
                              "fine-tuned next).")
  overwrite: bool = option(False, "Replace an --output this step wrote.")


def define_command_flags():
  """The flags, defined only when the module runs as a command: `ship`
  imports its functions."""
  define_flags(TeacherOptions)


class TeacherError(ValueError):
  """An unusable teacher; the message names it and why."""


def teacher_format(path):
  """HF_FORMAT, OURS or TF1_FORMAT of --teacher, or TeacherError."""
  if os.path.isdir(path):
    names = set(os.listdir(path))
    if "head.json" in names and "config.json" in names:
      return OURS
    if "config.json" in names and names & {"model.safetensors",
                                           "pytorch_model.bin"}:
      return HF_FORMAT
    if any(n.endswith(".index") for n in names):
      return TF1_FORMAT
    raise TeacherError(
        f"--teacher {path}: not a Hugging Face directory (config.json + "
        "model.safetensors), one of our model directories (config.json + "
        "head.json) or a TF1 checkpoint")
  if os.path.exists(path + ".index"):
    return TF1_FORMAT
  if path.endswith(".safetensors") and os.path.isfile(path):
    return HF_FORMAT
  raise TeacherError(f"--teacher {path}: no such directory or checkpoint")


def _tf1_prefix(path):
  if not os.path.isdir(path):
    return path
  indexes = sorted(n for n in os.listdir(path) if n.endswith(".index"))
  if len(indexes) != 1:
    raise TeacherError(f"--teacher {path}: holds {len(indexes)} TF1 "
                       "checkpoints; give the prefix of one")
  return os.path.join(path, indexes[0][:-len(".index")])


def check_class_names(names, source):
  """TeacherError (one line naming `source`) unless every class name can
  pass through every consumer: labels.txt (one per line), convert_tflite's
  --class_names (comma-separated) and the apps' label files."""
  for name in names:
    if not name.strip():
      raise TeacherError(f"{source}: a class name is empty")
    if "," in name:
      raise TeacherError(f"{source}: class name {name!r} holds a comma, "
                         "which the converter's --class_names cannot carry; "
                         "rename it")
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in name):
      raise TeacherError(f"{source}: class name {name!r} holds a control "
                         "or separator character (a label file holds one "
                         "name per line); rename it")
  if len(set(names)) < len(names):
    raise TeacherError(f"{source}: class names must be distinct "
                       f"({', '.join(map(repr, names))})")
  return names


def class_names(hf_dir, num_classes):
  """A Hugging Face classifier's `id2label` names in class order, or None
  when it has none or only transformers' LABEL_i placeholders."""
  from tfmodels.configs import ConfigError, read_json_object
  path = os.path.join(hf_dir, "config.json")
  try:
    id2label = read_json_object(path).get("id2label")
  except ConfigError as e:
    raise TeacherError(str(e)) from None
  if id2label is None:
    return None
  if not isinstance(id2label, dict):
    raise TeacherError(f"{path}: field 'id2label' is not an object of class "
                       "names")
  try:
    names = [id2label[str(i)] for i in range(num_classes)]
  except KeyError:
    raise TeacherError(f"{path}: id2label does not name "
                       f"classes 0..{num_classes - 1}") from None
  if not all(isinstance(n, str) for n in names):
    raise TeacherError(f"{path}: field 'id2label' holds a name that is not "
                       "a string")
  if names == [f"LABEL_{i}" for i in range(num_classes)]:
    return None
  return check_class_names(names, f"{path} id2label")


def _labels_file(directory):
  """Our model directory's class names (labels.txt), checked, or None."""
  from tfmodels.configs import ConfigError, read_regular_file
  path = os.path.join(directory, LABELS_FILE)
  if not os.path.exists(path):
    return None
  try:
    data = read_regular_file(path, 1 << 20)
    names = data.decode("utf-8").split("\n")
  except ConfigError as e:
    raise TeacherError(str(e)) from None
  except UnicodeDecodeError:
    raise TeacherError(f"{path}: not UTF-8 text") from None
  if names and names[-1] == "":
    names.pop()
  return check_class_names(names, path)


def inspect_teacher(path, vocab_file=None):
  """(config, head, vocabulary pieces, tokenizer settings, class names or
  None) of --teacher, from its files alone: every file read as untrusted
  input and checked against the checkpoint's tensor shapes, no model
  built. What ship checks before any step, and the teacher step again."""
  from tfmodels.configs import load_config
  from tfmodels.head_spec import read_head
  from tfmodels.tokenization import load_vocab, settings_beside
  kind = teacher_format(path)
  names = None
  if kind == HF_FORMAT:
    from tfmodels.checkpoints import hf
    from tfmodels.checkpoints.hf_tokenizer import read_tokenizer
    config, head = hf.inspect_checkpoint(path)
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    tokenizer = read_tokenizer(directory, config)
    if tokenizer is None and vocab_file is None:
      raise TeacherError(f"--teacher {path}: no tokenizer files (vocab.txt "
                         "or tokenizer.json); pass --vocab_file")
    if tokenizer and not vocab_file:
      pieces, settings = list(tokenizer.vocab), tokenizer.settings
    else:
      pieces, settings = list(load_vocab(vocab_file)), settings_beside(
          vocab_file)
    if head.kind == "classifier":
      names = class_names(directory, head.num_classes)
  elif kind == OURS:
    from tfmodels.vocab_record import resolve
    config, head = load_config(os.path.join(path, "config.json")), read_head(
        path)
    vocab = resolve(path, vocab_file, default=VOCAB, model_flag="--teacher")
    pieces, settings = list(load_vocab(vocab)), settings_beside(vocab)
    names = _labels_file(path)
  else:
    config = head = None  # read with the checkpoint, in the teacher step
    vocab = vocab_file or next(
        (p for p in (os.path.join(os.path.dirname(_tf1_prefix(path)),
                                  "vocab.txt"),) if os.path.exists(p)), VOCAB)
    pieces, settings = list(load_vocab(vocab)), settings_beside(vocab)
  if config is not None and len(pieces) > config.vocab_size:
    raise TeacherError(f"--teacher {path}: its vocabulary has {len(pieces)} "
                       f"pieces, more than the model's {config.vocab_size} "
                       "word-table rows")
  return config, head, pieces, settings, names


def load_teacher(options):
  """(model, config, head, vocabulary pieces, tokenizer settings, class
  names or None)."""
  from tfmodels.checkpoints.model_dir import load_model_dir
  path = options.teacher
  _, _, pieces, settings, names = inspect_teacher(path, options.vocab_file)
  kind = teacher_format(path)
  if kind == HF_FORMAT:
    from tfmodels.checkpoints import hf
    model, config, head = hf.import_checkpoint(path)
  elif kind == OURS:
    model, config, head = load_model_dir(path)
  else:
    from tfmodels.checkpoints import tf1
    model, config, head = tf1.import_checkpoint(_tf1_prefix(path))
    if len(pieces) > config.vocab_size:
      raise TeacherError(f"--teacher {path}: its vocabulary has "
                         f"{len(pieces)} pieces, more than the model's "
                         f"{config.vocab_size} word-table rows")
  return model, config, head, pieces, settings, names


def check_head(options, head, task):
  """TeacherError unless the teacher's head answers the task (or may be
  fine-tuned next)."""
  wanted = task.head()
  if head.kind in ("encoder", "pretrainer"):
    if options.encoder_only:
      return
    raise TeacherError(
        f"--teacher {options.teacher}: has no task head (a "
        f"{'pre-trained' if head.kind == 'pretrainer' else 'sentence'} "
        "encoder); fine-tune it first with --teacher_finetune_steps N")
  if options.encoder_only:
    raise TeacherError(f"--teacher {options.teacher}: already has a "
                       f"{head.kind} head; drop --teacher_finetune_steps")
  if head != wanted:
    raise TeacherError(
        f"--teacher {options.teacher}: its head ({head.kind}"
        f"{f', {head.num_classes} classes' if head.num_classes else ''}) "
        f"does not answer --task {options.task} ({wanted.kind}"
        f"{f', {wanted.num_classes} classes' if wanted.num_classes else ''})")


def write_teacher(options):
  """Imports, checks and writes --output."""
  from tfmodels.checkpoints.model_dir import save_model_dir
  from tfmodels.training.tasks import make_task
  from tfmodels.tokenization import SETTINGS_NAME, WordPieceTokenizer
  from tfmodels.vocab_record import with_record
  model, config, head, pieces, settings, names = load_teacher(options)
  output = os.path.abspath(options.output)
  vocab_text = "".join(p + "\n" for p in pieces)
  # The settings beside the vocabulary: every later step's tokenizer reads
  # them (tokenization.settings_beside), the converter puts them in the file.
  files = {"vocab.txt": vocab_text,
           SETTINGS_NAME: json.dumps(settings.to_config(), indent=2) + "\n"}
  import tempfile
  with tempfile.NamedTemporaryFile("w", suffix=".txt") as vocab:
    vocab.write(vocab_text)
    vocab.flush()
    task = make_task(options.task, options.data_dir,
                     WordPieceTokenizer(vocab.name, settings=settings),
                     options.max_seq_length)
  check_head(options, head, task)
  if names is not None:
    files[LABELS_FILE] = "".join(n + "\n" for n in names)
  if not options.encoder_only:
    spec = {"task": options.task, "max_seq_length": options.max_seq_length,
            "vocab_file": os.path.join(output, "vocab.txt")}
    files["task.json"] = json.dumps(with_record(spec, pieces), indent=2)
  if options.max_seq_length > config.max_position_embeddings:
    raise TeacherError(f"--max_seq_length {options.max_seq_length}: above "
                       f"the teacher's {config.max_position_embeddings} "
                       "positions")
  save_model_dir(model, config, head, output, files, owner=OWNER)
  return config, head


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(TeacherOptions)
  logging.set_verbosity(logging.WARNING)
  from tfmodels.checkpoints.weight_mapping import CheckpointError
  from tfmodels.configs import ConfigError
  from tfmodels.staging import OutputError, check_output, lock_until_exit
  from tfmodels.tokenization import VocabError
  try:
    check_output(options.output, "--output", options.overwrite, OWNER,
                 inputs=[("--teacher", options.teacher)])
    lock_until_exit(options.output, "--output")
    config, head = write_teacher(options)
  except (CheckpointError, ConfigError, OutputError, VocabError, ValueError,
          OSError) as e:
    sys.exit(f"error: {e}")
  print(f"teacher {config.name}: {config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, {config.num_attention_heads} heads, FFN "
        f"{config.intermediate_size}, head {head.kind} -> {options.output}")


def run():
  run_command(define_command_flags, main)


if __name__ == "__main__":
  run()
