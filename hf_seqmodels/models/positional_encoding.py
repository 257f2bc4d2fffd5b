"""Positional encodings: the fixed sinusoids of Vaswani et al. (2017) and learned position embeddings.

Both map position ids ``(batch, time)`` to vectors ``(batch, time, hidden_size)`` that are added to the
token embeddings. Position ids come from the attention mask, so a left-padded sentence gets the same
positions ``0, 1, 2, ...`` as the sentence alone.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .input_checks import is_tracing

POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned")


def last_position(position_ids: torch.LongTensor, max_positions: int | None) -> int:
    """The largest of ``position_ids`` (eager mode: it reads the ids); a ValueError naming
    ``max_position_embeddings`` when it is past ``max_positions`` (None: no limit)."""
    return check_last_position(int(position_ids.max()), max_positions)


def check_last_position(last: int, max_positions: int | None) -> int:
    """``last``, or the ValueError of :func:`last_position` when it is past ``max_positions``."""
    if max_positions is not None and last >= max_positions:
        raise ValueError(f"position {last} is past max_position_embeddings={max_positions} of this model; use "
                         "shorter inputs or a config with a larger max_position_embeddings.")
    return last


class SinusoidalPositionalEncoding(nn.Module):
    r"""The fixed encoding of "Attention Is All You Need", section 3.5:

    .. math::
        PE_{(pos, 2i)} = \sin(pos / 10000^{2i / d_{model}}), \quad
        PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i / d_{model}})

    The rows are computed in float32 once and looked up afterwards (each decoding step needs only one
    row per sequence). The table is a cache, not a parameter or buffer: nothing is saved or loaded, it
    grows (doubling) when a later position is asked for, so there is no maximum length, and it is
    rebuilt on the device of the position ids. When tracing (``torch.compile``, export) the rows are
    computed from the formula instead: the table's size depends on the largest position id, a value the
    traced graph must not read.
    """

    def __init__(self, hidden_size: int, base: float = 10000.0, max_positions: int | None = None):
        super().__init__()
        self.max_positions = max_positions  # the model's max_position_embeddings: longer inputs are refused
        if hidden_size % 2:
            raise ValueError(f"the sinusoidal encoding needs an even hidden size, got {hidden_size}")
        self.hidden_size = hidden_size
        self.base = base
        self._table: torch.Tensor | None = None  # (positions, d) float32, see table()

    def encode(self, positions: torch.Tensor) -> torch.Tensor:
        """The encoding of ``positions`` ``(..., )`` computed from the formula: ``(..., d)`` float32."""
        two_i = torch.arange(0, self.hidden_size, 2, device=positions.device, dtype=torch.float32)
        inv_freq = torch.exp(-math.log(self.base) * two_i / self.hidden_size)  # 1 / 10000^(2i/d), (d/2,)
        angles = positions.float()[..., None] * inv_freq  # (..., d/2)
        encoding = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (..., d/2, 2): sin at 2i, cos at 2i+1
        return encoding.flatten(-2)  # (..., d)

    def table(self, length: int, device: torch.device) -> torch.Tensor:
        """Rows ``0 .. length - 1`` at least, ``(positions, d)``, on ``device``."""
        table = self._table
        if table is None or table.shape[0] < length or table.device != device:
            size = max(64, length, 2 * table.shape[0] if table is not None else 0)  # doubling: rebuilt rarely
            with torch.inference_mode(False):  # a normal tensor even when first asked for under inference_mode
                table = self.encode(torch.arange(size, device=device))
            self._table = table
        return table

    def forward(self, position_ids: torch.LongTensor) -> torch.Tensor:
        if is_tracing():
            return self.encode(position_ids)  # (B, T, d)
        last = last_position(position_ids, self.max_positions)
        table = self.table(last + 1, position_ids.device)
        return nn.functional.embedding(position_ids, table)  # (B, T, d)

    def span(self, start: int, length: int, device: torch.device) -> torch.Tensor:
        """The rows of positions ``start .. start + length - 1``, ``(1, length, d)``: a slice of the table
        (eager mode; no position ids to build or read)."""
        check_last_position(start + length - 1, self.max_positions)
        return self.table(start + length, device)[start : start + length][None]


class LearnedPositionalEmbedding(nn.Embedding):
    """One trained vector per position ``0 .. max_position_embeddings - 1`` (the paper's alternative).
    Positions past the end raise a ValueError in eager mode (the check reads the ids, so it is skipped when
    tracing)."""

    def forward(self, position_ids: torch.LongTensor) -> torch.Tensor:
        if not is_tracing():
            last_position(position_ids, self.num_embeddings)
        return super().forward(position_ids)

    def span(self, start: int, length: int, device: torch.device | None = None) -> torch.Tensor:
        """The vectors of positions ``start .. start + length - 1``, ``(1, length, d)``: a slice of the weight,
        the same values as ``forward(arange(start, start + length)[None])`` without building, checking (a
        reduction and a read of its value) and gathering the ids, and with a slice instead of an embedding
        backward (a scatter-add) in training."""
        check_last_position(start + length - 1, self.num_embeddings)
        return self.weight[start : start + length][None]


def build_positional_encoding(kind: str, hidden_size: int, max_positions: int) -> nn.Module:
    """The position encoding of ``kind`` (``"sinusoidal"`` or ``"learned"``) for ``max_positions`` positions of
    width ``hidden_size``."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(hidden_size, max_positions=max_positions)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_positions, hidden_size)
    raise ValueError(f"unknown position embedding type {kind!r}; expected one of {POSITION_EMBEDDING_TYPES}")


def position_ids_from_mask(
    attention_mask: torch.Tensor | None, past_length: int | torch.Tensor, length: int, device: torch.device
) -> torch.LongTensor:
    """Positions of the ``length`` newest tokens, ``(batch | 1, length)``.

    Without a mask they are ``past_length, ..., past_length + length - 1`` (``past_length`` may be a 0-d
    tensor, the length of a static cache). With a ``(batch, past + length)``
    mask they count only real tokens (padding gets position 0), so padding never shifts a position.
    """
    if attention_mask is None:
        return (torch.arange(length, device=device) + past_length)[None]
    positions = attention_mask.long().cumsum(-1) - 1  # (B, past + T)
    return positions.clamp(min=0)[:, -length:]
