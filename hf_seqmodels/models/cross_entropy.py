r"""The token cross-entropy of every language-model head, computed in float32 a block of rows at a time.

For logits :math:`x \in \mathbb{R}^{N \times V}`, targets :math:`y` (``-100``: ignored) and label smoothing
:math:`\epsilon`, the summed loss is

.. math:: \sum_{n: y_n \neq -100} \mathrm{lse}(x_n) - (1 - \epsilon)\, x_{n, y_n} - \frac{\epsilon}{V} \sum_v x_{n,v}

(``lse`` the log-sum-exp) and its gradient is :math:`\mathrm{softmax}(x_n) - (1 - \epsilon)\,
\mathrm{onehot}(y_n) - \epsilon / V` per counted row: ``nn.functional.cross_entropy(x.float(), y,
label_smoothing=eps, reduction="sum")`` in value and gradient.

On a CPU in eager mode :class:`BlockwiseCrossEntropy` computes both a block of rows at a time, each block
converted to float32 while it is in the cache, and keeps only the logits it was given (bfloat16 under
``--bf16``) and one log-sum-exp per row for the backward. torch's path converts all ``N x V`` logits to
float32, writes their log-probabilities, keeps those for the backward, writes a float32 gradient and converts
it back: with bfloat16 logits ``(8192, 2048)`` on one thread the loss with its backward takes 85-95 ms instead
of 200-240 ms (``benchmarks/bench_bf16.py`` measures the training steps that contain it). Elsewhere (logits
that fit in one block, other devices, traced graphs) torch's ``cross_entropy`` runs. A backward that is itself differentiated
(``create_graph=True``) computes the softmax of all rows at once, with differentiable operations.
"""

from __future__ import annotations

import torch
from torch import nn

from .input_checks import is_tracing

#: float32 elements of one block of rows (2 MiB): rows of a block = this / V, at least 16
BLOCK_ELEMENTS = 1 << 19


def block_rows(vocab_size: int) -> int:
    return max(16, BLOCK_ELEMENTS // max(vocab_size, 1))


class BlockwiseCrossEntropy(torch.autograd.Function):
    """``(logits (N, V), targets (N,), label_smoothing)`` -> the summed float32 loss of the rows whose target
    is not -100 (see the module's docstring)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float) -> torch.Tensor:
        rows, vocab_size = logits.shape
        counted = targets != -100  # (N,)
        safe = targets.masked_fill(~counted, 0)[:, None]  # (N, 1) a valid index on ignored rows
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)  # (N,)
        losses = torch.empty(rows, dtype=torch.float32, device=logits.device)  # (N,)
        step = block_rows(vocab_size)
        for start in range(0, rows, step):
            block = slice(start, start + step)
            x = logits[block].float()  # (n, V)
            torch.logsumexp(x, dim=-1, out=lse[block])
            loss = lse[block] - (1.0 - label_smoothing) * x.gather(1, safe[block]).squeeze(1)
            if label_smoothing:
                loss = loss - label_smoothing / vocab_size * x.sum(dim=-1)
            losses[block] = loss
        ctx.save_for_backward(logits, safe, counted, lse)
        ctx.label_smoothing = label_smoothing
        return losses.masked_fill_(~counted, 0.0).sum()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        logits, safe, counted, lse = ctx.saved_tensors
        smoothing = ctx.label_smoothing
        rows, vocab_size = logits.shape
        weight = (counted.to(torch.float32) * grad_output)[:, None]  # (N, 1) d loss / d row loss
        if torch.is_grad_enabled():  # a backward that is itself differentiated (create_graph): out-of-place, whole
            target = torch.zeros_like(logits, dtype=torch.float32).scatter_(1, safe, 1.0 - smoothing)
            softmax = logits.float().softmax(dim=-1)
            return ((softmax - target - smoothing / vocab_size) * weight).to(logits.dtype), None, None
        grad = torch.empty_like(logits, memory_format=torch.contiguous_format)  # (N, V) in the logits' dtype
        step = block_rows(vocab_size)
        for start in range(0, rows, step):
            block = slice(start, start + step)
            w = weight[block]  # (n, 1)
            g = logits[block].float().sub_(lse[block, None]).exp_().mul_(w)  # softmax, weighted
            if smoothing:
                g.sub_(w * (smoothing / vocab_size))
            g.scatter_add_(1, safe[block], w * -(1.0 - smoothing))
            grad[block] = g
        return grad, None, None


def summed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Float32 cross-entropy of ``logits`` ``(N, V)`` (any float dtype) against ``targets`` ``(N,)``, summed
    over the targets that are not -100, with ``label_smoothing``: :class:`BlockwiseCrossEntropy` on a CPU in
    eager mode, ``nn.functional.cross_entropy`` on the float32 logits elsewhere (the same value)."""
    targets = targets.to(logits.device)
    if logits.device.type == "cpu" and not is_tracing() and logits.numel() > BLOCK_ELEMENTS:  # else one block
        return BlockwiseCrossEntropy.apply(logits, targets, float(label_smoothing))
    return nn.functional.cross_entropy(logits.float(), targets, ignore_index=-100, label_smoothing=label_smoothing,
                                       reduction="sum")


__all__ = ["BlockwiseCrossEntropy", "summed_cross_entropy"]
