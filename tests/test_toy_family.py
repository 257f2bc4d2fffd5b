"""A family is one registry entry plus its model code: a toy family defined here and added with one call
(:func:`hf_seqmodels.registry.register_family`) is found by the Auto classes, the conformance checks, export, the
model cards and the command line, with no other edit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput

from hf_seqmodels import registry
from hf_seqmodels.cards import write_model_card
from hf_seqmodels.cli import preset_listing
from hf_seqmodels.export import export_model
from hf_seqmodels.export.step_graphs import generation_graphs
from hf_seqmodels.families import Citation, Family
from hf_seqmodels.models.config_utils import ConfigValidationError, PresetMixin
from hf_seqmodels.training.finetune.cli import parse_arguments as finetune_arguments

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

import test_conformance_auto as auto_checks  # noqa: E402
import test_conformance_outputs as output_checks  # noqa: E402
import test_conformance_weights as weight_checks  # noqa: E402
from conformance_harness import HeadCase  # noqa: E402


class ToyBagConfig(PresetMixin, PreTrainedConfig):
    """A bag of words: the mean of a text's word vectors, then a linear layer."""

    model_type = "hfsm_toy_bag"
    PRESETS = {"tiny": dict(vocab_size=50, hidden_size=8), "toy-large": dict(vocab_size=5000, hidden_size=64)}
    FIELD_RANGES = {"pooling_eps": "positive"}  # with config_utils.FIELD_RANGES, the shared ones

    vocab_size: int = 1000
    hidden_size: int = 32
    pooling_eps: float = 1e-6
    initializer_range: float = 0.02
    pad_token_id: int | None = 0


class ToyBagPreTrainedModel(PreTrainedModel):
    config_class = ToyBagConfig
    base_model_prefix = "bag"


class ToyBagModel(ToyBagPreTrainedModel):
    """The mean of the word vectors of the unmasked tokens (``pooler_output``)."""

    def __init__(self, config: ToyBagConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                return_dict: bool | None = None, **kwargs) -> BaseModelOutputWithPooling:
        vectors = self.embed_tokens(input_ids)
        mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).unsqueeze(-1).to(vectors)
        pooled = (vectors * mask).sum(1) / mask.sum(1).clamp(min=self.config.pooling_eps)
        return BaseModelOutputWithPooling(last_hidden_state=vectors, pooler_output=pooled)


class ToyBagForSequenceClassification(ToyBagPreTrainedModel):
    """A linear classifier over the bag of words."""

    def __init__(self, config: ToyBagConfig):
        super().__init__(config)
        self.bag = ToyBagModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.bag.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.bag.embed_tokens = value

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                labels: torch.LongTensor | None = None, return_dict: bool | None = None,
                **kwargs) -> SequenceClassifierOutput:
        logits = self.classifier(self.bag(input_ids, attention_mask).pooler_output)
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


TOY = Family(
    name="toy_bag", config_class=ToyBagConfig,
    heads={AutoModel: ToyBagModel, AutoModelForSequenceClassification: ToyBagForSequenceClassification},
    hidden_states=lambda config: {}, common_properties=("vocab_size", "hidden_size"),
    citation=Citation("Harris (1954), Distributional Structure",
                      "@article{harris1954distributional,\n  title={Distributional Structure},\n"
                      "  author={Harris, Zellig S.},\n  journal={Word},\n  year={1954}\n}"),
    architecture=lambda config: f"bag of {config.hidden_size}-dimensional word vectors, averaged",
    recipe={"optim": "adamw_torch", "learning_rate": 1e-3, "lr_scheduler_type": "constant"},
)
CLASSIFIER = HeadCase(TOY, AutoModelForSequenceClassification, ToyBagForSequenceClassification)
BASE = HeadCase(TOY, AutoModel, ToyBagModel)


@pytest.fixture
def toy_family():
    """The toy family in the registry for one test, and out of it again after."""
    registry.register_family(TOY)
    yield TOY
    registry.unregister_family(TOY)


def test_the_registry_finds_the_family_and_refuses_a_second_one_of_that_name(toy_family):
    assert registry.family_named("toy_bag") is TOY and registry.family_of(ToyBagConfig.from_preset("tiny")) is TOY
    assert registry.FAMILIES[ToyBagConfig] == dict(TOY.heads)
    with pytest.raises(ValueError, match="clashes with the family 'toy_bag'"):
        registry.register_family(TOY)


def test_unregistering_takes_it_out_of_the_registry_again():
    registry.register_family(TOY)
    registry.unregister_family(TOY)
    assert TOY not in registry.FAMILY_DESCRIPTIONS and ToyBagConfig not in registry.FAMILIES
    with pytest.raises(ValueError, match="not a family of the package"):
        registry.family_named("toy_bag")


def test_the_auto_classes_load_it_from_a_saved_folder(toy_family, tmp_path):
    model = ToyBagForSequenceClassification(TOY.tiny_config(num_labels=3)).eval()
    model.save_pretrained(tmp_path)
    assert set(json.loads((tmp_path / "config.json").read_text())["auto_map"]) == {
        "AutoConfig", "AutoModel", "AutoModelForSequenceClassification"}
    assert type(AutoConfig.from_pretrained(tmp_path)) is ToyBagConfig
    assert type(AutoModelForSequenceClassification.from_pretrained(tmp_path)) is ToyBagForSequenceClassification
    assert type(AutoModel.from_pretrained(tmp_path)) is ToyBagModel


def test_its_config_checks_its_own_field_ranges(toy_family):
    with pytest.raises(ConfigValidationError, match="`pooling_eps`"):
        ToyBagConfig.from_preset("tiny", pooling_eps=0.0)


def test_the_conformance_checks_run_on_it(toy_family, tmp_path):
    auto_checks.test_every_head_sits_in_its_transformers_task_mapping(CLASSIFIER)
    auto_checks.test_the_auto_class_loads_the_head_from_its_folder(CLASSIFIER, tmp_path / "head")
    auto_checks.test_auto_model_loads_the_base_model_from_a_head_folder(CLASSIFIER, tmp_path / "base")
    weight_checks.test_save_load_round_trip_in_safetensors(BASE, tmp_path / "weights")
    output_checks.test_eval_forward_is_deterministic(CLASSIFIER)
    output_checks.test_a_batch_gives_each_row_the_result_it_gets_alone(CLASSIFIER)


def test_export_traces_it_with_the_inputs_of_its_kind(toy_family, tmp_path):
    model = ToyBagForSequenceClassification(TOY.tiny_config()).eval()
    result = export_model(model, tmp_path, format="torch")
    assert result.path.is_file() and result.parity < 1e-4
    assert set(result.inputs) == {"input_ids", "attention_mask"} and result.generation == {}


def test_a_generative_head_that_names_no_export_graphs_is_refused():
    class ToyGenerator(ToyBagForSequenceClassification):
        @classmethod
        def can_generate(cls) -> bool:
            return True

    with pytest.raises(ValueError, match="ToyGenerator generates, but has no decoding graphs.*export_graphs"):
        generation_graphs(ToyGenerator(ToyBagConfig.from_preset("tiny")))


def test_its_model_card_cites_its_paper_and_describes_its_architecture(toy_family, tmp_path):
    model = ToyBagForSequenceClassification(TOY.tiny_config())
    card = write_model_card(tmp_path, model).read_text(encoding="utf-8")
    assert "A bag of 8-dimensional word vectors, averaged." in card
    assert "Harris (1954), Distributional Structure" in card and "@article{harris1954distributional," in card


def test_the_command_line_lists_it(toy_family, tmp_path, monkeypatch):
    assert registry.families_with_head(AutoModelForSequenceClassification)["toy_bag"] is ToyBagConfig
    # the fine-tuning script, imported before the family was registered, takes it as --model_family
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.tsv").write_text("a b\t0\n")
    model_args = finetune_arguments(["--output_dir", str(tmp_path / "out"), "--train_file", "t.tsv",
                                     "--model_family", "toy_bag", "--preset", "toy-large"])[0]
    assert (model_args.model_family, model_args.preset) == ("toy_bag", "toy-large")
    listing = preset_listing("toy_bag")["toy_bag"]
    assert listing["model_class"] == "ToyBagForSequenceClassification"
    assert set(listing["presets"]) == {"tiny", "toy-large"}
    assert registry.training_recipe("toy_bag")["optim"] == "adamw_torch"
