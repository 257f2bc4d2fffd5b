"""Data at corpus scale: token files against in-RAM tokenisation, and the causal attention mask's memory.

1. ``--megabytes`` MB of real English text (the lines of Tiny Shakespeare and WikiText-2's held-out files from
   ``--shared_data``, shuffled and repeated) go through a language model's data path, each run in a fresh process:

   * **train_lm** (ours): ``training/train_lm.py``'s ``main`` with a tiny Transformer LM and one update: the text
     is tokenised once into ``uint16`` token files (:func:`~hf_seqmodels.training.lm.token_streams.lm_token_streams`)
     in a fresh cache folder and memory-mapped; timed to the end of its first update;
   * **train_lm again**: the same command, a second run, which maps the cached token files;
   * **train_lm stream**: the same command with ``--streaming`` (tokenised as it is read; no token files);
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

3. ``--seq2seq_pairs N`` / ``--bert_megabytes M`` (instead of 1 and 2): ``train_seq2seq`` on ``N`` generated
   line-aligned sentence pairs (5–40 made-up words, the target the source reversed and respelled; a tiny
   Transformer, ``--max_tokens_per_batch 4096``) or ``pretrain_bert`` on ``M`` MB of generated documents (4–40
   sentences, blank lines between; tiny BERT, 128 tokens), each with a tokenizer given (BPE / WordPiece of
   8,000 tokens trained on a sample) and one update, in a fresh process: the token files prepared in a fresh
   cache, then the same command again from the cache. Printed: seconds, the preparation's seconds, peak RSS
   (total and above the imports), the private and the file-backed (mapped) RSS at the end, and the seconds
   per million pairs / per MB of text that scale the preparation.

    python -m benchmarks.bench_data_scale --megabytes 100
    python -m benchmarks.bench_data_scale --megabytes 1024 --skip_mask --concurrent   # 1 GB of text
    python -m benchmarks.bench_data_scale --megabytes 5 --seq_len 4096   # quick
    python -m benchmarks.bench_data_scale --seq2seq_pairs 2900000        # WMT-size pairs
    python -m benchmarks.bench_data_scale --bert_megabytes 250
    python -m benchmarks.bench_data_scale --launch_megabytes 100      # 2 CPU processes against 1
    python -m benchmarks.bench_data_scale --glove_megabytes 100 --glove_epochs 1

4. ``--launch_megabytes M`` (instead of 1 and 2): ``train_lm`` on ``M`` MB of the text of 1. under ``accelerate launch``
   on 1 and on 2 CPU processes, each preparing its token files in an empty cache, then 2 processes from the cache:
   the peak of the summed RSS and PSS of every process of the launch, which ranks tokenised, and the ratio of
   2 processes to 1 (:mod:`benchmarks.data_scale_launch`).
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
    from hf_seqmodels.training.lm.token_streams import lm_token_streams

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
    """``train_lm`` (a tiny Transformer LM, one update) in a fresh process, from token files or, with
    ``job["streaming"]``, streamed (validated on ``job["validation"]``): puts the seconds from the call to the end of
    the first update, the peak RSS of the process and that peak above the RSS after imports."""
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
    streamed = ["--streaming", "--validation_file", job["validation"]] if job.get("streaming") else []
    start_rss, start = _rss_mb(), time.perf_counter()
    cli.main(["--train_file", job["corpus"], "--tokenizer_name", job["tokenizer"], "--cache_dir", job["cache_dir"],
              "--output_dir", job["output_dir"], "--model_family", "transformer_lm", "--preset", "tiny",
              "--block_size", "64", "--per_device_train_batch_size", "8", "--max_steps", "1", "--do_train",
              "--eval_strategy", "no", "--save_strategy", "no", "--disable_tqdm", "--plot", "False", *streamed])
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


def in_fresh_processes(calls: dict[str, tuple]) -> dict[str, dict]:
    """``{name: (target, job)}`` each run at the same time in a fresh process: ``{name: result}``."""
    context = mp.get_context("spawn")
    started = {}
    for name, (target, job) in calls.items():
        queue = context.Queue()
        process = context.Process(target=target, args=(job, queue))
        process.start()
        started[name] = (process, queue, target, job)
    results = {}
    while len(results) < len(started):
        for name, (process, queue, target, job) in started.items():
            if name in results:
                continue
            try:
                results[name] = queue.get(timeout=1.0)
                process.join()
            except Exception:  # queue.Empty
                if not process.is_alive():
                    raise SystemExit(f"{target.__name__}({job}) failed with exit code {process.exitcode}") from None
    return results


def data_preparation(args: argparse.Namespace, folder: Path) -> None:
    """The language model's data path at ``--megabytes`` MB of real text: ``train_lm`` to its first update, cold and
    from the cache, against transformers' ``run_clm.py`` datasets path, cold and from its cache; the token files'
    ids checked against the in-RAM tokenisation (up to ``--in_ram_max_mb``) or counted."""
    corpus = folder / "corpus.txt"
    start = time.perf_counter()
    write_lm_corpus(corpus, args.megabytes, Path(args.shared_data), args.seed)
    train_tokenizer(corpus, folder / "tokenizer")
    megabytes = corpus.stat().st_size / 2**20
    validation = folder / "validation.txt"  # the streamed run's validation text: the first 100 lines
    with open(corpus, encoding="utf-8") as f:
        validation.write_text("".join(itertools.islice(f, 100)), encoding="utf-8")
    print(f"{megabytes:.1f} MB of text (shuffled Tiny Shakespeare and WikiText-2 lines) and a BPE tokenizer in "
          f"{time.perf_counter() - start:.1f} s")
    job = {"corpus": str(corpus), "tokenizer": str(folder / "tokenizer"), "cache_dir": str(folder / "cache")}
    clm = {**job, "cache_dir": str(folder / "datasets_cache"), "block_size": 64}
    cold = {"train_lm": (_train_lm_first_step, {**job, "output_dir": str(folder / "run1")}),
            "run_clm": (_run_clm_prepare, clm)}
    if args.concurrent:  # both cold preparations at once: the same load on a shared machine, half the wall time
        runs = in_fresh_processes(cold)
    else:
        runs = {name: in_fresh_process(target, cold_job) for name, (target, cold_job) in cold.items()}
    runs = {"train_lm": runs["train_lm"],
            "train_lm again": in_fresh_process(_train_lm_first_step, {**job, "output_dir": str(folder / "run2")}),
            "train_lm stream": in_fresh_process(_train_lm_first_step, {
                **job, "output_dir": str(folder / "run3"), "streaming": True, "validation": str(validation)}),
            "run_clm": runs["run_clm"],
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


# --------------------------------------------------------------------------- seq2seq pairs and BERT documents


def _words(rng: np.random.Generator, count: int) -> list[str]:
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    return ["".join(rng.choice(letters, size=rng.integers(2, 10))) for _ in range(count)]


def _sentences(rng: np.random.Generator, words: list[str], count: int, low: int, high: int) -> list[list[str]]:
    """``count`` sentences of ``low``..``high`` Zipf-distributed words."""
    weights = 1.0 / np.arange(1, len(words) + 1)
    lengths = rng.integers(low, high + 1, size=count)
    picks = rng.choice(len(words), size=int(lengths.sum()), p=weights / weights.sum()).tolist()
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    return [[words[i] for i in picks[bounds[k] : bounds[k + 1]]] for k in range(count)]


def write_parallel_corpus(folder: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """``pairs`` line-aligned sentence pairs (``train.src``/``train.tgt``), WMT's layout: sources of 5–40
    made-up words, each target the source reversed with every word respelled (another vocabulary)."""
    rng = np.random.default_rng(seed)
    words = _words(rng, 20_000)
    respelled = {w: w[::-1] + "n" for w in words}
    paths = folder / "train.src", folder / "train.tgt"
    with open(paths[0], "w", encoding="utf-8") as src, open(paths[1], "w", encoding="utf-8") as tgt:
        for start in range(0, pairs, 100_000):
            block = _sentences(rng, words, min(100_000, pairs - start), 5, 40)
            src.write("".join(" ".join(s) + " .\n" for s in block))
            tgt.write("".join(" ".join(respelled[w] for w in reversed(s)) + " .\n" for s in block))
    return paths


def write_documents(path: Path, megabytes: float, seed: int = 0) -> None:
    """``megabytes`` MB of documents (4–40 sentences of 5–30 made-up words, one per line) separated by blank
    lines: the layout ``pretrain_bert`` cuts into documents and sentences."""
    rng = np.random.default_rng(seed)
    words = _words(rng, 20_000)
    target, written = int(megabytes * 2**20), 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            sentences = iter(_sentences(rng, words, 50_000, 5, 30))
            sizes = rng.integers(4, 41, size=5_000).tolist()
            documents = ["".join(" ".join(s).capitalize() + ".\n" for s in itertools.islice(sentences, n))
                         for n in sizes]
            text = "\n".join(d for d in documents if d) + "\n"
            f.write(text[: target - written])
            written += min(len(text), target - written)


def _train_bench_tokenizer(sample: list[str], folder: Path, bert: bool) -> None:
    from hf_seqmodels.tokenization import train_tokenizer

    sample_file = folder / "tokenizer_sample.txt"
    sample_file.write_text("".join(sample), encoding="utf-8")
    kind = "wordpiece" if bert else "bpe"
    train_tokenizer([str(sample_file)], kind=kind, vocab_size=8000, add_bert_special_tokens=bert).save_pretrained(
        folder / "tokenizer")
    sample_file.unlink()


def _rss_split_mb() -> dict[str, float]:
    """The current RSS split into private (anonymous) and file-backed pages (memory maps, code)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in ("RssAnon", "RssFile")}


def _timed(module, name: str, seconds: dict) -> None:
    """Replace ``module.name`` by a wrapper that adds its run time to ``seconds[name]``."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

    setattr(module, name, wrapper)


def _training_run(job: dict, queue: mp.Queue) -> None:
    """One ``train_seq2seq``/``pretrain_bert`` command (tokenising or reading the cache, then one update) in a
    fresh process: puts seconds, the preparation's seconds, peak RSS (total and above the imports) and sizes."""
    import torch

    torch.set_num_threads(job["threads"])
    if job["task"] == "seq2seq":
        from hf_seqmodels.training.seq2seq import cli
        from hf_seqmodels.training.seq2seq import data as task_data

        timed = ("seq2seq_token_pairs",)
    else:
        from hf_seqmodels.training.bert import cli
        from hf_seqmodels.training.bert import data as task_data

        timed = ("bert_token_documents", "create_pretraining_examples")
    seconds: dict[str, float] = {}
    for name in timed:
        _timed(cli, name, seconds)
    sizes = {}
    batches_class = getattr(task_data, "LengthBatches", None)
    if batches_class is not None:  # the length index: how many global batches
        build = batches_class.__init__

        def counting(self, *args, **kwargs):
            build(self, *args, **kwargs)
            sizes["batches"] = len(self)

        batches_class.__init__ = counting
    start_rss, start = _rss_mb(), time.perf_counter()
    results = cli.main(job["argv"])
    queue.put({"seconds": time.perf_counter() - start, "prepare_seconds": sum(seconds.values()),
               "steps": results.get("steps"), "peak_mb": _peak_rss_mb(), "above_start_mb": _peak_rss_mb() - start_rss,
               **_rss_split_mb(), **sizes})


def _task_argv(args: argparse.Namespace, folder: Path, data: list[str], name: str) -> list[str]:
    common = ["--tokenizer_name", str(folder / "tokenizer"), "--preset", "tiny", "--max_steps", "1",
              "--optim", "adamw_torch", "--save_strategy", "no", "--no_plot", "--disable_tqdm", "--use_cpu",
              "--cache_dir", str(folder / f"cache-{name}"), "--output_dir", str(folder / f"run-{name}"),
              "--overwrite_output_dir"]
    if args.seq2seq_pairs:
        return [*data, "--model_family", "transformer", "--config_overrides", "max_position_embeddings=256",
                "--max_tokens_per_batch", "4096", "--num_beams", "1",
                "--generation_max_length", "8", "--per_device_eval_batch_size", "64", *common]
    return [*data, "--max_seq_length", "128", "--config_overrides", "max_position_embeddings=128",
            "--per_device_train_batch_size", "32",
            "--validation_split_percentage", "0.2", *common]


def corpus_scale_task(args: argparse.Namespace, folder: Path) -> None:
    """``train_seq2seq`` on ``--seq2seq_pairs`` generated pairs or ``pretrain_bert`` on ``--bert_megabytes`` MB of
    generated documents: the command as a user runs it, with a tokenizer given, in a fresh process; then again
    from the cache."""
    start = time.perf_counter()
    if args.seq2seq_pairs:
        task, unit, amount = "seq2seq", "pairs", args.seq2seq_pairs
        source, target = write_parallel_corpus(folder, args.seq2seq_pairs, args.seed)
        with open(source, encoding="utf-8") as s, open(target, encoding="utf-8") as t:
            sample = list(itertools.islice(s, 50_000)) + list(itertools.islice(t, 50_000))
        valid = []
        for path, name in ((source, "valid.src"), (target, "valid.tgt")):  # the first 64 pairs validate
            with open(path, encoding="utf-8") as f:
                (folder / name).write_text("".join(itertools.islice(f, 64)), encoding="utf-8")
        valid = ["--validation_source_file", str(folder / "valid.src"), "--validation_target_file",
                 str(folder / "valid.tgt")]
        data = ["--train_source_file", str(source), "--train_target_file", str(target), *valid]
        text_mb = (source.stat().st_size + target.stat().st_size) / 2**20
    else:
        task, unit, amount = "bert", "MB", args.bert_megabytes
        corpus = folder / "documents.txt"
        write_documents(corpus, args.bert_megabytes, args.seed)
        with open(corpus, encoding="utf-8") as f:
            sample = list(itertools.islice(f, 100_000))
        data = ["--train_file", str(corpus)]
        text_mb = corpus.stat().st_size / 2**20
    _train_bench_tokenizer(sample, folder, bert=task == "bert")
    print(f"{task}: {amount:,} {unit} of generated data ({text_mb:.1f} MB of text) and a tokenizer in "
          f"{time.perf_counter() - start:.1f} s")
    job = {"task": task, "threads": args.threads}
    results = {"prepare + 1 step": in_fresh_process(_training_run, {**job, "argv": _task_argv(args, folder, data, "a")})}
    results["from cache"] = in_fresh_process(_training_run, {**job, "argv": _task_argv(args, folder, data, "a")})
    size = sum(p.stat().st_size for p in (folder / "cache-a").rglob("*.bin"))
    print(f"token files {size / 2**20:.1f} MB ({size / 2**20 / text_mb:.2f} MB per MB of text)")
    print(f"{'run':<18}{'seconds':>9}{'preparing':>11}{'peak MB':>9}{'above imports':>15}{'private MB':>12}"
          f"{'mapped MB':>11}")
    for name, r in results.items():
        print(f"{name:<18}{r['seconds']:>9.1f}{r['prepare_seconds']:>11.1f}{r['peak_mb']:>9.0f}"
              f"{r['above_start_mb']:>15.0f}{r['RssAnon']:>12.0f}{r['RssFile']:>11.0f}")
    first = results["prepare + 1 step"]
    per = amount if task == "seq2seq" else text_mb
    print(f"rates: {first['prepare_seconds'] / per * (1e6 if task == 'seq2seq' else 1):.2f} s per "
          f"{'million pairs' if task == 'seq2seq' else 'MB of text'} to prepare; peak {first['peak_mb']:.0f} MB "
          f"(target <= 2048: {'PASS' if first['peak_mb'] <= 2048 else 'MISS'})")


def two_process_launch(args: argparse.Namespace, folder: Path) -> None:
    """train_lm's preparation and one update on ``--launch_megabytes`` MB of real text under ``accelerate launch``
    with 2 CPU processes against 1 (:mod:`benchmarks.data_scale_launch`)."""
    from benchmarks.data_scale_launch import compare_launches

    corpus = folder / "corpus.txt"
    start = time.perf_counter()
    write_lm_corpus(corpus, args.launch_megabytes, Path(args.shared_data), args.seed)
    train_tokenizer(corpus, folder / "tokenizer")
    print(f"{corpus.stat().st_size / 2**20:.1f} MB of text and a tokenizer in {time.perf_counter() - start:.1f} s")
    compare_launches(folder, corpus, folder / "tokenizer")


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
    parser.add_argument("--concurrent", action="store_true",
                        help="run the two cold preparations (train_lm, run_clm) at the same time")
    parser.add_argument("--tmp_dir", help="folder of the temporary files (default: the system's)")
    parser.add_argument("--skip_data", action="store_true", help="only the causal forward")
    parser.add_argument("--skip_mask", action="store_true", help="only the data path")
    parser.add_argument("--seq2seq_pairs", type=int, help="only train_seq2seq on N generated sentence pairs")
    parser.add_argument("--bert_megabytes", type=float, help="only pretrain_bert on MB of generated documents")
    parser.add_argument("--launch_megabytes", type=float,
                        help="only train_lm under accelerate launch, 2 CPU processes against 1, on MB of text")
    parser.add_argument("--glove_megabytes", type=float,
                        help="only GloVe (vocabulary, co-occurrence counts, --glove_epochs of training) on MB of text")
    parser.add_argument("--glove_epochs", type=int, default=1, help="GloVe epochs of --glove_megabytes (0: count only)")
    args = parser.parse_args(argv)
    if args.glove_megabytes:
        from benchmarks.data_scale_glove import glove_at_scale

        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as folder:
            corpus = Path(folder) / "corpus.txt"
            write_lm_corpus(corpus, args.glove_megabytes, Path(args.shared_data), args.seed)
            glove_at_scale(corpus, corpus.stat().st_size / 2**20, args.glove_epochs, args.threads)
        return
    if args.launch_megabytes:
        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as folder:
            two_process_launch(args, Path(folder))
        return
    if args.seq2seq_pairs or args.bert_megabytes:
        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as folder:
            corpus_scale_task(args, Path(folder))
        return
    if not args.skip_data:
        with tempfile.TemporaryDirectory(dir=args.tmp_dir) as folder:
            data_preparation(args, Path(folder))
    if not args.skip_mask:
        causal_mask_memory(args)


if __name__ == "__main__":
    main()
