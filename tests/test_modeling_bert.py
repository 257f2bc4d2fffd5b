"""Tests of BERT: every head's outputs and losses, masked-positions-only logits, conversion parity with
transformers' built-in BERT, configuration and input errors, initialisation, pipelines and Trainer fine-tuning."""

from __future__ import annotations

import pytest
import torch
import transformers
from model_test_utils import random_ids, right_pad
from torch import nn

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from hf_seqmodels.convert_bert import HEADS, from_transformers_bert, to_transformers_bert
from hf_seqmodels.models.config_utils import ConfigValidationError
from hf_seqmodels.models.modeling_bert import BertPreTrainedModel

V, H = 99, 16  # vocabulary and hidden size of the tiny preset
CLS, SEP, MASK = 4, 5, 6  # ids of the special tokens in our tokenizers


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make(cls, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return cls(BertConfig.from_preset("tiny", **overrides)).eval()


def pair_batch(seed: int = 0):
    """Two right-padded ``[CLS] A [SEP] B [SEP]`` inputs: ids, attention mask and token_type_ids ``(2, 10)``."""
    rows = []
    for n_a, n_b, s in ((3, 4, seed), (2, 2, seed + 1)):
        a, b = random_ids(1, n_a, V, seed=s, low=7)[0], random_ids(1, n_b, V, seed=s + 10, low=7)[0]
        rows.append(torch.cat([torch.tensor([CLS]), a, torch.tensor([SEP]), b, torch.tensor([SEP])]))
    ids, mask = right_pad(rows)
    token_type_ids = torch.zeros_like(ids)
    token_type_ids[0, 5:10] = 1
    token_type_ids[1, 4:7] = 1
    return ids, mask, token_type_ids


def mlm_labels(ids: torch.Tensor) -> torch.Tensor:
    labels = torch.full_like(ids, -100)
    labels[0, [1, 6]] = ids[0, [1, 6]]
    labels[1, 2] = ids[1, 2]
    return labels


# --- outputs and losses ---------------------------------------------------------------------------


def test_output_shapes_of_every_head():
    ids, mask, types = pair_batch()
    kw = dict(attention_mask=mask, token_type_ids=types)
    base = make(BertModel)(ids, output_hidden_states=True, output_attentions=True, **kw)
    assert base.last_hidden_state.shape == (2, 10, H) and base.pooler_output.shape == (2, H)
    assert [h.shape for h in base.hidden_states] == [(2, 10, H)] * 3
    assert [a.shape for a in base.attentions] == [(2, 4, 10, 10)] * 2
    pre = make(BertForPreTraining)(ids, **kw)
    assert pre.prediction_logits.shape == (2, 10, V) and pre.seq_relationship_logits.shape == (2, 2)
    assert make(BertForMaskedLM)(ids, **kw).logits.shape == (2, 10, V)
    assert make(BertForNextSentencePrediction)(ids, **kw).logits.shape == (2, 2)
    assert make(BertForSequenceClassification, num_labels=3)(ids, **kw).logits.shape == (2, 3)
    assert make(BertForTokenClassification, num_labels=5)(ids, **kw).logits.shape == (2, 10, 5)
    qa = make(BertForQuestionAnswering)(ids, **kw)
    assert qa.start_logits.shape == qa.end_logits.shape == (2, 10)
    choices = make(BertForMultipleChoice)(ids[:, None].expand(2, 3, 10), attention_mask=mask[:, None].expand(2, 3, 10))
    assert choices.logits.shape == (2, 3)


def test_pretraining_loss_is_masked_lm_plus_next_sentence_cross_entropy():
    ids, mask, types = pair_batch()
    labels, nsp = mlm_labels(ids), torch.tensor([0, 1])
    out = make(BertForPreTraining)(ids, attention_mask=mask, token_type_ids=types, labels=labels,
                                   next_sentence_label=nsp)
    keep = labels != -100
    mlm = nn.functional.cross_entropy(out.prediction_logits[keep], labels[keep])
    nsp_loss = nn.functional.cross_entropy(out.seq_relationship_logits, nsp)
    assert torch.allclose(out.mlm_loss, mlm, atol=1e-6) and torch.allclose(out.nsp_loss, nsp_loss, atol=1e-6)
    assert torch.allclose(out.loss, mlm + nsp_loss, atol=1e-6)


@pytest.mark.parametrize("cls", [BertForPreTraining, BertForMaskedLM])
def test_masked_positions_only_logits_equal_the_full_logits_there(cls):
    model = make(cls)
    ids, mask, types = pair_batch()
    labels = mlm_labels(ids)
    kw = dict(attention_mask=mask, token_type_ids=types, labels=labels)
    full, sparse = model(**kw, input_ids=ids), model(**kw, input_ids=ids, masked_positions_only=True)
    name = "prediction_logits" if cls is BertForPreTraining else "logits"
    keep = labels != -100
    assert sparse[name].shape == (3, V)
    assert torch.allclose(sparse[name], full[name][keep], atol=1e-6)
    assert torch.allclose(sparse.loss, full.loss, atol=1e-6)
    flagged = make(cls, mlm_logits_at_masked_positions_only=True)
    assert flagged(ids, **{k: v for k, v in kw.items() if k != "labels"})[name].shape == (2, 10, V)  # inference
    assert torch.allclose(flagged(ids, **kw)[name], sparse[name], atol=1e-6)
    with pytest.raises(ValueError, match="needs masked-LM `labels`"):
        model(ids, masked_positions_only=True)



@pytest.mark.parametrize("cls", [BertForPreTraining, BertForMaskedLM])
def test_masked_lm_positions_give_the_masked_positions_loss_and_gradients(cls):
    """Positions found on the host (here shuffled and padded with unlabelled ones, as the trainer pads them to a
    recurring size) give the loss and gradients of ``masked_positions_only``, and logits at those positions."""
    model = make(cls)
    ids, mask, types = pair_batch()
    labels = mlm_labels(ids)
    kw = dict(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
    name = "prediction_logits" if cls is BertForPreTraining else "logits"
    reference = model(**kw, masked_positions_only=True)
    reference.loss.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    flat = labels.flatten() != -100
    positions = torch.cat([flat.nonzero().squeeze(1).flip(0), (~flat).nonzero().squeeze(1)[:5]])
    out = model(**kw, masked_lm_positions=positions)
    out.loss.backward()
    assert out[name].shape == (len(positions), V)
    torch.testing.assert_close(out[name], model(**{k: v for k, v in kw.items() if k != "labels"})[name]
                               .flatten(0, 1)[positions])
    torch.testing.assert_close(out.loss, reference.loss)
    for n, p in model.named_parameters():
        if n in expected:
            torch.testing.assert_close(p.grad, expected[n], msg=n)
    labelled = flat.nonzero().squeeze(1)
    for wrong, message in [(labelled[1:], "leaves out labelled positions"),
                           (torch.cat([labelled, labelled[:1]]), "names a position twice"),
                           (torch.cat([labelled, torch.tensor([labels.numel()])]), "outside the 20 positions"),
                           (labelled.view(1, -1), "must be a 1-D tensor")]:
        with pytest.raises(ValueError, match=message):
            model(**kw, masked_lm_positions=wrong)
    with pytest.raises(ValueError, match="needs the masked-LM `labels`"):
        model(ids, masked_lm_positions=labelled)

def test_mlm_decoder_is_tied_to_the_token_embeddings():
    model = make(BertForPreTraining)
    assert model.mlm_head.decoder.weight is model.bert.embeddings.word_embeddings.weight
    untied = make(BertForMaskedLM, tie_word_embeddings=False)
    assert untied.mlm_head.decoder.weight is not untied.bert.embeddings.word_embeddings.weight


def test_sequence_classification_losses_follow_the_problem_type():
    ids, mask, types = pair_batch()
    single = make(BertForSequenceClassification, num_labels=3)
    out = single(ids, attention_mask=mask, token_type_ids=types, labels=torch.tensor([2, 0]))
    assert torch.allclose(out.loss, nn.functional.cross_entropy(out.logits, torch.tensor([2, 0])), atol=1e-6)
    regression = make(BertForSequenceClassification, num_labels=1)
    target = torch.tensor([0.5, -1.0])
    out = regression(ids, attention_mask=mask, labels=target)
    assert torch.allclose(out.loss, nn.functional.mse_loss(out.logits.squeeze(-1), target), atol=1e-6)
    multi = make(BertForSequenceClassification, num_labels=3)
    hot = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    out = multi(ids, attention_mask=mask, labels=hot)
    assert torch.allclose(out.loss, nn.functional.binary_cross_entropy_with_logits(out.logits, hot), atol=1e-6)


# --- conversion with transformers' BERT ---------------------------------------------------------------


def assert_same_outputs(ours, theirs, inputs: dict, fields: tuple[str, ...]):
    a, b = ours(**inputs), theirs(**inputs)
    for field in fields:
        assert torch.allclose(a[field], b[field], atol=1e-5), field


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_pretraining_parity_with_transformers_both_ways(implementation):
    ids, mask, types = pair_batch()
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=mlm_labels(ids),
                  next_sentence_label=torch.tensor([0, 1]))
    fields = ("loss", "prediction_logits", "seq_relationship_logits")
    ours = make(BertForPreTraining, attn_implementation=implementation)
    theirs = to_transformers_bert(ours, attn_implementation=implementation).eval()
    assert type(theirs) is transformers.BertForPreTraining
    assert theirs.config._attn_implementation == implementation
    assert_same_outputs(ours, theirs, inputs, fields)

    torch.manual_seed(1)
    config = transformers.BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=32, max_position_embeddings=64,
                                     attn_implementation=implementation)
    theirs = transformers.BertForPreTraining(config).eval()
    ours = from_transformers_bert(theirs, attn_implementation=implementation)
    assert type(ours) is BertForPreTraining and not ours.training
    assert ours.config._attn_implementation == implementation
    assert ours.mlm_head.decoder.weight is ours.bert.embeddings.word_embeddings.weight
    assert_same_outputs(ours, theirs, inputs, fields)


HEAD_FIELDS = {
    "BertModel": ("last_hidden_state", "pooler_output"),
    "BertForMaskedLM": ("loss", "logits"),
    "BertForNextSentencePrediction": ("loss", "logits"),
    "BertForSequenceClassification": ("loss", "logits"),
    "BertForTokenClassification": ("loss", "logits"),
    "BertForQuestionAnswering": ("loss", "start_logits", "end_logits"),
    "BertForMultipleChoice": ("loss", "logits"),
}


def head_inputs(name: str) -> dict:
    ids, mask, types = pair_batch()
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
    labels = {
        "BertForMaskedLM": dict(labels=mlm_labels(ids)),
        "BertForNextSentencePrediction": dict(labels=torch.tensor([1, 0])),
        "BertForSequenceClassification": dict(labels=torch.tensor([2, 0])),
        "BertForTokenClassification": dict(labels=torch.where(mask.bool(), ids % 3, -100)),
        "BertForQuestionAnswering": dict(start_positions=torch.tensor([6, 4]), end_positions=torch.tensor([8, 5])),
        "BertForMultipleChoice": dict(labels=torch.tensor([1, 0])),
    }.get(name, {})
    if name == "BertForMultipleChoice":
        inputs = {k: v[:, None].repeat(1, 3, 1) for k, v in inputs.items()}  # (B, C, T)
    return {**inputs, **labels}


@pytest.mark.parametrize("name", [h for h in HEADS if h != "BertForPreTraining"])
def test_every_shared_head_converts_both_ways(name):
    assert set(HEAD_FIELDS) | {"BertForPreTraining"} == set(HEADS)
    ours = make(getattr(hf_seqmodels, name), num_labels=3)
    theirs = to_transformers_bert(ours).eval()
    assert type(theirs) is getattr(transformers, name)
    inputs = head_inputs(name)
    assert_same_outputs(ours, theirs, inputs, HEAD_FIELDS[name])
    back = from_transformers_bert(theirs)
    assert type(back) is type(ours)
    assert back.config.num_labels == (2 if name == "BertForQuestionAnswering" else 3)
    assert_same_outputs(back, theirs, inputs, HEAD_FIELDS[name])


def test_conversion_refuses_what_it_cannot_convert():
    decoder = transformers.BertLMHeadModel(transformers.BertConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32,
        is_decoder=True))
    with pytest.raises(ValueError, match="no conversion for BertLMHeadModel"):
        from_transformers_bert(decoder)


# --- presets, configuration and input errors ---------------------------------------------------------


@pytest.mark.parametrize(
    "preset, layers, hidden, heads, low, high",
    [
        ("bert-base", 12, 768, 12, 109e6, 111e6),
        ("bert-large", 24, 1024, 16, 334e6, 337e6),
        ("bert-tiny", 2, 128, 2, 4.3e6, 4.5e6),
        ("bert-mini", 4, 256, 4, 11e6, 11.4e6),
        ("bert-small", 4, 512, 8, 28.5e6, 29e6),
        ("bert-medium", 8, 512, 8, 41e6, 41.5e6),
    ],
)
def test_presets_have_the_papers_sizes(preset, layers, hidden, heads, low, high):
    config = BertConfig.from_preset(preset)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (layers, hidden, heads)
    assert config.intermediate_size == 4 * hidden
    with torch.device("meta"):
        model = BertModel(config)
    assert low < sum(p.numel() for p in model.parameters()) < high


POSITIVE_INTEGER = "(?:a positive number|an integer >= 1)"  # the wording of config_utils' range checks


@pytest.mark.parametrize(
    "overrides, field, value, allowed",
    [
        (dict(num_attention_heads=5), "num_attention_heads", 5, "a divisor of hidden_size=16"),
        (dict(hidden_act="swishy"), "hidden_act", "swishy", "a name in transformers' ACT2FN"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob", 1.5, "a probability"),
        (dict(attention_probs_dropout_prob=-0.1), "attention_probs_dropout_prob", -0.1, "a probability"),
        (dict(type_vocab_size=0), "type_vocab_size", 0, POSITIVE_INTEGER),
        (dict(num_hidden_layers=0), "num_hidden_layers", 0, POSITIVE_INTEGER),
        (dict(pad_token_id=99), "pad_token_id", 99, "None or a token id in"),
    ],
)
def test_bad_config_values_name_the_field_the_value_and_what_is_allowed(overrides, field, value, allowed):
    with pytest.raises(Exception, match=rf"`{field}`={value!r}: expected {allowed}"):
        BertConfig.from_preset("tiny", **overrides)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigValidationError, match="bert-medium"):
        BertConfig.from_preset("bert-huge")


def test_bert_field_names_and_the_shared_layers_aliases():
    config = BertConfig.from_preset("tiny", hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3)
    assert (config.dropout, config.attention_dropout, config.activation_function) == (0.2, 0.3, "gelu")
    layer = BertModel(config).encoder.layers[0]
    assert layer.self_attn.dropout == 0.3 and layer.self_attn_norm.dropout.p == 0.2
    assert not layer.self_attn_norm.normalize_before and layer.self_attn_norm.eps == 1e-12


def test_clear_errors_for_long_inputs_and_bad_ids():
    model = make(BertForMaskedLM, max_position_embeddings=8)
    assert model(random_ids(1, 8, V)).logits.shape == (1, 8, V)
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(random_ids(1, 9, V))
    with pytest.raises(ValueError, match=r"token id 99, outside the vocabulary \[0, 99\)"):
        model(torch.tensor([[4, 99]]))
    with pytest.raises(ValueError, match=r"segment id 2, outside \[0, type_vocab_size=2\)"):
        model(torch.tensor([[4, 7]]), token_type_ids=torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match=r"\(batch, choices, length\)"):
        make(BertForMultipleChoice)(random_ids(2, 5, V))
    ids = random_ids(1, 4, V)
    with pytest.raises(ValueError, match="exactly one of `input_ids`"):
        model(input_ids=ids, inputs_embeds=model.get_input_embeddings()(ids))


# --- the transformers model contract: hidden states, resizing, initialisation, compile ------------------------


def labelled_inputs(name: str) -> dict:
    """:func:`head_inputs` plus the pre-training labels; ``(B, C, T)`` inputs for multiple choice."""
    if name != "BertForPreTraining":
        return head_inputs(name)
    inputs = head_inputs("BertModel")
    return {**inputs, "labels": mlm_labels(inputs["input_ids"]), "next_sentence_label": torch.tensor([0, 1])}


def test_masked_lm_loss_with_num_items_in_batch_is_the_sum_over_that_count():
    model = make(BertForMaskedLM)
    inputs = head_inputs("BertForMaskedLM")
    count = int((inputs["labels"] != -100).sum())
    mean = model(**inputs).loss
    assert torch.allclose(model(**inputs, num_items_in_batch=torch.tensor(2 * count)).loss, mean / 2, atol=1e-6)
    assert model.accepts_loss_kwargs is False  # the Trainer scales every head's loss itself


def test_hidden_states_are_each_layers_output_and_keep_their_gradients():
    model = make(BertForSequenceClassification, num_labels=3, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0)
    inputs = head_inputs("BertForSequenceClassification")
    out = model(**inputs, output_hidden_states=True, output_attentions=True)
    bias = (1.0 - inputs["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    for layer, before, after in zip(model.bert.encoder.layers, out.hidden_states[:-1], out.hidden_states[1:],
                                    strict=True):
        assert torch.allclose(layer(before, attention_mask=bias)[0], after, atol=1e-5)
    for tensor in (out.hidden_states[0], out.hidden_states[1], out.attentions[0]):
        tensor.retain_grad()
    out.loss.backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0
               for t in (out.hidden_states[0], out.hidden_states[1], out.attentions[0]))


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("cls", [BertForPreTraining, BertForMaskedLM])
def test_resize_token_embeddings_resizes_the_decoder_and_its_bias(cls, tie, tmp_path):
    model = make(cls, tie_word_embeddings=tie)
    with torch.no_grad():
        model.mlm_head.decoder.bias.normal_()
    bias, weight = model.mlm_head.decoder.bias.clone(), model.mlm_head.decoder.weight.clone()
    model.resize_token_embeddings(V + 21, mean_resizing=False)
    decoder = model.mlm_head.decoder
    assert decoder.weight.shape == (V + 21, H) and decoder.bias.shape == (V + 21,) and model.config.vocab_size == V + 21
    assert torch.equal(decoder.bias[:V], bias) and torch.equal(decoder.weight[:V], weight)
    assert (decoder.weight is model.bert.embeddings.word_embeddings.weight) == tie
    ids = torch.tensor([[CLS, V + 20, SEP]])
    logits = model(ids).logits if cls is BertForMaskedLM else model(ids).prediction_logits
    assert logits.shape == (1, 3, V + 21)
    model.save_pretrained(tmp_path)
    loaded = cls.from_pretrained(tmp_path)
    assert (loaded.mlm_head.decoder.weight is loaded.bert.embeddings.word_embeddings.weight) == tie
    assert torch.equal(loaded.mlm_head.decoder.bias, decoder.bias)


def assert_initialised(model: BertPreTrainedModel):
    std = model.config.initializer_range
    for name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm):  # also the shared layers' AddNorm
            assert torch.equal(module.weight, torch.ones_like(module.weight)), name
            assert torch.equal(module.bias, torch.zeros_like(module.bias)), name
        elif isinstance(module, nn.Linear):
            assert torch.equal(module.bias, torch.zeros_like(module.bias)), name
            assert 0.5 * std < module.weight.std() < 1.5 * std, name
        elif isinstance(module, nn.Embedding):
            assert 0.5 * std < module.weight.std() < 1.5 * std, name
    assert not model.base_model.embeddings.word_embeddings.weight[model.config.pad_token_id].any()
    assert all(torch.isfinite(t).all() for t in model.state_dict().values())


@pytest.mark.parametrize("name", HEADS)
def test_init_weights_initialises_every_tensor_of_a_meta_device_model(name):
    with torch.device("meta"):
        model = getattr(hf_seqmodels, name)(BertConfig.from_preset("tiny", num_labels=3))
    model.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.fill_(float("nan"))  # what uninitialised memory may hold
    model.initialize_weights()
    assert_initialised(model)


def test_missing_weights_are_reported_and_initialised(tmp_path):
    from safetensors.torch import load_file, save_file

    make(BertForPreTraining).save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    missing = {"bert.embeddings.layer_norm.weight", "bert.encoder.layers.0.self_attn_norm.weight",
               "bert.encoder.layers.1.ffn_norm.bias", "mlm_head.decoder.bias", "nsp_head.weight"}
    save_file({k: v for k, v in state.items() if k not in missing}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    model, info = BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert set(info["missing_keys"]) == missing
    assert (model.bert.embeddings.layer_norm.weight == 1).all() and (model.mlm_head.decoder.bias == 0).all()
    assert (model.bert.encoder.layers[0].self_attn_norm.weight == 1).all()
    assert (model.bert.encoder.layers[1].ffn_norm.bias == 0).all()
    assert 0.01 < model.nsp_head.weight.std() < 0.03
    assert torch.equal(model.bert.encoder.layers[1].ffn_norm.weight, state["bert.encoder.layers.1.ffn_norm.weight"])


def test_accelerate_empty_weights_then_loading_gives_the_saved_model(tmp_path):
    import accelerate

    saved_model = make(BertForPreTraining)
    saved_model.save_pretrained(tmp_path)
    with accelerate.init_empty_weights():
        model = BertForPreTraining(BertConfig.from_preset("tiny"))
    assert model.bert.embeddings.word_embeddings.weight.is_meta
    model.tie_weights()  # accelerate's documented step: its meta parameters replace the tie made in __init__
    model = accelerate.load_checkpoint_and_dispatch(model, str(tmp_path / "model.safetensors"),
                                                    device_map={"": "cpu"}).eval()
    assert model.mlm_head.decoder.weight is model.bert.embeddings.word_embeddings.weight
    inputs = head_inputs("BertModel")
    assert torch.equal(model(**inputs).prediction_logits, saved_model(**inputs).prediction_logits)


@pytest.mark.parametrize("name, implementation", [(name, "sdpa") for name in HEADS] + [("BertForPreTraining", "eager")])
def test_compiled_forward_of_every_head_has_no_graph_break(name, implementation):
    """No graph break (explain), and a full-graph compilation returns the eager outputs, hidden states and
    attention weights included (``backend="eager"``: the traced graph is what is checked, not the codegen)."""
    assert BertPreTrainedModel._can_compile_fullgraph
    model = make(getattr(hf_seqmodels, name), num_labels=3, attn_implementation=implementation)
    inputs = labelled_inputs(name)
    torch._dynamo.reset()
    assert torch._dynamo.explain(model)(**inputs).graph_break_count == 0
    flags = dict(output_hidden_states=True, output_attentions=True)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    expected, got = model(**inputs, **flags).to_tuple(), compiled(**inputs, **flags).to_tuple()
    for a, b in zip(expected, got, strict=True):
        for x, y in zip(a, b, strict=True) if isinstance(a, tuple) else [(a, b)]:
            assert torch.allclose(x, y, atol=1e-6)


def test_eager_checks_still_run_outside_compilation():
    model = make(BertModel, max_position_embeddings=8)
    with pytest.raises(ValueError, match=r"segment id -1, outside \[0, type_vocab_size=2\)"):
        model(torch.tensor([[4, 7]]), token_type_ids=torch.tensor([[0, -1]]))
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(torch.tensor([[4, 7]]), position_ids=torch.tensor([[0, 8]]))


def test_question_answering_ignores_positions_outside_the_input_and_never_gives_nan():
    model = make(BertForQuestionAnswering)
    inputs = head_inputs("BertModel")  # T = 10
    out = model(**inputs, start_positions=torch.tensor([6, 25]), end_positions=torch.tensor([[8], [-3]]))
    start = nn.functional.cross_entropy(out.start_logits[:1], torch.tensor([6]))  # 25: outside, ignored
    end = nn.functional.cross_entropy(out.end_logits, torch.tensor([8, 0]))  # -3 is clamped to [CLS]
    assert torch.allclose(out.loss, (start + end) / 2, atol=1e-6)
    outside = model(**inputs, start_positions=torch.tensor([10, 40]), end_positions=torch.tensor([12, 99])).loss
    assert outside.item() == 0.0
    outside.backward()  # a training step on such a batch changes nothing and does not fail


# --- tokenizer, pipelines, Trainer ------------------------------------------------------------------

CORPUS = [
    "the cat sat on the mat .",
    "the dog sat on the log .",
    "a bird flew over the house .",
    "ada wrote the first program .",
    "the house stood on the hill near the river .",
    "who wrote the program ? ada wrote it .",
] * 4


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from hf_seqmodels.tokenization import train_tokenizer

    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    return train_tokenizer([path], kind="wordpiece", vocab_size=120, min_frequency=1,
                           add_bert_special_tokens=True, model_max_length=64)


def test_tokenizer_builds_bert_inputs(tokenizer):
    encoded = tokenizer("the cat", "a dog")
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert tokens == ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"]
    assert encoded["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    assert (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id, tokenizer.pad_token_id) == (
        CLS, SEP, MASK, 0)


def saved(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_fill_mask_pipeline(tokenizer, tmp_path):
    model = make(BertForMaskedLM, vocab_size=len(tokenizer))
    fill = transformers.pipeline("fill-mask", model=saved(model, tokenizer, tmp_path), top_k=3)
    results = fill("the cat [MASK] on the mat .")
    assert len(results) == 3 and all(r["sequence"].startswith("the cat") for r in results)
    encoded = tokenizer("the cat [MASK] on the mat .", return_tensors="pt")
    with torch.no_grad():
        probs = model(**encoded).logits[0, 3].softmax(-1)
    assert [r["token"] for r in results] == probs.topk(3).indices.tolist()
    assert results[0]["score"] == pytest.approx(probs.max().item(), abs=1e-5)


def test_text_classification_pipeline_single_and_pair(tokenizer, tmp_path):
    model = make(BertForSequenceClassification, vocab_size=len(tokenizer), num_labels=2,
                 id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    classify = transformers.pipeline("text-classification", model=saved(model, tokenizer, tmp_path))
    for text, pair in (("the cat sat .", None), ("the cat sat .", "the dog sat .")):
        result = classify({"text": text, "text_pair": pair} if pair else text)
        result = result[0] if isinstance(result, list) else result
        with torch.no_grad():
            probs = model(**tokenizer(text, pair, return_tensors="pt")).logits[0].softmax(-1)
        assert result["label"] == model.config.id2label[int(probs.argmax())]
        assert result["score"] == pytest.approx(probs.max().item(), abs=1e-5)


def test_token_classification_pipeline(tokenizer, tmp_path):
    labels = {0: "O", 1: "B-ANIMAL", 2: "I-ANIMAL"}
    model = make(BertForTokenClassification, vocab_size=len(tokenizer), num_labels=3, id2label=labels,
                 label2id={v: k for k, v in labels.items()})
    tag = transformers.pipeline("token-classification", model=saved(model, tokenizer, tmp_path), ignore_labels=[])
    entities = tag("the cat sat .")
    assert [e["word"] for e in entities] == ["the", "cat", "sat", "."]
    with torch.no_grad():
        logits = model(**tokenizer("the cat sat .", return_tensors="pt")).logits[0, 1:-1]
    assert [e["entity"] for e in entities] == [labels[i] for i in logits.argmax(-1).tolist()]


def best_span(model, tokenizer, question, context, max_answer_len=15):
    """Brute force: the context span with the highest p_start * p_end."""
    encoded = tokenizer(question, context, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0]
    in_context = torch.tensor([s == 1 for s in encoded.sequence_ids(0)])
    with torch.no_grad():
        out = model(**encoded)
    p_start = out.start_logits[0].masked_fill(~in_context, float("-inf")).softmax(-1)
    p_end = out.end_logits[0].masked_fill(~in_context, float("-inf")).softmax(-1)
    spans = [(p_start[i] * p_end[j], i, j) for i in range(len(p_start)) for j in range(i, i + max_answer_len)
             if j < len(p_end) and in_context[i] and in_context[j]]
    score, i, j = max(spans)
    return context[int(offsets[i, 0]):int(offsets[j, 1])], float(score)


def test_question_answering_pipeline(tokenizer, tmp_path):
    from hf_seqmodels.pipelines import QUESTION_ANSWERING_TASK

    model = make(BertForQuestionAnswering, vocab_size=len(tokenizer))
    qa = transformers.pipeline(QUESTION_ANSWERING_TASK, model=saved(model, tokenizer, tmp_path),
                             trust_remote_code=True)  # the folder declares its pipeline (custom_pipelines)
    question, context = "who wrote the program ?", "ada wrote the first program near the river ."
    result = qa(question=question, context=context)
    assert result["answer"] == context[result["start"]:result["end"]] and result["answer"]
    answer, score = best_span(model, tokenizer, question, context)
    assert result["answer"] == answer and result["score"] == pytest.approx(score, abs=1e-5)
    top = qa({"question": question, "context": context}, top_k=3)
    assert len(top) == 3 and top[0]["answer"] == answer and top[0]["score"] >= top[1]["score"] >= top[2]["score"]
    long_context = " ".join(["the house stood on the hill ."] * 10 + [context])
    windowed = qa(question=question, context=long_context, max_seq_len=24, doc_stride=6)
    assert windowed["answer"] == long_context[windowed["start"]:windowed["end"]]
    with pytest.raises(ValueError, match="needs a string `question`"):
        qa(question=question)


def finetuning_data(name: str, count: int = 16) -> list[dict]:
    rows = []
    for n in range(count):
        ids = random_ids(1, 8, V, seed=n, low=7)[0]
        ids[0], ids[-1] = CLS, SEP
        label = int(ids[1]) % 2  # learnable from the first word
        row = {"input_ids": ids, "attention_mask": torch.ones(8, dtype=torch.long)}
        if name == "BertForSequenceClassification":
            row["labels"] = torch.tensor(label)
        elif name == "BertForTokenClassification":
            row["labels"] = ids % 2
        elif name == "BertForQuestionAnswering":
            row["start_positions"], row["end_positions"] = torch.tensor(1 + label), torch.tensor(3 + label)
        else:  # multiple choice: the right choice starts with an even word
            choices = ids[None].repeat(2, 1)
            choices[label, 1] = 8
            choices[1 - label, 1] = 9
            row = {"input_ids": choices, "attention_mask": torch.ones(2, 8, dtype=torch.long),
                   "labels": torch.tensor(label)}
        rows.append(row)
    return rows


@pytest.mark.parametrize("name", ["BertForSequenceClassification", "BertForTokenClassification",
                                  "BertForQuestionAnswering", "BertForMultipleChoice"])
def test_trainer_fine_tuning_lowers_the_loss(name, tmp_path):
    data = finetuning_data(name)
    model = make(getattr(hf_seqmodels, name), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch = transformers.default_data_collator(data)

    def loss() -> float:
        with torch.no_grad():
            return model.eval()(**batch).loss.item()

    before = loss()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=30, per_device_train_batch_size=16, learning_rate=1e-2,
        lr_scheduler_type="constant", use_cpu=True, report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
    )
    transformers.Trainer(model=model, args=args, train_dataset=data).train()
    assert loss() < 0.5 * before
