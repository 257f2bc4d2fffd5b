"""Generation contract (transformers' GenerationTesterMixin): decoding modes with dict outputs, cache equals
no cache, left padding, constraints, continuing from a returned cache, Cache operations, inputs_embeds, static
cache and compilation."""

from __future__ import annotations

import pytest
import torch
from conformance_harness import ALL_CASES, HeadCase, cases
from transformers.cache_utils import Cache

from hf_seqmodels.example_inputs import FIRST_REGULAR_ID
from hf_seqmodels.models.cache_naming import cache_field, output_cache

NEW = 4
MODES = {
    "greedy": {"do_sample": False},
    "sample": {"do_sample": True, "top_k": 5},
    "beam": {"do_sample": False, "num_beams": 3, "num_return_sequences": 2},
    "beam_sample": {"do_sample": True, "num_beams": 3, "num_return_sequences": 2},
}


def generative(case: HeadCase) -> bool:
    return case.can_generate


def _prompt(case: HeadCase, config, batch_size: int = 2, seq_length: int = 5, seed: int = 0) -> dict:
    """``generate()`` inputs: the prompt (decoder-only) or the source (encoder-decoder) and its mask."""
    inputs = case.inputs(config, batch_size=batch_size, seq_length=seq_length, seed=seed, labels=False)
    return {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}


def _generate(model, prompt: dict, seed: int = 0, **kwargs):
    torch.manual_seed(seed)
    kwargs = {"max_new_tokens": NEW, "min_new_tokens": NEW, **kwargs}
    return model.generate(**prompt, **kwargs)


def _new_tokens(case: HeadCase, prompt: dict, sequences: torch.Tensor) -> torch.Tensor:
    return sequences[:, 1:] if case.caps.is_encoder_decoder else sequences[:, prompt["input_ids"].shape[1] :]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", cases("generate_dict_outputs", generative))
def test_generate_modes_with_scores_and_logits_in_a_dict(case: HeadCase, mode: str):
    model = case.model()
    prompt = _prompt(case, model.config)
    out = _generate(model, prompt, return_dict_in_generate=True, output_scores=True, output_logits=True,
                    **MODES[mode])
    rows = prompt["input_ids"].shape[0] * MODES[mode].get("num_return_sequences", 1)
    beams = prompt["input_ids"].shape[0] * MODES[mode].get("num_beams", 1)
    assert _new_tokens(case, prompt, out.sequences).shape == (rows, NEW)
    assert len(out.scores) == len(out.logits) == NEW
    for scores, logits in zip(out.scores, out.logits, strict=True):
        assert scores.shape == logits.shape == (beams, model.config.vocab_size)
    if "num_beams" in MODES[mode]:
        assert out.sequences_scores.shape == (rows,) and out.beam_indices.shape[0] == rows
    if mode == "greedy":
        # scores, not raw logits: min_new_tokens masks <eos>, which a tiny random model may rank first
        assert torch.equal(torch.stack(out.scores, dim=1).argmax(-1), _new_tokens(case, prompt, out.sequences))


@pytest.mark.parametrize("mode", ["greedy", "beam"])
@pytest.mark.parametrize("case", cases("generate_cache_equals_no_cache", generative))
def test_generate_with_and_without_the_cache_agree(case: HeadCase, mode: str):
    model = case.model()
    prompt = _prompt(case, model.config)
    kwargs = {**MODES[mode], "return_dict_in_generate": True, "output_scores": True}
    with_cache = _generate(model, prompt, use_cache=True, **kwargs)
    without = _generate(model, prompt, use_cache=False, **kwargs)
    assert torch.equal(with_cache.sequences, without.sequences)
    torch.testing.assert_close(torch.stack(with_cache.scores), torch.stack(without.scores), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("generate_output_states", generative))
def test_generate_returns_hidden_states_and_attentions_per_step(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    attentions = case.family.attentions(model.config)
    out = _generate(model, prompt, return_dict_in_generate=True, output_hidden_states=True,
                    output_attentions=bool(attentions))
    if case.caps.is_encoder_decoder:
        assert len(out.encoder_hidden_states) == case.family.hidden_states(model.config)["encoder_hidden_states"]
        assert len(out.decoder_hidden_states) == NEW
        if "cross_attentions" in attentions:
            assert len(out.cross_attentions) == NEW
            assert len(out.cross_attentions[0]) == attentions["cross_attentions"]
    else:
        assert len(out.hidden_states) == NEW
        assert len(out.hidden_states[0]) == case.family.hidden_states(model.config)["hidden_states"]
        if attentions:
            assert len(out.attentions) == NEW and len(out.attentions[0]) == attentions["attentions"]


@pytest.mark.parametrize("case", cases("generate_left_padding", generative))
def test_left_padding_gives_each_row_its_unpadded_result(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config, batch_size=2, seq_length=6)
    pad = model.config.pad_token_id
    mask = prompt["attention_mask"].clone()
    mask[0, :3] = 0
    ids = prompt["input_ids"].masked_fill(mask == 0, pad)
    logits = {"return_dict_in_generate": True, "output_logits": True}
    batched = _generate(model, {"input_ids": ids, "attention_mask": mask}, **logits)
    for row in range(2):
        keep = mask[row].bool()
        alone = {"input_ids": ids[row : row + 1, keep], "attention_mask": mask[row : row + 1, keep]}
        single = _generate(model, alone, **logits)
        assert torch.equal(_new_tokens(case, prompt, batched.sequences)[row], _new_tokens(case, alone, single.sequences)[0])
        torch.testing.assert_close(torch.stack(batched.logits, 1)[row], torch.stack(single.logits, 1)[0],
                                   atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("generate_constraints", generative))
def test_constraints_from_logits_processors_and_a_clear_error_for_force_words_ids(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    banned = int(_new_tokens(case, prompt, _generate(model, prompt))[0, 0])
    free = _new_tokens(case, prompt, _generate(model, prompt, bad_words_ids=[[banned]], num_beams=2))
    assert (free != banned).all()
    forced = FIRST_REGULAR_ID + 1
    only = _new_tokens(case, prompt, _generate(model, prompt, prefix_allowed_tokens_fn=lambda b, ids: [forced]))
    assert (only == forced).all()
    with pytest.raises(ValueError, match="trust_remote_code"):  # moved out of transformers, as for built-ins
        _generate(model, prompt, force_words_ids=[[forced]], num_beams=2)


# ------------------------------------------------------------- defects 5 and 11: the returned cache ----

def _continue(case: HeadCase, model, prompt: dict, sequences: torch.Tensor, cache, **kwargs) -> torch.Tensor:
    """The logits ``(batch, NEW, vocab)`` of the greedy continuation of ``sequences`` (the decoder side for
    encoder-decoders) with ``cache``: logits, not tokens, since a tiny random model often repeats one token."""
    extra = cache_field(cache) if cache is not None else {}
    kwargs.update(return_dict_in_generate=True, output_logits=True, do_sample=False)
    if case.caps.is_encoder_decoder:
        out = _generate(model, prompt, decoder_input_ids=sequences, **extra, **kwargs)
    else:
        mask = torch.cat([prompt["attention_mask"], torch.ones_like(sequences[:, prompt["input_ids"].shape[1] :])], 1)
        out = _generate(model, {"input_ids": sequences, "attention_mask": mask}, **extra, **kwargs)
    return torch.stack(out.logits, dim=1)


def _first_part(case: HeadCase, model, prompt: dict):
    out = _generate(model, prompt, return_dict_in_generate=True, max_new_tokens=3, min_new_tokens=3)
    extra = torch.full((out.sequences.shape[0], 2), FIRST_REGULAR_ID + 2)
    return torch.cat([out.sequences, extra], dim=1), output_cache(out)


@pytest.mark.parametrize("case", cases("continue_from_cache", generative))
def test_generation_continues_from_a_returned_cache_reading_only_new_tokens(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    longer, cache = _first_part(case, model, prompt)
    torch.testing.assert_close(_continue(case, model, prompt, longer, cache), _continue(case, model, prompt, longer, None))


@pytest.mark.parametrize("case", cases("forward_with_cache", generative))
def test_forward_in_two_parts_through_the_cache_equals_one_forward(case: HeadCase):
    """Reading a sequence in two calls, the second given the first's cache, gives the logits of one call."""
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    key = "decoder_input_ids" if case.caps.is_encoder_decoder else "input_ids"
    sequence = inputs.pop(key)
    if not case.caps.is_encoder_decoder:
        inputs.pop("attention_mask")
    with torch.no_grad():
        whole = model(**inputs, **{key: sequence}, use_cache=True).logits
        first = model(**inputs, **{key: sequence[:, :3]}, use_cache=True)
        second = model(**inputs, **{key: sequence[:, 3:]}, **cache_field(output_cache(first)), use_cache=True)
    torch.testing.assert_close(torch.cat([first.logits, second.logits], dim=1), whole, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("cache_operations", generative))
def test_the_cache_is_a_transformers_cache_with_working_batch_operations(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    longer, cache = _first_part(case, model, prompt)
    assert isinstance(cache, Cache), type(cache)
    assert cache.get_seq_length() == longer.shape[1] - 3  # the 2 appended tokens and the last one are unread
    reference = _continue(case, model, prompt, longer, _first_part(case, model, prompt)[1])

    repeated = _first_part(case, model, prompt)[1]
    repeated.batch_repeat_interleave(2)
    twice = {k: v.repeat_interleave(2, dim=0) for k, v in prompt.items()}
    torch.testing.assert_close(_continue(case, model, twice, longer.repeat_interleave(2, dim=0), repeated),
                               reference.repeat_interleave(2, dim=0))
    selected = _first_part(case, model, prompt)[1]
    selected.batch_select_indices(torch.tensor([1]))
    one = {k: v[1:] for k, v in prompt.items()}
    torch.testing.assert_close(_continue(case, model, one, longer[1:], selected), reference[1:])
    flipped = _first_part(case, model, prompt)[1]
    flipped.reorder_cache(torch.tensor([1, 0]))
    torch.testing.assert_close(
        _continue(case, model, {k: v.flip(0) for k, v in prompt.items()}, longer.flip(0), flipped), reference.flip(0))
    length = cache.get_seq_length()
    try:
        cache.crop(length - 1)
    except ValueError as error:  # a recurrent state cannot forget a token it has not recorded
        assert "crop" in str(error)
    else:
        assert cache.get_seq_length() == length - 1


def test_assisted_decoding_with_a_recurrent_draft_model_matches_greedy_search():
    """A decoder-only target with a stateful draft model of another family (the draft's cache is cropped)."""
    target_case = next(c for c in ALL_CASES if c.task == "AutoModelForCausalLM" and not c.caps.stateful_cache)
    draft_case = next(c for c in ALL_CASES if c.task == "AutoModelForCausalLM" and c.caps.stateful_cache
                      and c.family.name == "rnn")
    target, draft = target_case.model(), draft_case.model(vocab_size=target_case.config().vocab_size)
    prompt = _prompt(target_case, target.config, batch_size=1)
    greedy = _generate(target, prompt, do_sample=False)
    assisted = _generate(target, prompt, do_sample=False, assistant_model=draft)
    assert torch.equal(assisted, greedy)


@pytest.mark.parametrize("case", cases("prompt_lookup_decoding", lambda c: generative(c) and not c.caps.is_encoder_decoder))
def test_prompt_lookup_decoding_matches_greedy_search(case: HeadCase):
    """Candidates taken from the prompt are verified by the model and rolled back (``crop``) when rejected.
    transformers refuses assisted generation for stateful targets (RNN, NNLM) with a clear error."""
    model = case.model()
    prompt = _prompt(case, model.config, batch_size=1, seq_length=8)
    prompt["input_ids"][:, 4:] = prompt["input_ids"][:, :4]  # a repeated n-gram to look up
    kwargs = {"do_sample": False, "return_dict_in_generate": True, "output_logits": True}
    greedy = _generate(model, prompt, **kwargs)
    if case.caps.stateful_cache:
        with pytest.raises(ValueError, match="not supported with stateful models"):
            _generate(model, prompt, prompt_lookup_num_tokens=2, **kwargs)
        return
    lookup = _generate(model, prompt, prompt_lookup_num_tokens=2, **kwargs)
    assert torch.equal(lookup.sequences, greedy.sequences)


# ---------------------------------------------------------------- defects 6 and 12: embeds, static ----

@pytest.mark.parametrize("case", cases("generate_from_inputs_embeds",
                                       lambda c: generative(c) and c.caps.inputs_embeds and not c.caps.is_encoder_decoder))
def test_generate_from_inputs_embeds_and_continue_from_them(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    embed = model.get_input_embeddings()
    logits = {"return_dict_in_generate": True, "output_logits": True}
    from_ids = _generate(model, prompt, **logits)
    with torch.no_grad():
        embeds = embed(prompt["input_ids"])
    out = _generate(model, {"inputs_embeds": embeds, "attention_mask": prompt["attention_mask"]}, **logits)
    assert torch.equal(out.sequences, from_ids.sequences[:, prompt["input_ids"].shape[1] :])
    torch.testing.assert_close(torch.stack(out.logits), torch.stack(from_ids.logits), atol=1e-5, rtol=1e-4)
    full = torch.cat([prompt["input_ids"], out.sequences], dim=1)
    with torch.no_grad():
        more = _generate(model, {"inputs_embeds": embed(full[:, :-1]), "attention_mask": torch.ones_like(full[:, :-1])},
                         **cache_field(output_cache(out)))
    expected = _generate(model, {"input_ids": full[:, :-1], "attention_mask": torch.ones_like(full[:, :-1])})
    assert torch.equal(more, expected[:, full.shape[1] - 1 :])


@pytest.mark.parametrize("case", cases("static_cache", lambda c: generative(c) and c.caps.static_cache))
def test_static_cache_generation_equals_the_dynamic_cache(case: HeadCase):
    model = case.model()
    prompt = _prompt(case, model.config)
    kwargs = {"return_dict_in_generate": True, "output_logits": True, "do_sample": False}
    static = _generate(model, prompt, cache_implementation="static", **kwargs)
    dynamic = _generate(model, prompt, **kwargs)
    assert torch.equal(static.sequences, dynamic.sequences)
    torch.testing.assert_close(torch.stack(static.logits), torch.stack(dynamic.logits), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("compile_fullgraph_flag", lambda c: c.caps.static_cache))
def test_families_with_static_cache_declare_full_graph_compilation(case: HeadCase):
    assert case.model_class._can_compile_fullgraph


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("compile_fullgraph_forward", lambda c: c.caps.static_cache))
def test_compiled_full_graph_forward_equals_eager(case: HeadCase):
    torch._dynamo.reset()
    model = case.model()
    inputs = case.inputs(model.config)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        expected, got = model(**inputs), compiled(**inputs)
    torch.testing.assert_close(got.loss, expected.loss) if expected.get("loss") is not None else None
    for key in ("logits", "last_hidden_state", "start_logits", "prediction_logits"):
        if expected.get(key) is not None:
            torch.testing.assert_close(got[key], expected[key])


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("compiled_generation", lambda c: generative(c) and c.caps.static_cache))
def test_generation_with_a_full_graph_compiled_forward_and_a_static_cache(case: HeadCase):
    torch._dynamo.reset()
    model = case.model()
    prompt = _prompt(case, model.config)
    kwargs = {"do_sample": False, "return_dict_in_generate": True, "output_logits": True,
              "cache_implementation": "static"}
    eager = _generate(model, prompt, **kwargs)
    model.forward = torch.compile(model.forward, fullgraph=True, backend="eager")
    compiled = _generate(model, prompt, **kwargs)
    assert torch.equal(compiled.sequences, eager.sequences)
    torch.testing.assert_close(torch.stack(compiled.logits), torch.stack(eager.logits), atol=1e-5, rtol=1e-4)
