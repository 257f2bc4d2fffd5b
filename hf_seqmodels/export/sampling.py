"""Multinomial sampling in numpy with the logits warpers of transformers' ``generate(do_sample=True)``.

:func:`warp_logits` applies, in ``generate()``'s order, ``TemperatureLogitsWarper`` (``logits / temperature``),
``TopKLogitsWarper`` (scores below the ``k``-th largest become ``-inf``; ties with it stay) and
``TopPLogitsWarper`` (sorted ascending, the tokens whose cumulative probability is ``<= 1 - top_p`` become
``-inf``; the most probable token always stays). :func:`sample_tokens` draws one token per row from the
softmax of the warped scores with a numpy ``Generator``: a fixed seed gives the same tokens on every run
(not the same as torch's random stream, whose generator numpy does not have).
"""

from __future__ import annotations

import numpy as np


def check_sampling(temperature: float, top_k: int | None, top_p: float) -> None:
    """ValueError naming the argument when ``temperature``, ``top_k`` or ``top_p`` is out of range."""
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"`temperature`={temperature!r}: expected a number > 0.")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
        raise ValueError(f"`top_k`={top_k!r}: expected None or an integer >= 0 (0 and None: no top-k filter).")
    if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"`top_p`={top_p!r}: expected a number in (0, 1] (1: no nucleus filter).")


def warp_logits(logits: np.ndarray, temperature: float = 1.0, top_k: int | None = 50,
                top_p: float = 1.0) -> np.ndarray:
    """``(N, V)`` next-token logits -> scores ``(N, V)`` float32 with the filtered tokens at ``-inf``
    (transformers' warpers, module docstring; the defaults are ``GenerationConfig``'s)."""
    scores = logits.astype(np.float32)
    if temperature != 1.0:
        scores = scores / np.float32(temperature)
    if top_k:
        k = min(top_k, scores.shape[-1])
        kth = -np.partition(-scores, k - 1, axis=-1)[:, k - 1 : k]  # (N, 1): the k-th largest score
        scores = np.where(scores < kth, -np.inf, scores).astype(np.float32)
    if top_p < 1.0:
        order = np.argsort(scores, axis=-1, kind="stable")  # ascending
        ranked = np.take_along_axis(scores, order, axis=-1)
        cumulative = np.cumsum(_softmax(ranked), axis=-1)
        remove = cumulative <= 1 - top_p
        remove[:, -1] = False  # min_tokens_to_keep = 1
        removed = np.zeros_like(remove)
        np.put_along_axis(removed, order, remove, axis=-1)
        scores = np.where(removed, -np.inf, scores).astype(np.float32)
    return scores


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def sample_tokens(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row ``(N,)`` drawn from ``softmax(scores)`` ``(N, V)``; ``-inf`` tokens are never drawn."""
    cumulative = np.cumsum(_softmax(scores.astype(np.float64)), axis=-1)  # (N, V)
    draws = rng.random(scores.shape[0]) * cumulative[:, -1]  # (N,) in [0, total)
    tokens = [np.searchsorted(row, draw, side="right") for row, draw in zip(cumulative, draws, strict=True)]
    return np.minimum(np.asarray(tokens, dtype=np.int64), scores.shape[-1] - 1)
