"""What the package knows about each model family, in one place.

A :class:`Family` names its configuration class, the model class for each transformers Auto class, its tiny
configuration, the kind of forward inputs its models take, how many hidden-state and attention tensors its
forward returns, what it can do (:class:`Capabilities`), and what its model cards say of it (its papers and
the sentence that describes a config's architecture). The registry (:mod:`hf_seqmodels.registry`) builds the
Auto-class registration from these descriptions, the model cards (:mod:`hf_seqmodels.cards`) read them, and the
conformance tests (``tests/conformance/``) check the transformers model contract of every family and head
from them alone: describing a family here is all it takes to register and test it.

**Hidden states.** Every family's ``hidden_states`` are (the input of the first layer, the output of layer 1,
..., of layer N). The first is the embedding output at its own width: ``embedding_size`` (RNN stacks, both
sides of the RNN encoder-decoder, TextCNN), ``context_size * embedding_size`` for the NNLM's concatenated
context, word vector plus character features with a character encoder. Layers give ``directions *
hidden_size`` (the RNN encoder: ``memory_size``). Nothing is projected to make the widths agree.
transformers' common tests assume every hidden state is ``config.hidden_size`` wide (its models project
embeddings to the model width); the family's test configuration (:meth:`Family.tiny_config`: the tiny preset
with ``tiny_overrides``) chooses sizes where that holds, as transformers' model testers choose their configs,
and ``tests/conformance/test_conformance_hidden_widths.py`` checks both that and the rule for other widths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from .example_inputs import INPUT_KINDS
from .recipes import merge_recipes

#: ``config -> {output field: number of tensors}``, e.g. ``{"hidden_states": num_layers + 1}``.
OutputCounts = Callable[[Any], dict[str, int]]


@dataclass(frozen=True)
class Capabilities:
    """What a family's models can do, as transformers' generic code and tests ask it.

    Attributes:
        is_encoder_decoder: source and target sequences (``decoder_input_ids``, ``encoder_outputs``).
        stateful_cache: the generation cache is a recurrent state (fixed size, not keys and values).
        static_cache: ``generate(cache_implementation="static")`` and ``torch.compile(fullgraph=True)``.
        inputs_embeds: ``forward(inputs_embeds=...)`` and, for generative heads, ``generate(inputs_embeds=...)``.
        has_base_model: a base model class mapped to ``AutoModel`` (the heads' body).
        sdpa: both the ``eager`` and the ``sdpa`` attention implementations exist.
        tied_embeddings: ``config.tie_word_embeddings`` ties an output layer to the input embeddings.
        gradient_checkpointing: ``gradient_checkpointing_enable()`` recomputes the layers in backward.
        mask_removes_tokens: a 0 anywhere in ``attention_mask`` gives the result of deleting that token
            (position-free pooling, as TextCNN's max over time).
        num_items_in_batch: token-level losses take ``num_items_in_batch`` (the Trainer's loss normaliser).
    """

    is_encoder_decoder: bool = False
    stateful_cache: bool = False
    static_cache: bool = False
    inputs_embeds: bool = False
    has_base_model: bool = True
    sdpa: bool = False
    tied_embeddings: bool = False
    gradient_checkpointing: bool = True
    mask_removes_tokens: bool = False
    num_items_in_batch: bool = True


class Citation(NamedTuple):
    """A paper (or several) behind a model: ``names`` as a card lists them, ``bibtex`` as it cites them."""

    names: str
    bibtex: str


@dataclass(frozen=True)
class Family:
    """One model family: see the module docstring. ``heads`` maps each transformers Auto class to its model
    class (``AutoModel`` to the base model)."""

    name: str
    config_class: type
    heads: Mapping[type, type]
    hidden_states: OutputCounts
    attentions: OutputCounts = field(default=lambda config: {})
    #: the forward inputs its models take, a key of :data:`hf_seqmodels.example_inputs.INPUT_KINDS`
    #: (``"sequence"``, ``"tagger"``, ``"seq2seq"``, ``"bert"``)
    input_kind: str = "sequence"
    #: the family's paper(s), cited on its model cards
    citation: Citation | None = None
    #: ``config -> papers`` of the parts a config chooses (a cell type's), cited before the family's
    config_citations: Callable[[Any], tuple[Citation, ...]] = field(default=lambda config: ())
    #: ``config -> the sentence that describes its architecture`` (a model card's summary)
    architecture: Callable[[Any], str] | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: fields of the family's test configuration that differ from the tiny preset (see the module docstring)
    tiny_overrides: Mapping[str, Any] = field(default_factory=dict)
    #: config properties transformers' generic code reads, by these names (directly or via ``attribute_map``)
    common_properties: tuple[str, ...] = ("vocab_size", "hidden_size", "num_hidden_layers")
    #: the training recipe of the family (used without a preset and under every preset's entry)
    recipe: Mapping[str, Any] = field(default_factory=dict)
    #: ``{preset: recipe keys that differ from the family's}``
    preset_recipes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``{Auto class name: complete recipe}`` for heads trained with another recipe than the main head's
    task_recipes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        if self.input_kind not in INPUT_KINDS:
            raise ValueError(f"{self.name}: input_kind={self.input_kind!r}; expected one of {sorted(INPUT_KINDS)}")
        for preset in self.preset_recipes:
            if preset not in self.config_class.PRESETS:
                raise ValueError(f"{self.name}: preset_recipes names {preset!r}, which is not a preset of "
                                 f"{self.config_class.__name__}; presets: {sorted(self.config_class.PRESETS)}")
        tasks = [auto_class.__name__ for auto_class in self.heads]
        for task in self.task_recipes:
            if task not in tasks:
                raise ValueError(f"{self.name}: task_recipes names {task!r}, which is not a head of the family; "
                                 f"heads: {tasks}")

    @property
    def main_head(self) -> type:
        """The model class a preset is made for: the first head that is not the base model."""
        heads = [model for auto_class, model in self.heads.items() if auto_class.__name__ != "AutoModel"]
        return (heads or list(self.heads.values()))[0]

    def training_recipe(self, preset: str | None = None, task: str | type | None = None) -> dict[str, Any]:
        """The training recipe of ``preset`` (None: the family's): the family default with the preset's entry
        merged over it. ``task`` (an Auto class or its name) with a recipe of its own in ``task_recipes``
        (e.g. BERT fine-tuning) gives that recipe instead. Raises ValueError for an unknown preset or task."""
        if preset is not None and preset not in self.config_class.PRESETS:
            raise ValueError(f"preset={preset!r} is not a preset of the {self.name} family; presets: "
                             f"{', '.join(sorted(self.config_class.PRESETS))}")
        if task is not None:
            task = task if isinstance(task, str) else task.__name__
            tasks = [auto_class.__name__ for auto_class in self.heads]
            if task not in tasks:
                raise ValueError(f"task={task!r} is not a head of the {self.name} family; heads: {', '.join(tasks)}")
            if task in self.task_recipes:
                return merge_recipes({}, self.task_recipes[task])
        return merge_recipes(self.recipe, self.preset_recipes.get(preset, {}))

    def tiny_config(self, **overrides: Any) -> Any:
        """``ConfigClass.from_preset("tiny", ...)`` with the family's test overrides, then ``overrides``."""
        return self.config_class.from_preset("tiny", **{**self.tiny_overrides, **overrides})

    def citations(self, config: Any) -> tuple[Citation, ...]:
        """The papers behind ``config``: those of the parts it chooses, then the family's."""
        return (*self.config_citations(config), *([self.citation] if self.citation else []))

    def describe(self, config: Any) -> str:
        """The sentence that describes ``config``'s architecture (its ``model_type`` without one)."""
        return self.architecture(config) if self.architecture is not None else config.model_type

    def task_of(self, head: type) -> str:
        """The Auto class name ``head`` is registered under."""
        for auto_class, model_class in self.heads.items():
            if model_class is head:
                return auto_class.__name__
        raise ValueError(f"{head.__name__} is not a head of the {self.name} family; its heads are "
                         f"{[m.__name__ for m in self.heads.values()]}")


def parameter_count(model_class: type, config: Any) -> int:
    """The number of parameters of ``model_class(config)`` (tied ones once), built on the meta device: no
    memory is allocated, so even the largest preset costs nothing."""
    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


__all__ = ["Capabilities", "Citation", "Family", "parameter_count"]
