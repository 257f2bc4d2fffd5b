"""Generation from the exported decoding graphs (encoder / decoder / decoder-with-past) in onnxruntime equals eager
``generate()`` token for token, greedy and beam search, for the Transformer LM, the Transformer encoder-decoder and
the RNN encoder-decoder (Bahdanau and Luong wirings), with padded prompts and sources."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from hf_seqmodels.export import OnnxGenerator, export_generation  # noqa: E402
from hf_seqmodels.export.beam_search import BeamSearch  # noqa: E402
from hf_seqmodels.models import (  # noqa: E402
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)

VOCAB = 10  # a small vocabulary: random models then emit <eos> (id 3) often enough to end beams
CASES = {
    "transformer_lm": lambda: TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", vocab_size=VOCAB)),
    "transformer": lambda: TransformerForConditionalGeneration(
        TransformerConfig.from_preset("tiny", vocab_size=VOCAB, encoder_layers=1)),
    "rnn_seq2seq-bahdanau": lambda: RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset(
        "tiny", vocab_size=VOCAB, encoder_layers=1, decoder_layers=2)),
    "rnn_seq2seq-luong-dot-feeding": lambda: RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset(
        "tiny", vocab_size=VOCAB, encoder_layers=1, decoder_layers=1, attention_wiring="luong",
        attention_score="dot", input_feeding=True, bidirectional_encoder=False, encoder_cell_type="gru",
        decoder_cell_type="gru")),
}
EXPECTED_GRAPHS = {"transformer_lm": {"prefill", "step"}, "transformer": {"encoder", "prefill", "step"},
                   "rnn_seq2seq-bahdanau": {"encoder", "step"}, "rnn_seq2seq-luong-dot-feeding": {"encoder", "step"}}


@pytest.fixture(scope="module", params=list(CASES))
def exported(request, tmp_path_factory):
    """``(name, eager model, OnnxGenerator)``; weights drawn wider than the initialisation so that random models
    do not repeat one token."""
    torch.manual_seed(0)
    model = CASES[request.param]().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    folder = tmp_path_factory.mktemp(request.param)
    export_generation(model, folder, validate=False)
    return request.param, model, OnnxGenerator(folder)


def _inputs(name: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids ``(3, 6)`` and a mask with padding: on the left of LM prompts, on the right of sources."""
    ids = torch.randint(4, VOCAB, (3, 6), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    if name == "transformer_lm":
        mask[0, :2] = 0
    else:
        mask[0, -2:] = 0
    return ids, mask


def test_exported_graphs_follow_the_spec(exported):
    name, _, generator = exported
    assert set(generator.sessions) == EXPECTED_GRAPHS[name]
    step_inputs = generator.input_names["step"]
    assert any(n.startswith("past.") for n in step_inputs)
    assert generator.output_names["step"][0] == "logits"
    assert all(n.startswith("present.") for n in generator.output_names["step"][1:])


def test_greedy_equals_eager_generate(exported):
    name, model, generator = exported
    for seed in range(3):
        ids, mask = _inputs(name, seed)
        want = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False, num_beams=1)
        got = generator.greedy(ids.numpy(), mask.numpy(), max_new_tokens=10)
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("options", [dict(num_beams=3), dict(num_beams=2, length_penalty=0.5, early_stopping=True)])
def test_beam_search_equals_eager_generate(exported, options):
    name, model, generator = exported
    for seed in range(3):
        ids, mask = _inputs(name, seed)
        want = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, **options)
        got = generator.beam_search(ids.numpy(), mask.numpy(), max_new_tokens=8, **options)
        assert got.tolist() == want.tolist()


def test_generator_refuses_bad_arguments(exported):
    _, _, generator = exported
    ids = np.full((2, 4), 5)
    with pytest.raises(ValueError, match="num_beams"):
        generator.beam_search(ids, num_beams=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generator.greedy(ids, max_new_tokens=0)
    with pytest.raises(ValueError, match="attention_mask"):
        generator.greedy(ids, np.ones((2, 3)))


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


def test_generation_spec_names_graphs_and_ids(exported):
    name, model, generator = exported
    spec = generator.spec
    assert spec["eos_token_id"] == [model.config.eos_token_id]
    assert spec["pad_token_id"] == model.config.pad_token_id
    if name == "transformer_lm":
        assert spec["kind"] == "decoder-only"
    else:
        assert spec["kind"] == "encoder-decoder"
        assert spec["decoder_start_token_id"] == model.config.decoder_start_token_id
