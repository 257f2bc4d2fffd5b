"""Continuing ``generate`` from a cache that has already read part of the decoder input.

A user continues a generation by passing the sequences it returned (or longer ones) together with its cache:
``generate(..., decoder_input_ids=out.sequences, cache=out.cache)``. transformers cuts the decoder input down
to the tokens the cache has not read only when a decoder attention mask tells it the full length; without
one, an encoder-decoder would read the whole prefix again and advance its cache twice over it.
:func:`continue_from_cache` gives the length of the first decoding step instead, and matches the cache's rows
to the input's (beams, several returned sequences). Every encoder-decoder of the package calls it from its
``prepare_inputs_for_generation``; any transformers ``Cache`` works (``get_seq_length``,
``batch_repeat_interleave``).

This module is copied next to the model code by ``save_pretrained`` (remote code).
"""

from __future__ import annotations

from typing import Any

import torch

from .input_checks import is_tracing


def cache_rows(cache: Any) -> int:
    """The batch rows a cache holds, ``-1`` before its first update."""
    rows = getattr(cache, "batch_size", -1)
    if isinstance(rows, int) and rows > 0:
        return rows
    inner = getattr(cache, "self_attention_cache", cache)  # an EncoderDecoderCache: its self-attention part
    for layer in getattr(inner, "layers", ()):
        keys = getattr(layer, "keys", None)
        if torch.is_tensor(keys) and keys.dim() > 0 and keys.numel():
            return keys.shape[0]
    return -1


def continue_from_cache(cache: Any, input_ids: torch.LongTensor, next_sequence_length: int | None) -> int | None:
    """The number of trailing tokens of ``input_ids`` ``(rows, m)`` the next forward must read.

    ``next_sequence_length`` given (every step after the first, or transformers found it from a mask) is kept.
    Otherwise, with a cache that has read ``n`` tokens: ``m - n`` when ``m > n`` (the full prefix was given),
    None (all of ``input_ids``) when ``m <= n`` (only the new tokens were given) or the cache is empty. A cache
    of ``b`` rows is repeated in place when ``input_ids`` has ``b * k`` rows (beams, ``num_return_sequences``);
    other row counts are a ValueError.
    """
    if cache is None or next_sequence_length is not None or is_tracing():
        return next_sequence_length
    seen = int(cache.get_seq_length())
    if seen == 0:
        return None
    rows, cached = input_ids.shape[0], cache_rows(cache)
    if cached > 0 and cached != rows:
        if rows % cached:
            raise ValueError(f"The cache holds {cached} rows, which does not divide the {rows} rows of "
                             f"`decoder_input_ids`.")
        cache.batch_repeat_interleave(rows // cached)
    unread = input_ids.shape[1] - seen
    return unread if unread > 0 else None


__all__ = ["cache_rows", "continue_from_cache"]
