"""Helpers shared by every configuration class of the package: named presets and validation.

This module is copied next to the model code by ``save_pretrained`` (remote code), so it
imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar


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


class PresetMixin:
    """Adds ``from_preset(name, **overrides)`` and the family's ``auto_map`` to a configuration class.

    Subclasses list their presets in ``PRESETS``: a mapping from a name (``"tiny"``,
    ``"zaremba-medium"``, ...) to the keyword arguments that differ from the class defaults.
    ``AUTO_MAP`` (filled by the package's registry) names every head of the family, so a saved
    config lets ``trust_remote_code=True`` load any of them, not just the class that was saved.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}
    AUTO_MAP: ClassVar[dict[str, str] | None] = None

    def __post_init__(self, **kwargs):
        if getattr(self, "id2label", None) is None and getattr(self, "label2id", None):
            # only label2id given: transformers would replace it by LABEL_0, LABEL_1, ...
            self.id2label = {int(i): label for label, i in self.label2id.items()}
        super().__post_init__(**kwargs)
        self._complete_label2id()
        if self.AUTO_MAP and getattr(self, "auto_map", None) is None:
            self.auto_map = dict(self.AUTO_MAP)

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
        if given and {label: int(i) for label, i in given.items()} != inverse:
            raise invalid("label2id", given, f"the inverse of id2label={id2label!r}")
        self.label2id = inverse

    @classmethod
    def available_presets(cls) -> list[str]:
        return sorted(cls.PRESETS)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any):
        """Build the configuration named ``name``; keyword arguments override single fields."""
        if name not in cls.PRESETS:
            raise invalid("preset", name, f"one of {', '.join(cls.available_presets())} for {cls.__name__}")
        return cls(**{**cls.PRESETS[name], **overrides})
