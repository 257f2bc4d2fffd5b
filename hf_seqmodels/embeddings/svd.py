"""The count-based baseline of the course notes (001 §6–§10): a word–word co-occurrence matrix,
optionally turned into positive PMI, reduced by truncated SVD.

.. math::  M \\approx U_k \\Sigma_k V_k^\\top, \\qquad \\text{vector}(w_i) = (U_k \\Sigma_k^{p})_{i}

``matrix="counts"`` uses the notes' term–term counts :math:`C_{ij}` (uniform weights in a symmetric
window, :mod:`.cooccurrence`); ``matrix="ppmi"`` (default) uses
:math:`\\max\\big(0, \\log \\frac{C_{ij}\\, \\sum_{kl} C_{kl}}{\\sum_l C_{il} \\sum_k C_{kj}}\\big)`, which damps
frequent words such as "the" (Levy et al. 2015). ``singular_value_power`` :math:`p = 0` keeps the rows
of :math:`U_k` as the notes do; :math:`p = 1` gives :math:`U_k \\Sigma_k`. The SVD is randomized
(``torch.svd_lowrank``, Halko et al. 2011) on the sparse matrix.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ..models.config_utils import PresetMixin, check_choice, invalid
from .cooccurrence import CooccurrenceMatrix, count_cooccurrences
from .keyed_vectors import WordVectors
from .vocabulary import Vocabulary

logger = logging.getLogger(__name__)

MATRICES = ("ppmi", "counts")


@dataclass
class SVDConfig(PresetMixin):
    """Settings of the count-based SVD embedding. ``SVDConfig.from_preset(name, **overrides)``: ``tiny``
    (tests), ``notes-counts`` (the course notes' baseline: raw window counts, rows of U_k) and ``ppmi-svd``
    (PPMI, 300 dimensions, window 5; Levy et al. 2015)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(vector_size=2, window=3),
        "notes-counts": dict(matrix="counts", vector_size=100, window=5),
        "ppmi-svd": dict(matrix="ppmi", vector_size=300, window=5),
    }

    vector_size: int = 100
    window: int = 5
    matrix: str = "ppmi"
    singular_value_power: float = 0.0
    power_iterations: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("matrix", self.matrix, MATRICES)
        for name in ("vector_size", "window"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise invalid(name, value, "an integer >= 1")
        if not isinstance(self.power_iterations, int) or self.power_iterations < 0:
            raise invalid("power_iterations", self.power_iterations, "an integer >= 0")


def ppmi(cooccurrences: CooccurrenceMatrix) -> CooccurrenceMatrix:
    """Positive pointwise mutual information of a co-occurrence matrix (zero entries dropped)."""
    x = cooccurrences.values
    row_sums = np.bincount(cooccurrences.rows, weights=x, minlength=cooccurrences.vocab_size)
    col_sums = np.bincount(cooccurrences.cols, weights=x, minlength=cooccurrences.vocab_size)
    pmi = np.log(x * x.sum() / (row_sums[cooccurrences.rows] * col_sums[cooccurrences.cols]))
    keep = pmi > 0
    return CooccurrenceMatrix(rows=cooccurrences.rows[keep], cols=cooccurrences.cols[keep], values=pmi[keep],
                              vocab_size=cooccurrences.vocab_size)


def svd_vectors(matrix: CooccurrenceMatrix, config: SVDConfig) -> torch.Tensor:
    """``(vocab_size, vector_size)`` rows of :math:`U_k \\Sigma_k^p` for the matrix."""
    k = config.vector_size
    if k >= matrix.vocab_size:
        raise invalid("vector_size", k, f"fewer dimensions than the {matrix.vocab_size} vocabulary words")
    with torch.random.fork_rng():  # svd_lowrank draws its projection from the global generator: seed a copy
        torch.manual_seed(config.seed)
        u, s, _ = torch.svd_lowrank(matrix.to_sparse(), q=min(k + 10, matrix.vocab_size),
                                    niter=config.power_iterations)
    return (u[:, :k] * s[:k] ** config.singular_value_power).float()


def train_svd(train_files: str | Path | list, config: SVDConfig | None = None, vocab: Vocabulary | None = None,
              **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` unless given, count co-occurrences and reduce them by SVD."""
    config = config or SVDConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    matrix = count_cooccurrences(corpus, len(vocab), config.window, weighting="uniform")
    if config.matrix == "ppmi":
        matrix = ppmi(matrix)
    logger.info("SVD: %s matrix with %d non-zero entries over %d words.", config.matrix, len(matrix), len(vocab))
    metadata = {"method": "svd", **dataclasses.asdict(config), "lowercase": vocab.lowercase,
                "tokenizer": vocab.tokenizer}
    return WordVectors(vocab.words, svd_vectors(matrix, config), counts=vocab.counts.tolist(), metadata=metadata)
