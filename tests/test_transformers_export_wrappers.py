"""transformers' own export wrappers (``transformers.integrations.executorch``, the path of its
``ExportTesterMixin``) on our models: the exported programs give the eager logits and greedy tokens."""

from __future__ import annotations

import pytest
import torch
from model_test_utils import random_ids
from transformers import DynamicCache
from transformers.integrations.executorch import (
    Seq2SeqLMExportableModule,
    TorchExportableModuleForDecoderOnlyLM,
    TorchExportableModuleWithStaticCache,
    convert_and_export_with_cache,
    export_with_dynamic_cache,
)

from hf_seqmodels import (
    NNLMConfig,
    NNLMForCausalLM,
    RNNConfig,
    RNNForCausalLM,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)

V = 99  # vocabulary of the tiny presets
MAX_CACHE_LEN = 16


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def causal_lm(seed: int = 4) -> TransformerForCausalLM:
    torch.manual_seed(seed)
    model = TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", normalize_before=True)).eval()
    # what the static-cache wrappers read, as for a built-in model
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": MAX_CACHE_LEN}
    return model


@pytest.mark.slow  # each torch.export takes 10-30 s on a CPU
@torch.no_grad()
def test_decoder_only_wrapper_generates_the_eager_greedy_tokens():
    model = causal_lm()
    prompt = random_ids(1, 4, V, seed=1)
    wrapper = TorchExportableModuleForDecoderOnlyLM(model)
    program = wrapper.export(input_ids=prompt[:, :1], cache_position=torch.tensor([0]))
    exported = TorchExportableModuleWithStaticCache.generate(program, prompt, max_new_tokens=6)
    eager = model.generate(prompt, max_new_tokens=6, do_sample=False)
    assert torch.equal(exported, eager)


@pytest.mark.slow
@torch.no_grad()
def test_exported_static_cache_steps_give_the_eager_logits():
    """convert_and_export_with_cache: one token per call at its cache position, the keys in the static cache."""
    model = causal_lm()
    tokens = random_ids(1, 6, V, seed=2)
    program = convert_and_export_with_cache(model).module()
    steps = [program(input_ids=tokens[:, t : t + 1], cache_position=torch.tensor([t])) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), model(tokens).logits, atol=1e-5, rtol=1e-5)
    again = program(input_ids=tokens[:, :1], cache_position=torch.tensor([0]))  # a new sequence from position 0
    torch.testing.assert_close(again, model(tokens[:, :1]).logits, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_export_with_dynamic_cache_gives_the_eager_logits_and_cache():
    model = causal_lm()
    tokens = random_ids(2, 5, V, seed=3)
    mask = torch.ones_like(tokens)
    mask[0, :2] = 0  # left padding
    program = export_with_dynamic_cache(model, tokens, mask).module()
    exported = program(input_ids=tokens, attention_mask=mask, cache=DynamicCache(config=model.config), use_cache=True)
    eager = model(tokens, attention_mask=mask, use_cache=True)
    real = mask.bool()
    torch.testing.assert_close(exported.logits[real], eager.logits[real], atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(exported.cache.layers, eager.cache.layers, strict=True):
        torch.testing.assert_close(ours.keys, theirs.keys)


@pytest.mark.slow
@torch.no_grad()
def test_seq2seq_wrapper_generates_the_eager_greedy_tokens():
    """Encoder and decoder exported apart; the decoder's self-attention keys in a static cache, its
    cross-attention keys projected from the encoder output. The wrapper starts decoding from token 0."""
    torch.manual_seed(6)
    model = TransformerForConditionalGeneration(TransformerConfig.from_preset("tiny", decoder_start_token_id=0,
                                                                              normalize_before=True)).eval()
    source = random_ids(1, 7, V, seed=4)
    wrapper = Seq2SeqLMExportableModule(model, max_hidden_seq_length=32, max_cache_length=MAX_CACHE_LEN).export()
    exported = wrapper.generate(source, max_new_tokens=6)  # the start token and 5 more
    eager = model.generate(source, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert exported == eager[0].tolist()
    longer = random_ids(1, 11, V, seed=5)  # the encoder and the cross-attention take any source length
    assert wrapper.generate(longer, max_new_tokens=6) == model.generate(longer, max_new_tokens=5, min_new_tokens=5,
                                                                        do_sample=False)[0].tolist()


def stateful(model_class):
    torch.manual_seed(0)
    config = (RNNConfig.from_preset("tiny", cell_type="lstm") if model_class is RNNForCausalLM
              else NNLMConfig.from_preset("tiny"))
    return model_class(config).eval()


REFUSAL = r"got a DynamicCache as its cache, but its memory is a RecurrentState .* not per-token attention keys"


@pytest.mark.parametrize("model_class", [RNNForCausalLM, NNLMForCausalLM])
def test_stateful_lms_refuse_a_key_value_cache_and_say_why(model_class):
    """A recurrent state cannot live in a key/value cache; the model says so instead of failing on a missing
    method of the cache deep inside its forward."""
    model = stateful(model_class)
    tokens = random_ids(1, 5, V)
    with pytest.raises(ValueError, match=REFUSAL):
        model(tokens, cache=DynamicCache())
    if model_class is RNNForCausalLM:  # (the NNLM's config has no layers for DynamicCache(config=...) to count)
        with pytest.raises(ValueError, match=REFUSAL):
            export_with_dynamic_cache(model, tokens, torch.ones_like(tokens))
