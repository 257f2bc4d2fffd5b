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
runs are merged block of keys by block of keys (each block about ``max_entries`` entries of all
runs, read from the spilled files; the blocks' bounds are quantiles of the runs' keys) and written to a file read
back at the end. Peak memory: the chunk's pairs, ``max_entries`` run entries and the
result (16 bytes per non-zero entry); nothing else grows with the corpus (each chunk finds its tokens' sentences
from the offsets).
"""

from __future__ import annotations

import contextlib
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
    """Sparse ``(vocab_size, vocab_size)`` matrix in coordinate form: ``values[k]`` (float64) at
    ``(rows[k], cols[k])`` (int32 ids, :func:`index_dtype`), each non-zero entry once (sorted by row, then
    column)."""

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    vocab_size: int

    def __len__(self) -> int:
        return len(self.values)

    def to_dense(self) -> torch.Tensor:
        """The ``(vocab_size, vocab_size)`` float64 matrix (small vocabularies only: the tests, the notes' examples)."""
        dense = torch.zeros(self.vocab_size, self.vocab_size, dtype=torch.float64)
        dense[torch.from_numpy(self.rows), torch.from_numpy(self.cols)] = torch.from_numpy(self.values)
        return dense

    def to_sparse(self) -> torch.Tensor:
        """A coalesced ``torch.sparse_coo_tensor`` (float64)."""
        indices = torch.from_numpy(np.stack([self.rows, self.cols]).astype(np.int64))
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
    with tempfile.TemporaryDirectory(prefix="cooccurrences-") as spill_dir:
        memory: list[tuple[np.ndarray, np.ndarray]] = []
        disk: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, len(corpus.ids), chunk_tokens):
            memory.append(_chunk_counts(corpus.ids, corpus.offsets, start, start + chunk_tokens, vocab_size, window,
                                        weighting))
            if sum(len(keys) for keys, _ in memory) > max_entries:
                disk.append(_spill(_merge(memory), Path(spill_dir) / f"run{len(disk)}"))
                memory = []
        rows, cols, values = _merge_runs(disk + memory, vocab_size, max_entries, Path(spill_dir))
    return CooccurrenceMatrix(rows=rows, cols=cols, values=values, vocab_size=vocab_size)


def _sentence_ids(offsets: np.ndarray, start: int, end: int) -> np.ndarray:
    """``(end - start,)`` the sentence of each token ``start..end - 1`` (``offsets`` as in ``EncodedCorpus``): one
    chunk's share of ``EncodedCorpus.sentence_index()``, without an array the size of the corpus."""
    return np.searchsorted(offsets, np.arange(start, end), side="right") - 1


def _chunk_counts(ids: np.ndarray, offsets: np.ndarray, start: int, end: int, vocab_size: int, window: int,
                  weighting: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and summed weights of the pairs whose left word lies in ``ids[start:end]``."""
    end = min(end, len(ids))
    sentence = _sentence_ids(offsets, start, min(end + window, len(ids)))  # sentence[i] of token start + i
    keys, weights = [], []
    for distance in range(1, window + 1):
        left_end = min(end, len(ids) - distance)
        if left_end <= start:
            continue
        same = sentence[: left_end - start] == sentence[distance : left_end - start + distance]
        left = ids[start:left_end][same].astype(np.int64)  # keys up to V**2: int64 whatever the ids' type
        right = ids[start + distance:left_end + distance][same].astype(np.int64)
        weight = 1.0 / distance if weighting == "harmonic" else 1.0
        keys += [left * vocab_size + right, right * vocab_size + left]  # both directions: symmetric
        weights += [np.full(len(left), weight)] * 2
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    runs = list(zip(keys, weights, strict=True))
    del keys, weights
    return _merge(runs)


def _merge(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sum runs of ``(keys, values)`` into one run with sorted unique keys.

    A stable sort of the concatenated keys (each run is sorted already, which the sort exploits) and a sum over
    each group of equal keys, in the order the runs give them: at most 4 arrays of the runs' total length
    (np.unique with its inverse and bincount take about twice that). ``runs`` is emptied once concatenated, so
    that its arrays are freed unless the caller holds them elsewhere."""
    keys = np.concatenate([k for k, _ in runs])
    values = np.concatenate([v for _, v in runs])
    runs.clear()
    if len(keys) == 0:
        return keys.astype(np.int64), values.astype(np.float64)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    values = values[order]
    del order
    first = np.empty(len(keys), dtype=bool)  # first[i]: keys[i] starts a group
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    del first
    return keys[starts], np.add.reduceat(values, starts)


def _spill(run: tuple[np.ndarray, np.ndarray], path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Write a run to ``path.keys.npy`` / ``path.values.npy`` and return it memory-mapped."""
    arrays = []
    for name, array in zip(("keys", "values"), run, strict=True):
        np.save(path.with_suffix(f".{name}.npy"), array)
        arrays.append(np.load(path.with_suffix(f".{name}.npy"), mmap_mode="r"))
    return arrays[0], arrays[1]


def _read(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``array[start:stop]`` in RAM. A spilled run's slice is read from its file rather than through its memory map,
    whose touched pages would stay mapped, and counted in the process's RSS, until the counting ends."""
    if isinstance(array, np.memmap):
        return np.fromfile(array.filename, dtype=array.dtype, count=stop - start,
                           offset=array.offset + start * array.itemsize)
    return np.asarray(array[start:stop])


def _block_bounds(runs: list[tuple[np.ndarray, np.ndarray]], total: int, key_end: int,
                  max_entries: int) -> np.ndarray:
    """Key bounds ``[0, ..., key_end]`` of blocks of about ``max_entries`` run entries each: quantiles of every
    run's keys sampled at one common step (frequent words have the small ids, so equal key ranges would not do)."""
    blocks = -(-total // max_entries)
    if blocks == 1:
        return np.array([0, key_end], dtype=np.int64)
    step = max(1, max_entries // 64)  # each sample stands for `step` entries; about 64 samples per block
    samples = np.sort(np.concatenate([np.asarray(keys[::step]) for keys, _ in runs]))
    cuts = samples[(np.arange(1, blocks) * len(samples)) // blocks]
    return np.unique(np.concatenate([[0], cuts, [key_end]]).astype(np.int64))


def index_dtype(vocab_size: int) -> np.dtype:
    """``int32`` row and column ids up to 2**31 words (half the memory of int64), else ``int64``."""
    return np.dtype(np.int32) if vocab_size <= np.iinfo(np.int32).max else np.dtype(np.int64)


def _merge_runs(runs: list[tuple[np.ndarray, np.ndarray]], vocab_size: int, max_entries: int,
                folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, values)`` of the sorted runs merged block of keys by block, each block about ``max_entries``
    run entries. Every merged block is appended to files in ``folder`` and the files are read back whole at the
    end, so the result is held once (16 bytes per entry with int32 ids), never beside a second copy."""
    dtype = index_dtype(vocab_size)
    names = ("rows", "cols", "values")
    if sum(len(keys) for keys, _ in runs) == 0:
        return np.zeros(0, dtype=dtype), np.zeros(0, dtype=dtype), np.zeros(0)
    bounds = _block_bounds(runs, sum(len(keys) for keys, _ in runs), vocab_size * vocab_size, max_entries)
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(folder / f"merged.{name}", "wb")) for name in names]
        for low, high in zip(bounds[:-1], bounds[1:], strict=True):
            parts = []
            for keys, values in runs:
                a, b = np.searchsorted(keys, [low, high])
                parts.append((_read(keys, a, b), _read(values, a, b)))
            keys, values = _merge(parts)
            del parts
            (keys // vocab_size).astype(dtype).tofile(files[0])
            (keys % vocab_size).astype(dtype).tofile(files[1])
            values.astype(np.float64).tofile(files[2])
    return (np.fromfile(folder / "merged.rows", dtype=dtype), np.fromfile(folder / "merged.cols", dtype=dtype),
            np.fromfile(folder / "merged.values", dtype=np.float64))
