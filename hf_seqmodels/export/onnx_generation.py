"""Generation without torch: the decoding graphs of :mod:`.step_graphs` exported to ONNX, and greedy search,
sampling and beam search over them in numpy and onnxruntime (:class:`OnnxGenerator`).

:func:`export_generation` writes the graphs (``encoder_model.onnx``, ``decoder_model.onnx``,
``decoder_with_past.onnx``, as the family needs them) and ``generation.json``, which names them and holds the
special token ids; it checks that :meth:`OnnxGenerator.greedy` gives eager ``generate()``'s tokens. Supported:
every generative head of the package: the NNLM, the recurrent LMs (every cell type, with or without a
character encoder), the Transformer LM, the Transformer encoder-decoder and the RNN encoder-decoder (every
cell type and attention wiring).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from .beam_search import BeamSearch, log_softmax
from .programs import Positional, to_onnx
from .sampling import check_sampling, sample_tokens, warp_logits
from .step_graphs import StepGraph, generation_graphs

SPEC_FILE = "generation.json"
TOKEN_INPUTS = ("input_ids", "decoder_input_ids")


def _export_graph(graph: StepGraph, path: Path) -> None:
    """``torch.export`` of ``graph.module`` with every dimension dynamic except ``graph.static``, then ONNX."""
    auto, static = torch.export.Dim.AUTO, torch.export.Dim.STATIC
    dims = tuple({i: static if i in graph.static.get(name, ()) else auto for i in range(t.dim())}
                 for name, t in graph.inputs.items())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(Positional(graph.module), tuple(graph.inputs.values()), dynamic_shapes=(dims,),
                                      strict=False)
    to_onnx(program, path, list(graph.inputs), graph.output_names)


def _token_ids(model) -> dict:
    """The special ids the decoding loop needs, from the generation config (else the model config)."""
    gen, config = model.generation_config, model.config
    eos = gen.eos_token_id if gen.eos_token_id is not None else config.eos_token_id
    eos = [] if eos is None else list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]
    pad = gen.pad_token_id if gen.pad_token_id is not None else config.pad_token_id
    start = gen.decoder_start_token_id if gen.decoder_start_token_id is not None else \
        getattr(config, "decoder_start_token_id", None)
    return {"eos_token_id": eos, "pad_token_id": pad if pad is not None else (eos[0] if eos else 0),
            "decoder_start_token_id": start}


def export_generation(model: torch.nn.Module, output_dir: str | Path, validate: bool = True,
                      max_new_tokens: int = 8) -> tuple[dict[str, Path], bool | None] | None:
    """Export the decoding graphs of ``model`` to ``output_dir`` (None when the head has none) and, with
    ``validate``, check that :meth:`OnnxGenerator.greedy` gives eager greedy ``generate()``'s tokens.
    Returns ``({graph name: path}, tokens equal)``."""
    found = generation_graphs(model.eval())
    if found is None:
        return None
    kind, graphs, extra = found
    output_dir = Path(output_dir)
    for graph in graphs:
        _export_graph(graph, output_dir / graph.file)
    spec = {"kind": kind, "graphs": {g.role: g.file for g in graphs}, "vocab_size": model.config.vocab_size,
            **_token_ids(model), **extra}
    (output_dir / SPEC_FILE).write_text(json.dumps(spec, indent=2), encoding="utf-8")
    equal = None
    if validate:
        prompt = torch.tensor([[5, 9, 17, 6], [23, 8, 40, 11]]) % model.config.vocab_size
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens,
                              do_sample=False, num_beams=1)
        got = OnnxGenerator(output_dir).greedy(prompt.numpy(), max_new_tokens=max_new_tokens)
        equal = got.shape == tuple(want.shape) and bool((got == want.numpy()).all())
        if not equal:
            raise AssertionError(f"exported greedy decoding gave {got.tolist()}, eager generate() {want.tolist()}")
    return {Path(g.file).stem: output_dir / g.file for g in graphs}, equal


class OnnxGenerator:
    """Greedy search, sampling and beam search over the graphs that :func:`export_generation` wrote in ``folder``: numpy and
    onnxruntime only (no torch, no package needed beside this file and :mod:`.step_graphs`' contract).

    The decoding state lives in one dict of batch-first arrays, the *pool*: the ``past.*`` state, the context
    (encoder outputs, ``encoder_attention_mask``) and, for decoder-only models, the ``attention_mask`` of all
    tokens read so far. Each graph is fed the pool entries it names; beam search reorders every entry's rows.
    """

    def __init__(self, folder: str | Path, providers: list[str] | None = None, num_threads: int | None = None):
        """``folder``: where :func:`export_generation` wrote; ``providers``: onnxruntime's (default CPU);
        ``num_threads``: onnxruntime's intra-op threads (default: its own choice)."""
        import onnxruntime

        folder = Path(folder)
        spec_path = folder / SPEC_FILE
        if not spec_path.is_file():
            raise ValueError(f"`folder`={str(folder)!r} has no {SPEC_FILE}: export a generative model there first.")
        self.spec = json.loads(spec_path.read_text(encoding="utf-8"))
        options = onnxruntime.SessionOptions()
        if num_threads is not None:
            options.intra_op_num_threads = num_threads
        self.sessions = {role: onnxruntime.InferenceSession(str(folder / file), options,
                                                            providers=providers or ["CPUExecutionProvider"])
                         for role, file in self.spec["graphs"].items()}
        self.input_names = {role: [i.name for i in s.get_inputs()] for role, s in self.sessions.items()}
        self.output_names = {role: [o.name for o in s.get_outputs()] for role, s in self.sessions.items()}
        self.is_encoder_decoder = self.spec["kind"] == "encoder-decoder"

    # --- one graph call -------------------------------------------------------------------------------------

    def _run(self, role: str, pool: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
        """Run graph ``role`` on ``tokens`` ``(B, T)`` and the pool; store what it returns in the pool (``present.x``
        as ``past.x``) and return the last position's logits ``(B, V)``."""
        feed = {name: tokens if name in TOKEN_INPUTS else pool[name] for name in self.input_names[role]}
        logits = None
        for name, value in zip(self.output_names[role], self.sessions[role].run(None, feed), strict=True):
            if name == "logits":
                logits = value[:, -1]
            else:
                pool["past." + name[len("present."):] if name.startswith("present.") else name] = value
        return logits

    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None
              ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """Read the prompt (decoder-only) or encode the source and read ``decoder_start_token_id``
        (encoder-decoder). Returns the next-token logits ``(B, V)``, the pool and the sequences so far
        (the prompt, or the start token ``(B, 1)``)."""
        input_ids = np.asarray(input_ids, dtype=np.int64)
        if input_ids.ndim != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"`input_ids` must have shape (batch, length >= 1), got {input_ids.shape}.")
        mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask, dtype=np.int64)
        if mask.shape != input_ids.shape:
            raise ValueError(f"`attention_mask` must have the shape of `input_ids` {input_ids.shape}, got {mask.shape}.")
        batch = input_ids.shape[0]
        if self.is_encoder_decoder:
            pool = {"encoder_attention_mask": mask, "attention_mask": mask}
            self._run("encoder", pool, input_ids)
            sequences = np.full((batch, 1), self.spec["decoder_start_token_id"], dtype=np.int64)
        else:
            pool = {"attention_mask": mask}
            for name, initial in self.spec.get("initial_state", {}).items():
                pool[f"past.{name}"] = np.full((batch, *initial["shape"]), initial["fill"], dtype=initial["dtype"])
            sequences = input_ids
        role = "prefill" if "prefill" in self.sessions else "step"
        return self._run(role, pool, sequences), pool, sequences

    def advance(self, pool: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
        """Read one more token per row, ``tokens`` ``(B,)``: updates the pool, returns the logits ``(B, V)``."""
        if not self.is_encoder_decoder:
            pool["attention_mask"] = np.concatenate(
                [pool["attention_mask"], np.ones((tokens.shape[0], 1), dtype=np.int64)], axis=1)
        return self._run("step", pool, tokens.reshape(-1, 1).astype(np.int64))

    # --- decoding loops -------------------------------------------------------------------------------------

    def _check_length(self, max_new_tokens: int) -> None:
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"`max_new_tokens`={max_new_tokens!r}: expected an integer >= 1.")

    def greedy(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None,
               max_new_tokens: int = 20) -> np.ndarray:
        """Greedy decoding, as ``model.generate(do_sample=False, num_beams=1)``.

        Args:
            input_ids: ``(batch, length)`` prompt (decoder-only, left-padded when ``attention_mask`` has zeros)
                or source ids (encoder-decoder).
            attention_mask: ``(batch, length)``, 0 at padding; default: no padding.
            max_new_tokens: the most tokens generated per row.

        Returns:
            ``(batch, length + n)`` the prompt and its continuation (decoder-only), or ``(batch, 1 + n)``
            ``decoder_start_token_id`` and the generated tokens (encoder-decoder); rows that produced ``<eos>``
            continue with ``pad_token_id``, and decoding stops when all have.
        """
        return self._decode(input_ids, attention_mask, max_new_tokens, lambda logits: logits.argmax(-1))

    def sample(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None, max_new_tokens: int = 20,
               temperature: float = 1.0, top_k: int | None = 50, top_p: float = 1.0,
               seed: int | None = None) -> np.ndarray:
        """Multinomial sampling, as ``model.generate(do_sample=True, num_beams=1, temperature=..., top_k=...,
        top_p=...)`` (the warpers of :mod:`.sampling`; defaults as ``GenerationConfig``'s). ``seed`` makes the
        draws reproducible (numpy's generator: not torch's stream). Arguments and result as :meth:`greedy`."""
        check_sampling(temperature, top_k, top_p)
        rng = np.random.default_rng(seed)
        return self._decode(input_ids, attention_mask, max_new_tokens,
                            lambda logits: sample_tokens(warp_logits(logits, temperature, top_k, top_p), rng))

    def _decode(self, input_ids, attention_mask, max_new_tokens: int, choose) -> np.ndarray:
        """One token per row and step, ``choose(logits (B, V)) -> (B,)``, until every row has produced
        ``<eos>`` or ``max_new_tokens`` (see :meth:`greedy`)."""
        self._check_length(max_new_tokens)
        logits, pool, sequences = self.start(input_ids, attention_mask)
        eos, pad = self.spec["eos_token_id"], self.spec["pad_token_id"]
        done = np.zeros(sequences.shape[0], dtype=bool)
        tokens = [sequences]
        for step in range(max_new_tokens):
            next_token = np.where(done, pad, choose(logits))
            tokens.append(next_token[:, None])
            done |= np.isin(next_token, eos)
            if done.all() or step == max_new_tokens - 1:
                break
            logits = self.advance(pool, next_token)
        return np.concatenate(tokens, axis=1)

    def beam_search(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None, num_beams: int = 4,
                    max_new_tokens: int = 20, length_penalty: float = 1.0,
                    early_stopping: bool = False) -> np.ndarray:
        """Beam search as ``model.generate(num_beams=num_beams, do_sample=False)`` (see :mod:`.beam_search`);
        arguments and result as :meth:`greedy`: the best hypothesis of each row."""
        self._check_length(max_new_tokens)
        if not isinstance(num_beams, int) or num_beams < 1:
            raise ValueError(f"`num_beams`={num_beams!r}: expected an integer >= 1.")
        input_ids = np.asarray(input_ids, dtype=np.int64)
        mask = None if attention_mask is None else np.repeat(np.asarray(attention_mask), num_beams, axis=0)
        logits, pool, prefix = self.start(np.repeat(input_ids, num_beams, axis=0), mask)
        search = BeamSearch(prefix, num_beams, self.spec["eos_token_id"], self.spec["pad_token_id"],
                            prefix.shape[1] + max_new_tokens, length_penalty, early_stopping)
        while True:
            rows, tokens, over = search.step(log_softmax(logits))
            if over:
                return search.result()
            for name, value in pool.items():
                pool[name] = value[rows]  # every pool entry is batch-first
            logits = self.advance(pool, tokens)
