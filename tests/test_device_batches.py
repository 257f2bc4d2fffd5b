"""Batches pinned and copied to a CUDA device one update ahead (``--dataloader_pin_memory``), and padded to
multiples of 8 there (``--pad_to_multiple_of``); on a CPU the loop makes them when due, unpinned and unrounded,
as before."""

from __future__ import annotations

import pytest
import torch

from hf_seqmodels import registry
from hf_seqmodels.training.bert.data import collate_examples
from hf_seqmodels.training.core.device_batches import move_batch, padding_multiple, pins_memory, prefetched
from hf_seqmodels.training.lm.data import Window
from hf_seqmodels.training.lm.streaming import StreamingWindows
from hf_seqmodels.training.seq2seq.data import EncodedPairs, LengthBatches, collate_pairs

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


def test_padding_rounds_to_8_on_a_gpu_by_default_and_never_on_a_cpu_unless_asked():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert padding_multiple(None, cuda) == 8
    assert padding_multiple(None, cpu) is None
    assert padding_multiple(64, cpu) == 64
    assert padding_multiple(1, cuda) is None  # 1: no rounding


def random_pairs(generator: torch.Generator, vocab_size: int, count: int) -> EncodedPairs:
    lengths = torch.randint(3, 12, (count, 2), generator=generator).tolist()
    return EncodedPairs(*([torch.randint(4, vocab_size, (n,), generator=generator).tolist() for n in side]
                          for side in zip(*lengths, strict=True)))


@pytest.mark.parametrize("name", ["transformer", "rnn_seq2seq"])
def test_a_translation_batch_padded_to_a_multiple_of_8_gives_the_same_loss(name):
    family = registry.family_named(name)
    config = family.tiny_config()
    torch.manual_seed(0)
    model = family.main_head(config).eval()
    pairs = random_pairs(torch.Generator().manual_seed(0), config.vocab_size, 4)
    plain = collate_pairs(pairs.sources, pairs.targets, config.pad_token_id)
    padded = collate_pairs(pairs.sources, pairs.targets, config.pad_token_id, pad_to_multiple_of=8)
    assert padded["input_ids"].shape[1] % 8 == 0 and padded["labels"].shape[1] % 8 == 0
    assert padded["input_ids"].shape != plain["input_ids"].shape  # the test pads something
    with torch.no_grad():
        torch.testing.assert_close(model(**padded).loss, model(**plain).loss)


def test_length_batches_round_both_sides_up_to_the_multiple():
    pairs = random_pairs(torch.Generator().manual_seed(1), 50, 12)
    batches = LengthBatches(pairs, 0, max_tokens=40, pad_to_multiple_of=8)
    for index in range(len(batches)):
        batch = batches.batch(index)
        assert batch["input_ids"].shape[1] % 8 == 0 and batch["labels"].shape[1] % 8 == 0
        assert batch["num_tokens"] == int((batch["labels"] != -100).sum())  # the count ignores the padding


def test_a_bert_pretraining_batch_padded_to_a_multiple_of_8_gives_the_same_loss():
    family = registry.family_named("bert")
    config = family.tiny_config()
    torch.manual_seed(0)
    model = family.main_head(config).eval()
    generator = torch.Generator().manual_seed(0)
    examples = [{"input_ids": torch.randint(5, config.vocab_size, (n,), generator=generator).tolist(),
                 "token_type_ids": [0] * (n // 2) + [1] * (n - n // 2), "next_sentence_label": n % 2}
                for n in (9, 13, 6)]
    plain = collate_examples(examples, config.pad_token_id)
    padded = collate_examples(examples, config.pad_token_id, pad_to_multiple_of=8)
    assert padded["input_ids"].shape[1] == 16
    plain["labels"] = plain["input_ids"].masked_fill(torch.rand(plain["input_ids"].shape, generator=generator) > 0.3,
                                                     -100).masked_fill(plain["attention_mask"] == 0, -100)
    plain["labels"][:, 1] = plain["input_ids"][:, 1]
    padded["labels"] = torch.full_like(padded["input_ids"], -100)
    padded["labels"][:, : plain["labels"].shape[1]] = plain["labels"]
    with torch.no_grad():
        for masked_positions_only in (True, False):
            torch.testing.assert_close(model(**padded, masked_positions_only=masked_positions_only).loss,
                                       model(**plain, masked_positions_only=masked_positions_only).loss)
