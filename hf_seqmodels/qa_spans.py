r"""The answer-span search of extractive question answering, shared by the ``hfsm-question-answering``
pipeline and the evaluation of fine-tuned models (:func:`hf_seqmodels.training.finetune.qa_data.postprocess_predictions`).

A question and a long context are encoded as several windows ``[CLS] question [SEP] context-part [SEP]``.
In each window the start and end logits are turned into probabilities by a softmax over that window's
context tokens only; a span ``(i, j)`` of context tokens with ``i <= j < i + max_answer_len`` scores
:math:`p_{start}(i)\,p_{end}(j)`, and the best spans over all windows are returned.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch


class Span(NamedTuple):
    """A candidate answer: its score, the window it lies in and its first and last token (inclusive)."""

    score: float
    window: int
    start: int
    end: int


def best_spans(
    start_logits: torch.Tensor | np.ndarray,
    end_logits: torch.Tensor | np.ndarray,
    context_mask: torch.Tensor | np.ndarray,
    max_answer_len: int = 15,
    top_k: int = 1,
) -> list[Span]:
    r"""The ``top_k`` highest-scoring answer spans over the windows of one question, best first.

    Args:
        start_logits: ``(W, T)`` start logits of the ``W`` windows of ``T`` tokens (padding included).
        end_logits: ``(W, T)`` end logits.
        context_mask: ``(W, T)`` booleans, ``True`` on the tokens of the context; answers lie only there.
        max_answer_len: longest answer in tokens (``j - i + 1 <= max_answer_len``).
        top_k: how many spans to return.

    Returns:
        Up to ``top_k`` :class:`Span` tuples ``(score, window, start, end)`` sorted by decreasing score, with
        token indices into the window; the score is :math:`p_{start}(i)\,p_{end}(j)` with per-window
        softmaxes. Fewer when there are fewer allowed spans (none when no window has a context token).
    """
    start_logits, end_logits = torch.as_tensor(start_logits), torch.as_tensor(end_logits)
    mask = torch.as_tensor(context_mask, dtype=torch.bool, device=start_logits.device)
    if start_logits.dim() != 2 or start_logits.shape != end_logits.shape or start_logits.shape != mask.shape:
        raise ValueError(
            "start_logits, end_logits and context_mask must all have the shape (windows, tokens), got "
            f"{tuple(start_logits.shape)}, {tuple(end_logits.shape)} and {tuple(mask.shape)}."
        )
    if max_answer_len < 1:
        raise ValueError(f"max_answer_len must be >= 1, got {max_answer_len}.")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}.")
    # log-probabilities, so that a peaked distribution cannot underflow every allowed span to a score of 0
    start = start_logits.float().masked_fill(~mask, float("-inf")).log_softmax(-1)  # (W, T)
    end = end_logits.float().masked_fill(~mask, float("-inf")).log_softmax(-1)
    scores = start[:, :, None] + end[:, None, :]  # (W, T start, T end)
    length = scores.shape[-1]
    allowed = torch.ones(length, length, dtype=torch.bool, device=scores.device).triu().tril(max_answer_len - 1)
    scores = scores.masked_fill(~allowed | scores.isnan(), float("-inf"))  # NaN: a window without context
    best = scores.flatten().topk(min(top_k, scores.numel()))
    spans = []
    for log_score, index in zip(best.values.tolist(), best.indices.tolist(), strict=True):
        if log_score == float("-inf"):  # fewer than top_k allowed spans
            break
        window, rest = divmod(index, length * length)
        i, j = divmod(rest, length)
        spans.append(Span(math.exp(log_score), window, i, j))
    return spans


__all__ = ["Span", "best_spans"]
