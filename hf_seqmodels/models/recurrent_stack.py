"""The recurrent stack shared by every recurrent model of the package.

One module wraps torch's fused kernels (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``): whole sequences go
through cuDNN/oneDNN in one call, never a Python loop over time steps. It adds what the models
need on top: batch-first state tensors, dropout between stacked layers (Zaremba et al. 2014) and
exact handling of padding in any position (left padding for generation, right padding for
classification) through packed sequences, and activation checkpointing: after the model's
``activation_checkpointing_enable()`` (``use_reentrant`` True or False), a training forward keeps only the
stack's inputs and runs the stack again in the backward pass (the unit of recomputation is the whole stack:
the fused kernel runs all its layers in one call). Cells without a fused kernel (the peephole LSTM,
:mod:`recurrent_cells`) step through time in Python with the same interface and padding rules.

Per-layer outputs (``output_layers=True``, what ``output_hidden_states`` returns) come from running the
layers one at a time through the same parameters (``torch.func.functional_call`` on a one-layer module
built on the meta device), so the state-dict keys of the fused module stay unchanged and the outputs are
tensors of the graph.

In inference mode under ``torch.export`` (and ONNX export) the stack runs the same equations as a scan over
time (:mod:`recurrent_scan`): the sequence length stays symbolic and padding needs no packed sequences, whose
sizes depend on the data. Under ``torch.compile`` it keeps the fused kernels, which dynamo runs outside the
graph (graph breaks, as ``pack_padded_sequence`` with a padding mask).

Equations (course notes, ``[h; x]`` concatenation written as two matrices as torch stores them)::

    LSTM  f_t = σ(W_f [h_{t-1}; x_t] + b_f)      i_t = σ(W_i [h_{t-1}; x_t] + b_i)
          C̃_t = tanh(W_C [h_{t-1}; x_t] + b_C)   o_t = σ(W_o [h_{t-1}; x_t] + b_o)
          C_t = f_t ⊙ C_{t-1} + i_t ⊙ C̃_t        h_t = o_t ⊙ tanh(C_t)
    GRU   r_t = σ(W_r [h_{t-1}; x_t] + b_r)      z_t = σ(W_z [h_{t-1}; x_t] + b_z)
          h̃_t = tanh(W_xh x_t + r_t ⊙ (W_hh h_{t-1} + b_hh) + b_xh)
          h_t = (1 - z_t) ⊙ h̃_t + z_t ⊙ h_{t-1}
    RNN   h_t = tanh(W_xh x_t + W_hh h_{t-1} + b)   (or ReLU)

The GRU is the cuDNN variant: the reset gate multiplies ``W_hh h_{t-1} + b_hh`` instead of
``h_{t-1}``, and torch's ``z_t`` is the notes' ``1 - z_t`` (it weights the old state). Both are
re-parametrisations the network learns equally well; ``tests/test_recurrent_equations.py``
checks all fused cells against the equations written out by hand, ``tests/test_recurrent_cells.py``
the peephole LSTM.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers.modeling_layers import GradientCheckpointingLayer

from .input_checks import is_tracing, reads_values
from .recurrent_cells import LOOPED_CELLS
from .recurrent_scan import scan_stack, traced_as_scan

FUSED_CELL_TYPES = ("rnn_tanh", "rnn_relu", "lstm", "gru")
CELL_TYPES = FUSED_CELL_TYPES + tuple(LOOPED_CELLS)
_CELL_STATE_TYPES = ("lstm", "peephole_lstm")


def _own_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``tensor``, which is a view of another tensor or strided: the final state is the
    transposed kernel state; the outputs of an unpadded run of torch's modules are the kernel's transposed
    time-major ones (the LSTM's a view, the GRU's and RNN's strided). A module that FSDP2 wraps, as it wraps
    this stack, must not return views with autograd history: FSDP2 warns on each, since an in-place change of
    one would skip its backward hook. For the outputs the copy takes the place of the one a linear layer makes
    of strided input (the models' output and attention projections); without gradients nothing is hooked and
    nothing is copied."""
    return tensor.clone(memory_format=torch.contiguous_format)


def has_cell_state(cell_type: str) -> bool:
    """Whether ``cell_type`` keeps a memory cell ``C_t`` besides ``h_t``: its state is ``(h, c)``, else ``(h,)``."""
    return cell_type in _CELL_STATE_TYPES


def num_state_tensors(cell_type: str) -> int:
    """Number of state tensors of ``cell_type``: 2 (``h``, ``c``) for the LSTMs, 1 (``h``) for the others."""
    return 2 if has_cell_state(cell_type) else 1


def _build_rnn(cell_type: str, **kwargs) -> nn.RNNBase:
    if cell_type in LOOPED_CELLS:
        return LOOPED_CELLS[cell_type](**kwargs)
    if cell_type == "lstm":
        return nn.LSTM(**kwargs)
    if cell_type == "gru":
        return nn.GRU(**kwargs)
    if cell_type in ("rnn_tanh", "rnn_relu"):
        return nn.RNN(nonlinearity=cell_type[4:], **kwargs)
    raise ValueError(f"Invalid `cell_type`={cell_type!r}: expected one of {', '.join(CELL_TYPES)}.")


@torch.compiler.disable
@functools.cache
def cpu_autocast_runs(cell_type: str) -> bool:
    """Whether this CPU runs the fused kernel of ``cell_type`` under bfloat16 autocast. On a 2-core AMD EPYC with
    AVX2 (no AVX-512), torch 2.13's LSTM fails there on float32 inputs ("could not create a primitive descriptor
    for the LSTM forward propagation primitive"), while it runs on bfloat16 inputs without autocast, and the GRU
    and RNN run either way. Found once per cell type by running a one-unit module on one step."""
    module = _build_rnn(cell_type, input_size=1, hidden_size=1, batch_first=True)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            module(torch.zeros(1, 1, 1))
    except RuntimeError:
        return False
    return True


def _outside_cpu_autocast(cell_type: str, inputs: torch.Tensor) -> bool:
    """Whether the fused kernel must run outside autocast here: under CPU bfloat16 autocast, on a CPU where it fails
    there (:func:`cpu_autocast_runs`)."""
    return (inputs.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_autocast_runs(cell_type))


def _call(function, *args):
    """``function(*args)``: :class:`RecomputedCall` when it does not checkpoint, without a module call."""
    return function(*args)


class RecomputedCall(GradientCheckpointingLayer):
    """``recompute(function, *args)`` is ``function(*args)``; after the model's ``activation_checkpointing_enable()``
    a training call keeps only ``args`` and runs ``function`` again in the backward pass (transformers'
    ``GradientCheckpointingLayer`` mechanism, with its ``use_reentrant`` choice). The stack passes its state as
    flat tensors, so that reentrant checkpointing, which sees only the tensors passed and returned directly,
    keeps the gradients of the initial and final states too. It holds no parameters: the state dict is the
    stack's."""

    def forward(self, function, *args):
        return function(*args)


class RecurrentStack(nn.Module):
    """Stacked, optionally bidirectional RNN/LSTM/GRU (or peephole LSTM) over batch-first sequences.

    Args:
        cell_type: one of ``CELL_TYPES``: ``FUSED_CELL_TYPES`` run torch's fused kernel, the others
            (``"peephole_lstm"``) a per-step loop (:mod:`recurrent_cells`).
        input_size: size of each input vector ``x_t``.
        hidden_size: size of ``h_t`` per direction.
        num_layers: number of stacked layers.
        bidirectional: run a second stack right-to-left and concatenate the outputs.
        dropout: dropout on the outputs of every layer but the last.
    """

    def __init__(
        self,
        cell_type: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.cell_type = cell_type
        self.looped = cell_type in LOOPED_CELLS
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_directions = 2 if bidirectional else 1
        self.rnn = _build_rnn(
            cell_type,
            input_size=input_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
            batch_first=True,
        )
        self._layer_templates: list[nn.RNNBase] = []  # one-layer modules on "meta", not registered (no weights)
        self.recompute = RecomputedCall()  # activation checkpointing of the whole stack (no weights)

    @property
    def output_size(self) -> int:
        return self.hidden_size * self.num_directions

    @property
    def num_state_tensors(self) -> int:
        return num_state_tensors(self.cell_type)

    def initial_state(self, batch_size: int, reference: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Zero state: each tensor ``(batch, num_layers * num_directions, hidden_size)``."""
        shape = (batch_size, self.num_layers * self.num_directions, self.hidden_size)
        zeros = reference.new_zeros(shape)
        return tuple(zeros for _ in range(self.num_state_tensors))

    def forward(
        self,
        inputs: torch.Tensor,
        state: tuple[torch.Tensor, ...] | None = None,
        mask: torch.Tensor | None = None,
        output_layers: bool = False,
    ):
        """Run the stack.

        Args:
            inputs: ``(batch, time, input_size)``.
            state: batch-first state from a previous call, or None for zeros.
            mask: ``(batch, time)`` bool, True at real tokens; None when nothing is padded.
                Padded steps leave the state untouched and get zero outputs.
            output_layers: also return the outputs of every layer (run one layer at a time).

        Returns:
            outputs ``(batch, time, num_directions * hidden_size)`` and the final state, each
            tensor ``(batch, num_layers * num_directions, hidden_size)``; with ``output_layers`` a third
            element: the outputs of each layer, ``num_layers`` tensors ``(batch, time, D * hidden_size)``
            (the last one is ``outputs``).
        """
        if state is None:
            state = self.initial_state(inputs.shape[0], inputs)
        recomputing = self.recompute.gradient_checkpointing and self.training and torch.is_grad_enabled()
        run = self.recompute if recomputing else _call  # the checkpointing wrapper only when it checkpoints
        flat = run(self._run, inputs, mask, output_layers, *state)
        n = self.num_state_tensors
        outputs, final, layers = flat[0], tuple(s.transpose(0, 1) for s in flat[1 : 1 + n]), tuple(flat[1 + n :])
        if torch.is_grad_enabled() and not is_tracing():
            final = tuple(_own_copy(s) for s in final)
            if mask is None and not self.looped:  # the modules' own outputs (packing and the loop make new ones)
                layers = tuple(_own_copy(t) for t in layers)
                outputs = layers[-1] if output_layers else _own_copy(outputs)
        return (outputs, final, layers) if output_layers else (outputs, final)

    def _run(self, inputs, mask, output_layers: bool, *state) -> tuple[torch.Tensor, ...]:
        """:meth:`forward` on flat arguments: ``(outputs, *final_state, *layer_outputs)``, the state in torch's
        layout ``(L * D, batch, hidden)``."""
        torch_state = tuple(s.transpose(0, 1).contiguous() for s in state)  # torch keeps the layer axis first
        if traced_as_scan(self):  # exported: a scan over time, symbolic length and padding
            outputs, final, layers = scan_stack(self.rnn, self.cell_type, self.num_layers, self.num_directions,
                                                inputs, torch_state, mask)
            return (outputs, *final, *(layers if output_layers else ()))
        if not output_layers:
            outputs, final = self._run_module(self.rnn, inputs, torch_state, mask)
            return (outputs, *final)
        x, layer_outputs, finals = inputs, [], []
        for k in range(self.num_layers):
            if k > 0:
                x = F.dropout(x, self.rnn.dropout, self.training)  # between layers, as the fused kernel
            rows = slice(k * self.num_directions, (k + 1) * self.num_directions)
            x, final = self._run_module(self._layer(k), x, tuple(s[rows] for s in torch_state), mask)
            layer_outputs.append(x)  # (B, T, D*H)
            finals.append(final)
        final = tuple(torch.cat(parts, dim=0) for parts in zip(*finals, strict=True))
        return (x, *final, *layer_outputs)

    def _layer(self, k: int):
        """Layer ``k`` as a callable with the signature of ``self.rnn``, on this stack's parameters."""
        if not self._layer_templates:
            kinds = dict(hidden_size=self.hidden_size, num_layers=1, bias=self.rnn.bias, batch_first=True,
                         bidirectional=self.num_directions == 2)
            with torch.device("meta"):
                self._layer_templates = [
                    _build_rnn(self.cell_type, input_size=self.input_size if i == 0 else self.output_size, **kinds)
                    for i in range(min(self.num_layers, 2))
                ]
        template = self._layer_templates[min(k, 1)]
        params = {name: getattr(self.rnn, name.replace("_l0", f"_l{k}", 1)) for name, _ in template.named_parameters()}

        def run(*args, **kwargs):
            return functional_call(template, params, args, kwargs)

        return run

    def _run_module(self, rnn, inputs, torch_state, mask) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """``rnn`` (the stack or one layer) over ``inputs`` from ``torch_state``; returns outputs and the final
        state as a tuple, in torch's layout."""
        if not self.looped and _outside_cpu_autocast(self.cell_type, inputs):
            dtype = next(self.rnn.parameters()).dtype  # the kernel in its weights' dtype: float32, or bf16 weights'
            with torch.autocast("cpu", enabled=False):
                return self._run_module(rnn, inputs.to(dtype), tuple(s.to(dtype) for s in torch_state), mask)
        rnn_state = torch_state if has_cell_state(self.cell_type) else torch_state[0]
        if mask is None:
            outputs, final = rnn(inputs, rnn_state)
        elif self.looped:  # steps through time and applies the mask itself
            outputs, final = rnn(inputs, rnn_state, mask=mask)
        else:
            outputs, final = self._forward_masked(rnn, inputs, rnn_state, mask)
        return outputs, final if isinstance(final, tuple) else (final,)

    @staticmethod
    def _forward_masked(rnn, inputs, rnn_state, mask):
        """Move the real tokens of each row to the front, run packed, and move the outputs back.

        A row without any real token is run for one (padding) step, as packing needs a length of at
        least 1; its outputs and state are then reset to zeros and its initial state.
        """
        batch, time, _ = inputs.shape
        # stable sort on "is padding" puts real tokens first, in their original order
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # (B, T)
        compact = inputs.gather(1, order.unsqueeze(-1).expand_as(inputs))
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(compact, lengths, batch_first=True, enforce_sorted=False)
        packed_out, final = rnn(packed, rnn_state)
        outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=time)  # (B, T, D*H)
        restore = torch.argsort(order, dim=1)
        outputs = outputs.gather(1, restore.unsqueeze(-1).expand(batch, time, outputs.shape[-1]))
        empty = ~mask.any(dim=1)  # (B,)
        if not reads_values() or bool(empty.any()):  # traced graphs must not branch on values: always reset then
            outputs = outputs.masked_fill(empty[:, None, None], 0.0)
            if isinstance(final, tuple):
                final = tuple(torch.where(empty[None, :, None], s0, s) for s0, s in zip(rnn_state, final, strict=True))
            else:
                final = torch.where(empty[None, :, None], rnn_state, final)
        return outputs, final

    @staticmethod
    def last_layer_state(h: torch.Tensor, num_directions: int) -> torch.Tensor:
        """Concatenate the final ``h`` of the top layer over directions: ``(batch, D * hidden)``."""
        return h[:, -num_directions:, :].reshape(h.shape[0], -1)
