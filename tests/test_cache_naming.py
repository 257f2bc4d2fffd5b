"""The generation cache under both of transformers' names: ``past_key_values`` (up to 5.23) and ``cache`` (5.24+)."""

from __future__ import annotations

import pytest
import torch
import transformers
from model_test_utils import random_ids
from packaging.version import Version

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    NNLMConfig,
    NNLMForCausalLM,
    RNNConfig,
    RNNForCausalLM,
    RNNModel,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)
from hf_seqmodels.models.cache_naming import CACHE_NAME, cache_field, output_cache


def test_the_name_follows_the_installed_transformers():
    renamed = Version(transformers.__version__).release >= (5, 24)
    assert CACHE_NAME == ("cache" if renamed else "past_key_values")


def causal_lms():
    torch.manual_seed(0)
    return {
        "nnlm": NNLMForCausalLM(NNLMConfig.from_preset("tiny")),
        "rnn": RNNForCausalLM(RNNConfig.from_preset("tiny", cell_type="lstm")),
        "transformer": TransformerForCausalLM(TransformerLMConfig.from_preset("tiny")),
    }


def seq2seq_models():
    torch.manual_seed(0)
    return {
        "rnn_seq2seq": RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset("tiny")),
        "transformer": TransformerForConditionalGeneration(TransformerConfig.from_preset("tiny")),
    }


@pytest.mark.parametrize("name", ["nnlm", "rnn", "transformer"])
def test_a_causal_lm_continues_from_a_cache_passed_under_either_name(name):
    model = causal_lms()[name].eval()
    ids = random_ids(2, 7, model.config.vocab_size)
    whole = model(ids).logits
    for keyword in ("past_key_values", "cache"):
        first = model(ids[:, :4], use_cache=True)
        assert CACHE_NAME in first  # the field transformers' generate() reads back
        second = model(ids[:, 4:], use_cache=True, **{keyword: output_cache(first)})
        assert torch.allclose(second.logits, whole[:, 4:], atol=1e-5)
        assert output_cache(second).get_seq_length() == 7
    again = model(ids[:, :4], use_cache=True)
    with pytest.raises(ValueError, match="both as `cache` and as `past_key_values`"):
        model(ids[:, 4:], past_key_values=output_cache(again), cache=output_cache(again))


@pytest.mark.parametrize("name", ["rnn_seq2seq", "transformer"])
def test_an_encoder_decoder_continues_from_a_cache_passed_under_either_name(name):
    model = seq2seq_models()[name].eval()
    source = random_ids(2, 6, model.config.vocab_size)
    target = random_ids(2, 5, model.config.vocab_size, seed=1)
    whole = model(source, decoder_input_ids=target).logits
    for keyword in ("past_key_values", "cache"):
        first = model(source, decoder_input_ids=target[:, :2], use_cache=True)
        second = model(source, decoder_input_ids=target[:, 2:], use_cache=True, **{keyword: output_cache(first)})
        assert torch.allclose(second.logits, whole[:, 2:], atol=1e-5)


def test_the_rnn_base_model_output_reads_under_both_names():
    torch.manual_seed(0)
    model = RNNModel(RNNConfig.from_preset("tiny")).eval()
    out = model(random_ids(2, 5, model.config.vocab_size), use_cache=True)
    assert out.cache is out.past_key_values and out.cache.get_seq_length() == 5


@pytest.mark.parametrize("name", ["nnlm", "rnn", "transformer"])
def test_generate_returns_the_cache_and_continues_from_it(name):
    model = causal_lms()[name].eval()
    prompt = random_ids(1, 4, model.config.vocab_size)
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, pad_token_id=0)
    first = model.generate(prompt, return_dict_in_generate=True, **kw)
    assert output_cache(first).get_seq_length() == first.sequences.shape[1] - 1  # the last token is not read yet
    more = torch.cat([first.sequences, random_ids(1, 2, model.config.vocab_size, seed=3)], dim=1)
    continued = model.generate(more, **cache_field(output_cache(first)), **kw)
    assert torch.equal(continued, model.generate(more, **kw))


@pytest.mark.parametrize("name", ["nnlm", "rnn", "transformer"])
def test_the_old_name_warns_only_where_transformers_renamed_it(name, recwarn):
    """As transformers' built-in models do from 5.24: ``past_key_values=`` still works, with a FutureWarning."""
    model = causal_lms()[name].eval()
    ids = random_ids(2, 5, model.config.vocab_size)
    first = model(ids[:, :3], use_cache=True)
    model(ids[:, 3:], use_cache=True, **cache_field(output_cache(first)))
    assert not [w for w in recwarn if "`past_key_values` is deprecated" in str(w.message)]
    again = model(ids[:, :3], use_cache=True)
    model(ids[:, 3:], use_cache=True, past_key_values=output_cache(again))
    warned = [w for w in recwarn if "`past_key_values` is deprecated" in str(w.message)]
    assert len(warned) == (1 if CACHE_NAME == "cache" else 0)
