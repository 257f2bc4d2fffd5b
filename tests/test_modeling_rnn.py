"""Tests of the RNN / LSTM / GRU family: one check per head, then the generation checks of every cell."""

from __future__ import annotations

import itertools

import pytest
import torch
from model_test_utils import checkpointing_runs, left_pad, random_ids, right_pad

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    RNNConfig,
    RNNForCausalLM,
    RNNForSequenceClassification,
    RNNForTokenClassification,
    RNNModel,
)
from hf_seqmodels.models.cache_naming import output_cache
from hf_seqmodels.models.config_utils import ConfigValidationError

CELLS = ["rnn_tanh", "rnn_relu", "lstm", "gru"]


def tiny_config(**overrides) -> RNNConfig:
    return RNNConfig.from_preset("tiny", **overrides)


def tiny_model(model_class=RNNForCausalLM, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return model_class(tiny_config(**overrides)).eval()


# --- heads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell_type", CELLS)
def test_causal_lm_shapes_loss_and_backward(cell_type):
    model = tiny_model(cell_type=cell_type).train()
    ids = random_ids(3, 9, model.config.vocab_size)
    out = model(ids, labels=ids)
    assert out.logits.shape == (3, 9, model.config.vocab_size)
    layers = model.config.num_hidden_layers
    expected_state = [(3, layers, 16)] * (2 if cell_type == "lstm" else 1)
    assert [tuple(t.shape) for t in output_cache(out).tensors] == expected_state
    assert output_cache(out).get_seq_length() == 9
    out.loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    manual = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 99), ids[:, 1:].reshape(-1))
    assert torch.allclose(out.loss, manual, atol=1e-6)


@pytest.mark.parametrize("cell_type", ["lstm", "peephole_lstm"])
def test_activation_checkpointing_recomputes_the_stack_and_keeps_the_gradients(cell_type):
    ids = random_ids(3, 9, 99)
    build = lambda: tiny_model(cell_type=cell_type, num_hidden_layers=2, hidden_dropout_prob=0.3)  # noqa: E731
    (plain, plain_calls), (recomputed, recomputed_calls) = checkpointing_runs(
        build, lambda model: model(ids, labels=ids).loss, lambda model: model.model.encoder.rnn)
    assert (plain_calls, recomputed_calls) == (1, 2)  # the backward pass ran the stack again
    assert plain.keys() == recomputed.keys() == {name for name, _ in build().named_parameters()}
    for name in plain:
        torch.testing.assert_close(recomputed[name], plain[name], msg=name)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("pooling", ["last", "mean", "max"])
def test_sequence_classification_shapes_and_losses(bidirectional, pooling):
    model = tiny_model(RNNForSequenceClassification, bidirectional=bidirectional, pooling=pooling, num_labels=3)
    ids = random_ids(4, 7, 99)
    out = model(ids, labels=torch.tensor([0, 1, 2, 1]))
    assert out.logits.shape == (4, 3)
    assert out.loss.ndim == 0 and out.loss > 0
    multi = tiny_model(RNNForSequenceClassification, num_labels=3, problem_type="multi_label_classification")
    target = torch.tensor([[1.0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(multi(ids).logits, target)
    assert torch.allclose(multi(ids, labels=target).loss, expected)


def test_token_classification_shapes_and_ignore_index():
    model = tiny_model(RNNForTokenClassification, bidirectional=True, num_labels=5)
    ids = random_ids(2, 6, 99)
    labels = torch.tensor([[0, 1, 2, 3, 4, -100], [4, 3, -100, -100, -100, -100]])
    out = model(ids, labels=labels)
    assert out.logits.shape == (2, 6, 5)
    keep = labels != -100
    expected = torch.nn.functional.cross_entropy(out.logits[keep], labels[keep])
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_base_model_outputs():
    model = tiny_model(RNNModel, bidirectional=True)
    out = model(random_ids(2, 5, 99), output_hidden_states=True)
    assert out.last_hidden_state.shape == (2, 5, 32)
    assert out.final_state.shape == (2, 32)
    assert out.hidden_states[0].shape == (2, 5, 12)


# --- padding ------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("pooling", ["last", "mean", "max"])
def test_padding_never_changes_a_classification(cell_type, pooling):
    model = tiny_model(RNNForSequenceClassification, cell_type=cell_type, bidirectional=True, pooling=pooling)
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (3, 7, 5)]
    alone = torch.cat([model(r[None]).logits for r in rows])
    for pad in (left_pad, right_pad):
        ids, mask = pad(rows)
        assert torch.allclose(model(ids, attention_mask=mask).logits, alone, atol=1e-5)


def test_padding_never_changes_token_tags():
    model = tiny_model(RNNForTokenClassification, bidirectional=True, num_labels=4)
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (4, 6)]
    ids, mask = right_pad(rows)
    batched = model(ids, attention_mask=mask).logits
    for i, r in enumerate(rows):
        assert torch.allclose(batched[i, : len(r)], model(r[None]).logits[0], atol=1e-5)


# --- state, cache and generation ------------------------------------------------------------------


@pytest.mark.parametrize("cell_type", CELLS)
def test_state_carried_across_calls_equals_one_pass(cell_type):
    """Truncated BPTT relies on this: two calls with the state passed on equal one call."""
    model = tiny_model(cell_type=cell_type)
    ids = random_ids(2, 12, 99)
    full = model(ids).logits
    first = model(ids[:, :5])
    second = model(ids[:, 5:], past_key_values=output_cache(first).detach())
    assert torch.allclose(torch.cat([first.logits, second.logits], 1), full, atol=1e-5)
    assert output_cache(second).get_seq_length() == 12


@pytest.mark.parametrize("cell_type", CELLS)
def test_cache_matches_recomputation(cell_type):
    model = tiny_model(cell_type=cell_type)
    ids = random_ids(2, 4, 99)
    kw = dict(max_new_tokens=10, min_new_tokens=10)
    for extra in (dict(do_sample=False), dict(num_beams=3, num_return_sequences=2, length_penalty=0.7)):
        assert torch.equal(model.generate(ids, **kw, **extra), model.generate(ids, **kw, **extra, use_cache=False))
    torch.manual_seed(7)
    sampled = model.generate(ids, do_sample=True, top_k=20, **kw)
    torch.manual_seed(7)
    assert torch.equal(sampled, model.generate(ids, do_sample=True, top_k=20, use_cache=False, **kw))


@pytest.mark.parametrize("cell_type", ["lstm", "gru"])
@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_left_padded_batch_generates_what_each_prompt_generates_alone(cell_type, mode):
    model = tiny_model(cell_type=cell_type)
    rows = [random_ids(1, n, 99, seed=10 + n)[0] for n in (2, 6, 4)]
    ids, mask = left_pad(rows)
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0)
    if mode == "beam":
        kw.update(num_beams=3)
    batched = model.generate(ids, attention_mask=mask, **kw)
    for i, r in enumerate(rows):
        alone = model.generate(r[None], **kw)
        assert torch.equal(batched[i, -6:], alone[0, -6:])


def test_beam_search_equals_exhaustive_search():
    """With as many beams as partial hypotheses, beam search must find the most probable continuation."""
    vocab, steps = 5, 3
    model = tiny_model(vocab_size=vocab, eos_token_id=None, bos_token_id=None, pad_token_id=0, seed=3)
    prompt = torch.tensor([[1, 4]])
    with torch.no_grad():
        best, best_score = None, -float("inf")
        for cont in itertools.product(range(vocab), repeat=steps):
            seq = torch.cat([prompt, torch.tensor([cont])], dim=1)
            logp = model(seq).logits.log_softmax(-1)[0, 1:-1]
            score = logp.gather(-1, seq[0, 2:, None]).sum().item()
            if score > best_score:
                best, best_score = cont, score
    found = model.generate(prompt, num_beams=vocab ** (steps - 1), max_new_tokens=steps, min_new_tokens=steps,
                           do_sample=False, length_penalty=0.0, early_stopping=True)
    assert tuple(found[0, 2:].tolist()) == best


# --- configuration, tying, errors ----------------------------------------------------------------


def test_tied_embeddings_with_and_without_projection():
    same = tiny_model(tie_word_embeddings=True, embedding_size=16)
    assert same.lm_head.weight is same.model.embed_tokens.weight and same.output_projection is None
    projected = tiny_model(tie_word_embeddings=True)  # embedding 12, hidden 16
    assert projected.lm_head.weight is projected.model.embed_tokens.weight
    assert projected.output_projection.weight.shape == (12, 16)
    assert projected(random_ids(1, 4, 99)).logits.shape == (1, 4, 99)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(cell_type="transformer"), "cell_type"),
        (dict(hidden_size=0), "hidden_size"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
        (dict(pooling="first"), "pooling"),
        (dict(pad_token_id=20000), "pad_token_id"),
    ],
)
def test_bad_config_names_field_and_value(overrides, field):
    with pytest.raises(Exception, match=rf"`{field}`={overrides[field]!r}"):
        RNNConfig(**overrides)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigValidationError, match="zaremba-medium"):
        RNNConfig.from_preset("zaremba-huge")
    assert RNNConfig.from_preset("zaremba-medium", vocab_size=50).hidden_size == 650


def test_bidirectional_language_model_is_refused():
    with pytest.raises(ValueError, match="bidirectional"):
        RNNForCausalLM(tiny_config(bidirectional=True))


def test_out_of_range_token_ids_raise_a_clear_error():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"token id 99, outside the vocabulary \[0, 99\)"):
        model(torch.tensor([[5, 99]]))
    with pytest.raises(ValueError, match="token id -1"):
        model(torch.tensor([[-1, 5]]))


# --- the transformers model contract: parity with torch's RNNs, resizing, checkpointing, loading ------------


def reference_layers(stack, x: torch.Tensor) -> list[torch.Tensor]:
    """The fused stack's layers run one by one as separate torch modules holding the same weights."""
    outputs = []
    for k in range(stack.num_layers):
        kind = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}.get(stack.cell_type, torch.nn.RNN)
        extra = {"nonlinearity": stack.cell_type[4:]} if kind is torch.nn.RNN else {}
        layer = kind(x.shape[-1], stack.hidden_size, batch_first=True, bidirectional=stack.num_directions == 2, **extra)
        layer.load_state_dict({name: getattr(stack.rnn, name.replace("_l0", f"_l{k}")) for name, _ in
                               layer.named_parameters()})
        x = layer(x)[0]
        outputs.append(x)
    return outputs


@pytest.mark.parametrize("cell_type, bidirectional", [("lstm", False), ("lstm", True), ("gru", True), ("rnn_relu", False)])
def test_hidden_states_are_the_embeddings_and_every_layer(cell_type, bidirectional):
    model = tiny_model(RNNModel, cell_type=cell_type, bidirectional=bidirectional, num_hidden_layers=3)
    ids = random_ids(2, 6, 99)
    out = model(ids, output_hidden_states=True)
    assert len(out.hidden_states) == 4  # embeddings + 3 layers
    torch.testing.assert_close(out.hidden_states[0], model.embed_tokens(ids))
    for ours, theirs in zip(out.hidden_states[1:], reference_layers(model.encoder, out.hidden_states[0]), strict=True):
        torch.testing.assert_close(ours, theirs)
    assert out.hidden_states[-1] is out.last_hidden_state
    assert [n for n, _ in model.state_dict().items()] == [n for n, _ in tiny_model(RNNModel, cell_type=cell_type,
            bidirectional=bidirectional, num_hidden_layers=3).state_dict().items()]
    torch.testing.assert_close(out.last_hidden_state, model(ids).last_hidden_state)  # same as the fused run


@pytest.mark.parametrize("model_class", [RNNForCausalLM, RNNForSequenceClassification, RNNForTokenClassification])
def test_hidden_states_of_every_head_are_graph_tensors_and_ignore_padding(model_class):
    model = tiny_model(model_class, bidirectional=model_class is not RNNForCausalLM, pooling="mean")
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (3, 5)]
    pad = left_pad if model_class is RNNForCausalLM else right_pad
    ids, mask = pad(rows)
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    for h in out.hidden_states:
        h.retain_grad()
    out.logits.sum().backward()
    assert all(h.grad is not None and h.grad.abs().sum() > 0 for h in out.hidden_states)
    for i, row in enumerate(rows):
        alone = model(row[None], output_hidden_states=True).hidden_states
        real = mask[i].bool()
        for h, h_alone in zip(out.hidden_states, alone, strict=True):
            torch.testing.assert_close(h[i, real], h_alone[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("embedding_size", [12, 16])
def test_resize_token_embeddings_resizes_every_vocabulary_table(tie, embedding_size):
    model = tiny_model(tie_word_embeddings=tie, embedding_size=embedding_size, char_encoder="cnn")
    ids = random_ids(2, 5, 99)
    with torch.no_grad():  # transformers swaps the embedding's data: a graph built before would be stale
        before = model(ids).logits
    model.resize_token_embeddings(120)
    assert model.config.vocab_size == 120
    assert model.model.embed_tokens.weight.shape[0] == model.lm_head.weight.shape[0] == model.lm_head.bias.shape[0] == 120
    assert model.model.char_encoder.token_chars.shape[0] == 120
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tie
    out = model(torch.cat([ids, torch.tensor([[119], [100]])], dim=1), labels=ids.new_zeros(2, 6))
    torch.testing.assert_close(out.logits[:, :5, :99], before)  # old tokens keep their scores
    out.loss.backward()
    assert model.generate(ids, max_new_tokens=2).shape == (2, 7)
    model.resize_token_embeddings(50)
    assert model(random_ids(1, 3, 50)).logits.shape == (1, 3, 50)


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("model_class", [RNNForCausalLM, RNNForSequenceClassification, RNNForTokenClassification])
def test_gradient_checkpointing_gives_the_gradients_of_a_plain_backward(model_class, reentrant):
    ids = random_ids(3, 7, 99)
    labels = {RNNForCausalLM: ids, RNNForSequenceClassification: torch.tensor([0, 1, 1]),
              RNNForTokenClassification: ids % 2}[model_class]

    def gradients(checkpointing: bool):
        model = tiny_model(model_class, bidirectional=model_class is not RNNForCausalLM, hidden_dropout_prob=0.2)
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        torch.manual_seed(3)
        model(ids, labels=labels).loss.backward()
        return {name: p.grad for name, p in model.named_parameters()}

    plain, checkpointed = gradients(False), gradients(True)
    assert all(g is not None for g in plain.values())
    for name, grad in plain.items():
        assert checkpointed[name] is not None, name
        torch.testing.assert_close(checkpointed[name], grad, msg=name)


def test_inputs_embeds_beside_ids_or_of_another_width_are_refused():
    model = tiny_model()
    ids = random_ids(2, 5, 99)
    embeds = model.get_input_embeddings()(ids)
    with pytest.raises(ValueError, match="exactly one of `input_ids` and `inputs_embeds`"):
        model(ids, inputs_embeds=embeds)
    with pytest.raises(ValueError, match="embedding_size=12"):
        model(inputs_embeds=torch.zeros(1, 3, 7))


@pytest.mark.parametrize("device_map", [None, "cpu"])
def test_missing_weights_are_initialised_and_reported(tmp_path, device_map):
    """With a device map, transformers builds the model on the meta device (accelerate's init_empty_weights) and
    materialises it while loading."""
    from safetensors.torch import load_file, save_file

    model = tiny_model(cell_type="peephole_lstm", char_encoder="lstm", init_range=0.05)
    model.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    missing = {"lm_head.weight", "lm_head.bias", "model.encoder.rnn.weight_peephole_l1",
               "model.char_encoder.token_chars", "model.char_encoder.lstm.rnn.weight_ih_l0_reverse"}
    save_file({k: v for k, v in weights.items() if k not in missing}, str(tmp_path / "model.safetensors"),
              metadata={"format": "pt"})
    loaded, info = RNNForCausalLM.from_pretrained(tmp_path, output_loading_info=True, device_map=device_map)
    assert set(info["missing_keys"]) == missing
    tensors = dict(loaded.named_parameters()) | dict(loaded.named_buffers())
    assert all(t.device.type == "cpu" and torch.isfinite(t.float()).all() for t in tensors.values())
    assert not tensors["lm_head.bias"].any() and not tensors["model.char_encoder.token_chars"].any()
    for name in missing - {"lm_head.bias", "model.char_encoder.token_chars"}:
        assert 0 < tensors[name].abs().max() <= 0.05, name
    for name in weights.keys() - missing:
        assert torch.equal(tensors[name], weights[name]), name


def test_torch_compile_gives_the_eager_results():
    """Compiled in inference mode the stack runs as a scan over time (recurrent_stack's docstring): the same
    logits and states up to float rounding."""
    model = tiny_model()
    compiled = torch.compile(model, backend="aot_eager")
    ids, mask = random_ids(2, 6, 99), torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    for kw in ({}, {"attention_mask": mask, "output_hidden_states": True}):
        eager, traced = model(ids, **kw), compiled(ids, **kw)
        torch.testing.assert_close(traced.logits, eager.logits)
        for got, want in zip(output_cache(traced), output_cache(eager), strict=True):
            torch.testing.assert_close(got, want)
        assert output_cache(traced).get_seq_length() == 6
