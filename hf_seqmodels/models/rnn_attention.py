"""Attention score functions of the RNN encoder-decoder, and masked attention pooling.

A decoder state ``s`` (the query) is scored against every encoder output ``h_i`` (the memory)::

    additive (Bahdanau)   e_i = v_a^T tanh(W_a s + U_a h_i)
    dot      (Luong)      e_i = s^T h_i
    general  (Luong)      e_i = s^T W_a h_i
    concat   (Luong)      e_i = v_a^T tanh(W_a [s; h_i])

then ``α = softmax(e)`` over the real source positions and ``c = Σ_i α_i h_i``. As in the papers no
score has a bias. The part that depends only on the memory (``U_a h_i``, ``W_a h_i``) is computed once
per sentence by ``prepare`` and reused at every decoding step.
"""

from __future__ import annotations

import torch
from torch import nn

ATTENTION_SCORES = ("additive", "dot", "general", "concat", "none")


def _tanh_score(query: torch.Tensor, keys: torch.Tensor, score_proj: nn.Linear) -> torch.Tensor:
    """``v_a^T tanh(q_t + k_i)`` for projected queries ``(B, T, A)`` and keys ``(B, S, A)``: ``(B, T, S)``."""
    return score_proj(torch.tanh(query.unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1)


class AdditiveAttention(nn.Module):
    """Bahdanau et al. (2015): ``e_i = v_a^T tanh(W_a s + U_a h_i)``."""

    def __init__(self, query_size: int, memory_size: int, attention_size: int):
        super().__init__()
        self.query_proj = nn.Linear(query_size, attention_size, bias=False)  # W_a
        self.memory_proj = nn.Linear(memory_size, attention_size, bias=False)  # U_a
        self.score_proj = nn.Linear(attention_size, 1, bias=False)  # v_a^T

    def prepare(self, memory: torch.Tensor) -> torch.Tensor:
        """``U_a h_i``: ``(B, S, M)`` -> ``(B, S, A)``."""
        return self.memory_proj(memory)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores ``(B, T, S)`` of queries ``(B, T, Q)`` against prepared keys ``(B, S, A)``."""
        return _tanh_score(self.query_proj(query), keys, self.score_proj)


class LuongAttention(nn.Module):
    """Luong et al. (2015): ``dot`` ``s^T h_i``, ``general`` ``s^T W_a h_i``, ``concat`` ``v_a^T tanh(W_a [s; h_i])``.

    ``W_a [s; h_i]`` is evaluated as ``W_a[:, :Q] s + W_a[:, Q:] h_i`` so the memory half is computed
    once; the parameter is the paper's single matrix over the concatenation.
    """

    def __init__(self, method: str, query_size: int, memory_size: int, attention_size: int):
        super().__init__()
        if method not in ("dot", "general", "concat"):
            raise ValueError(f"Invalid Luong score {method!r}: expected 'dot', 'general' or 'concat'.")
        if method == "dot" and query_size != memory_size:
            raise ValueError(f"The dot score needs equal query and memory sizes, got {query_size} and {memory_size}.")
        self.method = method
        self.query_size = query_size
        if method == "general":
            self.memory_proj = nn.Linear(memory_size, query_size, bias=False)  # W_a
        elif method == "concat":
            self.concat_proj = nn.Linear(query_size + memory_size, attention_size, bias=False)  # W_a
            self.score_proj = nn.Linear(attention_size, 1, bias=False)  # v_a^T

    def prepare(self, memory: torch.Tensor) -> torch.Tensor:
        """``h_i`` (dot), ``W_a h_i`` (general, ``(B, S, Q)``) or ``W_a[:, Q:] h_i`` (concat, ``(B, S, A)``)."""
        if self.method == "dot":
            return memory
        if self.method == "general":
            return self.memory_proj(memory)
        return memory @ self.concat_proj.weight[:, self.query_size :].T

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores ``(B, T, S)`` of queries ``(B, T, Q)`` against prepared keys ``(B, S, ·)``."""
        if self.method == "concat":
            return _tanh_score(query @ self.concat_proj.weight[:, : self.query_size].T, keys, self.score_proj)
        return query @ keys.transpose(1, 2)


def build_attention(score: str, query_size: int, memory_size: int, attention_size: int) -> nn.Module | None:
    """The scorer named by ``config.attention_score``; None for ``"none"``."""
    if score == "none":
        return None
    if score == "additive":
        return AdditiveAttention(query_size, memory_size, attention_size)
    return LuongAttention(score, query_size, memory_size, attention_size)


def attention_weights(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``α = softmax(e)`` over the real source positions: scores ``(B, T, S)`` -> weights ``(B, T, S)``, exactly 0
    on padding; ``mask`` ``(B, S)`` bool, True at real source tokens (each row needs one), or None."""
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    return scores.softmax(dim=-1)


def attend(
    scores: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over the real source positions and the weighted sum of the memory.

    Args:
        scores: ``(B, T, S)`` scores ``e_{t,i}``.
        memory: ``(B, S, M)`` encoder outputs ``h_i``.
        mask: ``(B, S)`` bool, True at real source tokens (each row needs one); None when nothing is padded.

    Returns:
        context ``c_t`` ``(B, T, M)`` and weights ``α_{t,i}`` ``(B, T, S)``, exactly 0 on padding.
    """
    weights = attention_weights(scores, mask)
    return weights @ memory, weights
