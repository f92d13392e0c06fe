"""The official SQuAD v1.1 and v2.0 scores: exact match and token F1.

Re-implements `evaluate-v1.1.py` and `evaluate-v2.0.py` (same normalisation,
same max over gold answers, percentages) so our numbers compare with
published ones:

    python -m tfmodels.data.squad_metrics dev-v1.1.json predictions.json
    # {"exact_match": <EM %>, "f1": <F1 %>, "total": <questions>}

v2.0 scoring differs only for no-answer questions: their gold is the empty
string, and an empty prediction scores 1 against it (EM and F1); the result
adds `HasAns_*` and `NoAns_*` breakdowns. Keys are the official scripts':
`exact_match` (v1.1) or `exact` (v2.0), `f1`, `total`.
A question without a prediction scores 0 (v1.1 behaviour).
"""

import collections
import json
import re
import string
import sys

from absl import app, logging

from tfmodels.data.squad import SquadData, SquadError, load_json, parse_squad

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s):
  """Lower-case, drop punctuation and articles, collapse whitespace."""
  s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match_score(prediction, ground_truth):
  """Exact match after normalisation (bool); the same in v1.1 and v2.0."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction, ground_truth):
  """v1.1 token F1 (0 when no normalised tokens are shared)."""
  return _f1(normalize_answer(prediction).split(),
             normalize_answer(ground_truth).split())


def compute_f1(a_gold, a_pred):
  """v2.0 token F1: when either side has no tokens, 1 iff both have none."""
  gold = normalize_answer(a_gold).split()
  pred = normalize_answer(a_pred).split()
  if not gold or not pred:
    return float(gold == pred)
  return _f1(pred, gold)


def _f1(pred_tokens, gold_tokens):
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def _questions(dataset):
  """(examples, is v2 by the file's version) from any accepted dataset form."""
  if isinstance(dataset, SquadData):
    return dataset.examples, dataset.version.lstrip("v").startswith("2")
  if isinstance(dataset, dict):
    data = parse_squad(dataset, strict=False)
    return data.examples, data.version.lstrip("v").startswith("2")
  dataset = list(dataset)
  if dataset and isinstance(dataset[0], dict):  # the file's "data" list
    return parse_squad({"data": dataset}, strict=False).examples, False
  return dataset, False


def evaluate(dataset, predictions, version_2=None):
  """Scores {qas_id: answer text} against gold answers, in percent.

  Args:
    dataset: a SQuAD JSON object, its "data" list, `SquadData`, or a list of
      `SquadExample`.
    predictions: dict qas_id -> predicted text ('' predicts no answer).
    version_2: score as v2.0; None: when the file says so or any question
      is impossible.

  Returns:
    the official scripts' keys: v1.1 `exact_match`, `f1` (and `total`);
    v2.0 `exact`, `f1`, `total` and `HasAns_*` / `NoAns_*` of those for the
    groups that occur.
  """
  examples, says_v2 = _questions(dataset)
  if not isinstance(predictions, dict):
    raise SquadError("predictions must be a JSON object of id -> text")
  if version_2 is None:
    version_2 = says_v2 or any(e.is_impossible for e in examples)
  exact, f1, missing = {}, {}, 0
  for example in examples:
    qas_id = example.qas_id
    if qas_id not in predictions:
      missing += 1
      exact[qas_id] = f1[qas_id] = 0.0
      continue
    prediction = predictions[qas_id]
    if not isinstance(prediction, str):
      raise SquadError(f"prediction for question {qas_id!r} is "
                       f"{type(prediction).__name__}, not a string")
    if version_2:
      golds = [a for a in example.all_answers if normalize_answer(a)] or [""]
      exact[qas_id] = max(float(exact_match_score(prediction, g))
                          for g in golds)
      f1[qas_id] = max(compute_f1(g, prediction) for g in golds)
    elif not example.all_answers:
      raise SquadError(f"question {qas_id!r} has no gold answer; score it "
                       "as v2.0")
    else:
      exact[qas_id] = max(float(exact_match_score(prediction, g))
                          for g in example.all_answers)
      f1[qas_id] = max(f1_score(prediction, g) for g in example.all_answers)
  if missing:
    logging.warning("%d question(s) have no prediction; they score 0",
                    missing)
  em_key = "exact" if version_2 else "exact_match"
  result = _summary(exact, f1, [e.qas_id for e in examples], em_key)
  if version_2:
    for prefix, has_answer in (("HasAns_", True), ("NoAns_", False)):
      ids = [e.qas_id for e in examples
             if bool(e.all_answers) == has_answer]
      if ids:
        result.update((prefix + k, v)
                      for k, v in _summary(exact, f1, ids, em_key).items())
  return result


def _summary(exact, f1, ids, em_key):
  total = len(ids)
  scale = 100.0 / total if total else 0.0
  return {em_key: scale * sum(exact[i] for i in ids),
          "f1": scale * sum(f1[i] for i in ids),
          "total": total}


def main(argv):
  if len(argv) != 3:
    raise app.UsageError("usage: python -m tfmodels.data.squad_metrics "
                         "DATA.json PRED.json")
  data_file, pred_file = argv[1:]
  try:
    data = parse_squad(load_json(data_file), data_file, strict=False)
    predictions = load_json(pred_file)
  except SquadError as e:
    sys.exit(f"error: {e}")
  try:
    result = evaluate(data, predictions)
  except SquadError as e:
    sys.exit(f"error: {pred_file}: {e}")
  v2 = "HasAns_total" in result or "NoAns_total" in result
  print(json.dumps(result, indent=2 if v2 else None))  # as the official ones


def run():
  app.run(main)


if __name__ == "__main__":
  run()
