"""Every private attribute of torch and transformers that the models read or write, in one place.

The models run under their user's torch and transformers (this folder is copied beside a saved model), so they
rely on public APIs, except for the few things below that have none yet. Each is reached through a function of
this module only, and ``tests/test_private_internals.py`` checks that each still exists, so an upgrade that
removes or renames one fails there, by name, rather than deep inside a model.

* ``torch._higher_order_ops.scan.scan_op``: the scan operator that exports a recurrence with a symbolic
  sequence length (:func:`scan_operator`; transformers' Mamba models import torch's associative scan from the
  same place);
* ``Tensor._version``: the in-place version counter, so that a cache computed from a tensor is recomputed
  after an in-place change of it (:func:`tensor_version`);
* ``_is_hf_initialized``: the flag transformers' loading sets on a parameter it filled, so that
  ``_init_weights`` leaves it alone (:func:`is_hf_initialized`, :func:`mark_not_initialized`).
"""

from __future__ import annotations

import torch


def scan_operator():
    """torch's scan operator ``scan_op(combine_fn, init, xs, additional_inputs)`` (imported when a trace asks
    for it, never in eager mode)."""
    from torch._higher_order_ops.scan import scan_op

    return scan_op


def tensor_version(tensor: torch.Tensor) -> int | None:
    """The in-place version counter of ``tensor`` (inference-mode tensors have none: None)."""
    return None if tensor.is_inference() else tensor._version


def is_hf_initialized(parameter: torch.Tensor) -> bool:
    """Whether transformers' loading filled ``parameter`` from a checkpoint (or marked it done)."""
    return bool(getattr(parameter, "_is_hf_initialized", False))


def mark_not_initialized(parameter: torch.Tensor) -> None:
    """Have transformers initialise ``parameter`` with the model's ``_init_weights``, as a missing weight."""
    parameter._is_hf_initialized = False
