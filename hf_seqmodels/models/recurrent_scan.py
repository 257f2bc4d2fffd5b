"""The recurrences of the package as a scan over time, the form ``torch.export`` and ONNX trace with a symbolic
sequence length.

Traced as they run in eager mode, torch's fused ``nn.RNN``/``nn.LSTM``/``nn.GRU`` are unrolled over the time
steps of the example (the sequence length becomes a constant), the packed sequences that
:class:`~hf_seqmodels.models.recurrent_stack.RecurrentStack` uses for padding have data-dependent sizes, and
the CRF's Python loops over positions fix the sentence length. While torch exports a model
(:func:`traced_as_scan`: ``torch.compiler.is_exporting()``) in inference mode, the stacks
run :func:`scan_stack` and the tagger's CRF :func:`max_marginals_scan` instead: the same equations as a scan
over time (an ONNX ``Scan`` after export), on the modules' own parameters, with the padding rule of the
package: a padded step leaves the state untouched and outputs zeros (each direction skips the padded steps, as
packing does). Training (dropout between layers) keeps the eager path.

torch offers its scan operator under a private name only (:func:`~.library_internals.scan_operator`); it is imported
when a trace asks for it, never in eager mode, and :func:`_scan` is the one place that calls it.
"""

from __future__ import annotations

import torch

from .library_internals import scan_operator
from .recurrent_cells import peephole_lstm_step

#: the cell types :func:`scan_stack` runs
SCANNED_CELL_TYPES = ("rnn_tanh", "rnn_relu", "lstm", "gru", "peephole_lstm")


def traced_as_scan(module: torch.nn.Module) -> bool:
    """Whether ``module`` runs its recurrences as a scan: in inference mode while torch exports it. Under
    ``torch.compile`` the fused kernels run (the packed-sequence path breaks the graph around them): inductor
    cannot yet compile this scan's data-dependent reads, so a compiled model in eval mode failed with it."""
    return not module.training and torch.compiler.is_exporting()


def _scan(step, init: tuple[torch.Tensor, ...], xs: tuple[torch.Tensor, ...],
          weights: dict[str, torch.Tensor | None]):
    """``torch``'s scan operator: ``step(carry, x, weights) -> (carry, y)`` over the first axis of the tensors
    ``xs``, from the tuple of tensors ``init``; ``y`` is one tensor. Returns the final carry (a tuple) and the
    stacked ``y``. The carry must keep the strides of ``init`` (contiguous ones here). ``weights`` (the
    parameters the step reads; None for an absent bias) reach ``step`` as operator inputs, never as closures: a
    tensor a traced step closes over would be frozen into the graph instead of staying the model's parameter.

    This calls the operator itself, not ``torch._higher_order_ops.scan.scan``: outside ``torch.compile`` that
    function wraps every call in a nested ``torch.compile`` whose cache all scans of the process share. An
    earlier scan at a static length (a character LSTM over words of 20 characters) left a cached graph whose
    guard, checked against a later export's symbolic sequence length, pinned that length (``20 != length``) and
    failed the export. The exporter traces the operator itself directly, with nothing cached."""
    scan_op = scan_operator()
    num_carry, num_xs = len(init), len(xs)
    names = [name for name, tensor in weights.items() if tensor is not None]

    def flat_step(*leaves):
        given = dict(zip(names, leaves[num_carry + num_xs:], strict=True))
        carry, y = step(tuple(leaves[:num_carry]), tuple(leaves[num_carry:num_carry + num_xs]),
                        {name: given.get(name) for name in weights})
        return [*carry, y]

    outputs = scan_op(flat_step, list(init), list(xs), additional_inputs=tuple(weights[name] for name in names))
    return tuple(outputs[:num_carry]), outputs[num_carry]


def _cell_step(cell_type: str):
    """The step ``(state, (gates_x, mask), weights) -> (new state, output)`` of one layer and direction.

    ``gates_x`` ``(B, G)`` is ``W_ih x_t + b_ih``; ``mask`` ``(B, 1)`` bool, False at padded steps; the state is
    ``(h,)`` or ``(h, c)``, each ``(B, H)``; ``weights`` holds ``w_hh``, ``b_hh`` (None without biases) and, for
    the peephole LSTM, ``w_peephole`` ``(3H, H)``. Gate order as torch stores it: LSTM ``i, f, g, o``, GRU
    ``r, z, n``; the peephole LSTM's as the LSTM's.
    """
    def step(state, xs, weights):
        gates_x, mask = xs
        w_hh, b_hh = weights["w_hh"], weights["b_hh"]
        h = state[0]

        def recurrent(h):
            gates = h @ w_hh.T
            return gates if b_hh is None else gates + b_hh

        if cell_type == "peephole_lstm":
            new = peephole_lstm_step(gates_x, h, state[1], w_hh, b_hh, weights["w_peephole"])
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
    weights = {"w_hh": w_hh, "b_hh": b_hh, "w_peephole": w_peephole}
    final, outputs = _scan(_cell_step(cell_type), state, xs, weights)  # outputs (T, B, H)
    if reverse:
        outputs = outputs.flip(0)
    return outputs.transpose(0, 1), tuple(final)


def scan_stack(rnn: torch.nn.Module, cell_type: str, num_layers: int, num_directions: int, inputs: torch.Tensor,
               torch_state: tuple[torch.Tensor, ...], mask: torch.Tensor | None):
    """The stacked ``rnn`` (a torch ``nn.RNN``/``nn.LSTM``/``nn.GRU`` or the peephole LSTM, its parameters named
    as torch names them) over ``inputs`` ``(B, T, I)`` from ``torch_state`` (tensors ``(L * D, B, H)``), with
    ``mask`` ``(B, T)`` (None: no padding), in inference mode (no dropout).

    Returns ``(outputs, final_state, layer_outputs)``: outputs ``(B, T, D * H)``, the final state in the layout
    of ``torch_state`` and the outputs of every layer (the last one is ``outputs``)."""
    if mask is None:
        mask = torch.ones(inputs.shape[:2], dtype=torch.bool, device=inputs.device)
    mask = mask.bool()
    x, finals, layer_outputs = inputs, [], []
    for layer in range(num_layers):
        outputs = []
        for direction in range(num_directions):
            row = layer * num_directions + direction
            state = tuple(s[row].clone(memory_format=torch.contiguous_format) for s in torch_state)  # (B, H)
            out, final = _run_direction(rnn, cell_type, layer, direction == 1, x, state, mask)
            outputs.append(out)
            finals.append(final)
        x = torch.cat(outputs, dim=-1) if len(outputs) > 1 else outputs[0]  # (B, T, D * H)
        layer_outputs.append(x)
    final_state = tuple(torch.stack(parts, dim=0) for parts in zip(*finals, strict=True))  # (L * D, B, H) each
    return x, final_state, tuple(layer_outputs)


def max_marginals_scan(start: torch.Tensor, transitions: torch.Tensor, end: torch.Tensor, emissions: torch.Tensor,
                       mask: torch.Tensor) -> torch.Tensor:
    """``LinearChainCRF.max_marginals`` with its two recursions as a scan over time: ``m_i(y) = α^max_i(y) +
    β^max_i(y)`` ``(B, T, K)``, the emissions at masked positions; ``start`` ``(K,)``, ``transitions``
    ``(K, K)`` and ``end`` ``(K,)`` are the CRF's scores. The same operations as the eager loops."""
    mask = mask.bool()
    batch, _, num_tags = emissions.shape
    seen = (mask.long().cumsum(1) - mask.long()) > 0  # (B, T): a chain position before t (no boolean carry)
    xs = (emissions.transpose(0, 1), mask.transpose(0, 1).unsqueeze(-1))  # (T, B, K), (T, B, 1)

    def forward_step(carry, x, scores):
        (alpha,), (emission, on, seen_before) = carry, x  # (B, K); (B, K), (B, 1), (B, 1)
        best = (alpha.unsqueeze(2) + scores["transitions"]).amax(dim=1)  # (B, K)
        alpha = torch.where(on, torch.where(seen_before, best, scores["start"]) + emission, alpha)
        return (alpha,), alpha.clone()

    def backward_step(carry, x, scores):
        (beta,), (emission, on) = carry, x
        step = (scores["transitions"] + (emission + beta).unsqueeze(1)).amax(dim=2)  # (B, K)
        return (torch.where(on, step, beta),), beta.clone()

    scores = {"start": start, "transitions": transitions}
    _, alphas = _scan(forward_step, (emissions.new_zeros(batch, num_tags),), (*xs, seen.transpose(0, 1).unsqueeze(-1)),
                      scores)
    _, betas = _scan(backward_step, (end.unsqueeze(0).repeat(batch, 1),), tuple(x.flip(0) for x in xs), scores)
    marginals = alphas.transpose(0, 1) + betas.flip(0).transpose(0, 1)  # (B, T, K)
    return torch.where(mask.unsqueeze(2), marginals, emissions)
