"""The Transformer's training-speed paths: configs without biases, no cache in a training forward, the causal
LM loss without a copy of the logits, and the batched-matmul attention that bfloat16 on a CPU runs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_seqmodels import BertConfig, BertModel, TransformerForCausalLM, TransformerLMConfig
from hf_seqmodels.models import multi_head_attention as mha
from hf_seqmodels.models.cache_naming import output_cache
from hf_seqmodels.models.teacher_forcing import next_token_labels, token_cross_entropy

V = 99


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def causal_lm(seed: int = 0, **overrides) -> TransformerForCausalLM:
    torch.manual_seed(seed)
    return TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", **overrides))


def test_bias_false_drops_every_bias_and_round_trips(tmp_path):
    model = causal_lm(bias=False, normalize_before=True)
    names = [name for name, _ in model.named_parameters()]
    assert not [name for name in names if name.endswith(".bias")]
    with_biases = causal_lm(normalize_before=True)
    # per layer: q, k, v, out, fc1, fc2 and two LayerNorms lose a bias; the final LayerNorm one more
    assert len(list(with_biases.parameters())) - len(names) == 2 * 8 + 1
    model.save_pretrained(tmp_path)
    loaded = TransformerForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.bias is False
    ids = torch.randint(4, V, (2, 7))
    torch.testing.assert_close(loaded.eval()(ids).logits, model.eval()(ids).logits)


def test_training_forward_builds_no_cache_unless_asked():
    model = causal_lm().train()
    ids = torch.randint(4, V, (2, 6))
    assert output_cache(model(ids, labels=ids)) is None
    assert output_cache(model(ids, labels=ids, use_cache=True)) is not None
    with torch.no_grad():  # an evaluation forward of a model left in training mode still returns one
        assert output_cache(model(ids)) is not None
    assert output_cache(model.eval()(ids)) is not None


def test_next_token_loss_equals_the_sliced_loss():
    torch.manual_seed(0)
    logits, labels = torch.randn(3, 5, V), torch.randint(0, V, (3, 5))
    labels[0, 2] = -100
    assert next_token_labels(labels).shape == labels.shape
    assert (next_token_labels(labels)[:, -1] == -100).all()
    expected = token_cross_entropy(logits[:, :-1], labels[:, 1:], 0.1)
    torch.testing.assert_close(token_cross_entropy(logits, next_token_labels(labels), 0.1), expected)
    model, ids = causal_lm().eval(), labels.clamp(min=0)
    out = model(ids, labels=labels)
    torch.testing.assert_close(out.loss, token_cross_entropy(out.logits[:, :-1], labels[:, 1:], 0.0))


@pytest.mark.parametrize("causal", [True, False])
def test_bmm_attention_matches_sdpa(causal):
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 3, 6, 8) for _ in range(3))
    module = nn.Module()
    module.is_causal = causal
    output, weights = mha.bmm_attention(module, query, key, value, None, scaling=8**-0.5)
    expected = nn.functional.scaled_dot_product_attention(query, key, value, is_causal=causal)
    torch.testing.assert_close(output, expected.transpose(1, 2))  # (B, T, H, d_k)
    assert weights.shape == (2, 3, 6, 6)
    if causal:
        assert (weights.triu(1) == 0).all()


def test_bf16_on_cpu_picks_the_bmm_attention_and_float32_keeps_sdpa(monkeypatch):
    calls = []
    original = mha.bmm_attention

    def counting(*args, **kwargs):
        calls.append(args[1].dtype)
        return original(*args, **kwargs)

    monkeypatch.setattr(mha, "bmm_attention", counting)
    for model in (causal_lm(attn_implementation="sdpa"),
                  BertModel(BertConfig.from_preset("tiny", attn_implementation="sdpa"))):
        ids = torch.randint(4, V, (2, 6))
        model.train()(ids)
        assert calls == []  # float32: torch's kernel, results unchanged
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(ids)
        assert calls and set(calls) == {torch.bfloat16}
        calls.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):  # a padding mask keeps sdpa
            model(ids, attention_mask=torch.tensor([[1] * 6, [0, 0] + [1] * 4]))
        assert calls == []


def test_bf16_training_loss_is_close_to_float32():
    model = causal_lm(normalize_before=True, bias=False, dropout=0.0).train()
    ids = torch.randint(4, V, (4, 12))
    loss32 = model(ids, labels=ids).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss16 = model(ids, labels=ids).loss
    loss16.backward()
    assert abs(loss16.item() - loss32.item()) < 0.05 * loss32.item()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


def test_nanogpt_cpu_preset_and_recipe():
    from hf_seqmodels.recipes import recipe_problems
    from hf_seqmodels.registry import training_recipe

    config = TransformerLMConfig.from_preset("nanogpt-cpu", vocab_size=66)
    assert (config.d_model, config.decoder_layers, config.decoder_attention_heads, config.max_position_embeddings) \
        == (128, 4, 4, 64)
    assert config.normalize_before and not config.scale_embedding and not config.bias and config.dropout == 0
    assert (config.activation_function, config.position_embedding_type) == ("gelu", "learned")
    model = TransformerForCausalLM(config)
    assert len(list(model.parameters())) == 35  # 2 embeddings, 4 x 8 weights, the final LayerNorm
    recipe = training_recipe("transformer_lm", "nanogpt-cpu")
    assert recipe_problems(recipe, config.d_model) == []
    assert {k: recipe[k] for k in ("learning_rate", "adam_beta2", "warmup_steps", "weight_decay", "bptt",
                                   "per_device_train_batch_size", "max_steps", "lr_scheduler_type")} == dict(
        learning_rate=1e-3, adam_beta2=0.99, warmup_steps=100, weight_decay=0.1, bptt=64,
        per_device_train_batch_size=12, max_steps=2000, lr_scheduler_type="cosine")
    assert recipe["lr_scheduler_kwargs"] == {"min_lr_ratio": 0.1}
