"""The demo's last stage: hand the QA model to the Android app, and ask it.

    python -m experiments.demo_app --model pkt_qa_int8.tflite \
        --vocab data/vocab/uncased_vocab.txt --qa_dir data/wordnet_qa \
        --questions 3 --output_dir demo_output/qa/app_assets

Copies the model and vocabulary into --output_dir under the names the app
reads (qa_model.tflite, vocab.txt; the Gradle build's -PqaModel / -PqaVocab
point there, see the README.md written beside them), then answers real
held-out questions with the app's Python twin (what `python -m
android_bench.qa_app` runs, with the model and tokenizer loaded once: a
process per question spent seconds importing TensorFlow for milliseconds of
model) and writes answers.json: question, passage, gold answers, the
twin's answer, its exact match / F1 and its model time. Each passage is
written under passages/ for the command-line twin.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

from absl import app

from experiments.app_checks import check_app_flags
from experiments.paths import REPO
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data import squad
from tfmodels.process_lifetime import die_with_parent
from tfmodels.staging import staged_path, write_file

@dataclasses.dataclass(frozen=True, kw_only=True)
class AppOptions:
  """demo_app's flags; REQUIRED are checked by `main` (one line each,
  where absl's check prints two)."""
  model: str | None = option(None, "Converted QA model (.tflite).")
  vocab: str | None = option(None, "Its vocab.txt (default: the one the "
                             "model carries; refused unless it is that "
                             "one).")
  qa_dir: str | None = option(None, "SQuAD-format directory; questions come "
                              "from its dev split.")
  questions: int = option(3, "Questions to ask.")
  output_dir: str | None = option(None, "Where the app's files go.")
  task_library_python: str | None = option(
      None, "Python of the virtual environment holding tflite-support "
      "(`make setup` makes .venv-task): with it the same questions also go "
      "to the TFLite Task Library's BertQuestionAnswerer.")


define_flags(AppOptions)
REQUIRED = ("model", "qa_dir", "output_dir")

MODEL_NAME, VOCAB_NAME = "qa_model.tflite", "vocab.txt"
ANSWERS = "answers.json"


def pick_questions(qa_dir, n):
  """n dev questions, spread over the file: (id, passage, question, answers).

  Real questions of the held-out split, so the twin's answers show what
  the fine-tuned model learned rather than what it memorised.
  """
  path = next(os.path.join(qa_dir, f"dev.{ext}") for ext in
              ("json", "json.gz")
              if os.path.exists(os.path.join(qa_dir, f"dev.{ext}")))
  examples = squad.read_squad(path).examples
  step = max(1, len(examples) // n)
  return [{"id": e.qas_id, "passage": e.context, "question": e.question,
           "answers": list(e.all_answers)} for e in examples[::step][:n]]


def _copy(source, target):
  with staged_path(target) as temp:
    shutil.copyfile(source, temp)


def readme(output_dir, source):
  """How to build the app with these files, or push them to a phone."""
  where = os.path.abspath(output_dir)
  if where.startswith(REPO + os.sep):  # as seen from android_bench/qa_app
    where = "$PWD/../../" + os.path.relpath(where, REPO)
  return f"""# The QA app's model

`{MODEL_NAME}` is `{os.path.basename(source)}` from the demo (the distilled
MobileBERT student fine-tuned on data/wordnet_qa, full int8) and
`{VOCAB_NAME}` its vocabulary: the names the app reads from its assets.

Build the APK with them (BUILD_NOTES.md, "The Android QA app"):

```
cd android_bench/qa_app
gradle wrapper --gradle-version 8.7            # once
./gradlew :app:assembleDebug \\
    -PqaModel={where}/{MODEL_NAME} \\
    -PqaVocab={where}/{VOCAB_NAME}
adb install -r app/build/outputs/apk/debug/app-debug.apk
```

or swap them into an installed app without rebuilding (from this
directory; launch the app once first so its files directory exists):

```
adb push {MODEL_NAME} /sdcard/Android/data/org.compactbert.qa.app/files/{MODEL_NAME}
adb push {VOCAB_NAME} /sdcard/Android/data/org.compactbert.qa.app/files/{VOCAB_NAME}
```

`{ANSWERS}` holds the questions the app's Python twin answered with them.
"""


def twin(model, vocab=None):
  """ask(passage, question) -> (answer, timing line) with the app's twin,
  its model and tokenizer loaded once (`vocab`: checked against the one
  the model carries, which is used without it; QaAppError)."""
  from android_bench.qa_app import DEFAULT_THREADS, QaAppError
  from android_bench.qa_app.answering import (predict, timing_line,
                                               tokenizer_for)
  from android_bench.qa_app.span_model import SpanModel
  try:
    span_model = SpanModel(model, num_threads=DEFAULT_THREADS)
  except QaAppError as e:
    raise QaAppError(f"--model {e}") from None
  tokenizer = tokenizer_for(model, vocab)

  def ask(passage, question):
    prediction = predict(passage, question, tokenizer, span_model)
    return prediction.answer, timing_line(
        prediction, span_model.sequence_length, DEFAULT_THREADS)
  return ask


def ask_task_library(python, model, questions, directory):
  """The Task Library's answers ([{answer, start, end, logit}]) to the
  questions, from android_bench/qa_app/task_library.py in its own venv."""
  path = os.path.join(directory, "task_library_questions.json")
  write_file(path, json.dumps([{"question": q["question"],
                                "passage": q["passage"]} for q in questions]))
  script = os.path.join(REPO, "android_bench", "qa_app", "task_library.py")
  result = subprocess.run([python, script, "--model", model, "--questions",
                           path, "--max_seq_length",
                           str(squad.MAX_SEQ_LENGTH)],
                          capture_output=True, text=True,
                          preexec_fn=die_with_parent)
  if result.returncode != 0:
    raise RuntimeError("the Task Library's BertQuestionAnswerer failed: "
                       f"{result.stderr.strip().splitlines()[-1:]}")
  return json.loads(result.stdout)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(AppOptions)
  check_app_flags(options, REQUIRED, ("model", "vocab"), "questions")
  python = options.task_library_python
  from tfmodels.data.squad_metrics import (exact_match_score, f1_score,
                                           normalize_answer)
  try:
    questions = pick_questions(options.qa_dir, options.questions)
  except (squad.SquadError, StopIteration, OSError) as e:
    sys.exit(f"error: --qa_dir {options.qa_dir}: no readable dev split ({e})")
  from android_bench.qa_app import QaAppError
  from converters.metadata import associated_file
  try:  # before anything is written: the model and its vocabulary
    ask = twin(options.model, options.vocab)
  except QaAppError as e:
    sys.exit(f"error: {e}")
  out = options.output_dir
  os.makedirs(os.path.join(out, "passages"), exist_ok=True)
  model, vocab = os.path.join(out, MODEL_NAME), os.path.join(out, VOCAB_NAME)
  _copy(options.model, model)
  if options.vocab:
    _copy(options.vocab, vocab)
  else:  # the one the model carries (twin() found it)
    write_file(vocab, associated_file(options.model))
  write_file(os.path.join(out, "README.md"),
             readme(os.path.abspath(out), options.model))
  print(f"app files: {model}, {vocab}", flush=True)
  answers = []
  for i, q in enumerate(questions, 1):
    write_file(os.path.join(out, "passages", f"{q['id']}.txt"), q["passage"])
    answer, timing = ask(q["passage"], q["question"])
    answers.append(dict(
        q, answer=answer, timing=timing,
        exact_match=max(float(exact_match_score(answer, g))
                        for g in q["answers"]),
        f1=max(f1_score(answer, g) for g in q["answers"])))
    print(f"[{i}/{len(questions)}] {q['question']}\n    twin: {answer!r}  "
          f"gold: {q['answers'][0]!r}  ({timing})", flush=True)
  task_library = None
  if python:
    try:
      library = ask_task_library(python, model, questions, out)
    except RuntimeError as e:
      sys.exit(f"error: {e}")
    for a, t in zip(answers, library):
      a["task_library_answer"] = t["answer"]
    task_library = {"api": "tflite_support.task.text.BertQuestionAnswerer",
                    "agree": sum(normalize_answer(a["answer"]) ==
                                 normalize_answer(a["task_library_answer"])
                                 for a in answers)}
    print(f"Task Library: {task_library['agree']} of {len(answers)} "
          "answers the same as the twin's", flush=True)
  write_file(os.path.join(out, ANSWERS), json.dumps(
      {"model": os.path.abspath(options.model), "answers": answers,
       "task_library": task_library}, indent=2))


def run():
  app.run(main)


if __name__ == "__main__":
  run()
