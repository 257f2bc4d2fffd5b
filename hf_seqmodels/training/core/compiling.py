"""``--torch_compile``: the training step's forward and loss compiled with ``torch.compile``, for every family.

A model class that declares ``_can_compile_fullgraph`` (transformers' attribute: the Transformer, BERT, TextCNN)
compiles with ``fullgraph=True``: a graph break there is a bug, raised at the first step instead of silently
splitting the step into pieces run one after the other. BERT's masked-LM loss runs the vocabulary head on the
masked positions only: the pretraining batches carry those positions, found on the host (``masked_lm_positions``),
so the graph gathers a number of rows given by an input's shape, not read from the labels' values, and one graph
serves every batch whatever its number of masked tokens. No training path makes a data-dependent shape, so
:func:`compile_model` changes none of dynamo's process-wide settings (``capture_dynamic_output_shape_ops`` stays
as the user left it: ``masked_positions_only`` without positions, outside the trainer, needs it for one graph).

The recurrent families compile everything but the ``nn.LSTM``/``nn.GRU``/``nn.RNN`` call itself: dynamo does
not trace those modules and runs them as they are (the fused cuDNN kernel on a GPU, ATen's on a CPU), with
compiled graphs before and after them (embeddings, dropout, the output layer and the loss). Tracing them
instead (``torch._dynamo.config.allow_rnn``) would unroll the recurrence into per-step graphs, slower than the
fused kernel, so it stays off.

Several processes (DDP, FSDP2, DeepSpeed) compile without ``fullgraph``: their wrappers' hooks split the graph.
Evaluation and generation use the unwrapped model, outside the compiled region, as without ``--torch_compile``.
"""

from __future__ import annotations

import logging

import torch
from accelerate.utils import DistributedType

logger = logging.getLogger(__name__)

def can_compile_fullgraph(model: torch.nn.Module, distributed_type: DistributedType = DistributedType.NO) -> bool:
    """Whether ``model``'s forward compiles as one graph: its class says so, and no distributed wrapper adds
    hooks that split it."""
    return bool(getattr(model, "_can_compile_fullgraph", False)) and distributed_type == DistributedType.NO


def compile_model(model: torch.nn.Module, wrapped: torch.nn.Module, *, backend: str | None = None,
                  mode: str | None = None, distributed_type: DistributedType = DistributedType.NO):
    """``torch.compile(wrapped, ...)`` (``wrapped``: ``model`` as ``accelerator.prepare`` returned it), with
    ``fullgraph`` where :func:`can_compile_fullgraph` allows; logs what it does."""
    fullgraph = can_compile_fullgraph(model, distributed_type)
    compiled = torch.compile(wrapped, backend=backend or "inductor", mode=mode, fullgraph=fullgraph)
    logger.info(f"The model is compiled with torch.compile ({backend or 'inductor'}"
                f"{f', mode {mode}' if mode else ''}, {'one graph' if fullgraph else 'graph breaks allowed'}); "
                "the first updates include compiling.")
    return compiled


__all__ = ["can_compile_fullgraph", "compile_model"]
