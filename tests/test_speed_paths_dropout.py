"""The CPU dropout of the attention stacks (16-bit draws cut from 64-bit random words) is torch's inverted dropout."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_seqmodels import BertConfig, BertForPreTraining
from hf_seqmodels.models.feed_forward import Dropout, dropout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_it_drops_a_fraction_p_and_keeps_the_expectation(dtype):
    torch.manual_seed(0)
    x = torch.ones(256, 1024, dtype=dtype)
    y = dropout(x, 0.1)
    assert y.dtype == dtype and y.shape == x.shape
    dropped = (y == 0).double().mean().item()
    assert abs(dropped - 6554 / 65536) < 0.003  # p rounded to 16 bits; the standard error here is 0.0006
    kept = y[y != 0].double()
    torch.testing.assert_close(kept, torch.full_like(kept, 65536 / (65536 - 6554)), rtol=4e-3, atol=0)
    assert abs(y.double().mean().item() - 1.0) < 0.01


def test_positions_are_dropped_independently_and_differently_each_call():
    torch.manual_seed(0)
    x = torch.ones(64, 4096)
    first, second = dropout(x, 0.5) == 0, dropout(x, 0.5) == 0
    assert not torch.equal(first, second)
    both = (first & second).double().mean().item()
    assert abs(both - 0.25) < 0.01  # independent draws
    assert abs(first.double().mean(0).std().item() - 0.0625) < 0.01  # per column: binomial(64, 0.5) / 64


def test_the_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(0)
    x = torch.randn(32, 100, requires_grad=True)
    y = dropout(x, 0.25)
    y.backward(torch.ones_like(y))
    expected = (y != 0).float() * (65536 / (65536 - 16384))
    torch.testing.assert_close(x.grad, expected)
    torch.testing.assert_close(y, x.detach() * expected)


def test_eval_zero_and_one():
    x = torch.randn(8, 8)
    assert dropout(x, 0.3, training=False) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    module = Dropout(0.3).eval()
    assert module(x) is x and isinstance(module, nn.Dropout) and module.p == 0.3


def test_bert_training_draws_no_bernoulli_in_its_dropouts(monkeypatch):
    """The embeddings', the attention weights', the feed-forward's and Add & Norm's dropout run :func:`dropout`,
    not torch's."""
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    model = BertForPreTraining(config).train()
    assert not [name for name, module in model.named_modules() if type(module) is nn.Dropout]
    monkeypatch.setattr(nn.functional, "dropout", lambda *a, **k: pytest.fail("torch's dropout was called"))
    ids = torch.randint(4, 50, (2, 12))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the bf16 attention path carries the weights' dropout
        out = model(ids, labels=ids, next_sentence_label=torch.tensor([0, 1]))
    out.loss.backward()
    assert torch.isfinite(out.loss)
