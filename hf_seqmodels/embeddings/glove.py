"""GloVe (Pennington et al. 2014; course notes 001 §11): global vectors from co-occurrence counts.

With :math:`X_{ij}` the co-occurrences of words :math:`i, j` in a symmetric window weighted by
:math:`1/\\text{distance}` (:mod:`.cooccurrence`), word vectors :math:`w_i`, context vectors
:math:`\\tilde w_j` and biases :math:`b_i, \\tilde b_j` minimise the weighted least squares

.. math::  J = \\sum_{i,j:\\,X_{ij} > 0} f(X_{ij})\\,\\big(w_i^\\top \\tilde w_j + b_i + \\tilde b_j - \\log X_{ij}\\big)^2,
           \\qquad f(x) = \\min\\big(1, (x / x_{\\max})^{\\alpha}\\big)

(:math:`x_{\\max} = 10` by default, the paper's 100 in the ``pennington2014`` preset; :math:`\\alpha = 3/4`).
Training is AdaGrad over the non-zero entries in
shuffled mini-batches with glove.c's per-entry update: for an entry with ``diff`` :math:`= w_i^\\top \\tilde w_j
+ b_i + \\tilde b_j - \\log X_{ij}`, each of its parameters :math:`\\theta` has the scaled gradient
:math:`u = \\eta\\, f(X_{ij})\\,\\text{diff}\\,\\partial_\\theta(\\ldots)` (:math:`\\eta` the learning rate, the
gradient of :math:`\\tfrac12 J`) and moves by :math:`-u / \\sqrt{G}`, then :math:`G \\mathrel{+}= u^2`, :math:`G`
started at 1. :math:`G` sums the squares of :math:`\\eta g`, not of :math:`g` (glove.c): the step is
:math:`g / \\sqrt{1/\\eta^2 + \\sum g^2}`, so the learning rate starts at :math:`\\eta` and tends to AdaGrad's
with rate 1. Accumulating :math:`g^2` instead (this trainer's earlier rule) makes the step
:math:`\\eta g / \\sqrt{1 + \\sum g^2}`, up to :math:`1/\\eta = 20` times smaller: on the benchmark's corpus repeated
10 times it reached WordSim353 0.13 against 0.17 with glove.c's rule (``benchmarks/bench_embeddings.py``).
In a mini-batch every entry takes its own step
with the parameters and accumulators of the batch's start (entries of the same row add up, as glove.c's
threads do without locks). The vectors we keep are :math:`w_i + \\tilde w_i`, as in the paper.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from tqdm.auto import tqdm

from ..models.config_utils import PresetMixin, invalid
from .cooccurrence import CooccurrenceMatrix, count_cooccurrences
from .keyed_vectors import WordVectors
from .vocabulary import Vocabulary

logger = logging.getLogger(__name__)


@dataclass
class GloVeConfig(PresetMixin):
    """Settings of a GloVe run: the paper's window 10 weighted 1/distance, α 0.75, AdaGrad from η 0.05, vectors
    w + w̃, with glove.c's (and its demo's) ``x_max=10`` instead of the paper's 100.

    ``x_max`` 10 serves small and larger corpora alike: on the benchmark's 750k words few counts come near 100,
    so f keeps most entries' weight tiny (WordSim353 0.08 with 100 against 0.16 with 10); on the same text
    repeated 10 times, 10 scores 0.18 and 100 0.17 (``benchmarks/bench_embeddings.py``, model card).
    ``GloVeConfig.from_preset(name, **overrides)``: ``tiny`` (tests) and ``pennington2014`` (Pennington et
    al. 2014: 300 dimensions, window 10, x_max 100, α 3/4, AdaGrad from 0.05, 100 iterations, for corpora of
    billions of words).
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(vector_size=8, window=3, x_max=10.0, epochs=20, batch_size=16),
        "pennington2014": dict(vector_size=300, window=10, x_max=100.0, alpha=0.75, learning_rate=0.05, epochs=100),
    }

    vector_size: int = 100
    window: int = 10
    x_max: float = 10.0
    alpha: float = 0.75
    learning_rate: float = 0.05
    epochs: int = 25
    batch_size: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vector_size", "window", "epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise invalid(name, value, "an integer >= 1")
        for name in ("x_max", "alpha", "learning_rate"):
            if not getattr(self, name) > 0:
                raise invalid(name, getattr(self, name), "a positive number")


def glove_weight(x: torch.Tensor, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """GloVe's weighting function ``f(x) = (x / x_max)^alpha`` for ``x < x_max``, else 1."""
    return torch.clamp(x / x_max, max=1.0) ** alpha


class GloVeTrainer:
    """Holds GloVe's parameters (and their AdaGrad accumulators) and fits them to a co-occurrence matrix."""

    def __init__(self, vocab: Vocabulary, config: GloVeConfig) -> None:
        self.vocab = vocab
        self.config = config
        self.generator = torch.Generator().manual_seed(config.seed)
        size, dim = len(vocab), config.vector_size

        def uniform(*shape: int) -> torch.Tensor:  # glove.c: (rand - 0.5) / vector_size
            return (torch.rand(*shape, generator=self.generator) - 0.5) / dim

        self.word, self.context = uniform(size, dim), uniform(size, dim)  # w_i, w̃_j
        self.word_bias, self.context_bias = uniform(size), uniform(size)  # b_i, b̃_j
        self.squared = {name: torch.ones_like(p) for name, p in self._parameters().items()}  # AdaGrad G

    def _parameters(self) -> dict[str, torch.Tensor]:
        return {"word": self.word, "context": self.context, "word_bias": self.word_bias,
                "context_bias": self.context_bias}

    def train(self, cooccurrences: CooccurrenceMatrix, progress: bool = True) -> WordVectors:
        """Run ``config.epochs`` epochs of AdaGrad over the non-zero entries of ``cooccurrences``; the vectors ``w + w~``."""
        cfg = self.config
        # the matrix's own arrays, not copied; log X and f(X) are computed per batch, so training adds only the
        # epoch's order (8 bytes per non-zero entry) to the matrix's 16
        rows = torch.from_numpy(cooccurrences.rows)
        cols = torch.from_numpy(cooccurrences.cols)
        counts = torch.from_numpy(cooccurrences.values)
        for epoch in range(cfg.epochs):
            order = torch.randperm(len(counts), generator=self.generator)
            total = 0.0
            batches = range(0, len(order), cfg.batch_size)
            for start in tqdm(batches, desc=f"GloVe epoch {epoch + 1}/{cfg.epochs}", unit="batch",
                              disable=not progress, leave=False):
                k = order[start:start + cfg.batch_size]
                x = counts[k].float()
                total += self._step(rows[k], cols[k], x.log(), glove_weight(x, cfg.x_max, cfg.alpha))
            del order  # before the next epoch's is drawn
            logger.info("GloVe epoch %d: cost %.5f (J / 2 per non-zero entry)", epoch + 1, total / len(counts))
        return self.word_vectors()

    def _step(self, i: torch.Tensor, j: torch.Tensor, log_x: torch.Tensor, f: torch.Tensor) -> float:
        """glove.c's AdaGrad step for each entry ``(i[k], j[k])`` of a batch (all ``(N,)``); returns the summed
        ``½ f diff²`` before the step.

        Entry ``k`` moves each of its parameters by ``-u / sqrt(G)`` with ``u = η f diff ∂(diff)`` and ``G`` the
        parameter's accumulator at the batch's start, then ``G += u²``; a row in several entries takes the sum
        of their steps and accumulates the sum of their squares (not the square of the sum).
        """
        w_i, w_j = self.word.index_select(0, i), self.context.index_select(0, j)  # (N, D)
        diff = (w_i * w_j).sum(1) + self.word_bias.index_select(0, i) + self.context_bias.index_select(0, j) - log_x
        scaled = self.config.learning_rate * f * diff  # (N,) η f diff
        updates = {"word": (i, scaled.unsqueeze(1) * w_j), "context": (j, scaled.unsqueeze(1) * w_i),
                   "word_bias": (i, scaled), "context_bias": (j, scaled)}  # u: (N, D) or (N,)
        parameters = self._parameters()
        steps = [(name, index, update / self.squared[name].index_select(0, index).sqrt())
                 for name, (index, update) in updates.items()]  # every step from the batch's start
        for name, index, step in steps:
            parameters[name].index_add_(0, index, -step)
            self.squared[name].index_add_(0, index, updates[name][1].square())
        return float(0.5 * (f * diff * diff).sum())

    def word_vectors(self) -> WordVectors:
        """The vectors trained so far, word plus context vectors (``w + w~``), with the vocabulary and the config."""
        metadata = {"method": "glove", **dataclasses.asdict(self.config),
                    "lowercase": self.vocab.lowercase, "tokenizer": self.vocab.tokenizer}
        return WordVectors(self.vocab.words, self.word + self.context, counts=self.vocab.counts.tolist(),
                           metadata=metadata)


def train_glove(train_files: str | Path | list, config: GloVeConfig | None = None,
                vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` unless given, count co-occurrences and train GloVe."""
    config = config or GloVeConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    cooccurrences = count_cooccurrences(corpus, len(vocab), config.window, weighting="harmonic")
    logger.info("GloVe: %d non-zero co-occurrences over %d words.", len(cooccurrences), len(vocab))
    return GloVeTrainer(vocab, config).train(cooccurrences, progress=progress)

