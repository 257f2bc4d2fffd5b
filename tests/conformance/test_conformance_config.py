"""Config contract (transformers' ConfigTester): round trips, common properties, output flags as kwargs."""

from __future__ import annotations

import inspect
import json

import pytest
from conformance_harness import family_cases
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoModel

from hf_seqmodels.families import Family


def _comparable(config) -> dict:
    data = config.to_dict()
    data.pop("transformers_version", None)
    return data


@pytest.mark.parametrize("family", family_cases("config_round_trip"))
def test_config_round_trips_through_dict_json_string_file_and_folder(family: Family, tmp_path):
    config = family.tiny_config()
    cls = family.config_class
    assert _comparable(cls.from_dict(config.to_dict())) == _comparable(config)
    assert json.loads(config.to_json_string())["model_type"] == cls.model_type
    config.to_json_file(tmp_path / "config.json")
    assert _comparable(cls.from_json_file(tmp_path / "config.json")) == _comparable(config)
    config.save_pretrained(tmp_path / "folder")
    assert _comparable(cls.from_pretrained(tmp_path / "folder")) == _comparable(config)


@pytest.mark.parametrize("family", family_cases("config_defaults"))
def test_config_builds_without_arguments_and_keeps_the_tiny_values(family: Family):
    cls = family.config_class
    assert cls().model_type == cls.model_type
    tiny = family.tiny_config()
    assert tiny.vocab_size == cls.from_preset("tiny").vocab_size


@pytest.mark.parametrize("family", family_cases("config_common_properties"))
def test_config_common_properties_read_and_write(family: Family):
    """The properties transformers' generic code reads (``hidden_size``, ``num_hidden_layers``, ...: those the
    family declares) are integers under those names, through ``attribute_map`` where the family names them
    otherwise; ``vocab_size`` can be set and is saved."""
    config = family.tiny_config()
    for name in family.common_properties:
        assert isinstance(getattr(config, name), int), name
    for alias, target in config.attribute_map.items():
        assert getattr(config, alias) == getattr(config, target), alias
    config.vocab_size = 123
    assert config.vocab_size == 123 and config.to_dict()["vocab_size"] == 123


@pytest.mark.parametrize("family", family_cases("config_output_flags_kwargs"))
def test_config_takes_output_flags_and_return_dict_as_kwargs(family: Family, tmp_path):
    config = family.tiny_config(output_hidden_states=True, output_attentions=True, return_dict=False)
    assert config.output_hidden_states and config.output_attentions and config.return_dict is False
    config.save_pretrained(tmp_path)
    loaded = family.config_class.from_pretrained(tmp_path)
    assert loaded.output_hidden_states and loaded.return_dict is False
    assert family.config_class.from_pretrained(tmp_path, output_hidden_states=False).output_hidden_states is False


@pytest.mark.parametrize("family", family_cases("config_num_labels"))
def test_config_num_labels_sets_the_label_maps(family: Family):
    config = family.tiny_config(num_labels=5) if "id2label" not in family.tiny_overrides else family.tiny_config()
    expected = len(family.tiny_overrides.get("id2label", {})) or 5
    assert config.num_labels == expected and len(config.id2label) == expected == len(config.label2id)
    if "id2label" not in family.tiny_overrides:
        config.num_labels = 3
        assert len(config.id2label) == 3


@pytest.mark.parametrize("family", family_cases("config_rejects_bad_values"))
def test_config_rejects_a_bad_vocab_size_with_a_value_error_naming_it(family: Family):
    """transformers' strict configs wrap a validator's ValueError in their own error; the cause must be a
    ValueError naming the field."""
    with pytest.raises((ValueError, StrictDataclassError)) as raised:
        family.tiny_config(vocab_size=0)
    error = raised.value if isinstance(raised.value, ValueError) else raised.value.__cause__
    assert isinstance(error, ValueError) and "vocab_size" in str(error)


@pytest.mark.parametrize("family", family_cases("capabilities_match_the_classes"))
def test_declared_capabilities_match_what_the_classes_say(family: Family):
    """The registry's capabilities agree with the class attributes transformers reads."""
    caps, heads = family.capabilities, list(family.heads.values())
    config = family.tiny_config()
    assert bool(config.is_encoder_decoder) == caps.is_encoder_decoder
    for head in heads:
        forward = inspect.signature(head.forward).parameters
        assert ("inputs_embeds" in forward) == caps.inputs_embeds, head.__name__
        assert bool(head._supports_sdpa) == caps.sdpa, head.__name__
        assert bool(head.supports_gradient_checkpointing) == caps.gradient_checkpointing, head.__name__
        if head.can_generate():
            assert bool(head._is_stateful) == caps.stateful_cache, head.__name__
    assert (AutoModel in family.heads) == caps.has_base_model
