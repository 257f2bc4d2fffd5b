"""Word–word co-occurrence counts in a symmetric window (course notes 001 §6), shared by GloVe and
the SVD baseline.

For words :math:`i, j` and window :math:`m`:

.. math::  X_{ij} = \\sum_{\\text{sentences}} \\sum_{x} \\sum_{0 < |\\Delta| \\le m}
           [I_x = i]\\,[I_{x+\\Delta} = j]\\; \\text{weight}(|\\Delta|)

with ``weighting="uniform"`` (weight 1: the notes' term–term matrix :math:`C_{ij}`) or
``weighting="harmonic"`` (weight :math:`1/|\\Delta|`, GloVe: a pair :math:`d` words apart counts
:math:`1/d`). Windows stop at sentence ends; the matrix is symmetric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..models.config_utils import check_choice
from .vocabulary import EncodedCorpus, check_window

WEIGHTINGS = ("harmonic", "uniform")


@dataclass
class CooccurrenceMatrix:
    """Sparse ``(vocab_size, vocab_size)`` matrix in coordinate form: ``values[k]`` at
    ``(rows[k], cols[k])``, each non-zero entry once (sorted by row, then column)."""

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    vocab_size: int

    def __len__(self) -> int:
        return len(self.values)

    def to_dense(self) -> torch.Tensor:
        dense = torch.zeros(self.vocab_size, self.vocab_size, dtype=torch.float64)
        dense[torch.from_numpy(self.rows), torch.from_numpy(self.cols)] = torch.from_numpy(self.values)
        return dense

    def to_sparse(self) -> torch.Tensor:
        """A coalesced ``torch.sparse_coo_tensor`` (float64)."""
        indices = torch.from_numpy(np.stack([self.rows, self.cols]))
        shape = (self.vocab_size, self.vocab_size)
        return torch.sparse_coo_tensor(indices, torch.from_numpy(self.values), shape, check_invariants=True).coalesce()


def count_cooccurrences(corpus: EncodedCorpus, vocab_size: int, window: int,
                        weighting: str = "harmonic") -> CooccurrenceMatrix:
    """Co-occurrence matrix of an encoded corpus (module docstring)."""
    check_choice("weighting", weighting, WEIGHTINGS)
    check_window(window, corpus)
    ids, sentence = corpus.ids, corpus.sentence_index()
    keys, weights = [], []
    for distance in range(1, window + 1):
        same = sentence[:-distance] == sentence[distance:]
        left, right = ids[:-distance][same], ids[distance:][same]
        weight = 1.0 / distance if weighting == "harmonic" else 1.0
        keys += [left * vocab_size + right, right * vocab_size + left]  # both directions: symmetric
        weights += [np.full(2 * len(left), weight)]
    all_keys = np.concatenate(keys)
    unique, inverse = np.unique(all_keys, return_inverse=True)
    values = np.bincount(inverse, weights=np.concatenate(weights), minlength=len(unique))
    return CooccurrenceMatrix(rows=unique // vocab_size, cols=unique % vocab_size, values=values,
                              vocab_size=vocab_size)
