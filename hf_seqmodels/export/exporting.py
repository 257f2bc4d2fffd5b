"""Export any model of the package with ``torch.export`` or to ONNX, check it against eager mode, describe it.

:func:`export_model` traces the model's forward (inference outputs only: no loss, no cache) with dynamic
batch and sequence dimensions, saves it (``model.pt2`` or ``model.onnx``), runs the saved program on inputs
of another batch size and length than the example (one row padded) and compares every output with the eager
model, and writes a README.md describing the inputs, the outputs, the parity and how to run it. Generative
heads also get the decoding graphs of :mod:`.step_graphs` with ``format="onnx"`` (:mod:`.onnx_generation`). The
pieces every format shares (tracing, ONNX conversion, parity inputs and checks) are in :mod:`.programs`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

from .programs import (
    PARITY_TOLERANCE,
    ExportResult,
    example_inputs,
    max_difference,
    parity_inputs,
    run_onnx,
    symbolic_shapes,
    tensor_outputs,
    to_onnx,
    trace,
)
from .readme import write_readme

logger = logging.getLogger(__name__)
FORMATS = ("onnx", "torch", "executorch")
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
    input_shapes, output_shapes, dynamic = symbolic_shapes(program, list(inputs))
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
