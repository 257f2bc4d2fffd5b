"""Data at corpus scale: token files against in-RAM tokenisation, and the causal attention mask's memory.

1. ``--megabytes`` MB of real English text (the lines of Tiny Shakespeare and WikiText-2's held-out files from
   ``--shared_data``, shuffled and repeated) go through a language model's data path, each run in a fresh process:

   * **train_lm** (ours): ``training/train_lm.py``'s ``main`` with a tiny Transformer LM and one update: the text
     is tokenised once into ``uint16`` token files (:func:`~hf_seqmodels.training.core.token_files.lm_token_streams`)
     in a fresh cache folder and memory-mapped; timed to the end of its first update;
   * **train_lm again**: the same command, a second run, which maps the cached token files;
   * **run_clm** (reference): transformers' ``run_clm.py`` datasets path, written out here
     (``load_dataset("text")`` with line breaks kept, ``map`` of the tokenizer, ``map`` of ``group_texts`` into
     blocks of 64, Arrow cache files), timed to its grouped blocks, then **run_clm again** from its cache;
   * **in RAM** (up to ``--in_ram_max_mb``): ``load_text_splits`` + ``tokenize_texts``, as the training scripts
     did before token files; the token files' ids are checked to be equal (length and SHA-256).

   All use the same byte-level BPE tokenizer (trained once on a 2 MB sample). Peak RSS is the process's
   high-water mark (``ru_maxrss``: the model, the imports and the touched pages of mapped files included), and
   that peak minus the RSS after the imports.

2. One causal forward of a ``TransformerForCausalLM`` (1 layer, d_model 64, sdpa) at ``T = --seq_len``
   (8192): with the explicit ``(1, 1, T, T)`` float mask that the previous code built (reference) and
   with no mask (ours: ``is_causal`` inside the kernel). Peak memory above the model's: CUDA's
   ``max_memory_allocated`` on a GPU, the peak RSS of a fresh process on the CPU.

    python -m benchmarks.bench_data_scale --megabytes 100
    python -m benchmarks.bench_data_scale --megabytes 1024 --skip_mask   # 1 GB of text
    python -m benchmarks.bench_data_scale --megabytes 5 --seq_len 4096   # quick
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
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


def write_lm_corpus(path: Path, megabytes: float, shared_data: Path, seed: int = 0) -> None:
    """``megabytes`` MB of real English lines: every line of Tiny Shakespeare and of WikiText-2's validation and
    test files, shuffled anew for every pass and written until the size is reached."""
    files = [shared_data / "tinyshakespeare" / "input.txt", shared_data / "wikitext2-heldout" / "valid.txt",
             shared_data / "wikitext2-heldout" / "test.txt"]
    lines = [line for f in files for line in f.read_text(encoding="utf-8").splitlines(keepends=True) if line.strip()]
    rng = np.random.default_rng(seed)
    target, written = int(megabytes * 2**20), 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            text = "".join(lines[i] for i in rng.permutation(len(lines)))[: target - written]
            f.write(text)
            written += len(text.encode("utf-8"))


def _train_lm_first_step(job: dict, queue: mp.Queue) -> None:
    """``train_lm`` (token files, a tiny Transformer LM, one update) in a fresh process: puts the seconds from the
    call to the end of the first update, the peak RSS of the process and that peak above the RSS after imports."""
    from hf_seqmodels.training.lm import cli
    from hf_seqmodels.training.lm.trainer import LMTrainingLoop

    first_step: list[float] = []
    train_step = LMTrainingLoop.train_step

    def timed_step(self, batches):
        loss = train_step(self, batches)
        if not first_step:
            first_step.append(time.perf_counter())
        return loss

    LMTrainingLoop.train_step = timed_step
    start_rss, start = _rss_mb(), time.perf_counter()
    cli.main(["--train_file", job["corpus"], "--tokenizer_name", job["tokenizer"], "--cache_dir", job["cache_dir"],
              "--output_dir", job["output_dir"], "--model_family", "transformer_lm", "--preset", "tiny",
              "--block_size", "64", "--per_device_train_batch_size", "8", "--max_steps", "1", "--do_train",
              "--eval_strategy", "no", "--save_strategy", "no", "--disable_tqdm", "--plot", "False"])
    queue.put({"seconds": first_step[0] - start, "peak_mb": _peak_rss_mb(), "above_start_mb": _peak_rss_mb() - start_rss})


def _run_clm_prepare(job: dict, queue: mp.Queue) -> None:
    """transformers' ``run_clm.py`` data path in a fresh process: ``load_dataset("text")`` (one example per line,
    line breaks kept), ``map`` of the tokenizer and ``map`` of ``group_texts`` into ``block_size`` blocks, both with
    Arrow cache files in ``cache_dir`` (a second call reads them back). Puts seconds, peak RSS, blocks."""
    import datasets
    from transformers import AutoTokenizer

    datasets.disable_progress_bars()
    tokenizer = AutoTokenizer.from_pretrained(job["tokenizer"])
    block_size = job["block_size"]
    start_rss, start = _rss_mb(), time.perf_counter()
    raw = datasets.load_dataset("text", data_files={"train": job["corpus"]}, cache_dir=job["cache_dir"],
                                keep_linebreaks=True)

    def tokenize_function(examples):
        return tokenizer(examples["text"])

    def group_texts(examples):
        concatenated = {k: list(itertools.chain.from_iterable(examples[k])) for k in examples}
        total = len(concatenated["input_ids"]) // block_size * block_size
        result = {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    tokenized = raw.map(tokenize_function, batched=True, remove_columns=["text"], desc="Running tokenizer")
    blocks = tokenized.map(group_texts, batched=True, desc=f"Grouping texts in chunks of {block_size}")
    seconds = time.perf_counter() - start
    queue.put({"seconds": seconds, "peak_mb": _peak_rss_mb(), "above_start_mb": _peak_rss_mb() - start_rss,
               "blocks": len(blocks["train"])})


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
    """The language model's data path at ``--megabytes`` MB of real text: ``train_lm`` to its first update, cold and
    from the cache, against transformers' ``run_clm.py`` datasets path, cold and from its cache; the token files'
    ids checked against the in-RAM tokenisation (up to ``--in_ram_max_mb``) or counted."""
    corpus = folder / "corpus.txt"
    start = time.perf_counter()
    write_lm_corpus(corpus, args.megabytes, Path(args.shared_data), args.seed)
    train_tokenizer(corpus, folder / "tokenizer")
    megabytes = corpus.stat().st_size / 2**20
    print(f"{megabytes:.1f} MB of text (shuffled Tiny Shakespeare and WikiText-2 lines) and a BPE tokenizer in "
          f"{time.perf_counter() - start:.1f} s")
    job = {"corpus": str(corpus), "tokenizer": str(folder / "tokenizer"), "cache_dir": str(folder / "cache")}
    clm = {**job, "cache_dir": str(folder / "datasets_cache"), "block_size": 64}
    runs = {"train_lm": in_fresh_process(_train_lm_first_step, {**job, "output_dir": str(folder / "run1")}),
            "train_lm again": in_fresh_process(_train_lm_first_step, {**job, "output_dir": str(folder / "run2")}),
            "run_clm": in_fresh_process(_run_clm_prepare, clm),
            "run_clm again": in_fresh_process(_run_clm_prepare, clm)}
    ours = in_fresh_process(_prepare, {**job, "kind": "token files"})  # the cached files: their ids
    if megabytes <= args.in_ram_max_mb:
        reference = in_fresh_process(_prepare, {**job, "kind": "in RAM"})
        if (ours["tokens"], ours["digests"]) != (reference["tokens"], reference["digests"]):
            raise SystemExit("the token files' ids differ from the in-RAM tokenisation")
        print(f"in RAM (the scripts' previous path, reference): {reference['seconds']:.1f} s, peak "
              f"{reference['peak_mb']:.0f} MB above start; the token files' ids are equal")
    size = sum(p.stat().st_size for p in (folder / "cache").rglob("*.bin"))
    print(f"{sum(ours['tokens']):,} tokens; token files {size / 2**20:.1f} MB")
    print(f"{'run':<16}{'s to 1st step':>15}{'peak RSS MB':>13}{'above imports':>15}")
    for name, result in runs.items():
        print(f"{name:<16}{result['seconds']:>15.2f}{result['peak_mb']:>13.0f}{result['above_start_mb']:>15.0f}")
    ratio = runs["train_lm"]["seconds"] / runs["run_clm"]["seconds"]
    print(f"(run_clm: seconds to its grouped blocks, before any model.) train_lm / run_clm time {ratio:.2f} "
          f"(target <= 1.2: {'PASS' if ratio <= 1.2 else 'MISS'}); train_lm peak RSS "
          f"{runs['train_lm']['peak_mb']:.0f} MB (target <= 1536: "
          f"{'PASS' if runs['train_lm']['peak_mb'] <= 1536 else 'MISS'}); second run "
          f"{runs['train_lm again']['seconds']:.2f} s (target <= 10: "
          f"{'PASS' if runs['train_lm again']['seconds'] <= 10 else 'MISS'})")


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
    parser.add_argument("--shared_data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                        help="folder with tinyshakespeare/ and wikitext2-heldout/ (the LM text is made of their lines)")
    parser.add_argument("--in_ram_max_mb", type=float, default=200.0,
                        help="compare with the in-RAM tokenisation (about 16 bytes of RAM per byte) up to this size")
    parser.add_argument("--tmp_dir", help="folder of the temporary files (default: the system's)")
    parser.add_argument("--skip_data", action="store_true", help="only the causal forward")
    parser.add_argument("--skip_mask", action="store_true", help="only the data path")
    args = parser.parse_args(argv)
    if not args.skip_data:
        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as folder:
            data_preparation(args, Path(folder))
    if not args.skip_mask:
        causal_mask_memory(args)


if __name__ == "__main__":
    main()
