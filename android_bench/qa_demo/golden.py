"""Golden vectors: what the Python pipeline makes of real text, for the JVM.

The app's Java core must tokenize, window and decode exactly as
`tfmodels.tokenization` and `tfmodels.data.squad` do. This command writes
their results on shipped and hand-made text into gzip'd TSV files that the
qa-core JUnit tests read with java.util.zip:

    tokenization.tsv.gz  sentences -> ids and character offsets
    codepoints.tsv.gz    every code point tensorflow-text's normalizer changes,
                         and which ones split words (whitespace, punctuation)
    qa.tsv.gz            question + passage -> windows (ids, mask, segment
                         ids, offsets, max-context) and, for seeded synthetic
                         logits, the decoded answer
    end_to_end.tsv.gz    real logits of a converted span model for real
                         questions, and the answer the Python twin gives

    python -m android_bench.qa_demo.golden \
        --output_dir tests/fixtures/qa_demo --overwrite
    # later, from the real converted model:
    python -m android_bench.qa_demo.golden --model mobilebert_qa.tflite \
        --output_dir tests/fixtures/qa_demo --overwrite

Without --model the end-to-end logits come from `tiny_model` (untrained).
Format: one record per line, tab-separated; text fields escape backslash,
tab, CR and LF as \\\\, \\t, \\r, \\n; lists are space-separated; offsets are
code points (Python string indices); `@key=value` lines give settings.
"""

import gzip
import hashlib
import os
import sys
import tempfile

from absl import app, flags
import numpy as np

from android_bench import qa_demo
from android_bench.qa_demo import answering
from android_bench.qa_demo.handmade_text import EXTRA_SENTENCES, HANDMADE

FLAGS = flags.FLAGS


def _define_flags():
  """Flags exist only when run as a command: tests import this module."""
  flags.DEFINE_string("output_dir", None, "Directory to write (replaced as a "
                      "whole, so only with --overwrite if it exists).")
  flags.DEFINE_string("model", None, "Converted span model (.tflite) for the "
                      "end-to-end logits; default: a tiny untrained stand-in.")
  flags.DEFINE_string("data_dir", "data", "The shipped data directory.")
  flags.DEFINE_string("vocab", "data/vocab/uncased_vocab.txt", "vocab.txt.")
  flags.DEFINE_bool("overwrite", False, "Replace an existing --output_dir.")
  flags.DEFINE_integer("seed", 0, "Seed of the synthetic logits.")
  flags.mark_flag_as_required("output_dir")


FILES = ("tokenization.tsv.gz", "codepoints.tsv.gz", "qa.tsv.gz",
         "end_to_end.tsv.gz")
NUM_DEV_CASES = 250
NUM_CONCAT_CASES = 20
NUM_DOCUMENT_CASES = 10
NUM_CORPUS_SENTENCES = 260
NUM_SPAM_SENTENCES = 40


def escape(text):
  return (text.replace("\\", "\\\\").replace("\t", "\\t")
          .replace("\r", "\\r").replace("\n", "\\n"))


def ints(values):
  return " ".join(str(int(v)) for v in values)


def floats(values):
  """Shortest strings that parse back (Python and Java) to the same float32."""
  out = [np.format_float_positional(np.float32(v), unique=True, trim="-")
         for v in values]
  if not np.array_equal(np.asarray(out, np.float32),
                        np.asarray(values, np.float32)):
    raise AssertionError("float32 values do not round-trip")
  return " ".join(out)


def settings_lines(tokenizer, sequence_length):
  return [f"@sequence_length={sequence_length}",
          f"@doc_stride={qa_demo.DOC_STRIDE}",
          f"@max_query_length={qa_demo.MAX_QUERY_LENGTH}",
          f"@n_best_size={qa_demo.N_BEST_SIZE}",
          f"@max_answer_length={qa_demo.MAX_ANSWER_LENGTH}",
          f"@lower_case={int(tokenizer.lower_case)}"]


# --- text ------------------------------------------------------------------

def _paragraphs(path):
  """Documents of a one-sentence-per-line file (blank line between them)."""
  from tfmodels.data.text_io import read_lines
  documents, current = [], []
  for line in read_lines(path):
    if line:
      current.append(line)
    elif current:
      documents.append(current)
      current = []
  if current:
    documents.append(current)
  return documents


def gather_sentences(data_dir):
  """(source, text) pairs: shipped corpus, e-mail, questions, hand-made."""
  from tfmodels.data.text_io import read_lines
  sentences = []
  corpus = [s for doc in _paragraphs(os.path.join(
      data_dir, "pretraining", "heldout.txt.gz")) for s in doc]
  step = max(1, len(corpus) // NUM_CORPUS_SENTENCES)
  sentences += [("pretraining/heldout", s)
                for s in corpus[::step][:NUM_CORPUS_SENTENCES]]
  spam = read_lines(os.path.join(data_dir, "spam", "dev.tsv.gz"))[1:]
  sentences += [("spam/dev", line.rsplit("\t", 1)[0])
                for line in spam[:NUM_SPAM_SENTENCES]]
  for case_id, passage, question, _ in HANDMADE:
    sentences += [(f"handmade:{case_id}", passage),
                  (f"handmade:{case_id}", question)]
  sentences += [("handmade", s) for s in EXTRA_SENTENCES]
  return sentences


def tokenization_lines(tokenizer, sentences):
  lines = ["# QA demo golden vectors: WordPiece ids and code point offsets "
           "(tfmodels.tokenization)",
           f"@lower_case={int(tokenizer.lower_case)}"]
  encodings = tokenizer.encode_batch([text for _, text in sentences])
  for (source, text), enc in zip(sentences, encodings):
    lines.append("\t".join(["T", escape(source), escape(text), ints(enc.ids),
                            ints(enc.char_start), ints(enc.char_end)]))
  return lines


def codepoint_lines(tokenizer):
  """The normalizer per code point (both modes) and the word-splitting classes.

  FastBertTokenizer normalizes with tensorflow-text's FastBertNormalizer, so
  its table is the Python side's truth. Classes are read off the tokenizer:
  for a code point c the normalizer leaves alone, "a{c}b" gives [a, b] when c
  is whitespace and [a, X, b] when c is a word of its own (punctuation, CJK).
  """
  import tensorflow as tf
  import tensorflow_text as text
  code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
  chars = [chr(c) for c in code_points]
  lines = ["# QA demo golden vectors: tensorflow-text's normalization of every "
           "changed code point (N lower_case cp -> cps) and the code points "
           "that split words (C class first last)"]
  unchanged = None
  for lower in (True, False):
    normalizer = text.FastBertNormalizer(lower_case_nfd_strip_accents=lower)
    mapped = []
    for begin in range(0, len(chars), 1 << 16):
      batch = tf.constant(chars[begin:begin + (1 << 16)])
      mapped += [m.decode("utf-8") for m in normalizer.normalize(batch).numpy()]
    same = [m == c for m, c in zip(mapped, chars)]
    if lower == tokenizer.lower_case:
      unchanged = same
    for c, m, s in zip(code_points, mapped, same):
      if not s:
        lines.append(f"N\t{int(lower)}\t{c:X}\t"
                     + " ".join(f"{ord(x):X}" for x in m))
  a, b = tokenizer.token_to_id["a"], tokenizer.token_to_id["b"]
  probes = [c for c, s in zip(code_points, unchanged) if s]
  classes = []
  for c, ids in zip(probes, tokenizer.ids_batch([f"a{chr(c)}b"
                                                 for c in probes])):
    if ids == [a, b]:
      classes.append((c, "space"))
    elif len(ids) == 3 and ids[0] == a and ids[2] == b:
      classes.append((c, "punct"))
  run_start = None
  for i, (c, kind) in enumerate(classes):  # merge into ranges
    if run_start is None:
      run_start = (c, kind)
    following = classes[i + 1] if i + 1 < len(classes) else None
    if following is None or following != (c + 1, kind):
      lines.append(f"C\t{kind}\t{run_start[0]:X}\t{c:X}")
      run_start = None
  return lines


# --- question answering ----------------------------------------------------

def gather_cases(data_dir, tokenizer):
  """(id, source, SquadExample, gold (start, end) or None) for the QA file."""
  from tfmodels.data import squad
  dev = squad.read_squad(os.path.join(data_dir, "wordnet_qa", "dev.json.gz"))
  examples = dev.examples
  cases = [(e.qas_id, "wordnet_qa/dev", e, (e.answer_start, e.answer_end))
           for e in examples[:NUM_DEV_CASES]]
  # Long passages: consecutive dev contexts joined, asked about the middle one.
  size = 14
  for k in range(NUM_CONCAT_CASES):
    group = examples[NUM_DEV_CASES + k * size:NUM_DEV_CASES + (k + 1) * size]
    target = (k * 5) % len(group)
    passage, start = "", 0
    for i, e in enumerate(group):
      if i == target:
        start = len(passage) + e.answer_start
      passage += e.context + ("\n\n" if i % 4 == 3 else " ")
    e = group[target]
    cases.append((f"concat-{k}", f"wordnet_qa/dev[{NUM_DEV_CASES + k * size}:"
                  f"{NUM_DEV_CASES + (k + 1) * size}]",
                  answering.make_example(passage, e.question, f"concat-{k}"),
                  (start, start + len(e.answer_text))))
  # Long documents: asked with one of their own sentences, some of them
  # longer than the 64-piece question limit; the gold answer is the first
  # words of another sentence.
  documents = [d for d in _paragraphs(os.path.join(
      data_dir, "pretraining", "heldout.txt.gz")) if len(d) >= 12]
  rng = np.random.default_rng(1)
  for k, doc in enumerate(documents[:NUM_DOCUMENT_CASES]):
    sentences = doc[:12]
    passage = " ".join(sentences)
    question = sentences[int(rng.integers(len(sentences)))]
    target = sentences[int(rng.integers(len(sentences)))]
    start = passage.index(target)
    answer = " ".join(target.split(" ")[:4])
    cases.append((f"document-{k}", "pretraining/heldout",
                  answering.make_example(passage, question, f"document-{k}"),
                  (start, start + len(answer))))
  for case_id, passage, question, answer in HANDMADE:
    start = passage.index(answer)
    cases.append((f"handmade-{case_id}", "handmade",
                  answering.make_example(passage, question,
                                         f"handmade-{case_id}"),
                  (start, start + len(answer))))
  # Window edges: a passage that just fits, one piece more, nothing at all.
  question = "What is it?"
  room = (qa_demo.SEQUENCE_LENGTH - 3
          - len(tokenizer.encode(question).ids))
  for n in (room, room + 1, 2 * room):
    passage = " ".join(["word"] * n)
    cases.append((f"edge-{n}-pieces", "edge",
                  answering.make_example(passage, question, f"edge-{n}"), None))
  for case_id, passage in (("edge-empty", ""), ("edge-blank", " \t\n ")):
    cases.append((case_id, "edge", answering.make_example(
        passage, question, case_id), None))
  cases.append(("edge-empty-question", "edge", answering.make_example(
      examples[0].context, "", "edge-empty-question"), None))
  return cases


def synthetic_logits(rng, style, meta, length, gold):
  """Seeded logits for one window, with the gold span raised in some styles.

  Quantized values make many ties, so the tie-breaking order is tested;
  style 0 also raises candidates the decoder must refuse (in the question,
  in the padding, too long, reversed). Padding logits are a constant (they
  compress to nothing) except for that decoy.
  """
  lo, hi = meta.context_offset, meta.context_offset + meta.window_length
  used = hi + 1  # [CLS] question [SEP] window [SEP]; padding stays at -20
  start = np.full(length, -20, np.float32)
  end = np.full(length, -20, np.float32)
  if style == 1:
    start[:used] = rng.normal(0, 2, used)
    end[:used] = rng.normal(0, 2, used)
  else:
    step = 1.0 if style == 3 else 0.5
    start[:used] = np.round(rng.normal(0, 2, used) / step) * step
    end[:used] = np.round(rng.normal(0, 2, used) / step) * step
  if gold is not None and style in (0, 1):
    from tfmodels.data import squad
    span = squad.char_span_to_pieces(meta.char_start, meta.char_end, *gold)
    if span is not None:
      start[lo + span[0]] += 8
      end[lo + span[1]] += 8
  if style == 0 and hi > lo:
    start[1] += 9  # a question piece
    end[min(hi + 1, length - 1)] += 9  # [SEP] or padding
    if hi - lo > 40:
      start[lo] += 5
      end[lo + 40] += 5  # 41 pieces: too long
      start[lo + 3] += 4
      end[lo + 2] += 4  # reversed
  return start, end


def qa_record_lines(case_id, source, example, arrays, metas, rows, answer,
                    start_logits, end_logits):
  lines = ["\t".join(["Q", escape(case_id), escape(source),
                      escape(example.question), escape(example.context),
                      escape(answer), str(len(rows))])]
  for row in rows:
    meta = metas[row]
    lines.append("\t".join([
        "W", str(meta.window_index), str(meta.context_offset),
        ints(arrays["input_ids"][row]), ints(arrays["input_mask"][row]),
        ints(arrays["segment_ids"][row]), ints(meta.char_start),
        ints(meta.char_end), "".join("1" if m else "0"
                                     for m in meta.is_max_context),
        floats(start_logits[row]), floats(end_logits[row])]))
  return lines


def qa_lines(tokenizer, cases, seed):
  examples = [example for _, _, example, _ in cases]
  arrays, metas = answering.build_features(examples, tokenizer)
  length = arrays["input_ids"].shape[1]
  start_logits = np.zeros(arrays["input_ids"].shape, np.float32)
  end_logits = np.zeros_like(start_logits)
  rows_of = [[] for _ in cases]
  for row, meta in enumerate(metas):
    rows_of[meta.example_index].append(row)
  for index, (_, _, _, gold) in enumerate(cases):
    rng = np.random.default_rng([seed, index])
    style = index % 4
    if style == 1 and len(rows_of[index]) > 1:
      style = 0  # full-precision floats only where they are few (size)
    for row in rows_of[index]:
      start_logits[row], end_logits[row] = synthetic_logits(
          rng, style, metas[row], length, gold)
  answers = answering.decode(examples, metas, start_logits, end_logits)
  lines = ["# QA demo golden vectors: features (tfmodels.data.squad."
           "build_features) and answers (squad.postprocess) for seeded "
           "synthetic logits"] + settings_lines(tokenizer, length)
  for index, (case_id, source, example, _) in enumerate(cases):
    lines += qa_record_lines(case_id, source, example, arrays, metas,
                             rows_of[index], answers[example.qas_id],
                             start_logits, end_logits)
  return lines


def end_to_end_cases(data_dir, tokenizer):
  """Real questions for the model: a short passage, a long one, French."""
  cases = gather_cases(data_dir, tokenizer)
  wanted = {cases[0][0], cases[1][0], "concat-0", "handmade-fr"}
  return [(i, s, e) for i, s, e, _ in cases if i in wanted]


def end_to_end_lines(tokenizer, model, description, cases):
  """The twin's predictions with the model's real logits."""
  from android_bench.qa_demo.answering import predict
  lines = ["# QA demo golden vectors: logits of a converted span model and "
           "the Python twin's answers"] + settings_lines(
               tokenizer, model.sequence_length) + [f"@model={description}"]
  for case_id, source, example in cases:
    p = predict(example.context, example.question, tokenizer, model)
    for m in p.metas:  # one example per prediction
      assert m.example_index == 0
    lines += qa_record_lines(case_id, source, example, p.arrays, p.metas,
                             list(range(p.windows)), p.answer, p.start_logits,
                             p.end_logits)
  return lines


# --- output ----------------------------------------------------------------

def write_gzip(path, lines):
  """Reproducible gzip (no name, no time stamp): same lines, same bytes."""
  data = "".join(line + "\n" for line in lines).encode("utf-8")
  with open(path, "wb") as raw:
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
      f.write(data)


def read_gzip_lines(path):
  with gzip.open(path, "rb") as f:
    return f.read().decode("utf-8").split("\n")[:-1]


def sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _model(path, vocab_size, workdir):
  """(SpanModel, description): the given model, or the tiny stand-in."""
  from android_bench.qa_demo.span_model import SpanModel
  from android_bench.qa_demo.tiny_model import CONFIG, export_tiny_span_model
  if path is None:
    path = os.path.join(workdir, "tiny_span.tflite")
    export_tiny_span_model(path, vocab_size)
    origin = (f"untrained {CONFIG} span model (android_bench.qa_demo."
              f"tiny_model, seed 0)")
  else:
    origin = os.path.basename(path)
  model = SpanModel(path, num_threads=1)
  return model, f"{origin} sha256={sha256(path)}"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if os.path.exists(FLAGS.output_dir) and not FLAGS.overwrite:
    sys.exit(f"error: --output_dir {FLAGS.output_dir} exists "
             "(pass --overwrite)")
  if FLAGS.model is not None and not os.path.isfile(FLAGS.model):
    sys.exit(f"error: --model {FLAGS.model}: no such file")
  # After the cheap checks: TensorFlow takes seconds to load.
  from android_bench.qa_demo import QaDemoError
  from tfmodels.staging import staged_directory
  from tfmodels.tokenization import VocabError, WordPieceTokenizer
  try:
    tokenizer = WordPieceTokenizer(FLAGS.vocab)
  except VocabError as e:
    sys.exit(f"error: --vocab {e}")
  try:
    sentences = gather_sentences(FLAGS.data_dir)
    cases = gather_cases(FLAGS.data_dir, tokenizer)
  except (ValueError, OSError) as e:
    sys.exit(f"error: --data_dir {e}")
  print(f"{len(sentences)} sentences, {len(cases)} QA cases")
  with tempfile.TemporaryDirectory() as workdir:
    try:
      model, description = _model(FLAGS.model, len(tokenizer), workdir)
    except QaDemoError as e:
      sys.exit(f"error: --model {e}")
    print(f"end-to-end model: {description}")
    contents = {
        "tokenization.tsv.gz": tokenization_lines(tokenizer, sentences),
        "codepoints.tsv.gz": codepoint_lines(tokenizer),
        "qa.tsv.gz": qa_lines(tokenizer, cases, FLAGS.seed),
        "end_to_end.tsv.gz": end_to_end_lines(
            tokenizer, model, description,
            end_to_end_cases(FLAGS.data_dir, tokenizer)),
    }
  with staged_directory(FLAGS.output_dir) as staging:
    os.chmod(staging, 0o755)  # a fixture directory, not a private temp one
    for name in FILES:
      write_gzip(os.path.join(staging, name), contents[name])
  for name in FILES:
    size = os.path.getsize(os.path.join(FLAGS.output_dir, name))
    print(f"wrote {os.path.join(FLAGS.output_dir, name)} ({size} bytes)")


def run():
  _define_flags()
  app.run(main)


if __name__ == "__main__":
  run()
