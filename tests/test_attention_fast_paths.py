"""The attention and dropout shortcuts of a training forward give what the general paths give."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from hf_seqmodels.models import multi_head_attention as mha
from hf_seqmodels.models.feed_forward import PositionwiseFeedForward


class Causal(nn.Module):
    def __init__(self, is_causal: bool):
        super().__init__()
        self.is_causal = is_causal


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("length", [1, 5])
def test_unmasked_sdpa_equals_transformers_sdpa_function(is_causal, length):
    query, key, value = (torch.randn(2, 3, length, 4, requires_grad=True) for _ in range(3))
    module = Causal(is_causal)
    ours, none = mha.unmasked_sdpa_attention(module, query, key, value, None, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, None, scaling=0.3)
    assert none is None and ours.shape == (2, length, 3, 4)  # (B, T, H, d_k)
    torch.testing.assert_close(ours, theirs)


def test_attention_function_takes_the_shortcut_only_without_a_mask():
    query = key = torch.randn(2, 3, 5, 4)
    assert mha.attention_function("sdpa", query, key, None) is mha.unmasked_sdpa_attention
    assert mha.attention_function("sdpa", query.bfloat16(), key.bfloat16(), None) is mha.bmm_attention
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    assert mha.attention_function("sdpa", query, key, mask) is sdpa_attention_forward
    assert mha.attention_function("eager", query, key, None) is mha.eager_attention_forward


def test_feed_forward_dropout_still_drops_in_training_only():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 16, dropout=0.5).train()
    x = torch.randn(2, 3, 8)
    assert not torch.equal(ffn(x), ffn(x))  # two dropout masks
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn.fc2(ffn.activation(ffn.fc1(x))))
    plain = PositionwiseFeedForward(8, 16, dropout=0.0).train()
    torch.testing.assert_close(plain(x), plain.fc2(plain.activation(plain.fc1(x))))


def test_add_norm_calls_its_dropout_only_when_it_can_drop():
    from hf_seqmodels.models.transformer_layers import AddNorm

    x, sublayer = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    dropping = AddNorm(8, dropout=0.5, normalize_before=True, eps=1e-5).train()
    assert not torch.equal(dropping(x, sublayer), x + sublayer)  # training with p > 0 drops
    assert torch.equal(dropping.eval()(x, sublayer), x + sublayer)
    calls = []
    never = AddNorm(8, dropout=0.0, normalize_before=False, eps=1e-5).train()
    never.dropout.register_forward_hook(lambda *args: calls.append(1))
    torch.testing.assert_close(never(x, sublayer), nn.functional.layer_norm(x + sublayer, (8,), never.weight,
                                                                            never.bias, 1e-5))
    dropping.train().dropout.register_forward_hook(lambda *args: calls.append(2))
    dropping(x, sublayer)
    assert calls == [2], "dropout 0 is no call; dropout > 0 in training is one"
