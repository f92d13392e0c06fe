"""How much of WordNet QA a word table answers by itself (the library of
`experiments.lexical_probe`, which says why).

Each question asks which context word has a given definition; `probe`
answers with the context word whose word-piece vectors (averaged) lie
nearest, by cosine, to the average of the definition's word-piece vectors.
No encoder runs.
"""

import re

import numpy as np

WORD = re.compile(r"[\w'-]+")
# Function words never answer a WordNet QA question; in the definition
# they would pull every vector towards the same few pieces.
STOP_WORDS = frozenset(
    "a an the of or and to in by for with that which is as on at from be "
    "its it".split())


def _content_words(text):
  return [w for w in WORD.findall(text) if w.lower() not in STOP_WORDS]


def _mean_vector(table, ids):
  v = table[ids].mean(axis=0)
  return v / (np.linalg.norm(v) or 1.0)


def nearest_word(table, piece_ids, definition, context):
  """The context word nearest the definition (None if nothing is left).

  piece_ids: {word: its word pieces' ids}, for every content word.
  """
  query = [i for w in _content_words(definition) for i in piece_ids[w]]
  if not query:
    return None
  target = _mean_vector(table, query)
  best, best_score = None, -np.inf
  for word in _content_words(context):
    ids = piece_ids[word]
    if ids:
      score = float(_mean_vector(table, ids) @ target)
      if score > best_score:
        best, best_score = word, score
  return best


def probe(table, tokenizer, questions):
  """{"correct", "total", "exact_match"} over (definition, context,
  answer) triples; a word is right when it equals the answer, ignoring
  case. `tokenizer` is a `WordPieceTokenizer` of the table's vocabulary."""
  words = sorted({w for d, c, _ in questions
                  for w in _content_words(f"{d} {c}")})
  piece_ids = dict(zip(words, tokenizer.ids_batch(words)))
  correct = sum(
      (nearest_word(table, piece_ids, d, c) or "").lower() == a.lower()
      for d, c, a in questions)
  return {"correct": correct, "total": len(questions),
          "exact_match": 100.0 * correct / max(len(questions), 1)}


def read_questions(path):
  """(definition, context, answer) of each question of a WordNet QA file."""
  from tfmodels.data.squad import read_squad
  from tfmodels.data.wordnet_qa import QUESTION
  prefix = QUESTION.split("{")[0]
  questions = []
  for example in read_squad(path).examples:
    if not example.question.startswith(prefix):
      raise ValueError(f"{path}: question {example.qas_id} is not a WordNet "
                       f"QA question ({prefix!r}...)")
    questions.append((example.question[len(prefix):].rstrip("?"),
                      example.context, example.answer_text))
  if not questions:  # "0 of 0 (0.0%)" would read as a score
    raise ValueError(f"{path}: no questions to probe")
  return questions


def word_table(model_dir, rank=0):
  """The model's [vocab, E] word table, truncated to `rank` if > 0."""
  from tfmodels.checkpoints.model_dir import encoder_of, load_model_dir
  from tfmodels.distillation.low_rank_init import low_rank_factors
  model, config, _ = load_model_dir(model_dir)
  embeddings = encoder_of(model).get_layer("embeddings")
  if getattr(embeddings, "word_embeddings", None) is None:
    raise ValueError(f"--model_dir {model_dir}: {config.name} has no plain "
                     "word table (Kronecker or mixed-vocabulary embeddings)")
  table = embeddings.word_embeddings.embeddings.numpy().astype(np.float64)
  if rank:
    left, right, _ = low_rank_factors(table, rank)
    table = left @ right
  return table
