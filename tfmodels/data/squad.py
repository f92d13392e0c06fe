"""SQuAD v1.1 / v2.0: read examples, build BERT features, decode answers.

Follows Google BERT's `run_squad.py` (`[CLS] query [SEP] window [SEP]`,
doc-stride windows, the max-context rule, n-best decoding) but maps answers
through the tokenizer's character offsets instead of whitespace words, so an
answer maps back to an exact slice of the original context (original case and
accents, which the uncased pieces have lost).

    data = read_squad("train-v1.1.json.gz", is_training=True)
    arrays, metas = build_features(data.examples, tokenizer, is_training=True)
    ...
    answers = postprocess(examples, metas, start_logits, end_logits)
"""

import collections
import dataclasses
import json

from absl import logging
import numpy as np

from tfmodels.data.text_io import open_text


class SquadError(ValueError):
  """Malformed SQuAD input; the message names the file and the question."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """One question. `answer_start` is a character offset (-1: no answer)."""
  qas_id: str
  question: str
  context: str
  answer_text: str
  answer_start: int
  is_impossible: bool
  all_answers: tuple  # every gold answer text, for evaluation

  @property
  def answer_end(self):
    """Exclusive character end of the (first) answer."""
    return self.answer_start + len(self.answer_text)


@dataclasses.dataclass(frozen=True)
class SquadData:
  """A parsed file. `mismatched` lists the ids of questions with a gold answer
  that is not at its `answer_start` (only with strict=False); training drops
  them, evaluation keeps them since scoring compares texts only."""
  examples: list
  mismatched: list
  version: str


def load_json(path):
  """Reads a JSON file, gzip-compressed or not (told apart by magic bytes)."""
  try:
    with open_text(path) as f:
      return json.load(f)
  except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
    raise SquadError(f"{path}: cannot read JSON ({e})") from None


def read_squad(path, is_training=False, strict=True):
  """Reads a SQuAD v1.1/v2.0 file (`.json` or `.json.gz`) into `SquadData`."""
  return parse_squad(load_json(path), str(path), is_training, strict)


def _get(obj, key, types, where, default=None):
  """obj[key] checked against `types`; raises SquadError naming `where`."""
  if not isinstance(obj, dict):
    raise SquadError(f"{where}: expected a JSON object, got "
                     f"{type(obj).__name__}")
  if key not in obj:
    if default is not None:
      return default
    raise SquadError(f"{where}: missing field {key!r}")
  value = obj[key]
  if not isinstance(value, types) or (isinstance(value, bool)
                                      and types is not bool):
    raise SquadError(f"{where}: field {key!r} has type "
                     f"{type(value).__name__}")
  return value


def parse_squad(dataset, source="<json>", is_training=False, strict=True):
  """A loaded SQuAD JSON object -> `SquadData`; errors name `source`.

  Every question must have an answer unless it `is_impossible` (which then
  has none). With strict=True an answer that is empty or not at its
  `answer_start` raises; with strict=False (evaluation, as the official
  scripts accept such files) its question is listed in `mismatched`.
  Training examples use the first answer.
  """
  articles = _get(dataset, "data", list, source)
  version = str(dataset.get("version", ""))
  examples, mismatched, seen = [], [], set()
  for i, article in enumerate(articles):
    paragraphs = _get(article, "paragraphs", list, f"{source}: data[{i}]")
    for j, paragraph in enumerate(paragraphs):
      where = f"{source}: data[{i}].paragraphs[{j}]"
      context = _get(paragraph, "context", str, where)
      for qa in _get(paragraph, "qas", list, where):
        qas_id = str(_get(qa, "id", (str, int), f"{where}.qas"))
        where_q = f"{source}: question {qas_id!r}"
        if qas_id in seen:
          raise SquadError(f"{where_q}: duplicate id")
        seen.add(qas_id)
        question = _get(qa, "question", str, where_q)
        impossible = _get(qa, "is_impossible", bool, where_q, default=False)
        answers = _get(qa, "answers", list, where_q,
                       default=[] if impossible else None)
        spans = []
        for answer in answers:
          text = _get(answer, "text", str, where_q)
          start = _get(answer, "answer_start", int, where_q)
          spans.append((text, start))
        if impossible and spans:
          raise SquadError(f"{where_q}: is_impossible but has answers")
        if not impossible and not spans:
          raise SquadError(f"{where_q}: no answers and not is_impossible")
        bad = _check_answers(context, spans, where_q)
        if bad:
          if strict:
            raise SquadError(bad)
          mismatched.append(qas_id)
          if is_training:
            continue
        text, start = spans[0] if spans else ("", -1)
        examples.append(SquadExample(
            qas_id, question, context, text, start, impossible,
            tuple(t for t, _ in spans)))
  if mismatched:
    logging.warning("%s: %d question(s) have an answer that is not at its "
                    "answer_start%s", source, len(mismatched),
                    "; dropped for training" if is_training else "")
  return SquadData(examples, mismatched, version)


def _check_answers(context, spans, where):
  """Message for the first answer not found at its answer_start, or ''."""
  for text, start in spans:
    if not text:
      return f"{where}: empty answer text"
    if not 0 <= start <= len(context) - len(text):
      return (f"{where}: answer_start {start} is outside the context "
              f"({len(context)} characters)")
    found = context[start:start + len(text)]
    if found != text:
      return (f"{where}: answer {text!r} is not at answer_start {start} "
              f"(the context has {found!r})")
  return ""


def char_span_to_pieces(char_start, char_end, start, end):
  """(first, last) piece covering chars [start, end), or None if none does.

  First piece whose end is after `start`, last piece whose start is before
  `end`; the offsets are ascending, so both are binary searches.
  """
  first = int(np.searchsorted(char_end, start, side="right"))
  last = int(np.searchsorted(char_start, end, side="left")) - 1
  return (first, last) if first <= last else None


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays
class FeatureMeta:
  """Where one feature (a window of one example) came from.

  The arrays are indexed by position in the window (input position minus
  `context_offset`); the offsets are characters of the example's context.
  """
  example_index: int
  window_index: int
  context_offset: int  # input position of the window's first context piece
  char_start: np.ndarray
  char_end: np.ndarray
  is_max_context: np.ndarray  # bool: this window scores the piece

  @property
  def window_length(self):
    return len(self.char_start)

  def char_span(self, position):
    """Context chars [start, end) of input `position`, None off the context."""
    k = position - self.context_offset
    if not 0 <= k < self.window_length:
      return None
    return int(self.char_start[k]), int(self.char_end[k])


def _windows(num_pieces, max_pieces, doc_stride):
  """BERT's doc spans (start, length); one empty span for an empty context."""
  spans, start = [], 0
  while start < num_pieces:
    length = min(num_pieces - start, max_pieces)
    spans.append((start, length))
    if start + length == num_pieces:
      break
    start += min(length, doc_stride)
  return spans or [(0, 0)]


def _max_context_window(spans, num_pieces):
  """Per piece, the window where it has the most context (BERT's rule).

  Score = min(left, right context) + 0.01 * window length; the first window
  wins ties.
  """
  position = np.arange(num_pieces)
  best_score = np.full(num_pieces, -np.inf)
  best = np.full(num_pieces, -1)
  for w, (start, length) in enumerate(spans):
    end = start + length - 1
    score = np.minimum(position - start, end - position) + 0.01 * length
    better = (position >= start) & (position <= end) & (score > best_score)
    best_score[better] = score[better]
    best[better] = w
  return best


# BERT's SQuAD length, and the one the Android Task Library's
# BertQuestionAnswerer feeds ([1, L] with this L): the QA default of convert_tflite,
# the app (android_bench.qa_app) and the Java FeatureBuilder (checked equal
# by tests/test_qa_app_java.py). The one place the number stands.
MAX_SEQ_LENGTH = 384


def build_features(examples, tokenizer, max_seq_length=MAX_SEQ_LENGTH,
                   doc_stride=128,
                   max_query_length=64, is_training=False):
  """Examples -> (dict of int32 arrays, list of `FeatureMeta`), one row per
  window.

  Arrays: `input_ids`, `input_mask`, `segment_ids` [features, max_seq_length]
  and, for training, `start_positions` / `end_positions` [features] (0, the
  [CLS], when the answer is not inside the window or there is none).
  Training examples whose answer covers no piece are skipped with a warning.
  """
  if doc_stride <= 0:
    raise ValueError(f"doc_stride must be positive, got {doc_stride}")
  contexts = list(dict.fromkeys(e.context for e in examples))
  context_index = {c: i for i, c in enumerate(contexts)}
  docs = [(np.asarray(enc.ids, np.int32),
           np.asarray(enc.char_start, np.int64),
           np.asarray(enc.char_end, np.int64))
          for enc in tokenizer.encode_batch(contexts)]
  queries = tokenizer.encode_batch([e.question for e in examples])

  rows, starts, ends, metas = [], [], [], []
  unmapped = 0
  for example_index, (example, query) in enumerate(zip(examples, queries)):
    doc_ids, doc_start, doc_end = docs[context_index[example.context]]
    query_ids = query.ids[:max_query_length]
    max_pieces = max_seq_length - len(query_ids) - 3
    if max_pieces <= 0:
      raise ValueError(f"max_seq_length {max_seq_length} leaves no room for "
                       f"context after a {len(query_ids)}-piece query")
    answer = None
    if is_training and not example.is_impossible:
      answer = char_span_to_pieces(doc_start, doc_end, example.answer_start,
                                   example.answer_end)
      if answer is None:
        unmapped += 1
        continue
    spans = _windows(len(doc_ids), max_pieces, doc_stride)
    best_window = _max_context_window(spans, len(doc_ids))
    offset = len(query_ids) + 2
    for w, (start, length) in enumerate(spans):
      row = np.concatenate([[tokenizer.cls_id], query_ids, [tokenizer.sep_id],
                            doc_ids[start:start + length], [tokenizer.sep_id]])
      rows.append((row, offset))
      window = slice(start, start + length)
      metas.append(FeatureMeta(example_index, w, offset, doc_start[window],
                               doc_end[window], best_window[window] == w))
      if is_training:
        if answer and start <= answer[0] and answer[1] < start + length:
          starts.append(answer[0] - start + offset)
          ends.append(answer[1] - start + offset)
        else:
          starts.append(0)
          ends.append(0)
  if unmapped:
    logging.warning("skipped %d training example(s) whose answer covers no "
                    "word piece", unmapped)

  input_ids = np.zeros([len(rows), max_seq_length], np.int32)
  segment_ids = np.zeros_like(input_ids)
  input_mask = np.zeros_like(input_ids)
  for i, (row, offset) in enumerate(rows):
    input_ids[i, :len(row)] = row
    input_mask[i, :len(row)] = 1
    segment_ids[i, offset:len(row)] = 1
  arrays = {"input_ids": input_ids, "input_mask": input_mask,
            "segment_ids": segment_ids}
  if is_training:
    arrays["start_positions"] = np.asarray(starts, np.int32)
    arrays["end_positions"] = np.asarray(ends, np.int32)
  return arrays, metas


SpanFailure = collections.namedtuple(
    "SpanFailure", ["qas_id", "answer_text", "recovered_text"])


@dataclasses.dataclass(frozen=True)
class SpanRecovery:
  """How many answers come back exactly from their piece span."""
  total: int
  exact: int
  not_exact: int
  failures: list  # of SpanFailure; recovered_text '' if no piece covers it


def recover_answer_spans(examples, tokenizer):
  """Maps each answer to its pieces and back to text; counts exact matches.

  An answer starting or ending inside a word piece (e.g. "Flor" in "Flore")
  comes back as the whole piece; such training targets are not the gold
  text. Impossible questions are not counted.
  """
  answerable = [e for e in examples if not e.is_impossible]
  contexts = list(dict.fromkeys(e.context for e in answerable))
  encodings = dict(zip(contexts, tokenizer.encode_batch(contexts)))
  failures = []
  for example in answerable:
    enc = encodings[example.context]
    span = char_span_to_pieces(enc.char_start, enc.char_end,
                               example.answer_start, example.answer_end)
    recovered = "" if span is None else example.context[
        enc.char_start[span[0]]:enc.char_end[span[1]]]
    if recovered != example.answer_text:
      failures.append(SpanFailure(example.qas_id, example.answer_text,
                                  recovered))
  total = len(answerable)
  return SpanRecovery(total, total - len(failures), len(failures), failures)


def _top(logits, n):
  """Indices of the n largest logits, ties in index order (as BERT sorts)."""
  return np.argsort(-logits, kind="stable")[:n]


def whole_words(context, start, end):
  """Context chars [start, end) widened to the whitespace-delimited words
  they touch: (start, end).

  Whitespace is what the tokenizer splits words at (tab, LF, CR and the
  Unicode separators; `tokenization.normalize_char` gives " "), so a span
  starting on a `##` piece takes the word's first characters, and one
  ending inside a word takes the rest of it, punctuation written against
  it included ("numbly," for "umbly"). A span of no characters (a piece of
  a character that normalizes to several) becomes the word holding it.
  """
  from tfmodels.tokenization import normalize_char

  def space(c):
    return normalize_char(c, False) == " "

  start, end = int(min(start, end)), int(max(start, end))
  while start > 0 and not space(context[start - 1]):
    start -= 1
  while end < len(context) and not space(context[end]):
    end += 1
  return start, end


def postprocess(examples, metas, start_logits, end_logits, n_best_size=20,
                max_answer_length=30, version_2_with_negative=False,
                null_score_diff_threshold=0.0, word_edges=False,
                n_best_in_context=False):
  """Start/end logits [features, seq] -> {qas_id: answer text}.

  BERT's n-best: the top `n_best_size` starts x ends of every window of an
  example, keeping spans inside the context, end >= start, at most
  `max_answer_length` pieces, whose start is scored by this window
  (max-context); the best start + end logit wins. For v2 the answer is ''
  when the lowest [CLS] score of the windows exceeds the best span's score by
  more than `null_score_diff_threshold`. No valid span also gives ''.

  BERT (and the Task Library, which the QA app's decoding follows) take
  the top n of every position, so logits at the question or the padding
  can crowd the context's out of the n-best. `n_best_in_context` takes
  them among the context's positions only: the answer then depends on the
  context's logits alone, as evaluation needs (a Keras model is run only
  up to each batch's longest row, a .tflite file over all L positions:
  their padding logits differ, their answers must not).

  The answer is the context's characters from the best span's first piece
  to its last; `word_edges` widens it to the whole words those pieces sit
  in (`whole_words`), as the TFLite Task Library's BertQuestionAnswerer
  answers and the QA app does. Evaluation keeps the default: the span's
  own characters, as the training targets are.
  """
  start_logits = np.asarray(start_logits, np.float64)
  end_logits = np.asarray(end_logits, np.float64)
  if start_logits.shape != end_logits.shape or len(start_logits) != len(
      metas):
    raise ValueError(f"logits {start_logits.shape}, {end_logits.shape} do not "
                     f"match {len(metas)} features")
  features_of = collections.defaultdict(list)
  for f, meta in enumerate(metas):
    features_of[meta.example_index].append(f)

  answers = {}
  for example_index, example in enumerate(examples):
    best_score, best_text, null_score = -np.inf, "", np.inf
    for f in features_of[example_index]:
      meta, s_logits, e_logits = metas[f], start_logits[f], end_logits[f]
      null_score = min(null_score, s_logits[0] + e_logits[0])
      lo, hi = meta.context_offset, meta.context_offset + meta.window_length
      first = lo if n_best_in_context else 0
      last = hi if n_best_in_context else len(s_logits)
      s, e = np.meshgrid(first + _top(s_logits[first:last], n_best_size),
                         first + _top(e_logits[first:last], n_best_size),
                         indexing="ij")
      s, e = s.ravel(), e.ravel()  # start-major, as BERT's loops
      ok = ((s >= lo) & (s < hi) & (e >= lo) & (e < hi) & (e >= s)
            & (e - s + 1 <= max_answer_length))
      s, e = s[ok], e[ok]
      keep = meta.is_max_context[s - lo]
      s, e = s[keep], e[keep]
      if not len(s):
        continue
      scores = s_logits[s] + e_logits[e]
      k = int(np.argmax(scores))  # first of equals, as BERT's stable sort
      if scores[k] > best_score:
        best_score = scores[k]
        first, last = meta.char_start[s[k] - lo], meta.char_end[e[k] - lo]
        if word_edges:
          first, last = whole_words(example.context, first, last)
        best_text = example.context[first:last]
    if version_2_with_negative and (
        null_score - best_score > null_score_diff_threshold):
      best_text = ""
    answers[example.qas_id] = best_text
  return answers
