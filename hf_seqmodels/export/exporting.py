"""Export any model of the package with ``torch.export`` or to ONNX, check it against eager mode, describe it.

:func:`export_model` traces the model's forward (inference outputs only: no loss, no cache) with dynamic
batch and sequence dimensions, saves it (``model.pt2`` or ``model.onnx``), runs the saved program on inputs
of another batch size and length than the example (one row padded) and compares every output with the eager
model, and writes a README.md describing the inputs, the outputs, the parity and how to run it. Generative
heads also get the decoding graphs of :mod:`.step_graphs` with ``format="onnx"`` (:mod:`.onnx_generation`).
"""

from __future__ import annotations

import inspect
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .readme import write_readme

logger = logging.getLogger(__name__)
FORMATS = ("onnx", "torch", "executorch")
PARITY_TOLERANCE = 1e-4
#: names of input dimensions in the README and the parity inputs
DIM_NAMES = {("input_ids", 0): "batch", ("input_ids", -1): "sequence", ("decoder_input_ids", -1): "target_sequence",
             ("input_ids", 1): "num_choices"}


@dataclass
class ExportResult:
    """What :func:`export_model` wrote and measured.

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
    """Forward inputs for ``model`` from its family in the registry (no labels)."""
    from ..registry import family_of

    family = family_of(type(model))
    return family.inputs(model.config, type(model), batch_size=batch_size, seq_length=seq_length, seed=seed,
                         labels=False)


def _dim_name(input_name: str, dim: int, ndim: int) -> str:
    for key in ((input_name, dim - ndim), (input_name, dim)):
        if key in DIM_NAMES:
            return DIM_NAMES[key]
    base = "source" if input_name == "input_ids" else input_name
    return f"{base}_dim{dim}"


def _symbolic_shapes(program: torch.export.ExportedProgram, input_names: list[str]):
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


def load_saved_model(folder: str | Path) -> nn.Module:
    """The model saved in ``folder`` (``config.json`` + weights), as the head named by ``config.architectures``."""
    from transformers import AutoConfig

    from ..registry import family_of

    path = Path(folder)
    if not (path / "config.json").is_file():
        raise ValueError(f"`--model`={str(folder)!r} is not a saved model folder (no config.json there).")
    config = AutoConfig.from_pretrained(path)
    family = family_of(config)
    wanted = (config.architectures or [None])[0]
    heads = {cls.__name__: cls for cls in family.heads.values()}
    if wanted not in heads:
        raise ValueError(f"config.architectures={config.architectures!r} names no head of the {family.name} family "
                         f"({sorted(heads)}).")
    return heads[wanted].from_pretrained(path).eval()


def export_model(model: nn.Module, output_dir: str | Path, format: str = "onnx",
                 inputs: dict[str, torch.Tensor] | None = None, validate: bool = True,
                 generation: bool = True, atol: float = PARITY_TOLERANCE) -> ExportResult:
    """Export ``model`` (any head of the package) to ``output_dir`` and check it against eager mode.

    Args:
        model: a model of the package (put in ``eval()`` mode).
        output_dir: folder for ``model.onnx`` / ``model.pt2``, the step graphs and README.md.
        format: ``"onnx"`` (``torch.onnx.export(..., dynamo=True)``, checked in onnxruntime) or ``"torch"``
            (``torch.export``, saved with ``torch.export.save``) or ``"executorch"`` (``.pte`` programs with the
            XNNPACK delegate, fixed batch size 1: :func:`.executorch_export.export_executorch`).
        inputs: example forward inputs (default: the family's, batch 2, length 7).
        validate: compare outputs on inputs of another batch size and length (:func:`parity_inputs`); a
            difference above ``atol`` raises an AssertionError.
        generation: with ``format="onnx"``, also export the decoding step of generative heads and check that
            greedy decoding in onnxruntime gives eager ``generate()``'s tokens.

    Returns:
        an :class:`ExportResult`.
    """
    if format not in FORMATS:
        raise ValueError(f"Invalid `format`={format!r}: expected one of {', '.join(FORMATS)}.")
    if format == "executorch":
        from .executorch_export import export_executorch

        return export_executorch(model, output_dir, inputs=inputs, validate=validate, atol=atol)
    model.eval()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    inputs = dict(inputs) if inputs is not None else example_inputs(model)
    expected = tensor_outputs(model, inputs)
    output_names = list(expected)
    program = trace(model, inputs, output_names)
    input_shapes, output_shapes, dynamic = _symbolic_shapes(program, list(inputs))
    result = ExportResult(path=output_dir / ("model.onnx" if format == "onnx" else "model.pt2"), format=format,
                          model_class=type(model).__name__, inputs=input_shapes,
                          outputs=dict(zip(output_names, output_shapes, strict=True)))
    if format == "onnx":
        to_onnx(program, result.path, list(inputs), output_names)
    else:
        torch.export.save(program, str(result.path))
    if validate:
        check = parity_inputs(model, inputs, dynamic)
        want = list(tensor_outputs(model, check).values())
        if format == "onnx":
            got = run_onnx(result.path, check)
        else:
            with torch.no_grad():
                got = torch.export.load(str(result.path)).module()(*check.values())
        result.parity = max_difference(want, got)
        result.parity_shapes = {k: tuple(v.shape) for k, v in check.items()}
        if not result.parity <= atol:
            raise AssertionError(f"{type(model).__name__}: exported outputs differ from eager by {result.parity:.3g} "
                                 f"(> {atol}) on inputs {result.parity_shapes}")
    if generation and format == "onnx":
        from .onnx_generation import export_generation

        exported = export_generation(model, output_dir, validate=validate)
        if exported is not None:
            result.generation, result.generation_parity = exported
    write_readme(result, output_dir)
    logger.info("Exported %s to %s (parity %.2g)", type(model).__name__, result.path, result.parity)
    return result
