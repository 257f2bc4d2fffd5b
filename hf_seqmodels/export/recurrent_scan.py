"""A recurrent stack that ``torch.export`` and ONNX can trace with a symbolic sequence length.

torch's fused ``nn.RNN``/``nn.LSTM``/``nn.GRU`` are unrolled over the time steps of the example when exported
(the sequence length becomes a constant), and the packed sequences that :class:`RecurrentStack` uses for
padding have data-dependent sizes. While :func:`scan_recurrent_stacks` is active, the stacks of every model
run the same equations as ``torch._higher_order_ops.scan`` over time instead (an ONNX ``Scan`` after export),
on the fused module's own parameters, with the padding rule of the package: a padded step leaves the state
untouched and outputs zeros (each direction skips the padded steps, as packing does). Only inference
(``eval()``, no dropout) is traced this way; the per-layer path (``output_hidden_states``) keeps its own code.
The peephole LSTM, which eager mode runs as a Python loop over time steps (unrolled to the example's length
when traced), runs :func:`~hf_seqmodels.models.recurrent_cells.peephole_lstm_step` as the scan's step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._higher_order_ops.scan import scan

from ..models.recurrent_cells import peephole_lstm_step
from ..models.recurrent_stack import FUSED_CELL_TYPES, RecurrentStack

#: the cell types whose stacks :func:`scan_recurrent_stacks` traces as a scan over time
SCANNED_CELL_TYPES = (*FUSED_CELL_TYPES, "peephole_lstm")


def _cell_step(cell_type: str, w_hh: torch.Tensor, b_hh: torch.Tensor | None, w_peephole: torch.Tensor | None = None):
    """The step ``(state, (gates_x, mask)) -> (new state, output)`` of one layer and direction.

    ``gates_x`` ``(B, G)`` is ``W_ih x_t + b_ih``; ``mask`` ``(B, 1)`` bool, False at padded steps; the state is
    ``(h,)`` or ``(h, c)``, each ``(B, H)``. Gate order as torch stores it: LSTM ``i, f, g, o``, GRU ``r, z, n``;
    the peephole LSTM's as the LSTM's, with ``w_peephole`` ``(3H, H)`` its peephole matrices.
    """
    def recurrent(h):
        gates = h @ w_hh.T
        return gates if b_hh is None else gates + b_hh

    def step(state, xs):
        gates_x, mask = xs
        h = state[0]
        if cell_type == "peephole_lstm":
            new = peephole_lstm_step(gates_x, h, state[1], w_hh, b_hh, w_peephole)
        elif cell_type == "lstm":
            i, f, g, o = (gates_x + recurrent(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
            new = (torch.sigmoid(o) * torch.tanh(c), c)
        elif cell_type == "gru":
            r_x, z_x, n_x = gates_x.chunk(3, dim=-1)
            r_h, z_h, n_h = recurrent(h).chunk(3, dim=-1)
            r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
            n = torch.tanh(n_x + r * n_h)
            new = ((1 - z) * n + z * h,)
        else:
            pre = gates_x + recurrent(h)
            new = (torch.tanh(pre) if cell_type == "rnn_tanh" else torch.relu(pre),)
        new = tuple(torch.where(mask, n, s) for n, s in zip(new, state, strict=True))  # padded: keep the state
        return new, torch.where(mask, new[0], torch.zeros_like(new[0]))

    return step


def _run_direction(rnn, cell_type, layer: int, reverse: bool, inputs, state, mask):
    """One layer, one direction: ``inputs`` ``(B, T, I)``, ``state`` tuple of ``(B, H)``, ``mask`` ``(B, T)`` bool
    -> outputs ``(B, T, H)`` and the final state."""
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    w_ih, w_hh = getattr(rnn, "weight_ih" + suffix), getattr(rnn, "weight_hh" + suffix)
    b_ih, b_hh = (getattr(rnn, "bias_ih" + suffix), getattr(rnn, "bias_hh" + suffix)) if rnn.bias else (None, None)
    gates_x = inputs @ w_ih.T  # (B, T, G)
    if b_ih is not None:
        gates_x = gates_x + b_ih
    xs = (gates_x.transpose(0, 1), mask.transpose(0, 1).unsqueeze(-1))  # (T, B, G), (T, B, 1)
    if reverse:
        xs = tuple(x.flip(0) for x in xs)
    w_peephole = getattr(rnn, "weight_peephole" + suffix, None)  # (3H, H): the peephole LSTM's only
    state = tuple(s.clone(memory_format=torch.contiguous_format) for s in state)  # the carry's strides, at B = 1 too
    final, outputs = scan(_cell_step(cell_type, w_hh, b_hh, w_peephole), state, xs)  # outputs (T, B, H)
    if reverse:
        outputs = outputs.flip(0)
    return outputs.transpose(0, 1), tuple(final)


def scan_stack(stack: RecurrentStack, inputs: torch.Tensor, torch_state: tuple[torch.Tensor, ...],
               mask: torch.Tensor | None) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The stack over ``inputs`` ``(B, T, I)`` from ``torch_state`` (tensors ``(L * D, B, H)``), with
    ``mask`` ``(B, T)`` (None: no padding). Returns outputs ``(B, T, D * H)`` and the final state in the same
    layout as ``torch_state``: the results of ``RecurrentStack._run_module`` on ``stack.rnn``."""
    if mask is None:
        mask = torch.ones(inputs.shape[:2], dtype=torch.bool, device=inputs.device)
    mask = mask.bool()
    x, finals = inputs, []
    for layer in range(stack.num_layers):
        outputs = []
        for direction in range(stack.num_directions):
            row = layer * stack.num_directions + direction
            out, final = _run_direction(stack.rnn, stack.cell_type, layer, direction == 1, x,
                                        tuple(s[row] for s in torch_state), mask)
            outputs.append(out)
            finals.append(final)
        x = torch.cat(outputs, dim=-1) if len(outputs) > 1 else outputs[0]  # (B, T, D * H)
    final_state = tuple(torch.stack(parts, dim=0) for parts in zip(*finals, strict=True))  # (L * D, B, H) each
    return x, final_state


@contextlib.contextmanager
def scan_recurrent_stacks() -> Iterator[None]:
    """Within the block, every :class:`RecurrentStack` of a cell in ``SCANNED_CELL_TYPES`` in eval mode runs
    through :func:`scan_stack`."""
    original = RecurrentStack._run_module

    def run_module(self, rnn, inputs, torch_state, mask):
        if rnn is not self.rnn or self.cell_type not in SCANNED_CELL_TYPES or self.training:
            return original(self, rnn, inputs, torch_state, mask)
        state = torch_state if isinstance(torch_state, tuple) else (torch_state,)
        return scan_stack(self, inputs, state, mask)

    RecurrentStack._run_module = run_module
    try:
        yield
    finally:
        RecurrentStack._run_module = original


def _max_marginals_scan(crf, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``LinearChainCRF.max_marginals`` with its two recursions as ``scan`` over time: ``m_i(y) = α^max_i(y) +
    β^max_i(y)`` ``(B, T, K)``, the emissions at masked positions. The same operations as the eager loops."""
    mask = mask.bool()
    start, transitions, end = crf.scores()
    batch, _, num_tags = emissions.shape
    seen = (mask.long().cumsum(1) - mask.long()) > 0  # (B, T): a chain position before t (no boolean carry)
    xs = (emissions.transpose(0, 1), mask.transpose(0, 1).unsqueeze(-1))  # (T, B, K), (T, B, 1)

    def forward_step(alpha, x):
        emission, on, seen_before = x  # (B, K), (B, 1), (B, 1)
        best = (alpha.unsqueeze(2) + transitions).amax(dim=1)  # (B, K)
        alpha = torch.where(on, torch.where(seen_before, best, start) + emission, alpha)
        return alpha, alpha.clone()

    def backward_step(beta, x):
        emission, on = x
        step = (transitions + (emission + beta).unsqueeze(1)).amax(dim=2)  # (B, K)
        return torch.where(on, step, beta), beta.clone()

    _, alphas = scan(forward_step, emissions.new_zeros(batch, num_tags), (*xs, seen.transpose(0, 1).unsqueeze(-1)))
    _, betas = scan(backward_step, end.unsqueeze(0).repeat(batch, 1), tuple(x.flip(0) for x in xs))
    marginals = alphas.transpose(0, 1) + betas.flip(0).transpose(0, 1)  # (B, T, K)
    return torch.where(mask.unsqueeze(2), marginals, emissions)


@contextlib.contextmanager
def scan_crf_recursions() -> Iterator[None]:
    """Within the block, ``LinearChainCRF.max_marginals`` (the tagger's logits) runs its recursions as
    :func:`_max_marginals_scan`, so an exported tagger keeps a symbolic sentence length."""
    from ..models.crf import LinearChainCRF

    original = LinearChainCRF.max_marginals
    LinearChainCRF.max_marginals = _max_marginals_scan
    try:
        yield
    finally:
        LinearChainCRF.max_marginals = original
