"""What the app-check commands share (`qa_app_check` for QA, `classifier_app`
for classifiers): their flag checks (one line each, before anything is
written) and the facts their README.md gives of the model they hand over
(its model card, when convert_tflite wrote one beside it)."""

import dataclasses
import json
import os
import subprocess
import sys

from tfmodels.command_options import option


@dataclasses.dataclass(frozen=True, kw_only=True)
class AppReadmeOptions:
  """The flags both app checks share: what their README.md says of the
  model's origin."""
  teacher: str | None = option(
      None, "The teacher the model was distilled from (a path or name), "
      "for README.md (experiments.ship passes its --teacher); default: "
      "not stated.")
  run_report: str | None = option(
      None, "The report of the run that made the model, for README.md to "
      "point to (experiments.ship passes its REPORT.md).")


def check_app_flags(options, required, files, count_flag):
  """SystemExit (`error: ...`, one line naming the flag) on a missing
  required flag, a file flag naming no file, a count below 1, a Task
  Library interpreter that cannot run, or an output directory that
  cannot be written."""
  for flag in required:  # one line each, where absl's check prints two
    if not getattr(options, flag):
      sys.exit(f"error: --{flag} is required")
  for flag in files:
    path = getattr(options, flag)
    if path is not None and not os.path.isfile(path):
      sys.exit(f"error: --{flag} {path}: no such file")
  if getattr(options, count_flag) < 1:
    sys.exit(f"error: --{count_flag} must be >= 1")
  python = options.task_library_python
  if python and not os.access(python, os.X_OK):
    sys.exit(f"error: --task_library_python {python}: not an executable "
             "(make setup makes .venv-task/bin/python)")
  from experiments.common.pipeline import check_output_dir
  from tfmodels.staging import OutputError
  try:
    check_output_dir(options.output_dir)
  except OutputError as e:
    sys.exit(f"error: {e}")


# ------------------------------------------------------------- README.md
# convert_tflite writes NAME_MODE.model_card.json beside NAME_MODE.tflite.
CARD_SUFFIX = ".model_card.json"


def card_path(model):
  """Where convert_tflite's model card for `model` would be."""
  return os.path.splitext(model)[0] + CARD_SUFFIX


def read_model_card(model):
  """(card dict or None, why it is None or None): the model card beside
  `model`, used only if it describes this very file (its sha256)."""
  import hashlib
  import json
  path = card_path(model)
  if not os.path.isfile(path):
    return None, f"no model card beside it (`{os.path.basename(path)}`)"
  try:
    with open(path, encoding="utf-8") as f:
      card = json.load(f)
  except (OSError, ValueError) as e:
    return None, f"its model card `{path}` is unreadable ({e})"
  if not isinstance(card, dict):
    return None, f"its model card `{path}` is not a JSON object"
  with open(model, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  if card.get("sha256") not in (None, digest):
    return None, (f"the model card beside it (`{path}`) describes another "
                  "file (its sha256 differs), so it is not used")
  return card, None


def _encoder_line(config):
  """The encoder's shape in words, from the card's ModelConfig dict."""
  get = config.get
  parts = [f"{get(key)} {words}" for key, words in (
      ("num_hidden_layers", "layers"), ("num_attention_heads",
                                        "attention heads"))
           if get(key) is not None]
  for key, words in (("hidden_size", "hidden size"),
                     ("intermediate_size", "feed-forward size")):
    if get(key) is not None:
      parts.append(f"{words} {get(key)}")
  if get("use_bottleneck"):
    parts.append(f"bottleneck {get('intra_bottleneck_size')}")
  for key in ("hidden_act", "normalization_type"):
    if get(key):
      parts.append(str(get(key)))
  if get("vocab_size"):
    parts.append(f"a {get('vocab_size')}-piece vocabulary")
  ranks = get("low_rank_ranks") or {}
  if ranks:
    parts.append("low rank " + ", ".join(f"{k} {v}" for k, v in
                                         sorted(ranks.items())))
  name = f" `{get('name')}`" if get("name") else ""
  return f"- Encoder{name}: {', '.join(parts)}." if parts else None


def model_facts(model, *, task, length, length_words, asked, teacher=None,
                run_report=None):
  """README.md's "What it is" lines: what the file says of itself (its
  model card when one beside it describes it) and what the command was
  told (the task, the teacher, the run's report) and did (`asked`: what
  answers.json holds, from which data directory)."""
  card, missing = read_model_card(model)
  card = card or {}
  card_task = card.get("task") or {}
  lines = [f"- Task: {task}."]
  if teacher:
    lines.append(f"- Teacher: `{teacher}`, the model it was distilled "
                 "from.")
  if card.get("source_checkpoint"):
    how = ", ".join(x for x in (card.get("mode"), card.get("head") and
                                f"{card['head']} head") if x)
    lines.append(f"- Converted from `{card['source_checkpoint']}` by "
                 "convert_tflite" + (f" ({how})" if how else "") + ".")
  encoder = _encoder_line(card.get("config") or {})
  if encoder:
    lines.append(encoder)
  lines.append(f"- Sequence length: {length} ({length_words}).")
  metric, keras = card.get("metric"), card.get("keras_metric")
  if (metric or {}).get("points") is not None and card_task.get("data_dir"):
    lines.append(
        f"- Scored on `{card_task['data_dir']}` "
        f"({card_task.get('split') or 'dev'} split, task "
        f"`{card_task.get('name')}`): {metric['name']} "
        f"{metric['points']:.2f} for this file" + (
            f", {keras['points']:.2f} for the model it was converted from"
            if keras and keras.get("points") is not None else "") + ".")
  if card.get("size_bytes") and card.get("sha256"):
    lines.append(f"- {card['size_bytes'] / 2**20:.2f} MB, sha256 "
                 f"`{card['sha256']}`" + (f", converted {card['created']}"
                                          if card.get("created") else "")
                 + ".")
  lines.append(f"- Model card: `{os.path.abspath(card_path(model))}`."
               if card else "- Where it came from and how it scored are "
               f"not recorded here: {missing}.")
  lines.append(f"- `answers.json`: {asked}.")
  if run_report:
    lines.append(f"- The run's report: `{run_report}`.")
  return "\n".join(lines)


def run_task_library(python, app_dir, args, what):
  """The JSON answers of android_bench/APP_DIR/task_library.py run with
  `args` by the Task Library venv's `python` (tflite-support lives there,
  not here); RuntimeError naming `what` (the Task Library class) if it
  fails."""
  from experiments.common.paths import REPO
  from tfmodels.process_lifetime import die_with_parent
  script = os.path.join(REPO, "android_bench", app_dir, "task_library.py")
  result = subprocess.run([python, script, *args], capture_output=True,
                          text=True, preexec_fn=die_with_parent)
  if result.returncode != 0:
    raise RuntimeError(f"the Task Library's {what} failed: "
                       f"{result.stderr.strip().splitlines()[-1:]}")
  return json.loads(result.stdout)
