"""The position-wise feed-forward network of the Transformer (and of BERT), and the dropout its stacks use."""

from __future__ import annotations

import torch
from torch import nn
from transformers.activations import ACT2FN

from .input_checks import is_tracing

#: the dropout draws of :func:`dropout` are 16-bit: ``p`` counts in steps of 1 / 65536
DROPOUT_LEVELS = 1 << 16


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout, as ``nn.functional.dropout``: each element is zeroed with probability ``p`` and the
    kept ones are scaled by ``1 / (1 - p)``; ``x`` itself when not ``training`` or ``p == 0``.

    On a CPU in eager mode the draws come from 64-bit random integers cut into four 16-bit ones: a quarter of
    the generator calls of torch's ``bernoulli_``, which costs more than the rest of the operation (a
    ``(64, 32, 256)`` activation: 1.3-1.7 ms instead of 3.8-4.6 ms, bfloat16 or float32, one thread). ``p`` is
    then rounded to a multiple of 1 / 65536 (0.1 drops 6554 / 65536 = 0.100006) and the scale is that of the
    rounded ``p``, so the expectation is still exactly ``x``. Elsewhere (other devices, compiled or exported
    graphs) torch's dropout runs.
    """
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    if is_tracing() or x.device.type != "cpu":
        return nn.functional.dropout(x, p, training=True)
    count = x.numel()
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=x.device).random_(-(1 << 63), None)
    draws = words.view(torch.int16)[:count].view(x.shape)  # uniform on [-32768, 32767]
    dropped = round(p * DROPOUT_LEVELS)  # the draws below -32768 + dropped are dropped
    keep = (draws >= dropped - DROPOUT_LEVELS // 2).to(x.dtype)  # exactly 0 or 1
    # two products, not torch.where(keep, x, 0): where and its backward cost more than a product (25-30 % of
    # the dropout, forward and backward); x * 1 * scale is x * scale rounded once, as torch's dropout
    return x * keep * (DROPOUT_LEVELS / (DROPOUT_LEVELS - dropped))


class Dropout(nn.Dropout):
    """``nn.Dropout`` computed by :func:`dropout` (the same parameters, state and ``extra_repr``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class PositionwiseFeedForward(nn.Module):
    r"""Two linear maps with an activation between them, applied to every position alone:

    .. math:: \mathrm{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2

    (ReLU in the paper; ``activation`` names any function of ``transformers.activations``, e.g. ``"gelu"``
    for BERT). ``dropout`` acts on the inner activations; ``bias=False`` drops :math:`b_1, b_2`.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size, bias=bias)  # W_1, b_1
        self.activation = ACT2FN[activation]
        self.dropout = Dropout(dropout)
        self.fc2 = nn.Linear(intermediate_size, hidden_size, bias=bias)  # W_2, b_2

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        inner = self.activation(self.fc1(hidden_states))  # (B, T, d_ff)
        if self.dropout.p and self.training:  # dropout 0 (GPT-shaped configs) is not even a call
            inner = self.dropout(inner)
        return self.fc2(inner)  # (B, T, d)
