"""Forward contract (transformers' ModelTesterMixin): output flags, hidden states and attentions, tuples,
determinism, batching, losses (problem types, num_items_in_batch, shift_labels), inputs_embeds, masks, SDPA."""

from __future__ import annotations

import inspect

import pytest
import torch
from conformance_harness import HeadCase, assert_outputs_close, cases, main_output

from hf_seqmodels.example_inputs import FIRST_REGULAR_ID


@pytest.mark.parametrize("case", cases("forward_signature"))
def test_forward_takes_the_main_input_first(case: HeadCase):
    params = list(inspect.signature(case.model_class.forward).parameters)
    assert params[1] == case.model_class.main_input_name == "input_ids"
    assert ("labels" in params or "start_positions" in params) == case.has_labels


@pytest.mark.parametrize("case", cases("determinism"))
def test_eval_forward_is_deterministic(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config)
    with torch.no_grad():
        assert_outputs_close(model(**inputs), model(**inputs), atol=0, rtol=0, msg=case.name)


@pytest.mark.parametrize("case", cases("batching_equivalence"))
def test_a_batch_gives_each_row_the_result_it_gets_alone(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, batch_size=3, labels=False)
    with torch.no_grad():
        batched = main_output(model(**inputs))
        for row in range(3):
            alone = main_output(model(**{k: v[row : row + 1] for k, v in inputs.items()}))
            torch.testing.assert_close(batched[row : row + 1], alone, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------- defect 1: flags from the config ----

@pytest.mark.parametrize("case", cases("output_flags_from_config"))
def test_output_hidden_states_from_the_config_and_the_keyword_wins(case: HeadCase, tmp_path):
    model = case.model(output_hidden_states=True)
    inputs = case.inputs(model.config, labels=False)
    fields = case.family.hidden_states(model.config)
    with torch.no_grad():
        out = model(**inputs)
        assert all(out.get(name) is not None for name in fields), "config.output_hidden_states=True ignored"
        off = model(**inputs, output_hidden_states=False)
        assert all(off.get(name) is None for name in fields), "output_hidden_states=False did not win"
    model.save_pretrained(tmp_path)
    loaded = case.model_class.from_pretrained(tmp_path, output_hidden_states=False).eval()
    assert loaded.config.output_hidden_states is False
    with torch.no_grad():
        assert all(loaded(**inputs).get(name) is None for name in fields)


@pytest.mark.parametrize("case", cases("output_attentions_from_config", lambda c: c.family.attentions(c.config())))
def test_output_attentions_from_the_config(case: HeadCase):
    model = case.model(output_attentions=True)
    inputs = case.inputs(model.config, labels=False)
    with torch.no_grad():
        out = model(**inputs)
    assert all(out.get(name) is not None for name in case.family.attentions(model.config))


@pytest.mark.parametrize("case", cases("return_dict_false"))
def test_return_dict_false_in_the_config_or_keyword_gives_the_same_tuple(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config)
    with torch.no_grad():
        structured = model(**inputs).to_tuple()
        by_keyword = model(**inputs, return_dict=False)
        model.config.return_dict = False
        by_config = model(**inputs)
    for result in (by_keyword, by_config):
        assert isinstance(result, tuple) and len(result) == len(structured)
        for a, b in zip(result, structured, strict=True):
            if torch.is_tensor(b):
                torch.testing.assert_close(a, b)


# ------------------------------------------------------------ defect 2: hidden states and attentions ----

@pytest.mark.parametrize("case", cases("hidden_states_per_layer"))
def test_hidden_states_are_the_embeddings_and_every_layer(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    batch = inputs["input_ids"].shape[0]
    for name, count in case.family.hidden_states(model.config).items():
        states = out.get(name)
        assert isinstance(states, tuple) and len(states) == count, f"{name}: {None if states is None else len(states)}"
        for state in states:
            assert state.shape[0] == batch * (2 if case.task == "AutoModelForMultipleChoice" else 1)


@pytest.mark.parametrize("case", cases("attentions_per_layer", lambda c: c.family.attentions(c.config())))
def test_attentions_are_one_per_layer_and_normalised(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    for name, count in case.family.attentions(model.config).items():
        weights = out.get(name)
        assert isinstance(weights, tuple) and len(weights) == count, name
        for w in weights:
            rows = inputs["input_ids"].shape[:-1].numel()  # multiple choice: batch * choices
            assert w.shape[0] == rows and w.dim() == 4, w.shape  # (B, heads, T_q, T_k)
            torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", cases("retain_grad", lambda c: not c.is_base))
def test_hidden_states_and_attentions_are_part_of_the_graph(case: HeadCase):
    """``retain_grad()`` on the first hidden state (and attention) gives a gradient after backward."""
    model = case.model().train()
    inputs = case.inputs(model.config)
    with_attentions = bool(case.family.attentions(model.config))
    out = model(**inputs, output_hidden_states=True, output_attentions=with_attentions or None)
    name = next(iter(case.family.hidden_states(model.config)))
    kept = [out[name][0]]
    if with_attentions:
        kept.append(out[next(iter(case.family.attentions(model.config)))][0])
    for tensor in kept:
        tensor.retain_grad()
    main = out.loss if out.get("loss") is not None else main_output(out).sum()
    main.backward()
    for tensor in kept:
        assert tensor.grad is not None


# ------------------------------------------------------------------------------------------ losses ----

@pytest.mark.parametrize("problem_type", ["regression", "single_label_classification", "multi_label_classification"])
@pytest.mark.parametrize("case", cases("problem_types", lambda c: c.task == "AutoModelForSequenceClassification"))
def test_sequence_classification_problem_types(case: HeadCase, problem_type: str):
    num_labels = 1 if problem_type == "regression" else 3
    model = case.model(problem_type=problem_type, num_labels=num_labels).train()
    inputs = case.inputs(model.config, labels=False)
    batch = inputs["input_ids"].shape[0]
    labels = {"regression": torch.randn(batch), "single_label_classification": torch.tensor([0, 2][:batch]),
              "multi_label_classification": torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])[:batch]}[problem_type]
    out = model(**inputs, labels=labels)
    assert out.logits.shape == (batch, num_labels) and torch.isfinite(out.loss)
    out.loss.backward()
    if problem_type == "regression":
        torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.logits.squeeze(-1), labels))


TOKEN_LOSS_TASKS = ("AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForMaskedLM")


@pytest.mark.parametrize("case", cases("num_items_in_batch",
                                       lambda c: c.task in TOKEN_LOSS_TASKS and c.caps.num_items_in_batch))
def test_loss_with_num_items_in_batch_is_the_sum_over_that_count(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config)
    with torch.no_grad():
        mean = model(**inputs).loss
        count = int((inputs["labels"] != -100).sum()) - (inputs["labels"].shape[0] if case.task.endswith("CausalLM")
                                                          else 0)
        halved = model(**inputs, num_items_in_batch=torch.tensor(2 * count)).loss
    torch.testing.assert_close(halved, mean / 2)


@pytest.mark.parametrize("case", cases("num_items_in_batch_scales", lambda c: c.has_labels and c.caps.num_items_in_batch
                                       and getattr(c.model_class, "accepts_loss_kwargs", True)))
def test_a_head_accepting_loss_kwargs_divides_its_loss_by_num_items_in_batch(case: HeadCase):
    """The Trainer passes ``num_items_in_batch`` to a forward with ``**kwargs`` unless the class sets
    ``accepts_loss_kwargs = False``, and then leaves gradient accumulation's scaling to the model: doubling
    it must halve the loss."""
    model = case.model()
    inputs = case.inputs(model.config)
    with torch.no_grad():
        three = model(**inputs, num_items_in_batch=torch.tensor(3)).loss
        six = model(**inputs, num_items_in_batch=torch.tensor(6)).loss
    torch.testing.assert_close(three, 2 * six)


@pytest.mark.parametrize("case", cases("shift_labels", lambda c: c.task == "AutoModelForCausalLM"))
def test_causal_lm_honours_shift_labels_also_next_to_labels(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config)
    labels = inputs.pop("labels")
    shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], dim=1)
    with torch.no_grad():
        reference = model(**inputs, labels=labels).loss
        only_shift = model(**inputs, shift_labels=shifted).loss
        both = model(**inputs, labels=torch.full_like(labels, FIRST_REGULAR_ID), shift_labels=shifted).loss
    torch.testing.assert_close(only_shift, reference)
    torch.testing.assert_close(both, reference)


# ---------------------------------------------------------------------------- inputs_embeds, masks ----

@pytest.mark.parametrize("case", cases("inputs_embeds", lambda c: c.caps.inputs_embeds))
def test_inputs_embeds_give_the_result_of_their_ids(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    ids = inputs.pop("input_ids")
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        # the family's inputs without their ids, as transformers' test_inputs_embeds takes its tester's: they
        # carry what else the model needs then (a character encoder's char_input_ids)
        torch.testing.assert_close(main_output(model(inputs_embeds=embeds, **inputs)),
                                   main_output(model(input_ids=ids, **inputs)))
        tables = [b for name, b in model.named_buffers() if name.endswith("token_chars")]
        if tables and getattr(model.config, "char_encoder", None):  # characters cannot come from embeddings:
            alone = {k: v for k, v in inputs.items() if k != "char_input_ids"}  # the ids' own characters
            torch.testing.assert_close(main_output(model(inputs_embeds=embeds, char_input_ids=tables[0][ids], **alone)),
                                       main_output(model(input_ids=ids, **alone)))


@pytest.mark.parametrize("case", cases("mask_with_holes"))
def test_a_mask_with_zeros_between_tokens_gives_finite_outputs(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    mask = inputs["attention_mask"].clone()
    mask[..., 2] = 0
    with torch.no_grad():
        out = main_output(model(**{**inputs, "attention_mask": mask}))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("case", cases("mask_removes_tokens", lambda c: c.caps.mask_removes_tokens))
def test_masked_tokens_count_as_removed(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    mask = inputs["attention_mask"].clone()
    mask[:, 2] = 0
    keep = mask[0].bool()
    with torch.no_grad():
        holed = model(**{**inputs, "attention_mask": mask})
        removed = model(input_ids=inputs["input_ids"][:, keep])
    name = "pooler_output" if case.is_base else "logits"  # the per-position features keep their positions
    torch.testing.assert_close(holed[name], removed[name])


@pytest.mark.parametrize("case", cases("eager_equals_sdpa", lambda c: c.caps.sdpa))
def test_eager_and_sdpa_attention_agree_also_with_padding(case: HeadCase):
    outputs = []
    for implementation in ("eager", "sdpa"):
        config = case.config()
        torch.manual_seed(0)
        model = case.model_class._from_config(config, attn_implementation=implementation).eval()
        assert model.config._attn_implementation == implementation
        inputs = case.inputs(model.config, labels=False)
        inputs["attention_mask"][..., :2] = 0 if not case.caps.is_encoder_decoder else 1
        inputs["attention_mask"][..., -1] = 0 if case.caps.is_encoder_decoder else 1
        with torch.no_grad():
            outputs.append(main_output(model(**inputs)))
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("set_attn_implementation", lambda c: c.caps.sdpa))
def test_the_attention_implementation_can_be_switched_after_loading(case: HeadCase):
    model = case.model()
    inputs = case.inputs(model.config, labels=False)
    with torch.no_grad():
        before = main_output(model(**inputs))
        model.set_attn_implementation("eager" if model.config._attn_implementation == "sdpa" else "sdpa")
        torch.testing.assert_close(main_output(model(**inputs)), before, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", cases("right_padding", lambda c: c.task != "AutoModelForMultipleChoice"))
def test_right_padding_leaves_the_real_positions_of_a_row_unchanged(case: HeadCase):
    """A row padded at the end (mask 0, pad ids) gives, at its real positions, what it gives alone."""
    model = case.model()
    inputs = case.inputs(model.config, batch_size=2, labels=False)
    length = inputs["input_ids"].shape[1]
    inputs["attention_mask"][0, -2:] = 0
    inputs["input_ids"][0, -2:] = model.config.pad_token_id
    if "char_input_ids" in inputs:  # a padding token has no characters
        inputs["char_input_ids"][0, -2:] = 0
    per_token = ("input_ids", "attention_mask", "token_type_ids", "char_input_ids")
    alone = {k: (v[:1, : length - 2] if k in per_token else v[:1]) for k, v in inputs.items()}
    with torch.no_grad():
        padded, single = main_output(model(**inputs))[:1], main_output(model(**alone))
    if padded.dim() >= 2 and padded.shape[1] == length:  # per token: compare the real positions
        padded = padded[:, : length - 2]
    torch.testing.assert_close(padded, single, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("compile_forward", lambda c: not c.caps.static_cache))
def test_compiled_forward_equals_eager(case: HeadCase):
    """Families without full-graph compilation still compile correctly (graph breaks allowed, e.g. around
    the fused recurrent kernels)."""
    torch._dynamo.reset()
    model = case.model()
    inputs = case.inputs(model.config)
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(main_output(compiled(**inputs)), main_output(model(**inputs)))
