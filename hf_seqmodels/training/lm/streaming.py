"""Streaming text: a ``datasets`` IterableDataset tokenised on the fly into fixed windows, split by rank, resumable.

For corpora that the token files (:mod:`.token_streams`) should not copy to disk: the text is read as a stream of
examples (:func:`load_text_stream`: ``load_dataset("text", data_files=..., streaming=True)`` for local files, the
same call with a Hub dataset name online), each process keeps its share of the examples
(``datasets.distributed.split_dataset_by_node``: whole shards when the shards divide evenly among the processes,
else every ``world_size``-th example), and :class:`StreamingWindows` tokenises them as they come.

**Layout.** A process reads ``rows`` token streams side by side, as the token-file path reads ``rows`` rows of the
batchified stream: each example is tokenised (without special tokens) and appended whole to the row whose
buffer is then shortest (the lowest row on a tie), so the rows fill evenly and each row is a sequence of
complete examples in stream order. Window ``k`` has inputs ``row[k*T : k*T+T]`` and labels
``row[k*T+1 : k*T+T+1]`` of every row (``T = block_size``): consecutive windows continue each row, so a
recurrent model carries its state from one window to the next (truncated BPTT) and a Transformer LM reads
contiguous ``T``-token contexts. With one row and one process this is exactly the token-file path's
:class:`~.data.StreamWindows` over the same ids. When the stream ends, the next pass starts from its
first example (``set_epoch(pass)``), so a run of ``--max_steps`` updates never runs dry.

**Resume.** The position after ``windows`` windows is ``(pass, examples consumed, each row's leftover ids)``
(:meth:`StreamingWindows.position`); :meth:`StreamingWindows.restore` skips the consumed examples of the pass
without tokenising them (they are read and dropped) and restores the leftovers, so the next window is exactly
the one an uninterrupted run would read. Without a saved position, asking for window ``k`` replays the
stream from its start to ``k`` (tokenising, not training): also exact, only slower.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ...models.config_utils import invalid


def load_text_stream(train_file: str | list[str] | None = None, *, dataset_name: str | None = None,
                     dataset_config_name: str | None = None, split: str = "train", text_column: str = "text"):
    """The examples of plain-text files (one example per line, line breaks kept so that the ids equal the
    token-file path's) or of a ``datasets`` dataset's ``split``, as a streaming ``IterableDataset``."""
    import datasets

    if (train_file is None) == (dataset_name is None):
        raise ValueError("Give exactly one of `train_file` (text files) or `dataset_name` (a datasets name).")
    if train_file is not None:
        files = [train_file] if isinstance(train_file, str) else list(train_file)
        return datasets.load_dataset("text", data_files={split: files}, split=split, streaming=True,
                                     keep_linebreaks=True)
    return datasets.load_dataset(dataset_name, dataset_config_name, split=split, streaming=True)


def text_stream_splits(dataset_name: str, dataset_config_name: str | None = None) -> list[str]:
    """The split names of a ``datasets`` dataset (read from its metadata, no example is downloaded)."""
    import datasets

    return list(datasets.get_dataset_split_names(dataset_name, dataset_config_name))


def tokenize_stream(dataset, tokenizer, text_column: str = "text", examples_per_call: int = 64) -> np.ndarray:
    """Every example of a (small) stream tokenised without special tokens into one array of ids ``(L,)`` int64:
    the validation text of a streamed run."""
    pieces = [np.asarray(ids, dtype=np.int64) for ids in _token_lists(iter(dataset), tokenizer, text_column,
                                                                       examples_per_call)]
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def _token_lists(examples: Iterator[dict], tokenizer, text_column: str, examples_per_call: int) -> Iterator[list[int]]:
    """The ids of each example's ``text_column``, tokenised ``examples_per_call`` examples at a time."""
    while batch := list(itertools.islice(examples, examples_per_call)):
        if text_column not in batch[0]:
            raise invalid("text_column", text_column, f"one of the stream's columns {sorted(batch[0])}")
        yield from tokenizer([example[text_column] for example in batch], add_special_tokens=False)["input_ids"]


@dataclass
class StreamPosition:
    """Where a process stands in its stream after ``windows`` windows: in pass ``pass_index`` (0 first) it has
    consumed ``examples`` examples of its share, and ``rows`` holds each row's ids not yet read past."""

    windows: int = 0
    pass_index: int = 0
    examples: int = 0
    rows: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> StreamPosition:
        return cls(**data)


@dataclass(frozen=True)
class StreamWindow:
    """One batch of streamed windows (the fields of :class:`~.data.Window`): ``input_ids`` and ``labels``
    ``(rows, T)``; ``context`` is always None (the trainer carries the model's state)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    context: torch.Tensor | None = None


class StreamingWindows:
    """This process's windows of a text stream: ``rows`` token streams read ``block_size`` tokens at a time.

    Args:
        dataset: a ``datasets.IterableDataset`` of examples with a ``text_column`` (:func:`load_text_stream`), the
            whole stream: each process keeps its share (``process_index`` of ``num_processes``).
        tokenizer: the run's tokenizer (called without special tokens).
        rows: token streams read side by side (the per-process batch size).
        block_size: ``T``, the tokens of each window.
        num_windows: ``len()``: the windows of a run (a stream has no length of its own).

    ``batch(index)`` returns window ``index`` as a :class:`StreamWindow` (``(rows, T)`` int64 tensors); windows
    are read in order, and asking for a later window skips (replays) to it, an earlier one starts again.
    """

    carries_state = True
    #: reading a window advances the position a checkpoint records: none is read before it is due
    reads_ahead = False

    def __init__(self, dataset, tokenizer, *, rows: int, block_size: int, num_windows: int, text_column: str = "text",
                 process_index: int = 0, num_processes: int = 1, examples_per_call: int = 64):
        for name, value in (("per_device_train_batch_size", rows), ("block_size", block_size),
                            ("max_steps", num_windows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise invalid(name, value, "an integer >= 1 for a streamed run")
        if not 0 <= process_index < num_processes:
            raise invalid("process_index", process_index, f"an integer in [0, {num_processes})")
        if num_processes > 1:
            from datasets.distributed import split_dataset_by_node

            dataset = split_dataset_by_node(dataset, rank=process_index, world_size=num_processes)
        self.dataset, self.tokenizer, self.text_column = dataset, tokenizer, text_column
        self.rows, self.block_size, self.num_windows = rows, block_size, num_windows
        self.examples_per_call = examples_per_call
        self._start(StreamPosition(rows=[[] for _ in range(rows)]))

    def __len__(self) -> int:
        return self.num_windows

    # ---- position
    def position(self) -> StreamPosition:
        """The position after the windows read so far (a copy: JSON-ready, to save beside a checkpoint)."""
        return StreamPosition(self._windows, self._pass, self._examples, [row.tolist() for row in self._buffers])

    def restore(self, position: StreamPosition | dict) -> None:
        """Continue from ``position`` (of a run with the same data, tokenizer, rows and block size): the consumed
        examples of its pass are skipped without being tokenised."""
        position = StreamPosition.from_dict(position) if isinstance(position, dict) else position
        if len(position.rows) != self.rows:
            raise ValueError(f"A stream position of {len(position.rows)} rows cannot continue a run of {self.rows} "
                             "rows: resume with the same per_device_train_batch_size.")
        self._start(position)

    def _start(self, position: StreamPosition) -> None:
        self._windows, self._pass, self._examples = position.windows, position.pass_index, position.examples
        self._buffers = [np.asarray(row, dtype=np.int64) for row in position.rows]
        self._tokens = self._open_pass(skip=position.examples)

    def _open_pass(self, skip: int = 0) -> Iterator[list[int]]:
        """The token lists of the current pass's examples, from example ``skip`` on."""
        dataset = self.dataset
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(self._pass)
        self._pass_tokens, self._whole_pass = 0, skip == 0  # a whole pass without a token would loop forever
        examples = itertools.islice(iter(dataset), skip, None)  # read, not tokenised (IterableDataset.skip would
        return _token_lists(examples, self.tokenizer, self.text_column, self.examples_per_call)  # skip before the split

    # ---- reading
    def _next_example(self) -> list[int]:
        """The next example's ids; at the end of the stream the next pass begins."""
        for _attempt in range(2):
            ids = next(self._tokens, None)
            if ids is not None:
                self._examples += 1
                self._pass_tokens += len(ids)
                return ids
            if self._examples == 0 or (self._whole_pass and self._pass_tokens == 0):
                break
            self._pass, self._examples = self._pass + 1, 0
            self._tokens = self._open_pass()
        raise ValueError("The training stream has no tokens for this process (an empty file or dataset, fewer "
                         "examples than processes, or text the tokenizer maps to nothing).")

    def _fill(self) -> None:
        """Append whole examples to the shortest row until every row holds one window and its next token."""
        need = self.block_size + 1
        while True:
            lengths = [len(row) for row in self._buffers]
            shortest = int(np.argmin(lengths))
            if lengths[shortest] >= need:
                return
            ids = np.asarray(self._next_example(), dtype=np.int64)
            self._buffers[shortest] = np.concatenate([self._buffers[shortest], ids])

    def _read_window(self) -> StreamWindow:
        self._fill()
        size = self.block_size
        window = np.stack([row[: size + 1] for row in self._buffers])  # (rows, T + 1)
        self._buffers = [row[size:] for row in self._buffers]  # the last label is the next window's first input
        self._windows += 1
        tensor = torch.from_numpy(window)
        return StreamWindow(input_ids=tensor[:, :-1].contiguous(), labels=tensor[:, 1:].contiguous())  # (rows, T)

    def batch(self, index: int, epoch: int = 0) -> StreamWindow:
        """Window ``index`` ``(rows, T)``; ``epoch`` is ignored (the stream's passes are counted in the position)."""
        if not 0 <= index < self.num_windows:
            raise IndexError(f"window {index} out of range for {self.num_windows} windows")
        if index < self._windows:  # an earlier window: read the stream again from its start
            self._start(StreamPosition(rows=[[] for _ in range(self.rows)]))
        while self._windows < index:
            self._read_window()
        return self._read_window()


__all__ = ["StreamPosition", "StreamWindow", "StreamingWindows", "load_text_stream", "text_stream_splits",
           "tokenize_stream"]
