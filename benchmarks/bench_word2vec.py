"""word2vec training speed and analogy accuracy: ours against gensim, same corpus and settings.

Both train on the same tokenised sentences (our vocabulary's tokenizer: lowercased, word
pre-tokenizer), one thread each, with word2vec.c's settings: 100 dimensions, window 5, 5 negatives,
subsampling t = 1e-3 with word2vec.c's formula (gensim's), learning rate 0.025 (skip-gram) or
0.05 (CBOW) decaying linearly to 1e-4 of it, min_count 5. Timed: training only (gensim's
``train()`` after ``build_vocab``; our ``Word2VecTrainer.train`` on the encoded corpus).

Reported per architecture: in-vocabulary words per second of each, the ratio ours / gensim
(informational: gensim's inner loop is hand-written Cython, ours is batched PyTorch), the accuracy
of each on the analogy file (evaluated by the same code, ``WordVectors.evaluate_analogies``), and
the mean overlap of the 10 nearest neighbours of the most frequent words.

The default corpus is WikiText-2's validation + test text (``../shared/data/wikitext2-heldout``),
the part of WikiText-2 available here (its training split is not).

    python -m benchmarks.bench_word2vec                       # ~3 min on one idle core
    python -m benchmarks.bench_word2vec --architectures skipgram --epochs 1 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from hf_seqmodels.embeddings import Vocabulary, Word2VecConfig, Word2VecTrainer, WordVectors

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wikitext2-heldout"
DEFAULT_FILES = [str(DATA / "valid.txt"), str(DATA / "test.txt")]
DEFAULT_ANALOGIES = str(Path(__file__).resolve().parent / "data" / "analogies.txt")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train_file", nargs="+", default=DEFAULT_FILES)
    p.add_argument("--analogies_file", default=DEFAULT_ANALOGIES)
    p.add_argument("--architectures", nargs="+", default=["skipgram", "cbow"], choices=["skipgram", "cbow"])
    p.add_argument("--vector_size", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negatives", type=int, default=5)
    p.add_argument("--min_count", type=int, default=5)
    p.add_argument("--epochs", type=int, default=5)
    add_common_args(p, repeats=1, warmup=0)
    p.set_defaults(threads=1)
    return p.parse_args()


def neighbour_overlap(a: WordVectors, b: WordVectors, words: list[str], topn: int = 10) -> float:
    """Mean fraction of shared words among the ``topn`` nearest neighbours of ``words``."""
    shared = [len({w for w, _ in a.most_similar(x, topn)} & {w for w, _ in b.most_similar(x, topn)}) / topn
              for x in words]
    return statistics.mean(shared)


def main() -> None:
    from gensim.models import Word2Vec  # the `bench` extra: pip install -e ".[bench]"

    args = parse_args()
    setup(args)
    vocab = Vocabulary.from_files(args.train_file, min_count=args.min_count)
    sentences = [vocab.tokenize(line) for f in args.train_file for line in open(f, encoding="utf-8") if line.strip()]
    corpus = vocab.encode_files(args.train_file)
    words = len(corpus.ids) * args.epochs
    print(f"corpus: {corpus.raw_words} words, {len(corpus.ids)} in the vocabulary of {len(vocab)}; "
          f"{args.epochs} epochs; torch threads {torch.get_num_threads()}, gensim workers 1")
    rows, results = [], {}
    for architecture in args.architectures:
        config = Word2VecConfig(architecture=architecture, loss="negative_sampling", vector_size=args.vector_size,
                                window=args.window, negative=args.negatives, sample=1e-3,
                                subsampling_formula="word2vec_c", epochs=args.epochs,
                                seed=args.seed)
        trained: dict[str, WordVectors] = {}

        def ours(config=config, trained=trained):
            trained["ours"] = Word2VecTrainer(vocab, config).train(corpus, progress=False)

        def reference(config=config, trained=trained, seed=args.seed, name="gensim"):
            model = Word2Vec(vector_size=config.vector_size, window=config.window, min_count=args.min_count,
                             sg=int(config.architecture == "skipgram"), hs=0, negative=config.negative,
                             sample=config.sample, alpha=config.learning_rate,
                             min_alpha=config.learning_rate * config.min_learning_rate_ratio, workers=1,
                             seed=seed)
            model.build_vocab(sentences)
            model.train(sentences, total_examples=len(sentences), epochs=config.epochs)
            trained[name] = WordVectors(list(model.wv.index_to_key), model.wv.vectors)

        times = interleaved_timings({"ours": ours, "gensim": reference}, repeats=args.repeats, warmup=args.warmup)
        ratio = paired_ratio(times["gensim"], times["ours"])  # (words/s ours) / (words/s gensim)
        acc = {name: trained[name].evaluate_analogies(args.analogies_file) for name in trained}
        reference(seed=args.seed + 1, name="gensim_other_seed")  # how much gensim agrees with itself
        frequent = [w for w in vocab.words[:300] if w in trained["gensim"]][:200]
        overlap = neighbour_overlap(trained["ours"], trained["gensim"], frequent)
        self_overlap = neighbour_overlap(trained["gensim_other_seed"], trained["gensim"], frequent)
        for name in ("ours", "gensim"):
            rows.append([architecture, name, words / statistics.median(times[name]), acc[name].accuracy,
                         f"{acc[name].correct}/{acc[name].total}"])
        results[architecture] = {
            "words_per_second": {n: words / statistics.median(t) for n, t in times.items()},
            "seconds_per_round": times,
            "speed": report_ratio(f"{architecture} negative sampling: words/s ours / gensim", ratio),
            "analogy_accuracy": {n: a.accuracy for n, a in acc.items()},
            "analogies_answered": {n: a.total for n, a in acc.items()},
            "top10_neighbour_overlap": {"ours_vs_gensim": overlap, "gensim_vs_gensim_other_seed": self_overlap},
        }
        print(f"{architecture}: top-10 neighbours shared with gensim, mean over {len(frequent)} frequent words: "
              f"ours {overlap:.2f}, gensim with another seed {self_overlap:.2f}")
    print_table(["architecture", "trainer", "words/s", "analogy acc", "correct"], rows)
    write_json(args.json, {"settings": vars(args), "results": results})


if __name__ == "__main__":
    main()
