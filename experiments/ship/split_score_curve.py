"""Does the split search's score rank carves the way the dev set does?

    python -m experiments.ship.split_score_curve --teacher_dir RUN \
        --data_dir data/wordnet_qa --output_dir experiments/results/split_score_curve

`split_search` scores a candidate by what it keeps of the teacher before
any training (`retained`: the kept share of head and neuron importance
times the word table's kept energy), because carving and scoring every
candidate on dev costs a model build and a dev pass each. This carves
every candidate of the same grid out of the fine-tuned teacher (as
`compress` carves, no substitution or recovery), scores each on dev right
after the cut, and writes both per candidate with their Spearman rank
correlation: `split_score_curve.json`, `.md` and `.png` (dev metric
against score).
"""

import dataclasses
import json
import os
import sys

from absl import app
import numpy as np

from experiments.ship.split_search import SearchOptions, candidates, retained
from tfmodels.command_options import define_flags, from_flags, option, with_defaults
from tfmodels.markdown import table
from tfmodels.staging import write_file

RESULT = "split_score_curve"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurveOptions:
  teacher_dir: str | None = option(None, "A fine-tuned model (finetune "
                                   "run).", required=True)
  data_dir: str | None = option(None, "The task's data.", required=True)
  output_dir: str | None = option(None, "Where the curve goes.",
                                  required=True)
  calibration_examples: int = option(128, "Training examples the "
                                     "importances are measured on.")
  heads: tuple = option((), "Heads to try (default: split_search's).")
  widths: tuple = option((), "FFN widths to try (default: split_search's).")
  ranks: tuple = option(("none", "128"), "Word-table ranks (none: whole).")


def define_command_flags():
  """The flags, defined only when the module runs as a command: tests
  import its functions beside other experiments'."""
  define_flags(CurveOptions)


def spearman(a, b):
  """Spearman's rank correlation of two equal-length sequences (ties get
  their mean rank)."""
  def ranks(x):
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=np.float64)
    for value in np.unique(x):  # ties: the mean rank
      r[x == value] = r[x == value].mean()
    return r
  ra, rb = ranks(a), ranks(b)
  ra, rb = ra - ra.mean(), rb - rb.mean()
  denominator = np.sqrt((ra ** 2).sum() * (rb ** 2).sum())
  return float((ra * rb).sum() / denominator) if denominator else 0.0


def measure_curve(options, log=print):
  """[{candidate fields, score, dev}] and the dev metric's name."""
  from experiments.ship import split_search
  from tfmodels.checkpoints.model_dir import load_model_dir, read_task_spec
  from tfmodels.compression.carve import carve
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve
  search = with_defaults(SearchOptions, teacher_dir=options.teacher_dir,
                         data_dir=options.data_dir,
                         calibration_examples=options.calibration_examples)
  spec = read_task_spec(options.teacher_dir, "--teacher_dir")
  teacher, config, head = load_model_dir(options.teacher_dir)
  statistics, singular = split_search._scores(search, teacher, config, spec,
                                              head)
  task = make_task(spec["task"], options.data_dir, WordPieceTokenizer(
      resolve(options.teacher_dir, model_flag="--teacher_dir")),
                   spec["max_seq_length"])
  metric = "f1" if spec["task"] == "squad" else "accuracy"
  ranks = [None if r == "none" else int(r) for r in options.ranks]
  grid = candidates(config, [int(h) for h in options.heads] or None,
                    [int(w) for w in options.widths] or None, ranks)
  rows = []
  for i, candidate in enumerate(grid, 1):
    student, _, _ = carve(teacher, config, head, statistics,
                          candidate.spec())
    dev = task.evaluate(student, "dev")[metric]
    rows.append(dict(dataclasses.asdict(candidate),
                     score=round(retained(statistics, singular, candidate), 4),
                     dev=round(dev if metric == "f1" else 100 * dev, 2)))
    log(f"[{i}/{len(grid)}] {candidate.label()}: score "
        f"{rows[-1]['score']:.3f}, dev {metric} {rows[-1]['dev']:.1f}")
  teacher_dev = task.evaluate(teacher, "dev")[metric]
  return rows, metric, teacher_dev if metric == "f1" else 100 * teacher_dev


def _groups(rows):
  """The candidates by how their word table is kept."""
  return {"whole word table": [r for r in rows if not r["table_rank"]],
          "low-rank word table": [r for r in rows if r["table_rank"]]}


def markdown(record):
  lines = [f"# The split search's score against dev {record['metric']} "
           "right after carving", "",
           f"Teacher `{record['teacher_dir']}` (dev {record['metric']} "
           f"{record['teacher_dev']:.1f}); each candidate carved as "
           "`compress` carves it, before substitution, recovery or "
           "distillation. Spearman rank correlation of score and dev: "
           f"**{record['spearman']:.3f}** over {len(record['rows'])} "
           "candidates; "
           + "; ".join(f"{name}: {spearman([r['score'] for r in rows], [r['dev'] for r in rows]):.3f} over {len(rows)}"
                       for name, rows in _groups(record["rows"]).items())
           + ".", "",
           *table(["heads", "FFN", "table rank", "score",
                   f"dev {record['metric']}"],
                  ([r["heads"], r["intermediate_size"],
                    r["table_rank"] or "-", f"{r['score']:.3f}",
                    f"{r['dev']:.1f}"]
                   for r in sorted(record["rows"], key=lambda r: -r["score"])))]
  return "\n".join(lines) + "\n"


def plot(record, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(5, 4))
  for rank, marker in ((None, "o"), ("low", "x")):
    rows = [r for r in record["rows"]
            if (r["table_rank"] is None) == (rank is None)]
    ax.scatter([r["score"] for r in rows], [r["dev"] for r in rows],
               marker=marker, label="whole table" if rank is None
               else "low-rank table")
  ax.set_xlabel("split_search score (importance kept)")
  ax.set_ylabel(f"dev {record['metric']} right after carving")
  ax.set_title(f"Spearman {record['spearman']:.2f}")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(CurveOptions)
  from tfmodels.staging import OutputError, check_output
  try:
    check_output(os.path.join(options.output_dir, RESULT + ".json"),
                 "--output_dir", True)
    rows, metric, teacher_dev = measure_curve(options)
  except (OutputError, ValueError, OSError) as e:
    sys.exit(f"error: {e}")
  record = {"teacher_dir": options.teacher_dir, "metric": metric,
            "teacher_dev": round(teacher_dev, 2),
            "calibration_examples": options.calibration_examples,
            "spearman": round(spearman([r["score"] for r in rows],
                                       [r["dev"] for r in rows]), 4),
            "rows": rows}
  os.makedirs(options.output_dir, exist_ok=True)
  base = os.path.join(options.output_dir, RESULT)
  write_file(base + ".json", json.dumps(record, indent=1) + "\n")
  write_file(base + ".md", markdown(record))
  plot(record, base + ".png")
  print(markdown(record))


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
