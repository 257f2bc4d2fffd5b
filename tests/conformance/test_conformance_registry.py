"""The registry describes every model class of the package, and the known-gaps table names real cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from conformance_harness import ALL_CASES
from known_gaps import KNOWN_GAPS
from model_inputs import model_inputs
from transformers import AutoModelForCausalLM, PreTrainedModel

import hf_seqmodels
from hf_seqmodels import models
from hf_seqmodels.registry import FAMILIES, FAMILY_DESCRIPTIONS, auto_map_for, family_of


def test_every_model_class_of_the_package_is_described_in_the_registry():
    """A new head or base model is tested (and registered) only once the registry lists it."""
    described = {case.model_class for case in ALL_CASES}
    exported = {getattr(models, name) for name in models.__all__}
    concrete = {cls for cls in exported if isinstance(cls, type) and issubclass(cls, PreTrainedModel)
                and not cls.__name__.endswith("PreTrainedModel")}
    assert concrete - described == set(), "model classes missing from hf_seqmodels/registry.py"


def test_the_package_and_its_models_folder_export_every_class_of_the_registry():
    """``hf_seqmodels`` and ``hf_seqmodels.models`` (the code copied to the Hub) name the families' classes in
    their imports and ``__all__`` (type checkers and the API reference read them statically): every class of the
    registry is there, under its own name."""
    registered = {cls for family in FAMILY_DESCRIPTIONS for cls in (family.config_class, *family.heads.values())}
    for package in (hf_seqmodels, models):
        exported = {getattr(package, name, None) for name in package.__all__}
        missing = sorted(cls.__name__ for cls in registered - exported)
        assert missing == [], f"add {missing} to the imports and __all__ of {package.__file__}"


def test_families_view_and_auto_map_come_from_the_descriptions():
    assert list(FAMILIES) == [family.config_class for family in FAMILY_DESCRIPTIONS]
    rnn = next(f for f in FAMILY_DESCRIPTIONS if f.name == "rnn")
    assert auto_map_for(rnn.config_class) == {
        "AutoConfig": "configuration_rnn.RNNConfig",
        "AutoModel": "modeling_rnn.RNNModel",
        "AutoModelForCausalLM": "modeling_rnn.RNNForCausalLM",
        "AutoModelForSequenceClassification": "modeling_rnn.RNNForSequenceClassification",
        "AutoModelForTokenClassification": "modeling_rnn.RNNForTokenClassification",
    }
    for family in FAMILY_DESCRIPTIONS:
        assert family.config_class.AUTO_MAP == auto_map_for(family.config_class)
        assert set(family.config_class.AUTO_MAP) == {"AutoConfig", *(auto.__name__ for auto in family.heads)}


def test_family_of_finds_the_family_of_a_config_a_config_class_or_a_model_class():
    for family in FAMILY_DESCRIPTIONS:
        assert family_of(family.config_class) is family
        assert family_of(family.tiny_config()) is family
        for model_class in family.heads.values():
            assert family_of(model_class) is family
    with pytest.raises(ValueError, match="belongs to no family"):
        family_of(torch.nn.Linear)


def test_inputs_for_a_class_of_another_family_are_refused():
    rnn = next(f for f in FAMILY_DESCRIPTIONS if f.name == "rnn")
    bert = next(f for f in FAMILY_DESCRIPTIONS if f.name == "bert")
    with pytest.raises(ValueError, match="is not a head of the rnn family"):
        model_inputs(rnn, rnn.tiny_config(), bert.heads[AutoModelForCausalLM] if AutoModelForCausalLM in bert.heads
                   else next(iter(bert.heads.values())))


def test_inputs_are_seeded_and_carry_the_labels_of_the_head():
    for case in ALL_CASES:
        config = case.config()
        first, again = case.inputs(config, seed=3), case.inputs(config, seed=3)
        assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
        assert ("labels" in first or "start_positions" in first) == case.has_labels, case.name
        assert "labels" not in case.inputs(config, labels=False)


def _contract_names() -> set[str]:
    names = set()
    for path in Path(__file__).parent.glob("test_conformance_*.py"):
        names |= set(re.findall(r'cases\(\s*"(\w+)"', path.read_text()))
    return names


def test_every_known_gap_names_a_real_head_or_family_and_contract():
    """A misspelt entry would silently mark nothing."""
    targets = {case.name for case in ALL_CASES} | {family.name for family in FAMILY_DESCRIPTIONS}
    contracts = _contract_names()
    for (target, contract), reason in KNOWN_GAPS.items():
        assert target in targets, target
        assert contract in contracts, contract
        assert reason.strip(), (target, contract)
