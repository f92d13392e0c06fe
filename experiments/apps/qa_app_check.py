"""Hand a converted QA file to the Android app, and ask it as the app does.

    python -m experiments.apps.qa_app_check --model pkt_qa_int8.tflite \
        --vocab data/vocab/uncased_vocab.txt --qa_dir data/wordnet_qa \
        --questions 3 --output_dir demo_output/qa/app_assets

Copies the model and vocabulary into --output_dir under the names the app
reads (qa_model.tflite, vocab.txt; the Gradle build's -PqaModel / -PqaVocab
point there), with a README.md saying what the model is (the source file,
its model card when convert_tflite wrote one beside it: checkpoint,
encoder, length, score and the data it was scored on; the --qa_dir asked;
the --teacher and --run_report it is told of) and how to build the app
with these files, then answers real held-out questions with the app's
Python twin (what `python -m android_bench.qa_app` runs, with the model
and tokenizer loaded once: a process per question spent seconds importing
TensorFlow for milliseconds of model) and writes answers.json: question,
passage, gold answers, the twin's answer, its exact match / F1 and its
model time. Each passage is written under passages/ for the command-line
twin.

A dynamic-length model (convert_tflite's default) is asked twice: as the
app runs it (each window at the smallest multiple of 32 tokens that holds
it) and at its default length, as a fixed file runs: answers.json keeps
both answers and model times per question (the better of two runs each,
so neither pays a first run's set-up) and their medians (`latency`), and
`dev` scores --dev_questions held-out questions both ways.
"""

import dataclasses
import json
import os
import shutil
import sys

from absl import app

from android_bench.qa_app import DEFAULT_THREADS
from experiments.apps.app_checks import (AppReadmeOptions, run_task_library,
                                    check_app_flags, model_facts)
from experiments.common.paths import REPO
from experiments.apps.qa_questions import pick_questions, same_answers, scores
from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data import squad
from tfmodels.staging import staged_path, write_file

@dataclasses.dataclass(frozen=True, kw_only=True)
class AppOptions(AppReadmeOptions):
  """qa_app_check's flags; REQUIRED are checked by `main` (one line each,
  where absl's check prints two)."""
  model: str | None = option(None, "Converted QA model (.tflite).")
  vocab: str | None = option(None, "Its vocab.txt (default: the one the "
                             "model carries; refused unless it is that "
                             "one).")
  qa_dir: str | None = option(None, "SQuAD-format directory; questions come "
                              "from its dev split.")
  questions: int = option(3, "Questions to ask.")
  dev_questions: int = option(
      200, "Dev questions scored through the twin (F1 / exact match), at "
      "the lengths it picks and at the default length; 0: none.")
  threads: int = option(DEFAULT_THREADS, "CPU threads of the twin's "
                        "interpreter (the app's default).")
  output_dir: str | None = option(None, "Where the app's files go.")
  task_library_python: str | None = option(
      None, "Python of the virtual environment holding tflite-support "
      "(`make setup` makes .venv-task): with it the same questions also go "
      "to the TFLite Task Library's BertQuestionAnswerer.")


define_flags(AppOptions)
REQUIRED = ("model", "qa_dir", "output_dir")

MODEL_NAME, VOCAB_NAME = "qa_model.tflite", "vocab.txt"
ANSWERS = "answers.json"


def _copy(source, target):
  with staged_path(target) as temp:
    shutil.copyfile(source, temp)


def readme(output_dir, source, *, qa_dir, length, dynamic, asked,
           library=False, teacher=None, run_report=None):
  """What the model is (from the file, its model card and the flags) and
  how to build the app with these files, or push them to a phone."""
  where = os.path.abspath(output_dir)
  if where.startswith(REPO + os.sep):  # as seen from android_bench/qa_app
    where = "$PWD/../../" + os.path.relpath(where, REPO)
  fit = ("the file takes any length up to it: the app runs each window at "
         "the smallest multiple of 32 tokens that holds it" if dynamic else
         "a fixed-length file: every window is padded to it")
  facts = model_facts(
      source, task="extractive question answering (`squad`: a question "
      "and a passage in, the answer's span out)", length=length,
      length_words=f"the longest window of question and passage; {fit}",
      asked=f"{asked} dev questions of `{os.path.abspath(qa_dir)}` "
      "answered by the app's Python twin" + (
          " and the Task Library's BertQuestionAnswerer" if library else "")
      + " with these files",
      teacher=teacher, run_report=run_report)
  return f"""# The QA app's model

`{MODEL_NAME}` is `{os.path.basename(source)}`, copied from
`{os.path.abspath(source)}`, and `{VOCAB_NAME}` the vocabulary it
carries: the names the app reads from its assets.

## What it is

{facts}

## Build the app with them

Build the APK with them (docs/android_app.md, "The Android QA app"):

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


def twin(model, vocab=None, threads=DEFAULT_THREADS, fit_length=True):
  """ask(passage, question) -> Prediction with the app's twin, its model
  and tokenizer loaded once (`vocab`: checked against the one the model
  carries, which is used without it; QaAppError). `ask.span_model` is the
  model; `fit_length` as SpanModel's."""
  from android_bench.qa_app import QaAppError
  from android_bench.qa_app.answering import predict, tokenizer_for
  from android_bench.qa_app.span_model import SpanModel
  try:
    span_model = SpanModel(model, num_threads=threads, fit_length=fit_length)
  except QaAppError as e:
    raise QaAppError(f"--model {e}") from None
  tokenizer = tokenizer_for(model, vocab)

  def ask(passage, question):
    return predict(passage, question, tokenizer, span_model)
  ask.span_model = span_model
  return ask


def timed(ask, question, runs=2):
  """The prediction of `ask` for `question` whose model time is the least
  of `runs` (the first run at a new length also sets the interpreter up)."""
  return min((ask(question["passage"], question["question"])
              for _ in range(runs)), key=lambda p: p.inference_s)


def dev_scores(asks, questions):
  """{"questions", and per way of asking (asks: {label: ask}) its F1 and
  exact match}: the twin's dev score."""
  result = {"questions": len(questions)}
  for label, ask in asks.items():
    answers = [ask(q["passage"], q["question"]).answer for q in questions]
    result[label] = dict(zip(("f1", "exact_match"),
                             scores(answers, questions)))
  return result


def ask_task_library(python, model, questions, directory):
  """The Task Library's answers ([{answer, start, end, logit}]) to the
  questions, from android_bench/qa_app/task_library.py in its own venv."""
  path = os.path.join(directory, "task_library_questions.json")
  write_file(path, json.dumps([{"question": q["question"],
                                "passage": q["passage"]} for q in questions]))
  return run_task_library(
      python, "qa_app", ["--model", model, "--questions", path,
                         "--max_seq_length", str(squad.MAX_SEQ_LENGTH)],
      "BertQuestionAnswerer")


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(AppOptions)
  check_app_flags(options, REQUIRED, ("model", "vocab"), "questions")
  for flag, least in (("dev_questions", 0), ("threads", 1)):
    if getattr(options, flag) < least:
      sys.exit(f"error: --{flag} {getattr(options, flag)}: must be >= {least}")
  python = options.task_library_python
  try:
    questions = pick_questions(options.qa_dir, options.questions)
    dev = (pick_questions(options.qa_dir, options.dev_questions)
           if options.dev_questions else [])
  except (squad.SquadError, StopIteration, OSError) as e:
    sys.exit(f"error: --qa_dir {options.qa_dir}: no readable dev split ({e})")
  from android_bench.qa_app import QaAppError
  from android_bench.qa_app.answering import timing_line
  from converters.metadata import associated_file
  try:  # before anything is written: the model and its vocabulary
    ask = twin(options.model, options.vocab, options.threads)
    fixed = (twin(options.model, options.vocab, options.threads, False)
             if ask.span_model.dynamic else None)
  except QaAppError as e:
    sys.exit(f"error: {e}")
  length = ask.span_model.sequence_length
  out = options.output_dir
  os.makedirs(os.path.join(out, "passages"), exist_ok=True)
  model, vocab = os.path.join(out, MODEL_NAME), os.path.join(out, VOCAB_NAME)
  _copy(options.model, model)
  if options.vocab:
    _copy(options.vocab, vocab)
  else:  # the one the model carries (twin() found it)
    write_file(vocab, associated_file(options.model))
  write_file(os.path.join(out, "README.md"), readme(
      os.path.abspath(out), options.model, qa_dir=options.qa_dir,
      length=length, dynamic=ask.span_model.dynamic, asked=len(questions),
      library=bool(python), teacher=options.teacher,
      run_report=options.run_report))
  print(f"app files: {model}, {vocab}", flush=True)
  answers = []
  for i, q in enumerate(questions, 1):
    write_file(os.path.join(out, "passages", f"{q['id']}.txt"), q["passage"])
    prediction = timed(ask, q)
    f1, em = scores([prediction.answer], [q])
    entry = dict(q, answer=prediction.answer, timing=timing_line(
        prediction, length, options.threads), exact_match=em / 100,
                 f1=f1 / 100, lengths=list(prediction.lengths),
                 model_ms=1e3 * prediction.inference_s)
    if fixed:
      at_length = timed(fixed, q)
      entry.update(fixed_answer=at_length.answer,
                   fixed_model_ms=1e3 * at_length.inference_s)
    answers.append(entry)
    print(f"[{i}/{len(questions)}] {q['question']}\n    twin: "
          f"{prediction.answer!r}  gold: {q['answers'][0]!r}  "
          f"({entry['timing']}" + (f"; {entry['fixed_model_ms']:.1f} ms at "
                                   f"{length}" if fixed else "") + ")",
          flush=True)
  latency = _latency(answers, options.threads, length)
  if latency.get("fixed_median_ms"):
    print(f"median model time per question: {latency['median_ms']:.2f} ms "
          f"at the lengths the twin picks, {latency['fixed_median_ms']:.2f} "
          f"ms at {length} ({100 * latency['share']:.0f}%); "
          f"{latency['same_answers']} of {len(answers)} answers the same",
          flush=True)
  dev_score = dev_scores({"picked": ask, **({"fixed": fixed} if fixed else {})},
                         dev) if dev else None
  if dev_score:
    print(f"dev F1 over {len(dev)} questions through the twin: " + ", ".join(
        f"{label} {s['f1']:.2f}" for label, s in dev_score.items()
        if label != "questions"), flush=True)
  task_library = None
  if python:
    try:
      library = ask_task_library(python, model, questions, out)
    except RuntimeError as e:
      sys.exit(f"error: {e}")
    for a, t in zip(answers, library):
      a["task_library_answer"] = t["answer"]
    # The library feeds every question at the file's default length: it is
    # checked against the twin at that length (an untrained model's padding
    # logits can move its n-best; a trained one's answers agree both ways).
    task_library = {"api": "tflite_support.task.text.BertQuestionAnswerer",
                    "length": length, "agree": same_answers(
                        [a.get("fixed_answer", a["answer"]) for a in answers],
                        [a["task_library_answer"] for a in answers])}
    print(f"Task Library: {task_library['agree']} of {len(answers)} "
          f"answers the same as the twin's at L = {length}", flush=True)
  write_file(os.path.join(out, ANSWERS), json.dumps(
      {"model": os.path.abspath(options.model), "answers": answers,
       "latency": latency, "dev": dev_score, "task_library": task_library},
      indent=2))


def _latency(answers, threads, length):
  """The medians of the questions' model times, at the picked lengths and
  (a dynamic model) at the default length, and how many answers agree."""
  import statistics
  latency = {"threads": threads, "length": length, "median_ms":
             statistics.median(a["model_ms"] for a in answers)}
  if answers and "fixed_model_ms" in answers[0]:
    latency["fixed_median_ms"] = statistics.median(
        a["fixed_model_ms"] for a in answers)
    latency["share"] = latency["median_ms"] / latency["fixed_median_ms"]
    latency["same_answers"] = same_answers(
        [a["answer"] for a in answers], [a["fixed_answer"] for a in answers])
  return latency


def run():
  app.run(main)


if __name__ == "__main__":
  run()
