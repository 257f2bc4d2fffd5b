"""The fused recurrent stack equals the gate equations of the course notes, and torch's reference modules
(the looped cells are checked in ``test_recurrent_cells.py``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_seqmodels.models.recurrent_stack import FUSED_CELL_TYPES, RecurrentStack

B, T, IN, H = 2, 5, 3, 4  # batch, time, input size, hidden size


def _gates(rnn: nn.RNNBase, layer: int, x_t, h, n: int):
    """Split ``W [h; x] + b`` (stored as W_ih x + b_ih and W_hh h + b_hh) into ``n`` gates."""
    w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
    b_ih, b_hh = getattr(rnn, f"bias_ih_l{layer}"), getattr(rnn, f"bias_hh_l{layer}")
    return (x_t @ w_ih.T + b_ih).chunk(n, -1), (h @ w_hh.T + b_hh).chunk(n, -1)


def lstm_step(rnn, layer, x_t, h, c):
    (xi, xf, xg, xo), (hi, hf, hg, ho) = _gates(rnn, layer, x_t, h, 4)
    f = torch.sigmoid(xf + hf)  # forget gate  f_t = σ(W_f [h_{t-1}; x_t] + b_f)
    i = torch.sigmoid(xi + hi)  # input gate   i_t = σ(W_i [h_{t-1}; x_t] + b_i)
    c_tilde = torch.tanh(xg + hg)  # candidate  C̃_t = tanh(W_C [h_{t-1}; x_t] + b_C)
    o = torch.sigmoid(xo + ho)  # output gate  o_t = σ(W_o [h_{t-1}; x_t] + b_o)
    c = f * c + i * c_tilde  # C_t = f_t ⊙ C_{t-1} + i_t ⊙ C̃_t
    return o * torch.tanh(c), c  # h_t = o_t ⊙ tanh(C_t)


def gru_step(rnn, layer, x_t, h):
    (xr, xz, xn), (hr, hz, hn) = _gates(rnn, layer, x_t, h, 3)
    r = torch.sigmoid(xr + hr)  # reset gate
    z = torch.sigmoid(xz + hz)  # torch's z_t weights the old state: the notes' 1 - z_t
    h_tilde = torch.tanh(xn + r * hn)  # reset applied to W_hh h_{t-1} + b_hh (cuDNN variant)
    return (1 - z) * h_tilde + z * h


def rnn_step(rnn, layer, x_t, h, act):
    (x,), (hh,) = _gates(rnn, layer, x_t, h, 1)
    return act(x + hh)  # h_t = f(W_xh x_t + W_hh h_{t-1} + b)


def by_hand(stack: RecurrentStack, x: torch.Tensor) -> torch.Tensor:
    """Unidirectional stacked cell equations, one time step at a time."""
    rnn, cell = stack.rnn, stack.cell_type
    layer_input = x
    for layer in range(stack.num_layers):
        h = torch.zeros(B, H)
        c = torch.zeros(B, H)
        outputs = []
        for t in range(layer_input.shape[1]):
            x_t = layer_input[:, t]
            if cell == "lstm":
                h, c = lstm_step(rnn, layer, x_t, h, c)
            elif cell == "gru":
                h = gru_step(rnn, layer, x_t, h)
            else:
                h = rnn_step(rnn, layer, x_t, h, torch.tanh if cell == "rnn_tanh" else torch.relu)
            outputs.append(h)
        layer_input = torch.stack(outputs, dim=1)
    return layer_input


@pytest.mark.parametrize("cell_type", FUSED_CELL_TYPES)
@pytest.mark.parametrize("num_layers", [1, 2])
def test_stack_equals_the_gate_equations(cell_type, num_layers):
    torch.manual_seed(0)
    stack = RecurrentStack(cell_type, IN, H, num_layers=num_layers).eval()
    x = torch.randn(B, T, IN)
    outputs, final = stack(x)
    with torch.no_grad():
        expected = by_hand(stack, x)
    assert torch.allclose(outputs, expected, atol=1e-6)
    assert torch.allclose(final[0][:, -1], expected[:, -1], atol=1e-6)


@pytest.mark.parametrize("cell_type", FUSED_CELL_TYPES)
def test_bidirectional_stack_equals_torch_reference_with_copied_weights(cell_type):
    torch.manual_seed(0)
    stack = RecurrentStack(cell_type, IN, H, num_layers=2, bidirectional=True).eval()
    cls = {"lstm": nn.LSTM, "gru": nn.GRU}.get(cell_type, nn.RNN)
    extra = {} if cls is not nn.RNN else {"nonlinearity": cell_type[4:]}
    reference = cls(IN, H, num_layers=2, bidirectional=True, **extra).eval()  # time-major reference
    reference.load_state_dict(stack.rnn.state_dict())
    x = torch.randn(B, T, IN)
    outputs, final = stack(x)
    ref_out, ref_state = reference(x.transpose(0, 1))
    ref_h = ref_state[0] if cell_type == "lstm" else ref_state
    assert torch.allclose(outputs, ref_out.transpose(0, 1), atol=1e-6)
    assert torch.allclose(final[0], ref_h.transpose(0, 1), atol=1e-6)


def test_masked_steps_leave_the_state_untouched():
    torch.manual_seed(0)
    stack = RecurrentStack("lstm", IN, H, num_layers=2, bidirectional=True).eval()
    x = torch.randn(1, T, IN)
    padded = torch.cat([torch.randn(1, 3, IN), x], dim=1)  # three junk steps on the left
    mask = torch.tensor([[False] * 3 + [True] * T])
    out_alone, state_alone = stack(x)
    out_padded, state_padded = stack(padded, mask=mask)
    assert torch.allclose(out_padded[:, 3:], out_alone, atol=1e-6)
    assert torch.equal(out_padded[:, :3], torch.zeros(1, 3, 2 * H))
    for a, b in zip(state_alone, state_padded, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
