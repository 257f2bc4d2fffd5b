"""RecurrentState as a transformers Cache: the operations of the generation machinery, crop, assisted decoding."""

from __future__ import annotations

import pytest
import torch
from model_test_utils import random_ids
from transformers.cache_utils import Cache

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    NNLMConfig,
    NNLMForCausalLM,
    RecurrentState,
    RNNConfig,
    RNNForCausalLM,
    TransformerForCausalLM,
    TransformerLMConfig,
)
from hf_seqmodels.models.cache_naming import cache_field, output_cache


def rnn_lm(seed: int = 0, **overrides) -> RNNForCausalLM:
    torch.manual_seed(seed)
    return RNNForCausalLM(RNNConfig.from_preset("tiny", **overrides)).eval()


def nnlm(seed: int = 0) -> NNLMForCausalLM:
    torch.manual_seed(seed)
    return NNLMForCausalLM(NNLMConfig.from_preset("tiny")).eval()


def state_of(model, ids, **kwargs) -> RecurrentState:
    return output_cache(model(ids, use_cache=True, **kwargs))


def assert_same_state(a: RecurrentState, b: RecurrentState) -> None:
    assert a.get_seq_length() == b.get_seq_length() and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y)


def test_the_state_is_a_cache_with_the_old_interface():
    state = state_of(rnn_lm(cell_type="lstm"), random_ids(3, 5, 99))
    assert isinstance(state, Cache)
    assert len(state) == 2 and state[0].shape == (3, 2, 16) and state.batch_size == 3
    assert state.get_seq_length() == 5 and state.get_max_length() == -1
    assert state.is_linear == [False] and not state.is_compileable and not state.is_croppable
    assert state.detach().seq_length == 5 and state.select(slice(0, 1)).batch_size == 1
    assert RecurrentState.empty().batch_size == -1 and not RecurrentState.empty().is_initialized
    with pytest.raises(ValueError, match="fixed-size recurrent state"):
        state.update(torch.zeros(1), torch.zeros(1), 0)


@pytest.mark.parametrize("build", [rnn_lm, nnlm])
def test_batch_operations_act_on_every_row(build):
    model = build()
    ids = random_ids(3, 6, 99)
    state = state_of(model, ids)
    state.batch_repeat_interleave(2)
    assert_same_state(state, state_of(model, ids.repeat_interleave(2, dim=0)))
    state.batch_select_indices(torch.tensor([4, 0]))
    assert_same_state(state, state_of(model, ids[[2, 0]]))
    state.reorder_cache(torch.tensor([1, 1]))
    assert_same_state(state, state_of(model, ids[[0, 0]]))


def test_a_state_of_other_rows_is_refused_with_advice():
    model = rnn_lm()
    state = state_of(model, random_ids(1, 4, 99))
    with pytest.raises(ValueError, match=r"1 rows but the input has 3.*batch_repeat_interleave"):
        model(random_ids(3, 2, 99), past_key_values=state)


def test_beam_search_continues_from_a_returned_state_after_repeating_its_rows():
    model = rnn_lm()
    prompt = random_ids(2, 4, 99)
    first = model.generate(prompt, max_new_tokens=3, min_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    state = output_cache(first)
    kw = dict(max_new_tokens=4, min_new_tokens=4, num_beams=3, do_sample=False)
    state.batch_repeat_interleave(3)
    continued = model.generate(first.sequences, **cache_field(state), **kw)
    assert torch.equal(continued, model.generate(first.sequences, **kw))


def test_crop_without_recorded_states_says_why_it_cannot():
    state = state_of(rnn_lm(), random_ids(2, 6, 99))
    with pytest.raises(ValueError, match=r"from 6 to 4 tokens: a recurrent state .*cannot be rolled back"):
        state.crop(-2)
    with pytest.raises(ValueError, match="negative number of tokens"):
        state.crop(3)
    state.crop(0)  # nothing to remove
    assert state.get_seq_length() == 6


@pytest.mark.parametrize("build", [rnn_lm, nnlm])
def test_recorded_states_crop_back_to_any_length_read_since(build):
    model = build()
    ids = random_ids(2, 9, 99)
    state = RecurrentState.empty()
    state.activate_past_recording()
    assert state.is_croppable
    state = state_of(model, ids[:, :4], past_key_values=state)  # a prompt of 4, read in one call
    for t in range(4, 9):  # then one token per call, as generate does
        state = state_of(model, ids[:, t : t + 1], past_key_values=state)
    for length in (7, 3, 1):
        state.crop(length - state.get_seq_length())
        assert_same_state(state, state_of(model, ids[:, :length]))
    with pytest.raises(ValueError, match="Recorded lengths: \\[0, 1\\]"):
        state.crop(-2)
    state.crop(-1)
    assert state.get_seq_length() == 0 and len(state) == 0  # the state before the first token
    torch.testing.assert_close(model(ids, past_key_values=state).logits, model(ids).logits)


def test_recording_reads_a_padded_prompt_as_one_call_does():
    model = rnn_lm(cell_type="gru")
    ids, mask = random_ids(2, 5, 99), torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    state = RecurrentState.empty()
    state.activate_past_recording()
    out = model(ids, attention_mask=mask, past_key_values=state, output_hidden_states=True)
    once = model(ids, attention_mask=mask, output_hidden_states=True)
    torch.testing.assert_close(out.logits, once.logits)
    for a, b in zip(out.hidden_states, once.hidden_states, strict=True):
        torch.testing.assert_close(a, b)
    assert_same_state(output_cache(out), output_cache(once))


def tiny_target() -> TransformerForCausalLM:
    torch.manual_seed(5)
    return TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", vocab_size=99)).eval()


@pytest.mark.parametrize("build", [rnn_lm, nnlm])
def test_an_rnn_or_nnlm_drafts_for_assisted_decoding(build, monkeypatch):
    """Greedy assisted decoding equals the target's own greedy search; the draft's rejected tokens are cropped."""
    target, draft = tiny_target(), build()
    crops = []
    crop = RecurrentState.crop
    monkeypatch.setattr(RecurrentState, "crop", lambda self, n: (crops.append(n), crop(self, n))[1])
    ids = random_ids(2, 5, 99)
    kw = dict(max_new_tokens=12, min_new_tokens=12, do_sample=False)
    for row in ids:  # assisted decoding takes one sequence at a time
        plain = target.generate(row[None], **kw)
        assert torch.equal(target.generate(row[None], assistant_model=draft, **kw), plain)
    assert any(n < 0 for n in crops)


def test_a_stateful_target_refuses_assisted_decoding_clearly():
    with pytest.raises(ValueError, match="assisted generation is not supported with stateful models"):
        rnn_lm().generate(random_ids(1, 4, 99), assistant_model=tiny_target(), max_new_tokens=3)
