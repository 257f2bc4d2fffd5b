"""What every export format shares: tracing a model's forward with ``torch.export``, ONNX conversion and
onnxruntime, the example and parity inputs, and the comparison with eager mode.

:mod:`.exporting` (``export_model``), :mod:`.onnx_generation` (the decoding graphs), :mod:`.executorch_export`
and :mod:`.quantization` build on these pieces; this module imports none of them.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

PARITY_TOLERANCE = 1e-4
#: names of input dimensions in the README and the parity inputs
DIM_NAMES = {("input_ids", 0): "batch", ("input_ids", -1): "sequence", ("decoder_input_ids", -1): "target_sequence",
             ("input_ids", 1): "num_choices"}


@dataclass
class ExportResult:
    """What :func:`~.exporting.export_model` wrote and measured.

    Attributes:
        path: the saved program (``model.onnx`` or ``model.pt2``).
        format: ``"onnx"`` or ``"torch"``.
        inputs / outputs: ``{name: shape}`` with named dimensions (``"batch"``, ``"sequence"``, ...) and
            sizes for the dimensions that the program fixed.
        parity: largest absolute difference from eager mode over all outputs, on the parity inputs.
        parity_shapes: ``{input name: shape}`` of the parity inputs.
        generation: ``{graph name: path}`` of the decoding-step graphs (ONNX, generative heads only).
        generation_parity: whether the exported greedy loop gave eager ``generate()``'s tokens.
    """

    path: Path
    format: str
    model_class: str
    inputs: dict[str, list] = field(default_factory=dict)
    outputs: dict[str, list] = field(default_factory=dict)
    parity: float = float("nan")
    parity_shapes: dict[str, tuple] = field(default_factory=dict)
    generation: dict[str, Path] = field(default_factory=dict)
    generation_parity: bool | None = None


class ForwardOutputs(nn.Module):
    """``model(**dict(zip(input_names, args)))`` as a tuple of its tensor outputs (``output_names``), with no
    cache and no loss: the function that gets exported."""

    def __init__(self, model: nn.Module, input_names: list[str], output_names: list[str]):
        super().__init__()
        self.model, self.input_names, self.output_names = model, list(input_names), list(output_names)
        self.extra = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.input_names, args, strict=True)), **self.extra, return_dict=True)
        return tuple(out[name] for name in self.output_names)


def tensor_outputs(model: nn.Module, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensor fields of the eager model's output on ``inputs`` (no cache, no loss)."""
    extra = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad():
        out = model(**inputs, **extra, return_dict=True)
    return {k: v for k, v in out.items() if isinstance(v, torch.Tensor) and k != "loss"}


def example_inputs(model: nn.Module, batch_size: int = 2, seq_length: int = 7, seed: int = 0) -> dict[str, torch.Tensor]:
    """Forward inputs for ``model`` of the kind its family in the registry takes: ``(batch_size, seq_length)`` ids
    drawn with ``seed``, no labels."""
    from ..example_inputs import INPUT_KINDS
    from ..registry import family_of

    family = family_of(type(model))
    generator = torch.Generator().manual_seed(seed)
    return INPUT_KINDS[family.input_kind](model.config, family.task_of(type(model)), batch_size, seq_length, generator)


def _dim_name(input_name: str, dim: int, ndim: int) -> str:
    for key in ((input_name, dim - ndim), (input_name, dim)):
        if key in DIM_NAMES:
            return DIM_NAMES[key]
    base = "source" if input_name == "input_ids" else input_name
    return f"{base}_dim{dim}"


def symbolic_shapes(program: torch.export.ExportedProgram, input_names: list[str]):
    """``(inputs, outputs, dynamic)``: shapes with symbols replaced by dimension names, and for each input the
    set of its dimensions that stayed dynamic."""
    names, inputs, dynamic = {}, {}, {}
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"
                    and n.name in program.graph_signature.user_inputs]
    for input_name, node in zip(input_names, placeholders, strict=True):
        shape = node.meta["val"].shape
        dynamic[input_name] = {i for i, d in enumerate(shape) if isinstance(d, torch.SymInt)}
        for i, d in enumerate(shape):
            if isinstance(d, torch.SymInt):
                names.setdefault(str(d), _dim_name(input_name, i, len(shape)))
        inputs[input_name] = [names[str(d)] if isinstance(d, torch.SymInt) else int(d) for d in shape]
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    outputs = []
    for value in output_node.args[0]:
        shape = value.meta["val"].shape
        outputs.append([names.get(str(d), str(d)) if isinstance(d, torch.SymInt) else int(d) for d in shape])
    return inputs, outputs, dynamic


def parity_inputs(model: nn.Module, example: dict[str, torch.Tensor], dynamic: dict[str, set[int]]) -> dict:
    """Inputs of another batch size (3) and length (example + 4) than ``example``, with the last two tokens of the
    first row padded; dimensions the program fixed keep the example's size."""
    batch = example["input_ids"].shape[0] + 1
    length = example["input_ids"].shape[-1] + 4
    fresh = example_inputs(model, batch_size=batch, seq_length=length, seed=1)
    out = {}
    for name, tensor in example.items():
        new = fresh[name]
        for dim in range(tensor.dim()):
            if dim not in dynamic[name]:
                new = new.narrow(dim, 0, tensor.shape[dim])
        out[name] = new.contiguous()
    if "attention_mask" in out and out["attention_mask"].shape[-1] > 3:
        mask = out["attention_mask"].clone()
        mask[0, ..., -2:] = 0  # right padding in the first row
        out["attention_mask"] = mask
    return out


def max_difference(expected: list[torch.Tensor], got: list[Any]) -> float:
    """Largest absolute difference between eager outputs and a program's (torch tensors or numpy arrays)."""
    worst = 0.0
    for want, have in zip(expected, got, strict=True):
        have = torch.as_tensor(np.asarray(have) if not isinstance(have, torch.Tensor) else have)
        if tuple(have.shape) != tuple(want.shape):
            raise AssertionError(f"exported output of shape {tuple(have.shape)}, eager {tuple(want.shape)}")
        worst = max(worst, float((have.to(want.dtype) - want).abs().max()) if want.numel() else 0.0)
    return worst


def trace(model: nn.Module, inputs: dict[str, torch.Tensor], output_names: list[str]) -> torch.export.ExportedProgram:
    """``torch.export`` of ``model``'s forward on ``inputs`` with every input dimension dynamic where the model
    allows it (``Dim.AUTO``: a dimension the code fixes stays fixed, see ``ExportResult.inputs``)."""
    wrapper = ForwardOutputs(model, list(inputs), output_names)
    dims = tuple({i: torch.export.Dim.AUTO for i in range(t.dim())} for t in inputs.values())
    if "decoder_input_ids" in inputs and _decoder_steps_in_python(model.config):
        dims[list(inputs).index("decoder_input_ids")][1] = torch.export.Dim.STATIC
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(wrapper, tuple(inputs.values()), dynamic_shapes=(dims,), strict=False)


def _decoder_steps_in_python(config) -> bool:
    """Whether an RNN encoder-decoder's attention decoder loops over target positions in Python (Bahdanau
    wiring, Luong with input feeding): the exported full forward then has a fixed target length."""
    wiring = getattr(config, "attention_wiring", None)
    if wiring is None or getattr(config, "attention_score", "none") == "none":
        return False
    return wiring == "bahdanau" or bool(getattr(config, "input_feeding", False))


def to_onnx(program: torch.export.ExportedProgram, path: Path, input_names: list[str], output_names: list[str]) -> None:
    """Convert an exported program with ``torch.onnx.export(..., dynamo=True)`` and save it at ``path``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_program = torch.onnx.export(program, dynamo=True, input_names=input_names, output_names=output_names,
                                         verbose=False)
    onnx_program.save(str(path))


def run_onnx(path: Path, inputs: dict[str, torch.Tensor]) -> list[np.ndarray]:
    """Run the ONNX model at ``path`` in onnxruntime (CPU) on ``inputs``."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in inputs.items()})


class Positional(torch.nn.Module):
    """``module(*args)`` behind one ``*args`` parameter, so that one ``dynamic_shapes=(dims,)`` describes every input
    (the exports of the decoding graphs, to ONNX and to ExecuTorch)."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module

    def forward(self, *args: torch.Tensor):
        return self.module(*args)
