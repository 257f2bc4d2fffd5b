"""Dynamic int8 quantization (``torch.ao.quantization.quantize_dynamic``) of every recurrent head: the quantized
``nn.LSTM``/``nn.GRU`` replace the stack's module, which the stack calls through its public forward, padded or
not (batch 1, every decoding step)."""

from __future__ import annotations

import pytest
import torch
from model_inputs import model_inputs
from torch import nn
from torch.ao.quantization import quantize_dynamic

import hf_seqmodels  # noqa: F401
from hf_seqmodels.models.recurrent_stack import RecurrentStack
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS


def _recurrent(family, head) -> bool:
    with torch.device("meta"):
        model = head(family.tiny_config())
    return any(isinstance(module, RecurrentStack) for module in model.modules())


HEADS = [pytest.param(family, head, id=f"{family.name}-{head.__name__}")
         for family in FAMILY_DESCRIPTIONS for head in family.heads.values() if _recurrent(family, head)]


def _quantized(family, head):
    torch.manual_seed(0)
    model = head(family.tiny_config()).eval()
    quantized = quantize_dynamic(model, {nn.LSTM, nn.GRU, nn.Linear}, dtype=torch.qint8)
    stacks = [m for m in quantized.modules() if isinstance(m, RecurrentStack)]
    assert stacks and all(type(m.rnn).__module__.startswith("torch.ao.nn.quantized.dynamic") for m in stacks)
    return model, quantized


def _first_output(output):
    return output.logits if hasattr(output, "logits") else output.last_hidden_state


def test_the_heads_cover_every_recurrent_family():
    names = {param.values[0].name for param in HEADS}
    assert {"rnn", "rnn_seq2seq", "bilstm_crf"} <= names, names


@pytest.mark.parametrize("family, head", HEADS)
def test_a_quantized_head_runs_unpadded_and_padded_batches(family, head):
    model, quantized = _quantized(family, head)
    config = family.tiny_config()
    inputs = model_inputs(family, config, head, batch_size=2, seq_length=6, labels=False)
    one_row = {name: tensor[:1] for name, tensor in inputs.items()}
    inputs["attention_mask"][1, -2:] = 0  # a padded row
    with torch.no_grad():
        for batch in (one_row, inputs):
            got, want = _first_output(quantized(**batch)), _first_output(model(**batch))
            assert got.shape == want.shape and torch.isfinite(got).all()
            assert (got - want).abs().max() < 0.1 * want.abs().max() + 1e-3  # int8 weights: close, not equal


@pytest.mark.parametrize("family, head", [param for param in HEADS if param.values[1].can_generate()])
def test_a_quantized_generative_head_generates(family, head):
    model, quantized = _quantized(family, head)
    inputs = model_inputs(family, family.tiny_config(), head, batch_size=1, seq_length=5, labels=False)
    inputs.pop("decoder_input_ids", None)
    tokens = quantized.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    prompt = 0 if model.config.is_encoder_decoder else inputs["input_ids"].shape[1]
    assert tokens.shape[0] == 1 and tokens.shape[1] >= prompt + 4
