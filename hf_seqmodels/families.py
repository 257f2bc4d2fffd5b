"""What the package knows about each model family, in one place.

A :class:`Family` names its configuration class, the model class for each transformers Auto class, its tiny
configuration, how to make forward inputs (and labels) for each head, how many hidden-state and attention
tensors its forward returns, and what it can do (:class:`Capabilities`). The registry
(:mod:`hf_seqmodels.registry`) builds the Auto-class registration from these descriptions, and the
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
from typing import Any

import torch

from .recipes import merge_recipes

#: ``(config, task, batch_size, seq_length, generator) -> forward kwargs``; ``task`` is the Auto class name
#: of the head (``"AutoModel"`` for the base model: no labels).
InputMaker = Callable[[Any, str, int, int, torch.Generator], dict[str, torch.Tensor]]
#: ``config -> {output field: number of tensors}``, e.g. ``{"hidden_states": num_layers + 1}``.
OutputCounts = Callable[[Any], dict[str, int]]

#: the forward arguments that are labels (the Trainer's ``label_names`` of our heads)
LABEL_NAMES = ("labels", "next_sentence_label", "start_positions", "end_positions")
FIRST_REGULAR_ID = 4  # ids 0-3 are <pad>, <unk>, <bos>, <eos> in every tiny preset


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


@dataclass(frozen=True)
class Family:
    """One model family: see the module docstring. ``heads`` maps each transformers Auto class to its model
    class (``AutoModel`` to the base model)."""

    name: str
    config_class: type
    heads: Mapping[type, type]
    make_inputs: InputMaker
    hidden_states: OutputCounts
    attentions: OutputCounts = field(default=lambda config: {})
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

    def inputs(self, config: Any, head: type, batch_size: int = 2, seq_length: int = 7, seed: int = 0,
               labels: bool = True) -> dict[str, torch.Tensor]:
        """Forward kwargs for the model class ``head`` of this family: ``(batch_size, seq_length)`` ids
        (seeded) with an all-ones mask, and the head's labels unless ``labels=False``."""
        generator = torch.Generator().manual_seed(seed)
        kwargs = self.make_inputs(config, self.task_of(head), batch_size, seq_length, generator)
        if not labels:
            kwargs = {k: v for k, v in kwargs.items() if k not in LABEL_NAMES}
        return kwargs

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


# ------------------------------------------------------------------------------------------ inputs ----

def random_ids(generator: torch.Generator, shape: tuple[int, ...], vocab_size: int) -> torch.LongTensor:
    """Ids in ``[FIRST_REGULAR_ID, vocab_size)``: never a special token."""
    return torch.randint(FIRST_REGULAR_ID, vocab_size, shape, generator=generator)


def task_labels(task: str, config: Any, inputs: dict[str, torch.Tensor],
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Labels for the head registered under the Auto class named ``task``, shaped for ``inputs``."""
    ids = inputs["input_ids"]
    batch, length = ids.shape[0], ids.shape[-1]
    if task == "AutoModelForCausalLM":
        return {"labels": ids.clone()}
    if task == "AutoModelForSeq2SeqLM":
        return {"labels": random_ids(generator, tuple(inputs["decoder_input_ids"].shape), config.vocab_size)}
    if task == "AutoModelForSequenceClassification":
        return {"labels": torch.randint(config.num_labels, (batch,), generator=generator)}
    if task == "AutoModelForTokenClassification":
        return {"labels": torch.randint(config.num_labels, (batch, length), generator=generator)}
    if task in ("AutoModelForMaskedLM", "AutoModelForPreTraining"):
        chosen = torch.rand(ids.shape, generator=generator) < 0.3
        chosen[:, 1] = True  # at least one target per row
        labels = {"labels": ids.masked_fill(~chosen, -100)}
        if task == "AutoModelForPreTraining":
            labels["next_sentence_label"] = torch.randint(2, (batch,), generator=generator)
        return labels
    if task == "AutoModelForNextSentencePrediction":
        return {"labels": torch.randint(2, (batch,), generator=generator)}
    if task == "AutoModelForQuestionAnswering":
        return {"start_positions": torch.randint(length, (batch,), generator=generator),
                "end_positions": torch.randint(length, (batch,), generator=generator)}
    if task == "AutoModelForMultipleChoice":
        return {"labels": torch.randint(ids.shape[1], (batch,), generator=generator)}
    if task == "AutoModel":
        return {}
    raise ValueError(f"No labels known for task {task!r}")


def sequence_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """One sequence per row: ``input_ids``, ``attention_mask`` (all ones) and the task's labels."""
    ids = random_ids(generator, (batch, length), config.vocab_size)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return {**inputs, **task_labels(task, config, inputs, generator)}


def char_ids_of(config: Any, input_ids: torch.LongTensor, generator: torch.Generator) -> torch.LongTensor:
    """``(batch, time, char_max_word_length)`` character ids for ``input_ids``: a random spelling per token
    id (the same token always has the same characters), 1 to ``char_max_word_length`` characters from
    ``config.char_vocab`` (ids 2, 3, ...), right-padded with 0, as a tokenizer's ``char_input_ids`` are."""
    longest = config.char_max_word_length
    spellings = torch.randint(2, len(config.char_vocab) + 2, (config.vocab_size, longest), generator=generator)
    lengths = torch.randint(1, longest + 1, (config.vocab_size, 1), generator=generator)
    spellings = spellings.masked_fill(torch.arange(longest) >= lengths, 0)  # (V, L)
    return spellings[input_ids]


def tagger_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """As :func:`sequence_inputs`; tags are ``O`` (0) or ``B-X`` (1), always a valid BIO sequence. With a
    character encoder, ``char_input_ids`` too (:func:`char_ids_of`), as a caller may pass them for words the
    vocabulary lacks, and must with ``inputs_embeds`` (characters cannot be read from word vectors)."""
    inputs = sequence_inputs(config, "AutoModel", batch, length, generator)
    if getattr(config, "char_encoder", None):
        inputs["char_input_ids"] = char_ids_of(config, inputs["input_ids"], generator)
    if task == "AutoModelForTokenClassification":
        inputs["labels"] = torch.randint(2, (batch, length), generator=generator)
    return inputs


def seq2seq_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """A source of ``length`` tokens and a target of ``length - 2`` (different lengths catch transposed
    shapes): ``decoder_input_ids`` starts with ``decoder_start_token_id``; ``labels`` for the LM head."""
    source = random_ids(generator, (batch, length), getattr(config, "source_vocab_size", None) or config.vocab_size)
    target = random_ids(generator, (batch, max(length - 2, 2)), config.vocab_size)
    start = torch.full((batch, 1), config.decoder_start_token_id, dtype=torch.long)
    inputs = {"input_ids": source, "attention_mask": torch.ones_like(source),
              "decoder_input_ids": torch.cat([start, target[:, :-1]], dim=1)}
    if task == "AutoModelForSeq2SeqLM":
        inputs["labels"] = target
    return inputs


def bert_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """Two segments per row (``token_type_ids`` 0 then 1); for multiple choice, two choices per row:
    every tensor ``(batch, 2, length)``."""
    ids = random_ids(generator, (batch, length), config.vocab_size)
    token_type_ids = (torch.arange(length) >= length // 2).long().expand(batch, -1).clone()
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": token_type_ids}
    if task == "AutoModelForMultipleChoice":
        inputs = {k: torch.stack([v, v.roll(1, dims=0)], dim=1) for k, v in inputs.items()}
    return {**inputs, **task_labels(task, config, inputs, generator)}


__all__ = ["Capabilities", "Family", "FIRST_REGULAR_ID", "LABEL_NAMES", "bert_inputs", "char_ids_of", "parameter_count",
           "random_ids", "seq2seq_inputs", "sequence_inputs", "tagger_inputs", "task_labels"]
