"""One question about one passage, answered the way the app does it.

The twin of the Java `QuestionAnswerer`: the existing pipeline's
`squad.build_features` (windows) and `squad.postprocess` (n-best decoding)
with the app's settings, and the model run once per window. The answer is
the passage's whole words the best span touches (whitespace-delimited, as
the TFLite Task Library's BertQuestionAnswerer answers): a span starting
on the `##umbly` of "numbly" answers "numbly".

    tokenizer = tokenizer_for("qa.tflite")   # the vocab.txt it carries
    prediction = predict(passage, question, tokenizer, SpanModel("qa.tflite"))
    prediction.answer
"""

import dataclasses

import numpy as np

from android_bench.qa_app import (DOC_STRIDE, MAX_ANSWER_LENGTH,
                                   MAX_QUERY_LENGTH, N_BEST_SIZE,
                                   SEQUENCE_LENGTH, QaAppError)
from tfmodels.data import squad


def tokenizer_for(model_path, vocab_file=None, lower_case=None,
                  flag="--vocab"):
  """The tokenizer of a converted model: the vocab.txt its metadata
  carries, or `vocab_file` if that is the same vocabulary, with the
  tokenizer settings it carries (the defaults when it carries none).

  Another vocabulary crashes the model (a larger one) or makes it answer
  nonsense (one of the same size), so it is refused. A model without
  metadata cannot say: `vocab_file` is then taken as given, and needed.
  Raises QaAppError, one line naming `flag` and the model.
  """
  from converters.metadata import SETTINGS_NAME, VOCAB_NAME, associated_file
  from tfmodels.tokenization import (TokenizerSettings, VocabError,
                                     WordPieceTokenizer, load_vocab)
  from tfmodels.vocab_record import VocabMismatchError, check, record_of
  try:
    carried = associated_file(model_path, VOCAB_NAME)
    settings_file = associated_file(model_path, SETTINGS_NAME)
  except OSError as e:
    raise QaAppError(f"--model {model_path}: cannot read it ({e})") from None
  own_name = f"{model_path}:{VOCAB_NAME}"
  try:
    own = None if carried is None else load_vocab(own_name, carried)
    settings = None if settings_file is None else _settings(
        settings_file, f"{model_path}:{SETTINGS_NAME}")
  except VocabError as e:
    raise QaAppError(f"--model {e}") from None
  if vocab_file is None:
    if own is None:
      raise QaAppError(f"--model {model_path}: carries no {VOCAB_NAME} (no "
                        f"Task Library metadata); pass {flag} with the "
                        "vocabulary it was trained with")
    return WordPieceTokenizer(own_name, lower_case, data=carried,
                              settings=settings or TokenizerSettings())
  try:
    given = WordPieceTokenizer(vocab_file, lower_case, settings=settings)
    if own is not None:
      check(record_of(given.vocab), f"{flag} {vocab_file}", record_of(own),
            model_path, hint=f"; leave out {flag} to use the model's own")
  except VocabError as e:
    raise QaAppError(f"{flag} {e}") from None
  except VocabMismatchError as e:
    raise QaAppError(str(e)) from None
  return given


def _settings(data, source):
  """The TokenizerSettings a model carries (its tokenizer_config.json)."""
  import json
  from tfmodels.tokenization import TokenizerSettings, VocabError
  try:
    values = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError) as e:
    raise VocabError(f"{source}: not JSON ({e})") from None
  if not isinstance(values, dict):
    raise VocabError(f"{source}: top level must be a JSON object")
  return TokenizerSettings.from_config(values, source)


def make_example(passage, question, qas_id="question"):
  """A SQuAD example without a gold answer."""
  return squad.SquadExample(qas_id, question, passage, "", -1, False, ())


def build_features(examples, tokenizer, sequence_length=SEQUENCE_LENGTH):
  """`squad.build_features` with the app's windows: (arrays, metas)."""
  return squad.build_features(
      examples, tokenizer, max_seq_length=sequence_length,
      doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY_LENGTH)


def decode(examples, metas, start_logits, end_logits):
  """`squad.postprocess` with the app's n-best and answer length, the
  answer widened to whole words (`squad.whole_words`)."""
  return squad.postprocess(examples, metas, start_logits, end_logits,
                           n_best_size=N_BEST_SIZE,
                           max_answer_length=MAX_ANSWER_LENGTH,
                           word_edges=True)


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays
class Prediction:
  """The answer and everything that led to it (the golden vectors use it)."""
  answer: str
  arrays: dict  # input_ids, input_mask, segment_ids [windows, L]
  metas: list  # squad.FeatureMeta per window
  start_logits: np.ndarray  # [windows, L] float32
  end_logits: np.ndarray
  inference_s: float  # model time summed over the windows
  lengths: tuple = ()  # the length each window ran at

  @property
  def windows(self):
    return len(self.metas)


def predict(passage, question, tokenizer, model):
  """Answers `question` from `passage` with `model` (a `SpanModel`)."""
  example = make_example(passage, question)
  arrays, metas = build_features([example], tokenizer, model.sequence_length)
  starts, ends, seconds, lengths = [], [], 0.0, []
  for ids, mask, segments in zip(arrays["input_ids"], arrays["input_mask"],
                                 arrays["segment_ids"]):
    start, end = model(ids, mask, segments)
    starts.append(start)
    ends.append(end)
    seconds += model.last_latency_s or 0.0
    lengths.append(model.last_length)
  start_logits = np.stack(starts).astype(np.float32)
  end_logits = np.stack(ends).astype(np.float32)
  answer = decode([example], metas, start_logits, end_logits)[example.qas_id]
  return Prediction(answer, arrays, metas, start_logits, end_logits, seconds,
                    tuple(lengths))


def timing_line(prediction, sequence_length, num_threads):
  """What the twin prints beside its answer (and answers.json keeps)."""
  lengths = sorted(set(prediction.lengths or (sequence_length,)))
  return (f"{prediction.windows} window(s) of "
          f"{'/'.join(map(str, lengths))} tokens, "
          f"model {prediction.inference_s * 1e3:.1f} ms "
          f"({num_threads} threads)")
