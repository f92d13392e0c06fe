"""Joint intent + slot end to end: chunk F1 by hand, the task's features,
loss and metrics, the head kind, and a tiny model on Brown (genre as the
intent, POS tags as slots) through finetune, evaluate and convert_tflite."""

import gzip
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from conftest import write_lines
from fixtures.converters import tiny_models
from tfmodels.checkpoints.model_dir import Head
from tfmodels.data import metrics

GENRES = ("fiction_romance", "learned")  # one sentence tells them apart


# --- slot F1 ------------------------------------------------------------

def test_chunks_read_iob_the_conlleval_way_and_plain_tags_as_one_token():
  assert metrics.chunks(["B-a", "I-a", "O", "I-b", "B-b", "I-a", "nn",
                         "np-tl", "O"]) == {
      (0, 2, "a"), (3, 4, "b"), (4, 5, "b"), (5, 6, "a"), (6, 7, "nn"),
      (7, 8, "np-tl")}


def test_chunk_f1_by_hand():
  truth = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "I-LOC", "I-LOC"],
           ["O", "B-PER", "I-PER"]]
  guess = [["B-PER", "I-PER", "O", "B-ORG"], ["B-LOC", "I-LOC", "B-LOC"],
           ["O", "I-PER", "I-PER"]]   # sloppy I- opens the same chunk
  # Right: PER(0,2) of sentence 0 and PER(1,3) of sentence 2 = 2; true
  # chunks 4, predicted 5: P = 2/5, R = 1/2, F1 = 2PR / (P + R) = 4/9.
  assert metrics.chunk_f1(truth, guess) == pytest.approx(4 / 9)
  assert metrics.chunk_f1(truth[:2], guess[:2]) == pytest.approx(2 / 7)
  # POS tags: every word is a chunk, so F1 is token accuracy (3 of 4).
  assert metrics.chunk_f1([["nn", "vb", "at", "nn"]],
                          [["nn", "vb", "nn", "nn"]]) == pytest.approx(0.75)
  assert metrics.chunk_f1([["O", "O"]], [["O", "O"]]) == 0.0
  with pytest.raises(ValueError, match="sentence 0: 2 true tags but 1"):
    metrics.chunk_f1([["O", "O"]], [["O"]])


def test_intent_slot_metrics_decode_labelled_positions_only():
  tags = ["B-x", "I-x", "O"]
  out = metrics.intent_slot_metrics(
      intent_labels=[0, 1], intent_predictions=[0, 0],
      slot_label_ids=[[-1, 0, 1, -1, 2], [-1, 0, -1, 2, -1]],
      slot_predictions=[[2, 0, 1, 0, 2], [2, 0, 2, 0, 1]], tags=tags)
  # Sentence 0: x(0,2) right; sentence 1: x(0,1) right, extra B-x at the
  # O word. P = 2/3, R = 1, F1 = 0.8. Exact: only sentence 0 (intent of 1
  # is wrong). Tokens: 4 of 5 labelled right.
  assert out == pytest.approx({"intent_accuracy": 0.5, "slot_f1": 0.8,
                               "sentence_exact_match": 0.5,
                               "slot_accuracy": 0.8})
  with pytest.raises(ValueError, match="outside the 3 tags"):
    metrics.intent_slot_metrics([0], [0], [[5]], [[0]], tags)


# --- the task -------------------------------------------------------------

SLOTS = ["# label = PlayMusic", "play\tO", "some\tB-genre", "jazz\tI-genre",
         "", "# label = GetWeather", "rain\tB-kind", "today\tO", ""]


@pytest.fixture
def snips_like(tmp_path, tokenizer):
  from tfmodels.training.tasks import make_task
  for split in ("train", "dev"):
    write_lines(tmp_path / f"{split}.conll", SLOTS)
  return make_task("intent_slot", str(tmp_path), tokenizer, 8)


def test_task_head_features_and_loss(snips_like):
  task = snips_like
  assert task.intents == ["GetWeather", "PlayMusic"]
  assert task.tags == ["B-genre", "B-kind", "I-genre", "O"]
  assert task.head() == Head("intent_slot", num_classes=2, num_slots=4)
  f = task.features("train")
  np.testing.assert_array_equal(f["sentence_label_ids"], [1, 0])
  np.testing.assert_array_equal(f["label_ids"][1, :4], [-1, 1, 3, -1])
  rng = np.random.default_rng(0)
  intent_logits = rng.normal(size=[2, 2]).astype(np.float32)
  slot_logits = rng.normal(size=[2, 8, 4]).astype(np.float32)
  loss = task.supervised_loss({"intent_logits": intent_logits,
                               "slot_logits": slot_logits}, f)

  def nll(logits, label):
    return np.log(np.exp(logits).sum()) - logits[label]
  intent = np.mean([nll(intent_logits[i], f["sentence_label_ids"][i])
                    for i in range(2)])
  rows, cols = np.nonzero(f["label_weights"])
  slots = np.mean([nll(slot_logits[r, c], f["label_ids"][r, c])
                   for r, c in zip(rows, cols)])
  assert float(loss) == pytest.approx(intent + slots, rel=1e-5)


def test_task_scores_models_and_litert_outputs_alike(snips_like):
  from converters import validate
  task = snips_like
  f = task.features("dev")
  perfect = {"intent_logits": tf.one_hot(f["sentence_label_ids"], 2) * 5,
             "slot_logits": tf.one_hot(np.maximum(f["label_ids"], 0), 4) * 5}
  assert task.evaluate(lambda batch, training: perfect, "dev") == {
      "intent_accuracy": 1.0, "slot_f1": 1.0, "sentence_exact_match": 1.0,
      "slot_accuracy": 1.0}

  class LiteRT:  # what runtime.LiteRTModel.run_batch returns, by name
    def run_batch(self, inputs):
      assert set(inputs) == {"ids", "mask", "segment_ids"}
      return {"intent_probability": tf.nn.softmax(
                  perfect["intent_logits"]).numpy(),
              "slot_logits": perfect["slot_logits"].numpy()}
  out = validate.TaskModel(LiteRT())(f)
  np.testing.assert_allclose(
      out["intent_logits"], tf.nn.log_softmax(perfect["intent_logits"]),
      atol=1e-5)
  assert task.evaluate(validate.TaskModel(LiteRT()), "dev")["slot_f1"] == 1.0


def test_task_refuses_unlabelled_data_and_unknown_names(tmp_path, tokenizer):
  from tfmodels.training.tasks import make_task
  write_lines(tmp_path / "train.conll", ["play\tO", ""])
  with pytest.raises(ValueError, match=r"no '# label = <intent>' lines"):
    make_task("intent_slot", str(tmp_path), tokenizer, 8)
  with pytest.raises(ValueError, match=r"--task intentslot: unknown; tasks "
                     r"are .*tagging, intent_slot"):
    make_task("intentslot", str(tmp_path), tokenizer, 8)


def test_head_kind_and_head_json():
  with pytest.raises(ValueError, match="num_slots 0"):
    Head("intent_slot", num_classes=3)
  with pytest.raises(ValueError, match="num_slots 4"):
    Head("tagger", num_classes=3, num_slots=4)
  assert Head("tagger", 3).to_dict() == {  # as before num_slots existed
      "kind": "tagger", "num_classes": 3, "sentence_objective": "nsp"}
  assert Head("intent_slot", 3, num_slots=4).to_dict()["num_slots"] == 4


def test_conll_calibration_reads_words_not_columns(tokenizer, tmp_path):
  from converters import representative
  path = write_lines(tmp_path / "train.conll", SLOTS)
  representative.check_file(path)
  f = representative.read_features(path, tokenizer, 8)
  assert set(f) == {"input_ids", "input_mask", "segment_ids"}
  assert tokenizer.convert_ids_to_tokens(
      f["input_ids"][0][f["input_mask"][0] == 1].tolist()) == [
          "[CLS]", "play", "some", "jazz", "[SEP]"]
  bad = write_lines(tmp_path / "bad.conll", ["play", ""])
  with pytest.raises(representative.RepresentativeDataError,
                     match=r"bad\.conll:1: expected a token and a tag"):
    representative.check_file(bad)


def test_saved_model_of_the_head_is_recognised(tmp_path):
  from converters import source
  from tfmodels.checkpoints.model_dir import build_model, save_model_dir
  from tfmodels.configs import load_config
  config, head = load_config("tiny_bert"), Head("intent_slot", 3,
                                                num_slots=5)
  save_model_dir(build_model(config, head), config, head, str(tmp_path / "m"))
  loaded = source.load_saved_model_source(str(tmp_path / "m" / "saved_model"))
  assert loaded.head == "intent_slot"
  ids = tf.constant([[2, 14, 33, 3]], tf.int32)
  out = loaded.model({"input_ids": ids, "input_mask": tf.ones_like(ids),
                      "segment_ids": tf.zeros_like(ids)})
  assert out["intent_logits"].shape == (1, 3)
  assert out["slot_logits"].shape == (1, 4, 5)


# --- finetune -> evaluate -> convert_tflite on Brown ---------------------

def _write_brown(directory, n_train=400, n_dev=100):
  """train / dev .conll: sentences of GENRES in turn, spread over the
  shipped Brown splits (each opens with its `# label = <genre>` line)."""
  os.makedirs(directory, exist_ok=True)
  for split, n in (("train", n_train), ("dev", n_dev)):
    with gzip.open(os.path.join(tiny_models.DATA, "brown_pos",
                                f"{split}.conll.gz"), "rt") as f:
      sentences = f.read().strip("\n").split("\n\n")
    by_genre = {g: [s for s in sentences if s.startswith(f"# label = {g}\n")]
                for g in GENRES}
    step = {g: len(s) // (n // 2) for g, s in by_genre.items()}
    chosen = [by_genre[g][i * step[g]] for i in range(n // 2) for g in GENRES]
    with open(os.path.join(directory, f"{split}.conll"), "w") as f:
      f.write("\n\n".join(chosen) + "\n")
  return directory


def _run(module, *args):
  result = subprocess.run([sys.executable, "-m", module, *map(str, args)],
                          capture_output=True, text=True,
                          env=tiny_models.env(), cwd=tiny_models.REPO)
  assert result.returncode == 0, result.stderr[-2000:]
  return result


@pytest.fixture(scope="module")
def brown_run(tmp_path_factory):
  """A finetune run of a tiny MobileBERT on two Brown genres, L = 64."""
  import tf_keras as keras
  from tfmodels.checkpoints.model_dir import build_model, save_model_dir
  from tfmodels.configs import load_config
  base = tmp_path_factory.mktemp("intent_slot")
  data = _write_brown(str(base / "brown"))
  with open(tiny_models.VOCAB) as f:
    config = load_config("tiny_mobilebert").replace(
        vocab_size=sum(1 for _ in f))
  keras.utils.set_random_seed(0)
  save_model_dir(build_model(config, Head("pretrainer")), config,
                 Head("pretrainer"), str(base / "init"))
  run = base / "run"
  _run("tfmodels.training.finetune", "--task", "intent_slot", "--data_dir",
       data, "--init_dir", base / "init", "--model_dir", run, "--vocab_file",
       tiny_models.VOCAB, "--max_seq_length", tiny_models.SEQ_LENGTH,
       "--train_steps", 200, "--batch_size", 32, "--learning_rate", "3e-3",
       "--checkpoint_every", 200)
  return data, run, base


def test_finetune_learns_both_outputs_and_evaluate_agrees(brown_run):
  data, run, _ = brown_run
  head = json.loads((run / "head.json").read_text())
  assert head["kind"] == "intent_slot" and head["num_classes"] == 2
  results = json.loads((run / "eval_results.json").read_text())
  assert set(results) == {"intent_accuracy", "slot_f1",
                          "sentence_exact_match", "slot_accuracy"}
  assert results["intent_accuracy"] > 0.65      # chance: 0.5
  assert results["slot_f1"] > 0.2               # majority tag: 0.14
  # Every POS tag is a one-word chunk: slot F1 is token accuracy.
  assert results["slot_f1"] == pytest.approx(results["slot_accuracy"])
  scored = _run("tfmodels.training.evaluate", "--model_dir", run,
                "--data_dir", data, "--split", "dev")
  assert json.loads(scored.stdout[scored.stdout.index("{"):]) == (
      pytest.approx(results))


def test_convert_names_both_outputs_and_scores_each_mode(brown_run):
  from ai_edge_litert.interpreter import Interpreter
  from tfmodels.data import tagging
  data, run, base = brown_run
  out = base / "converted"
  result = tiny_models.run_converter(
      "--model_dir", run, "--data_dir", data, "--output_dir", out,
      "--modes", "float32,int8", "--name", "brown",
      "--representative_data", os.path.join(data, "train.conll"),
      "--num_calibration_samples", 16, "--num_compare", 8)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "brown_report.json").read_text())
  assert report["passed"] and report["head"] == "intent_slot"
  assert report["task"] == "intent_slot"  # from the run's task.json
  keras = report["keras"]
  assert keras["metric"]["name"] == "slot_f1"
  assert keras["metric"]["points"] == pytest.approx(
      100 * keras["metrics"]["slot_f1"])
  tags = tagging.tag_vocabulary(
      tagging.read_conll(os.path.join(data, "train.conll")) +
      tagging.read_conll(os.path.join(data, "dev.conll")))
  L = tiny_models.SEQ_LENGTH
  for mode in ("float32", "int8"):
    r = report["modes"][mode]
    assert r["contract"]["outputs"] == {
        "intent_probability": [[1, 2], "float32"],
        "slot_logits": [[1, L, len(tags)], "float32"]}
    assert set(r["metrics"]) == set(keras["metrics"])
    assert r["metric"]["drop"] == pytest.approx(
        keras["metric"]["points"] - 100 * r["metrics"]["slot_f1"])
    path = out / f"brown_{mode}.tflite"
    runner = Interpreter(model_path=str(path)).get_signature_runner()
    feed = {"ids": np.zeros([1, L], np.int32),
            "mask": np.ones([1, L], np.int32),
            "segment_ids": np.zeros([1, L], np.int32)}
    outputs = runner(**feed)
    assert outputs["intent_probability"].sum() == pytest.approx(1, abs=1e-2)
    archive = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    assert archive.read("labels.txt").decode().split() == list(GENRES)
    assert archive.read("slot_labels.txt").decode().split() == tags
  float32 = report["modes"]["float32"]
  assert float32["difference"]["max_abs"] <= 1e-3
  assert float32["metrics"] == pytest.approx(keras["metrics"])
