"""What every command made of steps shares (ship, the demo, the papers'
experiments, the latency benchmark): its common flags, where its steps
write, the settings it records (check_plan), and how a run ends (one
definition, so they cannot drift apart in what --force means, what a
failed step leaves, or how the results are written).

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class XOptions(Options):
      output_dir: str = output_dir_option("Runs and scores.")
      results_dir: str = results_dir_option("x.{json,md}")
      scale: str = scale_option(SCALES)
      force: tuple = force_option()

    define_flags(XOptions)                           # tfmodels.command_options

    def run_experiment(options, out, results):   # takes no flags
      steps = build_steps(Layout(out), SCALES[options.scale])
      run_and_report(steps, options, results, report)  # report(results):
                                                       # stages, -> table
    def main(argv):
      command = command_line("experiments.x")
      run_command(argv, from_flags(XOptions, command=command),
                  run_experiment)

Only `main` reads the flags (`tfmodels.command_options`); everything below
it takes the options object.
"""

import contextlib
import dataclasses
import json
import os
import sys

from experiments.common.pipeline import (StepError, check_force, check_output_dir,
                                  run_steps, sole_writer)
from tfmodels.command_options import option
from tfmodels.sigterm import INTERRUPT_STATUS
from tfmodels.staging import OutputError, OutputFiles

FORCE_HELP = "Step names to re-run even if done."


# The options the experiments have in common, declared here once: an
# experiment's options take the ones it has as fields made by these.
def output_dir_option(help, default=None, required=False):  # pylint: disable=redefined-builtin
  """--output_dir, with the command's `help` (and `default`, or
  `required`)."""
  return option(default, help, required=required)


def results_dir_option(results):
  """--results_dir (default experiments/results, where they are
  committed); `results` names the files it takes, e.g. "x.{json,md}"."""
  from experiments.common.paths import REPO
  return option(os.path.join(REPO, "experiments", "results"),
                f"Where {results} go.")


def scale_option(scales):
  """--scale: one of the experiment's SCALES, its first the default."""
  return option(next(iter(scales)), "Experiment size.", choices=scales)


def jobs_option(default):
  """--jobs with the experiment's default."""
  return option(default, "Steps run side by side.")


def force_option(help=FORCE_HELP):  # pylint: disable=redefined-builtin
  """--force: the step (or stage) names to re-run."""
  return option((), help)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
  """What every experiment's run reads; an experiment's options extend it
  (keyword only), redeclaring those of its common options it has as flags
  (`output_dir_option`, `results_dir_option`, `scale_option`,
  `jobs_option`, `force_option`) beside its own `option`s."""
  output_dir: str | None = None
  force: tuple = ()
  jobs: int = 1  # without --jobs: one step at a time
  results_dir: str | None = None  # None: the results go to output_dir
  overwrite: bool = True  # results replace those of an earlier run
  command: str = ""  # the command line, as the results quote it


def command_line(module):
  """How the results quote the run: `python -m MODULE` and its flags."""
  return " ".join([f"python -m {module}"] + sys.argv[1:])


def check_command_line(argv, options):
  """Exits with one line on stray arguments or --jobs below 1."""
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  if options.jobs < 1:
    sys.exit(f"error: --jobs {options.jobs}: give 1 or more")


def run_command(argv, options, run_experiment, errors=(),
                interrupted=None):
  """An experiment's main after reading its flags: the checks, then
  `run_experiment(options, out, results)` (`held_outputs`), whose errors
  (OutputError and `errors`) end the command with one line."""
  check_command_line(argv, options)
  with one_line_errors(*errors, interrupted=interrupted), \
      held_outputs(options) as (out, results):
    run_experiment(options, out, results)


RESUME = "run the same command again to resume"


def missing_dirs(*paths):
  """The directories among `paths` (None skipped) and their ancestors that
  do not exist yet, deepest first: what a run may make, for
  `remove_empty_dirs` to take away again."""
  missing = set()
  for path in paths:
    path = path and os.path.abspath(path)
    while path and not os.path.lexists(path):
      missing.add(path)
      path = os.path.dirname(path)
  return sorted(missing, key=lambda p: (-p.count(os.sep), p))


def remove_empty_dirs(made):
  """Removes each directory of `made` (`missing_dirs`, deepest first) that
  is still empty: a refused or failed run leaves no empty folder behind
  (a folder holding anything stays, as do those the user had)."""
  for path in made:
    if os.path.isdir(path) and not os.path.islink(path):
      with contextlib.suppress(OSError):  # not empty: it holds output
        os.rmdir(path)


@contextlib.contextmanager
def no_empty_dirs_left(*paths):
  """`remove_empty_dirs` of what the block made of `paths` (and their
  parents), however the block ends, sys.exit included."""
  made = missing_dirs(*paths)
  try:
    yield
  finally:
    remove_empty_dirs(made)


@contextlib.contextmanager
def one_line_errors(*errors, interrupted=None):
  """An OutputError (or one of `errors`: settings found wrong before the
  work) or Ctrl-C ends the command with one line (the error's first), not a
  traceback; `interrupted` says what Ctrl-C leaves (default: RESUME)."""
  try:
    yield
  except (OutputError, *errors) as e:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    sys.exit(f"error: {lines[0]}")
  except KeyboardInterrupt:
    print(f"interrupted; {interrupted or RESUME}", file=sys.stderr)
    sys.exit(INTERRUPT_STATUS)


@contextlib.contextmanager
def held_outputs(options):
  """(output directory, results): --output_dir (absolute) held by this
  process alone, and an OutputFiles for the results: --results_dir's or,
  without that flag, the output directory's. Both are checked before any
  work, so a run of hours does not fail at its end; what is staged but not
  committed is discarded."""
  check_output_dir(options.output_dir)
  if options.results_dir is not None:
    check_output_dir(options.results_dir, "--results_dir")
  with sole_writer(options.output_dir) as out:
    if options.results_dir is None:
      results = OutputFiles(out, overwrite=options.overwrite)
    else:
      results = OutputFiles(options.results_dir, options.overwrite,
                            flag="--results_dir")
    try:
      yield out, results
    finally:
      results.discard()  # committed already, or nothing half-written


def run_and_report(steps, options, results, report):
  """Runs the steps (--force, --jobs), then `report(results)`: it stages
  the result files in `results` (OutputFiles) and returns the table to
  print. A failed step still gets its report (what the finished steps
  measured is worth keeping); the command then exits with its error."""
  check_force(options.force, steps)
  failure = None
  try:
    run_steps(steps, force=set(options.force), jobs=options.jobs)
  except StepError as e:
    failure = f"error: {e}"
  table = report(results)
  results.commit()
  print(table)
  if failure:
    sys.exit(failure)


def stage_results(results, name, data, table):
  """NAME.json (`data`) and NAME.md (the table under a title), the form
  experiments/results commits."""
  results.add(name + ".json", json.dumps(data, indent=1) + "\n")
  results.add(name + ".md", f"# {name}\n\n" + table)


def check_plan(layout, record, what, recorded=lambda plan: plan):
  """Refuses (OutputError, one line) an output directory whose plan.json
  records other settings than `record`: its finished steps would be
  skipped though they were made for other settings. `recorded` finds the
  settings in the old plan.json; `what` names the run ("a ship run")."""
  if not os.path.exists(layout.plan):
    return
  try:
    with open(layout.plan) as f:
      old = recorded(json.load(f)) or {}
  except (OSError, ValueError, AttributeError) as e:
    raise OutputError(f"--output_dir {layout.out}: unreadable {layout.plan} "
                      f"({e}); delete it or use another --output_dir"
                      ) from None
  changed = sorted(k for k in record if old.get(k) != record[k])
  if changed:
    raise OutputError(f"--output_dir {layout.out} holds {what} with other "
                      f"settings ({', '.join(changed)}); delete it or use "
                      "another --output_dir")


class Layout:
  """Where each step writes under the output directory: one method per
  kind of directory, so the step that writes it and the code that reads it
  cannot disagree. An experiment's Layout adds its own kinds; a command
  that records its settings keeps them in `plan` (check_plan)."""

  def __init__(self, out):
    self.out = out
    self.plan = os.path.join(out, "plan.json")

  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def run(self, name):
    """A pre-training, distillation or import run: runs/NAME."""
    return self.path("runs", name)

  def shards(self, name):
    """Pre-training shards; the data step's directory (its log and
    marker) is data/NAME, the shards one level down."""
    return self.path("data", name, "shards")

  def finetuned(self, *name):
    """A fine-tuning run: finetune/MODEL or finetune/MODEL_TASK."""
    return self.path("finetune", "_".join(name))
