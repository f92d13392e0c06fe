"""Convert and time our encoders on LiteRT: MobileBERT's Table 7 on the host.

    python -m experiments.bench.latency_benchmark --output_dir experiments/results \
        --work_dir /tmp/bench_work [--threads 2] [--models mobilebert] \
        [--modes float32,int8] [--variants nonorm_relu,layernorm_gelu] \
        [--cells 'mobilebert/*/*,bert_base/layernorm_gelu/*']

Every model (`bert_base`, `mobilebert`, `mobilebert_tiny`, any config name
such as `tiny_mobilebert`, and `peer_mobilebert`: the Model Garden's
MobileBERTEncoder with our MobileBERT's sizes) is built in each Table 7
variant (`layernorm_gelu`, `layernorm_relu`, `nonorm_gelu`, `nonorm_relu`:
`ModelConfig.replace(normalization_type=, hidden_act=)`), exported at a
fixed [1, L] and converted per mode by convert_tflite's own chain
(converters/conversion.py): `float32`,
`dynamic`, `int8` (ours: the XNNPACK recipe of fast_int8.py; the peer: the
converter's standard output, as anyone converting it would get) and
`int8_standard` (ours through the standard converter, for before / after).
Ours are exported as convert_tflite exports them: NoNorms folded into the
weights around them (nonorm_folding.py; --nofold_nonorm to compare). Int8
calibration uses a few real sentences of --calibration_data.

Timing is android_bench's: its host runner (android_bench.benchmark_model on
ai_edge_litert, XNNPACK) for every file x --threads x --repeats through
`run_matrix`, and, with --adb, the same cells on the attached phone through
benchmark_model. A row's `median_ms` is the median of the repeats' medians
(repeats outermost, so drift spreads over every cell; within a repeat by
mode, variant, then model, so compared cells run close together), `runs`
how many timed runs it pools.

Weights are random (latency does not depend on their values), except that
norm scales and offsets are drawn around 1 and 0: left at their initial
ones / zeros, the converter folds `x * 1 + 0` away and a NoNorm model would
look cheaper than a trained one.

Writes in --output_dir: benchmark.json (rows: model, variant, mode,
threads, target, median_ms, p5_ms, p95_ms, runs, size_mb, xnnpack nodes and
partitions, float ops), benchmark.md (the table, Table 7 ratios beside the
paper's, the issue's checks) and benchmark.png. Converted files are cached in
--work_dir (by config, mode and length), so a rerun only times.
--overwrite replaces those three files of an earlier run and nothing else:
one of their names taken by a directory or a link, or a link given as
--output_dir or --work_dir, is refused before any work, as is a
--max_seq_length beyond a model's position table (512 for BERT and
MobileBERT); a run that fails leaves no empty folder it made.

Only `main` reads the flags, into `BenchmarkOptions`; every function takes
that (tests and other commands: `command_options.with_defaults`).
"""

import contextlib
import dataclasses
import fnmatch
import hashlib
import json
import os
import sys

from absl import app, flags

from android_bench.device_info import int8_expectation
from converters.quantize import calibrated
from experiments.common import skeleton
from experiments.bench.latency_report import (PEER, VARIANTS, markdown, plot,
                                         timed_modes)
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import nonfinite_float_flag
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import temporary_directory, write_file

FLAGS = flags.FLAGS
OUTPUTS = ("benchmark.json", "benchmark.md", "benchmark.png")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchmarkOptions(skeleton.Options):
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`, other callers with
  `command_options.with_defaults(BenchmarkOptions, **values)`.
  The outputs go straight to --output_dir (no --results_dir, no --force)."""
  output_dir: str | None = skeleton.output_dir_option(
      "Where benchmark.json / .md / .png go.")
  work_dir: str | None = option(None, "Cache of SavedModels, .tflite files "
                                "and timing runs (default: a temporary "
                                "directory).")
  models: tuple = option(("bert_base", "mobilebert", "mobilebert_tiny",
                          "peer_mobilebert"),
                         "Config names (tfmodels/configs) and/or "
                         "peer_mobilebert.")
  variants: tuple = option(("layernorm_gelu", "layernorm_relu",
                            "nonorm_gelu", "nonorm_relu"),
                           "Table 7 variants.")
  modes: tuple = option(("float32", "dynamic", "int8"),
                        f"Any of {', '.join(timed_modes())} (int8 is the "
                        "XNNPACK recipe, int8_standard the converter's own "
                        "output).")
  cells: tuple = option(("*/*/*",), "Keep only the model/variant/mode "
                        "combinations matching one of these patterns "
                        "(fnmatch), e.g. mobilebert/*/*,bert_base/"
                        "layernorm_gelu/*.")
  threads: tuple = option(("1", "2", "4"), "LiteRT thread counts.")
  max_seq_length: int = option(128, "L of the [1, L] inputs.")
  num_runs: int = option(20, "Timed runs per cell (at least).")
  min_secs: float = option(1.0, "Seconds of timed runs per cell (at "
                           "least).")
  warmup_runs: int = option(2, "Warm-up runs per cell.")
  repeats: int = option(3, "Times each cell is measured.")
  calibration_data: str = option("data/pretraining/heldout.txt.gz",
                                 "Real text for int8 calibration (one "
                                 "sentence a line).")
  num_calibration_samples: int = option(16, "Calibration sentences.")
  vocab_file: str = option("data/vocab/uncased_vocab.txt",
                           "WordPiece vocab for the calibration text.")
  adb: bool = option(False, "Also time on the attached phone through "
                     "android_bench's adb harness (needs "
                     "--benchmark_binary).")
  benchmark_binary: str | None = option(None, "LiteRT benchmark_model for "
                                        "the phone's ABI.")
  serial: str | None = option(None, "adb device serial.")
  cpu_mask: str | None = option(None, "Pin the phone's runs (hex mask or "
                                "'big').")
  fold_nonorm: bool = option(True, "Fold our models' NoNorms into their "
                             "neighbours before export, as convert_tflite "
                             "does.")
  peer_config: str = option("mobilebert", "Config whose sizes the peer "
                            "MobileBERTEncoder takes.")
  overwrite: bool = option(False, "Replace existing outputs.")


define_flags(BenchmarkOptions)


class BenchmarkError(ValueError):
  """Bad flags or inputs (one line)."""


def _progress(message):
  print(message, flush=True)


@dataclasses.dataclass(frozen=True)
class Cell:
  """One converted file: model x variant x mode."""
  model: str
  variant: str
  mode: str

  @property
  def stem(self):
    return f"{self.model}_{self.variant}_{self.mode}"


def model_config(model, variant, peer_config="mobilebert"):
  """Our ModelConfig of `model` in `variant` (the peer: --peer_config's)."""
  from tfmodels.configs import load_config
  norm, act = VARIANTS[variant]
  return load_config(peer_config if model == PEER else model).replace(
      normalization_type=norm, hidden_act=act)


def _randomize_norms(model, seed=0):
  """Norm scales around 1 and offsets around 0 (see the module docstring)."""
  import numpy as np
  rng = np.random.default_rng(seed)
  for layer in model.submodules:
    if type(layer).__name__ not in ("NoNorm", "LayerNormalization"):
      continue
    for weight in layer.weights:
      value = weight.numpy()
      center = 1.0 if np.all(value == 1.0) else 0.0
      weight.assign(center + 0.1 * rng.standard_normal(value.shape)
                    .astype(value.dtype))


def peer_encoder(config):
  """The Model Garden's MobileBERTEncoder (tf-models-official) with the
  sizes of `config`, behind our feature names; needs requirements-bench.txt."""
  import tf_keras as keras
  try:
    from official.nlp.modeling.networks import mobile_bert_encoder
  except ImportError as e:
    raise BenchmarkError(f"--models {PEER} needs tf-models-official and "
                         f"gin-config (pip install --no-deps -r "
                         f"requirements-bench.txt): {e}") from None
  from tfmodels.encoders import encoder_inputs
  c = config
  peer = mobile_bert_encoder.MobileBERTEncoder(
      word_vocab_size=c.vocab_size, word_embed_size=c.embedding_size,
      type_vocab_size=c.type_vocab_size,
      max_sequence_length=c.max_position_embeddings,
      num_blocks=c.num_hidden_layers, hidden_size=c.hidden_size,
      num_attention_heads=c.num_attention_heads,
      intermediate_size=c.intermediate_size, intermediate_act_fn=c.hidden_act,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
      intra_bottleneck_size=c.intra_bottleneck_size,
      initializer_range=c.initializer_range,
      use_bottleneck_attention=c.use_bottleneck_attention,
      key_query_shared_bottleneck=c.key_query_shared_bottleneck,
      num_feedforward_networks=c.num_feedforward_networks,
      normalization_type=c.normalization_type, classifier_activation=False)
  inputs = encoder_inputs()
  outputs = peer([inputs["input_ids"], inputs["input_mask"],
                  inputs["segment_ids"]])
  return keras.Model(inputs, {"sequence_output": outputs["sequence_output"]},
                     name=PEER)


def build_model(model, variant, seed=0, peer_config="mobilebert"):
  """The Keras encoder to time (random weights, randomized norms)."""
  import tf_keras as keras
  from tfmodels.encoders import build_encoder
  config = model_config(model, variant, peer_config)
  keras.utils.set_random_seed(seed)
  encoder = peer_encoder(config) if model == PEER else build_encoder(config)
  _randomize_norms(encoder, seed)
  return encoder


def _folds(model, variant, options):
  """Whether our export folds this model's NoNorms (never the peer's)."""
  return (options.fold_nonorm and model != PEER
          and VARIANTS[variant][0] == "no_norm")


def _key(cell, options):
  """What a cached file depends on (calibration: int8 modes only)."""
  facts = [model_config(cell.model, cell.variant, options.peer_config)
           .to_dict(), cell.model, cell.mode, options.max_seq_length,
           options.num_calibration_samples if calibrated(cell.mode)
           else None]
  if _folds(cell.model, cell.variant, options):
    facts.append("nonorm_folded")
  text = json.dumps(facts, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def calibration_features(path, vocab_file, seq_length, num_samples,
                         vocab_size=None):
  """Our feature dict of `num_samples` real sentences: half long, half
  short (so the mask has padding, as an app's inputs do). The sentences
  pass through a scratch file of this process's own, never one in
  --work_dir (a user's file of the same name stays as it was)."""
  from converters import representative
  from tfmodels.data.text_io import read_lines
  from tfmodels.staging import scratch_directory
  from tfmodels.tokenization import WordPieceTokenizer
  tokenizer = WordPieceTokenizer(vocab_file)
  if vocab_size is not None and len(tokenizer) > vocab_size:
    raise BenchmarkError(f"--vocab_file {vocab_file}: {len(tokenizer)} "
                         f"tokens, more than a model's vocab_size "
                         f"{vocab_size}")
  try:
    lines = [l.strip() for l in read_lines(path) if l.strip()]
  except (OSError, ValueError) as e:
    raise BenchmarkError(f"--calibration_data {path}: {e}") from None
  long_lines = [l for l in lines if len(l.split()) > 30]
  short_lines = [l for l in lines if 4 < len(l.split()) < 20]
  half = (num_samples + 1) // 2
  chosen = long_lines[:half] + short_lines[:num_samples - half]
  if len(chosen) < num_samples:
    chosen = lines[:num_samples]
  if not chosen:
    raise BenchmarkError(f"--calibration_data {path}: no sentences")
  with scratch_directory(CALIBRATION_PREFIX) as scratch:
    text = os.path.join(scratch, "calibration.txt")
    with open(text, "w") as f:
      f.write("\n".join(chosen) + "\n")
    return representative.read_features(text, tokenizer, seq_length)


def convert_cells(cells, work_dir, options):
  """Converts what the cache lacks; returns {stem: (path, facts)}."""
  from converters import conversion, representative, runtime, tflite_file
  seq_length = options.max_seq_length
  num_samples = options.num_calibration_samples
  # Made by the first file written into it (write_file), so a run that
  # fails before converting anything leaves no empty models/.
  models_dir = os.path.join(work_dir, "models")
  features = None
  done = {}
  by_model = {}
  for cell in cells:
    by_model.setdefault((cell.model, cell.variant), []).append(cell)
  for (model, variant), group in by_model.items():
    todo = []
    for cell in group:
      path = os.path.join(models_dir, cell.stem + ".tflite")
      facts_path = os.path.join(models_dir, cell.stem + ".json")
      key = _key(cell, options)
      try:
        with open(facts_path) as f:
          facts = json.load(f)
        if facts.get("key") == key and os.path.exists(path):
          done[cell.stem] = (path, facts)
          continue
      except (OSError, ValueError):
        pass
      todo.append((cell, path, facts_path, key))
    if not todo:
      continue
    if features is None and any(calibrated(c.mode) for c, *_ in todo):
      features = calibration_features(
          options.calibration_data, options.vocab_file, seq_length,
          num_samples,
          min(model_config(c.model, c.variant, options.peer_config)
              .vocab_size for c in cells))
    _progress(f"[{model} {variant}] building")
    encoder = build_model(model, variant, peer_config=options.peer_config)
    # convert_tflite's own chain: NoNorms folded (ours), the [1, L]
    # export, the int8 recipe (the peer gets the converter's standard
    # output, as anyone converting it would), contract tensor names (the
    # converter's "serving_default_ids:0" breaks benchmark_model's
    # name,low,high:... value-range flags).
    result = conversion.convert_model(
        encoder, "encoder", seq_length, [cell.mode for cell, *_ in todo],
        features is not None and representative.calibration_dataset(
            features, num_samples),
        config=model_config(model, variant, options.peer_config),
        fold_nonorm=_folds(model, variant, options),
        int8_recipe="standard" if model == PEER else "xnnpack",
        dynamic_length=False,  # Table 7's figures: inputs [1, L], as timed
        log=lambda line: _progress(f"[{model} {variant}] {line}"))
    for cell, path, facts_path, key in todo:
      data, recipe = result.files[cell.mode]
      facts = {"key": key, "size_mb": len(data) / 1e6,
               "ops": tflite_file.op_histogram(data),
               "float_ops": tflite_file.float_op_histogram(data),
               "xnnpack": runtime.xnnpack_coverage(data), "recipe": recipe,
               "nonorm_folding": result.nonorm_folding}
      write_file(path, data)
      write_file(facts_path, json.dumps(facts, indent=1))
      done[cell.stem] = (path, facts)
  return done


def time_files(paths, threads, work_dir, options, log=_progress):
  """android_bench runs on the host (and the phone with --adb): a list of
  (target name, run dict)."""
  from android_bench.runner import HostTarget, Settings, run_matrix
  settings = Settings(threads=tuple(threads), repeats=options.repeats,
                      warmup_runs=options.warmup_runs,
                      num_runs=options.num_runs, min_secs=options.min_secs,
                      cpu_mask=options.cpu_mask if options.adb else None)
  results_dir = os.path.join(work_dir, "runs")
  targets = [HostTarget(dataclasses.replace(settings, cpu_mask=None))]
  if options.adb:
    from android_bench.adb import Adb, AdbError, choose_device
    from android_bench.runner import AdbTarget
    try:
      adb = Adb(serial=options.serial)
      adb.serial = choose_device(adb, options.serial)
      targets.append(AdbTarget(adb, options.benchmark_binary, settings))
    except AdbError as e:
      raise BenchmarkError(f"--adb: {e}") from None
  runs = []
  for target in targets:
    run, _ = run_matrix(target, paths, target.settings, results_dir,
                        argv=sys.argv, name=f"experiments.bench.latency_benchmark "
                        f"({target.name})", log=log)
    runs.append((target.name, run))
  return runs


def rows_of(cells, converted, runs):
  """benchmark.json's rows: one per cell x threads x target."""
  from android_bench import report
  by_stem = {c.stem: c for c in cells}
  rows = []
  for target, run in runs:
    for r in report.summarize(run):
      stem = os.path.splitext(r["model"])[0]
      cell = by_stem[stem]
      facts = converted[stem][1]
      xnn = facts["xnnpack"]
      rows.append({
          "model": cell.model, "variant": cell.variant, "mode": cell.mode,
          "threads": r["threads"], "target": target,
          "median_ms": r.get("latency_ms"), "p5_ms": r.get("low_ms"),
          "p95_ms": r.get("high_ms"), "min_ms": r.get("min_ms"),
          "runs": r.get("runs"), "repeats": r["ok"],
          "errors": r["errors"], "size_mb": round(facts["size_mb"], 3),
          "xnnpack_nodes": f"{xnn['delegated_nodes']}/{xnn['total_nodes']}",
          "xnnpack_partitions": xnn["partitions"],
          "float_ops": sum(facts["float_ops"].values()),
          "recipe": facts.get("recipe") or None,
          "nonorm_folding": facts.get("nonorm_folding")})
  return rows


def _cells(options):
  unknown = [v for v in options.variants if v not in VARIANTS]
  if unknown or not options.variants:
    raise BenchmarkError(f"--variants {','.join(options.variants)}: use "
                         f"{', '.join(VARIANTS)}")
  unknown = [m for m in options.modes if m not in timed_modes()]
  if unknown or not options.modes:
    raise BenchmarkError(f"--modes {','.join(options.modes)}: use "
                         f"{', '.join(timed_modes())}")
  from tfmodels.configs import shipped_config_names
  known = set(shipped_config_names()) | {PEER}
  unknown = [m for m in options.models if m not in known]
  if unknown or not options.models:
    raise BenchmarkError(f"--models {','.join(options.models)}: unknown "
                         f"{unknown}; use config names from tfmodels/configs "
                         f"or {PEER}")
  cells = []
  for model in options.models:
    for variant in options.variants:
      for mode in options.modes:
        if model == PEER and mode == "int8_standard":
          continue  # the peer's int8 is the standard one already
        if any(fnmatch.fnmatchcase(f"{model}/{variant}/{mode}", pattern)
               for pattern in options.cells):
          cells.append(Cell(model, variant, mode))
  if not cells:
    raise BenchmarkError(f"--cells {','.join(options.cells)}: no model/"
                         "variant/mode left to run")
  return cells


def _timing_order(cell, options):
  """Within a repeat, cells are timed by mode, then variant, then model: the
  cells the checks compare (ours vs the peer, the four variants of a mode)
  run seconds to a minute apart instead of a whole sweep apart, because this
  host's speed drifts by a few % over minutes."""
  return (options.modes.index(cell.mode),
          options.variants.index(cell.variant),
          options.models.index(cell.model))


def _threads(options):
  try:
    threads = [int(t) for t in options.threads]
  except ValueError:
    raise BenchmarkError(f"--threads {','.join(options.threads)}: give "
                         "integers") from None
  if not threads or min(threads) < 1:
    raise BenchmarkError("--threads: give thread counts >= 1")
  return threads


def _check_length(cells, options):
  """--max_seq_length within every timed model's position table (its
  max_position_embeddings: 512 for BERT and MobileBERT); at least 3, [CLS]
  a piece [SEP]. A longer one failed only in the export, seconds to
  minutes in."""
  length = options.max_seq_length
  if length < 3:
    raise BenchmarkError(f"--max_seq_length {length}: at least 3 ([CLS], "
                         "a word piece, [SEP])")
  from tfmodels.configs import ConfigError
  try:  # ours are shipped names (`_cells`); the peer's sizes may not load
    bounds = {c.model: model_config(c.model, c.variant, options.peer_config)
              .max_position_embeddings for c in cells}
  except ConfigError as e:
    raise BenchmarkError(f"--peer_config {e}") from None
  model = min(bounds, key=bounds.get)  # the first of the shortest
  if length > bounds[model]:
    whose = (f"{model} ({options.peer_config}'s sizes)" if model == PEER
             else model)
    raise BenchmarkError(f"--max_seq_length {length}: at most "
                         f"{bounds[model]}, the max_position_embeddings of "
                         f"{whose}")


def check_outputs(options):
  """OutputError / BenchmarkError (one line) before any work unless the
  outputs can take the run: no symbolic link as --output_dir or
  --work_dir, and in --output_dir each of OUTPUTS new, or with
  --overwrite a file to replace (its own name; never a directory or a
  link, which this command did not write). Missing flags are
  `skeleton.held_outputs`' to refuse."""
  from tfmodels.staging import refuse_link
  for flag, path in (("--output_dir", options.output_dir),
                     ("--work_dir", options.work_dir)):
    if path:
      refuse_link(os.path.normpath(path), flag)
  if not options.output_dir or not os.path.isdir(options.output_dir):
    return
  for name in OUTPUTS:
    path = os.path.join(options.output_dir, name)
    if os.path.islink(path) or (os.path.exists(path) and
                                not os.path.isfile(path)):
      what = ("a symbolic link" if os.path.islink(path) else
              "a directory" if os.path.isdir(path) else "not a file")
      raise BenchmarkError(
          f"--output_dir {options.output_dir}: {name} is {what}, which "
          "this command did not write; --overwrite replaces only its own "
          "files (move it away or choose another --output_dir)")
    if os.path.exists(path) and not options.overwrite:
      raise BenchmarkError(f"{path} exists (pass --overwrite)")


def check_flags(options):
  """Every flag of `options`, before any work: (cells, threads), or
  BenchmarkError (one line naming the flag). Float flags that are not
  finite are `main`'s to refuse first (nonfinite_float_flag)."""
  cells = _cells(options)
  threads = _threads(options)
  _check_length(cells, options)
  if options.num_runs < 1 or options.repeats < 1:
    raise BenchmarkError("--num_runs and --repeats must be >= 1")
  if options.warmup_runs < 0:
    raise BenchmarkError(f"--warmup_runs {options.warmup_runs}: give 0 or "
                         "more")
  if not 0 <= options.min_secs < float("inf"):
    raise BenchmarkError(f"--min_secs {options.min_secs:g}: give seconds "
                         ">= 0")
  if options.adb and not (options.benchmark_binary and
                          os.path.isfile(options.benchmark_binary)):
    raise BenchmarkError("--adb needs --benchmark_binary (LiteRT's "
                         "benchmark_model for the phone)")
  if options.cpu_mask and options.cpu_mask != "big":
    from android_bench.device_info import parse_mask
    try:
      parse_mask(options.cpu_mask)
    except ValueError:
      raise BenchmarkError(f"--cpu_mask {options.cpu_mask}: give a hex "
                           "mask like f0, or big") from None
  if any(calibrated(c.mode) for c in cells):
    if options.num_calibration_samples < 1:
      raise BenchmarkError(f"--num_calibration_samples "
                           f"{options.num_calibration_samples}: give 1 or "
                           "more")
    for flag in ("calibration_data", "vocab_file"):
      if not os.path.isfile(getattr(options, flag)):
        raise BenchmarkError(f"--{flag} {getattr(options, flag)}: no such "
                             "file")
  check_outputs(options)
  return cells, threads


WORK_PREFIX = "latency-benchmark-"
CALIBRATION_PREFIX = "latency-calibration-"


def _own_work_dir():
  """A temporary cache named after this process; those of benchmarks that
  were killed (their pid gone) are removed first."""
  return temporary_directory(WORK_PREFIX)


def run_benchmark(out, cells, threads, options):
  """Converts, times and stages the outputs; returns the rows."""
  out.refuse_existing(OUTPUTS)
  work_dir = options.work_dir
  owned = None
  if work_dir is None:
    owned = work_dir = _own_work_dir()
  try:
    _progress("loading TensorFlow")
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    converted = convert_cells(cells, work_dir, options)
    paths = [converted[c.stem][0] for c in sorted(
        cells, key=lambda cell: _timing_order(cell, options))]
    runs = time_files(paths, threads, work_dir, options)
    rows = rows_of(cells, converted, runs)
  finally:
    if owned:
      import shutil
      shutil.rmtree(owned, ignore_errors=True)
  host = runs[0][1]["device"]
  notes = [f"- host: {host.get('model') or '?'}, {host.get('cores', '?')} "
           f"cores; LiteRT {host.get('ai_edge_litert') or ''} (ai_edge_litert)"
           " with XNNPACK via android_bench's host runner",
           f"- int8 on this host: {int8_expectation(host.get('int8_isa'))} "
           "(the check int8 <= float32 / 2 needs int8 dot products)",
           f"- peer_mobilebert: Model Garden MobileBERTEncoder "
           f"(tf-models-official) with {options.peer_config}'s sizes",
           f"- each cell: {options.warmup_runs} warm-up + >= "
           f"{options.num_runs} runs (>= {options.min_secs:g} s), "
           f"{options.repeats} repeats "
           "interleaved; median of the repeats' medians",
           "- random weights, norms drawn around 1 / 0; int8 calibrated on "
           f"{options.num_calibration_samples} sentences of "
           f"{options.calibration_data}",
           "- int8: ours = converters/fast_int8.py recipe; int8_standard and "
           "the peer = the converter's standard output",
           "- ours: NoNorms folded into their neighbours before export "
           "(converters/nonorm_folding.py), as convert_tflite does"
           if options.fold_nonorm else "- ours: NoNorms not folded "
           "(--nofold_nonorm)"]
  out.add("benchmark.json", json.dumps(rows, indent=1) + "\n")
  out.add("benchmark.md", markdown(rows, options.command, notes))
  # Written straight into the staging directory; committed with the rest.
  plot(rows, os.path.join(out.staging, "benchmark.png"),
       options.max_seq_length)
  return rows


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir and
  --work_dir (the experiments' skeleton: experiments/common/skeleton.py)."""
  from absl import logging
  logging.set_verbosity(logging.WARNING)
  options = from_flags(BenchmarkOptions, FLAGS,
                       command=skeleton.command_line(
                           "experiments.bench.latency_benchmark"))
  skeleton.check_command_line(argv, options)
  with skeleton.one_line_errors(BenchmarkError):
    nonfinite = nonfinite_float_flag(FLAGS)
    if nonfinite:
      raise BenchmarkError(nonfinite)
    cells, threads = check_flags(options)
  work = options.work_dir
  # Whatever ends the run, no folder it made stays empty: --output_dir,
  # --work_dir, their parents, the cache's models/ and runs/.
  with skeleton.no_empty_dirs_left(
      options.output_dir, work, work and os.path.join(work, "models"),
      work and os.path.join(work, "runs")):
    skeleton.run_command(
        argv, options, lambda options, out, results: _run_and_report(
            cells, threads, options, results),
        errors=(ValueError, OSError),
        interrupted="nothing was written")


def _run_and_report(cells, threads, options, results):
  """The run alone in --work_dir too; what `main` prints and how it ends."""
  with _sole_work_dir(options):
    rows = run_benchmark(results, cells, threads, options)
  written = results.commit()
  failed = [r for r in rows if r["median_ms"] is None]
  print(f"wrote {', '.join(written)}")
  if failed:
    sys.exit(f"error: {len(failed)} cells have no timing (see "
             f"{os.path.join(options.output_dir, 'benchmark.md')})")


@contextlib.contextmanager
def _sole_work_dir(options):
  """--work_dir, when given and not --output_dir itself, held by this
  process alone (two benchmarks filling one cache would clash)."""
  work_dir = options.work_dir
  if not work_dir or os.path.abspath(work_dir) == os.path.abspath(
      options.output_dir):
    yield
    return
  from experiments.common.pipeline import check_output_dir, sole_writer
  check_output_dir(work_dir, "--work_dir")
  with sole_writer(work_dir, "--work_dir"):
    yield


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
