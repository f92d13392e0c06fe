"""Learn a small WordPiece vocabulary for mixed-vocabulary students.

Zhao et al. learn a ~5K vocabulary (4,928 pieces) with BERT's WordPiece
algorithm, including every ASCII character as a piece so that no word is out
of vocabulary, and report that the 30K teacher vocabulary holds 93.9% of it.
This uses tensorflow-text's WordPiece learner with BERT's word splitting, then
adds each printable ASCII character both word-initial (`a`) and word-internal
(`##a`). A corpus file is plain text (a line a sentence), a SQuAD JSON file
(its contexts and questions) or a TSV with a header (its first column), so
a task's own text can shape the vocabulary. The command:

    python -m tfmodels.build_student_vocab \
        --corpus data/pretraining/train.txt.gz --vocab_size 5000 \
        --output /tmp/student_vocab.txt \
        --teacher_vocab data/vocab/uncased_vocab.txt
"""

import string

from tfmodels.staging import write_file
from tfmodels.tokenization import SPECIAL_TOKENS

PRINTABLE_ASCII = [c for c in string.printable if not c.isspace()]


def ascii_pieces():
  """Every printable ASCII character, alone and as a `##` continuation."""
  return PRINTABLE_ASCII + ["##" + c for c in PRINTABLE_ASCII]


def learn_vocabulary(corpus_files, vocab_size, lower_case=True,
                     max_lines=None, max_unique_chars=1000):
  """List of pieces: BERT's special tokens, learned pieces, missing ASCII.

  `max_unique_chars` (the learner's own default, 1000) bounds the single
  characters kept as pieces, twice over (alone and `##`): e-mail text
  brings hundreds of stray scripts' characters no task needs.
  """
  import tensorflow as tf
  from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

  if vocab_size <= len(SPECIAL_TOKENS):
    raise ValueError(f"vocab_size={vocab_size}: must exceed the "
                     f"{len(SPECIAL_TOKENS)} special tokens")
  texts = [line for path in corpus_files for line in corpus_texts(path)
           if line]
  texts = texts[:max_lines] if max_lines else texts
  if not texts:
    raise ValueError(f"{', '.join(corpus_files)}: no text to learn from")
  lines = tf.data.Dataset.from_tensor_slices(texts)
  learned = bert_vocab_from_dataset.bert_vocab_from_dataset(
      lines.batch(1024).prefetch(2), vocab_size=vocab_size,
      reserved_tokens=list(SPECIAL_TOKENS),
      bert_tokenizer_params={"lower_case": lower_case},
      learn_params={"max_unique_chars": max_unique_chars})
  present = set(learned)
  return learned + [p for p in ascii_pieces() if p not in present]


def corpus_texts(path):
  """The texts of a corpus file: a SQuAD file's contexts and questions
  (.json, .json.gz), a TSV's first column under its header (.tsv,
  .tsv.gz), else its lines. ValueError names an unreadable file."""
  from tfmodels.data.text_io import read_lines
  name = path[:-3] if path.endswith(".gz") else path
  if name.endswith(".json"):
    from tfmodels.data.squad import load_json
    try:
      data = load_json(path)
      return [text for article in data["data"]
              for paragraph in article["paragraphs"]
              for text in [paragraph["context"]] + [
                  q["question"] for q in paragraph["qas"]]]
    except (KeyError, TypeError) as e:
      raise ValueError(f"{path}: not a SQuAD file (no {e})") from None
  lines = read_lines(path)
  if name.endswith(".tsv"):
    return [line.split("\t")[0] for line in lines[1:]]
  return lines


def overlap(student, teacher):
  """Fraction of the student's pieces that the teacher vocabulary holds."""
  teacher = set(teacher)
  return sum(p in teacher for p in student) / len(student)


def write_vocab(vocab, path):
  """Atomic write of one piece per line."""
  write_file(path, "".join(p + "\n" for p in vocab))
