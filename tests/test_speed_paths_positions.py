"""Unpadded inputs read their position vectors as one slice of the position table (no ids, no gather)."""

from __future__ import annotations

import pytest
import torch

from hf_seqmodels import (
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)
from hf_seqmodels.models.positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

SIZES = dict(d_model=16, decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=32, vocab_size=40,
             max_position_embeddings=12, dropout=0.0)


def lm(position_embedding_type: str) -> TransformerForCausalLM:
    torch.manual_seed(0)
    return TransformerForCausalLM(TransformerLMConfig(position_embedding_type=position_embedding_type, **SIZES))


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_an_unpadded_forward_does_not_gather_positions(kind, monkeypatch):
    """Without padding the positions are 0 .. T - 1: the embeddings take a slice, the ids path is not called."""
    model = lm(kind)
    module_type = LearnedPositionalEmbedding if kind == "learned" else SinusoidalPositionalEncoding
    calls = []
    original = module_type.forward
    monkeypatch.setattr(module_type, "forward", lambda self, ids: calls.append(ids) or original(self, ids))
    ids = torch.randint(0, 40, (2, 7))
    model(ids, labels=ids)
    assert calls == []
    model(ids, attention_mask=torch.ones_like(ids), position_ids=torch.arange(7)[None])  # explicit ids: gathered
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_the_slice_gives_the_loss_and_gradients_of_explicit_position_ids(kind):
    model = lm(kind).train()
    ids = torch.randint(0, 40, (3, 9))
    sliced = model(ids, labels=ids).loss
    sliced.backward()
    sliced_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    gathered = model(ids, labels=ids, position_ids=torch.arange(9).expand(3, 9)).loss
    gathered.backward()
    torch.testing.assert_close(sliced, gathered, rtol=0, atol=0)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(sliced_grads[name], parameter.grad, rtol=1e-6, atol=1e-7, msg=name)


def test_the_slice_continues_after_the_cached_positions():
    """A decoding step with a cache reads the position after the cached ones, as the ids path does."""
    model = lm("learned").eval()
    ids = torch.randint(0, 40, (2, 6))
    with torch.no_grad():
        full = model(ids).logits
        first = model(ids[:, :4], use_cache=True)
        rest = model(ids[:, 4:], cache=first.past_key_values).logits
    torch.testing.assert_close(rest, full[:, 4:], rtol=1e-5, atol=1e-5)


def test_a_slice_past_the_last_position_names_max_position_embeddings():
    model = lm("learned")
    ids = torch.randint(0, 40, (1, 13))
    with pytest.raises(ValueError, match="max_position_embeddings=12"):
        model(ids)


def test_the_encoder_decoder_slices_both_sides():
    torch.manual_seed(0)
    config = TransformerConfig(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=40,
                               position_embedding_type="learned", dropout=0.0)
    model = TransformerForConditionalGeneration(config).eval()
    source, target = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4))
    with torch.no_grad():
        sliced = model(source, labels=target).logits
        padded = model(source, attention_mask=torch.ones_like(source), labels=target,
                       decoder_position_ids=torch.arange(4)[None]).logits
    torch.testing.assert_close(sliced, padded, rtol=1e-6, atol=1e-6)


def test_bert_reads_positions_0_to_t_as_a_slice(monkeypatch):
    from hf_seqmodels import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=12)).eval()
    ids = torch.randint(4, 40, (2, 7))
    with torch.no_grad():
        explicit = model(ids, position_ids=torch.arange(7)[None]).last_hidden_state
        calls = []
        original = LearnedPositionalEmbedding.forward
        monkeypatch.setattr(LearnedPositionalEmbedding, "forward", lambda self, ids: calls.append(ids) or original(self, ids))
        sliced = model(ids).last_hidden_state
    assert calls == []
    torch.testing.assert_close(sliced, explicit, rtol=0, atol=0)
    with pytest.raises(ValueError, match="max_position_embeddings=12"):
        model(torch.randint(4, 40, (1, 13)))
