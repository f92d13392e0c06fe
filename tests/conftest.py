import gzip
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tfmodels  # noqa: F401  before TensorFlow: its Keras is tf-keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")
STUDENT_VOCAB = os.path.join(DATA, "vocab", "student_vocab.txt")
HELDOUT_CORPUS = os.path.join(DATA, "pretraining", "heldout.txt.gz")

TINY_CONFIGS = ["tiny_bert", "tiny_albert", "tiny_kroneckerbert",
                "tiny_mixed_vocab_teacher", "tiny_ibbert", "tiny_mobilebert",
                "tiny_mobilebert_tiny"]


def make_features(ids, seq_len=None, segment_split=None):
  """Encoder features for a batch of id lists, right-padded to seq_len."""
  seq_len = seq_len or max(len(x) for x in ids)
  input_ids = np.zeros([len(ids), seq_len], np.int32)
  input_mask = np.zeros_like(input_ids)
  segment_ids = np.zeros_like(input_ids)
  for row, x in enumerate(ids):
    input_ids[row, :len(x)] = x
    input_mask[row, :len(x)] = 1
    if segment_split:
      segment_ids[row, segment_split:len(x)] = 1
  return {"input_ids": tf.constant(input_ids),
          "input_mask": tf.constant(input_mask),
          "segment_ids": tf.constant(segment_ids)}


@pytest.fixture(autouse=True)
def _seed():
  keras.utils.set_random_seed(0)


@pytest.fixture(scope="session")
def tokenizer():
  """The uncased BERT WordPiece tokenizer over the shipped vocab."""
  from tfmodels.tokenization import WordPieceTokenizer
  return WordPieceTokenizer(VOCAB)


def write_lines(path, lines, gzipped=False):
  """Writes lines (plain or gzip) and returns the path as a str."""
  data = "".join(line + "\n" for line in lines).encode("utf-8")
  with (gzip.open if gzipped else open)(path, "wb") as f:
    f.write(data)
  return str(path)


# The files that take longest (`make test` prints the 25 slowest tests),
# longest first. `make test` runs the suite on pytest-xdist workers, a file
# to a worker (--dist loadfile, in collection order): these start first and
# the short files fill in around them, so no long file starts last.
RUN_FIRST = ("test_demo.py", "test_distill_from_minilm.py", "test_ship.py",
             "test_distill.py",
             "test_pretrain_resume.py", "test_convert_tflite_library.py",
             "test_latency_benchmark.py", "test_convert_tflite_classifier.py",
             "test_intent_slot.py", "test_qat_report.py", "test_run_edges.py",
             "test_convert_tflite.py", "test_substitution.py",
             "test_compression.py", "test_qat.py", "test_mixed_vocab.py")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(RUN_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(RUN_FIRST)))


# ------------------------------------------------------------ warm start
# Commands the tests start (and the pipelines they run) are handed to a
# server that has imported TensorFlow already (tests/warm_start): each
# skips ~7 s of imports. WARM_START=0 starts every command cold.
WARM_START = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "warm_start")


@pytest.fixture(scope="session", autouse=True)
def _warm_start_server(tmp_path_factory):
  if os.environ.get("WARM_START", "1") == "0":
    yield
    return
  import subprocess
  import sys
  from tfmodels.process_lifetime import die_with_parent
  socket_path = os.path.join(
      tmp_path_factory.mktemp("warm_start", numbered=True), "server.sock")
  env = {k: v for k, v in os.environ.items() if k != "WARM_START_SOCKET"}
  # The quietest TensorFlow log level, fixed when TensorFlow loads: a
  # command run with a quieter one than the suite's keeps its stderr clean.
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  server = subprocess.Popen(
      [sys.executable, os.path.join(WARM_START, "server.py"), socket_path],
      stdout=subprocess.PIPE, text=True, env=env, preexec_fn=die_with_parent)
  if server.stdout.readline().strip() != "ready":
    server.kill()
    raise RuntimeError("the warm-start server did not start; WARM_START=0 "
                       "runs the suite without it")
  saved = {k: os.environ.get(k) for k in ("WARM_START_SOCKET", "PYTHONPATH")}
  os.environ["WARM_START_SOCKET"] = socket_path
  os.environ["PYTHONPATH"] = os.pathsep.join(
      p for p in (WARM_START, saved["PYTHONPATH"]) if p)
  try:
    yield
  finally:
    for k, v in saved.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
    server.terminate()
    server.wait()


@pytest.fixture(autouse=True)
def _cold_start(request, monkeypatch):
  """A test marked cold_start starts its commands as fresh interpreters:
  it signals them, reads their pids or runs them in a namespace."""
  if request.node.get_closest_marker("cold_start"):
    monkeypatch.delenv("WARM_START_SOCKET", raising=False)
