"""The shipped QA files on arm64: the app's questions through the ARM
kernels a phone runs (qemu-user, a Cortex-A76), beside the host.

    make arm64-root                  # once (android_bench/arm64_root.py)
    python -m experiments.apps.arm64_check \
        --model student_int8.tflite,student_float32.tflite \
        --qa_dir data/wordnet_qa \
        --questions 20 --dev_questions 200 --output_dir ship_qa/arm64

Each model answers --questions demo questions (the first model, the
shipped file, also --dev_questions held-out ones: float32 arithmetic
emulates about 5x slower than int8) through the app's Python twin on the
host, each window at the length the twin picks; the same windows then run
in one emulated arm64 process (android_bench.arm64) and the twin decodes
those logits too. arm64.json
keeps, per model: how many of the demo questions get the same answer, dev
F1 / exact match both ways, the largest |host - arm64| logit and the
emulated run's XNNPACK coverage; and, when the root has qemu's
instruction-count plugin, arm64 instructions per inference at L = 128 (one
real window, padded) with the float32 / int8 ratio beside MobileBERT's
Table 7 ratio. Emulated seconds are recorded as what they are (qemu's wall
time), never as a latency. Without a usable root the command stops with
the reason in one line (`ship` adds this step only when the root exists).
"""

import dataclasses
import json
import os
import sys

import numpy as np
from absl import app

from experiments.bench.latency_report import PAPER_TABLE7_MS
from experiments.apps.qa_questions import pick_questions, same_answers, scores
from tfmodels.command_options import define_flags, from_flags, option

# The length instructions are counted at: Table 7's (MobileBERT, L = 128).
COUNT_LENGTH = 128
# Inferences counted (the plugin counts between the runner's marks around
# them, so Python's start-up is not in the count).
COUNT_RUNS = 2
RESULTS = "arm64.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckOptions:
  """arm64_check's flags."""
  model: tuple = option((), "QA .tflite files (e.g. the shipped int8 one "
                        "and its float32 twin).")
  qa_dir: str | None = option(None, "SQuAD-format directory; questions come "
                              "from its dev split.", required=True)
  questions: int = option(20, "Demo questions whose answers are compared.")
  dev_questions: int = option(200, "Held-out questions the first --model "
                              "is scored on, both ways.")
  threads: int = option(1, "Threads of both interpreters (XNNPACK).")
  count_instructions: bool = option(
      True, "Count arm64 instructions per inference (when the root has "
      "qemu's plugin).")
  arm64_root: str | None = option(None, "The arm64 root (default: "
                                  "$ARM64_ROOT or the user's cache).")
  output_dir: str | None = option(None, "Where arm64.json goes.",
                                  required=True)


def define_command_flags():
  """Defines the flags, when run as a command only (its tests import it
  beside other commands' flags)."""
  define_flags(CheckOptions)


class Recorder:
  """A SpanModel that keeps each window's feed (what the ARM run gets)."""

  def __init__(self, model):
    self.model = model
    self.sequence_length = model.sequence_length
    self.feeds = []
    self.last_latency_s = self.last_length = None

  def __call__(self, ids, mask, segment_ids):
    self.feeds.append(self.model.feed(ids, mask, segment_ids))
    out = self.model(ids, mask, segment_ids)
    self.last_latency_s = self.model.last_latency_s
    self.last_length = self.model.last_length
    return out


class Replay:
  """Gives the recorded windows' outputs back in order, as the twin's
  model would (padded to the default length)."""

  def __init__(self, sequence_length, outputs):
    self.sequence_length = sequence_length
    self._outputs = iter(outputs)
    self.last_latency_s = self.last_length = None

  def __call__(self, ids, mask, segment_ids):
    from android_bench.qa_app.span_model import padded
    out = next(self._outputs)
    self.last_length = int(np.asarray(out["start_logits"]).size)
    return padded(out, len(ids))


def check_model(path, questions, dev, run, threads=1, vocab=None):
  """One model's comparison: the twin's answers and logits from the host
  and from `run(path, feeds, threads)` (android_bench.arm64.run_on_arm64,
  or a stand-in), and what the run reports about itself. `vocab`: for a
  model that carries none."""
  from android_bench.qa_app.answering import predict, tokenizer_for
  from android_bench.qa_app.span_model import SpanModel
  tokenizer = tokenizer_for(path, vocab)
  recorder = Recorder(SpanModel(path, num_threads=threads))
  asked = questions + dev
  host = [predict(q["passage"], q["question"], tokenizer, recorder)
          for q in asked]
  arm = run(path, recorder.feeds, threads)
  replay = Replay(recorder.sequence_length, arm)
  emulated = [predict(q["passage"], q["question"], tokenizer, replay)
              for q in asked]
  diff = max(float(np.max(np.abs(getattr(h, k) - getattr(a, k))))
             for h, a in zip(host, emulated)
             for k in ("start_logits", "end_logits"))
  n = len(questions)
  result = {
      "windows": len(recorder.feeds),
      "lengths": sorted({f["ids"].shape[1] for f in recorder.feeds}),
      "questions": n,
      "same_answers": same_answers([p.answer for p in host[:n]],
                                   [p.answer for p in emulated[:n]]),
      "max_abs_logit_diff": diff,
      "answers": [{"question": q["question"], "host": h.answer,
                   "arm64": a.answer}
                  for q, h, a in zip(questions, host, emulated)]}
  if dev:
    result["dev"] = {"questions": len(dev)}
    for side, predictions in (("host", host[n:]), ("arm64", emulated[n:])):
      f1, em = scores([p.answer for p in predictions], dev)
      result["dev"][side] = {"f1": f1, "exact_match": em}
  info = getattr(arm, "info", None)
  if info:
    result["arm64"] = {k: info.get(k) for k in ("machine", "versions",
                                                "xnnpack", "num_threads")}
  if getattr(arm, "emulated_s", None) is not None:
    result["emulated_wall_s"] = arm.emulated_s  # qemu's time, no latency
  result["first_feed"] = recorder.feeds[0]
  return result


def feed_at(feed, length):
  """A window's feed at `length` tokens: padded with zeros (masked), or cut
  (instructions depend on the length, hardly on the tokens)."""
  return {name: np.pad(value[:, :length],
                       ((0, 0), (0, max(0, length - value.shape[1]))))
          for name, value in feed.items()}


def table7_ratio():
  """MobileBERT's Table 7: LayerNorm + gelu over NoNorm + relu latency
  (the same FLOPs, 3.1x the time)."""
  return PAPER_TABLE7_MS["layernorm_gelu"] / PAPER_TABLE7_MS["nonorm_relu"]


def check(options, run, count=None):
  """arm64.json's dict. `count(path, feed)` -> (instructions, dot
  instructions) per inference, or None to skip counting."""
  questions = pick_questions(options.qa_dir, options.questions)
  dev = (pick_questions(options.qa_dir, options.dev_questions)
         if options.dev_questions else [])
  models, counts = {}, {}
  for index, path in enumerate(options.model):
    name = os.path.basename(path)
    dev = dev if index == 0 else []  # the shipped file only
    print(f"{name}: {len(questions)} questions + {len(dev)} dev questions "
          "on the host, then on arm64", flush=True)
    result = check_model(path, questions, dev, run, options.threads)
    first = result.pop("first_feed")
    if count:
      counts[name] = count(path, feed_at(first, COUNT_LENGTH))
      result["instructions_per_inference"], result[
          "dot_instructions_per_inference"] = counts[name]
    models[name] = result
    dev_line = (f"; dev F1 host {result['dev']['host']['f1']:.2f}, arm64 "
                f"{result['dev']['arm64']['f1']:.2f}" if dev else "")
    print(f"{name}: {result['same_answers']} of {len(questions)} answers "
          f"the same{dev_line}; max |host - arm64| logit "
          f"{result['max_abs_logit_diff']:.3g}", flush=True)
  summary = {"models": models, "threads": options.threads}
  floats = [n for n in counts if "float32" in n]
  ints = [n for n in counts if "int8" in n]
  if floats and ints:
    summary["instructions"] = {
        "length": COUNT_LENGTH, "float32": floats[0], "int8": ints[0],
        "float32_over_int8": counts[floats[0]][0] / counts[ints[0]][0],
        "table7_layernorm_gelu_over_nonorm_relu": table7_ratio()}
  return summary


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(CheckOptions)
  from android_bench import arm64
  from tfmodels.staging import check_writable, OutputError, write_file
  for flag, least in (("threads", 1), ("questions", 1),
                      ("dev_questions", 0)):
    if getattr(options, flag) < least:
      sys.exit(f"error: --{flag} {getattr(options, flag)}: must be >= {least}")
  if not options.model:
    sys.exit("error: --model: give the QA .tflite files to check")
  for path in options.model:
    if not os.path.isfile(path):
      sys.exit(f"error: --model {path}: no such file")
  try:
    check_writable(options.output_dir, "--output_dir")
  except OutputError as e:
    sys.exit(f"error: {e}")
  root, reason = arm64.arm64_root(options.arm64_root)
  if root is None:
    sys.exit(f"error: {reason}")
  counting = options.count_instructions and arm64.instruction_counting(
      root)[0]

  def run(path, feeds, threads):
    return arm64.run_on_arm64(path, feeds, threads, root=root)

  def count(path, feed):
    result = arm64.run_on_arm64(path, [feed], options.threads, root=root,
                                instruction_runs=COUNT_RUNS)
    return (result.instructions_per_inference,
            result.dot_instructions_per_inference)

  from android_bench.qa_app import QaAppError
  try:
    summary = check(options, run, count if counting else None)
  except (arm64.Arm64Error, QaAppError, OSError, StopIteration) as e:
    sys.exit(f"error: {e}")
  summary.update(cpu=arm64.CPU, root=root,
                 instructions_counted=bool(counting))
  os.makedirs(options.output_dir, exist_ok=True)
  write_file(os.path.join(options.output_dir, RESULTS),
             json.dumps(summary, indent=2, default=_jsonable))
  ratio = (summary.get("instructions") or {}).get("float32_over_int8")
  if ratio:
    print(f"instructions per inference at L = {COUNT_LENGTH}: float32 / "
          f"int8 = {ratio:.2f} (Table 7, LayerNorm + gelu / NoNorm + relu "
          f"latency: {table7_ratio():.2f})")


def _jsonable(value):
  return value.tolist() if hasattr(value, "tolist") else str(value)


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
