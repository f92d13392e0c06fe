"""More training inputs for a teacher to label, made from the task's own text.

    python -m tfmodels.data.augment --task squad --data_dir data/wordnet_qa \\
        --teacher_dir runs/teacher_qa --vocab_file vocab.txt --copies 4 \\
        --output_dir /tmp/qa_augmented

TinyBERT's word replacement (Jiao et al., 2020): each copy of a training
example has every word, with probability --replace_share (0.4), swapped for
one of its --neighbours (15) nearest words. The neighbours are read from the
teacher's own word table (cosine between the rows of whole-word pieces), so
a replacement is a word the teacher already places near the original; a
word the vocabulary spells in several pieces stays as it is. The copies are
worth as much as the teacher's soft targets on them: the student learns
them through distillation (`finetune --task_kd`).

QA: the question and the context outside every answer span are replaced
(the answers' words never are) and each answer_start is moved with the text
before it, so every span still points at its answer; spam: the sentence,
its label kept; CoNLL (tagging, intent_slot): a token's word, its tags and
the sentence's label kept, one word for one. --output_dir gets train (the originals, then the copies)
and every other split of --data_dir as it is (dev, a held-out slice,
counts.json), so a run reads it as it would read --data_dir.
"""

import dataclasses
import json
import os
import random
import re
import shutil
import sys

from absl import app
import numpy as np

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.flag_checks import refuse_nonfinite_floats

TASKS = {"squad": "train.json", "spam": "train.tsv",
         "tagging": "train.conll", "intent_slot": "train.conll"}
WORD = re.compile(r"[A-Za-z]+")
FACTS = "augment.json"
# The encoder's plain word table (compression.carve.WORD_TABLE's).
TABLE = "embeddings/word_embeddings/embeddings"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AugmentOptions:
  task: str = option("squad", "The task's data format.", choices=tuple(TASKS))
  data_dir: str = option(None, "The task's files; train is augmented, the "
                         "rest copied.", required=True)
  teacher_dir: str = option(None, "The model whose word table gives each "
                            "word's neighbours (the teacher that labels "
                            "the copies).", required=True)
  vocab_file: str = option(None, "The teacher's vocabulary.", required=True)
  copies: int = option(4, "Augmented copies of each training example.")
  replace_share: float = option(0.4, "Chance that a word of a copy is "
                                "replaced.")
  neighbours: int = option(15, "Nearest words a replacement is drawn from.")
  seed: int = option(7, "Which words are replaced, and by which.")
  output_dir: str = option(None, "Where the augmented data goes.",
                           required=True)


def whole_words(vocab):
  """{word: row} of the vocabulary's whole-word pieces (letters only, at
  least two of them): the words that can be replaced and replace."""
  return {piece: i for i, piece in enumerate(vocab)
          if len(piece) > 1 and piece.isascii() and piece.isalpha()}


def nearest_words(table, words, wanted, k, block=1024):
  """{word: its k nearest other words} for each of `wanted` in `words`
  ({word: row of table}), by cosine between the table's rows."""
  names = list(words)
  rows = np.asarray(table, np.float32)[[words[w] for w in names]]
  rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
  index = {w: i for i, w in enumerate(names)}
  asked = [w for w in dict.fromkeys(wanted) if w in index]
  k = min(k, len(names) - 1)
  result = {}
  for start in range(0, len(asked), block):
    chunk = asked[start:start + block]
    ids = [index[w] for w in chunk]
    similarity = rows[ids] @ rows.T
    similarity[np.arange(len(ids)), ids] = -np.inf  # never itself
    top = np.argpartition(-similarity, k, axis=1)[:, :k]
    for word, row, candidates in zip(chunk, similarity, top):
      order = candidates[np.argsort(-row[candidates])]
      result[word] = [names[i] for i in order]
  return result


def _cased_like(word, original):
  if original.isupper() and len(original) > 1:
    return word.upper()
  return word.capitalize() if original[0].isupper() else word


def replaced(text, neighbours, share, rng, keep=()):
  """(text with words replaced, where each character of `text` went).

  Each word with neighbours is replaced with probability `share` by one of
  them (its case pattern kept), unless it overlaps a (start, end) range of
  `keep`. The second value maps an offset of `text` (0..len) to the new
  text's, so spans outside the replaced words can be moved.
  """
  pieces, moved, at, shift = [], [], 0, 0
  for match in WORD.finditer(text):
    start, end = match.span()
    choices = neighbours.get(match.group().lower())
    if (not choices or rng.random() >= share or
        any(start < b and a < end for a, b in keep)):
      continue
    new = _cased_like(rng.choice(choices), match.group())
    pieces += [text[at:start], new]
    moved += range(at + shift, start + shift)
    moved += [start + shift] * (end - start)  # into the new word: its start
    shift += len(new) - (end - start)
    at = end
  pieces.append(text[at:])
  moved += range(at + shift, len(text) + shift + 1)
  return "".join(pieces), moved


def augmented_paragraph(paragraph, copy, neighbours, share, rng):
  """A copy of a SQuAD paragraph: its context and questions replaced, every
  answer kept and its answer_start moved."""
  context = paragraph["context"]
  spans = [(a["answer_start"], a["answer_start"] + len(a["text"]))
           for qa in paragraph["qas"] for a in qa.get("answers", ())]
  new_context, moved = replaced(context, neighbours, share, rng, spans)
  qas = []
  for qa in paragraph["qas"]:
    qas.append(dict(
        qa, id=f"{qa['id']}#aug{copy}",
        question=replaced(qa["question"], neighbours, share, rng)[0],
        answers=[dict(a, answer_start=moved[a["answer_start"]])
                 for a in qa.get("answers", ())]))
  return dict(paragraph, context=new_context, qas=qas)


def augment_squad(data, copies, neighbours, share, rng):
  """The dataset with `copies` replaced copies of each article after the
  originals."""
  articles = list(data["data"])
  for copy in range(1, copies + 1):
    for article in data["data"]:
      articles.append(dict(article, title=f"{article.get('title', '')}"
                           f"#aug{copy}", paragraphs=[
                               augmented_paragraph(p, copy, neighbours,
                                                   share, rng)
                               for p in article["paragraphs"]]))
  return dict(data, data=articles)


def augment_rows(lines, copies, neighbours, share, rng):
  """TSV lines (header first, `text<TAB>label`): the originals, then
  `copies` copies of each row with its text replaced."""
  header, rows = lines[0], [line.rstrip("\n") for line in lines[1:]
                            if line.strip()]
  out = [header.rstrip("\n")] + rows
  for _ in range(copies):
    for row in rows:
      text, label = row.rsplit("\t", 1)
      out.append(replaced(text, neighbours, share, rng)[0] + "\t" + label)
  return "\n".join(out) + "\n"


def augment_conll(text, copies, neighbours, share, rng):
  """CoNLL sentences (blank-line separated, `word<TAB>tags`, `#` lines
  kept): the originals, then `copies` copies with words replaced."""
  blocks = [b.strip("\n") for b in re.split(r"\n[ \t]*\n", text)
            if b.strip()]
  out = list(blocks)
  for _ in range(copies):
    for block in blocks:
      lines = []
      for line in block.split("\n"):
        if line and not line.startswith("#"):
          word, sep, tags = line.partition("\t")
          line = replaced(word, neighbours, share, rng)[0] + sep + tags
        lines.append(line)
      out.append("\n".join(lines))
  return "\n\n".join(out) + "\n", len(blocks), len(out)


def texts_of(task, source):
  """The training texts of a task's train file (words are taken here)."""
  if task == "squad":
    return [t for article in source["data"]
            for p in article["paragraphs"]
            for t in [p["context"]] + [qa["question"] for qa in p["qas"]]]
  if task == "spam":
    return [line.rsplit("\t", 1)[0] for line in source[1:]]
  return [line.partition("\t")[0] for line in source.split("\n")
          if line and not line.startswith("#")]


def read_train(task, data_dir):
  from tfmodels.data.heldout import source_file
  from tfmodels.data.squad import load_json
  from tfmodels.data.text_io import open_text
  path = source_file(task, data_dir, "train")
  if not os.path.isfile(path):
    raise ValueError(f"--data_dir {data_dir}: no {TASKS[task]}[.gz]")
  if task == "squad":
    return load_json(path)
  with open_text(path) as f:
    return f.readlines() if task == "spam" else f.read()


def teacher_table(teacher_dir):
  """The teacher's word table [V, d]; ValueError naming --teacher_dir for a
  model without a plain one (a low-rank or Kronecker table is a student's,
  not a teacher's)."""
  from tfmodels.checkpoints.model_dir import load_model_dir
  model, _, _ = load_model_dir(teacher_dir)
  table = next((w for w in model.weights if w.name.split(":")[0] == TABLE),
               None)
  if table is None:
    raise ValueError(f"--teacher_dir {teacher_dir}: no plain word table "
                     f"({TABLE}) to take neighbours from")
  return table.numpy()


def write_augmented(options, out):
  """Writes the augmented train and copies the other splits; returns the
  facts (examples before and after, words with neighbours)."""
  from tfmodels.staging import write_file
  from tfmodels.tokenization import load_vocab
  source = read_train(options.task, options.data_dir)
  vocab = list(load_vocab(options.vocab_file))
  table = teacher_table(options.teacher_dir)
  if len(table) != len(vocab):
    raise ValueError(f"--vocab_file {options.vocab_file}: {len(vocab)} "
                     f"pieces, the teacher's word table {len(table)} rows")
  wanted = {w.lower() for t in texts_of(options.task, source)
            for w in WORD.findall(t)}
  neighbours = nearest_words(table, whole_words(vocab), wanted,
                             options.neighbours)
  rng = random.Random(options.seed)
  if options.task == "squad":
    data = augment_squad(source, options.copies, neighbours,
                         options.replace_share, rng)
    text = json.dumps(data)
    examples = [sum(len(p["qas"]) for a in d["data"] for p in a["paragraphs"])
                for d in (source, data)]
  elif options.task == "spam":
    text = augment_rows(source, options.copies, neighbours,
                        options.replace_share, rng)
    examples = [len(source) - 1, text.count("\n") - 1]
  else:
    text, *examples = augment_conll(source, options.copies, neighbours,
                                    options.replace_share, rng)
  write_file(os.path.join(out, TASKS[options.task]), text)
  for name in sorted(os.listdir(options.data_dir)):
    path = os.path.join(options.data_dir, name)
    if os.path.isfile(path) and not name.startswith(("train.", ".")):
      shutil.copyfile(path, os.path.join(out, name))
  facts = {"task": options.task, "examples": examples[0],
           "augmented_examples": examples[1], "copies": options.copies,
           "replace_share": options.replace_share,
           "neighbours": options.neighbours,
           "words": len(wanted), "words_with_neighbours": len(neighbours)}
  write_file(os.path.join(out, FACTS), json.dumps(facts, indent=1))
  return facts


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  refuse_nonfinite_floats()
  options = from_flags(AugmentOptions)
  if options.copies < 1:
    sys.exit(f"error: --copies must be >= 1, got {options.copies}")
  if not 0 < options.replace_share <= 1:
    sys.exit("error: --replace_share must be in (0, 1], got "
             f"{options.replace_share}")
  if options.neighbours < 1:
    sys.exit(f"error: --neighbours must be >= 1, got {options.neighbours}")
  from tfmodels.staging import OutputError, check_output, staged_directory
  try:
    check_output(options.output_dir, "--output_dir", True, "augment",
                 inputs=(("--data_dir", options.data_dir),
                         ("--teacher_dir", options.teacher_dir)))
    with staged_directory(options.output_dir, "augment",
                          "--output_dir") as out:
      facts = write_augmented(options, out)
  except (OSError, OutputError, ValueError) as e:
    sys.exit(f"error: {e}")
  print(f"{options.output_dir}: {facts['examples']} -> "
        f"{facts['augmented_examples']} training examples ({options.task}; "
        f"{facts['words_with_neighbours']} of {facts['words']} words have "
        "neighbours)")


def define_command_flags():
  """Defines the flags, when run as a command only (importing the module
  for its functions defines none)."""
  define_flags(AugmentOptions)


def run():
  define_command_flags()
  app.run(main)


if __name__ == "__main__":
  run()
