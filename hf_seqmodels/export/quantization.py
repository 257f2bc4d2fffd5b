"""Dynamic int8 quantization for deployment: of an ONNX export (onnxruntime's ``quantize_dynamic``) and of an
eager model (``torch.ao.quantization.quantize_dynamic``).

Dynamic quantization stores the weights of the matrix products as int8 (per tensor, symmetric) and quantizes
the activations on the fly at run time: about 4× smaller weights, no calibration data.
:func:`quantize_onnx_export` (``hf-seqmodels export --format onnx --quantize int8``) replaces every ONNX file
that :func:`~hf_seqmodels.export.export_model` wrote (the forward program and the decoding graphs, so
:class:`~hf_seqmodels.export.OnnxGenerator` runs the int8 graphs unchanged) with its int8 version, then
measures the int8 forward against the eager model and checks it within a loose tolerance relative to the
size of the outputs.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

logger = logging.getLogger(__name__)
QUANTIZATION_MODES = ("int8",)
#: largest difference from eager allowed for the int8 forward, as a fraction of the eager outputs' largest magnitude
INT8_RELATIVE_TOLERANCE = 0.1


@dataclass
class QuantizationResult:
    """What :func:`quantize_onnx_export` changed and measured.

    Attributes:
        sizes: ``{file name: (float32 bytes, int8 bytes)}`` of every quantized file.
        parity: largest absolute difference between the int8 forward and eager mode, on the export's parity
            input shapes; ``relative``: the same over the eager outputs' largest magnitude.
    """

    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    parity: float = float("nan")
    relative: float = float("nan")

    @property
    def ratio(self) -> float:
        """int8 bytes over float32 bytes, all files together."""
        return sum(q for _, q in self.sizes.values()) / sum(f for f, _ in self.sizes.values())


def check_mode(mode: str) -> None:
    if mode not in QUANTIZATION_MODES:
        raise ValueError(f"Invalid `--quantize`={mode!r}: expected one of {', '.join(QUANTIZATION_MODES)}.")


def quantize_onnx_file(source: str | Path, target: str | Path) -> None:
    """Write ``source``'s dynamic int8 version at ``target`` (may be ``source``): 8-bit weights, one scale per
    output channel, for every MatMul/Gemm with a constant weight (also inside ``Scan`` bodies); products of two
    activations (attention's) stay float32. The weights are unsigned (U8U8): with signed weights, x86 CPUs
    without VNNI saturate the 16-bit sums of ``MatMulInteger`` (a tiny Transformer LM's logits off by 30 % of
    their range on an AVX-512 EPYC, against 1 % unsigned)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QUInt8, per_channel=True,
                     extra_options={"MatMulConstBOnly": True})


def quantize_onnx_export(model: nn.Module, result, mode: str = "int8",
                         tolerance: float = INT8_RELATIVE_TOLERANCE) -> QuantizationResult:
    """Replace the ONNX files of ``result`` (an ``ExportResult`` of ``format="onnx"``) by their int8 versions and
    check the int8 forward against ``model`` on inputs of the parity shapes: a largest difference above
    ``tolerance`` times the eager outputs' largest magnitude is an AssertionError."""
    from .programs import run_onnx, tensor_outputs

    check_mode(mode)
    if result.format != "onnx":
        raise ValueError(f"`--quantize {mode}` quantizes ONNX programs; got `--format {result.format}`.")
    quantized = QuantizationResult()
    for path in [result.path, *result.generation.values()]:
        before = path.stat().st_size
        quantize_onnx_file(path, path)
        quantized.sizes[path.name] = (before, path.stat().st_size)
    inputs = _inputs_of_shapes(model, list(result.inputs), result.parity_shapes or None)
    want = list(tensor_outputs(model, inputs).values())
    got = run_onnx(result.path, inputs)
    quantized.parity = max(float((torch.as_tensor(g).to(w.dtype) - w).abs().max()) for w, g in zip(want, got, strict=True)
                           if w.numel() and w.is_floating_point())
    scale = max(float(w.abs().max()) for w in want if w.numel() and w.is_floating_point())
    quantized.relative = quantized.parity / max(scale, 1e-12)
    if not quantized.relative <= tolerance:
        raise AssertionError(f"{result.model_class}: int8 outputs differ from eager by {quantized.parity:.3g}, "
                             f"{quantized.relative:.1%} of their largest magnitude (> {tolerance:.0%})")
    _append_readme(result, quantized)
    logger.info("Quantized %s to int8: %.2f of the float32 size, %.2g from eager", result.model_class,
                quantized.ratio, quantized.parity)
    return quantized


def _inputs_of_shapes(model: nn.Module, names: list[str], shapes: dict[str, tuple] | None) -> dict[str, torch.Tensor]:
    """The family's forward inputs ``names`` (those the program takes) of the given shapes (default: batch 3,
    length 11)."""
    from .programs import example_inputs

    ids = (shapes or {}).get("input_ids", (3, 11))
    inputs = example_inputs(model, batch_size=ids[0], seq_length=ids[-1], seed=1)
    inputs = {name: inputs[name] for name in names}
    for name, shape in (shapes or {}).items():
        tensor = inputs[name]
        for dim, size in enumerate(shape):
            tensor = tensor.narrow(dim, 0, min(size, tensor.shape[dim]))
        inputs[name] = tensor.contiguous()
    return inputs


def _append_readme(result, quantized: QuantizationResult) -> None:
    readme = result.path.parent / "README.md"
    if not readme.is_file():
        return
    sizes = ", ".join(f"`{name}` {before / 1e6:.2f} → {after / 1e6:.2f} MB" for name, (before, after)
                      in quantized.sizes.items())
    text = readme.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join([
        "## int8", "",
        "The ONNX files above were then quantized to dynamic int8 (`onnxruntime.quantization.quantize_dynamic`, "
        f"int8 weights): {sizes}. The parity figures above are the float32 program's; the int8 forward differs "
        f"from eager by **{quantized.parity:.2e}** ({quantized.relative:.2%} of the outputs' largest magnitude).",
        ""])
    readme.write_text(text, encoding="utf-8")


def quantize_eager(model: nn.Module) -> nn.Module:
    """A dynamic int8 copy of ``model`` (``torch.ao.quantization.quantize_dynamic`` of its ``nn.Linear``,
    ``nn.LSTM`` and ``nn.GRU`` modules), in eval mode; ``model`` is left as it was."""
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(copy.deepcopy(model).eval(), {nn.Linear, nn.LSTM, nn.GRU}, dtype=torch.qint8)
