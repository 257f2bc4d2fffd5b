"""Batches pinned and copied to a CUDA device one update ahead (``--dataloader_pin_memory``); on a CPU the loop
makes them when due, unpinned, as before."""

from __future__ import annotations

import pytest
import torch

from hf_seqmodels.training.core.device_batches import move_batch, pins_memory, prefetched
from hf_seqmodels.training.lm.data import Window
from hf_seqmodels.training.lm.streaming import StreamingWindows

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_only_a_cuda_device_pins_memory():
    assert pins_memory(True, torch.device("cuda", 0)) is True
    assert pins_memory(False, torch.device("cuda", 0)) is False  # --dataloader_pin_memory false
    assert pins_memory(True, torch.device("cpu")) is False  # pinning on a CPU run would only cost


def test_prefetched_moves_the_next_item_while_the_current_one_is_used():
    events = []

    def move(item):
        events.append(f"move {item}")
        return item * 10

    for moved in prefetched(range(3), move):
        events.append(f"use {moved}")
    assert events == ["move 0", "move 1", "use 0", "move 2", "use 10", "use 20"]
    assert list(prefetched([], move)) == []


def test_move_batch_keeps_the_structure_of_every_task_s_batch():
    window = Window(input_ids=torch.arange(6).view(2, 3), labels=torch.ones(2, 3, dtype=torch.long))
    moved = move_batch([window], torch.device("cpu"))
    assert isinstance(moved[0], Window) and moved[0].context is None
    torch.testing.assert_close(moved[0].input_ids, window.input_ids)
    batch = {"input_ids": torch.ones(2, 4, dtype=torch.long), "num_tokens": 8}
    assert move_batch(batch, torch.device("cpu"))["num_tokens"] == 8


def test_a_stream_whose_position_is_checkpointed_is_not_read_ahead():
    assert StreamingWindows.reads_ahead is False


@CUDA
def test_prefetched_batches_arrive_on_the_gpu_equal_and_in_order():
    device = torch.device("cuda", torch.cuda.current_device())
    batches = [{"input_ids": torch.full((4, 8), i), "num_tokens": 32} for i in range(4)]
    received = list(prefetched(batches, lambda batch: move_batch(batch, device), device))
    assert [batch["num_tokens"] for batch in received] == [32] * 4
    for i, batch in enumerate(received):
        assert batch["input_ids"].device == device
        assert torch.equal(batch["input_ids"].cpu(), batches[i]["input_ids"])
