"""Hand a converted classifier to the app, and ask it: qa_app_check's
classifier counterpart.

    python -m experiments.apps.classifier_app --model spam_int8.tflite \
        --data_dir data/spam --texts 20 --output_dir ship_output/app_assets \
        --task_library_python .venv-task/bin/python

Copies the model into --output_dir as classifier_model.tflite, with the
vocab.txt and labels.txt its metadata carries beside it (what an app's
build bundles; BertNLClassifier itself reads them from the model) and a
README.md saying what the model is (the source file, its model card when
convert_tflite wrote one beside it: checkpoint, encoder, length, score and
the data it was scored on; the --task, --data_dir, --teacher and
--run_report it is told of) and how an app uses it, then classifies
--texts held-out texts of --data_dir's dev split (a
`sentence<TAB>label` TSV with a header, like data/spam) with the app's
Python twin (`android_bench.classifier_app`) and, given
--task_library_python, with the TFLite Task Library's BertNLClassifier
(`android_bench/classifier_app/task_library.py` in that venv), and writes
answers.json: each text, its gold label, both labels and probabilities,
and a summary (accuracy of each, how many labels agree, the largest
probability difference).
"""

import dataclasses
import json
import os
import shutil
import sys

from absl import app

from experiments.apps.app_checks import (AppReadmeOptions, run_task_library,
                                    check_app_flags, model_facts,
                                    read_model_card)
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.staging import staged_path, write_file


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierAppOptions(AppReadmeOptions):
  """classifier_app's flags; REQUIRED are checked by `main` (one line each,
  where absl's check prints two)."""
  model: str | None = option(None, "Converted classifier (.tflite) with "
                             "BertNLClassifier metadata (convert_tflite "
                             "output).")
  data_dir: str | None = option(None, "Task directory of sentence<TAB>label "
                                "TSVs with a header (like data/spam); texts "
                                "come from its dev split.")
  texts: int = option(20, "Texts to classify, spread over the dev split.")
  output_dir: str | None = option(None, "Where the app's files go.")
  task_library_python: str | None = option(
      None, "Python of the virtual environment holding tflite-support "
      "(`make setup` makes .venv-task): with it the same texts also go to "
      "the TFLite Task Library's BertNLClassifier.")
  task: str | None = option(
      None, "The task the model was fine-tuned for (finetune --task), for "
      "README.md; default: the one its model card names.")


define_flags(ClassifierAppOptions)
REQUIRED = ("model", "data_dir", "output_dir")

MODEL_NAME = "classifier_model.tflite"
ANSWERS = "answers.json"
TASK_LIBRARY_API = "tflite_support.task.text.BertNLClassifier"
# The Android Task Library release matching tflite-support's (.venv-task).
TASK_LIBRARY_ANDROID = "org.tensorflow:tensorflow-lite-task-text:0.4.4"


def readme(source, *, labels, data_dir, length, dynamic, asked,
           library=False, task=None, teacher=None, run_report=None):
  """What the model is (from the file, its model card and the flags) and
  how an Android app classifies with it."""
  from converters.metadata import LABELS_NAME, VOCAB_NAME
  card, _ = read_model_card(source)
  task = task or ((card or {}).get("task") or {}).get("name")
  named = f"`{task}`: " if task else ""
  fit = ("the file takes any length up to it: each text runs at its own "
         "length, cut to fit it" if dynamic else
         "a fixed-length file: every text is padded or cut to it")
  facts = model_facts(
      source, task=f"text classification ({named}a text in, one of "
      f"{len(labels)} labels out: {', '.join(labels)})", length=length,
      length_words=f"[CLS], the text's pieces and [SEP]; {fit}",
      asked=f"{asked} dev texts of `{os.path.abspath(data_dir)}` "
      "classified by the app's Python twin" + (
          " and the Task Library's BertNLClassifier" if library else "") +
      " with this file",
      teacher=teacher, run_report=run_report)
  return f"""# The classifier's model

`{MODEL_NAME}` is `{os.path.basename(source)}`, copied from
`{os.path.abspath(source)}`; `{VOCAB_NAME}` and `{LABELS_NAME}` are the
vocabulary and labels its metadata carries (BertNLClassifier reads them
from the model itself; they are here for an app that tokenizes or names
the labels on its own).

## What it is

{facts}

## Use it in an app

The Android app in this repository answers questions; a classifier goes
through the TFLite Task Library's `BertNLClassifier`, which finds the
vocabulary, labels and input names in the model's metadata. Copy
`{MODEL_NAME}` into the app module's `src/main/assets/`, and in its
`build.gradle`:

```
android {{
    androidResources {{
        noCompress 'tflite'   // the interpreter memory-maps the model
    }}
}}
dependencies {{
    implementation '{TASK_LIBRARY_ANDROID}'
}}
```

then classify (`BertNLClassifier` and its `BertNLClassifierOptions` from
`org.tensorflow.lite.task.text.nlclassifier`, `BaseOptions` from
`org.tensorflow.lite.task.core`, `Category` from
`org.tensorflow.lite.support.label`):

```java
BertNLClassifier classifier = BertNLClassifier.createFromFileAndOptions(
    context, "{MODEL_NAME}",
    BertNLClassifierOptions.builder()
        .setBaseOptions(BaseOptions.builder().setNumThreads(4).build())
        .build());
List<Category> categories = classifier.classify(text);  // one per label
```

`{ANSWERS}` holds the texts the app's Python twin classified with it.
"""


def pick_texts(data_dir, labels, n):
  """n dev examples spread over the file ([{text, gold}]), their labels
  checked against the model's: its names, or class indices 0..n-1 (the
  shipped TSVs' labels, when the model names its classes: a Hugging Face
  teacher's id2label). ValueError naming the file and line."""
  from tfmodels.data import glue
  layout = glue.Layout("sentence", label="label")
  indices = tuple(str(i) for i in range(len(labels)))
  by_index = ({} if set(indices) & set(labels)
              else dict(zip(indices, labels)))
  task = glue.Task("classifier_app", layout, layout,
                   tuple(labels) + tuple(by_index))
  examples = glue.read_examples(task, glue.split_path(data_dir, "dev"),
                                split="dev")
  if not examples:
    raise ValueError(f"{glue.split_path(data_dir, 'dev')}: no examples")
  step = max(1, len(examples) // n)
  return [{"text": e.text_a, "gold": by_index.get(e.label, e.label)}
          for e in examples[::step][:n]]


def ask_task_library(python, model, texts, directory):
  """The Task Library's [{label, score, scores}] per text, from
  android_bench/classifier_app/task_library.py in its own venv."""
  path = os.path.join(directory, "task_library_texts.json")
  write_file(path, json.dumps(texts))
  return run_task_library(python, "classifier_app",
                          ["--model", model, "--texts", path],
                          "BertNLClassifier")


def summarize(answers, asked_library):
  """answers.json's summary: accuracies (fractions), labels agreeing and
  the largest probability difference (None without the Task Library)."""
  n = len(answers)

  def accuracy(key):
    return sum(a[key] == a["gold"] for a in answers) / n
  if not asked_library:
    return {"texts": n, "twin_accuracy": accuracy("twin_label"),
            "task_library_accuracy": None, "agree": None,
            "max_probability_diff": None}
  return {"texts": n, "twin_accuracy": accuracy("twin_label"),
          "task_library_accuracy": accuracy("task_library_label"),
          "agree": sum(a["twin_label"] == a["task_library_label"]
                       for a in answers),
          "max_probability_diff": max(
              abs(p - a["task_library_scores"][label])
              for a in answers
              for label, p in a["twin_probabilities"].items())}


def _shown(text, width=60):
  text = " ".join(text.split())
  return text if len(text) <= width else text[:width - 3] + "..."


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(ClassifierAppOptions)
  check_app_flags(options, REQUIRED, ("model",), "texts")
  python = options.task_library_python
  from android_bench.classifier_app import Classifier
  from android_bench.qa_app import QaAppError
  from converters.metadata import LABELS_NAME, VOCAB_NAME, associated_file
  try:  # before anything is written: the model, its vocabulary and labels
    classifier = Classifier(options.model)
  except QaAppError as e:
    sys.exit(f"error: {e}" if str(e).startswith("--") else
             f"error: --model {e}")
  try:
    texts = pick_texts(options.data_dir, classifier.labels, options.texts)
  except (ValueError, OSError) as e:
    sys.exit(f"error: --data_dir {options.data_dir}: no readable dev split "
             f"({e})")
  out = options.output_dir
  model = os.path.join(out, MODEL_NAME)
  with staged_path(model) as temp:
    shutil.copyfile(options.model, temp)
  for name in (VOCAB_NAME, LABELS_NAME):
    write_file(os.path.join(out, name), associated_file(options.model, name))
  write_file(os.path.join(out, "README.md"), readme(
      options.model, labels=classifier.labels, data_dir=options.data_dir,
      length=classifier.sequence_length, dynamic=classifier.dynamic,
      asked=len(texts), library=bool(python), task=options.task,
      teacher=options.teacher, run_report=options.run_report))
  print(f"app files: {model} (L = {classifier.sequence_length}, labels "
        f"{', '.join(classifier.labels)}), {VOCAB_NAME}, {LABELS_NAME}",
        flush=True)
  answers = []
  for i, t in enumerate(texts, 1):
    label, probabilities = classifier.classify(t["text"])
    answers.append(dict(t, twin_label=label, twin_probabilities=probabilities,
                        task_library_label=None, task_library_scores=None))
    print(f"[{i}/{len(texts)}] twin: {label} ({probabilities[label]:.3f})  "
          f"gold: {t['gold']}  {_shown(t['text'])}", flush=True)
  if python:
    try:
      library = ask_task_library(python, model, [t["text"] for t in texts],
                                 out)
    except RuntimeError as e:
      sys.exit(f"error: {e}")
    for a, t in zip(answers, library):
      if set(t["scores"]) != set(classifier.labels):
        sys.exit(f"error: the Task Library labels {sorted(t['scores'])}, "
                 f"the model's {LABELS_NAME} {classifier.labels}")
      a.update(task_library_label=t["label"],
               task_library_scores=t["scores"])
  summary = summarize(answers, bool(python))
  if python:
    print(f"Task Library: {summary['agree']} of {len(answers)} labels the "
          "same as the twin's (probabilities within "
          f"{summary['max_probability_diff']:.2g})", flush=True)
  write_file(os.path.join(out, ANSWERS), json.dumps(
      {"model": os.path.abspath(options.model),
       "sequence_length": classifier.sequence_length,
       "labels": classifier.labels,
       "task_library": TASK_LIBRARY_API if python else None,
       "answers": answers, "summary": summary}, indent=2))


def run():
  app.run(main)


if __name__ == "__main__":
  run()
