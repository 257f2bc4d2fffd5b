"""Model cards: every family has its own section, and the evaluation figures become ``model-index``
metadata that ``huggingface_hub.ModelCard`` parses back."""

from __future__ import annotations

import pytest
from huggingface_hub import ModelCard

import hf_seqmodels  # noqa: F401  (registers the families)
from hf_seqmodels.cards import family_card_section, model_index_results, write_model_card
from hf_seqmodels.publishing import _checked_card
from hf_seqmodels.registry import FAMILIES

HEADS = [(config_class, model_class) for config_class, heads in FAMILIES.items() for model_class in heads.values()]


@pytest.mark.parametrize("config_class, model_class", HEADS, ids=lambda c: c.__name__)
def test_every_head_gets_a_card_with_its_family_section_and_model_index(config_class, model_class, tmp_path):
    model = model_class(config_class.from_preset("tiny"))
    results = {"eval_loss": 2.25, "eval_accuracy": 0.75, "test_bleu": 12.5, "steps": 10, "eval_runtime": 3.0}
    path = write_model_card(tmp_path, model, None, results, eval_dataset="some/data")
    card = ModelCard.load(path)
    _checked_card(tmp_path)  # what `hf-seqmodels push` checks before uploading
    assert family_card_section(config_class.model_type) in card.text  # every family of ours has one
    assert f"# {model_class.__name__} ({config_class.model_type})\n\nA {config_class.model_type}." not in card.text
    found = {(r.metric_type, r.dataset_split, r.metric_value) for r in card.data.eval_results}
    assert found == {("loss", "validation", 2.25), ("accuracy", "validation", 0.75), ("bleu", "test", 12.5)}
    assert {r.dataset_name for r in card.data.eval_results} == {"some/data"}
    assert {r.task_type for r in card.data.eval_results} == {card.data.pipeline_tag}
    assert card.data.model_name == tmp_path.name


def test_without_an_evaluation_dataset_the_card_has_no_model_index(tmp_path):
    config_class, model_class = HEADS[0]
    path = write_model_card(tmp_path, model_class(config_class.from_preset("tiny")), None, {"eval_loss": 1.0})
    card = ModelCard.load(path)
    assert card.data.eval_results is None and "model-index" not in path.read_text()
    assert "| eval_loss | 1 |" in card.text  # the figures are still in the card's table


def test_model_index_names_the_metrics_and_skips_what_is_not_an_evaluation_figure():
    entries = model_index_results({"eval_overall_f1": 0.5, "eval_mlm_accuracy": 0.25, "test_exact_match": 40.0,
                                   "eval_samples": 7, "train_loss": 1.0, "eval_bleu": "n/a", "eval_epoch": 3.0,
                                   "validation_bleu": True}, "token-classification", "conll")
    assert [(e.metric_type, e.metric_name, e.dataset_split) for e in entries] == [
        ("f1", "Entity-level F1 (seqeval)", "validation"),
        ("accuracy", "Masked-LM accuracy", "validation"),
        ("exact_match", "Exact match", "test"),
    ]


def test_a_family_defined_elsewhere_gets_its_config_docstring(tmp_path, caplog):
    config_class, model_class = HEADS[0]

    class OutsideConfig(config_class):
        """A family from another package.

        Details that stay out of the card."""

        model_type = "elsewhere_lm"

    model = model_class(OutsideConfig.from_preset("tiny"))
    text = write_model_card(tmp_path, model, None, {}).read_text()
    assert "## About the architecture\n\nA family from another package.\n" in text and "Details" not in text
    assert "templates/families/elsewhere_lm.md" in caplog.text


@pytest.mark.parametrize("model_type, cache_words", [
    ("hfsm_transformer_lm", "holds every layer's keys and values"),
    ("hfsm_rnn", "The model's state is the generation cache"),
    ("hfsm_nnlm", "The model's state is the generation cache"),
])
def test_a_causal_lm_card_describes_the_cache_its_family_generates_with(model_type, cache_words, tmp_path):
    """A Transformer LM generates with a key/value cache, the recurrent models and the NNLM with a fixed-size
    state: each card says which, and not the other."""
    config_class = next(c for c in FAMILIES if c.model_type == model_type)
    model = FAMILIES[config_class][next(auto for auto in FAMILIES[config_class] if "CausalLM" in auto.__name__)]
    text = write_model_card(tmp_path, model(config_class.from_preset("tiny")), None, {"eval_loss": 1.0}).read_text()
    assert cache_words in text
    other = "The model's state" if "keys and values" in cache_words else "keys and values"
    assert other not in text
