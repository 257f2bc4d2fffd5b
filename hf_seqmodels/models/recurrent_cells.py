"""Recurrent cells without a fused torch kernel, run by a per-step loop: the peephole LSTM.

The peephole LSTM is the course notes' variant (LSTM 变体 1, "Peephole connection"): the three gates
read the cell state as well, the forget and input gates ``C_{t-1}``, the output gate the new ``C_t``::

    f_t = σ(W_f · [C_{t-1}, h_{t-1}, x_t] + b_f)
    i_t = σ(W_i · [C_{t-1}, h_{t-1}, x_t] + b_i)
    C̃_t = tanh(W_C · [h_{t-1}, x_t] + b_C)
    C_t = f_t ⊙ C_{t-1} + i_t ⊙ C̃_t
    o_t = σ(W_o · [C_t, h_{t-1}, x_t] + b_o)
    h_t = o_t ⊙ tanh(C_t)

Each ``W · [C, h, x]`` is stored as three matrices, ``W_c C + W_h h + W_x x``. The peephole matrices
``W_c`` are full ``hidden × hidden`` matrices, exactly the notes' concatenation. Gers & Schmidhuber
(2000) connect each cell only to its own gates, i.e. diagonal peepholes ``w_c ⊙ C``; that is the special
case of a diagonal ``W_c``, and with ``W_c = 0`` the cell is the standard LSTM.

torch has no fused kernel for this cell, so :class:`PeepholeLSTM` loops over time steps in Python
(the input projections ``W_x x_t + b`` of all steps are one matrix product per layer and direction).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def peephole_lstm_step(
    x_proj: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_hh: torch.Tensor | None,
    weight_peephole: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One peephole-LSTM step (module docstring) for a batch.

    Args:
        x_proj: ``W_x x_t + b_x`` for the four gates in torch's order ``(i, f, C̃, o)``: ``(batch, 4 * hidden)``.
        h, c: ``h_{t-1}``, ``C_{t-1}``: ``(batch, hidden)``.
        weight_hh, bias_hh: ``W_h`` ``(4 * hidden, hidden)`` and its bias ``(4 * hidden,)`` (or None).
        weight_peephole: ``W_c`` of the gates ``(i, f, o)`` stacked: ``(3 * hidden, hidden)``.

    Returns:
        ``(h_t, C_t)``, each ``(batch, hidden)``.
    """
    hidden = h.shape[-1]
    z_i, z_f, z_g, z_o = (x_proj + F.linear(h, weight_hh, bias_hh)).chunk(4, dim=-1)
    peep_i, peep_f = F.linear(c, weight_peephole[: 2 * hidden]).chunk(2, dim=-1)  # W_ci C_{t-1}, W_cf C_{t-1}
    i = torch.sigmoid(z_i + peep_i)
    f = torch.sigmoid(z_f + peep_f)
    c_next = f * c + i * torch.tanh(z_g)
    o = torch.sigmoid(z_o + F.linear(c_next, weight_peephole[2 * hidden :]))  # W_co C_t
    return o * torch.tanh(c_next), c_next


class PeepholeLSTMCell(nn.RNNCellBase):
    """One step of the peephole LSTM (module docstring), the counterpart of ``nn.LSTMCell``.

    Parameters as ``nn.LSTMCell`` (``weight_ih`` ``(4H, input_size)``, ``weight_hh`` ``(4H, H)``,
    ``bias_ih``, ``bias_hh``, gates in the order ``i, f, C̃, o``) plus ``weight_peephole``
    ``(3H, H)``: the peephole matrices of the gates ``i, f, o``. All start uniform in ``±1/sqrt(H)``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size, bias, num_chunks=4)
        self.weight_peephole = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        self.reset_parameters()

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``(batch, input_size)``, ``state`` ``(h_{t-1}, C_{t-1})`` each ``(batch, H)`` (None: zeros);
        returns ``(h_t, C_t)``."""
        if state is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            state = (zeros, zeros)
        x_proj = F.linear(x, self.weight_ih, self.bias_ih)  # (B, 4H)
        return peephole_lstm_step(x_proj, *state, self.weight_hh, self.bias_hh, self.weight_peephole)


class PeepholeLSTM(nn.RNNBase):
    """Stacked, optionally bidirectional peephole LSTM: the interface of ``nn.LSTM`` plus a padding mask.

    The parameters are ``nn.LSTM``'s, with the same names (``weight_ih_l{k}``, ``weight_hh_l{k}``,
    ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``_reverse`` for the right-to-left direction), plus
    ``weight_peephole_l{k}[_reverse]`` ``(3 * hidden_size, hidden_size)``. Being an ``nn.RNNBase``,
    it is initialised by every model's ``_init_weights`` like the fused modules, and an ``nn.LSTM``'s
    weights load into it with ``load_state_dict(..., strict=False)``.

    Padding follows :class:`RecurrentStack`'s fused path: a step where ``mask`` is False leaves the
    state of its row untouched and outputs zeros, in any position (left, right, inside) and in both
    directions, so the right-to-left direction starts at each row's last real token. Dropout (training
    only) is applied to the outputs of every layer but the last, as in ``nn.LSTM``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False):
        super().__init__("LSTM", input_size, hidden_size, num_layers=num_layers, bias=bias,
                         batch_first=batch_first, dropout=dropout, bidirectional=bidirectional)
        for layer in range(num_layers):
            for suffix in self._suffixes:
                peephole = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
                self.register_parameter(f"weight_peephole_l{layer}{suffix}", peephole)
        self.reset_parameters()

    @property
    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def forward(
        self,
        inputs: torch.Tensor,
        hx: tuple[torch.Tensor, torch.Tensor] | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run the stack.

        Args:
            inputs: ``(batch, time, input_size)`` if ``batch_first`` else ``(time, batch, input_size)``.
            hx: ``(h_0, C_0)``, each ``(num_layers * num_directions, batch, hidden_size)`` as in
                ``nn.LSTM`` (None: zeros).
            mask: ``(batch, time)`` bool, True at real steps; None when nothing is padded.

        Returns:
            outputs (layout of ``inputs``, last dimension ``num_directions * hidden_size``, zero at
            padded steps) and ``(h_n, C_n)`` in ``hx``'s layout.
        """
        if inputs.dim() != 3:
            raise ValueError(f"PeepholeLSTM expects 3-D inputs, got shape {tuple(inputs.shape)}.")
        x = inputs if self.batch_first else inputs.transpose(0, 1)  # (B, T, F)
        batch = x.shape[0]
        if hx is None:
            zeros = x.new_zeros(self.num_layers * len(self._suffixes), batch, self.hidden_size)
            hx = (zeros, zeros)
        if mask is not None:
            mask = mask.to(device=x.device, dtype=torch.bool)[..., None]  # (B, T, 1)
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            if layer > 0:
                x = F.dropout(x, self.dropout, self.training)
            directions = []
            for d, suffix in enumerate(self._suffixes):
                index = layer * len(self._suffixes) + d
                out, h, c = self._run_direction(x, hx[0][index], hx[1][index], mask, f"l{layer}{suffix}", d == 1)
                directions.append(out)
                finals_h.append(h)
                finals_c.append(c)
            x = torch.cat(directions, dim=-1)  # (B, T, D * H)
        outputs = x if self.batch_first else x.transpose(0, 1)
        return outputs, (torch.stack(finals_h), torch.stack(finals_c))

    def _run_direction(self, x, h, c, mask, name: str, reverse: bool):
        """One layer in one direction over ``x`` ``(B, T, F)``; returns outputs ``(B, T, H)``, ``h_n``, ``C_n``."""
        weight_ih, weight_hh, weight_peephole = (getattr(self, f"{kind}_{name}")
                                                 for kind in ("weight_ih", "weight_hh", "weight_peephole"))
        bias_ih, bias_hh = (getattr(self, f"{kind}_{name}", None) for kind in ("bias_ih", "bias_hh"))  # None: bias=False
        x_proj = F.linear(x, weight_ih, bias_ih)  # W_x x_t + b_x of every step at once: (B, T, 4H)
        time = x.shape[1]
        outputs = [None] * time
        for t in range(time - 1, -1, -1) if reverse else range(time):
            h_t, c_t = peephole_lstm_step(x_proj[:, t], h, c, weight_hh, bias_hh, weight_peephole)
            if mask is None:
                h, c, outputs[t] = h_t, c_t, h_t
            else:  # padded rows keep their state and output zeros
                keep = mask[:, t]  # (B, 1)
                h, c = torch.where(keep, h_t, h), torch.where(keep, c_t, c)
                outputs[t] = torch.where(keep, h_t, 0.0)
        return torch.stack(outputs, dim=1), h, c


# cell_type (see recurrent_stack.CELL_TYPES) -> module run by a Python loop over time steps
LOOPED_CELLS = {"peephole_lstm": PeepholeLSTM}

__all__ = ["LOOPED_CELLS", "PeepholeLSTM", "PeepholeLSTMCell", "peephole_lstm_step"]
