"""Pre-training TFRecords made from the shipped held-out corpus, measured."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import HELDOUT_CORPUS, STUDENT_VOCAB, VOCAB
from tfmodels.configs import load_config
from tfmodels.data import pretraining_records as records
from tfmodels.data.pretraining import (MixedVocabulary, PretrainingOptions,
                                       create_instances, read_documents,
                                       truncate_seq_pair)
from tfmodels.data.pretraining_dataset import pretraining_dataset
from tfmodels.models import build_pretrainer
from tfmodels.tokenization import WordPieceTokenizer



@pytest.fixture(scope="module")
def vocab(tokenizer):
  return MixedVocabulary(tokenizer)


@pytest.fixture(scope="module")
def mixed_vocab(tokenizer):
  return MixedVocabulary(tokenizer, WordPieceTokenizer(STUDENT_VOCAB))


@pytest.fixture(scope="module")
def documents(vocab):
  return read_documents([HELDOUT_CORPUS], vocab)


def _write_and_read(tmp_path, documents, vocab, options, dupe_factor=2):
  """Instances -> shards -> tf.data reader -> numpy arrays (all records)."""
  instances = create_instances(documents, vocab, options, random.Random(7),
                               dupe_factor)
  out = tmp_path / "shards"
  out.mkdir()
  records.write_shards(instances, vocab, options, str(out), num_shards=3)
  meta = {"options": vars(options), "mixed_vocabulary": vocab.mixed,
          **records.summarize(instances, vocab)}
  (out / "meta.json").write_text(json.dumps(meta))
  batches = list(pretraining_dataset(str(out), batch_size=4096,
                                     is_training=False))
  arrays = {k: np.concatenate([b[k].numpy() for b in batches])
            for k in batches[0]}
  assert len(arrays["input_ids"]) == len(instances)
  return arrays, meta


def _originals(arrays):
  """input_ids with the masked positions put back to their original ids."""
  ids = arrays["input_ids"].copy()
  rows = np.arange(len(ids))[:, None]
  weights = arrays["masked_lm_weights"] > 0
  ids[np.broadcast_to(rows, weights.shape)[weights],
      arrays["masked_lm_positions"][weights]] = (
          arrays["masked_lm_ids"][weights])
  return ids


def _check_bert_statistics(arrays, vocab):
  weights = arrays["masked_lm_weights"] > 0
  positions = arrays["masked_lm_positions"][weights]
  rows = np.broadcast_to(np.arange(len(weights))[:, None],
                         weights.shape)[weights]
  masked_now = arrays["input_ids"][rows, positions]
  original = arrays["masked_lm_ids"][weights]
  # 15% +- 1% of the tokens (BERT counts [CLS]/[SEP] in the length).
  assert abs(weights.sum() / arrays["input_mask"].sum() - 0.15) < 0.01
  # 80 / 10 / 10 within 2%.
  assert abs(np.mean(masked_now == vocab.mask_id) - 0.8) < 0.02
  assert abs(np.mean(masked_now == original) - 0.1) < 0.02
  assert abs(np.mean((masked_now != original) &
                     (masked_now != vocab.mask_id)) - 0.1) < 0.02
  # Never [CLS], [SEP] or padding.
  assert np.all(arrays["input_mask"][rows, positions] == 1)
  assert not np.isin(original, [vocab.cls_id, vocab.sep_id]).any()
  assert np.all(positions > 0)
  # Labels balanced within 3%.
  assert abs(arrays["next_sentence_labels"].mean() - 0.5) < 0.03
  # Layout: [CLS] A [SEP] B [SEP], segment 1 exactly over B [SEP].
  ids = _originals(arrays)
  for row in range(0, len(ids), 97):
    n = arrays["input_mask"][row].sum()
    seps = np.flatnonzero(ids[row, :n] == vocab.sep_id)
    assert ids[row, 0] == vocab.cls_id and seps[-1] == n - 1
    segment = arrays["segment_ids"][row, :n]
    assert np.all(segment[:seps[0] + 1] == 0)
    assert np.all(segment[seps[0] + 1:] == 1)


def test_bert_masking_and_nsp(tmp_path, documents, vocab):
  arrays, meta = _write_and_read(tmp_path, documents, vocab,
                                 PretrainingOptions())
  assert len(arrays["input_ids"]) > 3000
  assert arrays["input_ids"].shape[1] == 128
  assert arrays["masked_lm_positions"].shape[1] == 20
  _check_bert_statistics(arrays, vocab)
  assert meta["ngram_counts"] == {"1": meta["masked_tokens"]}


def test_whole_word_masking_masks_every_piece_of_a_word(tmp_path, documents,
                                                        vocab):
  arrays, _ = _write_and_read(tmp_path, documents, vocab,
                              PretrainingOptions(whole_word_mask=True))
  _check_bert_statistics(arrays, vocab)
  ids = _originals(arrays)
  multi_piece_words = 0
  for row in range(len(ids)):
    masked = set(arrays["masked_lm_positions"][row][
        arrays["masked_lm_weights"][row] > 0].tolist())
    n = arrays["input_mask"][row].sum()
    word = []
    for i in range(1, n + 1):
      if (i < n and word and vocab.is_continuation[ids[row, i]]
          and ids[row, i - 1] != vocab.sep_id):
        word.append(i)
        continue
      if len(word) > 1:
        flags = {p in masked for p in word}
        assert len(flags) == 1, (row, word)
        multi_piece_words += flags == {True}
      word = [i]
  assert multi_piece_words > 300


def test_albert_ngram_masking_and_sop(tmp_path, documents, vocab):
  options = PretrainingOptions(max_ngram=3, whole_word_mask=True,
                               sentence_objective="sop")
  arrays, meta = _write_and_read(tmp_path, documents, vocab, options)
  counts = {int(k): v for k, v in meta["ngram_counts"].items()}
  total = sum(counts.values())
  expected = {1: 6 / 11, 2: 3 / 11, 3: 2 / 11}  # p(n) proportional to 1/n
  assert set(counts) == {1, 2, 3} and total > 20_000
  for n, p in expected.items():
    assert abs(counts[n] / total - p) < 0.03, (n, counts[n] / total)
  assert abs(arrays["next_sentence_labels"].mean() - 0.5) < 0.03
  assert abs(meta["masked_fraction"] - 0.15) < 0.01


def test_mixed_vocabulary_stage_one(tmp_path, mixed_vocab):
  documents = read_documents([HELDOUT_CORPUS], mixed_vocab)
  arrays, meta = _write_and_read(
      tmp_path, documents, mixed_vocab,
      PretrainingOptions(whole_word_mask=True), dupe_factor=1)
  teacher_size = mixed_vocab.teacher_size
  assert meta["mixed_vocabulary"]
  weights = arrays["masked_lm_weights"] > 0
  assert weights.sum(axis=1).max() <= 20
  teacher_masked = (weights & (arrays["masked_lm_vocab"] == 0)).sum(axis=1)
  assert teacher_masked.max() <= 10
  assert np.array_equal(arrays["masked_lm_vocab"][weights],
                        arrays["masked_lm_ids"][weights] >= teacher_size)
  ids = _originals(arrays)
  real = arrays["input_mask"] > 0
  assert np.array_equal(arrays["input_vocab"][real], ids[real] >= teacher_size)
  assert ids.max() < mixed_vocab.size
  # About half the words are student-segmented (p_SV = 0.5).
  starts = real & ~mixed_vocab.is_continuation[ids] & ~np.isin(
      ids, [mixed_vocab.cls_id, mixed_vocab.sep_id])
  assert abs(np.mean(ids[starts] >= teacher_size) - 0.5) < 0.02
  # Masked fraction still 15% within 1% despite the teacher cap.
  assert abs(weights.sum() / real.sum() - 0.15) < 0.01


def test_reader_feeds_the_pretrainer(tmp_path, documents, vocab):
  options = PretrainingOptions(max_seq_length=64, max_predictions_per_seq=10)
  _write_and_read(tmp_path, documents[:6], vocab, options, dupe_factor=1)
  batch = next(iter(pretraining_dataset(str(tmp_path / "shards"),
                                        batch_size=2, seed=1)))
  config = load_config("tiny_bert").replace(vocab_size=len(vocab.teacher))
  model = build_pretrainer(config, seq_length=64, max_predictions=10)
  outputs = model({k: batch[k] for k in model.input_names}
                  if isinstance(model.input, dict) else batch)
  assert outputs["mlm_logits"].shape == (2, 10, len(vocab.teacher))
  assert outputs["sentence_logits"].shape == (2, 2)


def _ordered_documents(vocab, num_docs=6, sentences=30, length=5):
  """Documents of whole-word ids, increasing through each document."""
  pool = [i for i in range(2000, vocab.teacher_size)
          if not vocab.is_continuation[i]]
  per_doc = sentences * length
  return [[pool[d * per_doc + k * length:d * per_doc + (k + 1) * length]
           for k in range(sentences)] for d in range(num_docs)]


def _pair(instance, vocab):
  tokens = list(instance.tokens)
  for p, t in zip(instance.masked_lm_positions, instance.masked_lm_ids):
    tokens[p] = t
  sep = tokens.index(vocab.sep_id)
  return tokens[1:sep], tokens[sep + 1:-1]


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_sentence_labels_mean_what_they_say(vocab, objective):
  documents = _ordered_documents(vocab)
  doc_of = {t: d for d, doc in enumerate(documents) for s in doc for t in s}
  options = PretrainingOptions(max_seq_length=24, sentence_objective=objective)
  instances = create_instances(documents, vocab, options, random.Random(3), 4)
  labels = [i.is_random_next for i in instances]
  assert 0.4 < np.mean(labels) < 0.6
  for instance in instances:
    a, b = _pair(instance, vocab)
    same_doc = {doc_of[t] for t in a} == {doc_of[t] for t in b}
    assert len({doc_of[t] for t in a}) == 1
    if objective == "nsp" and instance.is_random_next:
      assert not same_doc  # B from another document
    elif instance.is_random_next:  # SOP: the true pair, swapped
      assert same_doc and max(b) < min(a)
    else:  # B continues A
      assert same_doc and max(a) < min(b)


def test_every_sentence_is_used(vocab):
  """Sentences left unused by a random-next B are put back, not lost."""
  documents = _ordered_documents(vocab)
  # 35 tokens = 7 sentences: no truncation, so every id must reappear.
  options = PretrainingOptions(max_seq_length=38, short_seq_prob=0)
  instances = create_instances(documents, vocab, options, random.Random(5))
  seen = set()
  for instance in instances:
    a, b = _pair(instance, vocab)
    seen.update(a)
    if not instance.is_random_next:
      seen.update(b)
  all_ids = {t for doc in documents for s in doc for t in s}
  assert len(seen) / len(all_ids) > 0.97  # cut one-sentence chunks lose B


def test_short_and_degenerate_documents(vocab):
  """One-sentence and one-token documents, and a budget of one mask."""
  documents = [[[2000]], [[2001, 2002]], [[2003, 2004], [2005]]]
  options = PretrainingOptions(max_seq_length=8, max_ngram=3,
                               whole_word_mask=True)
  instances = create_instances(documents, vocab, options, random.Random(0),
                               dupe_factor=50)
  assert len(instances) > 50
  for instance in instances:
    assert len(instance.tokens) <= 8
    assert len(instance.masked_lm_positions) == 1  # round(n * 0.15) -> 1
    assert instance.tokens.count(vocab.sep_id) == 2


def test_truncate_seq_pair_trims_the_longer_side():
  a, b = list(range(10)), list(range(100, 103))
  truncate_seq_pair(a, b, 8, random.Random(0))
  assert len(a) == 5 and b == [100, 101, 102]
  assert a == sorted(a) and set(a) <= set(range(10))


def test_bad_options_name_the_field():
  with pytest.raises(ValueError, match="masked_lm_prob=1.5"):
    PretrainingOptions(masked_lm_prob=1.5)
  with pytest.raises(ValueError, match="sentence_objective='next'"):
    PretrainingOptions(sentence_objective="next")


def test_command_writes_shards_and_refuses_to_overwrite(tmp_path):
  text = tmp_path / "corpus.txt"
  text.write_text("The cat sat on the mat.\nIt was warm.\nThen it slept.\n\n"
                  "Dogs bark at night.\nThe moon was full.\n")
  out = tmp_path / "out"
  command = [sys.executable, "-m", "tfmodels.data.create_pretraining_data",
             "--input_file", str(text), "--output_dir", str(out),
             "--vocab_file", VOCAB, "--dupe_factor", "3", "--num_shards", "2",
             "--max_seq_length", "32", "--max_predictions_per_seq", "5"]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  first = subprocess.run(command, capture_output=True, text=True, env=env)
  assert first.returncode == 0, first.stderr[-500:]
  meta = json.loads((out / "meta.json").read_text())
  assert meta["documents"] == 2 and meta["instances"] > 0
  assert sorted(os.listdir(out)) == [
      ".written_by.json", "meta.json", "pretrain-00000-of-00002.tfrecord",
      "pretrain-00001-of-00002.tfrecord"]
  again = subprocess.run(command, capture_output=True, text=True, env=env)
  assert again.returncode != 0
  assert again.stderr.strip().endswith(
      f"error: --output_dir {out}: exists (pass --overwrite)")
  replaced = subprocess.run(command + ["--overwrite"], capture_output=True,
                            text=True, env=env)  # its own output
  assert replaced.returncode == 0, replaced.stderr[-500:]


def test_command_refuses_bad_input_and_foreign_directories(tmp_path):
  corrupt = tmp_path / "corpus.txt.gz"
  corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("keep me")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  base = [sys.executable, "-m", "tfmodels.data.create_pretraining_data",
          "--vocab_file", VOCAB]
  bad = subprocess.run(base + ["--input_file", str(corrupt), "--output_dir",
                               str(tmp_path / "out")],
                       capture_output=True, text=True, env=env)
  assert bad.returncode != 0
  assert bad.stderr.strip().splitlines()[-1].startswith(
      f"error: --input_file {corrupt}: cannot read text")
  assert not (tmp_path / "out").exists()
  foreign = subprocess.run(
      base + ["--input_file", HELDOUT_CORPUS, "--output_dir", str(mine),
              "--overwrite"], capture_output=True, text=True, env=env)
  assert foreign.returncode != 0
  assert foreign.stderr.strip().splitlines()[-1].startswith(
      f"error: --output_dir {mine}: was not written by "
      "create_pretraining_data (it holds notes.txt)")
  assert (mine / "notes.txt").read_text() == "keep me"


def test_heldout_mlm_metrics_match_a_direct_computation(tmp_path, documents,
                                                         vocab):
  from tfmodels.training.mlm_eval import evaluate_pretraining
  options = PretrainingOptions(max_seq_length=32, max_predictions_per_seq=5)
  arrays, _ = _write_and_read(tmp_path, documents[:4], vocab, options,
                              dupe_factor=1)
  config = load_config("tiny_bert").replace(vocab_size=len(vocab.teacher),
                                            max_position_embeddings=32)
  model = build_pretrainer(config)
  got = evaluate_pretraining(model, str(tmp_path / "shards"), batch_size=7)
  out = model({k: arrays[k] for k in model.input_names}, training=False)
  logits = out["mlm_logits"].numpy().astype(np.float64)
  log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  w = arrays["masked_lm_weights"]
  picked = np.take_along_axis(log_p, arrays["masked_lm_ids"][..., None],
                              -1)[..., 0]
  assert got["masked_tokens"] == int(w.sum())
  assert got["mlm_loss"] == pytest.approx(-(picked * w).sum() / w.sum(),
                                          rel=1e-4)
  hits = log_p.argmax(-1) == arrays["masked_lm_ids"]
  assert got["mlm_accuracy"] == pytest.approx((hits * w).sum() / w.sum())
  nsp = out["sentence_logits"].numpy().argmax(-1)
  assert got["sentence_accuracy"] == pytest.approx(
      np.mean(nsp == arrays["next_sentence_labels"]))


def _google_record(ids, positions, label, seq_length=16, predictions=4):
  """One record as Google's create_pretraining_data writes it."""
  import tensorflow as tf
  pad = lambda v, n: list(v) + [0] * (n - len(v))
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
  features = {
      "input_ids": ints(pad(ids, seq_length)),
      "input_mask": ints(pad([1] * len(ids), seq_length)),
      "segment_ids": ints([0] * seq_length),
      "masked_lm_positions": ints(pad(positions, predictions)),
      "masked_lm_ids": ints(pad([ids[p] for p in positions], predictions)),
      "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
          value=pad([1.0] * len(positions), predictions))),
      "next_sentence_labels": ints([label])}
  return tf.train.Example(features=tf.train.Features(
      feature=features)).SerializeToString()


def test_google_shards_without_meta_json(tmp_path):
  import tensorflow as tf
  from tfmodels.data.pretraining_dataset import read_meta
  for name, rows in (("a.tfrecord", [([101, 7, 8, 102], [1], 0)]),
                     ("b.tfrecord-00001-of-00002",
                      [([101, 9, 2999, 102], [2], 1)])):
    with tf.io.TFRecordWriter(str(tmp_path / name)) as w:
      for row in rows:
        w.write(_google_record(*row))
  (tmp_path / "notes.txt").write_text("not a shard")
  meta = read_meta(str(tmp_path))
  assert meta["options"]["max_seq_length"] == 16
  assert meta["options"]["max_predictions_per_seq"] == 4
  assert meta["vocab_size"] == 3000 and len(meta["files"]) == 2
  batch = next(iter(pretraining_dataset(str(tmp_path), 2, is_training=False)))
  assert sorted(batch["next_sentence_labels"].numpy().tolist()) == [0, 1]
  assert batch["input_ids"].shape == (2, 16)
  # One file, or a glob, reads the same way.
  assert read_meta(str(tmp_path / "a.tfrecord"))["files"] == [
      str(tmp_path / "a.tfrecord")]
  assert len(read_meta(str(tmp_path / "*.tfrecord*"))["files"]) == 2


def test_foreign_files_that_are_not_pretraining_records(tmp_path):
  import tensorflow as tf
  from tfmodels.data.pretraining_dataset import read_meta
  example = tf.train.Example(features=tf.train.Features(feature={
      "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(
          value=[1]))}))
  with tf.io.TFRecordWriter(str(tmp_path / "x.tfrecord")) as w:
    w.write(example.SerializeToString())
  with pytest.raises(ValueError, match="x.tfrecord: not a pre-training "
                     "record .no input_mask"):
    read_meta(str(tmp_path))
  (tmp_path / "x.tfrecord").write_bytes(b"garbage, not a TFRecord")
  with pytest.raises(ValueError, match="cannot read TFRecords"):
    read_meta(str(tmp_path))
  (tmp_path / "sub").mkdir()
  with pytest.raises(ValueError, match="no meta.json and no TFRecord"):
    read_meta(str(tmp_path / "sub"))
  with pytest.raises(ValueError, match="no such shard directory"):
    read_meta(str(tmp_path / "missing"))


def test_model_garden_shards_train_with_pretrain(tmp_path):
  # The Model Garden's own script (tf-models-official, with sentencepiece).
  pytest.importorskip("sentencepiece")
  shards = tmp_path / "mg"
  shards.mkdir()
  made = subprocess.run(
      [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
       f"--input_file={HELDOUT_CORPUS}",
       f"--output_file={shards / 'tf_examples.tfrecord'}",
       f"--vocab_file={VOCAB}", "--max_seq_length=32",
       "--max_predictions_per_seq=5", "--dupe_factor=1"],
      capture_output=True, text=True)
  assert made.returncode == 0, made.stderr[-2000:]
  config = tmp_path / "tiny.json"
  config.write_text(load_config("tiny_bert").replace(
      vocab_size=30522).to_json())
  run = subprocess.run(
      [sys.executable, "-m", "tfmodels.training.pretrain", "--config",
       str(config), "--train_data", str(shards), "--model_dir",
       str(tmp_path / "run"), "--train_steps", "3", "--batch_size", "4",
       "--log_every", "1"], capture_output=True, text=True)
  assert run.returncode == 0, run.stderr[-2000:]
  history = [json.loads(l) for l in
             (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
  assert [h["step"] for h in history] == [1, 2, 3]
  assert all(np.isfinite(h["loss"]) for h in history)
