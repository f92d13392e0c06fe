"""The ARM path of shipped .tflite files (issue 41): android_bench.arm64.

The runner's protocol (feeds in, outputs out, through .npz files) is
checked with the host's Python on every machine; the same tiny models run
on emulated arm64 (qemu-user, Cortex-A76) only where `make arm64-root` has
built the root, and skip with the reason otherwise (building it is never
part of `make test`). Nothing is downloaded.

Tolerances on arm64: the int8 model's outputs equal the host's exactly
(integer kernels, the same requantization); the float32 model's are within
1e-5 of its outputs' scale (x86 and ARM XNNPACK sum in other orders).
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

from android_bench import arm64, arm64_runner

VOCAB, HIDDEN = 50, 16
LENGTHS = (5, 9, 16)


def _tiny_models(directory):
  """{"float32": path, "int8": path}: ids / mask / segment_ids [1, any
  length] -> word + token-type embeddings, two dense layers, start and end
  logits (the QA models' contract); int8 is its full-integer quantization."""
  import tensorflow as tf
  rng = np.random.default_rng(0)

  def weight(*shape):
    return tf.constant(rng.normal(0, 0.3, shape).astype("float32"))

  table, types = weight(VOCAB, HIDDEN), weight(2, HIDDEN)
  w1, w2 = weight(HIDDEN, HIDDEN), weight(HIDDEN, 2)

  @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32, name=n)
                                for n in ("ids", "mask", "segment_ids")])
  def serve(ids, mask, segment_ids):
    x = tf.gather(table, ids) + tf.gather(types, segment_ids)
    x = tf.nn.relu(tf.matmul(x, w1)) * tf.cast(mask[..., None], tf.float32)
    logits = tf.matmul(x, w2)
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

  def representative():  # one length: the calibrator does not resize
    for _ in range(8):
      yield [rng.integers(0, VOCAB, (1, 16)).astype(np.int32),
             np.ones((1, 16), np.int32),
             (np.arange(16) >= 8).astype(np.int32)[None]]

  paths = {}
  for kind in ("float32", "int8"):
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], tf.Module())
    if kind == "int8":
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
      converter.representative_dataset = representative
    paths[kind] = os.path.join(directory, f"tiny_{kind}.tflite")
    with open(paths[kind], "wb") as f:
      f.write(converter.convert())
  return paths


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  return _tiny_models(str(tmp_path_factory.mktemp("arm64_models")))


def _feeds(seed=1):
  """One feed per length: the signature is resized for each."""
  rng = np.random.default_rng(seed)
  return [{"ids": rng.integers(0, VOCAB, (1, n)).astype(np.int32),
           "mask": np.ones((1, n), np.int32),
           "segment_ids": (np.arange(n) >= n // 2).astype(np.int32)[None]}
          for n in LENGTHS]


def _host_outputs(path, feeds):
  """The host interpreter's outputs, made here, not by the runner."""
  from ai_edge_litert.interpreter import Interpreter
  runner = Interpreter(model_path=path, num_threads=1).get_signature_runner()
  return [{k: np.array(v) for k, v in runner(**feed).items()}
          for feed in feeds]


def _run_runner(tmp_path, *args):
  return subprocess.run(
      [sys.executable, os.path.join(REPO, "android_bench", "arm64_runner.py"),
       *map(str, args)], capture_output=True, text=True, cwd=tmp_path,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_runner_protocol_on_the_host_gives_the_interpreters_outputs(
    tmp_path, models, kind):
  feeds = _feeds()
  arm64_runner.save_arrays(tmp_path / "feeds.npz", feeds)
  done = _run_runner(tmp_path, "--model", models[kind], "--feeds",
                     tmp_path / "feeds.npz", "--outputs",
                     tmp_path / "out.npz", "--info", tmp_path / "info.json")
  assert done.returncode == 0, done.stderr[-2000:]
  outputs = arm64_runner.load_arrays(tmp_path / "out.npz")
  expected = _host_outputs(models[kind], feeds)
  assert len(outputs) == len(LENGTHS)
  for got, want, length in zip(outputs, expected, LENGTHS):
    assert sorted(got) == ["end_logits", "start_logits"]
    for name in want:
      assert got[name].shape == (1, length)
      np.testing.assert_array_equal(got[name], want[name])
  info = json.loads((tmp_path / "info.json").read_text())
  assert info["invokes"] == len(LENGTHS)
  assert info["signature_key"] == "serving_default"
  assert info["xnnpack"]["replaced"] > 0  # the default delegate ran


def test_runner_repeats_each_feed_and_keeps_the_first_outputs(models):
  feeds = _feeds()
  outputs, info = arm64_runner.run_feeds(models["float32"], feeds,
                                         repeats=2)
  assert info["invokes"] == 3 * len(feeds)
  for got, want in zip(outputs, _host_outputs(models["float32"], feeds)):
    np.testing.assert_array_equal(got["start_logits"], want["start_logits"])


def test_runner_refuses_a_feed_without_an_input_in_one_line(tmp_path,
                                                            models):
  feeds = [{"ids": np.zeros((1, 4), np.int32),
            "mask": np.ones((1, 4), np.int32)}]
  arm64_runner.save_arrays(tmp_path / "feeds.npz", feeds)
  done = _run_runner(tmp_path, "--model", models["int8"], "--feeds",
                     tmp_path / "feeds.npz", "--outputs",
                     tmp_path / "out.npz", "--info", tmp_path / "info.json")
  assert done.returncode == arm64_runner.ERROR_STATUS
  lines = done.stderr.strip().splitlines()
  assert lines[-1].startswith("arm64_runner: error: ")
  assert "feed 0 lacks segment_ids" in lines[-1]
  assert not (tmp_path / "out.npz").exists()


def test_arrays_round_trip_with_colons_in_names(tmp_path):
  dicts = [{"a:b": np.arange(3)}, {"x": np.ones((1, 2), np.float32)}]
  arm64_runner.save_arrays(tmp_path / "f.npz", dicts)
  back = arm64_runner.load_arrays(tmp_path / "f.npz")
  assert [sorted(d) for d in back] == [["a:b"], ["x"]]
  np.testing.assert_array_equal(back[0]["a:b"], np.arange(3))


def test_a_missing_or_half_built_root_says_why_and_how(tmp_path,
                                                       monkeypatch):
  monkeypatch.setattr(arm64, "qemu_binary", lambda: "/bin/true")
  path, reason = arm64.arm64_root(str(tmp_path / "none"))
  assert path is None and "make arm64-root" in reason
  assert str(tmp_path / "none") in reason
  (tmp_path / "half").mkdir()
  path, reason = arm64.arm64_root(str(tmp_path / "half"))
  assert path is None and "half-built" in reason
  monkeypatch.setenv(arm64.ROOT_ENV, str(tmp_path / "elsewhere"))
  assert arm64.default_root() == str(tmp_path / "elsewhere")


def test_run_on_arm64_without_a_root_is_one_error(tmp_path, models,
                                                  monkeypatch):
  monkeypatch.setenv(arm64.ROOT_ENV, str(tmp_path / "none"))
  with pytest.raises(arm64.Arm64Error, match="arm64-root|qemu-aarch64"):
    arm64.run_on_arm64(models["int8"], _feeds())
  with pytest.raises(arm64.Arm64Error, match="no such model"):
    arm64.run_on_arm64(str(tmp_path / "missing.tflite"), _feeds())


def test_the_command_without_a_root_fails_in_one_line(tmp_path, models):
  done = subprocess.run(
      [sys.executable, "-m", "android_bench.arm64", "--model",
       models["int8"]], capture_output=True, text=True, cwd=REPO,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           arm64.ROOT_ENV: str(tmp_path / "none")}, timeout=300)
  assert done.returncode == 1
  lines = done.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ")
  assert "make arm64-root" in lines[0]


def test_random_feeds_stay_in_the_tables_and_spread_lengths(models):
  feeds = arm64.random_feeds(models["int8"], 4, seed=3)
  for feed in feeds:
    assert feed["ids"].dtype == np.int32
    assert 0 <= feed["ids"].min() and feed["ids"].max() < VOCAB
    assert set(np.unique(feed["segment_ids"])) <= {0, 1}
    assert (feed["mask"] == 1).all()
  assert arm64.sample_lengths(384, 3, True) == [128, 256, 384]
  assert arm64.sample_lengths(384, 2, False) == [384, 384]


def _root_or_skip():
  root, reason = arm64.arm64_root()
  if root is None:
    pytest.skip(f"no arm64 root: {reason}")
  return root


# Emulated arm64: one qemu process per call, a few seconds each.

def test_float32_on_arm64_matches_the_host(models):
  root = _root_or_skip()
  feeds = _feeds()
  arm = arm64.run_on_arm64(models["float32"], feeds, root=root)
  assert arm.info["machine"] == "aarch64"
  assert arm.info["xnnpack"]["replaced"] > 0
  for got, want, length in zip(arm, _host_outputs(models["float32"], feeds),
                               LENGTHS):
    for name in want:
      assert got[name].shape == (1, length)
      scale = float(np.abs(want[name]).max())
      np.testing.assert_allclose(got[name], want[name], rtol=0,
                                 atol=1e-5 * max(scale, 1.0))


def test_int8_on_arm64_matches_the_host_and_uses_dot_products(models):
  root = _root_or_skip()
  counting, why = arm64.instruction_counting(root)
  feeds = _feeds()
  arm = arm64.run_on_arm64(models["int8"], feeds, root=root,
                           instruction_runs=2 if counting else 0)
  for got, want in zip(arm, _host_outputs(models["int8"], feeds)):
    for name in want:
      np.testing.assert_array_equal(got[name], want[name])
  if not counting:
    pytest.skip(f"outputs checked; no instruction count: {why}")
  # XNNPACK's int8 kernels on a Cortex-A76 are the dot-product ones.
  assert arm.instructions_per_inference > 0
  assert arm.dot_instructions_per_inference > 0


def test_the_command_compares_on_arm64(models):
  _root_or_skip()
  done = subprocess.run(
      [sys.executable, "-m", "android_bench.arm64", "--model",
       models["float32"], "--samples", "2", "--instruction_runs", "0"],
      capture_output=True, text=True, cwd=REPO,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  out = done.stdout
  assert "start_logits: max |host - arm64|" in out
  assert "argmax agrees in" in out
  assert "not a latency" in out and not re.search(r"\bms\b", out)
