"""The QA app's Python side: the twin command, the model binding, the fixtures.

The golden vectors must be what today's pipeline makes (else the JVM tests
would hold Java to stale answers); the twin must run a real converted model
by tensor name and answer as `squad.postprocess` does on that model's logits.
"""

import gzip
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from android_bench import qa_app
from android_bench.qa_app import answering, sample_passages
from android_bench.qa_app.span_model import SpanModel
from tfmodels.data import squad
from conftest import DATA, REPO, STUDENT_VOCAB, VOCAB

FIXTURES = os.path.join(REPO, "tests", "fixtures", "qa_app")
sys.path.insert(0, FIXTURES)
import golden  # noqa: E402  pylint: disable=wrong-import-position
GOLDEN = os.path.join(FIXTURES, "golden.py")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _command(module_or_script, *args):
  command = ([module_or_script] if module_or_script.endswith(".py")
             else ["-m", module_or_script])
  return subprocess.run([sys.executable, *command, *args],
                        capture_output=True, text=True, env=ENV, cwd=REPO)


def _long_passage():
  """Twelve WordNet QA contexts: more than one 384-token window."""
  data = json.load(gzip.open(os.path.join(DATA, "wordnet_qa", "dev.json.gz")))
  contexts = [p["context"] for a in data["data"][:12] for p in a["paragraphs"]]
  return " ".join(contexts), data["data"][5]["paragraphs"][0]["qas"][0][
      "question"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tokenizer):
  """(path, keras model) of the tiny converted span model."""
  from tiny_model import export_tiny_span_model
  path = str(tmp_path_factory.mktemp("tiny") / "tiny_qa.tflite")
  model = export_tiny_span_model(path, vocab_size=len(tokenizer))
  return path, model


# --- the golden vectors ----------------------------------------------------

def test_golden_vectors_are_what_the_pipeline_makes_today(tokenizer):
  made = {
      "tokenization.tsv.gz": golden.tokenization_lines(
          tokenizer, golden.gather_sentences(DATA)),
      "qa.tsv.gz": golden.qa_lines(
          tokenizer, golden.gather_cases(DATA, tokenizer), seed=0),
      "codepoints.tsv.gz": golden.codepoint_lines(tokenizer),
  }
  for name, lines in made.items():
    stored = golden.read_gzip_lines(os.path.join(FIXTURES, name))
    assert stored == lines, (
        f"{name} is stale: python tests/fixtures/qa_app/golden.py "
        "--output_dir tests/fixtures/qa_app --overwrite")
  # What the JVM tests lean on: many texts, long and non-Latin passages.
  sentences = [l for l in made["tokenization.tsv.gz"] if l.startswith("T\t")]
  questions = [l.split("\t") for l in made["qa.tsv.gz"] if l.startswith("Q\t")]
  assert len(sentences) >= 350 and len(questions) >= 300
  assert sum(int(q[6]) > 1 for q in questions) >= 30
  assert sum(int(q[6]) >= 3 for q in questions) >= 10
  assert sum(any(ord(c) > 0x2FF for c in q[4]) for q in questions) >= 15
  answered = [q for q in questions if q[5]]
  assert len(answered) >= 250


def test_golden_answers_include_the_gold_spans(tokenizer):
  """With the gold span raised, the decoder finds it: real answers, mapped
  back through character offsets to the whole words they sit in, accents
  and non-Latin scripts included."""
  cases = golden.gather_cases(DATA, tokenizer)
  stored = {q[1]: q for q in (l.split("\t") for l in golden.read_gzip_lines(
      os.path.join(FIXTURES, "qa.tsv.gz"))) if q[0] == "Q"}
  hits = [i for i, (case_id, _, example, gold) in enumerate(cases)
          if gold and i % 4 in (0, 1)
          and stored[case_id][5] == golden.escape(example.context[
              slice(*squad.whole_words(example.context, *gold))])]
  assert len(hits) >= 120
  handmade = [cases[i][0] for i in hits if cases[i][0].startswith("handmade")]
  assert len(handmade) >= 4, handmade
  assert sum(cases[i][0].startswith("concat") for i in hits) >= 5


def test_end_to_end_fixture_decodes_to_its_answers(tokenizer):
  """The Python half of the JVM end-to-end test: stored logits, features
  made today, squad.postprocess -> the stored answers."""
  lines = golden.read_gzip_lines(os.path.join(FIXTURES, "end_to_end.tsv.gz"))
  settings = dict(l[1:].split("=", 1) for l in lines if l.startswith("@"))
  length = int(settings["sequence_length"])  # the converted model's L
  assert "sha256=" in settings["model"]
  records = [l.split("\t") for l in lines if l[:1] in "QW"]
  checked, windows = 0, 0
  while records:
    q = records.pop(0)
    rows = [records.pop(0) for _ in range(int(q[6]))]
    example = answering.make_example(_unescape(q[4]), _unescape(q[3]))
    arrays, metas = answering.build_features([example], tokenizer, length)
    assert len(metas) == len(rows)
    for row, r in zip(arrays["input_ids"], rows):
      assert row.tolist() == [int(x) for x in r[3].split()]
    start = np.array([[float(x) for x in r[9].split()] for r in rows],
                     np.float32)
    end = np.array([[float(x) for x in r[10].split()] for r in rows],
                   np.float32)
    answer = answering.decode([example], metas, start, end)[example.qas_id]
    assert answer == _unescape(q[5])
    checked, windows = checked + 1, max(windows, len(rows))
  assert checked >= 3 and windows >= 2
  # What golden.py --reuse_logits writes: the file as it is.
  assert golden.redecoded_end_to_end_lines(tokenizer, lines) == lines


def _unescape(field):
  out, i = [], 0
  while i < len(field):
    if field[i] == "\\":
      out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[field[i + 1]])
      i += 2
    else:
      out.append(field[i])
      i += 1
  return "".join(out)


def test_escape_round_trips():
  text = "a\tb\nc\rd\\e \\t"
  assert _unescape(golden.escape(text)) == text
  assert "\t" not in golden.escape(text) and "\n" not in golden.escape(text)


def test_golden_command_refuses_to_overwrite(tmp_path):
  out = tmp_path / "fixtures"
  out.mkdir()
  (out / "keep.txt").write_text("mine")
  result = _command(GOLDEN, "--output_dir", str(out))
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --output_dir {out} exists (pass --overwrite)")
  assert (out / "keep.txt").read_text() == "mine"
  result = _command(GOLDEN, "--output_dir",
                    str(tmp_path / "new"), "--model",
                    str(tmp_path / "no.tflite"))
  assert result.returncode != 0
  assert "error: --model" in result.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "new").exists()
  result = _command(GOLDEN, "--output_dir", str(out), "--overwrite",
                    "--reuse_logits")
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --reuse_logits: no {out}/end_to_end.tsv.gz to reuse")
  assert sorted(os.listdir(out)) == ["keep.txt"]


# --- the twin --------------------------------------------------------------

def test_span_model_binds_tensors_by_name(tiny, tokenizer):
  path, keras_model = tiny
  model = SpanModel(path, num_threads=2)
  assert model.sequence_length == qa_app.SEQUENCE_LENGTH
  passage, question = _long_passage()
  arrays, _ = answering.build_features(
      [answering.make_example(passage, question)], tokenizer)
  assert len(arrays["input_ids"]) >= 2
  expected = keras_model(
      {k: tf.constant(v) for k, v in arrays.items()}, training=False)
  for i in range(len(arrays["input_ids"])):
    start, end = model(arrays["input_ids"][i], arrays["input_mask"][i],
                       arrays["segment_ids"][i])
    np.testing.assert_allclose(start, expected["start_logits"][i], atol=1e-5)
    np.testing.assert_allclose(end, expected["end_logits"][i], atol=1e-5)
  # Swapping mask and segment ids (what binding by position risks) matters.
  swapped, _ = model(arrays["input_ids"][0], arrays["segment_ids"][0],
                     arrays["input_mask"][0])
  assert np.abs(swapped - expected["start_logits"][0].numpy()).max() > 1e-4


def test_twin_command_answers_like_the_pipeline(tiny, tokenizer, tmp_path):
  path, _ = tiny
  passage, question = _long_passage()
  passage_file = tmp_path / "passage.txt"
  passage_file.write_text(passage, encoding="utf-8")
  result = _command("android_bench.qa_app", "--model", path, "--vocab",
                    VOCAB, "--passage", str(passage_file), "--question",
                    question, "--num_threads", "2")
  assert result.returncode == 0, result.stderr
  prediction = answering.predict(passage, question, tokenizer,
                                 SpanModel(path, num_threads=2))
  assert prediction.windows >= 2
  assert prediction.answer and prediction.answer in passage
  assert result.stdout == prediction.answer + "\n"
  assert f"{prediction.windows} window(s) of 384 tokens" in result.stderr
  # The same answer from squad.postprocess on the same logits.
  example = answering.make_example(passage, question)
  assert answering.decode([example], prediction.metas,
                          prediction.start_logits,
                          prediction.end_logits)[example.qas_id] == (
                              prediction.answer)


# A passage whose words split into several pieces: numb ##ly, [UNK] (the
# CJK ideograph, a word of its own to the tokenizer but not to whitespace)
# una ##ffa ##ble. The same case is in qa-core's WholeWordTest.
WORD_EDGE_PASSAGE = ("She stared numbly at the \U00020000unaffable wall, "
                     "then left.")
WORD_EDGE_QUESTION = "How did she stare?"
# (first piece, last piece) the logits peak on -> (the twin's answer, the
# pieces' own characters: squad.postprocess's default, evaluation's).
WORD_EDGE_CASES = [
    (("##ly", "##ly"), ("numbly", "ly")),
    (("##ly", "una"), ("numbly at the \U00020000unaffable",
                       "ly at the \U00020000una")),
    (("##ffa", "##ffa"), ("\U00020000unaffable", "ffa")),
    (("numb", "numb"), ("numbly", "numb")),
    (("wall", "wall"), ("wall,", "wall")),  # punctuation against it too
]


class _PeakModel:
  """A span model whose logits peak on two input positions."""

  sequence_length = qa_app.SEQUENCE_LENGTH
  dynamic = False
  last_latency_s = 0.0
  last_length = qa_app.SEQUENCE_LENGTH

  def __init__(self, start, end):
    self.start, self.end = start, end

  def __call__(self, ids, mask, segments):
    start = np.zeros(self.sequence_length, np.float32)
    end = np.zeros(self.sequence_length, np.float32)
    start[self.start] = end[self.end] = 10.0
    return start, end


@pytest.mark.parametrize("pieces, answers", WORD_EDGE_CASES)
def test_twin_answers_whole_words(tokenizer, pieces, answers):
  """A span starting on a ## piece (or ending before the word's last
  piece) answers the whole whitespace-delimited words it touches, as the
  Task Library's BertQuestionAnswerer does (its answer is the original
  words the span's pieces map to); evaluation keeps the span's own
  characters."""
  passage_pieces = tokenizer.encode(WORD_EDGE_PASSAGE).pieces
  offset = len(tokenizer.encode(WORD_EDGE_QUESTION).ids) + 2
  first, last = (offset + passage_pieces.index(p) for p in pieces)
  prediction = answering.predict(WORD_EDGE_PASSAGE, WORD_EDGE_QUESTION,
                                 tokenizer, _PeakModel(first, last))
  whole, own = answers
  assert prediction.answer == whole
  example = answering.make_example(WORD_EDGE_PASSAGE, WORD_EDGE_QUESTION)
  assert squad.postprocess([example], prediction.metas,
                           prediction.start_logits, prediction.end_logits,
                           n_best_size=qa_app.N_BEST_SIZE,
                           max_answer_length=qa_app.MAX_ANSWER_LENGTH)[
                               example.qas_id] == own


def test_whole_words_stop_at_every_tokenizer_whitespace():
  text = "a\tb-c\u00a0d\ne\u2028f\u000bg  h"
  assert squad.whole_words(text, 3, 4) == (2, 5)  # "b-c": a hyphen is no edge
  assert squad.whole_words(text, 6, 6) == (6, 7)  # NBSP ends a word
  assert squad.whole_words(text, 8, 9) == (8, 9)
  assert squad.whole_words(text, 10, 11) == (10, 13)  # \v is deleted, no edge
  assert squad.whole_words(text, 15, 16) == (15, 16)  # after two spaces
  assert squad.whole_words(text, 16, 15) == (15, 16)
  assert squad.whole_words("", 0, 0) == (0, 0)


def test_a_dynamic_model_runs_each_window_at_its_own_length(tiny, tokenizer,
                                                           tmp_path):
  """convert_tflite --dynamic_length: the twin runs each window at the
  smallest multiple of 32 tokens that holds it, with the fixed model's
  logits on every real token, and decodes them to the answer the fixed
  model's give with its padding masked (an untrained model's padding
  logits can crowd the n-best; a trained one's do not: the demo's student
  answers its 20 questions alike either way)."""
  from android_bench.qa_app.span_model import PADDING_LOGIT
  from converters import conversion
  path, keras_model = tiny
  converted = conversion.convert_model(
      keras_model, "span", qa_app.SEQUENCE_LENGTH, ["float32"],
      dynamic_length=True)
  dynamic_path = tmp_path / "dynamic.tflite"
  dynamic_path.write_bytes(converted.files["float32"][0])
  fixed = SpanModel(path, num_threads=2)
  dynamic = SpanModel(str(dynamic_path), num_threads=2)
  assert (fixed.dynamic, dynamic.dynamic) == (False, True)
  assert dynamic.sequence_length == qa_app.SEQUENCE_LENGTH
  assert [dynamic.window_length(n) for n in (1, 32, 33, 383, 500)] == [
      32, 32, 64, 384, 384]
  long_passage, long_question = _long_passage()
  short_passage = long_passage.split(". ")[0] + "."
  for passage, question in ((short_passage, long_question),
                            (long_passage, long_question)):
    want = answering.predict(passage, question, tokenizer, fixed)
    got = answering.predict(passage, question, tokenizer, dynamic)
    tokens = got.arrays["input_mask"].sum(axis=1)
    real = np.arange(want.start_logits.shape[1]) < tokens[:, None]
    example = answering.make_example(passage, question)
    assert got.answer == answering.decode(
        [example], want.metas,
        np.where(real, want.start_logits, PADDING_LOGIT),
        np.where(real, want.end_logits, PADDING_LOGIT))[example.qas_id]
    assert list(got.lengths) == [dynamic.window_length(n) for n in tokens]
    assert set(want.lengths) == {qa_app.SEQUENCE_LENGTH}
    for i, n in enumerate(tokens):
      np.testing.assert_allclose(got.start_logits[i, :n],
                                 want.start_logits[i, :n], atol=1e-4)
      np.testing.assert_allclose(got.end_logits[i, :n],
                                 want.end_logits[i, :n], atol=1e-4)
  assert min(got.lengths) < qa_app.SEQUENCE_LENGTH  # the last window
  short = answering.predict(short_passage, long_question, tokenizer, dynamic)
  assert short.lengths[0] <= 96
  assert answering.timing_line(short, dynamic.sequence_length, 2).startswith(
      f"1 window(s) of {short.lengths[0]} tokens")


def _misnamed_model(path, with_signature=True):
  """A [1, 8] model whose inputs are BERT's old names, not the contract's."""
  spec = [tf.TensorSpec([1, 8], tf.int32, name=n)
          for n in ("input_ids", "input_mask", "segment_ids")]

  @tf.function(input_signature=spec)
  def serve(input_ids, input_mask, segment_ids):
    x = tf.cast(input_ids + input_mask + segment_ids, tf.float32)
    return {"start_logits": x, "end_logits": -x}

  # Without a trackable object the converter writes no signature at all.
  content = tf.lite.TFLiteConverter.from_concrete_functions(
      [serve.get_concrete_function()],
      tf.Module() if with_signature else None).convert()
  path.write_bytes(content)
  return str(path)


def test_model_without_the_contract_names_is_refused(tmp_path):
  unsigned = _misnamed_model(tmp_path / "unsigned.tflite", False)
  with pytest.raises(qa_app.QaAppError, match="has no signature"):
    SpanModel(unsigned)
  path = _misnamed_model(tmp_path / "misnamed.tflite")
  with pytest.raises(qa_app.QaAppError, match="lacks ids, mask"):
    SpanModel(path)
  (tmp_path / "p.txt").write_text("A passage.")
  result = _command("android_bench.qa_app", "--model", path, "--vocab",
                    VOCAB, "--passage", str(tmp_path / "p.txt"),
                    "--question", "What?")
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"error: --model {path}: signature 'serving_default'"
                         " lacks ids, mask")
  assert result.stdout == ""


@pytest.fixture(scope="module")
def tiny_with_vocab(tiny):
  """The tiny model carrying VOCAB as convert_tflite attaches it."""
  from tiny_model import with_vocab
  return with_vocab(tiny[0], VOCAB, tiny[0].replace(".tflite", "_vocab.tflite"))


def _swapped_vocab(path):
  """VOCAB with two words' ids swapped: same size, another vocabulary."""
  with open(VOCAB, encoding="utf-8") as f:
    tokens = f.read().splitlines()
  a, b = tokens.index("river"), tokens.index("the")
  tokens[a], tokens[b] = tokens[b], tokens[a]
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path)


def test_twin_uses_the_vocabulary_the_model_carries(tiny_with_vocab,
                                                    tokenizer, tmp_path):
  passage, question = _long_passage()
  passage_file = tmp_path / "passage.txt"
  passage_file.write_text(passage, encoding="utf-8")
  result = _command("android_bench.qa_app", "--model", tiny_with_vocab,
                    "--passage", str(passage_file), "--question", question,
                    "--num_threads", "2")
  assert result.returncode == 0, result.stderr
  expected = answering.predict(passage, question, tokenizer,
                               SpanModel(tiny_with_vocab, num_threads=2))
  assert expected.answer
  assert result.stdout == expected.answer + "\n"
  own = answering.tokenizer_for(tiny_with_vocab)
  assert own.vocab == tokenizer.vocab
  assert answering.tokenizer_for(tiny_with_vocab, VOCAB).vocab == own.vocab


def test_twin_refuses_a_vocabulary_the_model_does_not_carry(
    tiny_with_vocab, tmp_path):
  """Another size crashed the model's gather; the same size answered
  wrongly with exit 0. Both are refused in one line naming both."""
  from tfmodels.vocab_record import record_of_file
  with pytest.raises(qa_app.QaAppError, match=(
      f"^--vocab {re.escape(STUDENT_VOCAB)} \\(4818 tokens, sha256 "
      f"[0-9a-f]{{12}}\\) is not the vocabulary of "
      f"{re.escape(tiny_with_vocab)} \\(30522 tokens")):
    answering.tokenizer_for(tiny_with_vocab, STUDENT_VOCAB)
  vocab = _swapped_vocab(tmp_path / "swapped.txt")
  (tmp_path / "p.txt").write_text("The river runs to the sea.")
  result = _command("android_bench.qa_app", "--model", tiny_with_vocab,
                    "--vocab", vocab, "--passage", str(tmp_path / "p.txt"),
                    "--question", "Which word means: a stream?")
  assert result.returncode == 1
  given, own = record_of_file(vocab), record_of_file(VOCAB)
  assert result.stderr.strip().splitlines()[-1] == (
      f"error: --vocab {vocab} ({given.size} tokens, sha256 "
      f"{given.sha256[:12]}) is not the vocabulary of {tiny_with_vocab} "
      f"({own.size} tokens, sha256 {own.sha256[:12]}); leave out --vocab to "
      "use the model's own")
  assert "Traceback" not in result.stderr and result.stdout == ""


def test_model_without_metadata_needs_a_vocabulary(tiny):
  with pytest.raises(qa_app.QaAppError,
                     match=r"--model .*: carries no vocab.txt .*pass --vocab"):
    answering.tokenizer_for(tiny[0])
  # Nothing to hold it to: the given one is taken (the app does the same).
  assert len(answering.tokenizer_for(tiny[0], STUDENT_VOCAB)) != len(
      answering.tokenizer_for(tiny[0], VOCAB))


@pytest.mark.parametrize("flag, value, message", [
    ("--passage", "missing.txt", "error: --passage "),
    ("--passage", "blank.txt", "error: --passage blank.txt: the passage is "
     "empty"),
    ("--question", " ", "error: --question is empty"),
    ("--passage", "", "error: --passage is empty: give a passage file"),
    ("--question", "", "error: --question is empty"),
    # Only zero-width / control characters: no words for the model.
    ("--passage", "unseen.txt", "error: --passage unseen.txt: no words in "
     "it"),
    ("--question", "\u200b\u0001", "error: --question: no words in it"),
    ("--model", "missing.tflite", "error: --model missing.tflite: cannot load"),
    ("--vocab", "missing_vocab.txt", "error: --vocab missing_vocab.txt"),
])
def test_twin_command_refuses_bad_input(tiny, tmp_path, flag, value, message):
  (tmp_path / "p.txt").write_text("A passage.")
  (tmp_path / "blank.txt").write_text(" \n\t\n")
  (tmp_path / "unseen.txt").write_text("\u200b\u200d\u0001\n")
  args = {"--model": tiny[0], "--vocab": VOCAB,
          "--passage": str(tmp_path / "p.txt"), "--question": "What?"}
  in_tmp = value.startswith(("missing", "blank", "unseen"))
  args[flag] = str(tmp_path / value) if in_tmp else value
  for name in ("missing", "blank", "unseen"):
    message = message.replace(name, str(tmp_path / name))
  result = _command("android_bench.qa_app",
                    *[x for kv in args.items() for x in kv])
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1].startswith(message)
  assert result.stdout == ""


# --- the app's asset ---------------------------------------------------------

def test_sample_passages_asset_is_made_from_the_shipped_data():
  made = sample_passages.build_sample_passages(
      os.path.join(DATA, "wordnet_qa", "dev.json.gz"))
  with open(sample_passages.ASSET, encoding="utf-8") as f:
    assert f.read() == sample_passages.to_json(made), (
        "stale asset: python -m android_bench.qa_app.sample_passages")
  passages = made["passages"]
  assert len(passages) == 20
  for p in passages:
    for q in p["questions"]:
      start = q["answer_start"]
      assert p["passage"][start:start + len(q["answer"])] == q["answer"]
  assert max(len(p["passage"]) for p in passages) > 2500  # several windows
