"""Property-based tests of config validation, for every config class of the package.

Invalid values (wrong type, NaN/inf, out-of-range sizes and probabilities, unknown choices) must raise
:class:`ConfigValidationError`, a ``ValueError`` naming the field; valid values must give a config whose
models run a forward pass with finite outputs.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_inputs import model_inputs
from transformers import AutoConfig

import hf_seqmodels  # noqa: F401  (registers the model types)
from hf_seqmodels.embeddings import GloVeConfig, SVDConfig, Word2VecConfig
from hf_seqmodels.models.config_utils import ConfigValidationError, PresetMixin, field_ranges
from hf_seqmodels.ngram import NGramConfig
from hf_seqmodels.registry import family_of

MODEL_TYPES = ("hfsm_bert", "hfsm_bilstm_crf", "hfsm_nnlm", "hfsm_rnn", "hfsm_rnn_seq2seq", "hfsm_textcnn",
               "hfsm_transformer", "hfsm_transformer_lm")
MODEL_CONFIGS = [type(AutoConfig.for_model(model_type)) for model_type in MODEL_TYPES]
CONFIG_CLASSES = [*MODEL_CONFIGS, Word2VecConfig, GloVeConfig, SVDConfig, NGramConfig]
FREE_TEXT = {"char_vocab"}  # strings that are data, not a choice among names
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def own_fields(config_class) -> list[dataclasses.Field]:
    """The fields a config class declares itself (transformers' generic fields are its business)."""
    unchecked = set(PresetMixin.UNCHECKED_FIELDS)
    base = {f.name for c in config_class.__mro__[1:] if c.__module__.startswith("transformers")
            and dataclasses.is_dataclass(c) for f in dataclasses.fields(c)}
    return [f for f in dataclasses.fields(config_class) if f.name not in base and f.name not in unchecked]


class Opaque:
    """A value of no accepted type whose repr is the same in every process (parallel test workers must collect the
    same test ids)."""

    def __repr__(self) -> str:
        return "Opaque()"


def invalid_values(config_class, field: dataclasses.Field) -> list:
    """Values that break the field's declared type or range (the class's rule for its name)."""
    kinds = {part.strip() for part in str(field.type).split("|")}
    bad: list = [Opaque()]
    if "None" not in kinds:
        bad.append(None)
    takes_lists = any(kind.startswith(("list", "tuple")) for kind in kinds)
    if kinds & {"int", "float"}:
        bad += ["3", True] + ([] if takes_lists else [[1]])
        if "float" not in kinds:
            bad += [1.5, 2.0]
        else:
            bad += [math.nan, math.inf, -math.inf]
    if "bool" in kinds:
        bad += ["no", "False", 1, 0, 0.5]
    if kinds == {"str"} or kinds == {"str", "None"}:
        bad += [3, True] + ([] if field.name in FREE_TEXT else ["__no_such_choice__"])
    rule = field_ranges(config_class).get(field.name)
    if rule == "positive":
        bad += [0, -1] if "float" not in kinds else [0, -1, -0.5, 0.0]
    elif rule == "probability":
        bad += [-0.1, 1.0, 1.5]
    elif rule == "non_negative":
        bad += [-1]
    if field.name.endswith("_token_id"):
        bad += [-1, 10**6]  # outside every tiny vocabulary
    return bad


def base_config(config_class):
    return config_class.from_preset("tiny")


CASES = [(cls, field, value) for cls in CONFIG_CLASSES for field in own_fields(cls)
         for value in invalid_values(cls, field)
         # an id can only be too large for a known vocabulary (an n-gram model's is built by training)
         if not (value == 10**6 and getattr(base_config(cls), "vocab_size", None) is None)]


@pytest.mark.parametrize("config_class, field, value", CASES,
                         ids=[f"{c.__name__}-{f.name}-{v!r}"[:80] for c, f, v in CASES])
def test_invalid_values_raise_our_error_naming_the_field(config_class, field, value):
    with pytest.raises(ConfigValidationError, match=f"`{field.name}`") as error:
        config_class.from_preset("tiny", **{field.name: value})
    assert isinstance(error.value, ValueError)
    assert config_class.__name__ in str(error.value)


def test_every_config_class_has_checked_fields():
    """The declared rules reach each class: at least its sizes are range-checked."""
    for config_class in CONFIG_CLASSES:
        names = {f.name for f in own_fields(config_class)}
        assert names & set(field_ranges(config_class)), config_class.__name__


@st.composite
def valid_sizes(draw, config_class):
    """Overrides of the tiny preset with other valid sizes, dropouts and flags."""
    config = base_config(config_class)
    overrides = {}
    for field in own_fields(config_class):
        current = getattr(config, field.name)
        rule = field_ranges(config_class).get(field.name)
        if field.name in ("vocab_size", "source_vocab_size", "type_vocab_size", "filter_sizes",
                          "max_position_embeddings", "char_max_word_length") or current is None:
            continue
        if rule == "probability":
            overrides[field.name] = draw(st.sampled_from([0.0, 0.1, 0.5]))
        elif rule == "positive" and isinstance(current, int) and not isinstance(current, bool):
            overrides[field.name] = draw(st.integers(1, 3)) * (current if field.name.endswith(("heads", "layers")) is False
                                                              and current % 2 == 0 else 1)
        elif isinstance(current, bool) and field.name in ("bidirectional", "direct_connections", "input_feeding"):
            overrides[field.name] = draw(st.booleans())
    return overrides


@pytest.mark.parametrize("config_class", MODEL_CONFIGS, ids=lambda cls: cls.__name__)
@SETTINGS
@given(data=st.data())
def test_valid_values_give_models_with_finite_outputs(config_class, data):
    overrides = data.draw(valid_sizes(config_class))
    try:
        config = config_class.from_preset("tiny", **overrides)
    except ConfigValidationError:
        return  # a cross-field rule (e.g. heads dividing the width); the error names the field, checked above
    family = family_of(config_class)
    for head in family.heads.values():
        if head.__name__.endswith("ForCausalLM") and getattr(config, "bidirectional", False):
            continue  # refused with a clear error: a language model must not see the future
        torch.manual_seed(0)
        model = head(config).eval()
        with torch.no_grad():
            output = model(**model_inputs(family, config, head, labels=False))
        tensors = [v for v in output.values() if torch.is_tensor(v) and v.is_floating_point()]
        assert tensors and all(torch.isfinite(t).all() for t in tensors), (head.__name__, overrides)
