"""The sentence pairs of a parallel corpus encoded once into token files (:func:`seq2seq_token_pairs`).

Exactly :func:`~.data.encode_corpus`'s pairs (``A <eos>`` on both sides), prepared and cached by
:mod:`..core.token_files`: source and target are each a flat id array with offsets (sentence ``i`` is
``tokens[offsets[i]:offsets[i + 1]]``), so :class:`~.data.LengthBatches` batches by length from the index alone.
The corpus is read one pair at a time (:func:`~.data.stream_parallel_corpus`) and encoded in batches, in this
process or in worker processes; RAM does not grow with it.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from ..core.token_files import (
    TokenSequences,
    append_sequences,
    batched,
    cache_key,
    map_sequences,
    prepare,
    sequence_writers,
    token_dtype,
)
from .data import ParallelCorpus, encode_corpus, seq2seq_tokenizer, stream_parallel_corpus


@dataclass
class TokenPairs:
    """Encoded sentence pairs on disk: ``sources[i]``/``targets[i]`` are id lists ending with ``<eos>``
    (what :class:`~.data.EncodedPairs` holds in RAM); ``.lengths`` of each side index them.
    ``pairs_read`` counts the pairs of the corpus before those outside the length limits were dropped."""

    sources: TokenSequences
    targets: TokenSequences
    folder: Path
    pairs_read: int = 0

    def __len__(self) -> int:
        return len(self.sources)


def _encode_batch(batch: list[tuple[str, str]], tokenizer, **options):
    """:func:`~.data.encode_corpus` of one batch of ``(source, target)`` pairs."""
    return encode_corpus(ParallelCorpus([s for s, _ in batch], [t for _, t in batch]), tokenizer, **options)


class Counted:
    """The batches of an iterable, counting the items of those handed out."""

    def __init__(self, batches: Iterable[list]):
        self.batches, self.items = iter(batches), 0

    def __iter__(self) -> Iterator[list]:
        for batch in self.batches:
            self.items += len(batch)
            yield batch


def encode_pair_batches(batches: Iterable[list[tuple[str, str]]], tokenizer, num_proc: int | None = None,
                        **options) -> Iterator:
    """:func:`_encode_batch` of each of ``batches``, in order: in this process, or with ``num_proc`` > 1 in
    that many worker processes (``--preprocessing_num_workers``), ``4 × num_proc`` batches in flight at a
    time so that a corpus of any size is never read ahead into memory."""
    encode = functools.partial(_encode_batch, tokenizer=tokenizer, **options)
    if not num_proc or num_proc < 2:
        yield from map(encode, batches)
        return
    with multiprocessing.get_context("spawn").Pool(num_proc) as pool:
        for group in batched(batches, 4 * num_proc):
            yield from pool.map(encode, group)


def seq2seq_token_pairs(tokenizer, file: str | None = None, *, source_file: str | None = None,
                        target_file: str | None = None, source_field: str = "source", target_field: str = "target",
                        source_tokenizer=None, max_source_length: int | None = None,
                        max_target_length: int | None = None, drop_longer: bool = True, max_pairs: int | None = None,
                        pairs_per_call: int = 4096, cache_dir: str | Path | None = None, overwrite_cache: bool = False,
                        accelerator=None, num_proc: int | None = None) -> TokenPairs:
    """The pairs of a parallel corpus encoded once into token files: exactly
    ``encode_corpus(read_parallel_corpus(...), tokenizer, source_tokenizer=..., max_*_length=..., drop_longer=...)``
    (the ``A <eos>`` template, pairs with an empty side dropped, long pairs dropped or cut), encoded
    ``pairs_per_call`` pairs at a time (by ``num_proc`` processes: :func:`encode_pair_batches`); ``max_pairs`` reads
    only the corpus's first pairs (``--max_train_samples``)."""
    if max_pairs is not None and (isinstance(max_pairs, bool) or max_pairs < 1):
        raise ValueError(f"Invalid `max_pairs`={max_pairs!r}: expected an integer >= 1 or None (every pair).")
    files = [f for f in (file, source_file, target_file) if f is not None]
    arguments = {"source_field": source_field, "target_field": target_field, "max_source_length": max_source_length,
                 "max_target_length": max_target_length, "drop_longer": drop_longer, "max_pairs": max_pairs,
                 "layout": "file" if file is not None else "aligned"}
    key = cache_key("seq2seq", {"target": tokenizer, "source": source_tokenizer}, files, arguments)

    def build(folder: Path) -> dict:
        # switched to `A <eos>` once: a copy per batch would cost a tokenizer's memory per batch
        target_tok = seq2seq_tokenizer(tokenizer, "target")
        source_tok = seq2seq_tokenizer(source_tokenizer or tokenizer, "source")
        options = dict(source_tokenizer=source_tok, max_source_length=max_source_length,
                       max_target_length=max_target_length, drop_longer=drop_longer)
        sides = {name: sequence_writers(folder, name, token_dtype(tok))
                 for name, tok in (("source", source_tokenizer or tokenizer), ("target", tokenizer))}
        stream = stream_parallel_corpus(file, source_file=source_file, target_file=target_file,
                                        source_field=source_field, target_field=target_field)
        counted = Counted(batched(itertools.islice(stream, max_pairs), pairs_per_call))
        for pairs in tqdm(encode_pair_batches(counted, target_tok, num_proc, **options),
                          desc="Encoding sentence pairs", unit=" batches"):
            append_sequences(*sides["source"], pairs.sources)
            append_sequences(*sides["target"], pairs.targets)
        read = counted.items
        arrays = {}
        for name, (tokens, offsets) in sides.items():
            arrays[name], arrays[f"{name}_offsets"] = tokens.close(), offsets.close()
        return {"arrays": arrays, "pairs_read": read}

    folder, meta = prepare(key, build, cache_dir=cache_dir, overwrite_cache=overwrite_cache, accelerator=accelerator)
    return TokenPairs(map_sequences(folder, "source", meta), map_sequences(folder, "target", meta), folder,
                      meta["pairs_read"])


__all__ = ["Counted", "TokenPairs", "encode_pair_batches", "seq2seq_token_pairs"]
