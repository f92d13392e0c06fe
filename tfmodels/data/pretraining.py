"""Pre-training instances with the semantics of BERT's `create_pretraining_data`.

Input text has one sentence per line and a blank line between documents.
Each document is cut into chunks of about `max_seq_length` tokens (shorter with
`short_seq_prob`), split into segments A and B for next-sentence prediction
(B from another document half of the time) or ALBERT's sentence-order
prediction (A and B swapped half of the time), then masked: 15% of the tokens,
of which 80% become `[MASK]`, 10% a random token and 10% stay. Options follow
the reference scripts: whole-word masking, ALBERT n-gram masking (n <= 3 with
p(n) proportional to 1/n) and the mixed-vocabulary stage-I mode of Zhao et al.

Token ids live in one space: the teacher vocabulary, then (mixed mode only)
the student vocabulary offset by the teacher's size, which is how
`layers/embeddings.py` tells the two apart. Where this departs from Google's
script, and why, is said where it happens (`instances_from_document`,
`mask_tokens`) and collected in docs/design.md: balanced sentence labels,
n-gram lengths that follow 1/n, one 80/10/10 decision per whole word or
n-gram (the reference draws per piece, so a word could be half masked), and
random replacements drawn from the replaced token's own vocabulary.
"""

import dataclasses

import numpy as np

from tfmodels.data.text_io import read_lines


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
  """How instances are cut and masked (defaults: BERT's released recipe)."""
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  whole_word_mask: bool = False
  max_ngram: int = 1  # ALBERT uses 3
  sentence_objective: str = "nsp"  # or "sop"
  student_vocab_prob: float = 0.5  # p_SV, mixed-vocabulary mode only
  max_teacher_predictions: int = 10  # mixed-vocabulary mode only

  def __post_init__(self):
    checks = [
        ("max_seq_length", self.max_seq_length >= 5, "must be >= 5"),
        ("max_predictions_per_seq", self.max_predictions_per_seq >= 1,
         "must be >= 1"),
        ("masked_lm_prob", 0 < self.masked_lm_prob < 1, "must be in (0, 1)"),
        ("short_seq_prob", 0 <= self.short_seq_prob <= 1, "must be in [0, 1]"),
        ("max_ngram", 1 <= self.max_ngram <= 10, "must be in [1, 10]"),
        ("sentence_objective", self.sentence_objective in ("nsp", "sop"),
         "must be nsp or sop"),
        ("student_vocab_prob", 0 <= self.student_vocab_prob <= 1,
         "must be in [0, 1]"),
        ("max_teacher_predictions", self.max_teacher_predictions >= 0,
         "must be >= 0"),
    ]
    for name, ok, why in checks:
      if not ok:
        raise ValueError(f"{name}={getattr(self, name)!r}: {why}")


@dataclasses.dataclass
class TrainingInstance:
  tokens: list  # ids after masking, [CLS] A [SEP] B [SEP]
  segment_ids: list
  masked_lm_positions: list
  masked_lm_ids: list  # original ids at those positions
  is_random_next: bool  # NSP: B is from another document; SOP: swapped
  ngram_lengths: list  # n of each masked span (statistics only)


class MixedVocabulary:
  """The teacher vocabulary, optionally followed by a student vocabulary."""

  def __init__(self, teacher, student=None):
    self.teacher, self.student = teacher, student
    self.teacher_size = len(teacher)
    pieces = teacher.vocab + (student.vocab if student else [])
    self.size = len(pieces)
    self.is_continuation = np.array([p.startswith("##") for p in pieces])
    self.cls_id, self.sep_id, self.mask_id = (
        teacher.cls_id, teacher.sep_id, teacher.mask_id)

  @property
  def mixed(self):
    return self.student is not None

  def vocab_of(self, token_id):
    """0 for a teacher piece, 1 for a student piece."""
    return int(token_id >= self.teacher_size)

  def random_token(self, rng, like):
    if like >= self.teacher_size:
      return rng.randint(self.teacher_size, self.size - 1)
    return rng.randint(0, self.teacher_size - 1)


def read_documents(input_files, vocab):
  """Documents as lists of tokenized sentences.

  Plain mode: a sentence is a list of ids. Mixed mode: a list of words, each
  a pair (teacher ids, student ids), segmented per instance by `segment`.
  """
  documents = [[]]
  for path in input_files:
    lines = read_lines(path)
    texts = [line for line in lines if line]
    teacher_ids = vocab.teacher.ids_batch(texts)
    student_ids = vocab.student.ids_batch(texts) if vocab.mixed else None
    k = 0
    for number, line in enumerate(lines, 1):
      if not line:
        documents.append([])
        continue
      if vocab.mixed:
        shifted = [i + vocab.teacher_size for i in student_ids[k]]
        teacher_words = _words(teacher_ids[k], vocab.is_continuation)
        student_words = _words(shifted, vocab.is_continuation)
        if len(teacher_words) != len(student_words):
          raise ValueError(f"{path}:{number}: the two vocabularies split the "
                           "line into different words (different "
                           "lower-casing?)")
        sentence = list(zip(teacher_words, student_words))
      else:
        sentence = teacher_ids[k]
      k += 1
      if sentence:
        documents[-1].append(sentence)
    documents.append([])  # a file boundary is a document boundary
  return [d for d in documents if d]


def _words(ids, is_continuation):
  words = []
  for i in ids:
    if words and is_continuation[i]:
      words[-1].append(i)
    else:
      words.append([i])
  return [tuple(w) for w in words]


def segment(sentence, vocab, options, rng):
  """Ids of a sentence; mixed mode picks each word's vocabulary with p_SV."""
  if not vocab.mixed:
    return sentence
  ids = []
  for teacher_word, student_word in sentence:
    use_student = rng.random() < options.student_vocab_prob
    ids.extend(student_word if use_student else teacher_word)
  return ids


def create_instances(documents, vocab, options, rng, dupe_factor=1,
                     progress=None):
  """All instances of `dupe_factor` passes over the documents, shuffled."""
  documents = list(documents)
  rng.shuffle(documents)
  instances = []
  for _ in range(dupe_factor):
    for index in range(len(documents)):
      instances.extend(instances_from_document(
          documents, index, vocab, options, rng))
      if progress:
        progress(1)
  rng.shuffle(instances)
  return instances


def instances_from_document(documents, index, vocab, options, rng):
  """BERT's `create_instances_from_document`, with ALBERT's SOP variant.

  Two changes keep the sentence labels balanced (the reference gives up to
  60% random-next on real text): the short target length is drawn per
  instance, not once per document (one short draw on a long speech made
  hundreds of one-sentence chunks), and a one-sentence chunk is cut between
  two of its words into A and B instead of always taking B from another
  document.
  """
  document = [segment(s, vocab, options, rng) for s in documents[index]]
  max_num_tokens = options.max_seq_length - 3

  def draw_target():
    if rng.random() < options.short_seq_prob:
      return rng.randint(2, max_num_tokens)
    return max_num_tokens

  target_seq_length = draw_target()
  instances = []
  chunk, chunk_length, i = [], 0, 0
  while i < len(document):
    chunk.append(document[i])
    chunk_length += len(document[i])
    if i == len(document) - 1 or chunk_length >= target_seq_length:
      split_sentence = len(chunk) == 1 and len(chunk[0]) >= 2
      if split_sentence:  # cut between words when there are several
        sentence = chunk[0]
        cuts = [k for k in range(1, len(sentence))
                if not vocab.is_continuation[sentence[k]]] or list(
                    range(1, len(sentence)))
        cut = cuts[rng.randrange(len(cuts))]
        chunk = [sentence[:cut], sentence[cut:]]
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      tokens_a = [t for s in chunk[:a_end] for t in s]
      if len(chunk) == 1 or (options.sentence_objective == "nsp"
                             and rng.random() < 0.5):
        # B from a random other document; whole sentences of the chunk that
        # go unused are put back so they are not wasted (the second half of
        # a cut sentence is dropped).
        is_random_next = True
        tokens_b = _random_next(documents, index, target_seq_length -
                                len(tokens_a), vocab, options, rng)
        if not split_sentence:
          i -= len(chunk) - a_end
      else:
        tokens_b = [t for s in chunk[a_end:] for t in s]
        is_random_next = False
        if options.sentence_objective == "sop" and rng.random() < 0.5:
          tokens_a, tokens_b = tokens_b, tokens_a
          is_random_next = True
      truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
      if tokens_a and tokens_b:
        tokens = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b,
                  vocab.sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        masked, positions, labels, ngrams = mask_tokens(
            tokens, vocab, options, rng)
        instances.append(TrainingInstance(
            masked, segment_ids, positions, labels, is_random_next, ngrams))
      chunk, chunk_length = [], 0
      target_seq_length = draw_target()
    i += 1
  return instances


def _random_next(documents, index, target_length, vocab, options, rng):
  """Consecutive sentences of another document, about target_length long."""
  for _ in range(10):
    other = rng.randint(0, len(documents) - 1)
    if other != index:
      break
  other_doc = documents[other]
  tokens = []
  for j in range(rng.randint(0, len(other_doc) - 1), len(other_doc)):
    tokens.extend(segment(other_doc[j], vocab, options, rng))
    if len(tokens) >= target_length:
      break
  return tokens


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Trim the longer side, from the front or back at random, until it fits."""
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del longer[0]
    else:
      longer.pop()


def _ngram_probabilities(max_ngram):
  weights = 1.0 / np.arange(1, max_ngram + 1)
  return np.cumsum(weights / weights.sum())


def mask_tokens(tokens, vocab, options, rng):
  """BERT / ALBERT masked-LM selection.

  Returns (masked tokens, positions, original ids, n of each masked span).
  Candidates are pieces, or whole words with `whole_word_mask`; an n-gram is
  n consecutive candidates, n drawn with p(n) proportional to 1/n. Unlike
  ALBERT, which shortens an n-gram that overshoots the budget and redraws n
  after an overlap (both bias the masked lengths towards 1), an n that does
  not fit is tried at the next start; the budget may then be missed by less
  than one n-gram.
  """
  candidates = []
  for i, t in enumerate(tokens):
    if t in (vocab.cls_id, vocab.sep_id):
      continue
    if (options.whole_word_mask and candidates and vocab.is_continuation[t]
        and candidates[-1][-1] == i - 1):  # not across [SEP]
      candidates[-1].append(i)
    else:
      candidates.append([i])
  num_to_predict = min(options.max_predictions_per_seq,
                       max(1, int(round(len(tokens) * options.masked_lm_prob))))
  cumulative = _ngram_probabilities(options.max_ngram)
  starts = list(range(len(candidates)))
  rng.shuffle(starts)
  output = list(tokens)
  covered, masked, ngram_lengths = set(), [], []
  teacher_masked = 0
  n = None
  for start in starts:
    if len(masked) >= num_to_predict:
      break
    if n is None or (not masked and n > num_to_predict):
      # A first n longer than the whole budget is redrawn among those that
      # fit, so a short sequence is never left without a masked token.
      longest = min(options.max_ngram, num_to_predict)
      n = 1
      if longest > 1:
        n = int(np.searchsorted(cumulative[:longest] / cumulative[longest - 1],
                                rng.random(), side="right")) + 1
        n = min(n, longest)
    # An n that does not fit here (overlap, end of sequence, budget) is kept
    # for the next start, so the masked lengths stay distributed as 1/n.
    if start + n > len(candidates):
      continue
    index_set = [i for c in candidates[start:start + n] for i in c]
    if any(i in covered for i in index_set):
      continue
    if len(masked) + len(index_set) > num_to_predict:
      continue
    if vocab.mixed:
      teacher = sum(1 for i in index_set if tokens[i] < vocab.teacher_size)
      if teacher_masked + teacher > options.max_teacher_predictions:
        continue
      teacher_masked += teacher
    draw = rng.random()
    keep = draw >= 0.8 and rng.random() < 0.5
    for i in index_set:
      covered.add(i)
      if draw < 0.8:
        output[i] = vocab.mask_id
      elif not keep:
        output[i] = vocab.random_token(rng, tokens[i])
      masked.append(i)
    ngram_lengths.append(n)
    n = None
  masked.sort()
  return output, masked, [tokens[i] for i in masked], ngram_lengths
