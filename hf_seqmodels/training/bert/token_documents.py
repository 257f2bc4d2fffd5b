"""BERT's documents tokenised once into token files (:func:`bert_token_documents`).

Exactly :func:`~.data.tokenize_documents` of :func:`~.data.split_documents`'s documents, prepared and cached by
:mod:`..core.token_files`: every sentence in order (a flat id array with sentence offsets) and document offsets
(sentences per document), read back as :class:`~.data.TokenDocuments`. The sentences of a document are contiguous,
so an NSP segment (consecutive sentences, truncated at either end) is one slice of the id array. The text is read
one line at a time (:func:`~.data.stream_documents`) and tokenised in batches; RAM does not grow with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..core.token_files import (
    ArrayWriter,
    append_sequences,
    cache_key,
    map_array,
    map_sequences,
    prepare,
    sequence_writers,
    token_dtype,
)
from .data import TokenDocuments, stream_documents


def bert_token_documents(train_files: Iterable[str | Path], tokenizer, *, sentences_per_call: int = 4096,
                         cache_dir: str | Path | None = None, overwrite_cache: bool = False,
                         accelerator=None) -> TokenDocuments:
    """BERT's documents tokenised once into token files: exactly
    ``tokenize_documents([d for f in train_files for d in split_documents(read_text_file(f))], tokenizer)``
    (sentences without special tokens; empty sentences and then empty documents dropped)."""
    train_files = list(train_files)
    key = cache_key("bert", {"tokenizer": tokenizer}, train_files, {})

    def build(folder: Path) -> dict:
        tokens, offsets = sequence_writers(folder, "sentences", token_dtype(tokenizer))
        documents = ArrayWriter(folder / "document_offsets.bin", np.int64)
        documents.append([0])
        stream = itertools.chain.from_iterable(stream_documents(f) for f in train_files)
        read = 0
        for batch in tqdm(_document_batches(stream, sentences_per_call), desc="Tokenising documents",
                          unit=" batches"):
            ids = _tokenize_sentences([s for document in batch for s in document], tokenizer)
            read += len(batch)
            sizes = np.array([sum(1 for sentence in ids_of if sentence) for ids_of in _split_sizes(ids, batch)])
            append_sequences(tokens, offsets, [sentence for sentence in ids if sentence])
            counts = sizes[sizes > 0]
            documents.append(offsets.length - 1 - counts.sum() + np.cumsum(counts))
        arrays = {"sentences": tokens.close(), "sentences_offsets": offsets.close(),
                  "document_offsets": documents.close()}
        return {"arrays": arrays, "documents_read": read}

    folder, meta = prepare(key, build, cache_dir=cache_dir, overwrite_cache=overwrite_cache, accelerator=accelerator)
    return TokenDocuments(map_sequences(folder, "sentences", meta), map_array(folder, "document_offsets", meta),
                          meta["documents_read"], folder)


def _tokenize_sentences(sentences: list[str], tokenizer) -> list[list[int]]:
    """The ids of ``sentences`` without special tokens (one tokenizer call)."""
    return tokenizer(sentences, add_special_tokens=False)["input_ids"]


def _document_batches(documents: Iterable[list[str]], sentences: int) -> Iterator[list[list[str]]]:
    """Consecutive groups of whole documents holding at least ``sentences`` sentences (the last: fewer)."""
    batch, count = [], 0
    for document in documents:
        batch.append(document)
        count += len(document)
        if count >= sentences:
            yield batch
            batch, count = [], 0
    if batch:
        yield batch


def _split_sizes(ids: list[list[int]], documents: list[list[str]]) -> Iterator[list[list[int]]]:
    """``ids`` of all sentences of ``documents``, cut back into one list per document."""
    start = 0
    for document in documents:
        yield ids[start : start + len(document)]
        start += len(document)


__all__ = ["bert_token_documents"]
