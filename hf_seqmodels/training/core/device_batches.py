"""Batches on their way to a CUDA device: pinned, copied asynchronously, one update ahead.

The tasks make their batches on the CPU. A copy from ordinary (pageable) host memory to a GPU goes through a
staging buffer and holds the host until it is done; from pinned (page-locked) memory it is a DMA transfer that
the host only queues. With ``--dataloader_pin_memory`` (transformers' name, on by default) a run on a CUDA device
pins each batch and copies it on a side stream while the device still runs the previous update, so the update
never waits for its data and the host never waits for the copy. On a CPU nothing changes: there is no copy to
hide, and pinning would only cost (the tasks' ``compute_loss`` moves their batches as before, a no-op there).

A task whose batches object says ``reads_ahead = False`` (a stream whose read position a checkpoint records) is
not read ahead: its batches are pinned and copied when they are due.

Where batches vary in length (translation pairs, BERT's pairs of segments, fine-tuning), their padded length is
rounded up to a multiple of 8 on a GPU (:func:`padding_multiple`); the padding is masked, so losses are unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def pins_memory(dataloader_pin_memory: bool, device: torch.device) -> bool:
    """Whether the run's batches are pinned and copied ahead: ``--dataloader_pin_memory`` on a CUDA device."""
    return dataloader_pin_memory and device.type == "cuda"


def padding_multiple(pad_to_multiple_of: int | None, device: torch.device) -> int | None:
    """What the tasks round their padded lengths up to a multiple of (None: nothing): ``--pad_to_multiple_of``,
    by default 8 on a CUDA device, where tensor cores take dimensions in multiples of 8 and a compiled step meets
    fewer shapes (so it recompiles less), and nothing on a CPU, where padding only adds work."""
    if pad_to_multiple_of is None:
        pad_to_multiple_of = 8 if device.type == "cuda" else 1
    return pad_to_multiple_of if pad_to_multiple_of > 1 else None


def move_batch(batch: Any, device: torch.device) -> Any:
    """``batch`` (a tensor, a dict, a list of them or a dataclass holding tensors, such as a language model's
    window) with its CPU tensors pinned and copied to ``device`` without waiting; other values as they are."""
    if isinstance(batch, torch.Tensor):
        pinned = batch.pin_memory() if batch.device.type == "cpu" and device.type == "cuda" else batch
        return pinned.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(value, device) for value in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{f.name: move_batch(getattr(batch, f.name), device)
                                             for f in dataclasses.fields(batch) if f.init})
    return batch


def tensors_of(batch: Any) -> Iterator[torch.Tensor]:
    """The tensors :func:`move_batch` moved in ``batch``."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from tensors_of(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from tensors_of(value)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for f in dataclasses.fields(batch):
            yield from tensors_of(getattr(batch, f.name))


def prefetched(items: Iterable[T], move: Callable[[T], T], device: torch.device | None = None) -> Iterator[T]:
    """``move(item)`` for each of ``items``, in order, moving the next item before handing out the current one:
    its copy runs while the caller's work on the current one does. On a CUDA ``device`` the copies go on a side
    stream that the caller's stream waits for before it reads a moved item."""
    stream = torch.cuda.Stream(device) if device is not None and device.type == "cuda" else None

    def issue(item: T) -> T:
        if stream is None:
            return move(item)
        with torch.cuda.stream(stream):
            return move(item)

    def ready(moved: T) -> T:
        if stream is not None:
            current = torch.cuda.current_stream(device)
            current.wait_stream(stream)
            for tensor in tensors_of(moved):  # memory made on the side stream is used on this one
                tensor.record_stream(current)
        return moved

    iterator = iter(items)
    try:
        ahead = issue(next(iterator))
    except StopIteration:
        return
    for item in iterator:
        current, ahead = ahead, issue(item)
        yield ready(current)
    yield ready(ahead)


__all__ = ["move_batch", "padding_multiple", "pins_memory", "prefetched", "tensors_of"]
