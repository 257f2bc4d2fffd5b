"""Word–word co-occurrence counts in a symmetric window (course notes 001 §6), shared by GloVe and
the SVD baseline.

For words :math:`i, j` and window :math:`m`:

.. math::  X_{ij} = \\sum_{\\text{sentences}} \\sum_{x} \\sum_{0 < |\\Delta| \\le m}
           [I_x = i]\\,[I_{x+\\Delta} = j]\\; \\text{weight}(|\\Delta|)

with ``weighting="uniform"`` (weight 1: the notes' term–term matrix :math:`C_{ij}`) or
``weighting="harmonic"`` (weight :math:`1/|\\Delta|`, GloVe: a pair :math:`d` words apart counts
:math:`1/d`). Windows stop at sentence ends; the matrix is symmetric.

Counting streams, with memory bounded independently of the corpus size (as GloVe's ``cooccur``):
the corpus is read ``chunk_tokens`` tokens at a time; each chunk's pairs are summed into a run of
sorted ``(key, count)`` entries (key ``i * V + j``); when the runs in memory hold more than
``max_entries`` entries they are merged into one run written to a temporary folder; at the end the
runs are merged block of rows by block of rows (each block at most ``max_entries`` entries of all
runs, read through memory maps). Peak memory: the chunk's pairs, ``max_entries`` run entries and the
result.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..models.config_utils import check_choice, invalid
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


def count_cooccurrences(corpus: EncodedCorpus, vocab_size: int, window: int, weighting: str = "harmonic",
                        chunk_tokens: int = 200_000, max_entries: int = 10_000_000) -> CooccurrenceMatrix:
    """Co-occurrence matrix of an encoded corpus, counted in a stream (module docstring)."""
    check_choice("weighting", weighting, WEIGHTINGS)
    check_window(window, corpus)
    for name, value in (("chunk_tokens", chunk_tokens), ("max_entries", max_entries)):
        if not isinstance(value, int) or value < 1:
            raise invalid(name, value, "an integer >= 1")
    sentence = corpus.sentence_index()
    with tempfile.TemporaryDirectory(prefix="cooccurrences-") as spill_dir:
        memory: list[tuple[np.ndarray, np.ndarray]] = []
        disk: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, len(corpus.ids), chunk_tokens):
            memory.append(_chunk_counts(corpus.ids, sentence, start, start + chunk_tokens, vocab_size, window,
                                        weighting))
            if sum(len(keys) for keys, _ in memory) > max_entries:
                disk.append(_spill(_merge(memory), Path(spill_dir) / f"run{len(disk)}"))
                memory = []
        keys, values = _merge_runs(disk + memory, vocab_size, max_entries)
    return CooccurrenceMatrix(rows=keys // vocab_size, cols=keys % vocab_size, values=values, vocab_size=vocab_size)


def _chunk_counts(ids: np.ndarray, sentence: np.ndarray, start: int, end: int, vocab_size: int, window: int,
                  weighting: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and summed weights of the pairs whose left word lies in ``ids[start:end]``."""
    end = min(end, len(ids))
    keys, weights = [], []
    for distance in range(1, window + 1):
        left_end = min(end, len(ids) - distance)
        if left_end <= start:
            continue
        same = sentence[start:left_end] == sentence[start + distance:left_end + distance]
        left, right = ids[start:left_end][same], ids[start + distance:left_end + distance][same]
        weight = 1.0 / distance if weighting == "harmonic" else 1.0
        keys += [left * vocab_size + right, right * vocab_size + left]  # both directions: symmetric
        weights.append(np.full(2 * len(left), weight))
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return _merge([(np.concatenate(keys), np.concatenate(weights))])


def _merge(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sum runs of ``(keys, values)`` into one run with sorted unique keys."""
    keys = np.concatenate([k for k, _ in runs])
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, np.bincount(inverse, weights=np.concatenate([v for _, v in runs]), minlength=len(unique))


def _spill(run: tuple[np.ndarray, np.ndarray], path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Write a run to ``path.keys.npy`` / ``path.values.npy`` and return it memory-mapped."""
    arrays = []
    for name, array in zip(("keys", "values"), run, strict=True):
        np.save(path.with_suffix(f".{name}.npy"), array)
        arrays.append(np.load(path.with_suffix(f".{name}.npy"), mmap_mode="r"))
    return arrays[0], arrays[1]


def _merge_runs(runs: list[tuple[np.ndarray, np.ndarray]], vocab_size: int,
                max_entries: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge sorted runs block of key range by block, each block at most about ``max_entries`` run entries."""
    total = sum(len(keys) for keys, _ in runs)
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    blocks = -(-total // max_entries)
    bounds = np.linspace(0, vocab_size * vocab_size, blocks + 1).astype(np.int64)
    merged = []
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        parts = []
        for keys, values in runs:
            a, b = np.searchsorted(keys, [low, high])
            parts.append((np.asarray(keys[a:b]), np.asarray(values[a:b])))
        merged.append(_merge(parts))
    return np.concatenate([k for k, _ in merged]), np.concatenate([v for _, v in merged])
