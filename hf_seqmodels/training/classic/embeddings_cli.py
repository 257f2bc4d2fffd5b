"""Command line of ``training/train_embeddings.py`` / ``hf-seqmodels embeddings``: train word2vec,
GloVe or the SVD baseline on text files and write a :class:`~hf_seqmodels.embeddings.WordVectors`
folder (``vectors.safetensors`` + ``vocab.json``) plus ``vectors.txt`` in word2vec's text format.

Example::

    python training/train_embeddings.py --train_file corpus.txt --method word2vec --architecture skipgram \\
        --loss negative_sampling --vector_size 100 --num_train_epochs 5 --output_dir runs/w2v \\
        --analogies_file benchmarks/data/analogies.txt
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ...embeddings.cooccurrence import count_cooccurrences
from ...embeddings.glove import GloVeConfig, GloVeTrainer
from ...embeddings.svd import MATRICES, SVDConfig, train_svd
from ...embeddings.vocabulary import SUBSAMPLING_FORMULAS, TOKENIZERS, Vocabulary
from ...embeddings.word2vec import ARCHITECTURES, LOSSES, Word2VecConfig, Word2VecTrainer
from ..core.cli import check_data_files, configure_logging

logger = logging.getLogger(__name__)

METHODS = ("word2vec", "glove", "svd")
DEFAULT_WINDOW = {"word2vec": 5, "glove": 10, "svd": 5}
DEFAULT_EPOCHS = {"word2vec": 5, "glove": 25, "svd": 0}
TEXT_FILE = "vectors.txt"


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``training/train_embeddings.py`` (``hf-seqmodels embeddings``)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train_file", nargs="+", required=True, help="text file(s), one sentence per line")
    p.add_argument("--method", choices=METHODS, default="word2vec")
    p.add_argument("--output_dir", required=True, help="folder for the vectors (created)")
    p.add_argument("--analogies_file", help="Google-format analogy file: report accuracy (analogies.json)")
    vocab = p.add_argument_group("vocabulary")
    vocab.add_argument("--min_count", type=int, default=5, help="drop words seen fewer times")
    vocab.add_argument("--max_vocab_size", type=int, default=None, help="keep only the most frequent words")
    vocab.add_argument("--tokenizer_kind", choices=TOKENIZERS, default="word",
                       help="word: our word tokenizer's pre-tokenizer (\\w+ | punctuation); whitespace: str.split")
    vocab.add_argument("--no_lowercase", dest="lowercase", action="store_false", help="keep the case of the text")
    common = p.add_argument_group("all methods")
    common.add_argument("--vector_size", type=int, default=100, help="dimensions of the vectors")
    common.add_argument("--window", type=int, default=None,
                        help="context words on each side (default: word2vec 5, glove 10, svd 5)")
    common.add_argument("--num_train_epochs", type=int, default=None, help="passes over the data (default: word2vec 5, glove 25)")
    common.add_argument("--learning_rate", type=float, default=None,
                        help="word2vec: initial SGD rate (0.025 skip-gram, 0.05 CBOW); glove: AdaGrad rate (0.05)")
    common.add_argument("--per_device_train_batch_size", type=int, default=None,
                        help="glove: co-occurrences per update (512); word2vec steps one prediction at a time")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--num_threads", type=int, default=None, help="torch threads (default: torch's)")
    w2v = p.add_argument_group("word2vec")
    w2v.add_argument("--architecture", choices=ARCHITECTURES, default="skipgram")
    w2v.add_argument("--loss", choices=LOSSES, default="negative_sampling")
    w2v.add_argument("--negatives", type=int, default=5, help="noise words per prediction")
    w2v.add_argument("--sample", type=float, default=1e-3, help="subsampling threshold t (0: off)")
    w2v.add_argument("--subsampling_formula", choices=SUBSAMPLING_FORMULAS, default="paper",
                     help="paper: keep sqrt(t/f); word2vec_c (as gensim): keep sqrt(t/f) + t/f")
    glove = p.add_argument_group("glove")
    glove.add_argument("--x_max", type=float, default=10.0)
    glove.add_argument("--alpha", type=float, default=0.75)
    svd = p.add_argument_group("svd")
    svd.add_argument("--svd_matrix", choices=MATRICES, default="ppmi")
    svd.add_argument("--singular_value_power", type=float, default=0.0, help="vectors U_k Sigma_k^p")
    return p


def _optional(**kwargs) -> dict:
    return {k: v for k, v in kwargs.items() if v is not None}


def train(args: argparse.Namespace):
    """Train the vectors ``args`` describe and return them."""
    window = args.window if args.window is not None else DEFAULT_WINDOW[args.method]
    epochs = args.num_train_epochs if args.num_train_epochs is not None else DEFAULT_EPOCHS[args.method]
    vocab = Vocabulary.from_files(args.train_file, min_count=args.min_count, max_vocab_size=args.max_vocab_size,
                                  lowercase=args.lowercase, tokenizer=args.tokenizer_kind)
    if args.method == "svd":
        config = SVDConfig(vector_size=args.vector_size, window=window, matrix=args.svd_matrix,
                           singular_value_power=args.singular_value_power, seed=args.seed)
        return train_svd(args.train_file, config, vocab=vocab)
    corpus = vocab.encode_files(args.train_file)
    if args.method == "word2vec":
        if args.per_device_train_batch_size is not None:
            raise ValueError(f"--per_device_train_batch_size={args.per_device_train_batch_size} applies to glove only: "
                             "word2vec takes word2vec.c's steps one prediction at a time; leave it out")
        config = Word2VecConfig(architecture=args.architecture, loss=args.loss, vector_size=args.vector_size,
                                window=window, negative=args.negatives, sample=args.sample,
                                subsampling_formula=args.subsampling_formula, epochs=epochs, seed=args.seed,
                                **_optional(learning_rate=args.learning_rate))
        return Word2VecTrainer(vocab, config).train(corpus)
    config = GloVeConfig(vector_size=args.vector_size, window=window, x_max=args.x_max, alpha=args.alpha,
                         epochs=epochs, seed=args.seed,
                         **_optional(learning_rate=args.learning_rate, batch_size=args.per_device_train_batch_size))
    cooccurrences = count_cooccurrences(corpus, len(vocab), window, weighting="harmonic")
    logger.info("GloVe: %d non-zero co-occurrences over %d words.", len(cooccurrences), len(vocab))
    return GloVeTrainer(vocab, config).train(cooccurrences)


def main(argv: Sequence[str] | None = None) -> None:
    """Train word vectors from the command line ``argv`` and write them to ``--output_dir``."""
    args = build_parser().parse_args(argv)
    check_data_files([args])
    configure_logging()
    if args.num_threads is not None:
        torch.set_num_threads(args.num_threads)
    start = time.perf_counter()
    vectors = train(args)
    vectors.metadata["train_seconds"] = round(time.perf_counter() - start, 2)
    vectors.metadata["train_file"] = [str(f) for f in args.train_file]
    output = Path(args.output_dir)
    vectors.save(output)
    vectors.save_word2vec_format(output / TEXT_FILE)
    logger.info("Wrote %d vectors of %d dimensions to %s (and %s) in %.1f s.", len(vectors), vectors.vector_size,
                output, TEXT_FILE, vectors.metadata["train_seconds"])
    if args.analogies_file:
        result = vectors.evaluate_analogies(args.analogies_file)
        summary = {"accuracy": result.accuracy, "correct": result.correct, "answered": result.total,
                   "skipped": result.skipped, "sections": result.sections}
        (output / "analogies.json").write_text(json.dumps(summary, indent=2))
        logger.info("Analogies: %d / %d correct (%.1f%%), %d skipped (unknown words).", result.correct,
                    result.total, 100 * result.accuracy, result.skipped)
