"""Batches of examples of similar length, for the tasks whose examples vary in length (translation, fine-tuning).

Sorting the examples by length before cutting them into batches keeps each batch's padding small and the padded
shapes few: a compiled step meets few of them, so it reuses its graphs. :class:`LengthGroups` cuts a length order
into global batches of a fixed number of examples or of at most a budget of padded tokens, visits them in a new
seeded order every epoch (:class:`EpochPermutation`: the order is a function of seed and epoch, so a resumed run
reads the same batches in the same order) and gives each of ``P`` processes its rows ``p, p + P, ...`` of a batch.
The tasks hold the examples and collate the rows; this module only sees their lengths.
"""

from __future__ import annotations

import numpy as np
import torch

from ...models.config_utils import invalid


class EpochPermutation:
    """A random permutation of ``count`` items per epoch, drawn with seed ``seed + epoch`` (the latest one kept)."""

    def __init__(self, count: int, seed: int):
        self.count, self.seed = count, seed
        self._order: tuple[int, torch.Tensor] | None = None

    def __call__(self, epoch: int) -> torch.Tensor:
        if self._order is None or self._order[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            self._order = (epoch, torch.randperm(self.count, generator=generator))
        return self._order[1]


def starts_by_count(count: int, batch_size: int) -> np.ndarray:
    """The start of every group of ``batch_size`` of ``count`` items (the last group may be smaller)."""
    if batch_size < 1:
        raise invalid("per_device_train_batch_size", batch_size, "an integer >= 1")
    return np.arange(0, count, batch_size, dtype=np.int64)


def starts_by_tokens(sizes: np.ndarray, max_tokens: int, item: str = "sentence") -> np.ndarray:
    """The start of every group of the length-sorted ``sizes`` (the padded length each item needs), greedily as
    many items as fit in ``max_tokens`` padded tokens (``rows × longest``); ``item`` names one in the error of an
    item longer than the budget."""
    too_long = np.flatnonzero(sizes > max_tokens)
    if len(too_long):
        size = int(sizes[too_long[0]])
        raise invalid("max_tokens_per_batch", max_tokens, f"at least the longest {item} ({size} tokens)")
    starts, rows, longest = [], 0, 0
    for position, size in enumerate(sizes.tolist()):
        if rows and (rows + 1) * max(longest, size) > max_tokens:
            rows, longest = 0, 0
        if not rows:
            starts.append(position)
        rows, longest = rows + 1, max(longest, size)
    return np.array(starts, dtype=np.int64)


class LengthGroups:
    """Global batches cut from a length order, in a seeded random order per epoch; this process's rows of each.

    ``order`` ``(N,)`` lists the items sorted by length and ``sizes`` ``(N,)`` gives each item's padded length (by
    item index). The order is cut into global batches of ``batch_size`` items, or of as many items as fit in
    ``max_tokens`` padded tokens (``rows × longest``, all processes together). Global batch ``k`` of epoch ``e`` is
    the ``k``-th of a permutation drawn with seed ``seed + e``; process ``p`` of ``P`` takes its rows ``p, p + P,
    ...``, so ``P`` processes together read exactly the batches one process would. Batches with fewer items than
    processes are dropped. ``item``/``items`` name the items in errors.
    """

    def __init__(self, order: np.ndarray, sizes: np.ndarray, *, batch_size: int | None = None,
                 max_tokens: int | None = None, seed: int = 0, process_index: int = 0, num_processes: int = 1,
                 item: str = "sentence", items: str = "sentence pairs"):
        if (batch_size is None) == (max_tokens is None):
            raise ValueError("Give exactly one of batch_size (sentences per batch) and max_tokens (tokens per batch).")
        self.order, self.seed = order, seed
        self.process_index, self.num_processes = process_index, num_processes
        if batch_size is not None:
            starts = starts_by_count(len(order), batch_size)
        else:
            starts = starts_by_tokens(sizes[order], max_tokens, item)
        bounds = np.stack([starts, np.append(starts[1:], len(order))], axis=1)  # (G, 2) group [start, end)
        self.bounds = bounds[bounds[:, 1] - bounds[:, 0] >= num_processes]
        if not len(self.bounds):
            raise ValueError(f"{len(order)} {items} do not fill one batch for {num_processes} process(es).")
        self.permutation = EpochPermutation(len(self.bounds), seed)

    def __len__(self) -> int:
        return len(self.bounds)

    def group(self, index: int) -> np.ndarray:
        """The item indices ``(rows,)`` of global batch ``index`` (before the epoch's permutation)."""
        start, end = self.bounds[index]
        return self.order[start:end]

    def rows(self, index: int, epoch: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(the items of global batch index of epoch, this process's share of them)``."""
        group = self.group(int(self.permutation(epoch)[index]))
        return group, group[self.process_index :: self.num_processes]


__all__ = ["EpochPermutation", "LengthGroups", "starts_by_count", "starts_by_tokens"]
