"""Generation from the exported decoding graphs (encoder / decoder / decoder-with-past) in onnxruntime equals eager
``generate()`` token for token, greedy and beam search, with padded prompts and sources, for every generative head
of the registry and each of its variants: the categorical fields of its presets (attention wirings and scores,
GPT-style Transformer LMs) and every cell type and character encoder the config accepts. Sampling applies
transformers' logits warpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from transformers.generation.logits_process import (  # noqa: E402
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from hf_seqmodels.export import OnnxGenerator, export_generation  # noqa: E402
from hf_seqmodels.export.beam_search import BeamSearch  # noqa: E402
from hf_seqmodels.export.sampling import sample_tokens, warp_logits  # noqa: E402
from hf_seqmodels.models.char_encoder import CHAR_ENCODER_TYPES, CharWordEncoder, words_to_char_ids  # noqa: E402
from hf_seqmodels.models.recurrent_stack import CELL_TYPES  # noqa: E402
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS  # noqa: E402

VOCAB = 10  # a small vocabulary: random models then emit <eos> (id 3) often enough to end beams
#: config fields swept over all their values, with the fields set together with them
AXES = {"cell_type": (CELL_TYPES, ()), "char_encoder": (CHAR_ENCODER_TYPES, ()),
        "encoder_cell_type": (CELL_TYPES, ("decoder_cell_type",))}


def _variants() -> dict[str, tuple]:
    """``{id: (family, head, overrides of the tiny config)}`` for every generative head of the registry: the
    tiny config, each preset's categorical (str/bool) fields, and each value of the :data:`AXES` it has; an id
    names the preset or the field and value (variants equal to an earlier one are left out)."""
    variants = {}
    for family in FAMILY_DESCRIPTIONS:
        tiny = family.tiny_config()
        options = [(preset, {k: v for k, v in fields.items() if isinstance(v, (str, bool))})
                   for preset, fields in family.config_class.PRESETS.items()]
        for field, (values, together) in AXES.items():
            if hasattr(tiny, field):
                options += [(f"{field}={v}", {field: v, **dict.fromkeys(together, v)}) for v in values]
        for head in family.heads.values():
            if not head.can_generate():
                continue
            seen = []
            for label, overrides in options:
                changed = {k: v for k, v in overrides.items() if getattr(tiny, k) != v}
                if changed not in seen:
                    seen.append(changed)
                    variants[family.name if not changed else f"{family.name}-{label}"] = (family, head, changed)
    return variants


VARIANTS = _variants()
#: run on every test run: each generative head's tiny config, and the variants whose graphs differ most
CORE = {"nnlm", "rnn", "rnn-peephole-lstm", "rnn-char_encoder=cnn", "rnn_seq2seq", "transformer",
        "transformer_lm"}
#: variants not exported: their decoding graphs are a kept variant's with one element-wise function changed (the
#: encoder's ReLU for tanh) or one matrix fixed to the identity (Luong's dot score is the general one with W = I)
SAME_GRAPH_AS = {"rnn_seq2seq-encoder_cell_type=rnn_relu": "rnn_seq2seq-encoder_cell_type=rnn_tanh",
                 "rnn_seq2seq-luong-dot": "rnn_seq2seq-luong-general"}
VARIANT_PARAMS = [pytest.param(name, id=name, marks=() if name in CORE else pytest.mark.slow) for name in VARIANTS
                  if name not in SAME_GRAPH_AS]


def _config(family, overrides: dict):
    """The family's tiny config with ``overrides``; where the family's test sizes do not fit them (Luong's dot
    score and copy bridge need the encoder as wide as the decoder), the plain ``tiny`` preset with them."""
    from hf_seqmodels.models.config_utils import ConfigValidationError

    try:
        return family.tiny_config(vocab_size=VOCAB, **overrides)
    except ConfigValidationError:
        return family.config_class.from_preset("tiny", vocab_size=VOCAB, **overrides)


def _fill_char_tables(model: torch.nn.Module) -> None:
    """Give every token characters (a new model's table is empty), so that the character encoder matters."""
    for module in model.modules():
        if isinstance(module, CharWordEncoder):
            words = [f"{chr(97 + i % 26)}{i}" for i in range(module.token_chars.shape[0])]
            module.token_chars.copy_(torch.tensor(words_to_char_ids(words, module.char_vocab, module.max_word_length)))


@pytest.fixture(scope="module", params=VARIANT_PARAMS)
def exported(request, tmp_path_factory):
    """``(eager model, OnnxGenerator)``; weights drawn wider than the initialisation so that random models do not
    repeat one token."""
    family, head, overrides = VARIANTS[request.param]
    torch.manual_seed(0)
    model = head(_config(family, overrides)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
        _fill_char_tables(model)
    folder = tmp_path_factory.mktemp(request.param.replace("=", "_"))
    export_generation(model, folder, validate=False)
    return model, OnnxGenerator(folder)


def test_every_generative_head_has_variants():
    heads = {head for family in FAMILY_DESCRIPTIONS for head in family.heads.values() if head.can_generate()}
    assert {head for _, head, _ in VARIANTS.values()} == heads
    assert CORE | {"rnn-char_encoder=lstm", "rnn_seq2seq-luong-general", "transformer_lm-nanogpt-cpu"} <= set(VARIANTS)
    assert set(SAME_GRAPH_AS) | set(SAME_GRAPH_AS.values()) <= set(VARIANTS)  # the left-out ones and their twins


def test_a_generative_head_without_graphs_is_refused(tmp_path):
    """A model that generates but whose decoding graphs the package does not know is an error, not an export
    that silently leaves generation out."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=8, n_embd=8, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="GPT2LMHeadModel generates, but has no decoding graphs"):
        export_generation(model, tmp_path)


def _inputs(model, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids ``(3, 6)`` and a mask with padding: on the left of LM prompts, on the right of sources."""
    ids = torch.randint(4, VOCAB, (3, 6), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    if model.config.is_encoder_decoder:
        mask[0, -2:] = 0
    else:
        mask[0, :2] = 0
    return ids, mask


def test_exported_graphs_follow_the_spec(exported):
    model, generator = exported
    expected = {"step"} | ({"encoder"} if model.config.is_encoder_decoder else set())
    assert expected <= set(generator.sessions) <= expected | {"prefill"}
    step_inputs = generator.input_names["step"]
    assert any(n.startswith("past.") for n in step_inputs)
    assert generator.output_names["step"][0] == "logits"
    assert all(n.startswith("present.") for n in generator.output_names["step"][1:])


def test_greedy_equals_eager_generate(exported):
    model, generator = exported
    for seed in range(2):
        ids, mask = _inputs(model, seed)
        want = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False, num_beams=1)
        got = generator.greedy(ids.numpy(), mask.numpy(), max_new_tokens=10)
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("options", [dict(num_beams=3), dict(num_beams=2, length_penalty=0.5, early_stopping=True)])
def test_beam_search_equals_eager_generate(exported, options):
    model, generator = exported
    ids, mask = _inputs(model, 2)
    want = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, **options)
    got = generator.beam_search(ids.numpy(), mask.numpy(), max_new_tokens=8, **options)
    assert got.tolist() == want.tolist()


def test_sampling_top_k_1_is_greedy_and_a_seed_repeats(exported):
    model, generator = exported
    ids, mask = (t.numpy() for t in _inputs(model, 3))
    greedy = generator.greedy(ids, mask, max_new_tokens=6)
    assert generator.sample(ids, mask, max_new_tokens=6, top_k=1, seed=0).tolist() == greedy.tolist()
    assert generator.sample(ids, mask, max_new_tokens=6, top_p=1e-6, seed=1).tolist() == greedy.tolist()
    first = generator.sample(ids, mask, max_new_tokens=6, temperature=2.0, seed=7)
    assert generator.sample(ids, mask, max_new_tokens=6, temperature=2.0, seed=7).tolist() == first.tolist()


def test_generation_spec_names_graphs_and_ids(exported):
    model, generator = exported
    spec = generator.spec
    assert spec["eos_token_id"] == [model.config.eos_token_id]
    assert spec["pad_token_id"] == model.config.pad_token_id
    if model.config.is_encoder_decoder:
        assert spec["kind"] == "encoder-decoder"
        assert spec["decoder_start_token_id"] == model.config.decoder_start_token_id
    else:
        assert spec["kind"] == "decoder-only"
    if model.config.model_type == "hfsm_nnlm":  # the state is the window of the last n - 1 ids, pad ids at first
        assert spec["initial_state"] == {"0": {"shape": [model.config.context_size], "dtype": "int64",
                                               "fill": model.config.pad_token_id}}


def test_generator_refuses_bad_arguments(exported):
    _, generator = exported
    ids = np.full((2, 4), 5)
    with pytest.raises(ValueError, match="num_beams"):
        generator.beam_search(ids, num_beams=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generator.greedy(ids, max_new_tokens=0)
    with pytest.raises(ValueError, match="attention_mask"):
        generator.greedy(ids, np.ones((2, 3)))
    for bad in (dict(temperature=0.0), dict(top_k=-1), dict(top_p=1.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            generator.sample(ids, **bad)


def test_beam_search_keeps_finished_hypotheses():
    """Two beams over a 5-token vocabulary: the hypothesis that ends in <eos> (id 3) at the first step is kept
    aside, the beams run on until ``max_length``, and the short one wins on its length-normalised score."""
    search = BeamSearch(np.array([[2], [2]]), num_beams=2, eos_token_id=[3], pad_token_id=0, max_length=4)
    log_probs = np.log(np.array([[0.05, 0.05, 0.1, 0.4, 0.4]] * 2, dtype=np.float32))
    rows, tokens, over = search.step(log_probs)
    assert tokens.tolist() == [4, 2] and rows.tolist() == [0, 0] and not over  # <eos> left the running beams
    assert search.finished.tolist() == [[True, False]]
    uniform = np.log(np.full((2, 5), 0.2, dtype=np.float32))
    assert not search.step(uniform)[2]  # one finished slot is still empty: the search goes on
    assert search.step(uniform)[2]  # max_length
    assert search.result().tolist() == [[2, 3]]  # log 0.4 beats (log 0.4 + 2 log 0.2) / 3


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 50, 1.0), (0.7, 4, 1.0), (1.3, None, 0.8),
                                                       (0.5, 6, 0.6), (1.0, 1, 1.0), (2.0, 0, 0.3)])
def test_warpers_match_transformers(temperature, top_k, top_p):
    """The scores left by :func:`warp_logits` are those of transformers' warpers in ``generate()``'s order."""
    logits = torch.randn(6, 12, generator=torch.Generator().manual_seed(0)) * 3
    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    want = warpers(None, logits.clone()).numpy()
    got = warp_logits(logits.numpy(), temperature, top_k, top_p)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[~np.isinf(got)], want[~np.isinf(want)], rtol=1e-6)


def test_sample_tokens_follows_the_distribution():
    probs = np.array([0.5, 0.3, 0.2, 0.0], dtype=np.float32)
    scores = np.log(np.where(probs > 0, probs, 1.0)) + np.where(probs > 0, 0.0, -np.inf)
    draws = sample_tokens(np.repeat(scores[None], 20_000, axis=0), np.random.default_rng(0))
    frequencies = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(frequencies, probs, atol=0.015)  # 3.5 standard deviations at 20,000 draws
    assert frequencies[3] == 0
