"""Tests of the Bengio et al. (2003) feed-forward neural language model."""

from __future__ import annotations

import pytest
import torch
from model_test_utils import left_pad, random_ids

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
    C = model.nnlm.embed_tokens.weight
    for t in range(6):
        window = padded[:, t + 1 : t + 1 + n_ctx]  # the n-1 tokens ending at position t
        x = C[window].reshape(2, -1)
        y = model.lm_head.bias + torch.tanh(model.nnlm.hidden.bias + x @ model.nnlm.hidden.weight.T) @ model.lm_head.weight.T
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


# --- the transformers model contract -------------------------------------------------------------------------


def test_hidden_states_are_the_context_and_the_tanh_layer():
    model = tiny_model()
    ids = random_ids(2, 6, 99)
    out = model(ids, output_hidden_states=True)
    x, h = out.hidden_states
    assert x.shape == (2, 6, 3 * 8) and h.shape == (2, 6, 16)
    torch.testing.assert_close(h, torch.tanh(model.nnlm.hidden(x)))
    torch.testing.assert_close(out.logits, model.lm_head(h) + model.direct(x))


@pytest.mark.parametrize("direct", [True, False])
def test_resize_keeps_every_old_score_and_resizes_the_direct_connections(direct):
    model = tiny_model(direct_connections=direct)
    ids = random_ids(2, 5, 99)
    with torch.no_grad():
        before = model(ids).logits
    model.resize_token_embeddings(130)
    assert model.nnlm.embed_tokens.num_embeddings == model.lm_head.out_features == model.lm_head.bias.shape[0] == 130
    if direct:
        assert model.direct.weight.shape == (130, 24)
    out = model(torch.cat([ids, torch.tensor([[129], [120]])], dim=1), labels=ids.new_zeros(2, 6))
    torch.testing.assert_close(out.logits[:, :5, :99], before)
    out.loss.backward()
    assert model.generate(ids, max_new_tokens=3, num_beams=2).shape == (2, 8)
    model.resize_token_embeddings(40)
    assert model(random_ids(1, 4, 40)).logits.shape == (1, 4, 40)


def test_ids_can_follow_inputs_embeds_through_the_context_state():
    model = tiny_model()
    ids = random_ids(2, 5, 99)
    embeds = model.get_input_embeddings()(ids)
    first = model(inputs_embeds=embeds[:, :2])  # the state keeps vectors; ids can follow
    torch.testing.assert_close(model(ids[:, 2:], past_key_values=output_cache(first)).logits, model(ids).logits[:, 2:])
    with pytest.raises(ValueError, match="exactly one of `input_ids` and `inputs_embeds`"):
        model()


@pytest.mark.parametrize("device_map", [None, "cpu"])
def test_missing_weights_are_initialised_and_reported(tmp_path, device_map):
    from safetensors.torch import load_file, save_file

    tiny_model(init_range=0.05).save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    missing = {"direct.weight", "nnlm.hidden.bias"}
    save_file({k: v for k, v in weights.items() if k not in missing}, str(tmp_path / "model.safetensors"),
              metadata={"format": "pt"})
    loaded, info = NNLMForCausalLM.from_pretrained(tmp_path, output_loading_info=True, device_map=device_map)
    assert set(info["missing_keys"]) == missing
    assert 0 < loaded.direct.weight.abs().max() <= 0.05 and not loaded.nnlm.hidden.bias.any()
    assert all(p.device.type == "cpu" for p in loaded.parameters())


def test_the_base_model_is_the_body_of_the_head():
    """NNLMModel returns tanh(d + H x) and the context state; the head's logits are its output layer over it."""
    model = tiny_model()
    ids = random_ids(2, 6, 99)
    base_out = model.nnlm(ids, output_hidden_states=True)
    x, h = base_out.hidden_states
    assert base_out.last_hidden_state is h and h.shape == (2, 6, 16)
    torch.testing.assert_close(model(ids).logits, model.lm_head(h) + model.direct(x))
    first = model.nnlm(ids[:, :4])
    torch.testing.assert_close(model.nnlm(ids[:, 4:], cache=output_cache(first)).last_hidden_state, h[:, 4:])


def test_a_checkpoint_saved_before_the_base_model_existed_loads(tmp_path):
    """Folders written when the head held C and H itself (keys without the ``nnlm.`` prefix) load into the head
    and into the base model without missing weights."""
    from safetensors.torch import load_file, save_file

    from hf_seqmodels import NNLMModel

    model = tiny_model()
    model.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    assert {"nnlm.embed_tokens.weight", "nnlm.hidden.weight", "lm_head.weight", "direct.weight"} <= set(weights)
    old = {k.removeprefix("nnlm."): v for k, v in weights.items()}
    save_file(old, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    ids = random_ids(2, 6, 99)
    loaded, info = NNLMForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    base, info = NNLMModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"]
    torch.testing.assert_close(base(ids).last_hidden_state, model.nnlm(ids).last_hidden_state)
