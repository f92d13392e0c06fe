"""Carving a student out of a teacher's weights: importance scores, the carve,
low-rank factors against the math, and the `compress` command end to end
through finetune, evaluate and convert_tflite."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import make_features
from fixtures.converters import tiny_models
from tfmodels.checkpoints.model_dir import Head, build_model
from tfmodels.compression import importance
from tfmodels.compression.carve import CarveSpec, carve, carved_weights
from tfmodels.compression.factorization import activation_aware_factors
from tfmodels.configs import ConfigError, ModelConfig, load_config
from tfmodels.data.batches import batches
from tfmodels.encoders import build_encoder
from tfmodels.layers.low_rank import LowRankDense
from tfmodels.summary import count


def _features(n=12, seq_len=10, seed=0):
  rng = np.random.default_rng(seed)
  ids = [list(rng.integers(5, 95, int(rng.integers(4, seq_len + 1))))
         for _ in range(n)]
  return {k: v.numpy() for k, v in make_features(ids, seq_len).items()}


def _span_teacher():
  config = load_config("tiny_bert")
  return build_model(config, Head("span")), config


def _outputs(model, features):
  out = model({k: tf.constant(v) for k, v in features.items()})
  return np.concatenate([out["start_logits"].numpy(),
                         out["end_logits"].numpy()])


def test_carve_keeping_everything_reproduces_the_teacher():
  teacher, config = _span_teacher()
  features = _features()
  stats, _ = importance.collect(teacher, config, batches(features, 5),
                                inputs=True)
  student, student_config, _ = carve(teacher, config, Head("span"), stats,
                                     CarveSpec())
  assert student_config.num_attention_heads == config.num_attention_heads
  np.testing.assert_allclose(_outputs(student, features),
                             _outputs(teacher, features), atol=1e-6)


def test_carve_removes_exactly_the_lowest_scored_units():
  """Heads 0 and 2 and every odd neuron add nothing (their outgoing rows
  are zero), so they score 0, are the ones removed, and the carved model
  computes exactly what the teacher does."""
  teacher, config = _span_teacher()
  encoder = teacher.get_layer(config.name)
  hs = config.attention_head_size
  for l in range(config.num_hidden_layers):
    dense = encoder.get_layer(f"layer_{l}_attention").attention.output_dense
    kernel = dense.kernel.numpy()
    kernel[0:hs] = 0
    kernel[2 * hs:3 * hs] = 0
    dense.kernel.assign(kernel)
    output = encoder.get_layer(f"layer_{l}_ffn").output_dense
    kernel = output.kernel.numpy()
    kernel[1::2] = 0
    output.kernel.assign(kernel)
  features = _features()
  stats, _ = importance.collect(teacher, config, batches(features, 4))
  assert np.all(stats[0].head_scores[[0, 2]] == 0)
  assert np.all(stats[0].head_scores[[1, 3]] > 0)
  spec = CarveSpec(heads=2, intermediate_size=config.intermediate_size // 2)
  student, student_config, facts = carve(teacher, config, Head("span"),
                                         stats, spec)
  for layer in facts["layers"]:
    assert layer["kept_heads"] == [1, 3]
    assert layer["kept_neurons"] == list(range(0, config.intermediate_size,
                                               2))
  assert student_config.attention_head_size == hs
  np.testing.assert_allclose(_outputs(student, features),
                             _outputs(teacher, features), atol=1e-5)


def test_removed_units_mean_is_folded_into_the_bias():
  config = ModelConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=3)
  rng = np.random.default_rng(0)
  values = {
      "layer_0_attention/self_attention/query/kernel": rng.normal(size=(4, 4)),
      "layer_0_attention/self_attention/key/kernel": rng.normal(size=(4, 4)),
      "layer_0_attention/self_attention/value/kernel": rng.normal(size=(4, 4)),
      "layer_0_attention/self_attention/attention_output/kernel":
          rng.normal(size=(4, 4)),
      "layer_0_ffn/intermediate/kernel": rng.normal(size=(4, 3)),
      "layer_0_ffn/output/kernel": rng.normal(size=(3, 4))}
  for name in list(values):
    values[name.replace("kernel", "bias")] = rng.normal(
        size=values[name].shape[1])
  stats = importance.LayerStatistics(
      head_scores=np.array([2.0, 1.0]), head_means=rng.normal(size=(2, 4)),
      neuron_scores=np.array([0.5, 3.0, 1.0]),
      neuron_means=np.array([0.7, 0.1, -0.2]))
  out, _ = carved_weights(values, config, [stats],
                          CarveSpec(heads=1, intermediate_size=2))
  w2 = values["layer_0_ffn/output/kernel"]
  np.testing.assert_allclose(out["layer_0_ffn/output/kernel"], w2[[1, 2]])
  np.testing.assert_allclose(out["layer_0_ffn/output/bias"],
                             values["layer_0_ffn/output/bias"] + 0.7 * w2[0])
  prefix = "layer_0_attention/self_attention/"
  np.testing.assert_allclose(out[prefix + "query/kernel"],
                             values[prefix + "query/kernel"][:, :2])
  np.testing.assert_allclose(out[prefix + "attention_output/bias"],
                             values[prefix + "attention_output/bias"]
                             + stats.head_means[1])


def test_low_rank_dense_at_full_rank_equals_its_dense():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 6)) @ rng.normal(size=(6, 6))
  kernel, bias = rng.normal(size=(6, 5)), rng.normal(size=5)
  u, v, shift, error = activation_aware_factors(
      kernel, 5, x.mean(0), np.cov(x.T, bias=True))
  layer = LowRankDense(5, rank=5)
  layer.build((None, 6))
  layer.set_weights([u, v, bias + shift])
  np.testing.assert_allclose(layer(x.astype(np.float32)).numpy(),
                             x @ kernel + bias, rtol=1e-4, atol=1e-4)
  assert error < 1e-6


def test_activation_aware_factors_minimise_the_output_error():
  """On correlated inputs the activation-aware factors lose less of the
  layer's output than plain SVD at the same rank, and the error they
  report is the one measured."""
  rng = np.random.default_rng(1)
  mix = rng.normal(size=(16, 16)) * np.linspace(3, 0.05, 16)[:, None]
  x = rng.normal(size=(4000, 16)) @ mix + 0.5
  kernel = rng.normal(size=(16, 12))
  mean, covariance = x.mean(0), np.cov(x.T, bias=True)

  def output_error(u, v, shift):
    target = x @ kernel
    approx = x @ u @ v + shift
    centred = target - target.mean(0)
    return np.sqrt(((target - approx) ** 2).sum() / (centred ** 2).sum())

  aware = activation_aware_factors(kernel, 4, mean, covariance)
  plain_u, plain_v, _, _ = activation_aware_factors(kernel, 4)
  plain_shift = mean @ (kernel - plain_u @ plain_v)
  assert output_error(*aware[:3]) < 0.9 * output_error(plain_u, plain_v,
                                                       plain_shift)
  # And no nearby factors do better (it is the optimum).
  for _ in range(5):
    u = aware[0] + 0.01 * rng.normal(size=aware[0].shape)
    shift = mean @ (kernel - u @ aware[1])
    assert output_error(u, aware[1], shift) >= output_error(*aware[:3])
  assert output_error(*aware[:3]) == pytest.approx(aware[3], rel=1e-3)


def test_carved_configs_count_like_keras_and_write_only_what_differs():
  config = load_config("tiny_bert")
  assert "attention_head_size" not in config.to_dict()
  assert "low_rank_ranks" not in config.to_dict()
  carved = config.replace(num_attention_heads=2, attention_head_size=8,
                          intermediate_size=24,
                          low_rank_ranks={"word_embeddings": 6, "query": 3,
                                          "output": 5})
  assert ModelConfig.from_dict(carved.to_dict()) == carved
  assert carved.attention_width == 16
  assert count(carved, 16)["params_encoder"] == build_encoder(
      carved).count_params()


@pytest.mark.parametrize("changes, field", [
    ({"low_rank_ranks": {"queries": 3}}, "low_rank_ranks"),
    ({"low_rank_ranks": {"query": 32}}, "low_rank_ranks.query"),
    ({"low_rank_ranks": {"query": 0}}, "low_rank_ranks.query"),
    ({"attention_head_size": 0}, "attention_head_size"),
    ({"num_attention_heads": 5}, "hidden_size"),
])
def test_bad_carving_fields_are_named(changes, field):
  values = dict(load_config("tiny_bert").to_dict(), **changes)
  with pytest.raises(ConfigError, match=f"field '{field}'"):
    ModelConfig.from_dict(values)


# The command, end to end on a tiny trained spam classifier.

def _run(module, *args):
  return subprocess.run([sys.executable, "-m", module, *map(str, args)],
                        capture_output=True, text=True, env=tiny_models.env(),
                        cwd=tiny_models.REPO)


@pytest.fixture(scope="module")
def spam_teacher(tmp_path_factory):
  """A tiny BERT (LayerNorm, gelu) spam `finetune` run."""
  base = tmp_path_factory.getbasetemp()
  data = tiny_models.spam_data(base)
  init = tmp_path_factory.mktemp("init") / "bert"
  vocab_size = sum(1 for _ in open(tiny_models.VOCAB))
  config = load_config("tiny_bert").replace(vocab_size=vocab_size)
  from tfmodels.checkpoints.model_dir import save_model_dir
  save_model_dir(build_model(config, Head("encoder")), config,
                 Head("encoder"), str(init))
  run = tmp_path_factory.mktemp("teacher") / "spam"
  result = _run("tfmodels.training.finetune", "--task", "spam", "--data_dir",
                data, "--init_dir", init, "--model_dir", run, "--vocab_file",
                tiny_models.VOCAB, "--max_seq_length", 32, "--train_steps",
                40, "--batch_size", 16, "--learning_rate", 3e-3)
  assert result.returncode == 0, result.stderr[-2000:]
  return run, data


def test_compress_writes_a_model_directory_every_command_takes(
    spam_teacher, tmp_path):
  teacher, data = spam_teacher
  carved = tmp_path / "carved"
  first = _run("tfmodels.training.compress", "--teacher_dir", teacher,
               "--data_dir", data, "--model_dir", carved, "--heads", 1,
               "--calibration_examples", 16)
  assert first.returncode == 0, first.stderr[-3000:]
  assert load_config(str(carved / "config.json")).num_attention_heads == 1
  result = _run("tfmodels.training.compress", "--teacher_dir", teacher,
                "--data_dir", data, "--model_dir", carved, "--heads", 2,
                "--target_params", 0.6, "--low_rank",
                "word_embeddings=16,attention_output=8", "--substitute",
                "layernorm=nonorm,gelu=relu", "--recover_steps", 4,
                "--calibration_examples", 64, "--evaluate",
                "--overwrite")  # compress's own output: replaced
  assert result.returncode == 0, result.stderr[-3000:]
  config = load_config(str(carved / "config.json"))
  assert (config.num_attention_heads, config.attention_head_size) == (2, 8)
  assert config.normalization_type == "no_norm"
  assert config.hidden_act == "relu"
  facts = json.loads((carved / "carving.json").read_text())
  assert facts["params_share"] <= 0.6
  assert config.intermediate_size == facts["intermediate_size"]
  assert len(facts["layers"][0]["kept_heads"]) == 2
  assert facts["recovery"]["steps"] == 4
  assert "accuracy" in facts["dev_carved"]

  # Each kept head learns from the head it was carved from (carving.json).
  tuned = tmp_path / "tuned"
  result = _run("tfmodels.training.finetune", "--task", "spam", "--data_dir",
                data, "--init_dir", carved, "--teacher_dir", teacher,
                "--task_kd", "carved", "--model_dir", tuned, "--vocab_file",
                tiny_models.VOCAB, "--max_seq_length", 32, "--train_steps",
                4, "--batch_size", 8)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [json.loads(l) for l in (tuned / "history.jsonl").read_text(
  ).splitlines()]
  assert {"fmt_0", "at_0", "fmt_1", "at_1", "logit_kd", "task"} <= set(
      rows[0])
  result = _run("tfmodels.training.evaluate", "--model_dir", tuned,
                "--data_dir", data)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "accuracy" in json.loads(result.stdout[result.stdout.index("{"):])

  # Attention transfer compares head with head: refused, naming the field.
  result = _run("tfmodels.training.finetune", "--task", "spam", "--data_dir",
                data, "--init_dir", carved, "--teacher_dir", teacher,
                "--task_kd", "transfer", "--model_dir", tmp_path / "no",
                "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 32,
                "--train_steps", 2)
  assert result.returncode != 0
  assert "num_attention_heads" in result.stderr.strip().splitlines()[-1]

  out = tmp_path / "tflite"
  result = tiny_models.run_converter(
      "--model_dir", tuned, "--task", "spam", "--data_dir", data,
      "--vocab_file", tiny_models.VOCAB, "--max_seq_length", 32,
      "--output_dir", out, "--modes", "float32,int8", "--name", "carved",
      "--num_calibration_samples", 8, "--num_compare", 8)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "carved_report.json").read_text())
  assert report["modes"]["float32"]["difference"]["max_abs"] <= 1e-4


def test_compress_refuses_bad_flags_before_work(spam_teacher, tmp_path):
  teacher, data = spam_teacher
  pretrained = tmp_path / "pretrained"  # a pretrain run: no task.json
  pretrained.mkdir()
  (pretrained / "config.json").write_text("{}")
  for flags, named in ((("--heads", 9), "--heads 9"),
                       (("--low_rank", "query"), "--low_rank query"),
                       (("--low_rank", "query=4,query=8"),
                        "--low_rank query=4,query=8: query is given twice"),
                       (("--target_params", 0.01), "--target_params"),
                       (("--substitute", "relu=gelu"), "--substitute"),
                       (("--teacher_dir", tmp_path / "nowhere"),
                        f"--teacher_dir {tmp_path / 'nowhere'}: no such "
                        "directory"),
                       (("--teacher_dir", pretrained),
                        f"--teacher_dir {pretrained}: no task.json (not a "
                        "finetune run; compress carves a fine-tuned model")):
    result = _run("tfmodels.training.compress", "--teacher_dir", teacher,
                  "--data_dir", data, "--model_dir", tmp_path / "out",
                  *flags)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and named in last, last
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
