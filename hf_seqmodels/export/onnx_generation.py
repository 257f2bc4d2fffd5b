"""Generation without torch: a decoding-step graph that takes and returns the recurrent state as plain tensors
(as optimum's ``decoder_with_past``), and a numpy/onnxruntime greedy loop over it.

Supported: the recurrent causal LMs (``RNNForCausalLM``, fused cells). The step graph ``decoder_with_past.onnx``
has inputs ``input_ids`` ``(batch, 1)`` and the state tensors ``state_0`` (``h``) [``state_1`` (``c``)], each
``(batch, num_layers, hidden_size)``; outputs ``logits`` ``(batch, 1, vocab_size)`` and ``present_0`` [...]. A
prompt is read one token at a time from a zero state, so the generated tokens are eager greedy ``generate()``'s.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .recurrent_scan import scan_recurrent_stacks

STEP_FILE = "decoder_with_past.onnx"
SPEC_FILE = "generation.json"


class RecurrentStep(nn.Module):
    """``(input_ids, *state) -> (logits, *new_state)`` of a recurrent causal LM, state as plain tensors."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, *state: torch.Tensor):
        from ..models.cache_naming import cache_field
        from ..models.state_cache import RecurrentState

        out = self.model(input_ids=input_ids, **cache_field(RecurrentState(state, 1)), use_cache=True,
                         return_dict=True)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return (out.logits, *cache.tensors)


def _supports(model: nn.Module) -> bool:
    from ..models import RNNForCausalLM
    from ..models.recurrent_stack import FUSED_CELL_TYPES

    return isinstance(model, RNNForCausalLM) and model.config.cell_type in FUSED_CELL_TYPES \
        and not getattr(model.config, "char_encoder", None)


def _zero_state(model: nn.Module, batch: int) -> tuple[torch.Tensor, ...]:
    out = model(input_ids=torch.full((batch, 1), 4), use_cache=True, return_dict=True)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    return tuple(torch.zeros_like(t) for t in cache.tensors)


def export_generation(model: nn.Module, output_dir: str | Path, validate: bool = True,
                      max_new_tokens: int = 8) -> tuple[dict[str, Path], bool | None] | None:
    """Export the decoding step of ``model`` to ``output_dir`` (None when the head is not supported) and, with
    ``validate``, check that :class:`OnnxGenerator` greedy decoding gives eager ``generate()``'s tokens.
    Returns ``({graph name: path}, tokens equal)``."""
    if not _supports(model):
        return None
    output_dir = Path(output_dir)
    model.eval()
    state = _zero_state(model, 2)
    ids = torch.full((2, 1), 5)
    names = [f"state_{i}" for i in range(len(state))]
    batch = torch.export.Dim("batch", min=1, max=4096)
    dims = ({0: batch}, tuple({0: batch} for _ in state))
    with torch.no_grad(), scan_recurrent_stacks(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(RecurrentStep(model), (ids, *state), dynamic_shapes=dims, strict=False)
        onnx_program = torch.onnx.export(program, dynamo=True, input_names=["input_ids", *names],
                                         output_names=["logits", *(f"present_{i}" for i in range(len(state)))])
    onnx_program.save(str(output_dir / STEP_FILE))
    spec = {"kind": "recurrent", "state_shapes": [list(t.shape[1:]) for t in state],
            "eos_token_id": model.generation_config.eos_token_id, "pad_token_id": model.config.pad_token_id}
    (output_dir / SPEC_FILE).write_text(json.dumps(spec, indent=2), encoding="utf-8")
    equal = None
    if validate:
        prompt = torch.tensor([[5, 9, 17], [23, 8, 40]])
        want = model.generate(prompt, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                              attention_mask=torch.ones_like(prompt))
        got = OnnxGenerator(output_dir).greedy(prompt.numpy(), max_new_tokens=max_new_tokens)
        equal = got.shape == tuple(want.shape) and bool((got == want.numpy()).all())
        if not equal:
            raise AssertionError(f"exported greedy decoding gave {got.tolist()}, eager generate() {want.tolist()}")
    return {"decoder_with_past": output_dir / STEP_FILE}, equal


class OnnxGenerator:
    """Greedy decoding with the step graph that :func:`export_generation` wrote in ``folder``: numpy and
    onnxruntime only."""

    def __init__(self, folder: str | Path, providers: list[str] | None = None):
        import onnxruntime

        folder = Path(folder)
        spec_path = folder / SPEC_FILE
        if not spec_path.is_file():
            raise ValueError(f"`folder`={str(folder)!r} has no {SPEC_FILE}: export a generative model there first.")
        self.spec = json.loads(spec_path.read_text(encoding="utf-8"))
        self.session = onnxruntime.InferenceSession(str(folder / STEP_FILE),
                                                    providers=providers or ["CPUExecutionProvider"])

    def step(self, token: np.ndarray, state: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """One token ``(batch,)`` -> next-token logits ``(batch, vocab)`` and the new state."""
        feed = {"input_ids": token.reshape(-1, 1).astype(np.int64)}
        feed.update({f"state_{i}": s for i, s in enumerate(state)})
        logits, *state = self.session.run(None, feed)
        return logits[:, -1], state

    def greedy(self, input_ids: np.ndarray, max_new_tokens: int = 20) -> np.ndarray:
        """Prompt ``(batch, length)`` ids (no padding) -> the prompt and up to ``max_new_tokens`` greedy tokens;
        rows that produced ``<eos>`` continue with ``pad_token_id``, and decoding stops when all have."""
        input_ids = np.asarray(input_ids, dtype=np.int64)
        if input_ids.ndim != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"`input_ids` must have shape (batch, length >= 1), got {input_ids.shape}.")
        if max_new_tokens < 1:
            raise ValueError(f"`max_new_tokens`={max_new_tokens}: expected an integer >= 1.")
        batch = input_ids.shape[0]
        state = [np.zeros((batch, *shape), dtype=np.float32) for shape in self.spec["state_shapes"]]
        for t in range(input_ids.shape[1]):
            logits, state = self.step(input_ids[:, t], state)
        eos = self.spec["eos_token_id"]
        eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        pad = self.spec["pad_token_id"] or 0
        done = np.zeros(batch, dtype=bool)
        tokens = [input_ids]
        for _ in range(max_new_tokens):
            next_token = np.where(done, pad, logits.argmax(-1))
            tokens.append(next_token[:, None])
            done |= np.isin(next_token, list(eos))
            if done.all():
                break
            logits, state = self.step(next_token, state)
        return np.concatenate(tokens, axis=1)
