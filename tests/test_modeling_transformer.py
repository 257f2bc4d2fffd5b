"""Tests of the Transformer family: the encoder-decoder, the decoder-only LM and their shared blocks."""

from __future__ import annotations

import math

import pytest
import torch
from model_test_utils import (
    left_pad,
    random_ids,
    right_pad,
)
from torch import nn
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
    TransformerLMModel,
    TransformerModel,
)
from hf_seqmodels.models.cache_naming import cache_field, output_cache
from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.models.positional_encoding import SinusoidalPositionalEncoding

V = 99  # vocabulary of the tiny presets


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def seq2seq(seed: int = 0, **overrides) -> TransformerForConditionalGeneration:
    torch.manual_seed(seed)
    return TransformerForConditionalGeneration(TransformerConfig.from_preset("tiny", **overrides)).eval()


def causal_lm(seed: int = 0, **overrides) -> TransformerForCausalLM:
    torch.manual_seed(seed)
    return TransformerForCausalLM(TransformerLMConfig.from_preset("tiny", **overrides)).eval()


# --- outputs and losses ---------------------------------------------------------------------------


def test_seq2seq_output_shapes():
    model = seq2seq(decoder_layers=3, decoder_attention_heads=2)
    src, tgt = random_ids(2, 7, V), random_ids(2, 5, V, seed=1)
    out = model(src, decoder_input_ids=tgt, output_attentions=True, output_hidden_states=True)
    assert out.logits.shape == (2, 5, V)
    assert out.encoder_last_hidden_state.shape == (2, 7, 16)
    assert [h.shape for h in out.encoder_hidden_states] == [(2, 7, 16)] * 3  # embeddings + 2 layers
    assert [a.shape for a in out.encoder_attentions] == [(2, 4, 7, 7)] * 2
    assert [h.shape for h in out.decoder_hidden_states] == [(2, 5, 16)] * 4
    assert [a.shape for a in out.decoder_attentions] == [(2, 2, 5, 5)] * 3
    assert [a.shape for a in out.cross_attentions] == [(2, 2, 5, 7)] * 3
    assert output_cache(out).get_seq_length() == 5
    base = TransformerModel(model.config).eval()(src, decoder_input_ids=tgt)
    assert base.last_hidden_state.shape == (2, 5, 16)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_seq2seq_loss_is_label_smoothed_cross_entropy_ignoring_minus_100(label_smoothing):
    model = seq2seq(label_smoothing=label_smoothing).train()
    src = random_ids(2, 6, V)
    labels = torch.tensor([[5, 6, 7, 3], [8, 3, -100, -100]])
    out = model(src, labels=labels)
    decoder_inputs = torch.tensor([[2, 5, 6, 7], [2, 8, 3, 0]])  # start token, labels shifted right, -100 -> pad
    model.eval()  # no dropout
    logits = model(src, decoder_input_ids=decoder_inputs).logits
    keep = labels != -100
    expected = nn.functional.cross_entropy(logits[keep], labels[keep], label_smoothing=label_smoothing)
    assert torch.allclose(model(src, labels=labels).loss, expected, atol=1e-6)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_causal_lm_loss_shifts_labels():
    model = causal_lm(label_smoothing=0.1)
    ids = random_ids(2, 7, V)
    out = model(ids, labels=ids)
    expected = nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1),
                                           label_smoothing=0.1)
    assert torch.allclose(out.loss, expected, atol=1e-6)


# --- the paper's components -------------------------------------------------------------------------


def test_sinusoidal_encoding_equals_the_formula():
    d = 6
    encoding = SinusoidalPositionalEncoding(d)(torch.arange(50)[None])[0]  # (50, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert math.isclose(encoding[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(encoding[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_embeddings_are_scaled_by_sqrt_d_model_plus_positions():
    model = seq2seq()
    embeddings = model.model.encoder.embeddings
    ids = random_ids(1, 4, V)
    expected = embeddings.embed_tokens(ids) * 4.0 + SinusoidalPositionalEncoding(16)(torch.arange(4)[None])
    assert torch.allclose(embeddings(ids, torch.arange(4)[None]), expected, atol=1e-6)


@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_changing_a_later_token_never_changes_an_earlier_logit(make):
    model = make()
    tokens = random_ids(1, 8, V)
    changed = tokens.clone()
    changed[0, 5] = (tokens[0, 5] + 1) % V
    if make is seq2seq:
        src = random_ids(1, 6, V, seed=3)
        before, after = model(src, decoder_input_ids=tokens).logits, model(src, decoder_input_ids=changed).logits
    else:
        before, after = model(tokens).logits, model(changed).logits
    assert torch.allclose(before[:, :5], after[:, :5], atol=1e-6)
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_eager_equals_sdpa_with_pre_norm_and_learned_positions():
    """The tiny preset itself is checked by tests/conformance; here its pre-norm variant with learned positions."""
    variant = dict(normalize_before=True, position_embedding_type="learned")
    rows = [random_ids(1, n, V, seed=n)[0] for n in (3, 7, 5)]
    src, src_mask = right_pad(rows)
    tgt = random_ids(3, 6, V, seed=9)
    outputs = {}
    for implementation in ("eager", "sdpa"):
        torch.manual_seed(0)
        config = TransformerConfig.from_preset("tiny", attn_implementation=implementation, **variant)
        model = TransformerForConditionalGeneration(config).eval()
        assert model.config._attn_implementation == implementation
        outputs[implementation] = model(src, attention_mask=src_mask, decoder_input_ids=tgt).logits
    assert torch.allclose(outputs["eager"], outputs["sdpa"], atol=1e-5)
    lm = {}
    for implementation in ("eager", "sdpa"):
        torch.manual_seed(0)
        config = TransformerLMConfig.from_preset("tiny", attn_implementation=implementation, **variant)
        ids, mask = left_pad(rows)
        lm[implementation] = TransformerForCausalLM(config).eval()(ids, attention_mask=mask).logits
    assert torch.allclose(lm["eager"][mask.bool()], lm["sdpa"][mask.bool()], atol=1e-5)


# --- cache, padding, generation ---------------------------------------------------------------------


def test_cross_attention_keys_are_computed_once():
    model = seq2seq()
    calls = []
    model.model.decoder.layers[0].cross_attn.k_proj.register_forward_hook(lambda *args: calls.append(1))
    model.generate(random_ids(1, 5, V), max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert len(calls) == 1


def test_padding_never_changes_the_encoder_decoder():
    model = seq2seq(decoder_layers=3)
    rows = [random_ids(1, n, V, seed=n)[0] for n in (3, 7, 5)]
    tgt = random_ids(3, 4, V, seed=1)
    alone = torch.cat([model(r[None], decoder_input_ids=tgt[i : i + 1]).logits for i, r in enumerate(rows)])
    for pad in (left_pad, right_pad):
        src, mask = pad(rows)
        assert torch.allclose(model(src, attention_mask=mask, decoder_input_ids=tgt).logits, alone, atol=1e-5)


@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_padded_batch_beam_search_finds_what_each_sentence_finds_alone(make):
    """Greedy search from a left-padded batch is checked by tests/conformance; beams repeat the padded rows."""
    model = make(seed=2)
    rows = [random_ids(1, n, V, seed=10 + n)[0] for n in (2, 6, 4)]
    ids, mask = left_pad(rows)
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, num_beams=3)
    batched = model.generate(ids, attention_mask=mask, **kw)
    for i, r in enumerate(rows):
        assert torch.equal(batched[i, -6:], model.generate(r[None], **kw)[0, -6:])


# --- static cache and compilation ----------------------------------------------------------------------


def padded_prompts() -> tuple[torch.Tensor, torch.Tensor]:
    return left_pad([random_ids(1, n, V, seed=20 + n)[0] for n in (3, 7, 5)])


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("mode", [dict(do_sample=False), dict(num_beams=3, num_return_sequences=2)])
@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_static_cache_generates_what_the_dynamic_cache_generates(make, mode, implementation):
    """generate(cache_implementation="static") used to fail on a mask/size mismatch in both models."""
    model = make(seed=5, attn_implementation=implementation)
    ids, mask = padded_prompts()
    kw = dict(max_new_tokens=7, min_new_tokens=7, **mode)
    dynamic = model.generate(ids, attention_mask=mask, **kw)
    static = model.generate(ids, attention_mask=mask, cache_implementation="static", return_dict_in_generate=True, **kw)
    assert torch.equal(static.sequences, dynamic)
    assert type(output_cache(static)).__name__ == ("EncoderDecoderCache" if make is seq2seq else "StaticCache")


def dynamo_graph_breaks(call) -> tuple[int, list[str]]:
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(call)()
    return explanation.graph_break_count, [str(reason.reason) for reason in explanation.break_reasons]


@pytest.mark.parametrize("variant", [dict(), dict(position_embedding_type="learned", normalize_before=True)])
@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_forward_traces_as_one_graph_without_breaks(make, variant):
    """No value-reading check (``.item()``, ``int(t)``, ``bool(t.any())``) stays on the traced path, with a
    padding mask, hidden states and attentions requested; the compiled forward gives the eager logits."""
    model = make(**variant)
    ids, mask = padded_prompts()
    kw = dict(attention_mask=mask, output_hidden_states=True, output_attentions=True)
    if make is seq2seq:
        kw["decoder_input_ids"] = random_ids(3, 4, V, seed=1)
    assert dynamo_graph_breaks(lambda: model(ids, **kw)) == (0, [])
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    assert torch.allclose(compiled(ids, **kw).logits, model(ids, **kw).logits, atol=1e-5)
    torch._dynamo.reset()


@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_compiled_static_cache_generation_is_one_graph_for_every_step(make):
    """What ``generate`` does on GPUs with a static cache: the decoding step compiled with fullgraph=True
    (here forced on the CPU), compiled once for all steps and giving the eager tokens."""
    from transformers import CompileConfig

    assert make()._can_compile_fullgraph
    model = make(seed=6)
    ids, mask = padded_prompts()
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    config = CompileConfig(fullgraph=True, backend=counting_backend, mode=None)
    config._compile_all_devices = True  # transformers compiles on accelerators only, unless told
    kw = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False)
    expected = model.generate(ids, attention_mask=mask, **kw)
    torch._dynamo.reset()
    try:
        compiled = model.generate(ids, attention_mask=mask, cache_implementation="static", compile_config=config, **kw)
    finally:
        torch._dynamo.reset()
    assert torch.equal(compiled, expected)
    assert len(graphs) == 1  # the prefill runs eagerly, the 7 decoding steps share one graph


# --- the transformers model contract: family-specific parts ----------------------------------------------


def test_generate_returns_per_layer_states_of_both_stacks():
    model = seq2seq(decoder_layers=3)
    out = model.generate(random_ids(2, 6, V), max_new_tokens=4, min_new_tokens=4, do_sample=False,
                         return_dict_in_generate=True, output_hidden_states=True, output_attentions=True)
    assert [h.shape for h in out.encoder_hidden_states] == [(2, 6, 16)] * 3
    assert [a.shape for a in out.encoder_attentions] == [(2, 4, 6, 6)] * 2
    assert len(out.decoder_hidden_states) == len(out.cross_attentions) == 4  # one per step
    assert [h.shape for h in out.decoder_hidden_states[2]] == [(2, 1, 16)] * 4  # embeddings + 3 layers
    assert [a.shape for a in out.cross_attentions[2]] == [(2, 4, 1, 6)] * 3
    assert [a.shape for a in out.decoder_attentions[2]] == [(2, 4, 1, 3)] * 3


def test_causal_lm_inputs_embeds_forward_generate_and_continue():
    model = causal_lm(seed=7)
    ids, mask = padded_prompts()
    embeds = model.get_input_embeddings()(ids)
    assert torch.allclose(model(inputs_embeds=embeds, attention_mask=mask).logits,
                          model(ids, attention_mask=mask).logits, atol=1e-6)
    kw = dict(do_sample=False, attention_mask=mask)
    from_ids = model.generate(ids, max_new_tokens=6, min_new_tokens=6, **kw)
    from_embeds = model.generate(inputs_embeds=embeds, max_new_tokens=6, min_new_tokens=6, **kw)
    assert torch.equal(from_embeds, from_ids[:, ids.shape[1]:])  # only the new tokens, as transformers does
    first = model.generate(inputs_embeds=embeds, max_new_tokens=3, min_new_tokens=3, return_dict_in_generate=True, **kw)
    longer = torch.cat([embeds, model.get_input_embeddings()(first.sequences)], dim=1)
    longer_mask = torch.cat([mask, torch.ones_like(first.sequences)], dim=1)
    rest = model.generate(inputs_embeds=longer, attention_mask=longer_mask, **cache_field(output_cache(first)), max_new_tokens=3,
                          min_new_tokens=3, do_sample=False)
    assert torch.equal(torch.cat([first.sequences, rest], dim=1), from_embeds)
    with pytest.raises(ValueError, match="exactly one of `input_ids` and `inputs_embeds`"):
        model(ids, inputs_embeds=embeds)


def test_encoder_decoder_inputs_embeds_give_the_ids_results():
    model = seq2seq()
    src, tgt = random_ids(2, 6, V), random_ids(2, 3, V, seed=1)
    embed = model.get_input_embeddings()
    assert torch.allclose(model(inputs_embeds=embed(src), decoder_inputs_embeds=embed(tgt)).logits,
                          model(src, decoder_input_ids=tgt).logits, atol=1e-6)


def test_init_weights_covers_the_add_and_norm_layer_norms():
    model = seq2seq(normalize_before=True)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert any(type(m) is not nn.LayerNorm for m in norms)  # AddNorm: no "LayerNorm" in its class name
    with torch.no_grad():
        for norm in norms:
            norm.weight.fill_(5.0), norm.bias.fill_(5.0)
    for norm in norms:
        model._init_weights(norm)
        assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and not norm.bias.any()


@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_loading_a_checkpoint_with_missing_weights_reports_and_initialises_them(tmp_path, make):
    """The encoder-decoder's shared embedding used to stay on the meta device, missing from missing_keys."""
    from accelerate import init_empty_weights
    from safetensors.torch import load_file, save_file

    model = make()
    model.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    dropped = {k for k in state if "embed_tokens" in k or "ffn_norm" in k}
    save_file({k: v for k, v in state.items() if k not in dropped}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    with init_empty_weights():
        empty = type(model)(model.config)
    assert empty.get_input_embeddings().weight.is_meta
    loaded, info = type(model).from_pretrained(tmp_path, output_loading_info=True)
    assert dropped <= info["missing_keys"]
    tensors = dict(loaded.named_parameters(remove_duplicate=False)) | dict(loaded.named_buffers())
    assert not [name for name, t in tensors.items() if t.is_meta]
    assert all(torch.isfinite(t).all() for t in tensors.values())
    embed = loaded.get_input_embeddings().weight
    assert 0.1 < embed.std().item() < 0.5  # N(0, 1/d_model), d_model = 16: std 0.25
    if make is seq2seq:
        assert loaded.model.decoder.embeddings.embed_tokens.weight is embed and loaded.lm_head.weight is embed
    norm = (loaded.model.encoder if make is seq2seq else loaded.model).layers[0].ffn_norm
    assert torch.equal(norm.weight, torch.ones(16)) and not norm.bias.any()
    kept = loaded.state_dict()
    assert all(torch.equal(kept[k], v) for k, v in state.items() if k not in dropped)


# --- tying, presets, configuration errors -------------------------------------------------------------


def test_three_way_two_way_and_no_tying():
    three = seq2seq()
    embed = three.model.encoder.embeddings.embed_tokens
    assert three.model.decoder.embeddings.embed_tokens.weight is embed.weight and three.lm_head.weight is embed.weight
    shared_untied = seq2seq(tie_word_embeddings=False)  # encoder and decoder still share, the output layer doesn't
    decoder_embed = shared_untied.model.decoder.embeddings.embed_tokens
    assert decoder_embed.weight is shared_untied.model.encoder.embeddings.embed_tokens.weight
    assert shared_untied.lm_head.weight is not decoder_embed.weight
    two = seq2seq(share_encoder_decoder_embeddings=False)
    assert two.lm_head.weight is two.model.decoder.embeddings.embed_tokens.weight
    assert two.model.encoder.embeddings.embed_tokens is not two.model.decoder.embeddings.embed_tokens
    untied = seq2seq(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    assert untied.lm_head.weight is not untied.model.decoder.embeddings.embed_tokens.weight
    lm = causal_lm()
    assert lm.lm_head.weight is lm.model.embeddings.embed_tokens.weight


@pytest.mark.parametrize("share, tie", [(True, True), (True, False), (False, True), (False, False)])
def test_save_and_load_keep_outputs_sharing_and_tying(tmp_path, share, tie):
    model = seq2seq(share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    model.save_pretrained(tmp_path)
    loaded = TransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    src, tgt = random_ids(2, 5, V), random_ids(2, 3, V, seed=1)
    assert torch.equal(model(src, decoder_input_ids=tgt).logits, loaded(src, decoder_input_ids=tgt).logits)
    embed = loaded.model.encoder.embeddings.embed_tokens
    assert (loaded.model.decoder.embeddings.embed_tokens.weight is embed.weight) == share
    assert (loaded.lm_head.weight is loaded.model.decoder.embeddings.embed_tokens.weight) == tie


# --- separate source and target vocabularies ----------------------------------------------------------

SOURCE_V = 150  # a source vocabulary larger than the tiny preset's 99 target tokens


def separate(seed: int = 0, **overrides) -> TransformerForConditionalGeneration:
    return seq2seq(seed, source_vocab_size=SOURCE_V, share_encoder_decoder_embeddings=False, **overrides)


def test_separate_vocabularies_size_the_encoder_by_the_source_and_the_output_by_the_target():
    model = separate()  # tie_word_embeddings (decoder input = output matrix) stays allowed
    assert model.get_input_embeddings().weight.shape == (SOURCE_V, 16)
    assert model.get_decoder_input_embeddings().weight.shape == (V, 16)
    assert model.lm_head.weight is model.get_decoder_input_embeddings().weight
    src = random_ids(2, 6, SOURCE_V, low=V)  # valid source ids that the target vocabulary does not have
    assert model(src, decoder_input_ids=random_ids(2, 3, V)).logits.shape == (2, 3, V)
    for kw in (dict(do_sample=False), dict(num_beams=3)):
        out = model.generate(src, max_new_tokens=5, min_new_tokens=5, **kw)
        assert out.shape == (2, 6) and int(out.max()) < V


def test_source_ids_are_checked_against_the_source_vocabulary():
    model = separate()
    with pytest.raises(ValueError, match=r"token id 150, outside the vocabulary \[0, 150\).*config.source_vocab_size=150"):
        model(torch.tensor([[5, 150, 3]]), decoder_input_ids=torch.tensor([[2]]))
    with pytest.raises(ValueError, match=r"token id 120.*config.vocab_size=99"):
        model(torch.tensor([[120, 3]]), decoder_input_ids=torch.tensor([[2, 120]]))
    with pytest.raises(ValueError, match=r"token id 120.*config.vocab_size=99"):  # shared: the one vocabulary
        seq2seq()(torch.tensor([[120, 3]]), decoder_input_ids=torch.tensor([[2]]))


def test_tying_encoder_and_decoder_embeddings_across_vocabularies_fails_at_config_time():
    message = (r"Invalid `share_encoder_decoder_embeddings`=True: expected False with separate source and target "
               r"vocabularies \(source_vocab_size=150, vocab_size=99\)")
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_preset("tiny", source_vocab_size=SOURCE_V)
    with pytest.raises(ValueError, match=r"`source_vocab_size`=0: expected an integer >= 1"):
        TransformerConfig.from_preset("tiny", source_vocab_size=0, share_encoder_decoder_embeddings=False)


def test_resize_token_embeddings_resizes_the_target_side_and_the_source_side_only_when_shared():
    model = separate()
    model.resize_token_embeddings(110)
    assert model.get_input_embeddings().num_embeddings == SOURCE_V
    assert model.get_decoder_input_embeddings().num_embeddings == model.lm_head.out_features == 110
    assert model.lm_head.weight is model.get_decoder_input_embeddings().weight
    assert (model.config.vocab_size, model.config.source_vocab_size) == (110, SOURCE_V)
    model.resize_source_token_embeddings(160)
    assert model.get_input_embeddings().num_embeddings == model.config.source_vocab_size == 160
    assert model(torch.tensor([[159, 3]]), decoder_input_ids=torch.tensor([[109]])).logits.shape == (1, 1, 110)
    three_way = seq2seq()
    three_way.resize_token_embeddings(110)
    embed = three_way.get_input_embeddings()
    assert embed.num_embeddings == 110 and three_way.get_decoder_input_embeddings().weight is embed.weight
    assert three_way.lm_head.weight is embed.weight and three_way.config.vocab_size == 110
    with pytest.raises(ValueError, match="source_vocab_size=None"):
        three_way.resize_source_token_embeddings(120)


def test_separate_vocabularies_save_and_load(tmp_path):
    model = separate()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert loaded.config.source_vocab_size == SOURCE_V
    src, tgt = random_ids(2, 5, SOURCE_V, low=V), random_ids(2, 3, V, seed=1)
    assert torch.equal(model(src, decoder_input_ids=tgt).logits, loaded(src, decoder_input_ids=tgt).logits)


def test_the_lm_base_model_is_the_body_of_the_head(tmp_path):
    """TransformerLMModel is ``model`` of TransformerForCausalLM: the head's logits are its output layer over the
    base model's last hidden state, the keys stay ``model.*`` and the head loads whole from the base model's folder
    (its output layer is the tied embedding)."""
    lm = causal_lm()
    ids = random_ids(2, 6, V)
    assert type(lm.model) is TransformerLMModel and lm.base_model is lm.model
    out = lm.model(ids, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2 and out.hidden_states[-1] is out.last_hidden_state
    torch.testing.assert_close(lm(ids).logits, lm.lm_head(out.last_hidden_state))
    first = lm.model(ids[:, :4], use_cache=True)
    rest = lm.model(ids[:, 4:], cache=output_cache(first)).last_hidden_state
    torch.testing.assert_close(rest, out.last_hidden_state[:, 4:], atol=1e-5, rtol=1e-4)
    assert isinstance(lm.model(ids, return_dict=False), tuple)
    assert "model.embeddings.embed_tokens.weight" in lm.state_dict()  # the keys of earlier checkpoints
    lm.model.save_pretrained(tmp_path / "base")
    head, info = AutoModelForCausalLM.from_pretrained(tmp_path / "base", output_loading_info=True)
    assert not info["missing_keys"]  # lm_head is tied to the embeddings
    torch.testing.assert_close(head.eval()(ids).logits, lm(ids).logits)


def test_seq2seq_generation_continues_from_a_returned_cache_reading_only_unread_tokens():
    """``generate(decoder_input_ids=whole prefix, cache=returned cache)`` feeds the decoder only what the cache
    has not read: the same logits as continuing without a cache, and a cache that grows by the new tokens only."""
    model = seq2seq()
    src = random_ids(2, 6, V)
    kw = dict(do_sample=False, return_dict_in_generate=True, output_logits=True)
    first = model.generate(src, max_new_tokens=3, min_new_tokens=3, **kw)
    prefix = torch.cat([first.sequences, torch.full((2, 2), 7)], dim=1)  # 4 + 2 tokens; the cache read 3
    assert output_cache(first).get_seq_length() == 3
    again = model.generate(src, decoder_input_ids=prefix, **cache_field(output_cache(first)), max_new_tokens=2,
                           min_new_tokens=2, **kw)
    fresh = model.generate(src, decoder_input_ids=prefix, max_new_tokens=2, min_new_tokens=2, **kw)
    torch.testing.assert_close(torch.stack(again.logits, 1), torch.stack(fresh.logits, 1), atol=1e-5, rtol=1e-4)
    assert output_cache(again).get_seq_length() == prefix.shape[1] + 1  # the last new token is not read


def test_seq2seq_beam_search_continues_from_a_cache_of_one_row_per_source():
    """Beams and returned sequences repeat the rows of a passed cache (``continue_from_cache``); a row count
    that is no multiple of the cache's is a ValueError naming both."""
    model = seq2seq()
    src = random_ids(2, 6, V)
    first = model.generate(src, max_new_tokens=3, min_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    prefix = torch.cat([first.sequences, torch.full((2, 2), 7)], dim=1)
    kw = dict(max_new_tokens=3, min_new_tokens=3, num_beams=2, num_return_sequences=2, return_dict_in_generate=True,
              output_scores=True)
    cached = model.generate(src, decoder_input_ids=prefix, **cache_field(output_cache(first)), **kw)
    fresh = model.generate(src, decoder_input_ids=prefix, **kw)
    assert torch.equal(cached.sequences, fresh.sequences)
    torch.testing.assert_close(cached.sequences_scores, fresh.sequences_scores, atol=1e-5, rtol=1e-4)
    first = model.generate(src, max_new_tokens=3, min_new_tokens=3, do_sample=False, return_dict_in_generate=True)
    with pytest.raises(ValueError, match="The cache holds 2 rows, which does not divide the 3 rows"):
        model.generate(src[:1].repeat(3, 1), decoder_input_ids=prefix[[0, 1, 0]], **cache_field(output_cache(first)),
                       max_new_tokens=2)


@pytest.mark.parametrize("preset, low, high", [("transformer-base", 60e6, 66e6), ("transformer-big", 205e6, 215e6)])
def test_presets_have_the_papers_sizes(preset, low, high):
    """Table 3 of the paper: 65M and 213M parameters (37k shared vocabulary, three-way tying)."""
    config = TransformerConfig.from_preset(preset)
    assert (config.encoder_layers, config.decoder_layers, config.label_smoothing) == (6, 6, 0.1)
    with torch.device("meta"):
        model = TransformerForConditionalGeneration(config)
    assert low < sum(p.numel() for p in model.parameters()) < high
    assert TransformerLMConfig.from_preset("gpt-1").num_hidden_layers == 12


def test_hf_names_map_to_the_config_fields():
    config = TransformerLMConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64)
    assert (config.d_model, config.decoder_layers, config.decoder_attention_heads, config.decoder_ffn_dim) == (
        32, 3, 4, 64)
    assert TransformerConfig(d_model=64, encoder_attention_heads=4, decoder_attention_heads=4).hidden_size == 64


@pytest.mark.parametrize(
    "overrides, field, value",
    [
        (dict(encoder_attention_heads=7), "encoder_attention_heads", 7),
        (dict(d_model=25, decoder_attention_heads=5, encoder_attention_heads=5), "d_model", 25),
        (dict(decoder_layers=0), "decoder_layers", 0),
        (dict(dropout=1.5), "dropout", 1.5),
        (dict(label_smoothing=-0.1), "label_smoothing", -0.1),
        (dict(position_embedding_type="rotary"), "position_embedding_type", "rotary"),
        (dict(activation_function="relu6x"), "activation_function", "relu6x"),
        (dict(decoder_start_token_id=40000), "decoder_start_token_id", 40000),
    ],
)
def test_bad_config_values_name_the_field_the_value_and_what_is_allowed(overrides, field, value):
    with pytest.raises(Exception, match=rf"`{field}`={value!r}: expected"):
        TransformerConfig(**overrides)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigValidationError, match="transformer-big"):
        TransformerConfig.from_preset("transformer-huge")


def test_learned_positions_refuse_inputs_past_their_length():
    model = causal_lm(position_embedding_type="learned", max_position_embeddings=8)
    assert model(random_ids(1, 8, V)).logits.shape == (1, 8, V)
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(random_ids(1, 9, V))


@pytest.mark.parametrize("use_reentrant", [None, True, False])
@pytest.mark.parametrize("make", [seq2seq, causal_lm])
def test_gradient_checkpointing_gives_the_same_gradients(make, use_reentrant):
    """Every parameter's gradient, with dropout on (same seed). Reentrant checkpointing used to backpropagate
    through the encoder once per decoder layer ("backward through the graph a second time")."""
    src, mask = left_pad([random_ids(1, n, V, seed=n)[0] for n in (6, 4)])
    labels = random_ids(2, 4, V, seed=1)
    grads = []
    for checkpointing in (False, True):
        model = make(dropout=0.1, attention_dropout=0.1).train()
        if checkpointing:
            kwargs = {} if use_reentrant is None else {"use_reentrant": use_reentrant}
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        torch.manual_seed(3)
        out = model(src, attention_mask=mask, labels=labels if make is seq2seq else src)
        out.loss.backward()
        assert output_cache(out) is None or not checkpointing  # checkpointed layers fill no cache
        grads.append({n: p.grad for n, p in model.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        assert grad is not None and grads[1][name] is not None, name
        assert torch.allclose(grad, grads[1][name], atol=1e-6), name


# --- parity with torch.nn.Transformer -----------------------------------------------------------------


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    theirs.out_proj.load_state_dict(ours.out_proj.state_dict())


def copy_feed_forward(ours, theirs) -> None:
    theirs.linear1.load_state_dict(ours.feed_forward.fc1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.fc2.state_dict())


@pytest.mark.parametrize("normalize_before", [False, True])
def test_parity_with_torch_nn_transformer(normalize_before):
    """Our weights copied into ``nn.Transformer`` (ReLU, same norm placement): same outputs. torch always
    ends both stacks with a LayerNorm; the paper's post-norm model has none, so it is removed there."""
    model = seq2seq(dropout=0.0, normalize_before=normalize_before)
    config = model.config
    reference = nn.Transformer(
        d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32, dropout=0.0,
        activation="relu", batch_first=True, norm_first=normalize_before, layer_norm_eps=config.layer_norm_eps,
    ).eval()
    encoder, decoder = model.model.encoder, model.model.decoder
    with torch.no_grad():
        for ours, theirs in zip(encoder.layers, reference.encoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_feed_forward(ours, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_norm.state_dict())
            theirs.norm2.load_state_dict(ours.ffn_norm.state_dict())
        for ours, theirs in zip(decoder.layers, reference.decoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_attention(ours.cross_attn, theirs.multihead_attn)
            copy_feed_forward(ours, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_norm.state_dict())
            theirs.norm2.load_state_dict(ours.cross_attn_norm.state_dict())
            theirs.norm3.load_state_dict(ours.ffn_norm.state_dict())
        if normalize_before:
            reference.encoder.norm.load_state_dict(encoder.final_norm.state_dict())
            reference.decoder.norm.load_state_dict(decoder.final_norm.state_dict())
        else:
            reference.encoder.norm = reference.decoder.norm = None

    src, src_mask = right_pad([random_ids(1, n, V, seed=n)[0] for n in (7, 4)])
    tgt = random_ids(2, 5, V, seed=5)
    ours = model(src, attention_mask=src_mask, decoder_input_ids=tgt)
    with torch.no_grad():
        padding = ~src_mask.bool()
        memory = reference.encoder(encoder.embeddings(src, torch.arange(7)[None]), src_key_padding_mask=padding)
        output = reference.decoder(
            decoder.embeddings(tgt, torch.arange(5)[None]), memory,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(5), memory_key_padding_mask=padding,
        )
    real = src_mask.bool()
    assert torch.allclose(ours.encoder_last_hidden_state[real], memory[real], atol=1e-5)
    assert torch.allclose(ours.logits, model.lm_head(output), atol=1e-5)


# --- learning ------------------------------------------------------------------------------------


def test_learns_to_reverse_a_sequence_in_a_short_cpu_run():
    """150 Adam steps on random 5-token sequences; greedy decoding then reverses unseen ones."""
    torch.manual_seed(0)
    config = TransformerConfig.from_preset(
        "tiny", vocab_size=14, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0,
    )
    model = TransformerForConditionalGeneration(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98))

    def batch(size: int, seed: int):
        src = random_ids(size, 5, 14, seed=seed)
        return src, torch.cat([src.flip(1), torch.full((size, 1), config.eos_token_id)], dim=1)

    for step in range(150):
        src, labels = batch(64, seed=step)
        loss = model(src, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    src, labels = batch(100, seed=10_000)
    generated = model.eval().generate(src, max_new_tokens=6, do_sample=False)
    accuracy = (generated[:, 1:] == labels).all(dim=1).float().mean().item()
    assert accuracy >= 0.9, f"reversed only {accuracy:.0%} of unseen sequences"
