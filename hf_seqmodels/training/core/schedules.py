"""Learning-rate schedules as ``LambdaLR`` factors: ``lr(step) = learning_rate * factor(step)``.

``step`` counts optimizer updates (0 for the first update), so a schedule is exact when training
resumes in the middle of an epoch. Five schedules (``lr_scheduler_type``; the keyword arguments of
``lr_scheduler_kwargs`` in brackets; :mod:`hf_seqmodels.recipes` names them):

* ``"linear"`` (transformers' default): from 1 after warmup down to 0 at ``total_steps``.

* ``"zaremba"`` (Zaremba et al. 2014) [``decay_start_epoch``, ``decay_factor``]: constant for ``decay_start_epoch`` epochs, then multiplied
  by ``decay_factor`` at the start of every further epoch:
  ``factor = decay_factor ** max(0, epoch - decay_start_epoch + 1)`` with ``epoch = step // steps_per_epoch``
  (0-based). The "small" setup (lr 1, 4 epochs constant, then halve) is
  ``decay_start_epoch=4, decay_factor=0.5``.
* ``"cosine"`` [``min_lr_ratio``]: ``factor = min_lr_ratio + (1 - min_lr_ratio) * (1 + cos(pi * progress)) / 2`` where
  ``progress`` runs from 0 after warmup to 1 at ``total_steps``.
* ``"noam"`` (Vaswani et al. 2017, eq. 3): ``factor = d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)``
  with ``s = step + 1``; the learning rate rises linearly for ``warmup_steps`` updates, then falls
  as the inverse square root of the step. ``learning_rate`` scales it (the paper uses 1).
* ``"constant"``: ``factor = 1``.

Warmup multiplies the factor by ``step / warmup_steps`` for ``step < warmup_steps`` (``"noam"`` has
its own warmup built in).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR

from ...models.config_utils import invalid as _invalid
from ...recipes import SCHEDULES

LRFactor = Callable[[int], float]


def _check_non_negative_int(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(field, value, "an integer >= 0")


def with_warmup(factor: LRFactor, warmup_steps: int) -> LRFactor:
    """``factor`` multiplied by a linear ramp ``step / warmup_steps`` during the first steps."""
    _check_non_negative_int("warmup_steps", warmup_steps)
    if warmup_steps == 0:
        return factor

    def warmed(step: int) -> float:
        ramp = min(1.0, step / warmup_steps)
        return ramp * factor(step)

    return warmed


def constant_factor() -> LRFactor:
    """``factor(step) = 1``."""
    return lambda step: 1.0


def zaremba_factor(steps_per_epoch: int, decay_start_epoch: int, decay_factor: float) -> LRFactor:
    """Constant for ``decay_start_epoch`` epochs, then ``× decay_factor`` per epoch."""
    if isinstance(steps_per_epoch, bool) or not isinstance(steps_per_epoch, int) or steps_per_epoch < 1:
        raise _invalid("steps_per_epoch", steps_per_epoch, "an integer >= 1")
    _check_non_negative_int("decay_start_epoch", decay_start_epoch)
    if not 0.0 < decay_factor <= 1.0:
        raise _invalid("decay_factor", decay_factor, "a number in (0, 1]")

    def factor(step: int) -> float:
        epoch = step // steps_per_epoch
        return decay_factor ** max(0, epoch - decay_start_epoch + 1)

    return factor


def linear_factor(total_steps: int, warmup_steps: int = 0) -> LRFactor:
    """From 1 (after warmup) linearly down to 0 at ``total_steps`` (transformers' ``"linear"``)."""
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise _invalid("total_steps", total_steps, "an integer >= 1")
    _check_non_negative_int("warmup_steps", warmup_steps)
    decay_steps = max(1, total_steps - warmup_steps)
    return lambda step: max(0.0, 1.0 - max(0, step - warmup_steps) / decay_steps)


def cosine_factor(total_steps: int, warmup_steps: int = 0, min_lr_ratio: float = 0.0) -> LRFactor:
    """Half a cosine from 1 (after warmup) to ``min_lr_ratio`` at ``total_steps``; flat afterwards."""
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise _invalid("total_steps", total_steps, "an integer >= 1")
    _check_non_negative_int("warmup_steps", warmup_steps)
    if warmup_steps >= total_steps:
        raise _invalid("warmup_steps", warmup_steps, f"fewer than the total number of steps ({total_steps})")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise _invalid("min_lr_ratio", min_lr_ratio, "a number in [0, 1]")
    decay_steps = total_steps - warmup_steps

    def factor(step: int) -> float:
        progress = min(1.0, max(0, step - warmup_steps) / decay_steps)
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def noam_factor(d_model: int, warmup_steps: int) -> LRFactor:
    """``d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)`` at update ``s = step + 1``."""
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
        raise _invalid("d_model", d_model, "the model width, an integer >= 1 (from config.d_model or hidden_size)")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 1:
        raise _invalid("warmup_steps", warmup_steps, "an integer >= 1 for the noam schedule (the paper uses 4000)")

    def factor(step: int) -> float:
        s = step + 1
        return d_model**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)

    return factor


def lr_factor(
    name: str,
    *,
    total_steps: int,
    steps_per_epoch: int,
    warmup_steps: int = 0,
    decay_start_epoch: int = 4,
    decay_factor: float = 0.5,
    min_lr_ratio: float = 0.0,
    d_model: int | None = None,
) -> LRFactor:
    """The factor function of schedule ``name`` (one of :data:`hf_seqmodels.recipes.SCHEDULES`), warmup included."""
    if name == "linear":
        base = linear_factor(total_steps, warmup_steps)
    elif name == "zaremba":
        base = zaremba_factor(steps_per_epoch, decay_start_epoch, decay_factor)
    elif name == "cosine":
        base = cosine_factor(total_steps, warmup_steps, min_lr_ratio)
    elif name == "noam":
        return noam_factor(d_model, warmup_steps)
    elif name == "constant":
        base = constant_factor()
    else:
        raise _invalid("lr_scheduler_type", name, "one of " + ", ".join(repr(s) for s in SCHEDULES))
    return with_warmup(base, warmup_steps)


def build_scheduler(optimizer: torch.optim.Optimizer, name: str, **kwargs) -> LambdaLR:
    """A ``LambdaLR`` following :func:`lr_factor`; call ``scheduler.step()`` after every update."""
    return LambdaLR(optimizer, lr_factor(name, **kwargs))


__all__ = [
    "linear_factor",
    "build_scheduler",
    "constant_factor",
    "cosine_factor",
    "lr_factor",
    "noam_factor",
    "with_warmup",
    "zaremba_factor",
]
