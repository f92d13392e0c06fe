"""experiments.apps.arm64_check: the app's questions through the twin on the
host and on arm64, decoded alike. The protocol runs everywhere with a
stand-in for the emulated run; the real ARM path runs when `make
arm64-root` has built the root, and is skipped with the reason otherwise."""

import os

import numpy as np
import pytest

from android_bench import arm64
from experiments.apps import arm64_check
from experiments.apps.qa_questions import pick_questions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QA_DIR = os.path.join(REPO, "data", "wordnet_qa")
VOCAB = os.path.join(REPO, "data", "vocab", "uncased_vocab.txt")


@pytest.fixture(scope="module")
def dynamic_qa(tmp_path_factory):
  """A tiny untrained span model, converted as convert_tflite does (inputs
  of any length, default [1, 384])."""
  from android_bench import qa_app
  from converters import conversion
  from tfmodels.checkpoints.model_dir import Head, build_model
  from tfmodels.configs import load_config
  import tf_keras as keras
  keras.utils.set_random_seed(0)
  config = load_config("tiny_mobilebert").replace(
      vocab_size=30522, max_position_embeddings=qa_app.SEQUENCE_LENGTH)
  model = build_model(config, Head(kind="span"))
  data = conversion.convert_model(model, "span", qa_app.SEQUENCE_LENGTH,
                                  ["float32"]).files["float32"][0]
  path = tmp_path_factory.mktemp("arm64") / "tiny_qa_float32.tflite"
  path.write_bytes(data)
  return str(path)


def _on_host(path, feeds, threads):
  return arm64.run_on_host(path, feeds, threads)[0]


def test_the_windows_the_twin_runs_come_back_decoded_alike(dynamic_qa):
  questions = pick_questions(QA_DIR, 3)
  dev = pick_questions(QA_DIR, 5)
  result = arm64_check.check_model(dynamic_qa, questions, dev, _on_host,
                                   vocab=VOCAB)
  # Each window at the twin's length (a multiple of 32), all sent at once.
  assert result["windows"] >= len(questions) + len(dev)
  assert all(n % 32 == 0 and n < 384 for n in result["lengths"])
  assert result["first_feed"]["ids"].shape[1] == result["lengths"][0] or (
      result["first_feed"]["ids"].shape[1] in result["lengths"])
  # The same runtime on both sides: the same logits, answers and scores.
  assert result["max_abs_logit_diff"] == 0.0
  assert result["same_answers"] == 3
  assert result["dev"]["host"] == result["dev"]["arm64"]
  assert result["dev"]["questions"] == 5


def test_a_run_that_differs_is_reported(dynamic_qa):
  """A 'device' whose start logits come back reversed: the check says so
  (the logits differ; answers may or may not)."""
  def skewed(path, feeds, threads):
    return [dict(out, start_logits=out["start_logits"][..., ::-1])
            for out in _on_host(path, feeds, threads)]
  questions = pick_questions(QA_DIR, 3)
  result = arm64_check.check_model(dynamic_qa, questions, [], skewed,
                                   vocab=VOCAB)
  assert result["max_abs_logit_diff"] > 0
  assert "dev" not in result


def test_the_counted_feed_is_padded_or_cut_to_its_length():
  feed = {"ids": np.array([[2, 7, 3]], np.int32),
          "mask": np.ones((1, 3), np.int32),
          "segment_ids": np.zeros((1, 3), np.int32)}
  out = arm64_check.feed_at(feed, 8)
  assert out["ids"].tolist() == [[2, 7, 3, 0, 0, 0, 0, 0]]
  assert out["mask"].sum() == 3 and out["mask"].shape == (1, 8)
  assert arm64_check.feed_at(feed, 2)["ids"].tolist() == [[2, 7]]
  assert arm64_check.table7_ratio() == pytest.approx(192 / 62)


def test_the_shipped_windows_on_arm64(dynamic_qa):
  """The real ARM path (qemu-aarch64, Cortex-A76, the root's LiteRT) on
  the tiny model: the twin's answers as on the host, logits within float
  round-off (the two sides' XNNPACK kernels differ)."""
  root, reason = arm64.arm64_root()
  if root is None:
    pytest.skip(reason)
  questions = pick_questions(QA_DIR, 2)

  def on_arm(path, feeds, threads):
    return arm64.run_on_arm64(path, feeds, threads, root=root)
  result = arm64_check.check_model(dynamic_qa, questions, [], on_arm,
                                   vocab=VOCAB)
  assert result["same_answers"] == 2
  assert result["max_abs_logit_diff"] < 1e-3
  assert result["arm64"]["machine"] == "aarch64"
  assert result["emulated_wall_s"] > 0
