"""Which carve of a teacher meets a budget: candidate splits (attention
heads kept per layer, FFN width, word-table rank), each measured on the
target as an int8 file of its shape, scored by what it keeps of the
teacher, and the best-scored candidate inside the budget.

    python -m experiments.ship.split_search --teacher_dir RUN --data_dir DATA \
        --target_latency_ms 20 [--threads 1] [--max_seq_length 384] \
        [--substitute layernorm=nonorm,gelu=relu] [--output split.json] \
        [--target adb --benchmark_binary benchmark_model [--serial S]]
    python -m experiments.ship.split_search ... --target arm64 \
        --target_latency_share 0.5

prints the table (candidate, encoder parameters, int8 MB, measured ms,
score), the teacher's own time and the `compress` flags of the chosen split;
a budget no candidate meets is refused in one line naming the fastest
candidate's time.

`--target arm64` budgets on the phone's kernels without a phone: each
candidate's int8 file (and the teacher's) also runs on emulated arm64 (a
Cortex-A76 under qemu-user, `make arm64-root`) with XNNPACK's ARM kernels,
and its cost is the arm64 instructions of one inference at the length and
threads it ships with; the budget is a share of the teacher's count
(`--target_latency_share`). Emulation gives no milliseconds: the table shows
host ms beside the instructions, and the choice is made on instructions.

    rows = [Row(c, params, int8_mb, latency_ms, score) for c in ...]
    best = choose(rows, Budget(latency_ms=20.0), teacher_params)

Latency depends on a model's shape, not on its trained weights, so a
candidate is timed as a randomly initialised model of the config it will
ship as (carved, then `--substitute`d as compress does it) with the
teacher's head, at the app's length (`--max_seq_length`), converted as
`convert_tflite` converts it (the fast int8 recipe, random calibration
tokens) and timed with android_bench's runner (`measure`) on this host or
on a phone through adb (`Device`). The teacher as it is is timed in the same
run, for comparison. Each measurement is cached by shape, length, threads
and target (for a phone: its serial, model and benchmark_model build), so a
second search does not re-time and a host time never stands for a phone's.

The cache (`--work_dir`; default this user's 0700 `split_search-UID` under
the temporary directory) keeps only those small JSON records: a
candidate's int8 file is made in a scratch directory of the run and
removed once timed (a killed run's is removed by the next search). Each
search prunes it (`prune_cache`) to records used in the last 30 days
(`CACHE_DAYS`) and at most 10 MB in all (`CACHE_MB`), the least recently
used going first.
"""

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import time

from absl import app, flags
import numpy as np

from experiments.ship.split_budget import (BUDGET_FLAGS, Budget,
                                          BudgetOptions, budget_of,
                                          check_target, millions)
from tfmodels.command_options import (define_flags, from_flags, option,
                                      run_command)
from tfmodels.compression.carve import CarveSpec, carved_config
from tfmodels.flag_checks import refuse_nonfinite_floats


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A split: heads and FFN neurons kept per layer, and the word table's
  rank (None: kept whole)."""
  heads: int
  intermediate_size: int
  table_rank: int | None = None

  def spec(self):
    ranks = {"word_embeddings": self.table_rank} if self.table_rank else {}
    return CarveSpec(self.heads, self.intermediate_size, ranks)

  def label(self):
    table = f", table rank {self.table_rank}" if self.table_rank else ""
    return f"{self.heads} heads, FFN {self.intermediate_size}{table}"


def _widths(intermediate_size):
  """The teacher's FFN width and fractions of it down to a sixth, in
  multiples of 32 (XNNPACK's kernels are fastest on such widths)."""
  widths = {max(32, round(intermediate_size * f / 32) * 32)
            for f in (1, 1 / 2, 1 / 3, 1 / 4, 1 / 6)}
  return sorted({min(w, intermediate_size) for w in widths}, reverse=True)


def _heads(num_heads):
  return sorted({max(1, round(num_heads * f)) for f in (1, 3 / 4, 1 / 2)},
                reverse=True)


def candidates(config, heads=None, widths=None, ranks=(None, 128)):
  """Every split of `config` (a teacher's ModelConfig) on the grid: heads,
  FFN widths and table ranks (defaults: fractions of the teacher's; a rank
  not below the table's width is left out: it would not shrink it)."""
  width = config.embedding_size or config.hidden_size
  ranks = [r for r in ranks if r is None or 0 < r < width]
  return [Candidate(h, w, r) for h, w, r in itertools.product(
      heads or _heads(config.num_attention_heads),
      widths or _widths(config.intermediate_size), ranks)]


def carved(config, candidate):
  """The ModelConfig a candidate carves out of the teacher's `config`."""
  return carved_config(config, candidate.spec())


def shipped(config, candidate, substitutions=None):
  """The ModelConfig a candidate ships as: carved, then with compress's
  `--substitute` ops (`substitution.parse_spec`; None or {}: none), which
  change its time (no LayerNorm means, relu for gelu)."""
  from tfmodels.compression.substitution import substituted_config
  config = carved(config, candidate)
  return substituted_config(config, substitutions) if substitutions \
      else config


@dataclasses.dataclass(frozen=True)
class Row:
  """A candidate with what was measured of it and what it keeps."""
  candidate: Candidate
  params: int  # encoder parameters
  int8_mb: float  # the int8 file's size
  latency_ms: float  # median on the target (--target arm64: the host)
  score: float  # what it keeps of the teacher (higher is better)
  instructions: float | None = None  # per inference on emulated arm64


class BudgetError(ValueError):
  """No candidate meets the budget; the message names the fastest."""


def choose(rows, budget, teacher_params):
  """The best-scored row inside `budget` (ties: the faster); BudgetError
  (one line naming the fastest candidate's measured time) if none is."""
  if not rows:
    raise BudgetError("no candidate splits to choose from")
  inside = [r for r in rows if budget.admits(r, teacher_params)]
  arm64 = budget.teacher_instructions is not None
  cost = (lambda r: r.instructions) if arm64 else (lambda r: r.latency_ms)
  if not inside:
    fastest = min(rows, key=cost)
    measured = (f"{millions(fastest.instructions)} instructions per "
                "inference on emulated arm64" if arm64
                else f"{fastest.latency_ms:.2f} ms")
    raise BudgetError(
        f"no candidate split meets {budget.describe()}: the fastest, "
        f"{fastest.candidate.label()}, measured {measured} "
        f"({fastest.int8_mb:.2f} MB int8, {fastest.params:,} encoder "
        "parameters)")
  return max(inside, key=lambda r: (r.score, -cost(r)))


def retained(statistics, table_singular_values, candidate):
  """What a candidate keeps of the teacher before any training, in (0, 1]:
  the share of each layer's head importance its kept heads hold and of its
  neuron importance its kept neurons hold (`compression.importance`
  scores; the carve keeps the top ones), averaged over layers, times the
  share of the word table's energy (squared singular values) its rank
  keeps (Eckart-Young: what the best rank-r table holds)."""
  def kept(scores, k):
    top = np.sort(np.asarray(scores, np.float64))[::-1]
    return float(top[:k].sum() / top.sum()) if top.sum() > 0 else 1.0

  heads = np.mean([kept(s.head_scores, candidate.heads) for s in statistics])
  neurons = np.mean([kept(s.neuron_scores, candidate.intermediate_size)
                     for s in statistics])
  table = 1.0
  if candidate.table_rank:
    energy = np.asarray(table_singular_values, np.float64) ** 2
    table = float(energy[:candidate.table_rank].sum() / energy.sum())
  return float(heads * neurons * table)


@dataclasses.dataclass(frozen=True)
class Device:
  """Where the candidates are timed: this host (android_bench's
  ai_edge_litert runner; the default), or a phone or emulator through adb
  with LiteRT's benchmark_model (`attach` fills it); or where their arm64
  instructions are counted (`arm64_device`: qemu-user, no times)."""
  target: str = "host"  # or "adb", "arm64"
  serial: str | None = None
  model: str | None = None  # the phone's ro.product.model; arm64: the CPU
  benchmark_binary: str | None = None
  binary_sha256: str | None = None
  adb: str = "adb"
  adb_server_port: int | None = None
  arm64_root: str | None = None

  def key(self):
    """What a time depends on besides the shape (`shape_key`'s target): a
    host time never stands for a phone's, nor one phone's (or one
    benchmark_model build's) for another's, nor a time for an instruction
    count (the emulated CPU and the root's LiteRT are part of its key)."""
    if self.target == "host":
      return "host"
    if self.target == "arm64":
      from android_bench.arm64 import read_stamp
      stamp = read_stamp(self.arm64_root) or {}
      return {"target": "arm64", "cpu": stamp.get("cpu"),
              "packages": stamp.get("packages")}
    return {"target": "adb", "serial": self.serial, "model": self.model,
            "benchmark_model_sha256": self.binary_sha256}

  @property
  def unit(self):
    """What a measurement is: median ms, or instructions per inference."""
    return "instructions" if self.target == "arm64" else "latency_ms"

  def describe(self):
    if self.target == "arm64":
      return f"emulated arm64 ({self.model})"
    return "the host" if self.target == "host" else \
        f"{self.model or 'the device'} ({self.serial})"

  @contextlib.contextmanager
  def runner(self, settings):
    """android_bench's runner target for `settings`, built as `python -m
    android_bench run --target ...` builds it; a phone is locked (one run
    per device) while the block runs."""
    from android_bench.adb import Adb
    from android_bench.runner import AdbTarget, HostTarget, device_lock
    if self.target == "host":
      yield HostTarget(settings)
      return
    with device_lock(self.serial):
      yield AdbTarget(Adb(self.adb, self.serial, self.adb_server_port),
                      self.benchmark_binary, settings)


def arm64_device(root=None):
  """The Device counting instructions on emulated arm64; ValueError (one
  line saying how to make the root) when it cannot."""
  from android_bench.arm64 import CPU, Arm64Error, counting_root, read_stamp
  try:
    path = counting_root(root)
  except Arm64Error as e:
    raise ValueError(f"--target arm64: {e}") from None
  cpu = (read_stamp(path) or {}).get("cpu", CPU)
  return Device("arm64", model=f"qemu-aarch64 -cpu {cpu}", arm64_root=path)


def attach(benchmark_binary, serial=None, adb="adb", adb_server_port=None):
  """The Device of the attached phone (`--serial`, or the only one) that
  runs `benchmark_binary`. ValueError (no binary) or android_bench's
  AdbError (no device, adb missing), each one line, before any work."""
  from android_bench.adb import Adb, choose_device
  from android_bench.device_info import adb_device_facts
  from android_bench.model_facts import file_digests
  if not benchmark_binary:
    raise ValueError("--target adb needs --benchmark_binary (LiteRT's "
                     "benchmark_model for the device's ABI)")
  if not os.path.isfile(benchmark_binary):
    raise ValueError(f"--benchmark_binary {benchmark_binary}: no such file")
  client = Adb(adb, None, adb_server_port)
  client.serial = choose_device(client, serial)
  return Device("adb", client.serial, adb_device_facts(client).get("model"),
                os.path.abspath(benchmark_binary),
                file_digests(benchmark_binary)[0], adb, adb_server_port)


# How a candidate's file is made (`_convert`); a new way re-times every
# shape instead of reusing times of files made the old way.
RECIPE = 3  # 2: NoNorms with fitted-like scales (_spread_no_norms);
# 3: dynamic-length files (convert_tflite's default), timed at L


def _shape(config, head, seq_length):
  """What an int8 file depends on (the name is not part of it)."""
  return {"config": dataclasses.asdict(config.replace(name="x")),
          "head": dataclasses.asdict(head), "seq_length": seq_length,
          "recipe": RECIPE}


def _digest(facts):
  return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()
                        ).hexdigest()[:20]


def shape_key(config, head, seq_length, threads, target):
  """The cache key of a measurement: what the time depends on (`target`:
  `Device.key()`)."""
  return _digest(dict(_shape(config, head, seq_length), threads=threads,
                      target=target))


def _random_features(vocab_size, seq_length, count=8, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, (count, seq_length)).astype(np.int32)
  ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
  return {"input_ids": ids,
          "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids)}


def _spread_no_norms(model, seed=0):
  """Gives every NoNorm the per-channel scales and shifts a fitted one has
  (1 / sigma of the LayerNorm it replaced: 5-300x apart; -mu / sigma), not
  its initial ones (ones, zeros): the
  export folds NoNorms whose scales stay close and keeps and equalizes the
  others (converters/nonorm_folding.py), so a file timed with ones would
  miss a carved student's kept norms (10% of its int8 time at L = 384)."""
  from tfmodels.layers.normalization import NoNorm
  rng = np.random.default_rng(seed)
  for layer in model.submodules:
    if isinstance(layer, NoNorm):
      width = layer.gamma.shape[0]
      layer.gamma.assign(np.exp(rng.uniform(-3, 3, width)).astype(np.float32))
      layer.beta.assign(rng.normal(0, 1, width).astype(np.float32))


def _convert(config, head, seq_length):
  """(int8 file bytes): a randomly initialised model of `config`'s shape
  with `head`, converted as convert_tflite converts it."""
  import tf_keras as keras
  from converters import conversion, representative
  from tfmodels.checkpoints.model_dir import build_model
  keras.utils.set_random_seed(0)
  model = build_model(config, head)
  _spread_no_norms(model)
  features = _random_features(config.vocab_size, seq_length)
  result = conversion.convert_model(
      model, head.kind, seq_length, ["int8"],
      representative.calibration_dataset(features, len(features["input_ids"])),
      config=config)
  return result.files["int8"][0]


def _convert_to(path, config, head, seq_length):
  """Writes the int8 file of `config`'s shape to `path` (a worker's job)."""
  from tfmodels.staging import write_file
  write_file(path, _convert(config, head, seq_length))


def _convert_all(unconverted, head, seq_length, log):
  """Converts {path: config} two at a time: each conversion is mostly one
  core's work (export, MLIR, calibration), and a search converts dozens."""
  if len(unconverted) < 2:
    for path, config in unconverted.items():
      log(f"converting {config.name}")
      _convert_to(path, config, head, seq_length)
    return
  import concurrent.futures
  import multiprocessing
  workers = min(2, os.cpu_count() or 1)
  log(f"converting {len(unconverted)} candidate shapes, {workers} at a time")
  with concurrent.futures.ProcessPoolExecutor(
      workers, mp_context=multiprocessing.get_context("spawn")) as pool:
    jobs = {pool.submit(_convert_to, path, config, head, seq_length):
            config.name for path, config in unconverted.items()}
    for done, job in enumerate(concurrent.futures.as_completed(jobs), 1):
      job.result()
      log(f"converted {jobs[job]} ({done}/{len(jobs)})")


# The cache's bound: `prune_cache` keeps the records used in the last
# CACHE_DAYS days, at most CACHE_MB (1e6 bytes) of them, the most recently
# used; stated in `--work_dir`'s help and the module docstring.
CACHE_DAYS = 30
CACHE_MB = 10

_RECORD = re.compile(r"[0-9a-f]{20}\.json")  # a measurement: its shape_key
_SCRATCH = re.compile(r"timing-(\d+)-[a-z0-9_]+")  # a run's, with its pid
# What earlier versions kept in the cache: int8 files by shape, and
# android_bench's run files under runs/.
_OLD_FILE = re.compile(r"[0-9a-f]{20}\.tflite")
_OLD_RUN = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}\.json")


def _remove(path):
  """Removes a file or directory; whether this call removed it (another
  search may have first; a cache that cannot be pruned is no reason to
  fail a search)."""
  try:
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path)
    else:
      os.unlink(path)
  except OSError:
    return False
  return True


def prune_cache(cache_dir, max_days=CACHE_DAYS, max_mb=CACHE_MB, now=None):
  """Bounds `measure`'s cache; the names it removed. Records (one small
  JSON file per measurement) not used for `max_days` days go, then the
  least recently used until the rest take at most `max_mb` MB; so do the
  scratch directories of runs no longer running (or older than
  `max_days`), staging a killed writer left, and the int8 and run files
  earlier versions kept. Anything else in `cache_dir` is left alone."""
  from tfmodels.staging import clear_stale_staging, process_running
  now = time.time() if now is None else now
  oldest = now - max_days * 86400
  try:
    names = os.listdir(cache_dir)
  except OSError:  # not made yet
    return []
  clear_stale_staging(cache_dir)
  removed, records = [], []
  for name in names:
    path = os.path.join(cache_dir, name)
    try:
      info = os.lstat(path)
    except FileNotFoundError:
      continue
    scratch = _SCRATCH.fullmatch(name)
    if scratch:
      if (not process_running(int(scratch.group(1)))
          or info.st_mtime < oldest) and _remove(path):
        removed.append(name)
    elif _OLD_FILE.fullmatch(name):
      if _remove(path):
        removed.append(name)
    elif name == "runs" and os.path.isdir(path) and not os.path.islink(path):
      clear_stale_staging(path)
      runs = []
      with contextlib.suppress(OSError):
        runs = os.listdir(path)
      for run in runs:
        if _OLD_RUN.fullmatch(run) and _remove(os.path.join(path, run)):
          removed.append(os.path.join(name, run))
      with contextlib.suppress(OSError):  # something else is in it
        os.rmdir(path)
        removed.append(name)
    elif _RECORD.fullmatch(name) and os.path.isfile(path):
      records.append((info.st_mtime, info.st_size, name))
  records.sort()
  total = sum(size for _, size, _ in records)
  for mtime, size, name in records:
    if mtime >= oldest and total <= max_mb * 1e6:
      break
    if _remove(os.path.join(cache_dir, name)):
      removed.append(name)
    total -= size
  return removed


def measure(configs, head, seq_length, threads, cache_dir, settings=None,
            log=print, device=Device(), also=None):
  """{config name: (median ms, int8 MB)} of each config in `configs`
  timed on `device` (default: the host) with `threads` threads, all in one
  android_bench run, from `cache_dir` where it was measured before.
  Configs of one shape are converted and timed once. `settings`:
  android_bench Settings overrides (runs, warm-ups, min_secs). With
  `also` (another Device: arm64), ({...}, {config name: (its cost, int8
  MB)}) from the same files.

  `cache_dir` keeps only the records of the times: the int8 files are
  made in a scratch directory of this run, removed when it ends, and the
  cache is pruned to its bound (`prune_cache`) before and after."""
  devices = (device,) + ((also,) if also else ())
  prune_cache(cache_dir)
  try:
    measured = _measure_records(configs, head, seq_length, threads,
                                cache_dir, settings, log, devices)
  finally:
    prune_cache(cache_dir)
  return tuple(measured) if also else measured[0]


def _cached(record, unit):
  """(cost, int8 MB) of a cached record, or None."""
  try:
    with open(record) as f:
      cached = json.load(f)
    found = (cached[unit], cached["int8_mb"])
  except (OSError, ValueError, KeyError):
    return None
  with contextlib.suppress(OSError):  # used now: pruned last
    os.utime(record)
  return found


def _measure_records(configs, head, seq_length, threads, cache_dir,
                      settings, log, devices):
  """`measure` within its pruning: cached records, then the rest, each
  shape converted once for every device that lacks it."""
  measured = [{} for _ in devices]
  todo = [{} for _ in devices]  # {file name: (record, config names)}
  configs_of = {}
  for config in configs:
    # Named by shape alone: one conversion serves every thread count.
    name = _digest(_shape(config, head, seq_length)) + ".tflite"
    for d, device in enumerate(devices):
      key = shape_key(config, head, seq_length, threads, device.key())
      record = os.path.join(cache_dir, key + ".json")
      cached = _cached(record, device.unit)
      if cached:
        measured[d][config.name] = cached
        continue
      configs_of.setdefault(name, config)
      todo[d].setdefault(name, (record, []))[1].append(config.name)
  if not configs_of:
    return measured
  from tfmodels.staging import write_file
  os.makedirs(cache_dir, exist_ok=True)
  scratch = tempfile.mkdtemp(prefix=f"timing-{os.getpid()}-", dir=cache_dir)
  try:
    _convert_all({os.path.join(scratch, n): c for n, c in configs_of.items()},
                 head, seq_length, log)
    for d, device in enumerate(devices):
      if not todo[d]:
        continue
      files = [os.path.join(scratch, n) for n in sorted(todo[d])]
      if device.target == "arm64":
        costs = _count_on_arm64(files, threads, device.arm64_root, log)
      else:
        costs = _time_files(files, threads, settings, device, scratch, log)
      for name, (record, names) in sorted(todo[d].items()):
        cost, why = costs.get(name, (None, None))
        if not cost:
          raise BudgetError(f"{names[0]}: its int8 file did not run on "
                            f"{device.describe()}: {why or 'no time'}"
                            .splitlines()[0])
        facts = {device.unit: cost,
                 "int8_mb": os.path.getsize(os.path.join(scratch, name)) / 1e6,
                 # The name it was timed under (the file is not kept).
                 "config": names[0], "int8_file": name,
                 "target": device.key()}
        write_file(record, json.dumps(facts, indent=1))
        for config_name in names:
          measured[d][config_name] = (cost, facts["int8_mb"])
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  return measured


def _time_files(files, threads, settings, device, scratch, log):
  """{file name: (median ms, why not)} of one android_bench run of `files`
  on the host or the phone."""
  from android_bench import report
  from android_bench.runner import Settings, run_matrix
  run_settings = Settings(threads=(threads,), **dict(settings or {}))
  with device.runner(run_settings) as target:
    run, _ = run_matrix(target, files, run_settings,
                        os.path.join(scratch, "runs"), name="split_search",
                        binary=device.benchmark_binary, log=log)
  return {r["model"]: (r.get("latency_ms"),
                       "; ".join(r.get("errors") or []) or None)
          for r in report.summarize(run)}


def _count_on_arm64(files, threads, root, log):
  """{file name: (arm64 instructions per inference, why not)}: each file
  run on emulated arm64 at its full length with `threads` threads, one
  counted inference after a warm-up (android_bench.arm64), two qemu
  processes at a time."""
  import concurrent.futures
  from android_bench.arm64 import Arm64Error, random_feeds, run_on_arm64

  def count(path):
    try:
      return run_on_arm64(path, random_feeds(path, 1), threads,
                          instruction_runs=1, root=root
                          ).instructions_per_inference, None
    except Arm64Error as e:
      return None, str(e)

  log(f"counting the arm64 instructions of {len(files)} files")
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    counted = dict(zip(files, pool.map(count, files)))
  return {os.path.basename(path): c for path, c in counted.items()}


# --- the command -------------------------------------------------------------

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchOptions(BudgetOptions):
  """The command line, one option per flag (the budget's first); `main`
  builds it with `command_options.from_flags`."""
  teacher_dir: str = option(None, "A fine-tuned model (finetune run).",
                            required=True)
  data_dir: str = option(None, "The task's data (train examples score the "
                         "teacher's heads and neurons).", required=True)
  threads: int = option(1, "Threads the int8 files are timed with.")
  max_seq_length: int | None = option(
      0, "The length the candidates are converted and timed at: the app's "
      "(0: the teacher's task.json max_seq_length; at most its "
      "max_position_embeddings).")
  substitute: str = option("", "Time the candidates as they ship after "
                           "compress --substitute with this value (e.g. "
                           "layernorm=nonorm,gelu=relu; default: none). The "
                           "teacher is timed as it is.")
  target: str = option("host", "Where the int8 files are timed: this host, "
                       "or the phone adb reaches; arm64: timed on this host "
                       "and chosen by their instructions per inference on "
                       "emulated arm64 (make arm64-root; the budget as "
                       "--target_latency_share).",
                       choices=("host", "adb", "arm64"))
  benchmark_binary: str | None = option(
      None, "LiteRT's benchmark_model built for the phone (--target adb).")
  serial: str | None = option(None, "The phone's serial when several are "
                              "attached (--target adb).")
  adb: str = option("adb", "The adb client binary (--target adb).")
  adb_server_port: int | None = option(
      None, "adb server port (adb -P; default: $ANDROID_ADB_SERVER_PORT or "
      "5037).")
  heads: tuple = option((), "Heads per layer to try (default: 1/2, 3/4 "
                        "of the teacher's and all).")
  widths: tuple = option((), "FFN widths to try (default: all, 1/2, 1/3, "
                         "1/4 and 1/6 of the teacher's, multiples of 32).")
  ranks: tuple = option(("none", "128"), "Word-table ranks to "
                        "try (none: the whole table).")
  calibration_examples: int = option(512, "Training examples the "
                                     "importance scores are taken on.")
  batch_size: int = option(32, "Batch size of the scoring.")
  num_runs: int = option(20, "Timed runs per candidate.")
  work_dir: str | None = option(
      None, "Where the candidates' times are cached, by shape (default: "
      "this user's 0700 split_search-UID under the temporary directory). "
      "Only the small records of the times stay: each int8 file is removed "
      "once timed, and each search prunes the cache to the records used in "
      f"the last {CACHE_DAYS} days, at most {CACHE_MB} MB of them (the "
      "least recently used go first).")
  output: str | None = option(None, "Also write the table here (JSON).")
  seed: int = option(0, "Which calibration examples.")


def _budget(options):
  """The Budget of the flags, or SystemExit naming the bad flag."""
  values = {n: getattr(options, n) for n in BUDGET_FLAGS}
  try:
    check_target(options.target, values)
    return budget_of(values)
  except ValueError as e:
    sys.exit(f"error: {e}")


def _grid(options, config):
  """The candidates of the flags, or SystemExit naming the bad one."""
  def numbers(name, values, most):
    try:
      found = [int(v) for v in values]
    except ValueError:
      sys.exit(f"error: --{name} {','.join(values)}: give whole numbers")
    if any(not 0 < v <= most for v in found):
      sys.exit(f"error: --{name} {','.join(values)}: each in 1..{most}")
    return found

  ranks = [None if r == "none" else r for r in options.ranks]
  return candidates(
      config,
      numbers("heads", options.heads, config.num_attention_heads) or None,
      numbers("widths", options.widths, config.intermediate_size) or None,
      [None] * (None in ranks) + numbers(
          "ranks", [r for r in ranks if r is not None], 1 << 20))


def _scores(options, teacher, config, spec, head):
  """(LayerStatistics per layer, the word table's singular values)."""
  from tfmodels.compression import importance
  from tfmodels.data.batches import batches
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve
  tokenizer = WordPieceTokenizer(resolve(options.teacher_dir,
                                         model_flag="--teacher_dir"))
  task = make_task(spec["task"], options.data_dir, tokenizer,
                   spec["max_seq_length"])
  _, sample = importance.teacher_calibration(
      task, head, options.teacher_dir, options.calibration_examples,
      options.seed)
  statistics, _ = importance.collect(teacher, config,
                                     batches(sample, options.batch_size))
  return statistics, np.linalg.svd(_word_table(teacher), compute_uv=False)


def _word_table(model):
  """The [V, E] word table of `model` (a factored one multiplied out)."""
  found = {v.name.split(":")[0].rsplit("word_embeddings/", 1)[-1]: v.numpy()
           for v in model.variables if "word_embeddings/" in v.name}
  if "embeddings" in found:
    return found["embeddings"]
  return found["table"] @ found["projection"]


def _device(options):
  """The Device of the flags; one-line errors (no phone, no binary, no
  arm64 root)."""
  if options.target in ("host", "arm64"):
    for name in ("benchmark_binary", "serial"):
      if getattr(options, name):
        raise ValueError(f"--{name} is for --target adb")
    return Device() if options.target == "host" else arm64_device()
  port = options.adb_server_port
  if port is not None and not 0 < port < 65536:
    raise ValueError(f"--adb_server_port {port}: give a TCP port, 1..65535")
  return attach(options.benchmark_binary, options.serial, options.adb, port)


def _plan(options):
  """What the flags ask, checked before any work (SystemExit or a
  one-line ValueError naming the flag; no phone: AdbError): (budget, task
  spec, teacher config, grid, {candidate: config timed}, length, device)."""
  from tfmodels.checkpoints.model_dir import read_task_spec
  from tfmodels.compression.substitution import parse_spec
  from tfmodels.configs import load_config
  budget = _budget(options)
  if options.threads < 1:
    raise ValueError(f"--threads {options.threads}: give 1 or more")
  spec = read_task_spec(options.teacher_dir, "--teacher_dir",
                        "the search scores a fine-tuned model's heads")
  config = load_config(os.path.join(options.teacher_dir, "config.json"))
  seq_length = options.max_seq_length or spec["max_seq_length"]
  if not 0 < seq_length <= config.max_position_embeddings:
    raise ValueError(f"--max_seq_length {seq_length}: give 1.."
                     f"{config.max_position_embeddings} (the teacher's "
                     "max_position_embeddings)")
  substitutions = parse_spec(options.substitute) if options.substitute \
      else {}
  grid = _grid(options, config)
  configs = {c: shipped(config, c, substitutions).replace(
      name=f"candidate_{i}") for i, c in enumerate(grid)}
  return budget, spec, config, grid, configs, seq_length, _device(options)


def search(options):
  """Scores, times and chooses; prints the table; returns its record."""
  from tfmodels.checkpoints.model_dir import load_model_dir
  from tfmodels.staging import private_directory
  from tfmodels.summary import count
  budget, spec, config, grid, configs, seq_length, device = _plan(options)
  teacher, config, head = load_model_dir(options.teacher_dir)
  statistics, singular = _scores(options, teacher, config, spec, head)
  files = list(configs.values()) + [config.replace(name="teacher")]
  cache_dir = options.work_dir or private_directory("split_search")
  log = lambda line: print(line, flush=True)  # noqa: E731
  arm64 = device if device.target == "arm64" else None
  # --target arm64: timed on the host and counted on arm64, one file each.
  measured = measure(files, head, seq_length, options.threads, cache_dir,
                     {"num_runs": options.num_runs, "warmup_runs": 1},
                     log=log, device=Device() if arm64 else device,
                     also=arm64)
  measured, counted = measured if arm64 else (measured, None)
  rows = [Row(c, count(configs[c], 1)["params_encoder"],
              measured[configs[c].name][1], measured[configs[c].name][0],
              retained(statistics, singular, c),
              counted[configs[c].name][0] if arm64 else None) for c in grid]
  teacher_params = count(config, 1)["params_encoder"]
  teacher_ms, teacher_mb = measured["teacher"]
  teacher_instructions = counted["teacher"][0] if arm64 else None
  budget = budget.with_teacher(teacher_ms, teacher_instructions)
  best = choose(rows, budget, teacher_params)
  print(f"{'candidate':<36} {'params':>10} {'int8 MB':>8} {'ms':>8} "
        + (f"{'arm64 insns':>11} " if arm64 else "") + f"{'score':>6}")
  for r in sorted(rows, key=lambda r: (r.instructions or 0, r.latency_ms)):
    mark = "  <- chosen" if r is best else ""
    print(f"{r.candidate.label():<36} {r.params:>10,} {r.int8_mb:>8.2f} "
          f"{r.latency_ms:>8.2f} "
          + (f"{millions(r.instructions):>11} " if arm64 else "")
          + f"{r.score:>6.3f}{mark}")
  print(f"timed on {'the host' if arm64 else device.describe()} at length "
        f"{seq_length}, {options.threads} threads"
        + (f"; instructions per inference counted on {arm64.describe()}"
           if arm64 else "")
        + (f", as shipped after --substitute {options.substitute}"
           if options.substitute else "")
        + f"; the teacher as it is: {teacher_ms:.2f} ms"
        + (f", {millions(teacher_instructions)} arm64 instructions"
           if arm64 else "")
        + f", {teacher_mb:.2f} MB int8, {teacher_params:,} encoder "
        "parameters")
  flags_ = [f"--heads {best.candidate.heads}",
            f"--intermediate_size {best.candidate.intermediate_size}"]
  if best.candidate.table_rank:
    flags_.append(f"--low_rank word_embeddings={best.candidate.table_rank}")
  print(f"chosen for {budget.describe()}: {best.candidate.label()}; carve "
        f"it with: python -m tfmodels.training.compress --teacher_dir "
        f"{options.teacher_dir} --data_dir {options.data_dir} --model_dir "
        f"OUT {' '.join(flags_)}"
        + (f" --substitute {options.substitute}" if options.substitute
           else ""))
  return {"budget": dict(dataclasses.asdict(budget),
                        max_latency_ms=budget.max_latency_ms(),
                        max_arm64_instructions=budget.max_instructions()),
          "threads": options.threads,
          "max_seq_length": seq_length, "target": device.target,
          "device": None if device.target == "host" else
          {"serial": device.serial, "model": device.model},
          "substitute": options.substitute,
          "teacher_params": teacher_params,
          "teacher_latency_ms": round(teacher_ms, 4),
          "teacher_arm64_instructions": teacher_instructions,
          "teacher_int8_mb": round(teacher_mb, 4),
          "chosen": dataclasses.asdict(best.candidate),
          "compress_flags": flags_,
          "rows": [dict(dataclasses.asdict(r.candidate), params=r.params,
                        int8_mb=round(r.int8_mb, 4),
                        latency_ms=round(r.latency_ms, 4),
                        arm64_instructions=r.instructions,
                        score=round(r.score, 4), chosen=r is best)
                   for r in rows]}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  refuse_nonfinite_floats()
  options = from_flags(SearchOptions, FLAGS)
  from android_bench.adb import AdbError
  from android_bench.runner import SetupError
  from tfmodels.configs import ConfigError
  from tfmodels.staging import (OutputError, check_output, lock_until_exit,
                                write_file)
  from tfmodels.tokenization import VocabError
  try:
    if options.output:  # before the work
      check_output(options.output, "--output", True)
      lock_until_exit(options.output, "--output")
    record = search(options)
    if options.output:
      write_file(options.output, json.dumps(record, indent=1) + "\n")
  except (AdbError, BudgetError, ConfigError, SetupError, VocabError,
          OutputError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")


def define_command_flags(flag_values=flags.FLAGS):
  """The flags of `SearchOptions`, defined only when the module runs as a
  command: tests import its functions."""
  define_flags(SearchOptions, flag_values)


def run():
  run_command(define_command_flags, main)


if __name__ == "__main__":
  run()
