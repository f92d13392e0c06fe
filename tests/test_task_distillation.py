"""KroneckerBERT's task-stage KD (eq. 14): each term against numpy, and
`finetune --teacher_dir` end to end."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import VOCAB, make_features, write_lines
from test_finetune import _env, _sst_rows
from tfmodels.checkpoints.model_dir import Head, build_model, save_model_dir
from tfmodels.configs import load_config
from tfmodels.distillation.kronecker import finetuning_loss
from tfmodels.training.tasks import ClassificationTask, SpanTask


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _soft_ce(teacher, student):
  log_p = np.log(_softmax(student))
  return float(np.mean(-(_softmax(teacher) * log_p).sum(-1)))


def _token_mse(t, s, mask):
  w = mask[..., None].astype(np.float64)
  return float(((t - s) ** 2 * w).sum() / (w.sum() * t.shape[-1]))


def _score_mse(t, s, mask):
  # Scores [B, H, T, T]: a cell counts when both its tokens are real.
  w = (mask[:, None, :, None] * mask[:, None, None, :]).astype(np.float64)
  w = np.broadcast_to(w, t.shape)
  return float(((t - s) ** 2 * w).sum() / w.sum())


@pytest.fixture(scope="module")
def pair():
  teacher_config = load_config("tiny_bert")
  student_config = load_config("tiny_kroneckerbert")
  return teacher_config, student_config


def _models(pair, head):
  """(teacher, student, task, Head) of the pair with a `head` head."""
  teacher_config, student_config = pair
  head = Head("classifier", num_classes=3) if head == "classifier" else (
      Head("span"))
  task = (ClassificationTask("mnli", "", None, 12) if head.kind ==
          "classifier" else SpanTask("squad", "", None, 12))
  return (build_model(teacher_config, head), build_model(student_config, head),
          task, head)


@pytest.mark.parametrize("head", ["classifier", "span"])
def test_each_term_matches_numpy(pair, head):
  teacher, student, task, head = _models(pair, head)
  rng = np.random.default_rng(0)
  batch = make_features([list(rng.integers(5, 90, n)) for n in (12, 7, 9)],
                        seq_len=12)
  batch["label_ids"] = np.array([0, 2, 1], np.int32)
  batch["start_positions"] = np.array([3, 1, 0], np.int32)
  batch["end_positions"] = np.array([4, 5, 0], np.int32)
  loss, metrics = finetuning_loss(student, teacher, task)(batch)

  inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
  t = teacher(inputs, training=False)
  s = student(inputs, training=False)
  mask = batch["input_mask"].numpy()
  np.testing.assert_allclose(metrics["embedding_kd"], _token_mse(
      t["embedding_output"].numpy(), s["embedding_output"].numpy(), mask),
                             rtol=1e-5)
  np.testing.assert_allclose(metrics["attention_kd"], sum(
      _score_mse(a.numpy(), b.numpy(), mask)
      for a, b in zip(t["attention_scores"], s["attention_scores"])),
                             rtol=1e-5)
  np.testing.assert_allclose(metrics["ffn_kd"], sum(
      _token_mse(a.numpy(), b.numpy(), mask)
      for a, b in zip(t["hidden_states"], s["hidden_states"])), rtol=1e-5)
  if head.kind == "classifier":
    logit = _soft_ce(t["logits"].numpy(), s["logits"].numpy())
    log_p = np.log(_softmax(s["logits"].numpy()))
    supervised = -np.mean(log_p[np.arange(3), batch["label_ids"]])
  else:
    logit = (_soft_ce(t["start_logits"].numpy(), s["start_logits"].numpy())
             + _soft_ce(t["end_logits"].numpy(), s["end_logits"].numpy())) / 2
    ls = np.log(_softmax(s["start_logits"].numpy()))
    le = np.log(_softmax(s["end_logits"].numpy()))
    supervised = -np.mean(ls[np.arange(3), batch["start_positions"]] +
                          le[np.arange(3), batch["end_positions"]]) / 2
  np.testing.assert_allclose(metrics["logit_kd"], logit, rtol=1e-5)
  np.testing.assert_allclose(metrics["task"], supervised, rtol=1e-5)
  np.testing.assert_allclose(loss, sum(float(v) for v in metrics.values()),
                             rtol=1e-5)
  # Prediction-layer distillation only (finetune --task_kd prediction).
  loss, metrics = finetuning_loss(student, teacher, task,
                                  intermediate="prediction")(batch)
  assert set(metrics) == {"logit_kd", "task"}
  np.testing.assert_allclose(loss, logit + supervised, rtol=1e-5)


@pytest.mark.parametrize("head", ["classifier", "span"])
def test_soft_targets_computed_once_are_the_live_teachers(pair, head):
  """finetune --task_kd prediction reads the teacher's logits from the
  features (teacher_targets): the same numbers and the same loss as the
  teacher run at every step."""
  from tfmodels.distillation import teacher_targets
  teacher, student, task, head = _models(pair, head)
  rng = np.random.default_rng(2)
  features = {k: v.numpy() for k, v in make_features(
      [list(rng.integers(5, 90, n)) for n in (12, 7, 9, 3, 11)],
      seq_len=12).items()}
  features["label_ids"] = np.array([0, 2, 1, 1, 0], np.int32)
  features["start_positions"] = np.array([3, 1, 0, 2, 5], np.int32)
  features["end_positions"] = np.array([4, 5, 0, 2, 9], np.int32)
  carried = {**features, **teacher_targets.teacher_logits(teacher, task,
                                                          features)}
  live = teacher({k: features[k] for k in ("input_ids", "input_mask",
                                           "segment_ids")}, training=False)
  assert set(carried) - set(features) == {
      "teacher/" + k for k in task.logit_keys}
  for key in task.logit_keys:
    np.testing.assert_allclose(carried["teacher/" + key], live[key],
                               rtol=1e-5, atol=1e-6)
  batch = {k: v[1:4] for k, v in carried.items()}
  loss, metrics = teacher_targets.loss_fn(student, task)(batch)
  want, want_metrics = finetuning_loss(student, teacher, task,
                                       intermediate="prediction")(
      {k: v for k, v in batch.items() if not k.startswith("teacher/")})
  assert set(metrics) == set(want_metrics) == {"logit_kd", "task"}
  for k in metrics:
    np.testing.assert_allclose(metrics[k], want_metrics[k], rtol=1e-5)
  np.testing.assert_allclose(loss, want, rtol=1e-5)


def _kl_attention(t_scores, s_scores, mask):
  """Eq. 3 by hand: KL(softmax t || softmax s) over keys, averaged over
  heads and real query positions."""
  log_t = t_scores - np.log(np.exp(t_scores - t_scores.max(-1, keepdims=True)
                                   ).sum(-1, keepdims=True)) - t_scores.max(
                                       -1, keepdims=True)
  log_s = s_scores - np.log(np.exp(s_scores - s_scores.max(-1, keepdims=True)
                                   ).sum(-1, keepdims=True)) - s_scores.max(
                                       -1, keepdims=True)
  kl = (np.exp(log_t) * (log_t - log_s)).sum(-1)  # [B, H, T]
  w = np.broadcast_to(mask[:, None, :], kl.shape).astype(np.float64)
  return float((kl * w).sum() / w.sum())


def test_a_carved_student_learns_each_heads_attention_from_its_own_head():
  """--task_kd carved: eq. 2 on every layer's hidden states and eq. 3
  between each kept head and the teacher head it was carved from, each
  term scaled by its weight."""
  from tfmodels.distillation.losses import feature_map_transfer_loss
  teacher_config = load_config("tiny_bert")  # 4 heads of 8
  student_config = teacher_config.replace(num_attention_heads=2,
                                          attention_head_size=8)
  teacher = build_model(teacher_config, Head("span"))
  student = build_model(student_config, Head("span"))
  kept = [[3, 1], [0, 2]]
  for v in teacher.variables + student.variables:  # peaked attention
    if "query" in v.name and "kernel" in v.name:
      v.assign(v * 30.0)
  # Layer 0 carved as compress would: the teacher's embeddings, and the
  # query and key columns of the heads it keeps.
  weights = {v.name: v for v in teacher.variables}
  columns = (np.array(kept[0])[:, None] * 8 + np.arange(8)).reshape(-1)
  for v in student.variables:
    if v.name.startswith("embeddings/"):
      v.assign(weights[v.name])
    elif v.name.startswith("layer_0_attention/self_attention/") and (
        "/query/" in v.name or "/key/" in v.name):
      v.assign(np.take(weights[v.name].numpy(), columns, axis=-1))
  task = SpanTask("squad", "", None, 12)
  rng = np.random.default_rng(3)
  batch = make_features([list(rng.integers(5, 90, n)) for n in (12, 6, 9)],
                        seq_len=12)
  batch["start_positions"] = np.array([3, 1, 0], np.int32)
  batch["end_positions"] = np.array([4, 5, 0], np.int32)
  loss, metrics = finetuning_loss(student, teacher, task, "carved",
                                  teacher_heads=kept,
                                  layer_weights=(0.5, 2.0))(batch)
  assert set(metrics) == {"logit_kd", "task", "fmt_0", "fmt_1", "at_0",
                          "at_1"}
  inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
  t = teacher(inputs, training=False)
  s = student(inputs, training=False)
  mask = batch["input_mask"].numpy()
  for l in range(2):
    t_scores = t["attention_scores"][l].numpy().astype(np.float64)
    s_scores = s["attention_scores"][l].numpy().astype(np.float64)
    assert s_scores.shape[1] == 2
    np.testing.assert_allclose(metrics[f"at_{l}"], 2.0 * _kl_attention(
        t_scores[:, kept[l]], s_scores, mask), rtol=1e-4, atol=1e-6)
    other = 2.0 * _kl_attention(t_scores[:, kept[l][::-1]], s_scores, mask)
    if l == 0:  # carved heads attend as their teacher heads; others do not
      assert float(metrics["at_0"]) < 1e-6 and other > 0.05
    np.testing.assert_allclose(metrics[f"fmt_{l}"], 0.5 * float(
        feature_map_transfer_loss(t["hidden_states"][l],
                                  s["hidden_states"][l], mask)), rtol=1e-5)
  np.testing.assert_allclose(loss, sum(float(v) for v in metrics.values()),
                             rtol=1e-5)
  with pytest.raises(ValueError, match="teacher_heads go with"):
    finetuning_loss(student, teacher, task, "carved")


def test_carving_json_that_does_not_fit_the_student_is_refused(tmp_path):
  from tfmodels.compression.carve import kept_heads
  config = load_config("tiny_bert").replace(num_attention_heads=2,
                                            attention_head_size=8)
  with pytest.raises(ValueError, match="carving.json is missing"):
    kept_heads(str(tmp_path), config, 4)
  path = tmp_path / "carving.json"
  for layers in ([{"kept_heads": [0, 1]}],  # one layer of two
                 [{"kept_heads": [0, 1]}, {"kept_heads": [0, 4]}],  # no 4
                 [{"kept_heads": [0, 1]}, {"kept_heads": [0]}]):
    path.write_text(json.dumps({"layers": layers}))
    with pytest.raises(ValueError, match=f"^{path}: field 'layers' must "
                       "hold, for each of the student's 2 layers, "
                       "kept_heads: its 2 heads' indices among the "
                       "teacher's 4$"):
      kept_heads(str(tmp_path), config, 4)
  path.write_text(json.dumps({"layers": [{"kept_heads": [0, 1]},
                                         {"kept_heads": [3, 2]}]}))
  assert kept_heads(str(tmp_path), config, 4) == [[0, 1], [3, 2]]


def test_finetune_with_teacher(tmp_path, pair):
  teacher_config, student_config = pair
  rng = random.Random(0)
  data = tmp_path / "sst"
  data.mkdir()
  write_lines(data / "train.tsv", _sst_rows(rng, 64))
  write_lines(data / "dev.tsv", _sst_rows(rng, 32))
  teacher_config = teacher_config.replace(vocab_size=30522)
  student_config = student_config.replace(vocab_size=30522)
  head = Head("classifier", num_classes=2)
  teacher_dir, student_dir = tmp_path / "teacher", tmp_path / "student"
  save_model_dir(build_model(teacher_config, head), teacher_config, head,
                 str(teacher_dir))
  save_model_dir(build_model(student_config, Head("pretrainer")),
                 student_config, Head("pretrainer"), str(student_dir))
  span_dir = tmp_path / "span_teacher"
  save_model_dir(build_model(teacher_config, Head("span")), teacher_config,
                 Head("span"), str(span_dir))

  def finetune(teacher, run, *args):
    return subprocess.run(
        [sys.executable, "-m", "tfmodels.training.finetune", "--task",
         "sst-2", "--data_dir", str(data), "--init_dir", str(student_dir),
         "--teacher_dir", str(teacher), "--model_dir", str(run),
         "--vocab_file", VOCAB, "--max_seq_length", "16", "--train_steps",
         "4", "--batch_size", "8", "--log_every", "2", *args],
        capture_output=True, text=True, env=_env())

  result = finetune(teacher_dir, tmp_path / "run")
  assert result.returncode == 0, result.stderr[-1000:]
  assert "copied 2 prediction-layer variables" in result.stdout
  assert (tmp_path / "run" / "eval_results.json").exists()

  wrong = finetune(span_dir, tmp_path / "run2")
  assert wrong.returncode != 0
  assert "span head" in wrong.stderr.strip().splitlines()[-1]

  # Soft targets alone: the teacher's logits computed once; scored on a
  # held-out split at 1, 2, 4 ... steps, the run ends at the first doubling
  # gaining too little (every one, at --min_gain 1000) that starts after
  # the warmup (4 of the 40 steps), long before its cap.
  write_lines(data / "heldout.tsv", _sst_rows(rng, 16))
  run = tmp_path / "run3"
  result = finetune(teacher_dir, run, "--task_kd", "prediction",
                    "--eval_split", "heldout", "--eval_first_steps", "1",
                    "--min_gain", "1000", "--train_steps", "40")
  assert result.returncode == 0, result.stderr[-1000:]
  assert "the teacher's logits on 64 train rows computed once" in (
      result.stdout)
  plateau = json.loads((run / "plateau.json").read_text())
  assert [p["steps"] for p in plateau["points"]] == [1, 2, 4, 8]
  assert plateau["steps"] == 8 and plateau["split"] == "heldout"
  assert plateau["stopped"].startswith("a doubling (4 -> 8 steps) gained")
  assert plateau["rule"]["warmup_steps"] == 4
  assert all(0 <= p["score"] <= 100 for p in plateau["points"])
  assert (run / "ckpt-8.index").exists() and not (run / "ckpt-40.index").exists()
  assert (run / "eval_results.json").exists()
  # It ends with the weights of its best point (the earliest of equals),
  # in its last checkpoint, which every later step reads.
  best = max(plateau["points"], key=lambda p: p["score"])
  assert plateau["kept_steps"] == best["steps"]
  assert (f"kept the weights of step {best['steps']}" in result.stdout) == (
      best["steps"] != 8)
  snapshot = str(run / "best_heldout" / "weights")
  names = [n for n, _ in tf.train.list_variables(snapshot)
           if n.startswith("model/") and "OPTIMIZER_SLOT" not in n]
  final, kept = (tf.train.load_checkpoint(str(run / "ckpt-8")),
                 tf.train.load_checkpoint(snapshot))
  assert names and all(np.array_equal(final.get_tensor(n), kept.get_tensor(n))
                       for n in names)


def test_transfer_adds_mobilebert_layer_losses_at_every_layer():
  """finetune --task_kd transfer: eqs. 2 and 3 per layer against the
  fine-tuned teacher, plus soft targets and labels (a PKT pair)."""
  from tfmodels.distillation.losses import (attention_transfer_loss,
                                            feature_map_transfer_loss)
  teacher = build_model(load_config("tiny_ibbert"), Head("span"))
  student = build_model(load_config("tiny_mobilebert"), Head("span"))
  task = SpanTask("squad", "", None, 12)
  rng = np.random.default_rng(1)
  batch = make_features([list(rng.integers(5, 90, n)) for n in (12, 7)],
                        seq_len=12)
  batch["start_positions"] = np.array([3, 1], np.int32)
  batch["end_positions"] = np.array([4, 5], np.int32)
  loss, metrics = finetuning_loss(student, teacher, task,
                                  intermediate="transfer")(batch)
  layers = range(load_config("tiny_mobilebert").num_hidden_layers)
  assert set(metrics) == {"logit_kd", "task"} | {
      f"{kind}_{l}" for kind in ("fmt", "at") for l in layers}
  inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
  t = teacher(inputs, training=False)
  s = student(inputs, training=False)
  for l in layers:
    np.testing.assert_allclose(metrics[f"fmt_{l}"], feature_map_transfer_loss(
        t["hidden_states"][l], s["hidden_states"][l], batch["input_mask"]),
                               rtol=1e-5)
    np.testing.assert_allclose(metrics[f"at_{l}"], attention_transfer_loss(
        t["attention_scores"][l], s["attention_scores"][l],
        batch["input_mask"]), rtol=1e-5)
    assert float(metrics[f"at_{l}"]) > 0
  np.testing.assert_allclose(loss, sum(float(v) for v in metrics.values()),
                             rtol=1e-5)
  with pytest.raises(ValueError, match="intermediate must be"):
    finetuning_loss(student, teacher, task, intermediate="heads")
