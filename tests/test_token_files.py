"""Tests of the token files (``hf_seqmodels.training.core.token_files``, ``training.lm.token_streams``,
``training.seq2seq.token_pairs``, ``training.bert.token_documents``) and of LM windows read
from them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tokenizer_test_utils
import torch
from transformers import PreTrainedTokenizerFast

from hf_seqmodels.training.bert.token_documents import bert_token_documents
from hf_seqmodels.training.core import token_files
from hf_seqmodels.training.core.text import load_text_splits, tokenize_texts
from hf_seqmodels.training.core.token_files import token_dtype
from hf_seqmodels.training.lm import token_streams
from hf_seqmodels.training.lm.data import (
    ShuffledContextWindows,
    StreamWindows,
    batchify,
    shard_rows,
    stream_slice,
)
from hf_seqmodels.training.lm.token_streams import lm_token_streams
from hf_seqmodels.training.seq2seq.token_pairs import seq2seq_token_pairs

CHARACTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,!?=\n\x0c\u2028"


def char_tokenizer(extra: str = "", size: int | None = None) -> PreTrainedTokenizerFast:
    """A character tokenizer (pad 0, unk 1, bos 2, eos 3, cls 4, sep 5, mask 6; ``<bos> A`` template);
    ``size`` pads the vocabulary with unused tokens."""
    return tokenizer_test_utils.char_tokenizer(CHARACTERS + extra, bert_specials=True, size=size)


def lines_text(count: int) -> str:
    # Windows line ends, a form feed and a Unicode line separator: the lines str.splitlines cuts at
    return "".join(f"Line {i} the cat sat.{' x' * (i % 5)}\r\n" for i in range(count)) + "a\x0cb\u2028c\nlast"


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_bytes(lines_text(300).encode())
    return path


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 100 characters: lines and the validation cut fall across block boundaries."""
    monkeypatch.setattr(token_files, "BLOCK_CHARS", 100)


def test_lm_streams_equal_in_ram_tokenisation(corpus, tmp_path):
    tokenizer = char_tokenizer()
    streams = lm_token_streams(corpus, tokenizer, validation_split_percentage=13, lines_per_chunk=7,
                               cache_dir=tmp_path / "cache")
    texts = load_text_splits(str(corpus), validation_split_percentage=13)
    assert isinstance(streams.train, np.memmap) and streams.train.dtype == np.uint16
    assert not streams.train.flags.writeable
    assert streams.train.tolist() == tokenize_texts(texts.train, tokenizer, lines_per_chunk=7).tolist()
    assert streams.validation.tolist() == tokenize_texts(texts.validation, tokenizer, lines_per_chunk=7).tolist()


def test_lm_streams_with_a_validation_file(corpus, tmp_path):
    validation = tmp_path / "valid.txt"
    validation.write_text("the dog\nsat\n")
    tokenizer = char_tokenizer()
    streams = lm_token_streams(corpus, tokenizer, validation_file=validation, cache_dir=tmp_path / "cache")
    assert streams.train.tolist() == tokenize_texts([corpus.read_text()], tokenizer).tolist()
    assert streams.validation.tolist() == tokenizer("the dog\nsat\n", add_special_tokens=False)["input_ids"]


def test_cache_is_reused_and_invalidated(corpus, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = lm_token_streams(corpus, char_tokenizer(), cache_dir=cache)
    calls = []
    monkeypatch.setattr(token_streams, "_write_stream", lambda *a: calls.append(a) or pytest.fail("re-tokenised"))
    again = lm_token_streams(corpus, char_tokenizer(), cache_dir=cache)  # an equal tokenizer: the same files
    assert again.folder == first.folder and not calls
    monkeypatch.undo()
    monkeypatch.setattr(token_files, "BLOCK_CHARS", 100)
    changed = lm_token_streams(corpus, char_tokenizer(extra="@"), cache_dir=cache)  # other ids: new files
    assert changed.folder != first.folder and changed.train.tolist() != first.train.tolist()
    other = lm_token_streams(corpus, char_tokenizer(), validation_split_percentage=20, cache_dir=cache)
    assert other.folder != first.folder
    corpus.write_text("Short new text.\nAnother line.\n")  # a changed file: new size and mtime
    os.utime(corpus, ns=(1, 1))
    fresh = lm_token_streams(corpus, char_tokenizer(), cache_dir=cache)
    assert fresh.folder != first.folder
    assert fresh.train.tolist() + fresh.validation.tolist() == tokenize_texts([corpus.read_text()],
                                                                            char_tokenizer()).tolist()
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary folder left behind


def test_overwrite_cache_prepares_again(corpus, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    lm_token_streams(corpus, char_tokenizer(), cache_dir=cache)
    calls = []
    original = token_streams._write_stream
    monkeypatch.setattr(token_streams, "_write_stream", lambda *a: calls.append(1) or original(*a))
    streams = lm_token_streams(corpus, char_tokenizer(), cache_dir=cache, overwrite_cache=True)
    assert calls and len(streams.train) > 0 and len(list(cache.iterdir())) == 1


def test_a_failed_preparation_leaves_no_folder(corpus, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="has no tokens"):
        lm_token_streams(empty, char_tokenizer(), cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_dtype_follows_the_vocabulary_size():
    assert token_dtype(char_tokenizer()) == np.uint16
    assert token_dtype(char_tokenizer(size=70_000)) == np.uint32


def test_large_vocabulary_is_stored_as_uint32(corpus, tmp_path):
    tokenizer = char_tokenizer(size=70_000)
    streams = lm_token_streams(corpus, tokenizer, cache_dir=tmp_path / "cache")
    assert streams.train.dtype == np.uint32
    assert streams.train[:20].tolist() == tokenizer(corpus.read_text()[:20], add_special_tokens=False)["input_ids"]


def test_stream_windows_from_the_memory_map_equal_the_in_ram_windows(corpus, tmp_path):
    tokenizer = char_tokenizer()
    mapped = lm_token_streams(corpus, tokenizer, cache_dir=tmp_path / "cache").train
    in_ram = torch.tensor(mapped.tolist(), dtype=torch.long)
    for rank in range(2):
        windows = StreamWindows(shard_rows(batchify(mapped, 6), rank, 2), bptt=11)
        reference = StreamWindows(shard_rows(batchify(in_ram, 6), rank, 2), bptt=11)
        assert isinstance(windows.streams, np.memmap)  # rows are views of the file, not copies
        assert len(windows) == len(reference)
        for index in range(len(windows)):
            got, want = windows.batch(index), reference.batch(index)
            assert got.input_ids.dtype == torch.long
            assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.labels, want.labels)
    assert torch.equal(stream_slice(mapped, 5, 37), in_ram[5:37])


def test_shuffled_windows_from_the_memory_map_equal_the_in_ram_windows(corpus, tmp_path):
    mapped = lm_token_streams(corpus, char_tokenizer(), cache_dir=tmp_path / "cache").train
    in_ram = torch.tensor(mapped.tolist(), dtype=torch.long)
    options = dict(context_size=4, block_size=9, global_batch_size=6, num_processes=2, seed=3, fill_id=0)
    for rank in range(2):
        windows = ShuffledContextWindows(mapped, process_index=rank, **options)
        reference = ShuffledContextWindows(in_ram, process_index=rank, **options)
        for epoch in range(2):
            for index in range(len(windows)):
                got, want = windows.batch(index, epoch), reference.batch(index, epoch)
                for field in ("input_ids", "labels", "context"):
                    assert torch.equal(getattr(got, field), getattr(want, field)), field


def test_shuffled_windows_fill_the_context_before_the_stream():
    ids = np.arange(10, 34, dtype=np.uint16)  # 24 tokens: 5 blocks of 4 on a grid shifted by 0..3
    windows = ShuffledContextWindows(ids, context_size=3, block_size=4, global_batch_size=5, fill_id=-1)
    epoch = next(e for e in range(20) if windows.layout(e)[0] == 1)  # a grid starting at the second token
    batch = windows.batch(0, epoch)  # the 5 blocks of 4 tokens in a random order
    by_start = {int(row[0]): ctx for row, ctx in zip(batch.input_ids, batch.context.tolist(), strict=True)}
    assert sorted(by_start) == [11, 15, 19, 23, 27]
    assert by_start[11] == [-1, -1, 10] and by_start[15] == [12, 13, 14] and by_start[27] == [24, 25, 26]


def test_seq2seq_pairs_equal_encode_corpus(tmp_path):
    from hf_seqmodels.training.seq2seq.data import encode_corpus, read_parallel_corpus

    sources = [f"source {i}{' long' * (i % 7)}" for i in range(50)] + ["", "kept"]
    targets = [f"target {i}" for i in range(50)] + ["dropped", ""]
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n")
    files = dict(source_file=str(tmp_path / "src.txt"), target_file=str(tmp_path / "tgt.txt"))
    tokenizer = char_tokenizer()
    pairs = seq2seq_token_pairs(tokenizer, **files, max_source_length=20, pairs_per_call=8,
                                cache_dir=tmp_path / "cache")
    reference = encode_corpus(read_parallel_corpus(**files), tokenizer, max_source_length=20)
    assert len(pairs) == len(reference) < 50
    assert list(pairs.sources) == reference.sources and list(pairs.targets) == reference.targets
    assert pairs.sources.lengths.tolist() == [len(s) for s in reference.sources]
    assert pairs.targets[-1][-1] == tokenizer.eos_token_id and pairs.sources[1:3] == reference.sources[1:3]


def test_seq2seq_tokenizers_are_switched_once_not_per_batch(tmp_path, monkeypatch):
    """A switched copy of a tokenizer per batch kept ~18 MB each alive (1.4 GB for 290,000 pairs)."""
    from hf_seqmodels.training.seq2seq import data

    (tmp_path / "src.txt").write_text("".join(f"source {i}\n" for i in range(40)))
    (tmp_path / "tgt.txt").write_text("".join(f"target {i}\n" for i in range(40)))
    copies = []

    def switching(tokenizer, **switches):
        switched = switch(tokenizer, **switches)
        if switched is not tokenizer:
            copies.append(switched)
        return switched

    switch = data.with_special_token_switches
    monkeypatch.setattr(data, "with_special_token_switches", switching)
    pairs = seq2seq_token_pairs(char_tokenizer(), source_file=str(tmp_path / "src.txt"),
                                target_file=str(tmp_path / "tgt.txt"), pairs_per_call=4, cache_dir=tmp_path / "c")
    assert len(pairs) == 40 and len(copies) <= 2  # the target and the source side, once each


def test_seq2seq_pairs_from_tsv_and_jsonl(tmp_path):
    from hf_seqmodels.training.seq2seq.data import encode_corpus, read_parallel_corpus

    (tmp_path / "pairs.tsv").write_text("en\tde\nthe cat\tdie Katze\n\nhello\thallo\n")
    (tmp_path / "pairs.jsonl").write_text('{"translation": {"en": "a", "de": "b"}}\n\n'
                                          '{"translation": {"en": "cd", "de": "ef"}}\n')
    tokenizer = char_tokenizer()
    for name, fields in (("pairs.tsv", ("en", "de")), ("pairs.jsonl", ("translation.en", "translation.de"))):
        options = dict(source_field=fields[0], target_field=fields[1])
        pairs = seq2seq_token_pairs(tokenizer, str(tmp_path / name), **options, cache_dir=tmp_path / "cache")
        reference = encode_corpus(read_parallel_corpus(str(tmp_path / name), **options), tokenizer)
        assert list(pairs.sources) == reference.sources and list(pairs.targets) == reference.targets


def test_unequal_aligned_files_are_refused(tmp_path):
    (tmp_path / "src.txt").write_text("a\nb\nc\n")
    (tmp_path / "tgt.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="tgt.txt.*line 2"):
        seq2seq_token_pairs(char_tokenizer(), source_file=str(tmp_path / "src.txt"),
                            target_file=str(tmp_path / "tgt.txt"), cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("titled", [False, True])
def test_bert_documents_equal_tokenize_documents(tmp_path, titled):
    from hf_seqmodels.training.bert.data import split_documents, tokenize_documents

    if titled:
        text = "".join(f" = Title {d} = \n\n = = Section = = \nDoc {d} starts. It goes on! End?\n\n"
                       for d in range(12)) + " = Empty = \n"
    else:
        text = "".join(f"Doc {d} starts. It goes on! End?\nMore of {d}.\n\n\n" for d in range(12)) + "Last."
    path = tmp_path / "docs.txt"
    path.write_text(text)
    tokenizer = char_tokenizer()
    documents = bert_token_documents([path, path], tokenizer, sentences_per_call=5, cache_dir=tmp_path / "cache")
    reference = tokenize_documents(split_documents(text) * 2, tokenizer)
    assert len(documents) == len(reference) and list(documents) == reference
    assert list(documents[3:-2]) == reference[3:-2] and documents[-1] == reference[-1]


CHILD = """
import sys
from accelerate import Accelerator
from hf_seqmodels.training.lm import token_streams
from hf_seqmodels.training.lm.token_streams import lm_token_streams
from test_token_files import char_tokenizer
from distributed_utils import rank_logger

accelerator = Accelerator(cpu=True)
say = rank_logger()
write_stream = token_streams._write_stream
def reporting(*args):
    say("tokenises")
    write_stream(*args)
token_streams._write_stream = reporting
streams = lm_token_streams(sys.argv[1], char_tokenizer(), cache_dir=sys.argv[2], accelerator=accelerator)
say(f"tokens {len(streams.train)} folder {streams.folder.name}")
"""


@pytest.mark.slow
def test_two_processes_prepare_once(corpus, tmp_path):
    """Under ``accelerate launch`` with 2 CPU processes, the main process prepares and both map the files."""
    from distributed_utils import launch_child_script

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    logged = launch_child_script(script, [str(corpus), str(tmp_path / "c")], tmp_path)
    lines = sorted(line for line in logged if " tokens " in line)
    assert len(lines) == 2 and lines[0].split()[2:] == lines[1].split()[2:]
    assert sorted(set(line for line in logged if "tokenises" in line)) == ["rank 0 tokenises"]
    assert len(list((tmp_path / "c").iterdir())) == 1
