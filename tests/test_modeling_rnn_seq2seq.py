"""Tests of the RNN encoder-decoder with attention: score formulas, masking, loss, generation, coverage, loading."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
from model_test_utils import (
    checkpointing_runs,
    left_pad,
    random_ids,
    right_pad,
    run_in_python_without_package,
)
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM, pipeline
from transformers.cache_utils import Cache

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import RNNSeq2SeqConfig, RNNSeq2SeqForConditionalGeneration, RNNSeq2SeqModel
from hf_seqmodels.models.attention_state import coverage_penalty
from hf_seqmodels.models.cache_naming import CACHE_NAME, output_cache
from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.models.rnn_attention import AdditiveAttention, LuongAttention, attend

VARIANTS = {
    "bahdanau-additive-bilstm": dict(),
    "luong-dot-feed-gru-copy": dict(
        attention_score="dot", attention_wiring="luong", input_feeding=True, bidirectional_encoder=False,
        encoder_cell_type="gru", decoder_cell_type="gru", bridge="copy",
    ),
    "luong-general-fused": dict(attention_score="general", attention_wiring="luong", decoder_cell_type="gru"),
    "luong-concat-feed-rnn": dict(
        attention_score="concat", attention_wiring="luong", input_feeding=True, decoder_cell_type="rnn_tanh",
    ),
    "bahdanau-dot-zeros-bridge": dict(attention_score="dot", encoder_hidden_size=8, bridge="zeros"),
    "none": dict(attention_score="none", encoder_cell_type="gru"),
}
ATTENTIVE = [name for name in VARIANTS if name != "none"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(variant: str = "bahdanau-additive-bilstm", seed: int = 0, model_class=None, **overrides):
    torch.manual_seed(seed)
    config = RNNSeq2SeqConfig.from_preset("tiny", **{**VARIANTS[variant], **overrides})
    return (model_class or RNNSeq2SeqForConditionalGeneration)(config).eval()


def padded_sources(pad=right_pad, lengths=(3, 7, 5)):
    rows = [random_ids(1, n, 99, seed=n)[0] for n in lengths]
    return rows, *pad(rows)


# --- score functions, checked against the papers' formulas written out one pair at a time -----------


@torch.no_grad()
def by_hand(formula, query, memory):
    """``formula(s, h) -> scalar`` evaluated for every (batch, target step, source position)."""
    batch, steps, _ = query.shape
    return torch.tensor([[[float(formula(query[b, t], memory[b, i])) for i in range(memory.shape[1])]
                          for t in range(steps)] for b in range(batch)])


def test_additive_score_is_bahdanau_formula():
    torch.manual_seed(0)
    scorer = AdditiveAttention(query_size=5, memory_size=6, attention_size=4)
    query, memory = torch.randn(2, 3, 5), torch.randn(2, 4, 6)
    W_a, U_a, v_a = scorer.query_proj.weight, scorer.memory_proj.weight, scorer.score_proj.weight[0]
    expected = by_hand(lambda s, h: v_a @ torch.tanh(W_a @ s + U_a @ h), query, memory)
    assert torch.allclose(scorer(query, scorer.prepare(memory)), expected, atol=1e-6)


@pytest.mark.parametrize("method", ["dot", "general", "concat"])
def test_luong_scores_are_the_paper_formulas(method):
    torch.manual_seed(0)
    memory_size = 5 if method == "dot" else 6
    scorer = LuongAttention(method, query_size=5, memory_size=memory_size, attention_size=4)
    query, memory = torch.randn(2, 3, 5), torch.randn(2, 4, memory_size)
    formulas = {
        "dot": lambda s, h: s @ h,
        "general": lambda s, h: s @ scorer.memory_proj.weight @ h,
        "concat": lambda s, h: scorer.score_proj.weight[0] @ torch.tanh(scorer.concat_proj.weight @ torch.cat([s, h])),
    }
    expected = by_hand(formulas[method], query, memory)
    assert torch.allclose(scorer(query, scorer.prepare(memory)), expected, atol=1e-6)


def test_attend_is_a_softmax_over_real_positions_only():
    scores, memory = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    mask = torch.tensor([[True, True, True, True], [False, True, True, False]])
    context, weights = attend(scores, memory, mask)
    assert torch.all(weights[1, :, [0, 3]] == 0)
    expected = scores[1, :, 1:3].softmax(-1)
    assert torch.allclose(weights[1, :, 1:3], expected) and torch.allclose(context[1], expected @ memory[1, 1:3])


# --- the model: shapes, masking, loss ------------------------------------------------------------------


@pytest.mark.parametrize("variant", ATTENTIVE)
def test_attention_weights_sum_to_one_and_are_zero_on_padding(variant):
    model = tiny_model(variant)
    _, ids, mask = padded_sources(left_pad)
    out = model(ids, attention_mask=mask, decoder_input_ids=random_ids(3, 4, 99), output_attentions=True)
    (weights,) = out.cross_attentions
    assert weights.shape == (3, 1, 4, ids.shape[1])
    assert torch.all(weights.masked_select(~mask.bool()[:, None, None, :]) == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 1, 4), atol=1e-6)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("pad", [left_pad, right_pad])
def test_source_padding_never_changes_the_logits(variant, pad):
    model = tiny_model(variant)
    rows, ids, mask = padded_sources(pad)
    targets = random_ids(3, 5, 99, seed=9)
    batched = model(ids, attention_mask=mask, decoder_input_ids=targets).logits
    alone = torch.cat([model(r[None], decoder_input_ids=targets[i : i + 1]).logits for i, r in enumerate(rows)])
    assert torch.allclose(batched, alone, atol=1e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_loss_is_teacher_forced_cross_entropy_and_backpropagates(variant):
    model = tiny_model(variant, label_smoothing=0.1).train()
    labels = random_ids(2, 6, 99)
    labels[1, 4:] = -100
    out = model(random_ids(2, 5, 99), labels=labels)
    assert out.logits.shape == (2, 6, 99)
    keep = labels != -100
    expected = F.cross_entropy(out.logits[keep], labels[keep], label_smoothing=0.1)
    assert torch.allclose(out.loss, expected, atol=1e-6)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-general-fused"])
def test_activation_checkpointing_recomputes_encoder_and_decoder_and_keeps_the_gradients(variant):
    source, labels = random_ids(2, 5, 99), random_ids(2, 6, 99)
    runs = {}
    for side in ("encoder", "decoder"):
        runs[side] = checkpointing_runs(lambda: tiny_model(variant, hidden_dropout_prob=0.3),
                                        lambda model: model(source, labels=labels).loss,
                                        lambda model, side=side: getattr(model.model, side).rnn.rnn)
    steps = 1 if variant == "luong-general-fused" else labels.shape[1]  # Bahdanau's decoder steps through time
    assert [calls for _, calls in runs["encoder"]] == [1, 2]
    assert [calls for _, calls in runs["decoder"]] == [steps, 2 * steps]
    (plain, _), (recomputed, _) = runs["encoder"]
    assert plain.keys() == recomputed.keys()
    for name in plain:
        torch.testing.assert_close(recomputed[name], plain[name], msg=name)


def test_labels_are_shifted_right_after_the_start_token():
    model = tiny_model()
    src, labels = random_ids(2, 5, 99), random_ids(2, 4, 99, seed=1)
    shifted = torch.cat([torch.full((2, 1), model.config.decoder_start_token_id), labels[:, :-1]], dim=1)
    assert torch.equal(model(src, labels=labels).logits, model(src, decoder_input_ids=shifted).logits)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_stepping_with_the_state_equals_one_teacher_forced_pass(variant):
    model = tiny_model(variant)
    src, tgt = random_ids(2, 5, 99), random_ids(2, 6, 99, seed=1)
    full = model(src, decoder_input_ids=tgt).logits
    encoder_outputs = model.get_encoder()(src)
    state, steps = None, []
    for t in range(tgt.shape[1]):
        out = model(encoder_outputs=encoder_outputs, decoder_input_ids=tgt[:, t : t + 1], past_key_values=state)
        state = output_cache(out)
        steps.append(out.logits)
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert state.get_seq_length() == 6


def test_base_model_outputs():
    model = tiny_model(model_class=RNNSeq2SeqModel)
    out = model(random_ids(2, 5, 99), decoder_input_ids=random_ids(2, 3, 99))
    assert out.last_hidden_state.shape == (2, 3, 16 + 32)  # Bahdanau o_t = [s_t; c_t]
    assert out.encoder_last_hidden_state.shape == (2, 5, 32)


def test_tied_embeddings_with_and_without_projection():
    same = tiny_model("luong-general-fused", tie_word_embeddings=True, embedding_size=16)
    assert same.lm_head.weight is same.model.decoder.embed_tokens.weight and same.output_projection is None
    projected = tiny_model(tie_word_embeddings=True)  # o_t has 48 features, embeddings 12
    assert projected.lm_head.weight is projected.model.decoder.embed_tokens.weight
    assert projected.output_projection.weight.shape == (12, 48)
    assert projected(random_ids(1, 4, 99), decoder_input_ids=random_ids(1, 2, 99)).logits.shape == (1, 2, 99)


# --- separate source and target vocabularies ------------------------------------------------------------

SOURCE_V = 150  # a source vocabulary larger than the tiny preset's 99 target tokens


@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-dot-feed-gru-copy"])
def test_separate_vocabularies_size_the_encoder_by_the_source_and_the_output_by_the_target(variant):
    model = tiny_model(variant, source_vocab_size=SOURCE_V, tie_word_embeddings=True)  # decoder in/out tying is fine
    assert model.get_input_embeddings().weight.shape == (SOURCE_V, 12)
    assert model.get_decoder_input_embeddings().weight.shape == (99, 12)
    assert model.lm_head.weight is model.get_decoder_input_embeddings().weight
    src = random_ids(2, 5, SOURCE_V, low=99)  # valid source ids that the target vocabulary does not have
    assert model(src, decoder_input_ids=random_ids(2, 3, 99)).logits.shape == (2, 3, 99)
    out = model.generate(src, num_beams=2, **GENERATE)
    assert out.shape == (2, 8) and int(out.max()) < 99


def test_source_ids_are_checked_against_the_source_vocabulary():
    model = tiny_model(source_vocab_size=SOURCE_V)
    with pytest.raises(ValueError, match=r"`input_ids` contains token id 150, outside the vocabulary \[0, 150\) of "
                                         r"this model \(config.source_vocab_size=150\)"):
        model(torch.tensor([[5, 150, 3]]), decoder_input_ids=torch.tensor([[2]]))
    with pytest.raises(ValueError, match=r"`decoder_input_ids` contains token id 120.*config.vocab_size=99"):
        model(torch.tensor([[120, 3]]), decoder_input_ids=torch.tensor([[2, 120]]))
    with pytest.raises(ValueError, match=r"config.vocab_size=99"):  # shared: the one vocabulary
        tiny_model()(torch.tensor([[120, 3]]), decoder_input_ids=torch.tensor([[2]]))


def test_resize_token_embeddings_resizes_the_target_side_and_the_source_side_only_when_shared():
    separate = tiny_model(source_vocab_size=SOURCE_V, tie_word_embeddings=True)
    separate.resize_token_embeddings(110)
    assert separate.get_input_embeddings().num_embeddings == SOURCE_V
    assert separate.get_decoder_input_embeddings().num_embeddings == 110 and separate.lm_head.out_features == 110
    assert separate.lm_head.weight is separate.get_decoder_input_embeddings().weight
    assert (separate.config.vocab_size, separate.config.source_vocab_size) == (110, SOURCE_V)
    separate.resize_source_token_embeddings(160)
    assert separate.get_input_embeddings().num_embeddings == separate.config.source_vocab_size == 160
    assert separate(torch.tensor([[159, 3]]), decoder_input_ids=torch.tensor([[109]])).logits.shape == (1, 1, 110)
    shared = tiny_model()
    shared.resize_token_embeddings(110)
    assert shared.get_input_embeddings().num_embeddings == shared.get_decoder_input_embeddings().num_embeddings == 110
    assert shared(torch.tensor([[109, 3]]), decoder_input_ids=torch.tensor([[109]])).logits.shape == (1, 1, 110)
    with pytest.raises(ValueError, match="source_vocab_size=None"):
        shared.resize_source_token_embeddings(120)


def test_separate_vocabularies_save_and_load(tmp_path):
    model = tiny_model(source_vocab_size=SOURCE_V)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert loaded.config.source_vocab_size == SOURCE_V
    src = random_ids(2, 5, SOURCE_V, low=99)
    assert torch.equal(model.generate(src, **GENERATE), loaded.generate(src, **GENERATE))


# --- generation -------------------------------------------------------------------------------------

GENERATE = dict(max_new_tokens=7, min_new_tokens=7)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cache_gives_the_tokens_of_recomputation(variant):
    model = tiny_model(variant)
    _, ids, mask = padded_sources()
    for extra in (dict(do_sample=False), dict(num_beams=3, num_return_sequences=2, length_penalty=0.7,
                                                no_repeat_ngram_size=2)):
        cached = model.generate(ids, attention_mask=mask, **GENERATE, **extra)
        assert torch.equal(cached, model.generate(ids, attention_mask=mask, use_cache=False, **GENERATE, **extra))
    torch.manual_seed(7)
    sampled = model.generate(ids, attention_mask=mask, do_sample=True, top_k=20, **GENERATE)
    torch.manual_seed(7)
    assert torch.equal(sampled, model.generate(ids, attention_mask=mask, do_sample=True, top_k=20, use_cache=False,
                                               **GENERATE))


@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-general-fused"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_padded_batch_generates_what_each_sentence_generates_alone(variant, num_beams):
    model = tiny_model(variant)
    rows, ids, mask = padded_sources(left_pad)
    kw = dict(GENERATE, num_beams=num_beams, do_sample=False)
    batched = model.generate(ids, attention_mask=mask, **kw)
    for i, row in enumerate(rows):
        assert torch.equal(batched[i], model.generate(row[None], **kw)[0])


@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-general-fused", "luong-concat-feed-rnn"])
def test_decoding_projects_the_encoder_outputs_for_attention_once_per_generate_call(variant, monkeypatch):
    """``U_a h_j`` (Bahdanau) / ``W_a h_j`` (Luong) do not depend on the step: the cache keeps them with the
    encoder outputs they came from. A step on other encoder outputs with the same cache projects those."""
    model = tiny_model(variant)
    attention = model.model.decoder.attention
    projected = []
    prepare = attention.prepare
    monkeypatch.setattr(attention, "prepare", lambda memory: projected.append(memory) or prepare(memory))
    _, ids, mask = padded_sources()
    for kw in (dict(do_sample=False), dict(num_beams=3)):
        projected.clear()
        out = model.generate(ids, attention_mask=mask, **GENERATE, **kw)
        assert out.shape[1] > 2 and len(projected) == 1, kw
    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=out[:, :1], use_cache=True)
    other = model.get_encoder()(ids.flip(0), attention_mask=mask.flip(0))
    projected.clear()
    step = model(encoder_outputs=other, attention_mask=mask.flip(0), decoder_input_ids=out[:, 1:2],
                 past_key_values=output_cache(first), use_cache=True)
    assert len(projected) == 1 and projected[0] is other.last_hidden_state
    assert output_cache(step).attention_keys(other.last_hidden_state) is not None
    assert output_cache(step).attention_keys(first.encoder_last_hidden_state) is None


def test_generation_reuses_encoder_outputs():
    model = tiny_model()
    _, ids, mask = padded_sources()
    encoder_outputs = model.get_encoder()(ids, attention_mask=mask)
    for kw in (dict(do_sample=False), dict(num_beams=3)):
        direct = model.generate(ids, attention_mask=mask, **GENERATE, **kw)
        reused = model.generate(encoder_outputs=encoder_outputs, attention_mask=mask, **GENERATE, **kw)
        assert torch.equal(direct, reused)


# --- coverage penalty (Wu et al. 2016) ---------------------------------------------------------------


def teacher_forced_score(model, ids, mask, sequences, beta):
    """``log P(Y|X) + β Σ_i log(min(Σ_j α_{j,i}, 1))`` of each finished sequence, by one forward pass."""
    with torch.no_grad():
        out = model(ids, attention_mask=mask, decoder_input_ids=sequences[:, :-1], output_attentions=True)
    log_p = out.logits.log_softmax(-1).gather(-1, sequences[:, 1:, None]).sum(dim=(1, 2))
    coverage = out.cross_attentions[0][:, 0].sum(dim=1)  # (B, S)
    return log_p + beta * coverage_penalty(coverage, mask.bool()), coverage_penalty(coverage, mask.bool())


def test_coverage_penalty_gives_wu_scores_and_favours_covering_hypotheses():
    """Peaky attention (large weights) makes coverage differ between hypotheses."""
    model = tiny_model("luong-dot-feed-gru-copy", init_range=1.0)
    _, ids, mask = padded_sources(lengths=(6, 8, 7))
    kw = dict(num_beams=4, length_penalty=0.0, output_scores=True, return_dict_in_generate=True, **GENERATE)
    plain = model.generate(ids, attention_mask=mask, **kw)
    covered = model.generate(ids, attention_mask=mask, coverage_penalty=1.0, **kw)
    score, cp_covered = teacher_forced_score(model, ids, mask, covered.sequences, beta=1.0)
    assert torch.allclose(covered.sequences_scores, score, atol=1e-4)  # exactly log P + β cp, as in the paper
    _, cp_plain = teacher_forced_score(model, ids, mask, plain.sequences, beta=1.0)
    assert not torch.equal(covered.sequences, plain.sequences)
    assert cp_covered.sum() > cp_plain.sum() + 1.0  # the chosen translations cover the source better


def test_coverage_penalty_refuses_settings_where_it_would_do_nothing():
    with pytest.raises(ValueError, match="num_beams > 1"):
        tiny_model().generate(random_ids(1, 4, 99), coverage_penalty=0.2)
    with pytest.raises(ValueError, match="attention_score='none'"):
        tiny_model("none").generate(random_ids(1, 4, 99), coverage_penalty=0.2, num_beams=2)


# --- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, field, value",
    [
        (dict(encoder_cell_type="transformer"), "encoder_cell_type", "transformer"),
        (dict(attention_score="multiplicative"), "attention_score", "multiplicative"),
        (dict(attention_wiring="vaswani"), "attention_wiring", "vaswani"),
        (dict(bridge="mean"), "bridge", "mean"),
        (dict(hidden_size=0), "hidden_size", 0),
        (dict(label_smoothing=1.0), "label_smoothing", 1.0),
        (dict(decoder_start_token_id=500), "decoder_start_token_id", 500),
        (dict(attention_score="dot"), "attention_score", "dot"),  # bidirectional memory 32 != hidden 16
        (dict(input_feeding=True), "input_feeding", True),  # Bahdanau wiring has no input feeding
        (dict(attention_score="none", bridge="zeros"), "bridge", "zeros"),
        (dict(bridge="copy", encoder_layers=1), "bridge", "copy"),
        (dict(source_vocab_size=0), "source_vocab_size", 0),
    ],
)
def test_bad_config_names_field_value_and_what_is_allowed(overrides, field, value):
    with pytest.raises(Exception, match=rf"`{field}`={value!r}: expected .+"):
        RNNSeq2SeqConfig.from_preset("tiny", **overrides)


def test_presets_follow_the_papers():
    rnnsearch = RNNSeq2SeqConfig.from_preset("rnnsearch")
    assert (rnnsearch.encoder_cell_type, rnnsearch.bidirectional_encoder, rnnsearch.attention_score) == (
        "gru", True, "additive")
    assert (rnnsearch.embedding_size, rnnsearch.hidden_size, rnnsearch.memory_size) == (620, 1000, 2000)
    for score in ("dot", "general", "concat"):
        luong = RNNSeq2SeqConfig.from_preset(f"luong-{score}", vocab_size=100)
        assert (luong.attention_score, luong.attention_wiring, luong.input_feeding) == (score, "luong", True)
        assert (luong.decoder_layers, luong.hidden_size, luong.num_hidden_layers) == (4, 1000, 4)
    with pytest.raises(ConfigValidationError, match="luong-general"):
        RNNSeq2SeqConfig.from_preset("luong-local")


# --- learning --------------------------------------------------------------------------------------


def reversal_batch(size: int, generator: torch.Generator):
    """Source: 3-7 random symbols; target: the symbols reversed, then eos. Right-padded."""
    rows = [torch.randint(4, 14, (int(torch.randint(3, 8, (1,), generator=generator)),), generator=generator)
            for _ in range(size)]
    ids, mask = right_pad(rows)
    labels, _ = right_pad([torch.cat([r.flip(0), torch.tensor([3])]) for r in rows], pad_id=-100)
    return ids, mask, labels


def reversal_accuracy(attention_score: str, steps: int = 250) -> float:
    """Train on the reversal task; the share of 200 held-out sentences reversed exactly by greedy search."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    config = RNNSeq2SeqConfig(vocab_size=14, hidden_size=32, embedding_size=16, attention_score=attention_score)
    model = RNNSeq2SeqForConditionalGeneration(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        ids, mask, labels = reversal_batch(32, generator)
        loss = model(ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ids, mask, labels = reversal_batch(200, torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model.eval().generate(ids, attention_mask=mask, max_new_tokens=labels.shape[1], do_sample=False)
    out = F.pad(out[:, 1:], (0, labels.shape[1] - out.shape[1] + 1), value=0)
    return float(((out == labels) | (labels == -100)).all(dim=1).float().mean())


def test_attention_learns_to_reverse_where_the_plain_encoder_decoder_cannot():
    with_attention, without = reversal_accuracy("additive"), reversal_accuracy("none")
    assert with_attention >= 0.95
    assert without <= 0.5 * with_attention


# --- remote code and pipeline --------------------------------------------------------------------------


@pytest.mark.parametrize("source_vocab_size", [None, SOURCE_V])
def test_remote_code_generates_the_same_translation_without_the_package(tmp_path, source_vocab_size):
    """The saved folder carries its code: a Python without hf_seqmodels loads it and beam-searches alike."""
    model = tiny_model("luong-concat-feed-rnn", source_vocab_size=source_vocab_size)
    model.save_pretrained(tmp_path)
    _, ids, mask = padded_sources()
    if source_vocab_size:
        ids = torch.where(mask.bool(), ids + 50, ids)  # ids from 54: some only the source vocabulary has
    kw = dict(num_beams=3, coverage_penalty=0.2, **GENERATE)
    script = textwrap.dedent(f"""
        import json, torch
        from transformers import AutoModelForSeq2SeqLM
        model = AutoModelForSeq2SeqLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
        out = model.generate(torch.tensor({ids.tolist()}), attention_mask=torch.tensor({mask.tolist()}), **{kw!r})
        print(json.dumps({{"module": type(model).__module__, "tokens": out.tolist()}}))
        """)
    result = run_in_python_without_package(script, cwd=tmp_path)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["module"].startswith("transformers_modules")
    assert report["tokens"] == model.generate(ids, attention_mask=mask, **kw).tolist()


def test_translation_pipeline(tmp_path):
    from hf_seqmodels.tokenization import train_tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\nle chat est sur le tapis\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], kind="word", vocab_size=40, min_frequency=1)
    model = tiny_model(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    translate = pipeline("hfsm-translation", model=str(tmp_path / "model"), trust_remote_code=True)
    greedy = translate("the cat sat", max_new_tokens=5, min_new_tokens=5)
    beam = translate(["the cat", "on the mat"], num_beams=3, max_new_tokens=5, min_new_tokens=5)
    assert len(greedy) == 1 and len(greedy[0]["translation_text"].split()) == 5
    # the source is encoded as in training: its tokens, no special tokens, then <eos>
    ids = torch.tensor([tokenizer("the cat sat", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]])
    expected = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, min_new_tokens=5)
    assert greedy[0]["translation_text"] == tokenizer.decode(expected[0], skip_special_tokens=True)
    assert [len(b) for b in beam] == [1, 1] and all(b[0]["translation_text"] for b in beam)


# --- the transformers model contract: hidden states, checkpointing, cache, loading, compile --------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_hidden_states_are_the_embeddings_and_every_layer_of_encoder_and_decoder(variant):
    model = tiny_model(variant, encoder_layers=3, bridge="dense" if variant != "luong-dot-feed-gru-copy" else "zeros")
    _, ids, mask = padded_sources(left_pad)
    tgt = random_ids(3, 4, 99, seed=2)
    plain = model(ids, attention_mask=mask, decoder_input_ids=tgt)
    out = model(ids, attention_mask=mask, decoder_input_ids=tgt, output_hidden_states=True)
    torch.testing.assert_close(out.logits, plain.logits)  # running the stacks layer by layer changes nothing
    memory = model.config.memory_size
    assert [h.shape for h in out.encoder_hidden_states] == [(3, ids.shape[1], 12)] + [(3, ids.shape[1], memory)] * 3
    assert [h.shape for h in out.decoder_hidden_states] == [(3, 4, 12), (3, 4, 16), (3, 4, 16)]
    assert out.encoder_hidden_states[-1] is out.encoder_last_hidden_state
    # layer 1 of the encoder, recomputed by a one-layer torch module with the stack's layer-0 weights
    stack = model.model.encoder.rnn.rnn
    one_layer = type(stack)(12, stack.hidden_size, num_layers=1, bidirectional=stack.bidirectional, batch_first=True)
    one_layer.load_state_dict({k: v for k, v in stack.state_dict().items() if "_l0" in k})
    for row, n in enumerate(mask.sum(1).tolist()):
        expected, _ = one_layer(model.model.encoder.embed_tokens(ids[row : row + 1, -n:]))
        torch.testing.assert_close(out.encoder_hidden_states[1][row, -n:], expected[0])


def test_hidden_states_and_cross_attentions_are_tensors_of_the_graph():
    for variant in ("bahdanau-additive-bilstm", "luong-concat-feed-rnn", "luong-general-fused"):
        model = tiny_model(variant)
        out = model(random_ids(2, 5, 99), decoder_input_ids=random_ids(2, 3, 99), output_hidden_states=True,
                    output_attentions=True)
        kept = [out.encoder_hidden_states[0], out.decoder_hidden_states[0], out.decoder_hidden_states[-1],
                out.cross_attentions[0]]
        for tensor in kept:
            tensor.retain_grad()
        out.logits.flatten()[0].backward()
        assert all(t.grad is not None for t in kept), variant


@pytest.mark.parametrize("num_beams", [1, 2])
def test_generate_returns_every_layer_and_attention_rows_over_real_source_tokens(num_beams):
    model = tiny_model(encoder_layers=3)
    _, ids, mask = padded_sources(left_pad)
    out = model.generate(ids, attention_mask=mask, num_beams=num_beams, return_dict_in_generate=True,
                         output_hidden_states=True, output_attentions=True, **GENERATE)
    assert len(out.encoder_hidden_states) == 4 and len(out.decoder_hidden_states) == 7
    assert all(len(step) == 3 and step[-1].shape == (3 * num_beams, 1, 16) for step in out.decoder_hidden_states)
    real = mask.bool().repeat_interleave(num_beams, 0)[:, None, None, :]
    for (weights,) in out.cross_attentions:
        assert torch.all(weights.masked_select(~real) == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(3 * num_beams, 1, 1))


@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-concat-feed-rnn", "luong-general-fused",
                                     "none"])
def test_reentrant_and_non_reentrant_checkpointing_give_the_plain_gradients(variant):
    source, labels = random_ids(2, 5, 99), random_ids(2, 6, 99, seed=1)
    grads = {}
    for reentrant in (None, True, False):
        model = tiny_model(variant, hidden_dropout_prob=0.3).train()
        if reentrant is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        torch.manual_seed(1)
        model(source, labels=labels).loss.backward()
        grads[reentrant] = {n: p.grad for n, p in model.named_parameters()}
    for reentrant in (True, False):
        assert grads[reentrant].keys() == grads[None].keys()
        for name, grad in grads[None].items():
            assert grads[reentrant][name] is not None, (reentrant, name)
            torch.testing.assert_close(grads[reentrant][name], grad, msg=f"{reentrant} {name}")


@pytest.mark.parametrize("cache_name", ["past_key_values", "cache"])
@pytest.mark.parametrize("variant", ["bahdanau-additive-bilstm", "luong-dot-feed-gru-copy"])
def test_continuing_from_a_returned_cache_reads_only_unread_tokens(variant, cache_name, monkeypatch):
    if cache_name == "cache" and CACHE_NAME != "cache":
        pytest.skip("transformers < 5.24's generate() takes the cache as past_key_values only")
    model = tiny_model(variant, init_range=0.5)
    _, ids, mask = padded_sources()
    one_go = model.generate(ids, attention_mask=mask, max_new_tokens=8, min_new_tokens=8)
    first = model.generate(ids, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, return_dict_in_generate=True)
    state = output_cache(first)
    assert state.get_seq_length() == 4 and len(set(one_go[:, 1:].flatten().tolist())) > 3
    read = []
    embed = model.model.decoder.embed_tokens
    monkeypatch.setattr(embed, "forward", lambda x, forward=embed.forward: read.append(x.shape[1]) or forward(x))
    rest = model.generate(ids, attention_mask=mask, decoder_input_ids=first.sequences, **{cache_name: state},
                          max_new_tokens=4, min_new_tokens=4)
    assert torch.equal(rest, one_go)
    assert read == [1, 1, 1, 1] and state.get_seq_length() == 8  # the cache's 4 tokens are not read again


def test_decoder_state_supports_the_cache_operations_of_generation():
    model = tiny_model("luong-dot-feed-gru-copy")
    src = random_ids(2, 5, 99)
    out = model(src, decoder_input_ids=random_ids(2, 3, 99), use_cache=True)
    state = output_cache(out)
    h, feed = state.tensors[0].clone(), state.input_feed.clone()
    assert (state.get_seq_length(), state.batch_size, state.is_compileable, state.is_croppable) == (3, 2, False, False)
    state.batch_repeat_interleave(3)
    assert torch.equal(state.tensors[0], h.repeat_interleave(3, 0)) and state.coverage.shape == (6, 5)
    state.batch_select_indices(torch.tensor([0, 4]))
    assert torch.equal(state.tensors[0], h) and torch.equal(state.input_feed, feed)
    state.reorder_cache(torch.tensor([1, 1]))
    assert torch.equal(state.tensors[0], h[[1, 1]])
    state.crop(0)
    with pytest.raises(ValueError, match="cannot forget"):
        state.crop(-1)
    assert isinstance(state, Cache) and state.get_seq_length() == 3
    # a state of one row serves both rows of a batch and a beam search continuing from it
    single = output_cache(model(src[:1], decoder_input_ids=torch.tensor([[2]]), use_cache=True))
    more = model.generate(src[:1], decoder_input_ids=torch.tensor([[2]]), past_key_values=single, num_beams=2,
                          max_new_tokens=3, min_new_tokens=3)
    assert more.shape == (1, 4) and single.get_seq_length() == 4
    state.reset()
    assert state.is_empty and state.get_seq_length() == 0 and state.batch_size == -1


@pytest.mark.parametrize("overrides", [dict(), dict(encoder_cell_type="peephole_lstm", decoder_cell_type="peephole_lstm",
                                                     bridge="zeros", attention_score="general", tie_word_embeddings=True)])
def test_missing_weights_are_reported_and_initialised(tmp_path, overrides):
    from safetensors.torch import load_file, save_file

    model = tiny_model(**overrides)
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    dropped = [k for k in weights if "embed_tokens" in k or "_l1" in k or "attention" in k or "bridge" in k]
    save_file({k: v for k, v in weights.items() if k not in dropped}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    torch.full((1 << 20,), float("nan")).sum()  # leave garbage in freed memory
    loaded, info = RNNSeq2SeqForConditionalGeneration.from_pretrained(tmp_path, output_loading_info=True)
    assert set(dropped) <= set(info["missing_keys"])
    r = model.config.init_range
    for name, param in loaded.named_parameters():
        assert param.device.type == "cpu" and torch.isfinite(param).all() and param.abs().max() <= r, name
    assert not torch.equal(loaded.model.decoder.embed_tokens.weight, torch.zeros_like(model.lm_head.weight))


def test_value_checks_stay_out_of_compiled_graphs():
    from hf_seqmodels.models.modeling_rnn_seq2seq import source_mask

    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])
    compiled = torch.compile(lambda m: source_mask(m, m.shape), fullgraph=True, backend="eager")
    assert torch.equal(compiled(mask), mask.bool())
    with pytest.raises(ValueError, match="at least one real token"):  # eager users keep the check
        source_mask(torch.tensor([[0, 0]]), (1, 2))
    model = tiny_model("luong-general-fused")
    explanation = torch._dynamo.explain(model)(random_ids(2, 3, 99), attention_mask=mask,
                                                decoder_input_ids=random_ids(2, 2, 99))
    reasons = " ".join(r.reason for r in explanation.break_reasons)
    assert "item()" not in reasons and "data-dependent" not in reasons.lower()  # the RNN kernels may break


def test_decoder_attention_mask_takes_right_padding_and_refuses_left_padding():
    """transformers' generate() and DataCollatorForSeq2Seq pass a decoder mask: right padding leaves the real
    positions unchanged; a mask with padding before real tokens is refused by name."""
    torch.manual_seed(0)
    model = RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset("tiny")).eval()
    source = random_ids(2, 5, model.config.vocab_size)
    target = random_ids(2, 4, model.config.vocab_size)
    target[:, 0] = model.config.decoder_start_token_id
    plain = model(source, decoder_input_ids=target).logits
    right = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    torch.testing.assert_close(model(source, decoder_input_ids=target, decoder_attention_mask=right).logits, plain)
    with pytest.raises(ValueError, match="decoder_attention_mask.*right padding only"):
        model(source, decoder_input_ids=target, decoder_attention_mask=torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]]))
    with pytest.raises(ValueError, match="decoder_attention_mask"):
        model(source, decoder_input_ids=target, decoder_attention_mask=2 * right)
    mask = torch.ones_like(target)
    continued = model.generate(source, decoder_input_ids=target, decoder_attention_mask=mask, max_new_tokens=3)
    assert continued.shape == (2, 7) and torch.equal(continued[:, :4], target)
