"""Carve a student out of a fine-tuned teacher's own weights.

    python -m tfmodels.training.compress --teacher_dir /tmp/minilm_qa \
        --data_dir data/wordnet_qa --model_dir /tmp/carved_qa \
        --heads 6 --target_params 0.4 --low_rank word_embeddings=128 \
        --substitute layernorm=nonorm,gelu=relu --recover_steps 200

Scores every attention head and FFN neuron of the teacher (a `finetune`
run: its task.json names the task, length and vocabulary) on
--calibration_examples training examples, keeps the --heads best heads and
--intermediate_size best neurons of each layer (bias-compensated), stores
the --low_rank matrices as activation-aware SVD factors, optionally swaps
LayerNorm / gelu for MobileBERT's NoNorm / relu (NoNorms fitted to the
LayerNorms they replace) and distils the result's feature maps from the
teacher for --recover_steps, and with --vocab_file moves the result to a
smaller vocabulary (its word table started from the teacher's; with
--align_steps its new rows then trained by mixed-vocabulary alignment).
With --target_params (a share of the teacher's
encoder parameters) and no --intermediate_size, the widest FFN (a multiple
of 32) that fits the share is chosen.

--model_dir receives a model directory like `finetune`'s (config.json with
the carved widths, head.json, task.json, checkpoint, SavedModel) plus
carving.json: the importance scores, what each layer kept, the factor
errors, parameter counts, the recovery losses and, with --evaluate, the
dev metrics before any training. Task-stage distillation then runs through
`finetune --init_dir OUT --teacher_dir TEACHER --task_kd prediction`
(or `hidden`).
"""

import dataclasses
import json
import os
import sys

from absl import app, flags, logging

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.sigterm import exit_on_sigterm

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompressOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(CompressOptions, **values)`."""
  teacher_dir: str = option(None, "A fine-tuned model (finetune run).",
                            required=True)
  data_dir: str = option(None, "The task's data (train split scored).",
                         required=True)
  model_dir: str = option(None, "Output: the carved model directory.",
                          required=True)
  heads: int = option(0, "Attention heads kept per layer (0: all).")
  intermediate_size: int = option(0, "FFN neurons kept per layer (0: all, "
                                  "or chosen by --target_params).")
  target_params: float = option(0.0, "At most this share of the teacher's "
                                "encoder parameters (0: no target).")
  low_rank: str = option("", "Comma-separated MATRIX=RANK: query, key, "
                         "value, attention_output, intermediate, output, "
                         "word_embeddings.")
  substitute: str = option("", "layernorm=nonorm and/or gelu=relu: "
                           "MobileBERT's operational optimizations.")
  recover_steps: int = option(0, "Feature-map distillation steps from the "
                              "teacher after carving / substitution.")
  recover_learning_rate: float = option(1e-4, "Adam learning rate of the "
                                        "recovery.")
  calibration_examples: int = option(512, "Training examples the importance "
                                     "scores and input moments are taken "
                                     "on.")
  batch_size: int = option(32, "Batch size of scoring and recovery.")
  evaluate: bool = option(False, "Score the dev split before and after "
                          "carving (written to carving.json).")
  vocab_file: str | None = option(
      None, "The student's own (smaller) vocabulary, moved to last: a piece "
      "the teacher has keeps its vector, any other starts as the mean of "
      "the teacher pieces that spell it (compression/vocab_transfer.py); "
      "task.json records it. Default: the teacher's.")
  align_steps: int = option(
      0, "With --vocab_file: steps of mixed-vocabulary alignment of the new "
      "rows on the task's training text (compression/vocab_alignment.py: "
      "each word in the student's or the teacher's pieces, the frozen model "
      "must give the teacher-segmented hidden states).")
  align_layers_learning_rate: float = option(
      0.0, "With --align_steps: the layers train too at this rate (0: only "
      "the new rows; the paper's stage I trains the whole model), so words "
      "the student splits are composed as the teacher read them whole.")
  seed: int = option(0, "Which calibration examples.")
  overwrite: bool = option(False, "Replace an existing --model_dir.")


define_flags(CompressOptions)


def parse_ranks(text):
  """"word_embeddings=128,query=96" -> {"word_embeddings": 128, ...}."""
  from tfmodels.configs import LOW_RANK_MATRICES
  ranks = {}
  for item in filter(None, (s.strip() for s in (text or "").split(","))):
    name, _, value = item.partition("=")
    if name not in LOW_RANK_MATRICES or not value.isdigit() or not int(
        value):
      raise ValueError(f"--low_rank {text}: {item!r} is not MATRIX=RANK "
                       f"with MATRIX one of {', '.join(LOW_RANK_MATRICES)}"
                       " and RANK a positive integer")
    if name in ranks:
      raise ValueError(f"--low_rank {text}: {name} is given twice")
    ranks[name] = int(value)
  return ranks


def _check_options(options):
  """One line naming the flag, before any work (the caller has refused
  non-finite floats: `tfmodels.flag_checks`)."""
  for name in ("heads", "intermediate_size", "recover_steps", "align_steps"):
    if getattr(options, name) < 0:
      return f"--{name} {getattr(options, name)}: must be >= 0"
  if options.align_steps and not options.vocab_file:
    return (f"--align_steps {options.align_steps}: aligns the rows of a "
            "--vocab_file; none given")
  for name in ("calibration_examples", "batch_size"):
    if getattr(options, name) < 1:
      return f"--{name} {getattr(options, name)}: must be >= 1"
  if not 0.0 <= options.target_params < 1.0:
    return f"--target_params {options.target_params}: must be in [0, 1)"
  if options.align_layers_learning_rate < 0:
    return ("--align_layers_learning_rate "
            f"{options.align_layers_learning_rate}: must be >= 0")
  if options.align_layers_learning_rate and not options.align_steps:
    return ("--align_layers_learning_rate "
            f"{options.align_layers_learning_rate}: trains during "
            "--align_steps; none given")
  if not options.recover_learning_rate > 0:
    return (f"--recover_learning_rate {options.recover_learning_rate}: must "
            "be > 0")
  return None


def check_model_dir(options):
  """--model_dir may take the carved model: new, or compress's own earlier
  output with --overwrite, never a link, the teacher or the data
  (staging.check_output); OutputError otherwise, before any work."""
  from tfmodels.staging import check_output
  check_output(options.model_dir, "--model_dir", options.overwrite,
               owner="compress", inputs=[("--teacher_dir", options.teacher_dir),
                                         ("--data_dir", options.data_dir)])


def plan(teacher_config, heads, intermediate_size, target, ranks):
  """(CarveSpec, student encoder params, teacher encoder params); with a
  target and no FFN width, the widest multiple of 32 that fits."""
  from tfmodels.compression.carve import CarveSpec, carved_config
  from tfmodels.summary import count
  teacher_params = count(teacher_config, 1)["params_encoder"]

  def params(width):
    spec = CarveSpec(heads or None, width or None, ranks)
    return spec, count(carved_config(teacher_config, spec), 1)[
        "params_encoder"]

  if target and not intermediate_size:
    for width in range(teacher_config.intermediate_size, 0, -32):
      spec, n = params(width)
      if n <= target * teacher_params:
        return spec, n, teacher_params
    raise ValueError(f"--target_params {target}: no FFN width fits with "
                     f"--heads {heads} and --low_rank {ranks}")
  spec, n = params(intermediate_size)
  if target and n > target * teacher_params:
    raise ValueError(f"--target_params {target}: the carve keeps "
                     f"{n / teacher_params:.1%} of the teacher's encoder "
                     "parameters")
  return spec, n, teacher_params


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(CompressOptions, FLAGS)
  error = nonfinite_float_flag(FLAGS) or _check_options(options)
  if error:
    sys.exit(f"error: {error}")
  logging.set_verbosity(logging.WARNING)
  from tfmodels.checkpoints.model_dir import read_task_spec
  from tfmodels.compression.substitution import (SubstitutionError,
                                                 parse_spec,
                                                 substituted_config)
  from tfmodels.configs import ConfigError, load_config
  from tfmodels.staging import OutputError, lock_until_exit
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve, with_record
  try:  # the cheap checks first
    check_model_dir(options)
    lock_until_exit(options.model_dir, "--model_dir")
    task_spec = read_task_spec(
        options.teacher_dir, "--teacher_dir",
        "compress carves a fine-tuned model: give a finetune run's or "
        "compress's output directory")
    teacher_config = load_config(os.path.join(options.teacher_dir,
                                              "config.json"))
    ranks = parse_ranks(options.low_rank)
    substitutions = (parse_spec(options.substitute) if options.substitute
                     else {})
    if options.heads > teacher_config.num_attention_heads:
      raise ValueError(f"--heads {options.heads}: the teacher has "
                       f"{teacher_config.num_attention_heads}")
    if options.intermediate_size > teacher_config.intermediate_size:
      raise ValueError(f"--intermediate_size {options.intermediate_size}: the "
                       f"teacher has {teacher_config.intermediate_size}")
    spec, params, teacher_params = plan(
        teacher_config, options.heads, options.intermediate_size,
        options.target_params, ranks)
    if substitutions:
      substituted_config(teacher_config, substitutions)  # refused early
    tokenizer = WordPieceTokenizer(resolve(options.teacher_dir,
                                           model_flag="--teacher_dir"))
    task = make_task(task_spec["task"], options.data_dir, tokenizer,
                     task_spec["max_seq_length"])
    vocabularies = None
    if options.vocab_file:  # the carved dir reads the student's
      student_tokenizer = WordPieceTokenizer(options.vocab_file,
                                             tokenizer.lower_case)
      vocabularies = (tokenizer, make_task(
          task_spec["task"], options.data_dir, student_tokenizer,
          task_spec["max_seq_length"]))
      task_spec = with_record(dict(task_spec, vocab_file=os.path.abspath(
          options.vocab_file)), student_tokenizer.vocab)
    else:
      task_spec = with_record(task_spec, tokenizer.vocab)
  except (ConfigError, VocabError, SubstitutionError, ValueError, OSError,
          OutputError) as e:
    sys.exit(f"error: {e}")
  print(f"carving {teacher_config.name}: heads {spec.heads or 'all'}, FFN "
        f"{spec.intermediate_size or 'all'}, low rank {ranks or 'none'}: "
        f"{params:,} of {teacher_params:,} encoder parameters "
        f"({params / teacher_params:.1%})", flush=True)
  counts = {"teacher_params_encoder": teacher_params,
            "params_encoder": params,
            "params_share": round(params / teacher_params, 4)}
  try:
    facts = _carve(task, task_spec, spec, substitutions, counts, options,
                   vocabularies)
  except (ConfigError, SubstitutionError, ValueError) as e:
    sys.exit(f"error: {e}")
  print(json.dumps({k: v for k, v in facts.items() if k != "layers"}),
        flush=True)


def _carve(task, task_spec, spec, substitutions, counts, options,
           vocabularies=None):
  """Scores, carves, substitutes, recovers, moves to the student's
  vocabulary (`vocabularies`: the teacher's tokenizer, the task read with
  the student's), writes; returns the facts."""
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import load_model_dir, save_model_dir
  from tfmodels.compression import importance, substitution
  from tfmodels.compression.carve import carve
  from tfmodels.data.batches import batches
  keras.utils.set_random_seed(options.seed)
  teacher, config, head = load_model_dir(options.teacher_dir)
  features, calibration = importance.teacher_calibration(
      task, head, options.teacher_dir, options.calibration_examples,
      options.seed)
  block_ranks = set(spec.ranks) - {"word_embeddings"}
  statistics, tokens = importance.collect(
      teacher, config, batches(calibration, options.batch_size),
      inputs=bool(block_ranks))
  student, student_config, facts = carve(
      teacher, config, head, statistics, spec,
      name=f"{config.name}_carved")
  facts.update(counts, calibration_examples=len(calibration["input_ids"]),
               calibration_tokens=tokens,
               heads=student_config.num_attention_heads,
               intermediate_size=student_config.intermediate_size,
               low_rank_ranks=dict(spec.ranks))
  if options.evaluate:
    facts["dev_teacher"] = task.evaluate(teacher, "dev")
    facts["dev_carved"] = task.evaluate(student, "dev")
  if substitutions:
    student, student_config, substituted = substitution.substitute(
        student, student_config, head, substitutions, calibration,
        batch_size=options.batch_size)
    facts["substitution"] = substituted
    if options.evaluate:
      facts["dev_substituted"] = task.evaluate(student, "dev")
  if options.recover_steps:
    facts["recovery"] = substitution.recover(
        teacher, student, features, options.recover_steps,
        batch_size=options.batch_size,
        learning_rate=options.recover_learning_rate, seed=options.seed,
        log=lambda line: print(line, flush=True),
        eval_features=calibration)
    if options.evaluate:
      facts["dev_recovered"] = task.evaluate(student, "dev")
  if vocabularies:  # last: recovery reads the teacher's token ids
    from tfmodels.compression.vocab_transfer import with_vocabulary
    teacher_tokenizer, moved_task = vocabularies
    if options.align_steps:
      from tfmodels.compression.vocab_alignment import align
      student, student_config, facts["vocabulary"] = align(
          student, student_config, head, teacher_tokenizer,
          moved_task.tokenizer, task.texts("train"), options.align_steps,
          length=task.max_seq_length, batch_size=options.batch_size,
          seed=options.seed,
          layers_learning_rate=options.align_layers_learning_rate,
          log=lambda line: print(line, flush=True))
    else:
      student, student_config, facts["vocabulary"] = with_vocabulary(
          student, student_config, head, teacher_tokenizer.vocab,
          moved_task.tokenizer.vocab)
    from tfmodels.summary import count
    params = count(student_config, 1)["params_encoder"]  # a smaller table
    facts.update(params_encoder=params, params_share=round(
        params / facts["teacher_params_encoder"], 4))
    print(f"vocabulary: {json.dumps(facts['vocabulary'])}; {params:,} "
          "encoder parameters", flush=True)
    if options.evaluate:
      facts["dev_moved"] = moved_task.evaluate(student, "dev")
  save_model_dir(student, student_config, head, options.model_dir,
                 owner="compress", flag="--model_dir",
                 files={"task.json": json.dumps(task_spec),
                        "carving.json": json.dumps(facts, indent=1)})
  return facts


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
