import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_CONFIGS, make_features
from tfmodels.configs import load_config
from tfmodels.encoders import build_encoder
from tfmodels.models import (build_classifier, build_intent_slot_model,
                             build_pretrainer, build_span_model, build_tagger)

IDS = [[2, 14, 33, 7, 51, 3], [2, 9, 3]]


@pytest.mark.parametrize("name", TINY_CONFIGS)
def test_every_head_has_the_documented_shapes(name):
  config = load_config(name)
  encoder = build_encoder(config)
  features = make_features(IDS)
  B, T, V = 2, 6, config.vocab_size
  pre = build_pretrainer(config, encoder=encoder, sentence_objective="sop")(
      dict(features, masked_lm_positions=tf.constant([[1, 2], [1, 0]])))
  assert pre["mlm_logits"].shape == (B, 2, V)
  assert pre["sentence_logits"].shape == (B, 2)
  if config.mixed_vocab_size:
    assert pre["mlm_student_logits"].shape == (B, 2, config.mixed_vocab_size)
  assert build_classifier(config, 3, encoder)(features)["logits"].shape == (B, 3)
  assert build_classifier(config, 1, encoder)(features)["logits"].shape == (B, 1)
  span = build_span_model(config, encoder)(features)
  assert span["start_logits"].shape == span["end_logits"].shape == (B, T)
  assert build_tagger(config, 9, encoder)(features)["logits"].shape == (B, T, 9)
  joint = build_intent_slot_model(config, 7, 11, encoder)(features)
  assert joint["intent_logits"].shape == (B, 7)
  assert joint["slot_logits"].shape == (B, T, 11)


def test_mlm_decoder_is_tied_to_the_word_embeddings():
  # MobileBERT: logits = h @ concat(word_embeddings, extra_output_weights)^T + b.
  config = load_config("tiny_mobilebert")
  model = build_pretrainer(config)
  features = dict(make_features(IDS), masked_lm_positions=tf.constant(
      [[1, 2], [1, 0]]))
  out = model(features)
  head = model.get_layer("mlm")
  h = tf.gather(out["sequence_output"], features["masked_lm_positions"],
                batch_dims=1)
  h = head.norm(head.activation(head.dense(h))).numpy()
  words = model.get_layer(config.name).get_layer(
      "embeddings").word_embeddings.embeddings.numpy()
  table = np.concatenate([words, head.extra_output_weights.numpy()], axis=1)
  assert table.shape == (config.vocab_size, config.hidden_size)
  np.testing.assert_allclose(out["mlm_logits"],
                             h @ table.T + head.output_bias.numpy(),
                             rtol=1e-4, atol=1e-5)


def test_unknown_sentence_objective_is_rejected():
  with pytest.raises(ValueError, match="sentence_objective"):
    build_pretrainer(load_config("tiny_bert"), sentence_objective="xyz")


@pytest.mark.parametrize("name", ["tiny_mobilebert", "tiny_kroneckerbert",
                                  "tiny_albert"])
def test_checkpoint_and_savedmodel_round_trip(tmp_path, name):
  config = load_config(name)
  features = dict(make_features(IDS), masked_lm_positions=tf.constant(
      [[1, 2], [1, 0]]))
  model = build_pretrainer(config)
  expected = model(features)

  path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
  fresh = build_pretrainer(config)
  assert not np.allclose(fresh(features)["mlm_logits"], expected["mlm_logits"])
  tf.train.Checkpoint(model=fresh).read(path).assert_consumed()
  for key in ("mlm_logits", "sentence_logits", "sequence_output"):
    np.testing.assert_allclose(fresh(features)[key], expected[key], rtol=1e-5,
                               atol=1e-6)

  encoder = model.get_layer(config.name)
  tf.saved_model.save(encoder, str(tmp_path / "saved"))
  loaded = tf.saved_model.load(str(tmp_path / "saved"))
  enc_features = make_features(IDS)
  np.testing.assert_allclose(loaded(enc_features)["sequence_output"],
                             encoder(enc_features)["sequence_output"],
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["classifier", "span", "tagger", "mlm"])
def test_a_model_named_like_a_head_layer_builds(kind):
  """An imported directory named `classifier` made a model whose encoder
  and head layer had the same name, which Keras refuses."""
  config = load_config("tiny_bert").replace(name=kind)
  model = {"classifier": lambda: build_classifier(config, 3),
           "span": lambda: build_span_model(config),
           "tagger": lambda: build_tagger(config, 4),
           "mlm": lambda: build_pretrainer(config)}[kind]()
  assert model.get_layer(kind) is not model.get_layer(f"{kind}_encoder")
