"""Data at corpus scale: token files against in-RAM tokenisation, and the causal attention mask's memory.

1. ``--megabytes`` MB of generated text (Zipf-distributed made-up words, lines of 5–25 words) are turned
   into a language model's training and validation token streams, each contender in a fresh process:

   * **token files** (ours): :func:`~hf_seqmodels.training.core.token_files.lm_token_streams`, streaming
     the file into ``uint16`` token files in a fresh cache folder, then memory-mapping them;
   * **cache hit**: the same call again in a new process (the second run of a training script);
   * **in RAM** (reference): ``load_text_splits`` + ``tokenize_texts`` for both splits, as the training
     scripts did (the text as a ``str``, ``Dataset.map`` over line chunks, an int64 tensor).

   Both use the same byte-level BPE tokenizer (trained once on a 2 MB sample); the two token streams are
   checked to be equal (length and SHA-256 of their ids). Peak RSS is the process's high-water mark
   (``ru_maxrss``), from which the RSS after the imports and the tokenizer is subtracted ("peak MB above
   start") — the cost of the data path itself.

2. One causal forward of a ``TransformerForCausalLM`` (1 layer, d_model 64, sdpa) at ``T = --seq_len``
   (8192): with the explicit ``(1, 1, T, T)`` float mask that the previous code built (reference) and
   with no mask (ours: ``is_causal`` inside the kernel). Peak memory above the model's: CUDA's
   ``max_memory_allocated`` on a GPU, the peak RSS of a fresh process on the CPU.

    python -m benchmarks.bench_data_scale --megabytes 50
    python -m benchmarks.bench_data_scale --megabytes 5 --seq_len 4096   # quick
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK_IDS = 1 << 22


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def write_corpus(path: Path, megabytes: float, seed: int = 0) -> None:
    """``megabytes`` MB of lines of made-up words, Zipf-distributed, written 1 MB at a time."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    words = ["".join(rng.choice(letters, size=rng.integers(2, 10))) for _ in range(20_000)]
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    target, written = int(megabytes * 2**20), 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            picks = rng.choice(len(words), size=200_000, p=weights)
            lengths = rng.integers(5, 26, size=len(picks) // 5)
            block, start = [], 0
            for length in lengths:
                block.append(" ".join(words[i] for i in picks[start : start + length]) + ".\n")
                start += length
                if start >= len(picks):
                    break
            text = "".join(block)[: target - written]
            f.write(text)
            written += len(text)


def train_tokenizer(corpus: Path, folder: Path) -> None:
    """A byte-level BPE of 8,000 tokens trained on the first 2 MB of ``corpus``, saved in ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    with open(corpus, encoding="utf-8") as f:
        sample = f.read(2 * 2**20).splitlines()
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(sample, trainers.BpeTrainer(vocab_size=8000, special_tokens=["<pad>", "<eos>"]))
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>").save_pretrained(folder)


def _digest(ids) -> str:
    """SHA-256 of the ids as int64, read ``CHUNK_IDS`` at a time."""
    digest = hashlib.sha256()
    for start in range(0, len(ids), CHUNK_IDS):
        digest.update(np.asarray(ids[start : start + CHUNK_IDS], dtype=np.int64).tobytes())
    return digest.hexdigest()


def _prepare(job: dict, queue: mp.Queue) -> None:
    """One preparation in a fresh process: puts seconds, peak MB above start, token counts and digests."""
    from transformers import AutoTokenizer

    from hf_seqmodels.training.core.text import load_text_splits, tokenize_texts
    from hf_seqmodels.training.core.token_files import lm_token_streams

    tokenizer = AutoTokenizer.from_pretrained(job["tokenizer"])
    start_rss, start = _rss_mb(), time.perf_counter()
    if job["kind"] == "in RAM":
        texts = load_text_splits(job["corpus"])
        train, validation = tokenize_texts(texts.train, tokenizer), tokenize_texts(texts.validation, tokenizer)
        train, validation = train.numpy(), validation.numpy()
    else:
        streams = lm_token_streams(job["corpus"], tokenizer, cache_dir=job["cache_dir"])
        train, validation = streams.train, streams.validation
    seconds = time.perf_counter() - start
    peak = _peak_rss_mb() - start_rss
    queue.put({"seconds": seconds, "peak_mb": peak, "tokens": (len(train), len(validation)),
               "digests": (_digest(train), _digest(validation))})


def _causal_forward(job: dict, queue: mp.Queue) -> None:
    """One causal forward at ``T`` in a fresh process, with the explicit float mask or none."""
    import torch

    from hf_seqmodels import TransformerForCausalLM, TransformerLMConfig
    from hf_seqmodels.models.multi_head_attention import attention_bias

    torch.set_num_threads(job["threads"])
    device = torch.device(job["device"])
    length = job["seq_len"]
    config = TransformerLMConfig(vocab_size=1000, d_model=64, decoder_layers=1, decoder_attention_heads=2,
                                 decoder_ffn_dim=128, max_position_embeddings=length, attn_implementation="sdpa")
    torch.manual_seed(0)  # the same weights and ids in both processes
    model = TransformerForCausalLM(config).to(device).eval()
    input_ids = torch.randint(1000, (1, length)).to(device)
    with torch.no_grad():
        model(input_ids[:, :64])  # warm the kernels up
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated() / 2**20
        else:
            base = _peak_rss_mb()
        mask = None
        if job["explicit_mask"]:  # the (1, 1, T, T) float mask of the previous code
            mask = attention_bias(None, length, length, causal=True, dtype=torch.float32, device=device)
        logits = model(input_ids, attention_mask=mask).logits
        if device.type == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 2**20 - base
        else:
            peak = _peak_rss_mb() - base
    queue.put({"peak_mb": peak, "logits_sum": float(logits[0, -1].float().sum())})


def in_fresh_process(target, job: dict) -> dict:
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(job, queue))
    process.start()
    while True:  # the result, or the child's failure
        try:
            result = queue.get(timeout=1.0)
            break
        except Exception:  # queue.Empty
            if not process.is_alive():
                raise SystemExit(f"{target.__name__}({job}) failed with exit code {process.exitcode}") from None
    process.join()
    return result


def data_preparation(args: argparse.Namespace, folder: Path) -> None:
    corpus = folder / "corpus.txt"
    start = time.perf_counter()
    write_corpus(corpus, args.megabytes, args.seed)
    train_tokenizer(corpus, folder / "tokenizer")
    print(f"{corpus.stat().st_size / 2**20:.1f} MB of generated text and a BPE tokenizer in "
          f"{time.perf_counter() - start:.1f} s")
    job = {"corpus": str(corpus), "tokenizer": str(folder / "tokenizer"), "cache_dir": str(folder / "cache")}
    results = {"token files": in_fresh_process(_prepare, {**job, "kind": "token files"}),
               "cache hit": in_fresh_process(_prepare, {**job, "kind": "token files"}),
               "in RAM": in_fresh_process(_prepare, {**job, "kind": "in RAM"})}
    for name, result in results.items():
        if (result["tokens"], result["digests"]) != (results["in RAM"]["tokens"], results["in RAM"]["digests"]):
            raise SystemExit(f"{name}: the token streams differ from the in-RAM tokenisation")
    size = sum(p.stat().st_size for p in (folder / "cache").rglob("*.bin"))
    print(f"{sum(results['in RAM']['tokens']):,} tokens, equal in every contender; token files {size / 2**20:.1f} MB")
    print(f"{'contender':<14}{'seconds':>10}{'peak MB above start':>22}{'MB per MB of text':>20}")
    for name, result in results.items():
        print(f"{name:<14}{result['seconds']:>10.2f}{result['peak_mb']:>22.1f}"
              f"{result['peak_mb'] / args.megabytes:>20.2f}")
    ours, reference = results["token files"], results["in RAM"]
    print(f"time ours / in RAM: {ours['seconds'] / reference['seconds']:.2f}; peak ours / in RAM: "
          f"{ours['peak_mb'] / max(reference['peak_mb'], 1e-9):.3f}; cache hit {results['cache hit']['seconds']:.2f} s "
          f"(target <= 10 s: {'PASS' if results['cache hit']['seconds'] <= 10 else 'MISS'})")


def causal_mask_memory(args: argparse.Namespace) -> None:
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    job = {"seq_len": args.seq_len, "device": device, "threads": args.threads}
    before = in_fresh_process(_causal_forward, {**job, "explicit_mask": True})
    after = in_fresh_process(_causal_forward, {**job, "explicit_mask": False})
    if abs(before["logits_sum"] - after["logits_sum"]) > 1e-3 * max(1.0, abs(before["logits_sum"])):
        raise SystemExit(f"the masked and the is_causal forwards differ: {before} vs {after}")
    ratio = after["peak_mb"] / max(before["peak_mb"], 1e-9)
    print(f"causal forward at T = {args.seq_len} on {device}: peak MB above the model, explicit float mask "
          f"{before['peak_mb']:.1f}, is_causal {after['peak_mb']:.1f}; ratio {ratio:.3f} "
          f"(target <= 0.25: {'PASS' if ratio <= 0.25 else 'MISS'})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=50.0, help="MB of generated text")
    parser.add_argument("--seq_len", type=int, default=8192, help="T of the causal forward")
    parser.add_argument("--device", help="device of the causal forward (default: cuda if available)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip_data", action="store_true", help="only the causal forward")
    args = parser.parse_args(argv)
    if not args.skip_data:
        with tempfile.TemporaryDirectory() as folder:
            data_preparation(args, Path(folder))
    causal_mask_memory(args)


if __name__ == "__main__":
    main()
