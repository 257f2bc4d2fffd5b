"""The Transformer families and BERT run every attention implementation of transformers' interface (eager,
sdpa, flex attention, a registered function) with the same results, each with the mask format it reads, and
the keyword arguments of a model's forward reach the attention function."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers
from model_test_utils import left_pad, random_ids, right_pad
from packaging.version import Version
from torch.nn.attention import flex_attention as torch_flex
from transformers import AttentionInterface, masking_utils
from transformers.integrations import flex_attention as transformers_flex
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from hf_seqmodels import (
    BertConfig,
    BertForMaskedLM,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)
from hf_seqmodels.models.cache_naming import cache_field, output_cache

V = 99  # vocabulary of the tiny presets
IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")


@pytest.fixture(autouse=True)
def uncompiled_flex_attention(monkeypatch):
    """transformers compiles flex attention and its block masks with inductor, which takes 30-50 s per shape on
    a CPU here. torch's uncompiled ``flex_attention`` and ``create_block_mask`` are its reference implementation
    (the same ``score_mod`` / ``BlockMask`` semantics, the scores materialised): the models still build their
    masks with transformers' masking_utils and attend through transformers' ``flex_attention_forward``."""
    create_block_mask = masking_utils.create_block_mask
    monkeypatch.setattr(masking_utils, "create_block_mask",
                        lambda *args, _compile=False, **kwargs: create_block_mask(*args, **kwargs))
    monkeypatch.setattr(transformers_flex, "compile_friendly_flex_attention",
                        lambda query, key, value, training=False, **kwargs: torch_flex.flex_attention(
                            query, key, value, **kwargs))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield


def build(config_class, model_class, implementation: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    config = config_class.from_preset("tiny", attn_implementation=implementation, **overrides)
    model = model_class(config).eval()
    assert model.config._attn_implementation == implementation
    return model


def prompts() -> tuple[torch.Tensor, torch.Tensor]:
    return left_pad([random_ids(1, n, V, seed=30 + n)[0] for n in (3, 7, 5)])


@torch.no_grad()  # flex attention has no backward on a CPU
def test_causal_lm_gives_the_same_logits_and_tokens_with_every_implementation():
    ids, mask = prompts()
    logits, tokens = {}, {}
    for implementation in IMPLEMENTATIONS:
        model = build(TransformerLMConfig, TransformerForCausalLM, implementation, normalize_before=True)
        logits[implementation] = model(ids, attention_mask=mask).logits[mask.bool()]  # real positions
        tokens[implementation] = model.generate(ids, attention_mask=mask, max_new_tokens=3, min_new_tokens=3,
                                                do_sample=False)
    for implementation in IMPLEMENTATIONS[1:]:
        torch.testing.assert_close(logits[implementation], logits["eager"], atol=1e-5, rtol=1e-5)
        assert torch.equal(tokens[implementation], tokens["eager"]), implementation


@torch.no_grad()
def test_cached_flex_decoding_equals_recomputing_the_prefix():
    """A decoding step's flex mask comes from the cache (its length is the query offset)."""
    model = build(TransformerLMConfig, TransformerForCausalLM, "flex_attention")
    ids, mask = prompts()
    first = model(ids[:, :-2], attention_mask=mask[:, :-2], use_cache=True)
    step = model(ids[:, -2:], attention_mask=mask, **cache_field(output_cache(first)))
    full = model(ids, attention_mask=mask).logits
    torch.testing.assert_close(step.logits[:, -2:], full[:, -2:], atol=1e-5, rtol=1e-5)


@pytest.mark.xfail(Version(transformers.__version__) < Version("5.24"), strict=True, raises=AttributeError,
                   reason="transformers 5.23's generate() calls .contiguous() on the BlockMask it builds for flex "
                          "attention with a static cache, for any model (fixed in 5.24)")
@torch.no_grad()
def test_static_cache_generation_reads_the_block_mask_generate_builds():
    """With a static cache, generate() builds the 4-D mask itself (a BlockMask for flex attention), which the
    model uses as it is."""
    ids, mask = prompts()
    tokens = {}
    for implementation in ("sdpa", "flex_attention"):
        model = build(TransformerLMConfig, TransformerForCausalLM, implementation, seed=1)
        tokens[implementation] = model.generate(ids, attention_mask=mask, max_new_tokens=3, min_new_tokens=3,
                                                do_sample=False, cache_implementation="static")
    assert torch.equal(tokens["flex_attention"], tokens["sdpa"])


@torch.no_grad()
def test_encoder_decoder_gives_the_same_logits_and_tokens_with_every_implementation():
    """Padded sources: the encoder's self-attention and the decoder's cross-attention masks; padded targets:
    the decoder's causal mask with padding."""
    src, src_mask = right_pad([random_ids(1, n, V, seed=n)[0] for n in (3, 7, 5)])
    tgt, tgt_mask = right_pad([random_ids(1, n, V, seed=9 + n)[0] for n in (6, 2, 4)])
    logits, tokens = {}, {}
    for implementation in IMPLEMENTATIONS:
        model = build(TransformerConfig, TransformerForConditionalGeneration, implementation)
        out = model(src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
        logits[implementation] = out.logits[tgt_mask.bool()]
        tokens[implementation] = model.generate(src, attention_mask=src_mask, max_new_tokens=3, min_new_tokens=3,
                                                num_beams=2)
    for implementation in IMPLEMENTATIONS[1:]:
        torch.testing.assert_close(logits[implementation], logits["eager"], atol=1e-5, rtol=1e-5)
        assert torch.equal(tokens[implementation], tokens["eager"]), implementation


@torch.no_grad()
def test_bert_gives_the_same_logits_with_every_implementation():
    ids, mask = right_pad([random_ids(1, n, V, seed=n)[0] for n in (4, 9, 6)])
    logits = {}
    for implementation in IMPLEMENTATIONS:
        model = build(BertConfig, BertForMaskedLM, implementation)
        logits[implementation] = model(ids, attention_mask=mask).logits[mask.bool()]
    for implementation in IMPLEMENTATIONS[1:]:
        torch.testing.assert_close(logits[implementation], logits["eager"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_class", [TransformerForCausalLM, TransformerForConditionalGeneration, BertForMaskedLM])
def test_flags_say_what_the_models_support(model_class):
    assert model_class._supports_sdpa and model_class._supports_flex_attn
    assert model_class.is_backend_compatible()  # attention through ALL_ATTENTION_FUNCTIONS, kwargs passed down
    assert not model_class._supports_flash_attn  # flash attention is not checked here (no GPU)


def recording_attention(calls: list):
    def attend(module, query, key, value, attention_mask, **kwargs):
        calls.append((module, query.shape[2], key.shape[2], attention_mask, kwargs))
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    return attend


@pytest.mark.parametrize("family", ["causal_lm", "seq2seq", "bert"])
def test_forward_keywords_reach_a_registered_attention_function(family):
    calls = []
    AttentionInterface.register("hfsm_recording", recording_attention(calls))
    ids, mask = prompts()
    if family == "causal_lm":
        model = build(TransformerLMConfig, TransformerForCausalLM, "hfsm_recording")
        reference = build(TransformerLMConfig, TransformerForCausalLM, "sdpa")
        inputs = dict(input_ids=ids, attention_mask=mask)
    elif family == "seq2seq":
        model = build(TransformerConfig, TransformerForConditionalGeneration, "hfsm_recording")
        reference = build(TransformerConfig, TransformerForConditionalGeneration, "sdpa")
        inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=random_ids(3, 4, V))
    else:
        model = build(BertConfig, BertForMaskedLM, "hfsm_recording")
        reference = build(BertConfig, BertForMaskedLM, "sdpa")
        inputs = dict(input_ids=ids, attention_mask=mask)
    logits = model(**inputs, kernel_options={"marker": 7}).logits
    attentions = [m for m in model.modules() if type(m).__name__ == "MultiHeadAttention"]
    assert {id(call[0]) for call in calls} == {id(m) for m in attentions}  # every attention, cross ones included
    assert all(call[4]["kernel_options"] == {"marker": 7} for call in calls)
    padded = [call[3] for call in calls if family == "causal_lm" or not call[0].is_causal]  # padded keys
    assert padded and all(mask is not None and mask.dtype == torch.bool for mask in padded)
    real = mask.bool() if family != "seq2seq" else slice(None)
    torch.testing.assert_close(logits[real], reference(**inputs).logits[real], atol=1e-5, rtol=1e-5)


def test_projection_hooks_run_in_every_forward():
    """Queries, keys and values go through the projection modules, so their hooks (and adapters) always run."""
    model = build(TransformerLMConfig, TransformerForCausalLM, "sdpa")
    attention = model.model.layers[0].self_attn
    seen = []
    for projection in (attention.q_proj, attention.k_proj, attention.v_proj):
        projection.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    model(random_ids(2, 5, V))
    assert seen == [torch.Size([2, 5, 16])] * 3
