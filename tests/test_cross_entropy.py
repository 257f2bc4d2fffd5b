"""The blockwise float32 cross-entropy of the language-model heads against torch's ``cross_entropy``."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from hf_seqmodels.models import cross_entropy
from hf_seqmodels.models.cross_entropy import BlockwiseCrossEntropy, summed_cross_entropy
from hf_seqmodels.models.teacher_forcing import token_cross_entropy


def reference(logits, targets, smoothing):
    return torch.nn.functional.cross_entropy(logits.float(), targets, ignore_index=-100,
                                             label_smoothing=smoothing, reduction="sum")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_value_and_gradient_equal_torch_cross_entropy(dtype, smoothing, monkeypatch):
    monkeypatch.setattr(cross_entropy, "BLOCK_ELEMENTS", 7 * 37)  # 16 rows a block: 3 blocks, the last one short
    generator = torch.Generator().manual_seed(0)
    logits = (4 * torch.randn(41, 37, generator=generator)).to(dtype)
    targets = torch.randint(0, 37, (41,), generator=generator)
    targets[::5] = -100
    ours_in, torch_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    ours, expected = BlockwiseCrossEntropy.apply(ours_in, targets, smoothing), reference(torch_in, targets, smoothing)
    grad_scale = torch.tensor(0.37)
    ours.backward(grad_scale)
    expected.backward(grad_scale)
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-5)
    assert ours_in.grad.dtype == dtype
    # bf16: both round the same float32 gradient to bf16, from softmax computed two ways
    tolerance = dict(rtol=0, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(ours_in.grad, torch_in.grad, **tolerance)
    assert (ours_in.grad[::5] == 0).all()  # ignored rows get no gradient


def test_logits_larger_than_a_block_take_the_blockwise_path(monkeypatch):
    monkeypatch.setattr(cross_entropy, "BLOCK_ELEMENTS", 64)
    small, large = torch.randn(4, 16, requires_grad=True), torch.randn(5, 16, requires_grad=True)
    assert summed_cross_entropy(small, torch.zeros(4, dtype=torch.long)).grad_fn.name() != "BlockwiseCrossEntropyBackward"
    assert summed_cross_entropy(large, torch.zeros(5, dtype=torch.long)).grad_fn.name() == "BlockwiseCrossEntropyBackward"


def test_token_cross_entropy_averages_over_counted_labels_and_num_items():
    logits = torch.randn(2, 5, 11)
    labels = torch.randint(0, 11, (2, 5))
    labels[0, :2] = -100
    mean = token_cross_entropy(logits, labels, 0.0)
    torch.testing.assert_close(mean, reference(logits.flatten(0, 1), labels.flatten(), 0.0) / 8)
    torch.testing.assert_close(token_cross_entropy(logits, labels, 0.0, num_items_in_batch=16), mean / 2)


def test_no_labels_counted_gives_nan_as_torch_mean():
    logits = torch.randn(3, 7, requires_grad=True)
    loss = token_cross_entropy(logits[None], torch.full((1, 3), -100), 0.0)
    assert torch.isnan(loss)  # 0 / 0, as cross_entropy(reduction="mean") with every target ignored


class LargestFloat32(TorchDispatchMode):
    """The largest float32 tensor any operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                self.largest = max(self.largest, t.numel())
        return out


def test_bf16_logits_are_never_converted_to_float32_whole():
    rows, vocab = 512, 2048  # 1 M logits; blocks of 256 rows
    logits = torch.randn(rows, vocab, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, vocab, (rows,))
    with LargestFloat32() as watch:
        summed_cross_entropy(logits, targets, 0.1).backward()
    assert watch.largest <= cross_entropy.BLOCK_ELEMENTS  # torch's path makes float32 copies of all 1 M
    assert logits.grad.dtype == torch.bfloat16


def test_second_derivatives_equal_torch_cross_entropy():
    """A gradient penalty differentiates the backward: the same second derivatives as torch's."""
    logits = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([0, 1, 2, -100])
    penalties = []
    for loss_of in (lambda x: BlockwiseCrossEntropy.apply(x, targets, 0.1), lambda x: reference(x, targets, 0.1)):
        x = logits.clone().requires_grad_()
        (grad,) = torch.autograd.grad(loss_of(x) * 1.5, x, create_graph=True)
        (grad.square().sum()).backward()
        penalties.append(x.grad)
    torch.testing.assert_close(penalties[0], penalties[1])
