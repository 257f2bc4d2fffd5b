"""The README.md that :func:`~hf_seqmodels.export.export_model` writes beside an exported model."""

from __future__ import annotations

from pathlib import Path


def _shape(shape: list) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _table(shapes: dict[str, list]) -> list[str]:
    rows = ["| name | shape |", "|---|---|"]
    rows += [f"| `{name}` | `{_shape(shape)}` |" for name, shape in shapes.items()]
    return rows


def _usage(result) -> list[str]:
    feed = ", ".join(f'"{name}": {name}' for name in result.inputs)
    if result.format == "onnx":
        code = ["import onnxruntime", "",
                f'session = onnxruntime.InferenceSession("{result.path.name}", providers=["CPUExecutionProvider"])',
                f"outputs = session.run(None, {{{feed}}})  # numpy int64 ids and masks"]
    else:
        code = ["import torch", "", f'program = torch.export.load("{result.path.name}")',
                f"outputs = program.module()({', '.join(result.inputs)})  # torch tensors"]
    lines = ["## How to run it", "", "```python", *code, "```", ""]
    if result.generation:
        lines += ["### Generation without torch", "",
                  "The decoding graphs " + ", ".join(f"`{p.name}`" for p in result.generation.values())
                  + " take and return the recurrent state or the key/value cache as plain tensors (`past.*` in, "
                  "`present.*` out; `generation.json` names them and the special token ids).", "",
                  "```python", "from hf_seqmodels.export import OnnxGenerator", "",
                  'generator = OnnxGenerator(".")',
                  "tokens = generator.greedy(input_ids, attention_mask, max_new_tokens=20)  # numpy (batch, length)",
                  "best = generator.beam_search(input_ids, attention_mask, num_beams=4, max_new_tokens=20)",
                  "drawn = generator.sample(input_ids, attention_mask, top_k=50, top_p=0.9, seed=0)",
                  "```", ""]
    return lines


def write_readme(result, output_dir: Path) -> Path:
    """Write ``output_dir/README.md`` for an :class:`~hf_seqmodels.export.programs.ExportResult`."""
    kind = "ONNX (`torch.onnx.export(..., dynamo=True)`)" if result.format == "onnx" else "`torch.export`"
    checked = "onnxruntime" if result.format == "onnx" else "the loaded `torch.export` program"
    lines = [f"# {result.model_class}, exported with {kind}", "",
             f"`{result.path.name}`: the forward pass of `{result.model_class}` (inference outputs: no loss, no "
             "cache). Named dimensions are dynamic; numbers are sizes the program fixes.", "",
             "## Inputs", "", *_table(result.inputs), "", "## Outputs", "", *_table(result.outputs), "",
             "## Parity with eager PyTorch", ""]
    if result.parity == result.parity:  # not NaN: validated
        shapes = ", ".join(f"`{k}` {tuple(v)}" for k, v in result.parity_shapes.items())
        lines += [f"Largest absolute difference from the eager model in {checked}: **{result.parity:.2e}**, on "
                  f"inputs of another batch size and length than the example ({shapes}; one row padded).", ""]
    else:
        lines += ["Not validated.", ""]
    if result.generation_parity is not None:
        lines += [f"Greedy decoding through the step graphs gives eager `generate()`'s tokens: "
                  f"**{'yes' if result.generation_parity else 'no'}**.", ""]
    lines += _usage(result)
    path = Path(output_dir) / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
