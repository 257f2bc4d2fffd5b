"""ExecuTorch programs (``.pte``, XNNPACK delegate) of the package's models, and greedy decoding over them.

:func:`export_executorch` (``hf-seqmodels export --format executorch``) lowers, with
``executorch.exir.to_edge_transform_and_lower`` and the XNNPACK partitioner:

* for a generative head, the decoding graphs of :mod:`.step_graphs` (the recurrent LMs' ``step``, the
  Transformer LM's ``prefill`` and ``step``, ...): the recurrent state or the key/value cache are plain
  inputs and outputs (``past.*`` in, ``present.*`` out), and the graph that reads the prompt gives the
  forward logits of every prompt position;
* for any other head (TextCNN, BERT, ...), the forward pass (``model.pte``), as :func:`.programs.trace` does.

An ExecuTorch program plans its memory ahead of time, so the batch size is fixed (``batch_size``, 1 by default:
one sequence at a time, as on a device) and every other dynamic dimension has an upper bound (``max_length``,
by default the model's ``max_position_embeddings`` or 256). Each program is run with ``executorch.runtime``
against the eager model, and the decoding graphs by :class:`ExecuTorchGenerator`, the numpy loop of
:class:`~hf_seqmodels.export.OnnxGenerator` over ExecuTorch methods, against eager greedy ``generate()``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from .onnx_generation import SPEC_FILE, TOKEN_INPUTS, OnnxGenerator, _token_ids
from .programs import (
    PARITY_TOLERANCE,
    ExportResult,
    ForwardOutputs,
    Positional,
    example_inputs,
    max_difference,
    parity_inputs,
    symbolic_shapes,
    tensor_outputs,
)
from .step_graphs import StepGraph, generation_graphs

#: the releases of ``executorch`` this module is written for (1.5 is the first that lowers with torch 2.13)
EXECUTORCH_REQUIREMENT = "executorch>=1.5.1,<1.6"
PTE_FILES = {"encoder": "encoder_model.pte", "prefill": "decoder_model.pte", "step": "decoder_with_past.pte"}
DEFAULT_MAX_LENGTH = 256


class ExecuTorchUnavailable(ImportError):
    """``executorch`` cannot be imported with the installed torch; the message is one line."""


def require_executorch() -> None:
    """Import what the export and the runtime need, or raise :class:`ExecuTorchUnavailable` naming the installed
    torch, the requirement and the import error."""
    try:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: F401
        from executorch.exir import to_edge_transform_and_lower  # noqa: F401
        from executorch.runtime import Runtime  # noqa: F401
    except (ImportError, OSError, AttributeError, RuntimeError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ExecuTorchUnavailable(
            f"--format executorch needs `{EXECUTORCH_REQUIREMENT}` importable with the installed torch "
            f"{torch.__version__}, which it is not ({type(error).__name__}: {reason}); "
            f"`pip install '{EXECUTORCH_REQUIREMENT}'`.") from error


def _bounded_dims(inputs: dict[str, torch.Tensor], static: dict[str, tuple[int, ...]], max_length: int):
    """``dynamic_shapes`` for ``torch.export``: the batch axis and ``static`` fixed, every other dimension
    ``Dim.AUTO`` up to ``max_length`` (ExecuTorch plans memory for the bound)."""
    auto, fixed = torch.export.Dim.AUTO(max=max_length), torch.export.Dim.STATIC
    return tuple({i: fixed if i == 0 or i in static.get(name, ()) else auto for i in range(t.dim())}
                 for name, t in inputs.items())


def lower_to_pte(module: torch.nn.Module, inputs: dict[str, torch.Tensor], static: dict[str, tuple[int, ...]],
                 max_length: int, path: Path) -> torch.export.ExportedProgram:
    """``torch.export`` of ``module(*inputs.values())`` (an exported model in eval mode runs its recurrent stacks
    and CRF recursions as scans by itself), lowered
    to the XNNPACK delegate and saved at ``path``. Returns the exported (not lowered) program."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    dims = _bounded_dims(inputs, static, max_length)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(Positional(module), tuple(inputs.values()), dynamic_shapes=(dims,),
                                      strict=False)
        lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch()
    path.write_bytes(lowered.buffer)
    return program


def load_method(path: str | Path):
    """The ``forward`` method of the ExecuTorch program at ``path`` (``executorch.runtime``)."""
    from executorch.runtime import Runtime

    return Runtime.get().load_program(Path(path)).load_method("forward")


def run_pte(method, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """``method`` on ``inputs`` (contiguous copies); a shape outside the program's bounds is a ValueError."""
    try:
        return list(method.execute([t.contiguous() for t in inputs]))
    except RuntimeError as error:
        shapes = [tuple(t.shape) for t in inputs]
        raise ValueError(f"the ExecuTorch program rejected inputs of shapes {shapes} ({error}): its batch size "
                         "is fixed and its other dimensions are bounded at export (see generation.json).") from error


class _MethodSession:
    """An ExecuTorch method behind onnxruntime's ``InferenceSession.run(None, feed)``: numpy in, numpy out."""

    def __init__(self, method, input_names: list[str]):
        self.method, self.input_names = method, input_names

    def run(self, _output_names, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        inputs = [torch.from_numpy(np.ascontiguousarray(feed[name])) for name in self.input_names]
        return [out.numpy() for out in run_pte(self.method, inputs)]


class ExecuTorchGenerator(OnnxGenerator):
    """Greedy search, sampling and beam search (:class:`~hf_seqmodels.export.OnnxGenerator`'s loops) over the
    ``.pte`` decoding graphs that :func:`export_executorch` wrote in ``folder``. The programs' batch size is
    fixed: prompts (times ``num_beams`` for beam search) must have ``generation.json``'s ``batch_size`` rows."""

    def __init__(self, folder: str | Path):
        require_executorch()
        folder = Path(folder)
        spec_path = folder / SPEC_FILE
        if not spec_path.is_file():
            raise ValueError(f"`folder`={str(folder)!r} has no {SPEC_FILE}: export a generative model there with "
                             "--format executorch first.")
        self.spec = json.loads(spec_path.read_text(encoding="utf-8"))
        if self.spec.get("runtime") != "executorch":
            raise ValueError(f"{spec_path} describes {self.spec.get('runtime', 'onnx')} graphs, not ExecuTorch "
                             "programs: use OnnxGenerator there.")
        self.input_names, self.output_names = self.spec["inputs"], self.spec["outputs"]
        self.sessions = {role: _MethodSession(load_method(folder / file), self.input_names[role])
                         for role, file in self.spec["graphs"].items()}
        self.is_encoder_decoder = self.spec["kind"] == "encoder-decoder"

    def start(self, input_ids, attention_mask=None):
        rows = np.asarray(input_ids).shape[0]
        if rows != self.spec["batch_size"]:
            raise ValueError(f"`input_ids` has {rows} rows; the ExecuTorch programs were exported for batch_size="
                             f"{self.spec['batch_size']} (export again with that many rows, times num_beams for "
                             "beam search).")
        return super().start(input_ids, attention_mask)


def _check_sizes(batch_size: int, max_length: int) -> None:
    for name, value, low in (("batch_size", batch_size, 1), ("max_length", max_length, 8)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"`{name}`={value!r}: expected an integer >= {low}.")


def _longer(graph: StepGraph, extra: int) -> dict[str, torch.Tensor] | None:
    """``graph.inputs`` with ``extra`` more tokens (the token input and the masks of its length; the state as
    it is): a second shape on which the program must still match the eager module. None where the graph reads
    a fixed number of tokens."""
    token = next(name for name in graph.inputs if name in TOKEN_INPUTS)
    if 1 in graph.static.get(token, ()):
        return None
    out = dict(graph.inputs)
    for name in (token, "attention_mask"):
        if name in out:
            tail = out[name][:, -1:].expand(-1, extra)
            out[name] = torch.cat([out[name], tail if name == "attention_mask" else (tail + 1) % 5], dim=1)
    return out


def _export_graphs(model, output_dir: Path, found, batch_size: int, max_length: int, validate: bool,
                   atol: float) -> tuple[ExportResult, dict]:
    """Lower each decoding graph, check it against its eager module on two token counts, write the spec."""
    kind, graphs, extra = found
    result, worst = None, 0.0
    spec = {"runtime": "executorch", "kind": kind, "batch_size": batch_size, "max_length": max_length,
            "graphs": {}, "inputs": {}, "outputs": {}, "vocab_size": model.config.vocab_size, **_token_ids(model),
            **extra}
    for graph in graphs:
        graph.inputs = {name: t[:batch_size].contiguous() for name, t in graph.inputs.items()}
        path = output_dir / PTE_FILES[graph.role]
        program = lower_to_pte(graph.module, graph.inputs, graph.static, max_length, path)
        shapes, outputs, _ = symbolic_shapes(program, list(graph.inputs))
        spec["graphs"][graph.role] = path.name
        spec["inputs"][graph.role], spec["outputs"][graph.role] = list(graph.inputs), graph.output_names
        if result is None:  # the graph that reads the prompt: the forward logits
            result = ExportResult(path=path, format="executorch", model_class=type(model).__name__, inputs=shapes,
                                  outputs=dict(zip(graph.output_names, outputs, strict=True)))
        result.generation[path.stem] = path
        if validate:
            method = load_method(path)
            for inputs in filter(None, (graph.inputs, _longer(graph, 3))):
                with torch.no_grad():
                    want = list(graph.module(*inputs.values()))
                worst = max(worst, max_difference(want, run_pte(method, list(inputs.values()))))
                result.parity_shapes = {k: tuple(v.shape) for k, v in inputs.items()}
    (output_dir / SPEC_FILE).write_text(json.dumps(spec, indent=2), encoding="utf-8")
    if validate:
        result.parity = worst
    return result, spec


def _check_greedy(model, output_dir: Path, batch_size: int, max_new_tokens: int = 8) -> bool:
    """Whether :class:`ExecuTorchGenerator` gives eager greedy ``generate()``'s tokens (AssertionError if not)."""
    prompt = (torch.tensor([[5, 9, 17, 6], [23, 8, 40, 11]]) % model.config.vocab_size).repeat(batch_size, 1)
    prompt = prompt[:batch_size]
    with torch.no_grad():
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens,
                              do_sample=False, num_beams=1)
    got = ExecuTorchGenerator(output_dir).greedy(prompt.numpy(), max_new_tokens=max_new_tokens)
    if got.shape != tuple(want.shape) or not (got == want.numpy()).all():
        raise AssertionError(f"ExecuTorch greedy decoding gave {got.tolist()}, eager generate() {want.tolist()}")
    return True


def _export_forward(model, output_dir: Path, inputs, max_length: int, validate: bool) -> ExportResult:
    """``model.pte``: the forward pass (no cache, no loss), checked on inputs of another length."""
    expected = tensor_outputs(model, inputs)
    module = ForwardOutputs(model, list(inputs), list(expected))
    path = output_dir / "model.pte"
    program = lower_to_pte(module, inputs, {}, max_length, path)
    shapes, outputs, dynamic = symbolic_shapes(program, list(inputs))
    result = ExportResult(path=path, format="executorch", model_class=type(model).__name__, inputs=shapes,
                          outputs=dict(zip(expected, outputs, strict=True)))
    if validate:
        check = parity_inputs(model, inputs, dynamic)  # the batch is fixed: another length, a padded row
        result.parity = max_difference(list(tensor_outputs(model, check).values()),
                                       run_pte(load_method(path), list(check.values())))
        result.parity_shapes = {k: tuple(v.shape) for k, v in check.items()}
    return result


def export_executorch(model: torch.nn.Module, output_dir: str | Path, inputs: dict[str, torch.Tensor] | None = None,
                      validate: bool = True, batch_size: int = 1, max_length: int | None = None,
                      atol: float = PARITY_TOLERANCE) -> ExportResult:
    """Lower ``model`` to ExecuTorch programs in ``output_dir`` (see the module docstring) and check them.

    Args:
        model: a model of the package (put in ``eval()`` mode).
        inputs: example forward inputs of a head that does not generate (default: the family's, ``batch_size``
            rows, length 7); their batch size is the program's.
        validate: compare every program's outputs with the eager model's (difference above ``atol``:
            AssertionError) and, for generative heads, greedy decoding with eager ``generate()``.
        batch_size: the programs' fixed batch size.
        max_length: the bound of every other dynamic dimension (default: ``max_position_embeddings``, else 256).

    Returns:
        an :class:`~hf_seqmodels.export.ExportResult`: ``path`` is ``model.pte``, or for a generative head the
        graph that reads the prompt, and ``generation`` names the decoding graphs.
    """
    require_executorch()
    max_length = max_length or getattr(model.config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH
    _check_sizes(batch_size, max_length)
    model.eval()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    found = generation_graphs(model)
    if found is not None:
        result, _ = _export_graphs(model, output_dir, found, batch_size, max_length, validate, atol)
        if validate:
            result.generation_parity = _check_greedy(model, output_dir, batch_size)
    else:
        inputs = dict(inputs) if inputs is not None else example_inputs(model, batch_size=batch_size)
        result = _export_forward(model, output_dir, inputs, max_length, validate)
    if validate and not result.parity <= atol:
        raise AssertionError(f"{type(model).__name__}: ExecuTorch outputs differ from eager by {result.parity:.3g} "
                             f"(> {atol}) on inputs {result.parity_shapes}")
    _write_readme(result, output_dir, batch_size, max_length)
    return result


def _write_readme(result: ExportResult, output_dir: Path, batch_size: int, max_length: int) -> None:
    files = ", ".join(f"`{p.name}`" for p in (result.generation.values() or [result.path]))
    parity = f"**{result.parity:.2e}**" if result.parity == result.parity else "not validated"
    lines = [f"# {result.model_class}, lowered to ExecuTorch (XNNPACK)", "",
             f"Programs: {files}. Batch size fixed at {batch_size}; other dynamic dimensions up to {max_length}.", "",
             f"Largest absolute difference from the eager model in `executorch.runtime`: {parity}.", ""]
    if result.generation:
        lines += ["The decoding graphs take and return the recurrent state or the key/value cache as plain tensors "
                  "(`past.*` in, `present.*` out; `generation.json` names every input and output).", "",
                  "```python", "from hf_seqmodels.export.executorch_export import ExecuTorchGenerator", "",
                  'tokens = ExecuTorchGenerator(".").greedy(input_ids, max_new_tokens=20)  # numpy', "```", ""]
    else:
        lines += ["```python", "from executorch.runtime import Runtime", "",
                  f'method = Runtime.get().load_program("{result.path.name}").load_method("forward")',
                  f"outputs = method.execute([{', '.join(result.inputs)}])  # torch tensors", "```", ""]
    (output_dir / "README.md").write_text("\n".join(lines), encoding="utf-8")
