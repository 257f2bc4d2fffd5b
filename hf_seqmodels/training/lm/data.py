"""Language-model data: the token stream (:mod:`..core.text`) cut into TBPTT windows.

The classic PTB setup (Zaremba et al. 2014; pytorch/examples ``word_language_model``):

1. all training text is tokenised into **one stream** of ids (no ``<bos>`` between the chunks of a
   file: ``add_special_tokens=False``);
2. the stream is cut into ``B`` contiguous rows, ``streams`` of shape ``(B, N)`` (the last
   ``len % B`` tokens are dropped): row ``b`` is the ``b``-th ``1/B`` of the text;
3. an epoch reads the rows left to right in windows of ``bptt`` tokens: inputs
   ``streams[:, i:i+bptt]`` and targets ``streams[:, i+1:i+1+bptt]``; the model's state is carried
   from one window to the next (and detached), so the ``B`` rows are read as ``B`` unbroken texts.

The same streams train the RNNs and the NNLM. For the NNLM the carried state is the last ``n - 1``
ids, so every target is predicted from its full ``n - 1``-token context (only the first token of
each row sees the pad id instead): an epoch is exactly the set of all ``(n - 1)``-token windows of
the text, each once, in a fixed order — the same as "fixed windows" training without shuffling.
:class:`ShuffledContextWindows` draws windows in a random order instead, on a grid shifted every epoch (the
NNLM and the Transformer LM, whose windows are read alone).

A stream is either a tensor in RAM (:func:`~..core.text.tokenize_texts`) or a read-only ``numpy`` memory
map of ``uint16``/``uint32`` ids (:func:`~.token_streams.lm_token_streams`). Rows of a memory map are
views of the file, never copies: only the ids of each window are read, and become an int64 tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...models.config_utils import invalid
from ...tokenization import TextFile

Ids = torch.Tensor | np.ndarray  # a stream in RAM, or a memory map of token files


def as_long_tensor(ids: Ids) -> torch.Tensor:
    """``ids`` as a contiguous int64 tensor: a tensor as it is (converted if needed), a numpy array (a slice
    of a memory map) read into a new tensor."""
    if isinstance(ids, torch.Tensor):
        return ids.long().contiguous()
    return torch.from_numpy(np.array(ids, dtype=np.int64))


def stream_slice(ids: Ids, start: int, stop: int) -> torch.Tensor:
    """``ids[start:stop]`` of a stream ``(L,)`` as an int64 tensor ``(stop - start,)`` (only that slice is read)."""
    return as_long_tensor(ids[start:stop])


def batchify(ids: Ids, batch_size: int) -> Ids:
    """Cut the stream ``ids`` ``(L,)`` into ``batch_size`` contiguous rows ``(B, L // B)``: a view, of the
    tensor or of the memory map (nothing is copied)."""
    if batch_size < 1:
        raise invalid("batch_size", batch_size, "an integer >= 1")
    length = len(ids) // batch_size
    if length < 2:
        raise ValueError(
            f"A stream of {len(ids)} tokens is too short for {batch_size} rows of at least 2 tokens; "
            "use a smaller batch size or more text."
        )
    return ids[: length * batch_size].reshape(batch_size, length)  # (B, N)


def shard_rows(rows: Ids, process_index: int, num_processes: int) -> Ids:
    """Process ``process_index``'s contiguous block of rows; the first ``len % num_processes`` blocks get one
    more (a view of a tensor or of a memory map)."""
    if isinstance(rows, torch.Tensor):
        return torch.tensor_split(rows, num_processes, dim=0)[process_index]
    return np.array_split(rows, num_processes, axis=0)[process_index]


@dataclass(frozen=True)
class Window:
    """One training or evaluation batch.

    Args:
        input_ids: ``(B, T)``.
        labels: ``(B, T)`` targets aligned with ``input_ids`` (``labels[:, t]`` follows ``input_ids[:, t]``).
        context: ``(B, n - 1)`` ids just before ``input_ids`` (NNLM shuffled windows), or None when
            the trainer carries the model's state from the previous window.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    context: torch.Tensor | None = None


class StreamWindows:
    """TBPTT windows over ``streams`` ``(B, N)``: window ``i`` covers columns ``[i*bptt, (i+1)*bptt]``.

    ``streams`` is a tensor or a (memory-mapped) numpy array; each window is read into int64 tensors. There are ``ceil((N - 1) / bptt)`` windows; the last one may be shorter. The order is fixed, so
    ``epoch`` is ignored and the model's state is carried across windows (``carries_state``).

    ``context`` > 0 (scoring a model that reads each window alone, with overlapping windows): every window
    also reads up to ``context`` tokens of its row before it, whose labels are -100 (read, not scored), so each
    token is predicted from at least ``context`` tokens once the row has that many.
    """

    carries_state = True

    def __init__(self, streams: Ids, bptt: int, context: int = 0):
        if bptt < 1:
            raise invalid("block_size", bptt, "an integer >= 1")
        self.streams = streams
        self.bptt = bptt
        self.context = context

    def __len__(self) -> int:
        return math.ceil((self.streams.shape[1] - 1) / self.bptt)

    def batch(self, index: int, epoch: int = 0) -> Window:
        start = index * self.bptt
        length = min(self.bptt, self.streams.shape[1] - 1 - start)
        first = max(0, start - self.context)  # the earliest token read
        labels = as_long_tensor(self.streams[:, first + 1 : start + 1 + length])  # (B, context + T)
        if start > first:  # the context is only read (a copy: the slice of a one-row tensor is a view)
            labels = labels.clone()
            labels[:, : start - first] = -100
        return Window(input_ids=as_long_tensor(self.streams[:, first : start + length]), labels=labels)


class ShuffledContextWindows:
    """Fixed windows in a random order: ``n - 1`` context ids (the NNLM; none for a Transformer LM) + a block of
    ``block_size`` tokens.

    The stream is cut into ``(L - T) // T`` blocks of ``T = block_size`` tokens, the grid shifted by an offset
    ``o`` in ``[0, T)`` drawn per epoch: block ``k`` has inputs ``ids[s:s+T]``, targets ``ids[s+1:s+1+T]``
    (``s = o + k * T``) and context ``ids[s-n+1:s]`` (the fill id before the stream starts). The offset lets
    every epoch read new windows (nanoGPT draws every window at a random position): on a fixed grid a model
    that sees a small text for many epochs learns its ``L / T`` windows by heart (a 6-layer Transformer on Tiny
    Shakespeare's 3,900 windows of 256 characters: validation loss up again after 30 epochs). Every epoch
    draws its offset and a new permutation of the blocks (``torch.Generator`` seeded with ``seed + epoch``,
    so a resumed run sees the same windows in the same order) and
    batches ``global_batch_size`` blocks per window (an incomplete last batch is dropped); each
    process takes its contiguous block of rows of every batch. Only a model whose whole state is
    its context (the NNLM) or that reads each window alone (a Transformer LM) can be trained this way. ``ids`` may be a memory map: each batch gathers
    only its own ids.
    """

    carries_state = False

    def __init__(self, ids: Ids, *, context_size: int, block_size: int, global_batch_size: int,
                 process_index: int = 0, num_processes: int = 1, seed: int = 0, fill_id: int = 0):
        if block_size < 1:
            raise invalid("block_size", block_size, "an integer >= 1")
        self.ids, self.fill_id = ids, fill_id
        self.context_size, self.block_size = context_size, block_size
        self.global_batch_size, self.seed = global_batch_size, seed
        self.process_index, self.num_processes = process_index, num_processes
        self.num_blocks = (len(ids) - block_size) // block_size  # T - 1 tokens left over for the offset
        if len(self) < 1:
            raise ValueError(f"{self.num_blocks} blocks of {block_size} tokens do not fill one batch of "
                             f"{global_batch_size}; use a smaller batch size or block_size.")
        self._order: tuple[int, int, torch.Tensor] | None = None

    def __len__(self) -> int:
        return self.num_blocks // self.global_batch_size

    def layout(self, epoch: int) -> tuple[int, torch.Tensor]:
        """Epoch ``epoch``'s grid offset and order of the blocks ``(num_blocks,)``."""
        if self._order is None or self._order[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            order = torch.randperm(self.num_blocks, generator=generator)
            offset = int(torch.randint(self.block_size, (1,), generator=generator))
            self._order = (epoch, offset, order)
        return self._order[1], self._order[2]

    def batch(self, index: int, epoch: int = 0) -> Window:
        offset, order = self.layout(epoch)
        blocks = order[index * self.global_batch_size : (index + 1) * self.global_batch_size]
        starts = offset + shard_rows(blocks, self.process_index, self.num_processes) * self.block_size  # (B,)
        positions = starts[:, None] + torch.arange(self.block_size)  # (B, T)
        before = starts[:, None] + torch.arange(-self.context_size, 0)  # (B, n-1), negative before the stream
        context = self._gather(before.clamp(min=0)).masked_fill(before < 0, self.fill_id)
        return Window(input_ids=self._gather(positions), labels=self._gather(positions + 1), context=context)

    def _gather(self, positions: torch.Tensor) -> torch.Tensor:
        """``ids[positions]`` as int64, the shape of ``positions``."""
        if isinstance(self.ids, torch.Tensor):
            return self.ids[positions].long()
        return as_long_tensor(self.ids[positions.numpy()])


def tokenizer_training_files(train_file: str | Path, validation_file: str | Path | None = None,
                             validation_split_percentage: float = 10.0) -> list[TextFile]:
    """The part of ``train_file`` a tokenizer is trained on, read from the file itself (no copy): all of it
    with a ``validation_file``, else its first ``100 - validation_split_percentage`` % of characters, the text
    that trains (cut as :func:`~..core.text.split_for_validation` cuts, counting a ``\\r\\n`` as the two
    characters the tokenizer trainer reads)."""
    if not Path(train_file).is_file():
        raise FileNotFoundError(f"Text file {str(train_file)!r} does not exist.")
    if validation_file is not None:
        return [TextFile(train_file)]
    if not 0.0 < validation_split_percentage < 100.0:
        raise invalid("validation_split_percentage", validation_split_percentage,
                       "a number strictly between 0 and 100")
    with open(train_file, encoding="utf-8", errors="replace", newline="") as f:  # the trainer names bad bytes
        total = sum(len(block) for block in iter(lambda: f.read(1 << 20), ""))
    return [TextFile(train_file, max_chars=math.floor(total * (100.0 - validation_split_percentage) / 100.0))]


__all__ = [
    "ShuffledContextWindows",
    "StreamWindows",
    "Window",
    "as_long_tensor",
    "batchify",
    "shard_rows",
    "stream_slice",
    "tokenizer_training_files",
]
