"""The position-wise feed-forward network of the Transformer (and of BERT)."""

from __future__ import annotations

import torch
from torch import nn
from transformers.activations import ACT2FN


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
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(intermediate_size, hidden_size, bias=bias)  # W_2, b_2

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        inner = self.activation(self.fc1(hidden_states))  # (B, T, d_ff)
        if self.dropout.p and self.training:  # dropout 0 (GPT-shaped configs) is not even a call
            inner = self.dropout(inner)
        return self.fc2(inner)  # (B, T, d)
