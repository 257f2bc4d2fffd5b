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

#: ``config -> {output field: number of tensors}``, e.g. ``{"hidden_states": num_layers + 1}``.
OutputCounts = Callable[[Any], dict[str, int]]

#: the optimizers a recipe names (``TrainingArguments.optim`` values)
RECIPE_OPTIMIZERS = ("sgd", "adamw_torch", "adamw_torch_fused")
#: the learning-rate schedules a recipe names: transformers' ``constant``, ``linear``, ``cosine`` and ours,
#: ``zaremba`` (constant, then times ``decay_factor`` each epoch from ``decay_start_epoch`` on) and ``noam``
#: (Vaswani et al. 2017: ``learning_rate * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)``)
RECIPE_SCHEDULES = ("constant", "linear", "cosine", "zaremba", "noam")
#: recipe keys that are not ``TrainingArguments`` fields: the LM's training context and window order, and the
#: zaremba decay
RECIPE_TASK_KEYS = ("bptt", "shuffle_windows", "decay_start_epoch", "decay_factor")
_SCHEDULE_KEYS = {"zaremba": ("decay_start_epoch", "decay_factor")}
_ADAM_KEYS = ("adam_beta1", "adam_beta2", "adam_epsilon")
#: plausible peak learning rates per optimizer (noam: the peak its factor reaches, see :func:`peak_learning_rate`)
_LEARNING_RATE_RANGES = {"sgd": (1e-3, 50.0), "adamw_torch": (1e-6, 1e-2), "adamw_torch_fused": (1e-6, 1e-2)}
#: the order in which a recipe lists its keys (others follow in their own order)
_RECIPE_ORDER = ("optim", "learning_rate", *_ADAM_KEYS, "lr_scheduler_type", "lr_scheduler_kwargs", "decay_start_epoch",
                 "decay_factor",
                 "warmup_steps", "weight_decay", "max_grad_norm", "per_device_train_batch_size",
                 "gradient_accumulation_steps", "bptt", "num_train_epochs", "max_steps")


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


# ----------------------------------------------------------------------------------------- recipes ----

def merge_recipes(base: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``entry`` (a new dict, keys in a fixed order); keys of ``base`` that only mean
    something for an optimizer or schedule that ``entry`` replaces (``adam_*`` when it switches to SGD,
    ``decay_*`` when it leaves ``zaremba``) go."""
    merged = dict(base)
    if entry.get("optim", merged.get("optim")) == "sgd":
        for key in _ADAM_KEYS:
            merged.pop(key, None)
    if entry.get("lr_scheduler_type", merged.get("lr_scheduler_type")) != merged.get("lr_scheduler_type"):
        for key in _SCHEDULE_KEYS.get(merged.get("lr_scheduler_type"), ()):
            merged.pop(key, None)
    merged.update(entry)
    rank = {key: i for i, key in enumerate(_RECIPE_ORDER)}
    return dict(sorted(merged.items(), key=lambda item: rank.get(item[0], len(rank))))


def peak_learning_rate(recipe: Mapping[str, Any], d_model: int | None = None) -> float:
    """The largest learning rate the recipe's schedule reaches: ``learning_rate``, except for ``noam``, where
    ``learning_rate`` scales ``d_model^-0.5 * warmup_steps^-0.5`` (reached at the end of the warm-up)."""
    learning_rate = float(recipe.get("learning_rate", 5e-5))
    if recipe.get("lr_scheduler_type") != "noam":
        return learning_rate
    if d_model is None:
        raise ValueError("peak_learning_rate: the noam schedule needs d_model (the model width)")
    return learning_rate * d_model**-0.5 * max(recipe.get("warmup_steps", 1), 1) ** -0.5


def recipe_problems(recipe: Mapping[str, Any], d_model: int | None = None) -> list[str]:
    """What is wrong with ``recipe`` (empty when nothing): keys that are neither ``TrainingArguments`` fields
    nor :data:`RECIPE_TASK_KEYS`, unknown optimizers or schedules, a peak learning rate outside what its
    optimizer trains with, keys of another optimizer or schedule, out-of-range values."""
    import dataclasses

    from transformers import TrainingArguments

    known = {f.name for f in dataclasses.fields(TrainingArguments)} | set(RECIPE_TASK_KEYS)
    problems = [f"{key!r} is neither a TrainingArguments field nor one of {RECIPE_TASK_KEYS}"
                for key in recipe if key not in known]
    optim, schedule = recipe.get("optim"), recipe.get("lr_scheduler_type")
    if optim not in RECIPE_OPTIMIZERS:
        problems.append(f"optim={optim!r}: expected one of {RECIPE_OPTIMIZERS}")
    if schedule not in RECIPE_SCHEDULES:
        problems.append(f"lr_scheduler_type={schedule!r}: expected one of {RECIPE_SCHEDULES}")
    if optim in _LEARNING_RATE_RANGES and (schedule != "noam" or d_model is not None):
        low, high = _LEARNING_RATE_RANGES[optim]
        peak = peak_learning_rate(recipe, d_model)
        if not low <= peak <= high:
            problems.append(f"peak learning rate {peak:g} with optim={optim!r}: expected {low:g} to {high:g}")
    if optim == "sgd":
        problems += [f"{key!r} is an Adam setting, but optim='sgd'" for key in _ADAM_KEYS if key in recipe]
    for name, keys in _SCHEDULE_KEYS.items():
        if schedule == name:
            problems += [f"lr_scheduler_type={name!r} needs {key!r}" for key in keys if key not in recipe]
        else:
            problems += [f"{key!r} belongs to the {name!r} schedule, not {schedule!r}" for key in keys if key in recipe]
    if schedule == "noam" and not recipe.get("warmup_steps", 0) >= 1:
        problems.append("lr_scheduler_type='noam' needs warmup_steps >= 1")
    if not 0 < recipe.get("decay_factor", 1.0) <= 1:
        problems.append(f"decay_factor={recipe['decay_factor']!r}: expected a factor in (0, 1]")
    for key in ("per_device_train_batch_size", "bptt", "gradient_accumulation_steps"):
        if key in recipe and (not isinstance(recipe[key], int) or recipe[key] < 1):
            problems.append(f"{key}={recipe[key]!r}: expected an integer >= 1")
    for key in ("weight_decay", "max_grad_norm", "warmup_steps", "num_train_epochs"):
        if key in recipe and not recipe[key] >= 0:
            problems.append(f"{key}={recipe[key]!r}: expected a number >= 0")
    return problems


def parameter_count(model_class: type, config: Any) -> int:
    """The number of parameters of ``model_class(config)`` (tied ones once), built on the meta device: no
    memory is allocated, so even the largest preset costs nothing."""
    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


__all__ = ["Capabilities", "Citation", "Family", "RECIPE_OPTIMIZERS", "RECIPE_SCHEDULES", "RECIPE_TASK_KEYS",
           "merge_recipes", "parameter_count", "peak_learning_rate", "recipe_problems"]
