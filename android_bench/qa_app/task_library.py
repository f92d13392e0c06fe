"""Answer questions with the TFLite Task Library's BertQuestionAnswerer,
the API an Android app calls on our QA models (`tflite_support.task.text`,
the same C++ core as the Android and iOS libraries).

    .venv-task/bin/python android_bench/qa_app/task_library.py \
        --model app_assets/qa_model.tflite --questions questions.json \
        --max_seq_length "$L"  # BertQuestionAnswerer's fixed length

--questions is a JSON list of {"question", "passage"}; prints a JSON list
of {"answer", "start", "end", "logit"} (the Task Library's best span per
question; the answer is "" when it found none). The Task Library tokenizes
with the vocab.txt the model's metadata carries and takes no other, so its
vocabulary cannot mismatch the model (the twin checks a given one).

tflite-support pins protobuf < 4, which TensorFlow cannot live with, so
this runs in its own virtual environment (`make setup` makes .venv-task)
and imports nothing of this project: a plain script, not a module.
"""

import argparse
import json
import sys


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", required=True,
                      help="QA .tflite with Task Library metadata")
  parser.add_argument("--questions", required=True,
                      help="JSON list of {question, passage}")
  parser.add_argument("--max_seq_length", type=int, required=True,
                      help="BertQuestionAnswerer's kMaxSeqLen, the [1, L] it "
                      "always fills (the caller's "
                      "tfmodels.data.squad.MAX_SEQ_LENGTH)")
  args = parser.parse_args()
  try:
    with open(args.questions, encoding="utf-8") as f:
      questions = json.load(f)
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and isinstance(q.get("question"), str) and
        isinstance(q.get("passage"), str) for q in questions):
      sys.exit(f"error: --questions {args.questions}: expected a JSON list "
               "of {question, passage} strings")
  except (OSError, ValueError) as e:
    sys.exit(f"error: --questions {args.questions}: {e}")
  from tflite_support.task.text import BertQuestionAnswerer
  try:
    answerer = BertQuestionAnswerer.create_from_file(args.model)
  except (RuntimeError, ValueError) as e:
    sys.exit(f"error: --model {args.model}: the Task Library refused it: "
             f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
  out = []
  for q in questions:
    try:
      answers = answerer.answer(q["passage"], q["question"]).answers
    except RuntimeError as e:  # e.g. "Bad StatusOr access"
      sys.exit(f"error: --model {args.model}: the Task Library could not "
               f"run it ({e}); its BertQuestionAnswerer feeds [1, "
               f"{args.max_seq_length}] inputs, so the model must take "
               f"that length (convert_tflite --max_seq_length "
               f"{args.max_seq_length})")
    best = answers[0] if answers else None
    out.append({"answer": best.text if best else "",
                "start": best.pos.start if best else None,
                "end": best.pos.end if best else None,
                "logit": best.pos.logit if best else None})
  json.dump(out, sys.stdout)
  print()


if __name__ == "__main__":
  main()
