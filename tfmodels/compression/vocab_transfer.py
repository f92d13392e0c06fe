"""Move a model to a smaller vocabulary, its word table started from its own.

A carved student keeps its teacher's 30,522-piece table, the largest part of
the file a phone downloads. A vocabulary learned from the task's text
(`data.vocab_learning`, 5-8k pieces) holds most of it: each student piece
the teacher has keeps the teacher's vector exactly; any other starts as the
mean of the teacher pieces that spell it (the teacher's greedy WordPiece of
its text, a `##` piece continuing a word), as vocabulary-transfer methods
start new tokens; a piece the teacher cannot spell gets [UNK]'s vector.
Everything else in the model is copied. Works on a plain table [V, E] and on
a low-rank one ([V, r] x [r, E]: the [V, r] rows are transferred, their
products follow linearly).
"""

import numpy as np

from tfmodels.compression.carve import WORD_TABLE

UNKNOWN = "[UNK]"
# A model's word table by its layer's form: plain, then low-rank.
TABLE_VARIABLES = (WORD_TABLE + "/embeddings", WORD_TABLE + "/table")


def spelling(piece, teacher):
  """The teacher pieces spelling `piece` (greedy longest match first), or
  None when some character has no teacher piece."""
  if piece in teacher:
    return [piece]
  continuing = piece.startswith("##")
  text = piece[2:] if continuing else piece
  pieces, start = [], 0
  while start < len(text):
    for end in range(len(text), start, -1):
      candidate = ("##" if start > 0 or continuing else "") + text[start:end]
      if candidate in teacher:
        pieces.append(candidate)
        start = end
        break
    else:
      return None
  return pieces or None


def transferred_rows(table, teacher_vocab, student_vocab):
  """(rows [len(student_vocab), d], facts) from the teacher's `table` rows.

  facts: how many pieces were kept exactly, composed from several, or
  started as [UNK].
  """
  index = {p: i for i, p in enumerate(teacher_vocab)}
  if UNKNOWN not in index:
    raise ValueError(f"the teacher vocabulary has no {UNKNOWN}")
  table = np.asarray(table)
  rows = np.empty((len(student_vocab), table.shape[1]), table.dtype)
  facts = {"kept": 0, "composed": 0, "unknown": 0}
  for i, piece in enumerate(student_vocab):
    pieces = spelling(piece, index)
    if pieces is None:
      rows[i] = table[index[UNKNOWN]]
      facts["unknown"] += 1
    elif len(pieces) == 1:
      rows[i] = table[index[pieces[0]]]
      facts["kept"] += 1
    else:
      rows[i] = table[[index[p] for p in pieces]].mean(axis=0)
      facts["composed"] += 1
  return rows, facts


def word_table_variable(values, config):
  """The name of the word table's [V, d] variable in {name: array}.
  ValueError for a table that is not a plain or low-rank one."""
  name = next((n for n in TABLE_VARIABLES if n in values), None)
  if name is None or config.mixed_vocab_size:
    raise ValueError(f"{config.name}: no plain or low-rank word table "
                     "(Kronecker and mixed-vocabulary tables are not moved)")
  return name


def rebuilt_with_rows(model, config, head, name, rows, new_config):
  """`model` rebuilt from `new_config` with the table variable `name` set
  to `rows` and every other variable copied."""
  from tfmodels.checkpoints.model_dir import build_model
  from tfmodels.checkpoints.weight_mapping import Entry, assign
  values = {w.name.split(":")[0]: w.numpy() for w in model.weights}
  values[name] = rows
  rebuilt = build_model(new_config, head)
  names = [w.name.split(":")[0] for w in rebuilt.weights]
  assign(rebuilt, [Entry(n, n) for n in names], {n: values[n] for n in names},
         source=f"{config.name} with a {new_config.vocab_size}-piece "
         "vocabulary")
  return rebuilt


def with_vocabulary(model, config, head, teacher_vocab, student_vocab):
  """(student model, its config, facts): `model` reading `student_vocab`.

  Raises ValueError for a model whose word table is not a plain or
  low-rank one (Kronecker, mixed-vocabulary) or whose head predicts the
  vocabulary (a pre-trainer's masked LM).
  """
  check_movable(config, head, teacher_vocab)
  values = {w.name.split(":")[0]: w.numpy() for w in model.weights}
  name = word_table_variable(values, config)
  rows, facts = transferred_rows(values[name], teacher_vocab, student_vocab)
  student_config = config.replace(vocab_size=len(student_vocab))
  student = rebuilt_with_rows(model, config, head, name, rows,
                              student_config)
  facts.update(teacher_vocab_size=len(teacher_vocab),
               vocab_size=len(student_vocab), table=name)
  return student, student_config, facts


def check_movable(config, head, teacher_vocab):
  """ValueError unless a model of `config` and `head` reading
  `teacher_vocab` can move to another vocabulary."""
  if head.kind == "pretrainer":
    raise ValueError("a pre-trainer's masked-LM head predicts its "
                     "vocabulary; move a task model")
  if len(teacher_vocab) != config.vocab_size:
    raise ValueError(f"the model's vocab_size is {config.vocab_size}, its "
                     f"vocabulary has {len(teacher_vocab)} pieces")
