"""Classify texts with the TFLite Task Library's BertNLClassifier, the API
an Android app calls on our classifiers (`tflite_support.task.text`, the
same C++ core as the Android and iOS libraries).

    .venv-task/bin/python android_bench/classifier_app/task_library.py \
        --model app_assets/classifier_model.tflite --texts texts.json

--texts is a JSON list of strings; prints a JSON list of {"label",
"score", "scores": {label: score}} per text (the best category and every
category's score). BertNLClassifier finds everything in the model: the
vocab.txt and labels.txt its metadata carries, the `ids` / `mask` /
`segment_ids` inputs and `probability` output by their metadata names,
and the sequence length from the `ids` input's shape (it pads or cuts
every text to it).

tflite-support pins protobuf < 4, which TensorFlow cannot live with, so
this runs in its own virtual environment (`make setup` makes .venv-task)
and imports nothing of this project: a plain script, not a module.
"""

import argparse
import json
import sys


def _first_line(error):
  return str(error).splitlines()[0] if str(error) else type(error).__name__


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", required=True,
                      help="classifier .tflite with BertNLClassifier "
                      "metadata")
  parser.add_argument("--texts", required=True,
                      help="JSON list of strings")
  args = parser.parse_args()
  try:
    with open(args.texts, encoding="utf-8") as f:
      texts = json.load(f)
  except (OSError, ValueError) as e:
    sys.exit(f"error: --texts {args.texts}: {e}")
  if not isinstance(texts, list) or not all(isinstance(t, str)
                                            for t in texts):
    sys.exit(f"error: --texts {args.texts}: expected a JSON list of strings")
  from tflite_support.task.text import BertNLClassifier
  try:
    classifier = BertNLClassifier.create_from_file(args.model)
  except (RuntimeError, ValueError) as e:
    sys.exit(f"error: --model {args.model}: the Task Library refused it: "
             f"{_first_line(e)}")
  out = []
  for text in texts:
    try:
      result = classifier.classify(text)
    except (RuntimeError, ValueError) as e:
      sys.exit(f"error: --model {args.model}: the Task Library could not "
               f"run it: {_first_line(e)}")
    categories = result.classifications[0].categories  # in output order
    scores = {c.category_name: c.score for c in categories}
    best = max(categories, key=lambda c: c.score) if categories else None
    out.append({"label": best.category_name if best else None,
                "score": best.score if best else None,
                "scores": scores})
  json.dump(out, sys.stdout)
  print()


if __name__ == "__main__":
  main()
