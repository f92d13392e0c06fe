import json

import pytest

from tfmodels.configs import (ConfigError, ModelConfig, load_config,
                              shipped_config_names)

# Google's released MobileBERT config, verbatim field names, no model_type.
RELEASED_MOBILEBERT = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "relu",
    "hidden_dropout_prob": 0.0, "hidden_size": 512, "initializer_range": 0.02,
    "intermediate_size": 512, "max_position_embeddings": 512,
    "num_attention_heads": 4, "num_hidden_layers": 24, "type_vocab_size": 2,
    "vocab_size": 30522, "embedding_size": 128, "trigram_input": True,
    "use_bottleneck": True, "intra_bottleneck_size": 128,
    "key_query_shared_bottleneck": True, "use_bottleneck_attention": False,
    "num_feedforward_networks": 4, "normalization_type": "no_norm",
    "classifier_activation": False}


def test_every_shipped_config_loads_with_its_file_name():
  names = shipped_config_names()
  for required in ("bert_base", "bert_large", "ibbert_large", "mobilebert",
                   "mobilebert_no_opt", "mobilebert_tiny", "albert_base",
                   "albert_large", "albert_xlarge", "albert_xxlarge",
                   "kroneckerbert_8", "kroneckerbert_21", "kroneckerbert_5",
                   "mixed_vocab_l6_h256", "mixed_vocab_l12_h256",
                   "snips_l6_h96", "snips_l6_h192", "snips_l6_h256"):
    assert required in names
  for name in names:
    assert load_config(name).name == name


def test_released_mobilebert_config_matches_ours_and_infers_type(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(RELEASED_MOBILEBERT))
  released = load_config(str(path))
  assert released.model_type == "mobilebert"
  assert released.replace(name="mobilebert") == load_config("mobilebert")
  no_opt = load_config("mobilebert_no_opt")
  assert (no_opt.hidden_act, no_opt.normalization_type) == ("gelu",
                                                            "layer_norm")


def test_json_round_trip():
  for name in ("tiny_kroneckerbert", "albert_base", "mobilebert"):
    config = load_config(name)
    again = ModelConfig.from_dict(json.loads(config.to_json()))
    assert again == config


@pytest.mark.parametrize("change, field", [
    ({"hidden_sise": 32}, "hidden_sise"),
    ({"hidden_size": 30}, "hidden_size"),
    ({"hidden_act": "swish"}, "hidden_act"),
    ({"num_hidden_layers": "2"}, "num_hidden_layers"),
    ({"sharing_mode": "some"}, "sharing_mode"),
    ({"num_hidden_groups": 3}, "num_hidden_groups"),
    ({"kronecker_factor_shapes": {"query": [5, 4]}},
     "kronecker_factor_shapes.query"),
    ({"kronecker_factor_shapes": {"gate": [2, 2]}}, "kronecker_factor_shapes"),
    ({"kronecker_embedding_size": 5}, "kronecker_embedding_size"),
    ({"trigram_input": True}, "trigram_input"),
    ({"trigram_zero_padding": True}, "trigram_zero_padding"),
    ({"trigram_zero_padding": 1}, "trigram_zero_padding"),
    ({"mixed_vocab_size": 10}, "mixed_vocab_embedding_size"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
])
def test_bad_fields_are_rejected_by_name(tmp_path, change, field):
  values = json.loads(load_config("tiny_bert").to_json())
  values.update(change)
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(values))
  with pytest.raises(ConfigError) as error:
    load_config(str(path))
  message = str(error.value)
  assert f"'{field}'" in message and str(path) in message
  assert "\n" not in message


def test_mobilebert_shape_errors_name_the_field():
  base = load_config("tiny_mobilebert").to_dict()
  with pytest.raises(ConfigError, match="'intra_bottleneck_size'"):
    ModelConfig.from_dict(dict(base, intra_bottleneck_size=18))
  with pytest.raises(ConfigError, match="'use_bottleneck_attention'"):
    ModelConfig.from_dict(dict(base, use_bottleneck_attention=True))
  with pytest.raises(ConfigError, match="'use_bottleneck'"):
    ModelConfig.from_dict(dict(base, use_bottleneck=False))
  with pytest.raises(ConfigError, match="'trigram_zero_padding'"):
    ModelConfig.from_dict(dict(base, trigram_input=False,
                               trigram_zero_padding=True))


def test_missing_file_and_bad_json(tmp_path):
  with pytest.raises(ConfigError, match="no such config"):
    load_config(str(tmp_path / "absent.json"))
  path = tmp_path / "broken.json"
  path.write_text("{")
  with pytest.raises(ConfigError, match="not valid JSON"):
    load_config(str(path))


def test_albert_groups_split_layers_evenly():
  config = load_config("tiny_albert")  # 4 layers, 2 groups
  assert [config.group_of_layer(i) for i in range(4)] == [0, 0, 1, 1]
