"""The deployment section of ``bench_export``: int8 (eager and ONNX) and ExecuTorch against eager float32 on
briefly trained models, measured in one process (see ``bench_export``'s docstring)."""

from __future__ import annotations

import io
import math
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from hf_seqmodels.demo import corpus_text
from hf_seqmodels.export import export_model
from hf_seqmodels.export.quantization import quantize_eager, quantize_onnx_export
from hf_seqmodels.models import (
    BertConfig,
    BertForSequenceClassification,
    RNNConfig,
    RNNForCausalLM,
    TransformerForCausalLM,
    TransformerLMConfig,
)

from .common import interleaved_timings, paired_ratio, print_table

DEPLOY_MODELS = ("lstm_lm", "transformer_lm", "bert_classification")
ROWS, LENGTH, SPECIAL = 8, 64, 4  # eval batch rows, tokens per row, ids below SPECIAL are special


def _char_data(length: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Training and held-out windows ``(N, length)`` of the embedded corpus' characters, and the vocabulary size."""
    text, _ = corpus_text(None)
    chars = sorted(set(text))
    ids = torch.tensor([SPECIAL + chars.index(c) for c in text])
    windows = ids[: len(ids) // length * length].view(-1, length)
    split = int(0.9 * len(windows))
    return windows[:split], windows[split:], SPECIAL + len(chars)


def _classification_data(vocab: int, length: int, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids and labels: 1 where the first token is in the upper half of the vocabulary (a task that a
    few hundred steps learn, so that int8's effect on accuracy shows)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(SPECIAL, vocab, (count, length), generator=generator)
    return ids, (ids[:, 0] >= (SPECIAL + vocab) // 2).long()


def build(name: str, args, vocab: int) -> torch.nn.Module:
    h, n = args.hidden_size, args.num_layers
    if name == "lstm_lm":
        return RNNForCausalLM(RNNConfig(vocab_size=vocab, cell_type="lstm", hidden_size=h, embedding_size=h,
                                        num_hidden_layers=n))
    if name == "transformer_lm":
        return TransformerForCausalLM(TransformerLMConfig(vocab_size=vocab, d_model=h, decoder_layers=n,
                                                          decoder_attention_heads=4, decoder_ffn_dim=4 * h,
                                                          max_position_embeddings=LENGTH + args.new_tokens + 8))
    return BertForSequenceClassification(BertConfig(vocab_size=vocab, hidden_size=h, num_hidden_layers=n,
                                                    num_attention_heads=4, intermediate_size=4 * h,
                                                    max_position_embeddings=LENGTH, num_labels=2))


def train(model, inputs: torch.Tensor, labels: torch.Tensor | None, steps: int) -> None:
    """``steps`` AdamW steps on random batches of 32 rows (LM: next characters; classifier: ``labels``)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(steps):
        rows = torch.randint(0, len(inputs), (32,), generator=generator)
        out = model(input_ids=inputs[rows], labels=inputs[rows] if labels is None else labels[rows])
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def quality(name: str, logits: list[torch.Tensor], batches: list[torch.Tensor], labels: list | None) -> float:
    """Held-out perplexity (LMs: next character) or accuracy (classifier) from each batch's logits."""
    if labels is not None:
        right = sum(int((lg.argmax(-1) == lb).sum()) for lg, lb in zip(logits, labels, strict=True))
        return right / sum(len(lb) for lb in labels)
    nll = [F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum")
           for lg, ids in zip(logits, batches, strict=True)]
    return math.exp(float(sum(nll)) / sum(ids[:, 1:].numel() for ids in batches))


def _weights_bytes(model) -> int:
    """Bytes of the model's state (int8 packed weights included), serialized in memory."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


def _eager(model):
    def forward(ids):
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    return forward


def _onnx(path: Path):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def forward(ids):
        feed = {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy())}
        return torch.from_numpy(session.run(None, {k: feed[k] for k in names})[0])
    return forward


def _contenders(model, folder: Path, example) -> tuple[dict, dict, dict]:
    """``({name: forward(ids) -> logits}, {name: bytes}, {name: note})`` for eager and ONNX, float32 and int8."""
    forwards, sizes, notes = {"eager fp32": _eager(model)}, {"eager fp32": _weights_bytes(model)}, {}
    quantized = quantize_eager(model)
    forwards["eager int8"], sizes["eager int8"] = _eager(quantized), _weights_bytes(quantized)
    for kind in ("fp32", "int8"):
        result = export_model(model, folder / kind, inputs=example, generation=False)
        if kind == "int8":
            notes["onnx int8"] = f"int8 vs eager {quantize_onnx_export(model, result, tolerance=1.0).relative:.1%}"
        forwards[f"onnx {kind}"], sizes[f"onnx {kind}"] = _onnx(result.path), result.path.stat().st_size
    return forwards, sizes, notes


def _executorch_rows(name: str, model, args, batches, reference_quality: float) -> list[list]:
    """ExecuTorch (batch 1): per-token latency against eager ``generate()``, program size, quality."""
    from hf_seqmodels.export.executorch_export import (
        ExecuTorchGenerator,
        export_executorch,
        load_method,
        run_pte,
    )

    model.generation_config.eos_token_id = model.config.eos_token_id = None
    with tempfile.TemporaryDirectory() as folder:
        result = export_executorch(model, folder, max_length=LENGTH + args.new_tokens + 8)
        size = sum(p.stat().st_size for p in result.generation.values())
        generator, method = ExecuTorchGenerator(folder), load_method(result.path)
        spec = generator.spec
        state = [torch.full((1, *s["shape"]), s["fill"], dtype=getattr(torch, s["dtype"]))
                 for s in spec.get("initial_state", {}).values()]
        rows = [ids[i : i + 1] for ids in batches for i in range(len(ids))]
        logits = [run_pte(method, [r, torch.ones_like(r), *state])[0] for r in rows]
        value = quality(name, logits, rows, None)
        prompt, n = batches[0][:1, :8], args.new_tokens

        def eager():
            with torch.no_grad():
                return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                                      min_new_tokens=n, do_sample=False, num_beams=1)

        def program():
            return generator.greedy(prompt.numpy(), max_new_tokens=n)

        same = float((eager().numpy() == program()).mean())
        times = interleaved_timings({"eager": eager, "executorch": program}, args.repeats, args.warmup)
    per_token = {k: 1000 * statistics.median(t) / n for k, t in times.items()}
    ratio = paired_ratio(times["executorch"], times["eager"])
    print(f"{name}: ExecuTorch greedy {per_token['executorch']:.2f} ms/token, eager generate() "
          f"{per_token['eager']:.2f} ms/token (ratio {ratio:.3f}); tokens equal: {same:.0%}")
    return [[name, "executorch (batch 1)", size, f"{ratio:.3f} (per token)", value,
             value - reference_quality, f"{per_token['executorch']:.2f} ms/token"]]


def run_deployment(args) -> dict:
    """Print the deployment table; return its rows."""
    train_windows, held_out, char_vocab = _char_data(LENGTH)
    table, out = [], {}
    for name in args.deploy:
        torch.manual_seed(args.seed)
        if name == "bert_classification":
            vocab = 64
            inputs, labels = _classification_data(vocab, LENGTH, 4096, seed=1)
            test_ids, test_labels = _classification_data(vocab, LENGTH, ROWS * args.eval_batches, seed=2)
            batches, batch_labels = list(test_ids.split(ROWS)), list(test_labels.split(ROWS))
        else:
            vocab, inputs, labels, batch_labels = char_vocab, train_windows, None, None
            batches = list(held_out[: ROWS * args.eval_batches].split(ROWS))
        model = build(name, args, vocab)
        train(model, inputs, labels, args.train_steps)
        example = {"input_ids": batches[0][:2, :7].contiguous(), "attention_mask": torch.ones(2, 7, dtype=torch.long)}
        with tempfile.TemporaryDirectory() as folder:
            forwards, sizes, notes = _contenders(model, Path(folder), example)
            scores = {}
            for label, forward in forwards.items():
                try:
                    scores[label] = quality(name, [forward(b) for b in batches], batches, batch_labels)
                except Exception as error:  # noqa: BLE001 - a contender that cannot run is reported, not fatal
                    notes[label] = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:80]}"
            runnable = {k: (lambda f=f, bs=batches: [f(b) for b in bs]) for k, f in forwards.items() if k in scores}
            times = interleaved_timings(runnable, args.repeats, args.warmup)
        metric = "accuracy" if name == "bert_classification" else "perplexity"
        for label in forwards:
            ratio = paired_ratio(times[label], times["eager fp32"]) if label in times else float("nan")
            score = scores.get(label, float("nan"))
            table.append([name, label, sizes[label], ratio, score, score - scores["eager fp32"], notes.get(label, "")])
        if name != "bert_classification" and not args.no_executorch:
            try:
                table += _executorch_rows(name, model, args, batches, scores["eager fp32"])
            except ImportError as error:
                table.append([name, "executorch", "-", "-", "-", "-", str(error).splitlines()[0][:100]])
        out[name] = {"metric": metric, "rows": [row[1:] for row in table if row[0] == name]}
    print(f"\nDeployment: {LENGTH}-token rows, {args.eval_batches} held-out batches of {ROWS}; time = forward over "
          "them against eager fp32 (interleaved); quality = held-out perplexity (LMs) or accuracy (BERT)")
    print_table(["model", "runtime", "bytes", "time / eager fp32", "quality", "change", "note"], table)
    return out
