"""NoNorm folding (converters/nonorm_folding.py): the folded model gives the
same answers with its NoNorms turned into identities."""

import numpy as np
import pytest
import tensorflow as tf

from converters import nonorm_folding
from tfmodels.configs import load_config
from tfmodels.encoders import build_encoder
from tfmodels.models import build_classifier


def _randomize_norms(model, seed=0):
  """Trained-looking norms: scales 0.5..1.5 (some negative), offsets +-0.5."""
  rng = np.random.default_rng(seed)
  for layer in model.submodules:
    if type(layer).__name__ == "NoNorm":
      scale = rng.uniform(0.5, 1.5, layer.gamma.shape)
      scale *= np.where(rng.random(layer.gamma.shape) < 0.1, -1, 1)
      layer.gamma.assign(scale.astype(np.float32))
      layer.beta.assign(rng.uniform(-0.5, 0.5, layer.beta.shape)
                        .astype(np.float32))


def _features(vocab_size, batch=3, length=12, seed=1):
  rng = np.random.default_rng(seed)
  mask = np.ones((batch, length), np.int32)
  mask[1, 7:] = 0
  return {"input_ids": tf.constant(rng.integers(1, vocab_size,
                                                (batch, length)), tf.int32),
          "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(length) > 5).astype(np.int32)
                                     [None].repeat(batch, 0))}


def _nonorm_config(name, **changes):
  return load_config(name).replace(normalization_type="no_norm", **changes)


def _no_norms(model):
  return [l for l in model.submodules if type(l).__name__ == "NoNorm"]


def _fold_and_compare(model, config, output="sequence_output",
                      max_spread=np.inf):
  """fold_nonorms' (copy, facts), once its `output` matches the original's
  (by default folding wherever it is exact)."""
  features = _features(config.vocab_size)
  want = model(features, training=False)[output].numpy()
  folded, facts = nonorm_folding.fold_nonorms(model, config, max_spread)
  got = folded(features, training=False)[output].numpy()
  np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max())
  return folded, facts


@pytest.mark.parametrize("name,changes", [
    ("tiny_mobilebert", {}),                              # shared q/k
    ("tiny_mobilebert_tiny", {}),                         # bottleneck attention
    ("tiny_ibbert", {}),                                  # the teacher
    ("tiny_mobilebert", {"use_bottleneck": False,
                         "key_query_shared_bottleneck": False,
                         "intra_bottleneck_size": None}),
    ("tiny_mobilebert", {"key_query_shared_bottleneck": False}),
    ("tiny_bert", {"hidden_act": "relu"}),
])
def test_folded_encoder_matches_and_its_norms_are_identities(name, changes):
  config = _nonorm_config(name, **changes)
  tf.keras.utils.set_random_seed(0)
  encoder = build_encoder(config)
  _randomize_norms(encoder)
  folded, facts = _fold_and_compare(encoder, config)
  norms = _no_norms(folded)
  identities = [n for n in norms if np.all(n.gamma.numpy() == 1.0)
                and np.all(n.beta.numpy() == 0.0)]
  # Every norm but the last (which makes the output true again) folds.
  assert facts == {"folded": len(norms) - 1, "kept": 1}
  assert len(identities) == len(norms) - 1
  # The original is untouched.
  assert not np.all(_no_norms(encoder)[0].gamma.numpy() == 1.0)


def test_a_tiny_scale_makes_the_stream_true_again_instead_of_dividing():
  config = _nonorm_config("tiny_mobilebert")
  tf.keras.utils.set_random_seed(0)
  encoder = build_encoder(config)
  _randomize_norms(encoder)
  ffn_norm = encoder.get_layer("layer_0").ffns[0].norm
  gamma = ffn_norm.gamma.numpy()
  gamma[3] = 1e-6
  ffn_norm.gamma.assign(gamma)
  folded, facts = _fold_and_compare(encoder, config)
  assert facts["kept"] == 2
  kept = folded.get_layer("layer_0").ffns[0].norm.gamma.numpy()
  assert abs(kept[3]) < 1e-4      # the product n * g, kept as a real NoNorm


def test_a_stream_spread_wider_than_int8_holds_is_made_true_again():
  """By default a carried stream's channel scales stay within MAX_SPREAD of
  each other: norms fitted to LayerNorms (scales 0.05..2) are kept where
  folding would spread the stream, norms of 1 (MobileBERT's start) fold."""
  config = _nonorm_config("tiny_bert", hidden_act="relu")
  tf.keras.utils.set_random_seed(0)
  encoder = build_encoder(config)
  norms = _no_norms(encoder)
  wide = np.full(norms[0].gamma.shape, 0.05, np.float32)
  wide[::2] = 2.0
  for norm in norms[1::2]:
    norm.gamma.assign(wide)
  folded, facts = _fold_and_compare(encoder, config,
                                    max_spread=nonorm_folding.MAX_SPREAD)
  # The ones fold (into an unscaled, hence true, stream); each wide norm
  # is kept as a real NoNorm.
  wide_norms = len(norms[1::2])
  assert facts == {"folded": len(norms) - wide_norms, "kept": wide_norms}
  for before, after in zip(norms[1::2], _no_norms(folded)[1::2]):
    np.testing.assert_array_equal(after.gamma.numpy(), before.gamma.numpy())
  everything = nonorm_folding.fold_nonorms(encoder, config, np.inf)[1]
  assert everything == {"folded": len(norms) - 1, "kept": 1}


def _spread(ranges):
  return ranges.max() / ranges.min()


def test_kept_norms_equalize_their_streams_exactly_with_calibration():
  """Norms too wide to fold still carry a scaled stream when calibration
  ranges are given: z = true / s with s = range^0.5, so an outlier channel
  30x the others leaves the int8 range of the matmul inputs 5.5x, and the
  output is unchanged."""
  config = _nonorm_config("tiny_bert", hidden_act="relu")
  tf.keras.utils.set_random_seed(0)
  encoder = build_encoder(config)
  norms = _no_norms(encoder)
  for norm in norms:
    outlier = np.ones(norm.gamma.shape, np.float32)
    outlier[3] = 30.0
    norm.gamma.assign(outlier)
  features = _features(config.vocab_size)
  ranges = nonorm_folding.channel_ranges(encoder, features)
  assert len(ranges) == len(norms)
  want = encoder(features, training=False)["sequence_output"].numpy()
  folded, facts = nonorm_folding.fold_nonorms(encoder, config, ranges=ranges)
  got = folded(features, training=False)["sequence_output"].numpy()
  np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max())
  # Every stream but the output's (which must be the truth) is equalized.
  assert facts == {"folded": 0, "equalized": len(norms) - 1, "kept": 1}
  after = nonorm_folding.channel_ranges(folded, features)
  for before, now in zip(ranges[:-1], after[:-1]):
    assert _spread(before) > 10
    np.testing.assert_allclose(_spread(now), _spread(before) ** 0.5,
                               rtol=1e-3)
  np.testing.assert_allclose(after[-1], ranges[-1], rtol=1e-4)
  # Without ranges the same norms are kept as they are.
  assert nonorm_folding.fold_nonorms(encoder, config)[1] == {
      "folded": 0, "kept": len(norms)}


def test_a_task_model_folds_with_its_head():
  config = _nonorm_config("tiny_mobilebert")
  tf.keras.utils.set_random_seed(0)
  model = build_classifier(config, 3)
  _randomize_norms(model)
  _fold_and_compare(model, config, "logits")


@pytest.mark.parametrize("name,changes,message", [
    ("tiny_mobilebert", {"normalization_type": "layer_norm"},
     "only NoNorm folds"),
    ("tiny_albert", {"normalization_type": "no_norm"}, "sharing_mode"),
    ("tiny_kroneckerbert", {"normalization_type": "no_norm"},
     "only plain Dense"),
])
def test_models_that_cannot_fold_exactly_are_refused(name, changes, message):
  config = load_config(name).replace(**changes)
  encoder = build_encoder(config)
  _randomize_norms(encoder)
  with pytest.raises(nonorm_folding.FoldError, match=message):
    nonorm_folding.fold_nonorms(encoder, config)
