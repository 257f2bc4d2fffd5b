"""Teacher forcing, shared by every encoder-decoder of the package: decoder inputs and the token loss.

Copied next to the model code by ``save_pretrained`` (with the sibling module it imports).
"""

from __future__ import annotations

import torch
from torch import nn

from .cross_entropy import summed_cross_entropy
from .input_checks import check_target_ids


def shift_tokens_right(labels: torch.LongTensor, pad_token_id: int, decoder_start_token_id: int) -> torch.LongTensor:
    """Decoder inputs ``[start, y_1, ..., y_{T-1}]`` that predict ``labels`` ``[y_1, ..., y_T]``
    (``-100`` becomes padding)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def token_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float, num_items_in_batch=None
) -> torch.Tensor:
    r"""Mean over the labels that are not ``-100`` of the float32 cross-entropy with the smoothed target
    :math:`q = (1 - \epsilon_{ls})\,\mathrm{onehot}(y) + \epsilon_{ls} / V`. Trainer's ``num_items_in_batch``
    (labels in all accumulated micro-batches) replaces the count, so gradient accumulation averages right.
    ``logits`` ``(..., V)``, ``labels`` of the same leading shape."""
    check_target_ids(labels, logits.shape[-1])
    labels = labels.reshape(-1)
    loss = summed_cross_entropy(logits.reshape(-1, logits.shape[-1]), labels, label_smoothing)
    count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    return loss / count


def next_token_labels(labels: torch.LongTensor) -> torch.LongTensor:
    """The targets of a causal LM's ``T`` positions from ``labels`` ``(B, T)``: position ``t`` predicts
    ``labels[:, t + 1]``, the last one nothing (``-100``). Scoring all ``T`` logits against these ``(B, T)``
    targets is the loss of ``logits[:, :-1]`` against ``labels[:, 1:]`` without copying the logits."""
    return nn.functional.pad(labels[:, 1:], (0, 1), value=-100)


def needs_decoder_inputs(decoder_input_ids, decoder_inputs_embeds=None, labels=None) -> None:
    """An encoder-decoder *head* must be given what its decoder reads: raise a ValueError naming the arguments
    when ``decoder_input_ids``, ``decoder_inputs_embeds`` and ``labels`` are all missing. (The base models run
    only their encoder then: transformers' feature-extraction pipeline calls them with the source alone.)"""
    if decoder_input_ids is None and decoder_inputs_embeds is None and labels is None:
        raise ValueError("`decoder_input_ids` are required (the target prefix, starting with "
                         "config.decoder_start_token_id), or `labels` to derive them by shifting right; "
                         "`generate()` provides them itself.")


__all__ = ["needs_decoder_inputs", "next_token_labels", "shift_tokens_right", "token_cross_entropy"]
