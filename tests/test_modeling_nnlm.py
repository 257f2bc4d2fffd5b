"""Tests of the Bengio et al. (2003) feed-forward neural language model."""

from __future__ import annotations

import pytest
import torch
from model_test_utils import left_pad, random_ids, run_without_package
from transformers import AutoModelForCausalLM

import hf_seqmodels  # noqa: F401
from hf_seqmodels import NNLMConfig, NNLMForCausalLM
from hf_seqmodels.models.cache_naming import output_cache


def tiny_model(seed: int = 0, **overrides) -> NNLMForCausalLM:
    torch.manual_seed(seed)
    return NNLMForCausalLM(NNLMConfig.from_preset("tiny", **overrides)).eval()


@pytest.mark.parametrize("direct", [True, False])
def test_forward_equals_the_paper_equation(direct):
    """y = b + W x + U tanh(d + H x), x the concatenated embeddings of the n-1 previous words."""
    model = tiny_model(direct_connections=direct)
    ids = random_ids(2, 6, 99)
    logits = model(ids).logits
    n_ctx, pad = model.config.context_size, model.config.pad_token_id
    padded = torch.cat([torch.full((2, n_ctx), pad), ids], dim=1)
    C = model.embed_tokens.weight
    for t in range(6):
        window = padded[:, t + 1 : t + 1 + n_ctx]  # the n-1 tokens ending at position t
        x = C[window].reshape(2, -1)
        y = model.lm_head.bias + torch.tanh(model.hidden.bias + x @ model.hidden.weight.T) @ model.lm_head.weight.T
        if direct:
            y = y + x @ model.direct.weight.T
        assert torch.allclose(logits[:, t], y, atol=1e-5)


def test_loss_and_backward():
    model = tiny_model().train()
    ids = random_ids(3, 8, 99)
    out = model(ids, labels=ids)
    expected = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 99), ids[:, 1:].reshape(-1))
    assert torch.allclose(out.loss, expected, atol=1e-6)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_context_carried_across_calls_equals_one_pass():
    model = tiny_model()
    ids = random_ids(2, 10, 99)
    first = model(ids[:, :4])
    second = model(ids[:, 4:], past_key_values=output_cache(first))
    assert torch.allclose(torch.cat([first.logits, second.logits], 1), model(ids).logits, atol=1e-6)
    assert torch.equal(output_cache(second)[0], ids[:, -3:])


@pytest.mark.parametrize("prompt_length", [1, 3, 9])  # shorter than, equal to and longer than n-1 = 3
@pytest.mark.parametrize("mode", ["greedy", "beam", "sample"])
def test_generate_cache_matches_recomputation(prompt_length, mode):
    model = tiny_model()
    ids = random_ids(2, prompt_length, 99)
    kw = dict(max_new_tokens=7, min_new_tokens=7)
    kw.update({"greedy": dict(do_sample=False), "beam": dict(num_beams=3, num_return_sequences=2),
               "sample": dict(do_sample=True, top_k=10)}[mode])
    torch.manual_seed(1)
    cached = model.generate(ids, **kw)
    torch.manual_seed(1)
    assert torch.equal(cached, model.generate(ids, use_cache=False, **kw))


def test_every_generated_token_used_its_full_context():
    model = tiny_model()
    ids = random_ids(1, 6, 99)
    out = model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False,
                         output_logits=True, return_dict_in_generate=True)
    for step, logits in enumerate(out.logits):
        assert torch.allclose(logits, model(out.sequences[:, : 6 + step]).logits[:, -1], atol=1e-6)


def test_left_padded_batch_generates_what_each_prompt_generates_alone():
    model = tiny_model()
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (2, 5)]
    ids, mask = left_pad(rows)
    kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False)
    batched = model.generate(ids, attention_mask=mask, **kw)
    for i, r in enumerate(rows):
        assert torch.equal(batched[i, -5:], model.generate(r[None], **kw)[0, -5:])


def test_bad_config_and_inputs():
    with pytest.raises(Exception, match="`context_size`=0"):
        NNLMConfig(context_size=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny_model()(torch.tensor([[1, 120]]))


@pytest.mark.slow
def test_save_auto_load_and_remote_code(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    ids = random_ids(1, 6, 99)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, NNLMForCausalLM)
    assert torch.equal(loaded(ids).logits, model(ids).logits)
    report = run_without_package(tmp_path, "AutoModelForCausalLM", ids, tmp_path / "out.safetensors")
    assert report["class"] == "NNLMForCausalLM"
    assert torch.allclose(report["logits"], model(ids).logits, atol=1e-6)
