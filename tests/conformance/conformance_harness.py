"""The cases of the conformance tests, built from the package's family descriptions alone.

Every test module asks :func:`cases` for the heads a contract applies to; :data:`KNOWN_GAPS` (the one
table of contracts a family or head does not meet yet) turns a case into ``xfail(strict=True)``, so fixing
the gap makes the test XPASS and fail until its entry is removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from known_gaps import KNOWN_GAPS
from model_inputs import model_inputs

import hf_seqmodels  # noqa: F401  (registers the families)
from hf_seqmodels.families import Family
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS


@dataclass(frozen=True)
class HeadCase:
    """One model class of one family, with the Auto class it is registered under."""

    family: Family
    auto_class: type
    model_class: type

    @property
    def name(self) -> str:
        return self.model_class.__name__

    @property
    def task(self) -> str:
        return self.auto_class.__name__

    @property
    def caps(self):
        return self.family.capabilities

    @property
    def is_base(self) -> bool:
        return self.task == "AutoModel"

    @property
    def can_generate(self) -> bool:
        return self.model_class.can_generate()

    @property
    def has_labels(self) -> bool:
        return not self.is_base

    def config(self, **overrides):
        return self.family.tiny_config(**overrides)

    def model(self, config=None, seed: int = 0, **overrides):
        """A seeded model in eval mode (``overrides`` go to the tiny config)."""
        torch.manual_seed(seed)
        return self.model_class(config if config is not None else self.config(**overrides)).eval()

    def inputs(self, config, batch_size: int = 2, seq_length: int = 7, seed: int = 0, labels: bool = True):
        return model_inputs(self.family, config, self.model_class, batch_size, seq_length, seed, labels)


ALL_CASES = [HeadCase(family, auto_class, model_class) for family in FAMILY_DESCRIPTIONS
             for auto_class, model_class in family.heads.items()]


def gap_reason(case: HeadCase | Family, contract: str) -> str | None:
    """The KNOWN_GAPS reason for ``contract`` on this head (by class name) or its family (by name)."""
    family = case if isinstance(case, Family) else case.family
    names = [family.name] if isinstance(case, Family) else [case.name, family.name]
    for name in names:
        if (name, contract) in KNOWN_GAPS:
            return KNOWN_GAPS[(name, contract)]
    return None


def cases(contract: str, where: Callable[[HeadCase], bool] = lambda case: True) -> list:
    """``pytest.param`` per head the contract applies to (``where``), xfail(strict) where a gap is known."""
    params = []
    for case in ALL_CASES:
        if not where(case):
            continue
        reason = gap_reason(case, contract)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


def family_cases(contract: str, where: Callable[[Family], bool] = lambda family: True) -> list:
    """As :func:`cases`, one per family."""
    params = []
    for family in FAMILY_DESCRIPTIONS:
        if not where(family):
            continue
        reason = gap_reason(family, contract)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(family, id=family.name, marks=marks))
    return params


def main_output(output) -> torch.Tensor:
    """The tensor a head is about: ``logits``, else ``last_hidden_state``, else QA's ``start_logits``."""
    for key in ("logits", "prediction_logits", "start_logits", "last_hidden_state"):
        value = output.get(key) if hasattr(output, "get") else None
        if value is not None:
            return value
    raise AssertionError(f"no main output among {list(output.keys())}")


def tensors_of(output) -> dict[str, torch.Tensor]:
    """Every tensor field of a ModelOutput (nested tuples flattened to ``name.i``)."""
    flat = {}
    for key, value in output.items():
        if torch.is_tensor(value):
            flat[key] = value
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if torch.is_tensor(item):
                    flat[f"{key}.{i}"] = item
    return flat


def assert_outputs_close(a, b, atol: float = 1e-5, rtol: float = 1e-4, msg: str = "") -> None:
    ta, tb = tensors_of(a), tensors_of(b)
    assert ta.keys() == tb.keys(), f"{msg}: fields differ {sorted(ta)} vs {sorted(tb)}"
    for key in ta:
        torch.testing.assert_close(ta[key], tb[key], atol=atol, rtol=rtol, msg=lambda m, k=key: f"{msg} {k}: {m}")
