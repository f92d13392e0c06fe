"""Held-out questions for the QA app's checks, and their scores: what
`qa_app_check` asks the app's twin and `arm64_check` asks the ARM run (no
flags, so both commands can import it).

    questions = pick_questions("data/wordnet_qa", 20)
    f1, exact_match = scores(["Gambian", ...], questions)   # in points
"""

import os

from tfmodels.data import squad


def pick_questions(qa_dir, n):
  """n dev questions, spread over the file: (id, passage, question, answers).

  Real questions of the held-out split, so the twin's answers show what
  the fine-tuned model learned rather than what it memorised. Raises
  squad.SquadError, StopIteration (no dev file) or OSError.
  """
  path = next(os.path.join(qa_dir, f"dev.{ext}") for ext in
              ("json", "json.gz")
              if os.path.exists(os.path.join(qa_dir, f"dev.{ext}")))
  examples = squad.read_squad(path).examples
  step = max(1, len(examples) // n)
  return [{"id": e.qas_id, "passage": e.context, "question": e.question,
           "answers": list(e.all_answers)} for e in examples[::step][:n]]


def scores(answers, questions):
  """(F1, exact match) in points of `answers` (texts) against the gold
  answers of `questions`."""
  from tfmodels.data.squad_metrics import exact_match_score, f1_score
  f1 = [max(f1_score(a, g) for g in q["answers"])
        for a, q in zip(answers, questions)]
  em = [max(float(exact_match_score(a, g)) for g in q["answers"])
        for a, q in zip(answers, questions)]
  return 100 * sum(f1) / len(f1), 100 * sum(em) / len(em)


def same_answers(answers, others):
  """How many of two lists of answer texts agree, SQuAD-normalized."""
  from tfmodels.data.squad_metrics import normalize_answer
  return sum(normalize_answer(a) == normalize_answer(b)
             for a, b in zip(answers, others))
