"""``--bf16_weights``: the model trains with bfloat16 weights while the optimizer updates a float32 master copy.

Under bf16 autocast alone (``--bf16``) the weights stay float32 and every forward casts each of them to bfloat16
again; the optimizer reads and writes float32. With ``--bf16_weights`` the model's trainable parameters are
bfloat16 themselves: the forward and backward read half the bytes and cast nothing, and the gradients are
bfloat16. The optimizer holds a float32 copy of each of them (the *master* weights, the usual mixed-precision
recipe of Micikevicius et al. 2018): before its step the bfloat16 gradients are copied into float32 ones of the
master weights, the optimizer updates those, and after its step they are copied back into the model, rounded.
An update smaller than bfloat16's resolution (8 bits of mantissa: a weight of 1.0 moves by no less than 2⁻⁸)
accumulates in the master copy instead of being lost, so training follows the float32 one.

The master weights are the run's weights: a checkpoint holds them in ``model.safetensors`` (float32) and a
resumed run reads them back (:meth:`MasterWeights.full_precision`), so resuming stays bit-identical; at the end
of training the model takes them back (:meth:`MasterWeights.release`), so the saved model is float32 as without
the flag. Frozen parameters and buffers keep their dtype.

FSDP2 and DeepSpeed keep master weights of their own (FSDP2's ``MixedPrecisionPolicy``, DeepSpeed's ``bf16``
section): the flag serves one process and DDP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


class MasterWeights:
    """Float32 master copies of ``model``'s trainable floating-point parameters, which become bfloat16.

    Build the optimizer over :meth:`optimizer_groups` of the model's groups and :meth:`attach` it: its steps
    then read the model's gradients and write the model's weights (see the module docstring)."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype = torch.bfloat16):
        self.params = [p for p in model.parameters() if p.requires_grad and p.is_floating_point()]
        self.masters = [torch.nn.Parameter(p.detach().to(torch.float32, copy=True)) for p in self.params]
        self._master_of = {id(p): m for p, m in zip(self.params, self.masters, strict=True)}
        with torch.no_grad():
            for p in self.params:
                p.data = p.data.to(dtype)
        self.released = False

    def optimizer_groups(self, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``groups`` (optimizer parameter groups of the model's parameters) over the master copies instead."""
        return [{**group, "params": [self._master_of[id(p)] for p in group["params"]]} for group in groups]

    def attach(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Make ``optimizer`` (built over :meth:`optimizer_groups`) read the model's gradients before each step and
        write the model's weights after it; returns it."""
        optimizer.register_step_pre_hook(lambda *_: self._gradients_in())
        optimizer.register_step_post_hook(lambda *_: self._weights_out())
        return optimizer

    @torch.no_grad()
    def _gradients_in(self) -> None:
        sources, targets = [], []
        for p, m in zip(self.params, self.masters, strict=True):
            if p.grad is None:  # not used by this update's forwards: the optimizer skips it, as without the flag
                m.grad = None
                continue
            if m.grad is None:
                m.grad = torch.empty_like(m)
            sources.append(p.grad)
            targets.append(m.grad)
        if targets:
            torch._foreach_copy_(targets, sources)

    @torch.no_grad()
    def _weights_out(self) -> None:
        torch._foreach_copy_(self.params, self.masters)  # rounded to bfloat16
        for p in self.params:  # the model's gradients are spent: the next update starts from none, as zero_grad does
            p.grad = None

    @contextlib.contextmanager
    def full_precision(self) -> Iterator[None]:
        """Within the context, the model's parameters are the float32 master weights themselves (same storage):
        what saves the model saves them, and what loads weights into the model loads them. On leaving, the model
        gets its bfloat16 weights back, copied from the master weights."""
        if self.released:
            yield
            return
        working = [p.data for p in self.params]
        for p, m in zip(self.params, self.masters, strict=True):
            p.data = m.data
        try:
            yield
        finally:
            with torch.no_grad():
                for p, w, m in zip(self.params, working, self.masters, strict=True):
                    w.copy_(m)
                    p.data = w

    def release(self) -> None:
        """End of training: the model's parameters become the float32 master weights for good."""
        for p, m in zip(self.params, self.masters, strict=True):
            p.data = m.data
        self.released = True


__all__ = ["MasterWeights"]
