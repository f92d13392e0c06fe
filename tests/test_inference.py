"""tfmodels.inference: the same outputs as one call of the whole model, in
batches of bounded size that compute only what is asked for."""

import numpy as np
import pytest
import tf_keras as keras

from conftest import make_features
from tfmodels import inference
from tfmodels.configs import load_config
from tfmodels.encoders import build_encoder
from tfmodels.models import (build_classifier, build_intent_slot_model,
                             build_span_model, build_tagger, outputs_only)

# Rows of different lengths; the longest is shorter than L, so trimming
# cuts real work.
IDS = [[2, 14, 33, 7, 51, 3], [2, 9, 3], [2, 5, 6, 7, 3], [2, 3]] * 3
L = 16


@pytest.fixture(scope="module")
def models():
  """Every task head on one encoder: MobileBERT, whose 3-gram embedding
  also reads the position after a token."""
  config = load_config("tiny_mobilebert")
  encoder = build_encoder(config)
  return [(["start_logits", "end_logits"], build_span_model(config, encoder)),
          (["logits"], build_classifier(config, 3, encoder)),
          (["intent_logits", "slot_logits"], build_intent_slot_model(
              config, 4, 5, encoder)),
          (["logits"], build_tagger(config, 6, encoder))]


def test_outputs_only_computes_the_same_and_nothing_else(models):
  features = make_features(IDS, seq_len=L)
  for keys, model in models:
    whole = model(features, training=False)
    slim = outputs_only(model, keys)
    assert sorted(slim.output) == sorted(keys)
    encoder, = [l for l in slim.layers if isinstance(l, keras.Model)]
    assert "attention_scores" not in encoder.output
    out = slim(features, training=False)
    for k in keys:
      np.testing.assert_allclose(out[k].numpy(), whole[k].numpy(), atol=1e-5)


def test_predict_in_small_trimmed_batches_matches_one_call(models):
  """4 rows a batch, cut after the longest real row + 1 (MobileBERT's
  3-gram reads the next position): equal at every real position."""
  features = {k: v.numpy() for k, v in make_features(IDS, seq_len=L).items()}
  real = features["input_mask"].astype(bool)
  for keys, model in models:
    whole = model(features, training=False)
    got = inference.predict(model, features, keys, trim=True,
                            max_tokens=4 * L)
    for k in keys:
      want = whole[k].numpy()
      assert got[k].shape == want.shape
      if want.ndim >= 2 and want.shape[1] == L:  # per position
        np.testing.assert_allclose(got[k][real], want[real], atol=1e-5)
      else:
        np.testing.assert_allclose(got[k], want, atol=1e-5)


def test_batches_hold_at_most_max_tokens_positions():
  assert inference.rows_per_batch(384) == 21
  assert inference.rows_per_batch(128) == 64
  assert inference.rows_per_batch(100000) == 1


def test_batches_hold_at_most_max_pairs_query_key_pairs():
  """rows x length^2 <= MAX_PAIRS at the length actually run: one untrimmed
  row at L = 384, 16 at 128, and WordNet QA's trimmed dev batches at L = 384
  (21 rows of at most 109 positions) whole."""
  assert inference.rows_within_pairs(21, 384) == 1
  assert inference.rows_within_pairs(64, 128) == 16
  assert inference.rows_within_pairs(21, 109) == 21
  assert inference.rows_within_pairs(5, 100000) == 1


def test_pair_bounded_batches_give_the_same_outputs(models):
  """Untrimmed, 2 rows of L a batch; trimmed, the 12 rows (7 positions at
  most) would be 588 pairs, so 10 rows run first, then the other 2 at their
  own length (6): every row once, equal at every real position."""
  features = {k: v.numpy() for k, v in make_features(IDS, seq_len=L).items()}
  real = features["input_mask"].astype(bool)
  keys, model = models[0]
  whole = model(features, training=False)
  for trim, sizes in ((False, [2] * 6), (True, [10, 2])):
    batches = list(inference.output_batches(model, features, keys, trim=trim,
                                            max_pairs=2 * L * L))
    assert [rows.stop - rows.start for rows, _ in batches] == sizes
    assert [rows.start for rows, _ in batches] == list(
        np.cumsum([0] + sizes[:-1]))
    for k in keys:
      got = np.concatenate([out[k] for _, out in batches])
      np.testing.assert_allclose(got[real], whole[k].numpy()[real],
                                 atol=1e-5)
