"""Word embeddings beside gensim: speed, peak memory and quality of word2vec, GloVe and PPMI-SVD.

Corpus: WikiText-2 valid + test and Tiny Shakespeare (``../shared/data``), lowercased by our
vocabulary's tokenizer; gensim trains on the same tokenised sentences. word2vec settings are
word2vec.c's and the same for both: 100 dimensions, window 5, min_count 5, 5 noise words, subsampling
1e-3 with word2vec.c's formula, 5 epochs, learning rate 0.025 (skip-gram) / 0.05 (CBOW) decaying to 1e-4
of it, ``--threads`` threads each (gensim's ``workers``, torch's threads for our GloVe and SVD; our word2vec
runs ``--workers`` Hogwild threads, each running torch single-threaded).

Every training runs in its own process, so that its peak memory can be read: "peak MB" is the highest
resident set size sampled every 20 ms from the allocation of the weights to the end of training, minus the
resident size just before (the import and the corpus excluded; gensim's window starts at ``build_vocab``).
Before word2vec's window, each library trains the same variant once on 2,000 words with 8 dimensions: the
first use of its kernels (torch maps about 25 MB of code and buffers) is a one-time cost, like the import. Speed is in-vocabulary words per second of training time, and per CPU second of the
process (steadier than wall time on a shared machine, and a fair ratio at one thread). Quality:
Spearman correlation on WordSim353 and analogies answered correctly (of the questions whose four words
are known), both from the files of gensim's test data, evaluated by the same code
(:meth:`WordVectors.evaluate_word_pairs`, :meth:`WordVectors.evaluate_analogies`) for both libraries.
GloVe also trains on the corpus repeated ``--glove_repeat`` times: its quality should not drop with more
text (min_count grows with the repeats, so the vocabulary stays the same). Without gensim (the ``bench`` extra), only our trainers run and the benchmark says so.

    python -m benchmarks.bench_embeddings --threads 2 --seeds 0 1
    python -m benchmarks.bench_embeddings --only word2vec --variants skipgram:hierarchical_softmax
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import multiprocessing as mp
import os
import tempfile
import threading
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEFAULT_FILES = [str(DATA / "wikitext2-heldout" / "valid.txt"), str(DATA / "wikitext2-heldout" / "test.txt"),
                 str(DATA / "tinyshakespeare" / "input.txt")]
VARIANTS = ["skipgram:negative_sampling", "cbow:negative_sampling", "skipgram:hierarchical_softmax",
            "cbow:hierarchical_softmax"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train_file", nargs="+", default=DEFAULT_FILES)
    p.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    p.add_argument("--only", nargs="+", default=["word2vec", "glove", "svd"], choices=["word2vec", "glove", "svd"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--threads", type=int, default=2, help="threads of each library (ours: word2vec worker "
                   "threads; GloVe and SVD: torch's threads)")
    p.add_argument("--workers", type=int, default=1, help="our word2vec's worker threads (Hogwild; each runs torch "
                   "single-threaded). 1 by default: on the shared 2-core machine a second Python thread cost more "
                   "CPU per word than it saved")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--glove_epochs", type=int, default=25)
    p.add_argument("--glove_repeat", type=int, default=10, help="GloVe also trains on the corpus repeated this often")
    p.add_argument("--json", default=None, help="also write the results here")
    return p.parse_args()


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakMemory:
    """Highest resident set size above the one at entry, sampled every 20 ms in a thread (MB)."""

    def __enter__(self) -> PeakMemory:
        self.start, self.peak, self._stop = _rss_mb(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss_mb() - self.start)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb() - self.start)


def _gensim_test_file(name: str) -> str:
    import gensim

    return str(Path(gensim.__file__).parent / "test" / "test_data" / name)


def _run(job: dict, queue: mp.Queue) -> None:
    """One training in a fresh process: puts words/s, peak MB and quality on ``queue``."""
    import torch

    from hf_seqmodels.embeddings import (
        GloVeConfig,
        GloVeTrainer,
        SVDConfig,
        Vocabulary,
        Word2VecConfig,
        Word2VecTrainer,
        WordVectors,
        count_cooccurrences,
    )
    from hf_seqmodels.embeddings.svd import ppmi, svd_vectors

    torch.set_num_threads(job["threads"])
    files = job["files"]
    vocab = Vocabulary.from_files(files, min_count=5 * job.get("repeat", 1))  # the same words at every repeat
    corpus = vocab.encode_files(files)
    arch, loss = job.get("variant", "skipgram:negative_sampling").split(":")
    config = Word2VecConfig(architecture=arch, loss=loss, sample=1e-3, subsampling_formula="word2vec_c",
                            epochs=job["epochs"], seed=job["seed"], workers=job["workers"])
    if job["method"] == "word2vec":
        _warm_up(job, vocab, corpus, config)
    if job["library"] == "gensim":
        from gensim.models import Word2Vec

        sentences = [vocab.tokenize(line) for f in files for line in open(f, encoding="utf-8") if line.strip()]
        model = Word2Vec(vector_size=100, window=5, min_count=5, sg=int(arch == "skipgram"),
                         hs=int(loss == "hierarchical_softmax"), negative=5 if loss == "negative_sampling" else 0,
                         sample=1e-3, alpha=config.learning_rate,
                         min_alpha=config.learning_rate * config.min_learning_rate_ratio, workers=job["threads"],
                         seed=job["seed"])
        with PeakMemory() as memory:  # from build_vocab, which allocates the weights (ours: the trainer does)
            model.build_vocab(sentences)
            start, cpu_start = time.perf_counter(), time.process_time()
            model.train(sentences, total_examples=len(sentences), epochs=job["epochs"])
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        vectors = WordVectors(list(model.wv.index_to_key), torch.from_numpy(model.wv.vectors))
    else:
        with PeakMemory() as memory:
            start, cpu_start = time.perf_counter(), time.process_time()
            if job["method"] == "word2vec":
                vectors = Word2VecTrainer(vocab, config).train(corpus, progress=False)
            elif job["method"] == "glove":
                glove = GloVeConfig(epochs=job["glove_epochs"], seed=job["seed"])
                matrix = count_cooccurrences(corpus, len(vocab), glove.window)
                count_seconds = time.perf_counter() - start
                vectors = GloVeTrainer(vocab, glove).train(matrix, progress=False)
            else:
                svd = SVDConfig(seed=job["seed"])
                matrix = ppmi(count_cooccurrences(corpus, len(vocab), svd.window, weighting="uniform"))
                vectors = WordVectors(vocab.words, svd_vectors(matrix, svd))
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    result = {"words_per_second": len(corpus.ids) * job["epochs"] / seconds, "seconds": seconds,
              "words_per_cpu_second": len(corpus.ids) * job["epochs"] / cpu_seconds,
              "peak_mb": memory.peak, "tokens": len(corpus.ids), "wordsim353": float("nan"),
              "analogies_correct": 0, "analogies_answered": 0}
    if job["method"] == "glove":
        result.update(count_seconds=count_seconds, nonzero_entries=len(matrix))
    if job["has_gensim"]:
        analogies = vectors.evaluate_analogies(_gensim_test_file("questions-words.txt"))
        result.update(wordsim353=vectors.evaluate_word_pairs(_gensim_test_file("wordsim353.tsv")).spearman,
                      analogies_correct=analogies.correct, analogies_answered=analogies.total)
    queue.put(result)


def _warm_up(job: dict, vocab, corpus, config) -> None:
    """Train the job's library and variant once on the first 2,000 words with 8 dimensions, before the
    memory is measured: the first use of a library's kernels maps their code and per-thread buffers (about
    25 MB for torch's), a one-time cost like the import's; its sizes are too small to leave the real run's
    buffers cached."""
    import numpy as np

    from hf_seqmodels.embeddings import EncodedCorpus, Word2VecTrainer

    if job["library"] == "gensim":
        from gensim.models import Word2Vec

        words = [vocab.words[i] for i in corpus.ids[:2000]]
        Word2Vec([words[k:k + 20] for k in range(0, len(words), 20)], vector_size=8, window=5, min_count=1,
                 sg=int(config.architecture == "skipgram"), hs=int(config.loss == "hierarchical_softmax"),
                 negative=config.negative if config.loss == "negative_sampling" else 0, workers=job["threads"])
    else:
        small = EncodedCorpus(ids=corpus.ids[:2000], offsets=np.append(corpus.offsets[corpus.offsets < 2000], 2000),
                              raw_words=2000)
        Word2VecTrainer(vocab, dataclasses.replace(config, vector_size=8, epochs=1,
                                                   chunk_words=256)).train(small, progress=False)


def run(job: dict) -> dict:
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_run, args=(job, queue))
    process.start()
    while True:
        try:
            result = queue.get(timeout=5)
            break
        except Exception as error:  # queue.Empty: still training, unless the process died
            if not process.is_alive():
                raise RuntimeError(f"The {job['method']} run {job} failed (exit code {process.exitcode}).") from error
    process.join()
    return result


def repeated_corpus(files: list[str], times: int, folder: str) -> list[str]:
    path = Path(folder) / f"corpus_x{times}.txt"
    text = "".join(Path(f).read_text(encoding="utf-8") for f in files)
    path.write_text(text * times, encoding="utf-8")
    return [str(path)]


def main() -> None:
    args = parse_args()
    has_gensim = importlib.util.find_spec("gensim") is not None
    if not has_gensim:
        print("gensim is not installed (pip install -e '.[bench]'): skipping gensim; only our trainers run, and "
              "quality is not evaluated (the word-pair and analogy files come with gensim's test data).")
    base = {"files": args.train_file, "threads": args.threads, "workers": args.workers, "epochs": args.epochs,
            "glove_epochs": args.glove_epochs, "has_gensim": has_gensim}
    results: dict[str, list] = {}
    print(f"threads {args.threads} each (our word2vec: {args.workers} worker threads); seeds {args.seeds}; "
          f"{args.epochs} word2vec epochs")
    header = f"{'model':40s} {'words/s':>10s} {'words/cpu-s':>11s} {'peak MB':>8s} {'WS353':>6s} {'analogies':>10s}"
    print(header)

    def show(name: str, r: dict) -> None:
        print(f"{name:40s} {r['words_per_second']:10,.0f} {r['words_per_cpu_second']:11,.0f} {r['peak_mb']:8.0f} {r['wordsim353']:6.3f} "
              f"{r['analogies_correct']:5d}/{r['analogies_answered']}", flush=True)

    if "word2vec" in args.only:
        for variant in args.variants:
            for seed in args.seeds:
                for library in ("ours", "gensim") if has_gensim else ("ours",):
                    r = run({**base, "method": "word2vec", "library": library, "variant": variant, "seed": seed})
                    results.setdefault(f"{variant} {library}", []).append(r)
                    show(f"{variant} {library} seed {seed}", r)
            ours, theirs = results[f"{variant} ours"], results.get(f"{variant} gensim")
            if not theirs:
                continue
            for key in ("words_per_second", "words_per_cpu_second"):
                ratio = sum(r[key] for r in ours) / sum(r[key] for r in theirs)
                print(f"{variant}: {key.replace('_', ' ')}, ours / gensim {ratio:.2f}")
    if "svd" in args.only:
        r = run({**base, "method": "svd", "library": "ours", "seed": 0})
        results["svd"] = [r]
        show("ppmi-svd", r)
    if "glove" in args.only:
        with tempfile.TemporaryDirectory() as folder:
            for times, files in ((1, args.train_file), (args.glove_repeat,
                                                        repeated_corpus(args.train_file, args.glove_repeat, folder))):
                r = run({**base, "files": files, "method": "glove", "library": "ours", "seed": 0, "repeat": times})
                results[f"glove x{times}"] = [r]
                show(f"glove, corpus x{times}", r)
                print(f"  {r['tokens']:,} tokens, {r['nonzero_entries']:,} co-occurrences: {r['seconds']:.0f} s "
                      f"({r['count_seconds']:.0f} s counting, {args.glove_epochs} epochs)", flush=True)
        skipgram = results.get("skipgram:negative_sampling ours")
        if has_gensim and skipgram:
            gap = sum(r["wordsim353"] for r in skipgram) / len(skipgram) - results[f"glove x{args.glove_repeat}"][0][
                "wordsim353"]
            print(f"WordSim353, our skip-gram NS minus GloVe x{args.glove_repeat}: {gap:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    main()
