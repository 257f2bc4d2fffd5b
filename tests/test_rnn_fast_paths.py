"""The per-call shortcuts of the recurrent models (a decoding step calls the forward once per token) must give
exactly what the general path gives: the 0/1 check of an integer attention mask in one pass, dropout skipped in eval mode and the checkpointing wrapper skipped when it
does not checkpoint. The stack calls torch's modules through their public forward (hooks, replaced weights and
quantized replacements included)."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.models.input_checks import check_input_ids, current_mask
from hf_seqmodels.models.recurrent_stack import RecurrentStack


def test_the_stack_reads_replaced_weights_and_keeps_torch_errors():
    torch.manual_seed(0)
    stack = RecurrentStack("lstm", input_size=5, hidden_size=6, num_layers=1).eval()
    inputs = torch.randn(2, 3, 5)
    zeros = {name: torch.zeros_like(p) for name, p in stack.named_parameters()}
    outputs, _ = functional_call(stack, zeros, (inputs,))
    assert torch.equal(outputs, torch.zeros_like(outputs)), "functional_call's weights must be the ones used"
    wrong_state = (torch.zeros(5, 1, 6), torch.zeros(5, 1, 6))  # 5 rows for a batch of 2
    with pytest.raises(RuntimeError, match="Expected hidden"):
        stack(inputs, wrong_state)


def test_dropout_still_drops_in_training_and_is_skipped_in_eval():
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny", hidden_dropout_prob=0.5))
    ids = torch.randint(4, model.config.vocab_size, (2, 6))
    model.eval()
    assert torch.equal(model(ids).logits, model(ids).logits)
    model.train()
    assert not torch.equal(model(ids).logits, model(ids).logits)


def test_checkpointing_still_recomputes_the_stack_in_training():
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny")).train()
    ids = torch.randint(4, model.config.vocab_size, (2, 6))
    model.activation_checkpointing_enable()
    calls = []
    model.model.encoder.recompute.register_forward_pre_hook(lambda *args: calls.append(1))
    model(ids, labels=ids).loss.backward()
    assert len(calls) >= 1, "a checkpointing training forward goes through the checkpointing wrapper"
    calls.clear()
    with torch.no_grad():
        model(ids)
    assert calls == [], "without gradients there is nothing to recompute"


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.uint8, torch.bool])
def test_current_mask_of_every_integer_dtype(dtype):
    ids = torch.zeros(2, 3, dtype=torch.long)
    assert current_mask(torch.ones(2, 5, dtype=dtype), ids) is None
    mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 0, 1, 1]], dtype=dtype)
    assert torch.equal(current_mask(mask, ids), torch.tensor([[True, True, True], [False, True, True]]))


@pytest.mark.parametrize("bad", [torch.tensor([[1, 2, 1]]), torch.tensor([[-1, 1, 1]]), torch.tensor([[1.0, 0.5, 1.0]])])
def test_current_mask_names_a_value_other_than_zero_and_one(bad):
    with pytest.raises(ValueError, match="`attention_mask` must hold 0 .* got the value"):
        current_mask(bad, torch.zeros(1, 3, dtype=torch.long))


def test_check_input_ids_of_a_single_token():
    check_input_ids(torch.tensor([[9]]), 10)
    for bad in (10, -1):
        with pytest.raises(ValueError, match=f"token id {bad}, outside the vocabulary"):
            check_input_ids(torch.tensor([[bad]]), 10)


def test_a_hooked_or_replaced_module_forward_is_still_called():
    torch.manual_seed(0)
    model = RNNForCausalLM(RNNConfig.from_preset("tiny")).eval()
    ids = torch.randint(4, model.config.vocab_size, (2, 6))
    calls = []
    handle = model.model.encoder.rnn.register_forward_hook(lambda *args: calls.append("hook"))
    expected = model(ids).logits
    assert calls == ["hook"], "a forward hook (e.g. a device or offload hook) must see the call"
    handle.remove()
    forward = model.model.encoder.rnn.forward
    model.model.encoder.rnn.forward = lambda *args, **kwargs: calls.append("forward") or forward(*args, **kwargs)
    assert torch.equal(model(ids).logits, expected)
    assert calls == ["hook", "forward"], "a replaced forward (accelerate's hooks replace it) must be called"


def test_target_checks_accept_ignored_positions_and_name_an_id_outside():
    from hf_seqmodels.models.input_checks import check_target_ids

    check_target_ids(torch.tensor([[0, 9, -100]]), 10)
    check_target_ids(torch.tensor([[0, 9, 3]]), 10)  # all inside: the one-pass case
    for bad in (10, -5):
        with pytest.raises(ValueError, match=f"`labels` contains the token id {bad}, outside"):
            check_target_ids(torch.tensor([[0, -100, bad]]), 10)


@pytest.mark.parametrize("cell_type", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("kernel_runs_under_autocast", [True, False])
@pytest.mark.parametrize("padded", [False, True])
def test_the_stack_runs_under_cpu_bf16_autocast_on_any_cpu(cell_type, kernel_runs_under_autocast, padded,
                                                          monkeypatch):
    """On a CPU whose fused kernel fails under bf16 autocast (torch 2.13's LSTM on an AVX2-only AMD EPYC) the
    stack runs it outside autocast, in its weights' dtype; either way the result is the float32 one to bf16
    precision. ``kernel_runs_under_autocast=False`` takes that path on every CPU."""
    from hf_seqmodels.models import recurrent_stack

    if not kernel_runs_under_autocast:
        monkeypatch.setattr(recurrent_stack, "cpu_autocast_runs", lambda cell_type: False)
    torch.manual_seed(0)
    stack = RecurrentStack(cell_type, input_size=5, hidden_size=6, num_layers=2).eval()
    inputs = torch.randn(3, 4, 5)
    mask = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool) if padded else None
    expected, expected_state = stack(inputs, mask=mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs, state = stack(inputs, mask=mask)
    torch.testing.assert_close(outputs.float(), expected, atol=0.05, rtol=0.05)
    for got, want in zip(state, expected_state, strict=True):
        torch.testing.assert_close(got.float(), want, atol=0.05, rtol=0.05)
