"""``bench_data_scale --glove_megabytes M``: GloVe's counting and a short training on ``M`` MB of text, peak RSS.

In a fresh process, the steps of ``training/train_embeddings.py --method glove``
(:func:`hf_seqmodels.training.classic.embeddings_cli.train`) one after the other: the vocabulary
(``Vocabulary.from_files``, ``min_count`` 5), the corpus as word ids (``encode_files``), the co-occurrence counts
(``count_cooccurrences``: window 10, 1/distance, counted in chunks with sorted runs spilled to disk) and
``--glove_epochs`` epochs of GloVe (``GloVeTrainer``, 100 dimensions, batches of 512), or no training with
``--glove_count_only``. After each step: its seconds, the RSS and the process's peak RSS so far (``ru_maxrss``:
Python, torch and numpy included), so the step that sets the peak shows. Printed with the tokens, the vocabulary, the
non-zero co-occurrences and the bytes of peak RSS per token and per non-zero entry.

The text is :func:`benchmarks.bench_data_scale.write_lm_corpus`'s: the lines of Tiny Shakespeare and WikiText-2's
held-out files repeated in a new order per pass. Repeated lines repeat their word pairs, so the number of non-zero
co-occurrences stops growing after the first pass (about 3 MB of distinct text); 100 MB of distinct text (text8,
say) has many more. The per-entry figure printed scales the peak to such a corpus.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def glove_steps(job: dict, queue: mp.Queue) -> None:
    """The GloVe command's steps on ``job["corpus"]`` in this (fresh) process; puts one record per step and sizes."""
    import torch

    from hf_seqmodels.embeddings.cooccurrence import count_cooccurrences
    from hf_seqmodels.embeddings.glove import GloVeConfig, GloVeTrainer
    from hf_seqmodels.embeddings.vocabulary import Vocabulary

    torch.set_num_threads(job["threads"])
    steps: list[dict] = [{"step": "imports", "seconds": 0.0, "rss_mb": _rss_mb(), "peak_mb": _peak_rss_mb()}]
    sizes: dict = {}

    def step(name: str, call):
        start = time.perf_counter()
        result = call()
        steps.append({"step": name, "seconds": time.perf_counter() - start, "rss_mb": _rss_mb(),
                      "peak_mb": _peak_rss_mb()})
        return result

    vocab = step("vocabulary", lambda: Vocabulary.from_files(job["corpus"], min_count=5))
    corpus = step("word ids", lambda: vocab.encode_files(job["corpus"]))
    sizes.update(vocabulary=len(vocab), tokens=len(corpus.ids))
    counts = step("co-occurrences", lambda: count_cooccurrences(corpus, len(vocab), 10, weighting="harmonic"))
    sizes["entries"] = len(counts)
    if job["epochs"]:
        config = GloVeConfig(vector_size=100, window=10, epochs=job["epochs"])
        del corpus  # the command keeps it no longer than the counting needs it
        step(f"GloVe, {job['epochs']} epoch(s)", lambda: GloVeTrainer(vocab, config).train(counts, progress=False))
    queue.put({"steps": steps, **sizes})


def glove_at_scale(corpus, megabytes: float, epochs: int, threads: int) -> None:
    """Run :func:`glove_steps` in a fresh process and print its table and the per-token / per-entry rates."""
    from benchmarks.bench_data_scale import in_fresh_process

    result = in_fresh_process(glove_steps, {"corpus": str(corpus), "epochs": epochs, "threads": threads})
    print(f"GloVe on {megabytes:.1f} MB of text: {result['tokens']:,} tokens, {result['vocabulary']:,} words "
          f"(min_count 5), {result['entries']:,} non-zero co-occurrences (window 10)")
    print(f"{'step':<22}{'seconds':>9}{'RSS MB':>9}{'peak MB so far':>16}")
    for row in result["steps"]:
        print(f"{row['step']:<22}{row['seconds']:>9.1f}{row['rss_mb']:>9.0f}{row['peak_mb']:>16.0f}")
    peak = result["steps"][-1]["peak_mb"]
    imports = result["steps"][0]["rss_mb"]
    print(f"peak RSS {peak:.0f} MB (target <= 2048: {'PASS' if peak <= 2048 else 'MISS'}); above the imports "
          f"{(peak - imports) * 2**20 / result['tokens']:.1f} bytes per token, "
          f"{(peak - imports) * 2**20 / max(result['entries'], 1):.1f} bytes per non-zero entry")
