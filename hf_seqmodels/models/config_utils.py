"""Helpers shared by every configuration class of the package: named presets and validation.

Validation is declared, not written per class: :func:`validate_fields` checks every dataclass field of a
config against

* its **type annotation** (``int`` rejects floats and booleans, ``bool`` rejects strings and numbers, ``float``
  rejects NaN and infinities, ``X | None`` allows None, ``list[int]`` checks each item), and
* its **range**, from :data:`FIELD_RANGES` (sizes and counts positive, dropouts probabilities, ...), which a
  config class extends or overrides with its own ``FIELD_RANGES`` class attribute.

Cross-field rules (``hidden_size % num_attention_heads == 0``, token ids inside the vocabulary, choices
among names) stay in each config's ``validate_*`` methods. Every violation raises
:class:`ConfigValidationError` (a ``ValueError``) naming the config class, the field, the value and what is
allowed; :class:`PresetMixin` runs all of it when a config is built, also by ``from_pretrained``.

``save_pretrained`` of a config (thus of every model) also runs the :data:`SAVE_HOOKS` the package adds
(:func:`add_save_hook`): they write what makes the folder shareable as it is, e.g. the pipelines' code and
``custom_pipelines``. The copy saved beside the model has none: it keeps the pipelines its config declares
(:func:`keep_declared_pipelines`), so a model loaded with ``trust_remote_code=True`` and saved again (by
``Trainer.save_model`` in transformers' example scripts) still shares them.

This module is copied next to the model code by ``save_pretrained`` (remote code), so it
imports only the standard library and transformers.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from transformers.dynamic_module_utils import get_relative_imports
from transformers.utils import cached_file


class ConfigValidationError(ValueError):
    """A configuration field holds a value the model cannot be built with."""


def invalid(field: str, value: Any, allowed: str) -> ConfigValidationError:
    """Build the error every check raises: it names the field, the value received and what is allowed."""
    return ConfigValidationError(f"Invalid `{field}`={value!r}: expected {allowed}.")


def check_choice(field: str, value: Any, choices: Iterable[Any]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise invalid(field, value, "one of " + ", ".join(repr(c) for c in choices))


def check_positive(field: str, value: int | float) -> None:
    if value is None or value <= 0:
        raise invalid(field, value, "a positive number")


def check_probability(field: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value < 1.0:
        raise invalid(field, value, "a probability in [0, 1)")


def check_token_id(field: str, value: int | None, vocab_size: int) -> None:
    if value is not None and not 0 <= value < vocab_size:
        raise invalid(field, value, f"None or a token id in [0, vocab_size={vocab_size})")


# --------------------------------------------------------------------------- declared field rules

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


_TYPE_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "float": (_is_real, "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "None": (lambda v: v is None, "None"),
}


def _type_check(annotation: str) -> tuple[Callable[[Any], bool], str] | None:
    """``(accepts(value), description)`` for an annotation such as ``"int | None"`` or ``"list[int]"``; None when
    the annotation is not one of the simple forms configs use (then the type is not checked here)."""
    options = []
    for part in (p.strip() for p in _split_union(annotation)):
        container = re.fullmatch(r"(list|tuple)\[(\w+)(?:, \.\.\.)?\]", part)
        if container:
            kind, item = container.groups()
            if item not in _TYPE_CHECKS:
                return None
            item_ok, item_text = _TYPE_CHECKS[item]
            options.append((lambda v, ok=item_ok: isinstance(v, (list, tuple)) and all(ok(i) for i in v),
                            f"a list of {item_text.removeprefix('an ').removeprefix('a ')}s"))
        elif part in _TYPE_CHECKS:
            options.append(_TYPE_CHECKS[part])
        else:
            return None
    if any(text == "a finite number" for _, text in options):  # `float | int` reads as one kind
        options = [o for o in options if o[1] != "an integer"]
    return (lambda v: any(ok(v) for ok, _ in options)), " or ".join(text for _, text in options)


def _split_union(annotation: str) -> list[str]:
    """``"int | list[int] | None"`` -> ``["int", "list[int]", "None"]`` (``|`` inside brackets kept)."""
    parts, depth, current = [], 0, ""
    for char in annotation:
        depth += char == "["
        depth -= char == "]"
        if char == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


#: Ranges by field name, for the fields several configs of the package share (a class adds its own fields' and
#: overrides entries with its own ``FIELD_RANGES``: :func:`field_ranges`): ``"positive"`` (> 0), ``"non_negative"`` (>= 0), ``"probability"`` ([0, 1)).
#: None values are the type rule's business (``X | None``), not the range's.
FIELD_RANGES: dict[str, str] = {
    **dict.fromkeys(("vocab_size", "source_vocab_size", "type_vocab_size", "hidden_size", "embedding_size",
                     "encoder_hidden_size", "attention_hidden_size", "intermediate_size", "d_model",
                     "num_hidden_layers", "num_attention_heads", "encoder_layers", "decoder_layers",
                     "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
                     "max_position_embeddings",
                     "char_embedding_size", "char_hidden_size", "char_kernel_size", "char_max_word_length",
                     "init_range", "initializer_range", "layer_norm_eps",
                     # word embeddings and n-grams
                     "vector_size", "window", "epochs", "batch_size", "chunk_words",
                     "order", "x_max", "alpha", "learning_rate", "k"), "positive"),
    **dict.fromkeys(("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "dropout",
                     "attention_dropout", "activation_dropout", "label_smoothing"), "probability"),
    **dict.fromkeys(("negative", "sample", "min_learning_rate_ratio", "power_iterations", "seed",
                     "noise_power"), "non_negative"),
}

_RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "positive": (lambda v: v > 0, "a positive number"),
    "non_negative": (lambda v: v >= 0, "a number >= 0"),
    "probability": (lambda v: 0 <= v < 1, "a probability in [0, 1)"),
}


def field_ranges(config_class: type) -> dict[str, str]:
    """The range rule of every field of ``config_class`` that has one: :data:`FIELD_RANGES` updated by the
    class's own ``FIELD_RANGES``."""
    return {**FIELD_RANGES, **getattr(config_class, "FIELD_RANGES", {})}


def validate_fields(config: Any, skip: Iterable[str] = ()) -> None:
    """Check every dataclass field of ``config`` against its type annotation and its declared range (see the
    module docstring); raises :class:`ConfigValidationError` for the first field that breaks a rule."""
    ranges = field_ranges(type(config))
    skipped = set(skip)
    for field in dataclasses.fields(config):
        if field.name in skipped or not hasattr(config, field.name):
            continue
        value = getattr(config, field.name)
        check = _type_check(field.type) if isinstance(field.type, str) else None
        if check is not None and not check[0](value):
            raise _invalid_field(config, field.name, value, check[1])
        if value is None or field.name not in ranges:
            continue
        accepts, text = _RANGES[ranges[field.name]]
        if ranges[field.name] == "positive" and "float" not in str(field.type):
            text = "an integer >= 1"
        several = isinstance(value, (list, tuple))
        if not all(_is_real(i) and accepts(i) for i in (value if several else [value])):
            raise _invalid_field(config, field.name, value, text + (" for every item" if several else ""))
    _validate_token_ids(config, skipped)


def _validate_token_ids(config: Any, skipped: set[str]) -> None:
    """Every ``*_token_id`` field (an id or a list of ids, as ``eos_token_id`` may be) lies in
    ``[0, vocab_size)`` when the config has a vocabulary size."""
    vocab_size = getattr(config, "vocab_size", None)
    known = _is_int(vocab_size) and vocab_size >= 1  # else (a vocabulary not built yet) only ids >= 0
    allowed = f"None or a token id in [0, vocab_size={vocab_size})" if known else "None or a token id >= 0"
    for field in dataclasses.fields(config):
        value = getattr(config, field.name, None)
        if not field.name.endswith("_token_id") or field.name in skipped or value is None:
            continue
        ids = value if isinstance(value, (list, tuple)) else [value]
        if not all(_is_int(i) and 0 <= i and (not known or i < vocab_size) for i in ids):
            raise _invalid_field(config, field.name, value, allowed)


def _invalid_field(config: Any, field: str, value: Any, allowed: str) -> ConfigValidationError:
    return ConfigValidationError(f"{type(config).__name__}: {invalid(field, value, allowed)}")


def _defined_in_package(function: Any) -> bool:
    """Whether ``function`` was written in this package (not inherited from transformers)."""
    module = getattr(function, "__module__", "") or ""
    return not module.startswith(("transformers", "huggingface_hub"))


#: ``hook(config, save_directory) -> dict`` run by every ``save_pretrained`` of a config before it writes
#: ``config.json`` (the folder exists then): it may write files and returns the fields to write with the config
#: (a field set to None is left out), which the config in memory does not keep.
SAVE_HOOKS: list[Callable[[Any, str], dict[str, Any]]] = []


def add_save_hook(hook: Callable[[Any, str], dict[str, Any]]) -> None:
    """Run ``hook`` at every ``save_pretrained`` of the package's configs and models (see :data:`SAVE_HOOKS`)."""
    if hook not in SAVE_HOOKS:
        SAVE_HOOKS.append(hook)


def keep_declared_pipelines(config: Any, save_directory: str) -> dict[str, Any]:
    """The save hook where no package hook is registered (this module saved beside a model): the modules that
    ``config.custom_pipelines`` names are copied, with their relative imports, from the folder or Hub repository
    the config was loaded from (``name_or_path``). An entry whose code is not found there is left out, and a
    ``custom_pipelines`` that is not a dict of entries is written as none."""
    declared = getattr(config, "custom_pipelines", None)
    if not isinstance(declared, dict):
        return {} if declared is None else {"custom_pipelines": None}
    source = getattr(config, "name_or_path", None)
    kept = {task: entry for task, entry in declared.items()
            if source and _copy_module(source, _module_of(entry), save_directory, set())}
    return {"custom_pipelines": kept or None}


def _module_of(entry: Any) -> str | None:
    """``"pipelines"`` for the entry ``{"impl": "pipelines.TranslationPipeline", ...}`` (or ``"repo--pipelines.…"``)."""
    implementation = entry.get("impl") if isinstance(entry, dict) else None
    if not isinstance(implementation, str) or "." not in implementation:
        return None
    return implementation.split("--")[-1].rsplit(".", 1)[0]


def _copy_module(source: str, module: str | None, save_directory: str, copied: set[str]) -> bool:
    """Copy ``module.py`` of ``source`` (a folder or Hub repository) and the sibling modules it imports into
    ``save_directory``; whether all of them were found."""
    if module is None:
        return False
    if module in copied:
        return True
    try:
        path = cached_file(source, f"{module}.py")
    except OSError:
        return False
    if path is None:
        return False
    target = os.path.join(save_directory, f"{module}.py")
    if not (os.path.exists(target) and os.path.samefile(path, target)):
        shutil.copyfile(path, target)
    copied.add(module)
    return all(_copy_module(source, name, save_directory, copied) for name in get_relative_imports(path))


class PresetMixin:
    """Adds ``from_preset(name, **overrides)`` and the family's ``auto_map`` to a configuration class.

    Subclasses list their presets in ``PRESETS``: a mapping from a name (``"tiny"``,
    ``"zaremba-medium"``, ...) to the keyword arguments that differ from the class defaults.
    ``AUTO_MAP`` (filled by the package's registry) names every head of the family, so a saved
    config lets ``trust_remote_code=True`` load any of them, not just the class that was saved.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}
    AUTO_MAP: ClassVar[dict[str, str] | None] = None

    #: Fields that :func:`validate_fields` leaves alone (transformers' own fields it handles itself).
    UNCHECKED_FIELDS: ClassVar[tuple[str, ...]] = ("id2label", "label2id", "dtype", "architectures", "auto_map",
                                                    "problem_type", "tokenizer_class", "task_specific_params")

    def __init_subclass__(cls, **kwargs):
        """Make the field rules run first: before the ``__post_init__`` of the most derived class derives
        anything (``embedding_size = hidden_size``, ...), so an error names the field the user gave."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__post_init__")
        if own is None or getattr(own, "validates_fields_first", False):
            return

        @functools.wraps(own)
        def __post_init__(self, *args, **kw):
            outermost = type(self).__post_init__ is __post_init__
            if outermost:
                validate_fields(self, skip=self.UNCHECKED_FIELDS)
            try:
                own(self, *args, **kw)
            except ConfigValidationError as error:
                if not outermost or str(error).startswith(f"{type(self).__name__}: "):
                    raise
                raise ConfigValidationError(f"{type(self).__name__}: {error}") from None

        __post_init__.validates_fields_first = True
        cls.__post_init__ = __post_init__

    def __post_init__(self, **kwargs):
        if type(self).__post_init__ is PresetMixin.__post_init__:  # no subclass has a __post_init__ of its own
            validate_fields(self, skip=self.UNCHECKED_FIELDS)
        if getattr(self, "id2label", None) is None and getattr(self, "label2id", None):
            # only label2id given: transformers would replace it by LABEL_0, LABEL_1, ...
            self.id2label = {int(i): label for label, i in self.label2id.items()}
        super().__post_init__(**kwargs)
        self._complete_label2id()
        if self.AUTO_MAP and getattr(self, "auto_map", None) is None:
            self.auto_map = dict(self.AUTO_MAP)
        self._run_own_validators()

    def _run_own_validators(self) -> None:
        """Run the config's cross-field ``validate_*`` rules now, so that their :class:`ConfigValidationError`
        reaches the caller as it is (huggingface_hub's strict dataclasses run them again later and would wrap
        it in an exception that is not a ``ValueError``)."""
        for name in dir(type(self)):
            method = getattr(type(self), name, None)
            if name.startswith("validate_") and callable(method) and _defined_in_package(method):
                try:
                    method(self)
                except ValueError as error:  # ConfigValidationError, or a ValueError of a helper it calls
                    raise ConfigValidationError(f"{type(self).__name__}: {error}") from None

    def _complete_label2id(self) -> None:
        """Keep ``label2id`` the inverse of ``id2label`` (transformers leaves it None when only ``id2label``
        is given, and its example scripts read it); a given ``label2id`` that disagrees is refused."""
        id2label = getattr(self, "id2label", None)
        if id2label is None:
            return
        inverse = {label: int(i) for i, label in id2label.items()}
        if len(inverse) != len(id2label):
            raise invalid("id2label", id2label, "a mapping from ids to distinct label names")
        given = getattr(self, "label2id", None)
        if not given:
            self.label2id = inverse
        elif {label: int(i) for label, i in given.items()} != inverse:
            raise invalid("label2id", given, f"the inverse of id2label={id2label!r}")
        # else: kept as given (transformers keeps e.g. {"label": "0"} as it was written)

    def save_pretrained(self, save_directory, *args: Any, **kwargs: Any):
        """``PreTrainedConfig.save_pretrained`` with the fields and files of the :data:`SAVE_HOOKS` (without
        any: :func:`keep_declared_pipelines`)."""
        if os.path.isfile(save_directory):
            return super().save_pretrained(save_directory, *args, **kwargs)
        os.makedirs(save_directory, exist_ok=True)
        fields: dict[str, Any] = {}
        for hook in SAVE_HOOKS or [keep_declared_pipelines]:
            fields.update(hook(self, str(save_directory)))
        kept = {name: self.__dict__[name] for name in fields if name in self.__dict__}
        try:
            for name, value in fields.items():
                if value is None:
                    self.__dict__.pop(name, None)
                else:
                    setattr(self, name, value)
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            for name in fields:
                self.__dict__.pop(name, None)
            self.__dict__.update(kept)

    @classmethod
    def available_presets(cls) -> list[str]:
        return sorted(cls.PRESETS)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any):
        """Build the configuration named ``name``; keyword arguments override single fields."""
        if name not in cls.PRESETS:
            raise invalid("preset", name, f"one of {', '.join(cls.available_presets())} for {cls.__name__}")
        return cls(**{**cls.PRESETS[name], **overrides})
