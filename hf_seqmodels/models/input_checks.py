"""Checks on model inputs, so that bad input fails with a message instead of a deep torch traceback.

The checks that read tensor values (``int(...)``, ``bool(...)``) run in eager mode only: under
``torch.compile``, ``torch.export`` or ONNX export (:func:`is_tracing`) they are skipped, so the traced graph
has no data-dependent branch or graph break. Shape checks run everywhere (shapes are known when tracing).

On a GPU each value read is also a synchronisation: the host waits until the device has computed everything
queued so far. A caller that has already checked its inputs where they were made (the training loop: ids from
a tokenizer that fits the model, labels from the same data) runs the model under :func:`inputs_checked_by_caller`;
the value-reading checks and value-dependent shortcuts are then off, as when tracing (:func:`reads_values`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_checked_by_caller = 0  # depth of inputs_checked_by_caller() blocks


@contextlib.contextmanager
def inputs_checked_by_caller() -> Iterator[None]:
    """Within the block, the models read no input values back to the host (:func:`reads_values` is False): no
    range checks on ids, masks and labels, and no shortcut that depends on a mask's values (an all-ones mask is
    applied rather than dropped). For callers that checked their inputs themselves and must not wait for the
    device, as the training loop on a GPU. Results are the same; bad inputs are then the caller's to refuse."""
    global _checked_by_caller
    _checked_by_caller += 1
    try:
        yield
    finally:
        _checked_by_caller -= 1


def is_tracing() -> bool:
    """Whether the current code is being traced (``torch.compile``, ``torch.export`` and the ONNX export built on
    it, or the TorchScript tracer and scripting) rather than run eagerly: value-reading checks and
    value-dependent shortcuts are off then. Public torch APIs only; ``torch.fx.symbolic_trace`` has no public
    test, and is not a way to export these models (their forward reads tensor values in eager mode)."""
    return (torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.jit.is_tracing()
            or torch.jit.is_scripting())


def reads_values() -> bool:
    """Whether the models may read input values back to the host (checks, mask shortcuts): in eager mode, unless
    the caller vouches for its inputs (:func:`inputs_checked_by_caller`). Tracing is tested first, so a compiled
    graph never looks at the module's state."""
    return not is_tracing() and not _checked_by_caller


def check_input_ids(input_ids: torch.Tensor | None, vocab_size: int, name: str = "input_ids",
                    field: str = "vocab_size") -> None:
    """Raise a ValueError naming ``name`` when ids are missing, not 2-D, or outside ``[0, vocab_size)``;
    ``field`` is the config field the size comes from."""
    if input_ids is None:
        raise ValueError(f"`{name}` is required: a LongTensor of shape (batch_size, sequence_length).")
    if input_ids.dim() != 2:
        raise ValueError(
            f"`{name}` must have shape (batch_size, sequence_length), got shape {tuple(input_ids.shape)}."
        )
    if input_ids.numel() == 0:
        raise ValueError(f"`{name}` is empty (shape {tuple(input_ids.shape)}); give at least one token.")
    if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool or input_ids.is_complex():
        raise ValueError(f"`{name}` must hold integer token ids, got dtype {input_ids.dtype}.")
    if not reads_values():
        return
    if input_ids.numel() == 1:  # one token: a decoding step
        low = high = int(input_ids.item())
    else:
        low, high = (int(v) for v in torch.aminmax(input_ids))  # one pass over the ids
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"`{name}` contains token id {bad}, outside the vocabulary [0, {vocab_size}) of this model "
            f"(config.{field}={vocab_size}). Was the text encoded with a different tokenizer?"
        )


def check_source_ids(input_ids: torch.Tensor | None, config, name: str = "input_ids") -> None:
    """:func:`check_input_ids` against an encoder-decoder's source vocabulary: ``config.source_vocab_size``
    when the source has its own vocabulary, else the shared ``config.vocab_size``."""
    source_vocab_size = getattr(config, "source_vocab_size", None)
    if source_vocab_size is None:
        check_input_ids(input_ids, config.vocab_size, name)
    else:
        check_input_ids(input_ids, source_vocab_size, name, field="source_vocab_size")


def current_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor | None:
    """The columns of ``attention_mask`` that belong to ``input_ids``, or None when nothing is masked.

    During cached generation the mask covers the whole sequence so far while ``input_ids`` holds only
    the new tokens, so the last ``input_ids.shape[1]`` columns are the ones that apply. When tracing
    (:func:`is_tracing`) the mask is returned as it is, even if it masks nothing: whether it does depends on
    its values, which a traced graph must not branch on.
    """
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2 or attention_mask.shape[0] != input_ids.shape[0]:
        raise ValueError(
            f"`attention_mask` must have shape (batch_size, sequence_length) matching `input_ids` "
            f"{tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}."
        )
    if attention_mask.shape[1] < input_ids.shape[1]:
        raise ValueError(
            f"`attention_mask` has {attention_mask.shape[1]} columns but `input_ids` has {input_ids.shape[1]}."
        )
    mask = attention_mask[:, -input_ids.shape[1] :]
    if not reads_values():
        return mask.bool()
    if mask.dtype == torch.bool:
        return None if bool(mask.all()) else mask
    if not mask.dtype.is_floating_point and not mask.is_complex() and mask.numel() > 0:
        low, high = (int(v) for v in torch.aminmax(mask))  # one pass: valid 0/1 values, and all ones?
        if low == 1 and high == 1:
            return None
        if low >= 0 and high <= 1:
            return mask.bool()
    check_mask_values(mask)
    mask = mask.bool()
    return None if bool(mask.all()) else mask


def check_mask_values(mask: torch.Tensor | None, name: str = "attention_mask") -> None:
    """Raise a ValueError naming ``name`` when a 0/1 mask holds another value (eager mode only)."""
    if mask is None or mask.dtype == torch.bool or not reads_values():
        return
    wrong = (mask != 0) & (mask != 1)
    if bool(wrong.any()):
        raise ValueError(f"`{name}` must hold 0 (padding) and 1 (token) only, got the value {mask[wrong][0].item()}.")


def check_target_ids(labels: torch.Tensor | None, vocab_size: int, name: str = "labels") -> None:
    """Token targets of a language-model loss must lie in ``[0, vocab_size)`` or be -100 (eager mode only)."""
    if labels is None or not reads_values():
        return
    bad = _first_outside(labels, vocab_size, -100)
    if bad is not None:
        raise ValueError(f"`{name}` contains the token id {bad}, outside the vocabulary "
                         f"[0, {vocab_size}) of this model (or -100 to ignore a position).")


def check_classification_labels(labels: torch.Tensor | None, logits: torch.Tensor, config) -> None:
    """:func:`check_labels` for a sequence classifier's ``logits`` ``(batch, num_labels)``, with transformers'
    problem types: class ids are range-checked for single-label classification (``problem_type``, or integer
    labels with ``num_labels > 1``); regression and multi-label targets only need one row per example."""
    if labels is None or is_tracing():
        return
    problem_type = getattr(config, "problem_type", None)
    single_label = problem_type == "single_label_classification" or (
        problem_type is None and logits.shape[-1] > 1 and not labels.is_floating_point())
    if single_label:
        check_labels(labels.reshape(-1) if labels.dim() > 1 and labels.shape[-1] == 1 else labels, logits)
    else:
        _check_label_rows(labels, logits, "labels")


def check_labels(labels: torch.Tensor | None, logits: torch.Tensor, name: str = "labels",
                 ignore_index: int = -100) -> None:
    """Check class labels against the ``logits`` ``(..., num_classes)`` they are scored with (eager mode only).

    Integer labels must have the shape ``logits.shape[:-1]`` and lie in ``[0, num_classes)`` or be
    ``ignore_index``; float labels (regression, multi-label) must match the batch size. Raises a ValueError
    naming ``name``, the value and what is allowed, instead of a torch ``IndexError`` deep in the loss or,
    on a GPU, a device-side assertion.
    """
    if labels is None or is_tracing():
        return
    _check_label_rows(labels, logits, name)
    if labels.is_floating_point():
        return
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"`{name}` must have shape {tuple(logits.shape[:-1])} (one class id per "
                         f"{'example' if logits.dim() == 2 else 'position'}), got {tuple(labels.shape)}.")
    num_classes = logits.shape[-1]
    if not reads_values():
        return
    bad = _first_outside(labels, num_classes, ignore_index)
    if bad is not None:
        raise ValueError(f"`{name}` contains {bad}, outside the {num_classes} classes "
                         f"[0, {num_classes}) (or {ignore_index} to ignore a position).")


def _check_label_rows(labels: torch.Tensor, logits: torch.Tensor, name: str) -> None:
    """One label row per example: ``labels`` and ``logits`` share their batch size."""
    if labels.shape[:1] != logits.shape[:1]:
        raise ValueError(f"`{name}` has batch size {labels.shape[0] if labels.dim() else 'none (a scalar)'}, "
                         f"the inputs {logits.shape[0]}: one label row per example.")


def _first_outside(ids: torch.Tensor, size: int, ignore_index: int) -> int | None:
    """The first of ``ids`` outside ``[0, size)`` that is not ``ignore_index``, or None."""
    if ids.numel() > 0 and not ids.is_floating_point() and ids.dtype != torch.bool and not ids.is_complex():
        low, high = (int(v) for v in torch.aminmax(ids))  # one pass: all inside, the common case?
        if low >= 0 and high < size:
            return None
    wrong = (ids != ignore_index) & ((ids < 0) | (ids >= size))
    return ids[wrong][0].item() if bool(wrong.any()) else None
