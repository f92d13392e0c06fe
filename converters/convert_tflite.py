"""Convert a trained model to .tflite files an app can ship, and prove them.

    python -m converters.convert_tflite --model_dir runs/squad \
        --data_dir data/wordnet_qa --output_dir models/qa \
        --modes float32,dynamic,int8 --max_metric_drop 1.0

--model_dir is one of our model directories (`save_model_dir` output, or a
pretrain / distill / finetune run: a finetune run's task.json supplies the
task, sequence length and vocabulary); --saved_model a SavedModel whose
serving signature takes input_ids / input_mask / segment_ids (or ids / mask /
segment_ids). The model is exported at a fixed [1, L] shape, converted once
per --modes entry (a mode of converters/quantize.py's MODES; `all`), and
each file is checked against the app contract (inputs ids / mask /
segment_ids; outputs start_logits / end_logits, probability, logits or
sequence_output), run through LiteRT on the host next to the Keras model,
and scored on --data_dir's --eval_split. It writes, in --output_dir:

    NAME_MODE.tflite             with Task Library metadata (vocab, names)
    NAME_MODE.model_card.json    what it is, where from, how accurate
    NAME_report.json / .md       ops, float ops, size, XNNPACK coverage,
                                 |TFLite - Keras|, metrics and verdict

A run that breaks --max_metric_drop or --max_float_diff exits non-zero and
leaves only the report; bad input exits with a one-line error and writes
nothing. After --substitute, --max_metric_drop still measures every file
against the original model (before substitution), and the report gives
both drops. --qat_steps N fine-tunes a fake-quantized copy on the task's
train split first and converts the modes QAT trains for (int8) from it,
with the learned ranges (converters/qat.py; experiments/papers/qat_report.py
measures it against post-training int8).
"""

import contextlib
import dataclasses
import json
import os
import sys

from absl import app, flags, logging

from converters import quantize
from tfmodels.command_options import define_flags, option
from tfmodels.data.squad import MAX_SEQ_LENGTH as QA_MAX_SEQ_LENGTH

FLAGS = flags.FLAGS

DEFAULT_VOCAB = "data/vocab/uncased_vocab.txt"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvertOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(ConvertOptions, **values)`."""
  model_dir: str | None = option(None, "Our model directory or training run.")
  saved_model: str | None = option(None, "A SavedModel (instead of "
                                   "--model_dir).")
  output_dir: str | None = option(None, "Where the .tflite files, model "
                                  "cards and report go.", required=True)
  name: str | None = option(None, "File name stem (default: the source "
                            "directory's name).")
  # Mode names (quantize.MODES), or ("all",); checked by _modes.
  modes: tuple = option(("float32",), "Quantization modes: "
                        f"{', '.join(quantize.mode_names())}, or all.")
  max_seq_length: int | None = option(
      None, "L of the [1, L] inputs (default: task.json's, else "
      f"{QA_MAX_SEQ_LENGTH} for QA, 128 otherwise).")
  dynamic_length: bool = option(
      True, "Inputs of any length (shape signature [1, -1]) with [1, "
      "--max_seq_length] as the default shape: an app that sizes its inputs "
      "to the text pays for its tokens only; the Task Library answers from "
      "it as from a fixed file (a classifier reads at most L tokens). "
      "--nodynamic_length: inputs [1, L] only. docs/design.md, \"A dynamic "
      "sequence length\".")
  vocab_file: str | None = option(
      None, "WordPiece vocab.txt (default: task.json's, else "
      "data/vocab/uncased_vocab.txt); refused unless it is the vocabulary "
      "the run recorded.")
  task: str | None = option(None, "Task for the metric (default: "
                            "task.json's): a GLUE name, spam, squad, tagging "
                            "or intent_slot.")
  data_dir: str | None = option(None, "The task's files; without it no "
                                "metric is measured.")
  eval_split: str = option("dev", "Split the metric is measured on.")
  representative_data: str | None = option(
      None, "Calibration text for " + " / ".join(
          m.name for m in quantize.MODES if m.calibrated)
      + ": SQuAD JSON, the task's .tsv or text lines (default: the task's "
      "train split).")
  num_calibration_samples: int = option(100, "Calibration examples.")
  strict_int8: bool = option(False, "Fail when an op cannot be quantized, "
                             "instead of leaving it float.")
  int8_recipe: str = option(
      quantize.INT8_RECIPES[0], "int8: `xnnpack` keeps float only the small "
      "islands XNNPACK has no int8 kernel for (softmax, LayerNorm, gelu), so "
      "phone and host CPUs run the graph in one partition, 2-5x faster "
      "(converters/fast_int8.py); `standard` is the converter's own output, "
      "integer but for the boundary ops (what NPUs / DSPs take; "
      "--strict_int8 implies it).", choices=quantize.INT8_RECIPES)
  fold_nonorm: bool = option(
      True, "Fold each NoNorm into the weights around it before export "
      "(exact; removes most element-wise ops of a NoNorm model: "
      "converters/nonorm_folding.py). Models it cannot fold are exported as "
      "they are.")
  allow_select_tf_ops: bool = option(False, "Accept TensorFlow (Flex) ops "
                                     "that are not TFLite builtins.")
  max_metric_drop: float | None = option(
      None, "Fail when a mode's metric is more than this many points below "
      "Keras'.")
  max_int8_loss: float = option(
      1.0, "--modes selective: take matmuls out of full int8 until the "
      "file's dev metric is within this many points of the Keras model's.")
  max_float_diff: float = option(1e-3, "Fail when float32's max |TFLite - "
                                 "Keras| output difference exceeds this.")
  num_compare: int = option(32, "Real examples on which outputs are "
                            "compared with Keras.")
  metadata: bool = option(True, "Embed Task Library metadata (vocab, "
                          "tokenizer, tensor names).")
  class_names: tuple = option((), "A classifier's class names in output "
                              "order, for the metadata's labels file "
                              "(what BertNLClassifier reports; default: "
                              "the task's labels).")
  num_threads: int = option(2, "LiteRT threads for validation.")
  substitute: str | None = option(
      None, "Op substitution before conversion, e.g. "
      "layernorm=nonorm,gelu=relu: each LayerNorm becomes a NoNorm fitted to "
      "it on calibration data, gelu becomes relu "
      "(tfmodels/compression/substitution.py).")
  recover_steps: int = option(0, "After --substitute, distil the "
                              "substituted encoder from the original for "
                              "this many steps (feature-map + attention "
                              "transfer).")
  recover_learning_rate: float = option(1e-4, "Adam learning rate of the "
                                        "recovery.")
  recover_batch_size: int = option(16, "Batch size of the recovery.")
  num_fit_samples: int = option(256, "Examples the NoNorms are fitted on "
                                "(and the recovery's loss is measured on).")
  qat_steps: int = option(
      0, "Quantization-aware training: fine-tune the model under int8 fake "
      "quantization for this many steps on --data_dir's train split, then "
      "convert int8 from it with the learned ranges (converters/qat.py); "
      "float modes are converted from the model as it is.")
  qat_learning_rate: float = option(1e-5, "Peak AdamW learning rate of the "
                                    "QAT fine-tuning.")
  qat_batch_size: int = option(16, "Batch size of the QAT fine-tuning.")
  qat_keras_metric: bool = option(True, "Also score the fake-quantized "
                                  "Keras model on the eval split (a "
                                  "diagnostic beside the int8 file's own "
                                  "score; fake quantization makes it slow).")
  overwrite: bool = option(False, "Replace existing output files.")


define_flags(ConvertOptions)


class UsageError(ValueError):
  """A flag combination that cannot work."""


def _modes(requested):
  """--modes (`requested`) as the list of modes to convert."""
  names = quantize.mode_names()
  modes = ([m.name for m in quantize.MODES if not m.searched]
           if list(requested) == ["all"] else list(requested))
  unknown = [m for m in modes if m not in names]
  if unknown or not modes:
    raise UsageError(f"--modes {','.join(requested)}: unknown mode(s) "
                     f"{unknown}; modes are {', '.join(names)} or all")
  return list(dict.fromkeys(modes))


def _seq_length(options, task_json, head_hint, config):
  length = options.max_seq_length  # 0 is a mistake, not "the default"
  if length is None:
    length = task_json.get("max_seq_length") or (
        QA_MAX_SEQ_LENGTH if head_hint == "span" else 128)
  if length < 3:
    raise UsageError(f"--max_seq_length {length}: needs room for [CLS], "
                     "[SEP] and a token (at least 3)")
  if config is not None and length > config.max_position_embeddings:
    raise UsageError(f"--max_seq_length {length} exceeds the model's "
                     f"max_position_embeddings {config.max_position_embeddings}"
                     f" ({options.model_dir}/config.json)")
  return length


def _head_hint(model_dir):
  """head.json's kind, read without TensorFlow (for the default length)."""
  try:
    with open(os.path.join(model_dir, "head.json")) as f:
      return json.load(f).get("kind")
  except (OSError, ValueError, AttributeError):
    return None


def _progress(message):
  print(message, flush=True)


def _check_qat_flags(options, modes):
  """--qat_steps' needs. QAT trains for the modes whose MODES entry says
  `qat`; a calibrated mode it does not train for is refused rather than
  converted without the learned ranges, so every calibrated file of a QAT
  run carries them."""
  if options.qat_steps < 0:
    raise UsageError(f"--qat_steps {options.qat_steps}: must be >= 0")
  if not options.qat_steps:
    return
  if options.model_dir is None:
    raise UsageError("--qat_steps needs --model_dir (a Keras model to "
                     "fine-tune)")
  if not options.data_dir:
    raise UsageError("--qat_steps needs --data_dir (it trains on the task's "
                     "train split)")
  chosen = [quantize.get_mode(m) for m in modes]
  if not any(m.qat for m in chosen) or any(
      m.calibrated and not m.qat for m in chosen):
    trained = " or ".join(m.name for m in quantize.MODES if m.qat)
    others = " or ".join(m.name for m in quantize.MODES
                         if m.calibrated and not m.qat)
    raise UsageError(f"--qat_steps trains for {trained}: --modes must "
                     f"include {trained}"
                     + (f" and not {others}" if others else ""))
  if not options.qat_learning_rate > 0 or options.qat_batch_size < 1:
    raise UsageError("--qat_learning_rate must be > 0 and --qat_batch_size "
                     ">= 1")


@dataclasses.dataclass
class Plan:
  """What the flags ask for, checked before TensorFlow is loaded."""
  modes: list
  integer_modes: list  # the calibrated modes
  qat_modes: list  # converted from the QAT model (--qat_steps)
  config: object  # ModelConfig, or None for a SavedModel
  seq_length: int
  task_name: str | None
  vocab_file: str
  name: str
  files: dict  # mode -> (.tflite name, model card name)
  reports: tuple  # (json name, markdown name)


def plan(options, out):
  """Checks the options, inputs and output names; cheap, so bad input fails
  fast. (main refuses nan and inf float flags first.)"""
  from converters import representative, source
  from tfmodels.staging import check_name_length
  modes = _modes(options.modes)
  if (options.model_dir is None) == (options.saved_model is None):
    raise UsageError("give exactly one of --model_dir and --saved_model")
  config = source.check_files(options.model_dir, options.saved_model)
  task_json = source.read_task(options.model_dir) if options.model_dir else {}
  head_hint = _head_hint(options.model_dir) if options.model_dir else None
  seq_length = _seq_length(options, task_json, head_hint, config)
  task_name = options.task or task_json.get("task")
  if options.data_dir and not task_name:
    raise UsageError("--data_dir needs --task (no task.json says it)")
  if options.max_metric_drop is not None and not options.data_dir:
    raise UsageError("--max_metric_drop needs --data_dir to measure on")
  if "selective" in modes and not options.data_dir:
    raise UsageError("--modes selective needs --data_dir: it takes nodes "
                     "out of full int8 until the dev metric is within "
                     "--max_int8_loss")
  if options.max_int8_loss < 0:
    raise UsageError(f"--max_int8_loss {options.max_int8_loss:g}: give "
                     "points, 0 or more")
  integer_modes = [m for m in modes if quantize.calibrated(m)]
  if integer_modes and not (options.representative_data or options.data_dir):
    raise UsageError(f"--modes {','.join(integer_modes)} need calibration "
                     "text: --representative_data or --data_dir")
  if not (options.data_dir or options.representative_data):
    raise UsageError("validation needs real inputs: give --data_dir or "
                     "--representative_data")
  if options.representative_data:
    representative.check_file(options.representative_data)
  if options.substitute is not None:
    from tfmodels.compression.substitution import parse_spec
    parse_spec(options.substitute)
    if options.saved_model:
      raise UsageError("--substitute needs --model_dir (the config says "
                       "which ops to replace)")
    if not (options.data_dir or options.representative_data):
      raise UsageError("--substitute fits on real inputs: give --data_dir "
                       "or --representative_data")
  if options.recover_steps < 0 or (options.recover_steps and
                                   options.substitute is None):
    raise UsageError("--recover_steps needs --substitute and must be >= 0")
  _check_qat_flags(options, modes)
  qat_modes = [m for m in modes if options.qat_steps and
               quantize.get_mode(m).qat]
  if options.num_calibration_samples < 1 or options.num_compare < 1:
    raise UsageError("--num_calibration_samples and --num_compare must be "
                     "positive")
  if options.num_threads < 1:
    raise UsageError(f"--num_threads {options.num_threads}: must be >= 1")
  name = options.name or os.path.basename(os.path.normpath(
      options.model_dir or options.saved_model))
  if options.name is not None and (
      not name or name != os.path.basename(name) or name.startswith(".")
      or "/" in name or os.sep in name):
    raise UsageError(f"--name {options.name}: a file name stem, not a path "
                     "(the files go into --output_dir)")
  files = {m: (f"{name}_{m}.tflite", f"{name}_{m}.model_card.json")
           for m in modes}
  reports = (f"{name}_report.json", f"{name}_report.md")
  names = [f for pair in files.values() for f in pair] + list(reports)
  # OutputFiles stages each file under its own name: these are the longest
  # names made, in its staging directory and in --output_dir.
  check_name_length(options.output_dir, names, "--name" if options.name else
                    "--name (default: the source directory's name)")
  out.refuse_existing(names)
  if options.model_dir:  # the run's recorded vocabulary, or refused
    from tfmodels.vocab_record import resolve
    vocab_file = resolve(options.model_dir, options.vocab_file,
                         default=DEFAULT_VOCAB)
  else:
    vocab_file = options.vocab_file or DEFAULT_VOCAB
  return Plan(modes, integer_modes, qat_modes, config, seq_length,
              task_name, vocab_file, name, files, reports)


@dataclasses.dataclass
class Reference:
  """The model to convert and what the converted files are judged against."""
  source: object  # source.Source
  task: object  # tfmodels task, or None
  calibration: dict | None  # our feature dict for the calibrated modes
  inputs: dict  # contract inputs [N, L] of real examples
  outputs: dict  # the Keras model's contract outputs on `inputs`
  metrics: dict | None  # the Keras model's task metrics
  labels: list | dict | None  # class names (metadata.attach's labels)
  substitution: dict | None = None  # what --substitute did and cost
  nonorm_folding: dict | None = None  # what --fold_nonorm did
  qat: object = None  # qat.QuantizationAware, Plan.qat_modes come from it
  qat_facts: dict | None = None  # what --qat_steps did
  # (inputs cut to validate.shorter_length, the Keras outputs on them), or
  # None: a dynamic-length file is validated there too
  shorter: tuple | None = None


def load_reference(options, p):
  """Loads the model, tokenizer, task and data; runs the Keras model."""
  from converters import representative, source, validate
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  src = source.load_source(options.model_dir, options.saved_model)
  if src.fixed_seq_length and src.fixed_seq_length != p.seq_length:
    raise UsageError(f"--max_seq_length {p.seq_length}: --saved_model takes "
                     f"only length {src.fixed_seq_length}")
  tokenizer = WordPieceTokenizer(p.vocab_file)
  if p.config is not None and len(tokenizer) > p.config.vocab_size:
    raise UsageError(f"--vocab_file {p.vocab_file} has {len(tokenizer)} "
                     f"tokens, more than the model's vocab_size "
                     f"{p.config.vocab_size}")
  task = make_task(p.task_name, options.data_dir, tokenizer, p.seq_length) if (
      options.data_dir) else None
  calibration = None
  if options.representative_data:
    calibration = representative.read_features(
        options.representative_data, tokenizer, p.seq_length, p.task_name)
  elif p.integer_modes:
    calibration = task.features("train")
  real = (task.features(options.eval_split, options.num_compare) if task
          else calibration)
  inputs = validate.contract_inputs(real, slice(0, options.num_compare))
  outputs = _keras_outputs(src.model, src.head, inputs)  # labels' count
  metrics = None
  if task:
    _progress(f"scoring the Keras model on {options.eval_split}")
    metrics = task.evaluate(src.model, options.eval_split)
  labels = None
  if "probability" in outputs:
    spec = getattr(task, "spec", None)
    labels = list(spec.labels) if spec and spec.labels else [
        str(i) for i in range(outputs["probability"].shape[-1])]
    if options.class_names:
      if len(options.class_names) != len(labels):
        raise UsageError(f"--class_names {','.join(options.class_names)}: "
                         f"{len(options.class_names)} names for the "
                         f"model's {len(labels)} classes")
      labels = list(options.class_names)
  if "intent_probability" in outputs and task is not None:
    labels = {"intent_probability": task.intents, "slot_logits": task.tags}
  ref = Reference(src, task, calibration, inputs, outputs, metrics, labels)
  _judge_by(ref, src.model, options.dynamic_length)
  return ref


def _judge_by(ref, model, dynamic_length):
  """ref.outputs (and ref.shorter) from `model` on ref.inputs."""
  from converters import validate
  ref.outputs = _keras_outputs(model, ref.source.head, ref.inputs)
  length = validate.shorter_length(ref.inputs["ids"].shape[1])
  if dynamic_length and length:
    cut = validate.cut_inputs(ref.inputs, length)
    ref.shorter = (cut, _keras_outputs(model, ref.source.head, cut))


def _keras_outputs(model, head, inputs):
  """The model's contract outputs on `inputs`, in bounded batches."""
  import numpy as np
  from converters import export
  from tfmodels import inference
  ours = inference.predict(model, export.features_of(inputs),
                           export.source_keys(head))
  return {k: np.asarray(v) for k, v in export.contract_outputs(
      head, ours).items()}


def substitute_reference(options, p, ref):
  """--substitute / --recover_steps: swaps the model to convert for the
  substituted (and recovered) one, scores each stage, and records it all in
  ref.substitution. The report compares TFLite with this new model, and
  the gate with the original (write_outputs)."""
  from converters import representative, validate
  from tfmodels.compression import substitution
  from tfmodels.checkpoints.model_dir import Head
  spec = substitution.parse_spec(options.substitute)
  if ref.source.head == "encoder":
    head = Head("encoder")
  else:
    with open(os.path.join(options.model_dir, "head.json")) as f:
      head = Head(**json.load(f))
  if ref.task is not None:
    features = ref.task.features("train")
  else:
    features = ref.calibration
  fit_features = representative.sample(features, options.num_fit_samples)
  _progress(f"substituting {options.substitute}: fitting NoNorms on "
            f"{len(fit_features['input_ids'])} examples")
  student, config, facts = substitution.substitute(
      ref.source.model, p.config, head, spec, fit_features)
  errors = substitution.norm_fit_errors(ref.source.model, student,
                                        fit_features)
  if errors:
    facts["norm_fit_mse"] = {
        "fitted": float(sum(e["fitted"] for e in errors.values())
                        / len(errors)),
        "identity": float(sum(e["identity"] for e in errors.values())
                          / len(errors))}
  stages = {"original": ref.metrics}
  if ref.task is not None:
    _progress(f"scoring the substituted model on {options.eval_split}")
    stages["substituted"] = ref.task.evaluate(student, options.eval_split)
  if options.recover_steps:
    _progress(f"recovering: {options.recover_steps} distillation steps")
    facts["recovery"] = substitution.recover(
        ref.source.model, student, features, options.recover_steps,
        options.recover_batch_size, options.recover_learning_rate,
        log=_progress, eval_features=fit_features)
    if ref.task is not None:
      _progress(f"scoring the recovered model on {options.eval_split}")
      stages["recovered"] = ref.task.evaluate(student, options.eval_split)
  facts["metrics"] = stages
  if ref.task is not None:
    facts["headline"] = {stage: validate.headline(m)[1]
                         for stage, m in stages.items()}
  p.config = config
  ref.source = dataclasses.replace(ref.source, model=student, config=config)
  _judge_by(ref, student, options.dynamic_length)
  ref.metrics = stages.get("recovered", stages.get("substituted",
                                                   ref.metrics))
  ref.substitution = facts


def qat_reference(options, p, ref):
  """--qat_steps: a fake-quantized copy of the model (NoNorms folded
  first, as the export would), calibrated, fine-tuned on the task and
  scored; Plan.qat_modes are then converted from it."""
  import tf_keras as keras
  from converters import conversion, qat, representative, validate
  model, folding = ref.source.model, None
  if options.fold_nonorm:
    model, folding = conversion.fold_for_export(
        model, p.config, representative.sample(
            ref.calibration, options.num_calibration_samples))
  if model is ref.source.model:  # QAT changes the layers it is given
    model = keras.models.clone_model(ref.source.model)
    model.set_weights(ref.source.model.get_weights())
  quantized = qat.QuantizationAware(
      model, "standard" if options.strict_int8 else options.int8_recipe)
  _progress("QAT: calibrating the fake-quantization ranges")
  quantized.calibrate(representative.sample(ref.calibration,
                                            options.num_calibration_samples))
  features = ref.task.features("train")
  _progress(f"QAT: {options.qat_steps} steps of fine-tuning under fake "
            "quantization")
  facts = qat.train(quantized, ref.task, features, options.qat_steps,
                    options.qat_batch_size, options.qat_learning_rate,
                    eval_features=representative.sample(
                        features, options.num_fit_samples), log=_progress)
  if options.qat_keras_metric:
    _progress("scoring the fake-quantized Keras model on "
              f"{options.eval_split}")
    facts["metrics"] = ref.task.evaluate(quantized, options.eval_split)
    facts["headline"] = validate.headline(facts["metrics"])[1]
  facts["nonorm_folding"] = folding
  ref.qat, ref.qat_facts = quantized, facts


def convert_modes(options, p, ref):
  """{mode: (bytes of the final file, its measurements)}."""
  from converters import (contract, conversion, gpu_delegate, metadata,
                          representative, validate)
  from tfmodels.tokenization import settings_beside
  expected = {k: (1,) + v.shape[1:] for k, v in ref.outputs.items()}
  dataset = ref.calibration and representative.calibration_dataset(
      ref.calibration, options.num_calibration_samples)
  settings = dict(strict_int8=options.strict_int8,
                  allow_select_tf_ops=options.allow_select_tf_ops,
                  int8_recipe=options.int8_recipe,
                  dynamic_length=options.dynamic_length, log=_progress)
  from_qat = p.qat_modes if ref.qat else []
  files, searched = {}, {}
  if len(from_qat) < len(p.modes):
    labels = [m for m in p.modes if m not in from_qat]
    # selective measures dynamic-range int8 as a candidate too.
    extra = ["dynamic"] if "selective" in labels and "dynamic" not in \
        labels else []
    result = conversion.convert_model(
        ref.source.model, ref.source.head, p.seq_length, labels + extra,
        dataset, config=ref.source.config, fold_nonorm=options.fold_nonorm,
        **settings)
    ref.nonorm_folding = result.nonorm_folding
    files.update(result.files)
    if "selective" in files:
      chosen = _selective(options, p, ref, *files["selective"],
                          files["dynamic"][0])
      files["selective"], searched["selective"] = (chosen.data, {}), \
          chosen.facts
    for label in extra:
      del files[label]
  if from_qat:  # already folded: qat_reference
    _progress("converting the QAT model with its learned ranges")
    files.update(conversion.convert_model(
        ref.qat, ref.source.head, p.seq_length, from_qat, dataset,
        fold_nonorm=False, **settings).files)
  converted = {}
  for mode in p.modes:
    data = files[mode][0]
    try:
      facts = contract.check(data, expected, p.seq_length,
                             options.allow_select_tf_ops)
    except contract.ContractError as e:
      raise contract.ContractError(f"{mode}: {e}") from None
    _progress(f"[{mode}] validating ({len(data) / 1e6:.2f} MB)")
    if options.metadata:
      data = metadata.attach(data, ref.source.head, p.vocab_file,
                             ref.labels, description=f"{p.name} ({mode})",
                             settings=settings_beside(p.vocab_file))
    result_of_mode = validate.measure_mode(
        data, ref.outputs, ref.inputs, ref.task, options.eval_split,
        options.num_threads, ref.shorter)
    result_of_mode.update(file=p.files[mode][0], contract=facts)
    if mode in searched:
      result_of_mode["selective"] = searched[mode]
    if mode in gpu_delegate.FLOAT_MODES:
      result_of_mode["gpu_delegate"] = gpu_delegate.gpu_delegate_report(data)
    converted[mode] = (data, result_of_mode)
  return converted


def _selective(options, p, ref, full, facts, dynamic):
  """The selective mode's file: the fewest matmuls of the full int8 file
  (`full`, converted with its calibrated model in `facts`) left in float
  to keep the dev metric within --max_int8_loss of the Keras model's; or
  the dynamic-range file where it meets the bound too and runs faster on
  this host."""
  from converters import conversion, runtime, selective_int8, validate

  def score(data):
    model = runtime.LiteRTModel(data, options.num_threads)
    return validate.headline(ref.task.evaluate(
        validate.TaskModel(model), options.eval_split))[1]

  calibrated = facts.pop("calibrated")
  _progress(f"[selective] ranking the int8 nodes; keeping the fewest in "
            f"float within {options.max_int8_loss:g} points")
  float_metric = validate.headline(ref.metrics)[1]
  chosen = selective_int8.search(
      calibrated, full,
      selective_int8.calibration_feeds(calibrated, ref.calibration), score,
      float_metric, options.max_int8_loss,
      lambda data: conversion.finish(data, p.seq_length,
                                     options.dynamic_length), _progress)
  example = {k: v[:1] for k, v in ref.inputs.items()}
  candidates = {"full int8": (full, chosen.facts["tried"][0]["metric"]),
                "selective": (chosen.data, chosen.facts["metric"]),
                "dynamic": (dynamic, score(dynamic))}
  chosen.facts["candidates"] = {
      name: {"metric": metric, "size_mb": round(len(data) / 1e6, 4),
             "host_ms": round(runtime.LiteRTModel(
                 data, options.num_threads).median_ms(example), 3),
             "within_bound": float_metric - metric <= options.max_int8_loss}
      for name, (data, metric) in candidates.items()}
  meeting = [n for n in ("selective", "dynamic")
             if chosen.facts["candidates"][n]["within_bound"]]
  kept = min(meeting or ["selective"],
             key=lambda n: chosen.facts["candidates"][n]["host_ms"])
  chosen.facts["kept"] = kept
  if kept == "dynamic":
    chosen.data = dynamic
  return chosen


def write_outputs(options, p, ref, converted, out):
  """Stages the report, and the models with their cards if they passed."""
  from converters import model_card, validate
  facts = {"name": p.name, "source": ref.source.path,
           "head": ref.source.head, "seq_length": p.seq_length,
           "task": p.task_name, "data_dir": options.data_dir,
           "eval_split": options.eval_split, "vocab_file": p.vocab_file,
           "representative_data": options.representative_data or (
               f"{options.data_dir} (train)" if p.integer_modes else None),
           "num_calibration_samples": options.num_calibration_samples,
           "strict_int8": options.strict_int8,
           "int8_recipe": options.int8_recipe,
           "dynamic_length": options.dynamic_length,
           "substitution": ref.substitution,
           "nonorm_folding": ref.nonorm_folding,
           "qat": ref.qat_facts,
           "num_compare": int(len(ref.inputs["ids"]))}
  original = (ref.substitution or {}).get("metrics", {}).get("original")
  report = validate.build_report(
      facts, ref.metrics, {m: r for m, (_, r) in converted.items()},
      options.max_float_diff, options.max_metric_drop, original)
  if report["passed"]:
    task = {"name": p.task_name, "data_dir": options.data_dir,
            "split": options.eval_split} if ref.task else None
    for mode, (data, result) in converted.items():
      out.add(p.files[mode][0], data)
      card = model_card.model_card(
          file_name=p.files[mode][0], data=data, mode=mode,
          head=ref.source.head, seq_length=p.seq_length,
          source=ref.source.path,
          config=p.config.to_dict() if p.config else None,
          contract=result["contract"], measured=result,
          keras_metric=(report["keras"] or {}).get("metric"), task=task,
          vocab_file=p.vocab_file, nonorm_folding=ref.nonorm_folding)
      out.add(p.files[mode][1], json.dumps(card, indent=2) + "\n")
  out.add(p.reports[0], json.dumps(report, indent=2, default=_jsonable)
          + "\n")
  from converters.qat import markdown_lines
  out.add(p.reports[1], validate.markdown(report)
          + "".join(f"{line}\n" for line in markdown_lines(ref.qat_facts)))
  return report


def convert(options, out):
  """The whole run (plan, reference, modes, outputs) of ConvertOptions;
  returns the report and the path of its markdown."""
  p = plan(options, out)
  _progress("loading TensorFlow and the model")
  import tensorflow as tf
  tf.get_logger().setLevel("ERROR")
  ref = load_reference(options, p)
  if options.substitute:
    substitute_reference(options, p, ref)
  if options.qat_steps:
    qat_reference(options, p, ref)
  converted = convert_modes(options, p, ref)
  return write_outputs(options, p, ref, converted, out), os.path.join(
      options.output_dir, p.reports[1])


def _known_errors():
  """Errors that mean bad input (one line), not a bug (traceback): ours are
  ValueErrors; TensorFlow's OpError when it cannot run the given model."""
  errors = (ValueError, OSError, KeyError)
  tf = sys.modules.get("tensorflow")
  return errors + (tf.errors.OpError,) if tf else errors


def _jsonable(value):
  """numpy scalars and arrays in the report."""
  return value.tolist() if hasattr(value, "tolist") else str(value)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)
  from tfmodels.command_options import from_flags
  from tfmodels.flag_checks import nonfinite_float_flag
  from tfmodels.staging import OutputFiles, output_lock
  options = from_flags(ConvertOptions, FLAGS)
  with contextlib.ExitStack() as held:
    try:  # one writer per output directory: a second is refused
      held.enter_context(output_lock(options.output_dir))
      out = OutputFiles(options.output_dir, options.overwrite)
    except ValueError as e:
      sys.exit(f"error: {e}")
    try:
      nonfinite = nonfinite_float_flag(FLAGS)
      if nonfinite:
        raise UsageError(nonfinite)
      report, markdown = convert(options, out)
      written = out.commit()
    except BaseException as e:
      out.discard()
      if not isinstance(e, _known_errors()):
        raise
      text = str(e).strip() or repr(e)
      sys.exit(f"error: {text.splitlines()[0]}")
  print(f"wrote {', '.join(written)}")
  if not report["passed"]:
    sys.exit(f"error: validation failed: {report['failures'][0]} (no model "
             f"written; see {markdown})")


def run():
  from tfmodels.sigterm import exit_on_sigterm
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
