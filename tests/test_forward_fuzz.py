"""Bad forward inputs get a clear ``ValueError``, valid ones finite outputs, for every head of every family.

The heads, their tiny configs and their inputs come from the family registry. Each bad call must raise a
``ValueError`` whose message names the argument at fault (never a deep torch error, a NaN or a silently
wrong result); random valid calls (batch, length, padding side and amount drawn by hypothesis) must give
finite outputs and a finite loss.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_inputs import model_inputs

from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

HEADS = [(family, head) for family in FAMILY_DESCRIPTIONS for head in family.heads.values()]
IDS = [head.__name__ for _, head in HEADS]
HAS_LABELS = [(f, h) for f, h in HEADS if f.task_of(h) != "AutoModel"]


def model_and_inputs(family, head, batch=2, length=7, seed=0):
    config = family.tiny_config()
    torch.manual_seed(seed)
    return head(config).eval(), model_inputs(family, config, head, batch_size=batch, seq_length=length, seed=seed)


def bad_calls(family, head):
    """``(name, argument named by the error, inputs)`` for each kind of bad input."""
    model, inputs = model_and_inputs(family, head)
    ids = inputs["input_ids"]
    vocab = model.config.vocab_size if not model.config.is_encoder_decoder else (
        getattr(model.config, "source_vocab_size", None) or model.config.vocab_size)
    calls = [
        ("float ids", "input_ids", {**inputs, "input_ids": ids.float()}),
        ("negative id", "input_ids", {**inputs, "input_ids": ids.masked_fill(ids == ids.flatten()[0], -1)}),
        ("id past the vocabulary", "input_ids", {**inputs, "input_ids": ids.masked_fill(ids == ids.flatten()[0], vocab)}),
        ("mask value 2", "attention_mask", {**inputs, "attention_mask": inputs["attention_mask"] * 2}),
        ("mask value -1", "attention_mask", {**inputs, "attention_mask": -inputs["attention_mask"]}),
        ("mask of another batch size", "attention_mask", {**inputs, "attention_mask": inputs["attention_mask"][:1]}),
    ]
    calls += [
        ("fractional mask", "attention_mask", {**inputs, "attention_mask": inputs["attention_mask"] * 0.5}),
        ("ids without a batch axis", "input_ids", {**inputs, "input_ids": ids.reshape(-1)}),
        ("no token at all", "input_ids", {**{k: v[..., :0] if k in ("input_ids", "attention_mask", "token_type_ids")
                                            else v for k, v in inputs.items()}}),
    ]
    if "decoder_input_ids" in inputs and family.task_of(head) != "AutoModel":  # a base model runs its encoder
        without_target = {k: v for k, v in inputs.items() if k not in ("decoder_input_ids", "labels")}
        calls.append(("no decoder input", "decoder_input_ids", without_target))
    if "decoder_input_ids" in inputs:
        decoder_ids = inputs["decoder_input_ids"].clone()
        decoder_ids[0, -1] = model.config.vocab_size
        calls.append(("decoder id past the vocabulary", "decoder_input_ids", {**inputs, "decoder_input_ids": decoder_ids}))
    if "token_type_ids" in inputs:
        types = inputs["token_type_ids"].clone()
        types.view(-1)[0] = model.config.type_vocab_size
        calls.append(("segment past type_vocab_size", "token_type_ids", {**inputs, "token_type_ids": types}))
    labels = inputs.get("labels")
    task = family.task_of(head)
    if labels is not None and task in ("AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForMaskedLM",
                                       "AutoModelForPreTraining"):
        targets = labels.clone()
        targets[0, -1] = model.config.vocab_size
        calls.append(("target past the vocabulary", "labels", {**inputs, "labels": targets}))
    if labels is not None and task in ("AutoModelForSequenceClassification", "AutoModelForTokenClassification",
                                       "AutoModelForMultipleChoice", "AutoModelForNextSentencePrediction"):
        limit = {"AutoModelForMultipleChoice": ids.shape[1] if ids.dim() == 3 else 2,
                 "AutoModelForNextSentencePrediction": 2}.get(task, model.config.num_labels)
        too_large = labels.clone()
        too_large.view(-1)[0] = limit
        calls.append(("label past the classes", "labels", {**inputs, "labels": too_large}))
        negative = labels.clone()
        negative.view(-1)[0] = -5
        calls.append(("negative label", "labels", {**inputs, "labels": negative}))
        calls.append(("labels of another batch size", "labels", {**inputs, "labels": labels[:1]}))
    max_positions = getattr(model.config, "max_position_embeddings", None)
    if max_positions is not None:
        long_ids = torch.full((*ids.shape[:-1], max_positions + 1), 5, dtype=torch.long)
        long_inputs = {"input_ids": long_ids}
        if model.config.is_encoder_decoder:
            long_inputs["decoder_input_ids"] = inputs["decoder_input_ids"]
        calls.append(("longer than the positions", "max_position_embeddings", long_inputs))
    return model, calls


@pytest.mark.parametrize("family, head", HEADS, ids=IDS)
def test_bad_inputs_raise_a_value_error_naming_the_argument(family, head):
    model, calls = bad_calls(family, head)
    failures = []
    for name, argument, inputs in calls:
        try:
            with torch.no_grad():
                output = model(**inputs)
        except ValueError as error:
            if argument not in str(error):
                failures.append(f"{name}: the error does not name `{argument}`: {error}")
            continue
        except Exception as error:  # a torch error: not what a user should see
            failures.append(f"{name}: {type(error).__name__}: {str(error)[:160]}")
            continue
        failures.append(f"{name}: accepted silently (loss={getattr(output, 'loss', None)})")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("family, head", [(f, h) for f, h in HEADS if f.task_of(h) == "AutoModelForQuestionAnswering"],
                         ids=lambda x: getattr(x, "__name__", getattr(x, "name", "")))
def test_span_positions_outside_the_sequence_are_ignored_never_nan(family, head):
    model, inputs = model_and_inputs(family, head)
    length = inputs["input_ids"].shape[1]
    inputs["start_positions"] = torch.tensor([length + 3, -2])
    inputs["end_positions"] = torch.tensor([length + 9, length + 1])
    loss = model(**inputs).loss
    assert torch.isfinite(loss)


def pad(inputs: dict, amount: int, left: bool) -> dict:
    """Mask ``amount`` positions of the first row on one side (keeping at least one real token)."""
    mask = inputs["attention_mask"].clone()
    length = mask.shape[-1]
    amount = min(amount, length - 1)
    if amount:
        if left:
            mask[0, ..., :amount] = 0
        else:
            mask[0, ..., length - amount:] = 0
    return {**inputs, "attention_mask": mask}


@pytest.mark.parametrize("family, head", HEADS, ids=IDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 3), length=st.integers(2, 9), padding=st.integers(0, 4), left=st.booleans(),
       seed=st.integers(0, 3))
def test_valid_inputs_give_finite_outputs_and_loss(family, head, batch, length, padding, left, seed):
    model, inputs = model_and_inputs(family, head, batch=batch, length=length, seed=seed)
    inputs = pad(inputs, padding, left)
    output = model(**inputs)
    tensors = [v for v in output.values() if torch.is_tensor(v) and v.is_floating_point()]
    assert tensors and all(torch.isfinite(t).all() for t in tensors)
