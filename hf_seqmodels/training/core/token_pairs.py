"""Indexed token files: sentence pairs of a parallel corpus and BERT's documents, tokenised once.

Built on :mod:`.token_files` (the cache folder, its key, the writers and memory maps). A corpus of
sentences is one flat id array and an ``int64`` offsets array ``(N + 1,)``, as fairseq's binarised data:
sentence ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``, and ``np.diff(offsets)`` is the length index.

* :func:`seq2seq_token_pairs`: the encoded sentence pairs of a parallel corpus, exactly
  :func:`~..seq2seq.data.encode_corpus`'s (``A <eos>`` on both sides), source and target each a flat
  array with offsets, so :class:`~..seq2seq.data.LengthBatches` batches by length from the index alone;
* :func:`bert_token_documents`: BERT's documents of tokenised sentences, exactly
  :func:`~..bert.data.tokenize_documents` of :func:`~..bert.data.split_documents`'s documents: every
  sentence in order, with sentence offsets and document offsets (sentences per document). The sentences
  of a document are contiguous, so an NSP segment (consecutive sentences, truncated at either end) is
  one slice of the id array.

The corpus is read one pair / one line at a time and encoded in batches; RAM does not grow with it.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import multiprocessing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .text import parallel_file_kind
from .token_files import (
    LINE_BREAKS,
    ArrayWriter,
    _batched,
    cache_key,
    line_pieces,
    map_array,
    prepare,
    token_dtype,
)

# --------------------------------------------------------------------------- indexed sequences


class TokenSequences:
    """Sequences of ids stored as one flat array and ``offsets`` ``(N + 1,)``: item ``i`` is
    ``tokens[offsets[i]:offsets[i + 1]]``. Indexing gives a Python ``list`` of ids (a slice, a list of
    them), so it stands in for a ``list[list[int]]``; :attr:`lengths` is the length index ``(N,)``."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray):
        self.tokens, self.offsets = tokens, offsets

    def __len__(self) -> int:
        return max(len(self.offsets) - 1, 0)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"sequence index {index} out of range for {len(self)} sequences")
        return self.tokens[self.offsets[index] : self.offsets[index + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return (self[i] for i in range(len(self)))

    @property
    def lengths(self) -> np.ndarray:
        """``(N,)`` int64: the number of ids of every sequence."""
        return np.diff(self.offsets)


def _sequence_writers(folder: Path, name: str, dtype: np.dtype) -> tuple[ArrayWriter, ArrayWriter]:
    tokens, offsets = ArrayWriter(folder / f"{name}.bin", dtype), ArrayWriter(folder / f"{name}_offsets.bin", np.int64)
    offsets.append([0])
    return tokens, offsets


def _append_sequences(tokens: ArrayWriter, offsets: ArrayWriter, sequences: list[list[int]]) -> None:
    tokens.append(np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64))
    offsets.append(tokens.length - sum(map(len, sequences)) + np.cumsum([len(s) for s in sequences], dtype=np.int64))


def map_sequences(folder: Path, name: str, meta: dict) -> TokenSequences:
    return TokenSequences(map_array(folder, name, meta), map_array(folder, f"{name}_offsets", meta))


# --------------------------------------------------------------------------- sequence to sequence


@dataclass
class TokenPairs:
    """Encoded sentence pairs on disk: ``sources[i]``/``targets[i]`` are id lists ending with ``<eos>``
    (what :class:`~..seq2seq.data.EncodedPairs` holds in RAM); ``.lengths`` of each side index them.
    ``pairs_read`` counts the pairs of the corpus before those outside the length limits were dropped."""

    sources: TokenSequences
    targets: TokenSequences
    folder: Path
    pairs_read: int = 0

    def __len__(self) -> int:
        return len(self.sources)


def _stream_tsv(path: Path, source_field: str, target_field: str) -> Iterator[tuple[str, str]]:
    from ..seq2seq.data import _open_text

    with _open_text(path) as f:
        rows = (row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row)
        if source_field.isdigit() and target_field.isdigit():
            columns = int(source_field), int(target_field)
        else:
            header = next(rows, [])
            missing = [name for name in (source_field, target_field) if name not in header]
            if missing:
                raise KeyError(f"{str(path)!r}: no column {missing[0]!r} in the header {header}.")
            columns = header.index(source_field), header.index(target_field)
        for number, row in enumerate(rows, start=1):
            if len(row) <= max(columns):
                raise ValueError(f"{str(path)!r}: row {number} has fewer than {max(columns) + 1} columns.")
            yield row[columns[0]], row[columns[1]]


def _stream_jsonl(path: Path, source_field: str, target_field: str) -> Iterator[tuple[str, str]]:
    from ..seq2seq.data import _field, _open_text

    with _open_text(path) as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                record = json.loads(line)
                yield _field(record, source_field, path, number), _field(record, target_field, path, number)


def _stream_aligned(source_file: Path, target_file: Path) -> Iterator[tuple[str, str]]:
    from ..seq2seq.data import _open_text

    with _open_text(source_file) as sources, _open_text(target_file) as targets:
        for number, (source, target) in enumerate(itertools.zip_longest(sources, targets), start=1):
            if source is None or target is None:
                shorter = source_file if source is None else target_file
                raise ValueError(f"A parallel corpus needs as many targets as sources: {str(shorter)!r} ends "
                                 f"at line {number - 1}.")
            yield source.rstrip("\r\n"), target.rstrip("\r\n")


def stream_parallel_corpus(file: str | None = None, *, source_file: str | None = None,
                           target_file: str | None = None, source_field: str = "source",
                           target_field: str = "target") -> Iterator[tuple[str, str]]:
    """``(source, target)`` pairs read one line at a time, as :func:`~..seq2seq.data.read_parallel_corpus`
    reads them all."""
    if file is not None:
        stream = _stream_jsonl if parallel_file_kind(file) == ".jsonl" else _stream_tsv
        return stream(Path(file), source_field, target_field)
    if source_file is None or target_file is None:
        raise ValueError("Give a .tsv/.jsonl file, or both a source file and a target file.")
    return _stream_aligned(Path(source_file), Path(target_file))


def _encode_batch(batch: list[tuple[str, str]], tokenizer, **options):
    """:func:`~..seq2seq.data.encode_corpus` of one batch of ``(source, target)`` pairs."""
    from ..seq2seq.data import ParallelCorpus, encode_corpus

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
        for group in _batched(batches, 4 * num_proc):
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
        from ..seq2seq.data import seq2seq_tokenizer

        # switched to `A <eos>` once: a copy per batch would cost a tokenizer's memory per batch
        target_tok = seq2seq_tokenizer(tokenizer, "target")
        source_tok = seq2seq_tokenizer(source_tokenizer or tokenizer, "source")
        options = dict(source_tokenizer=source_tok, max_source_length=max_source_length,
                       max_target_length=max_target_length, drop_longer=drop_longer)
        sides = {name: _sequence_writers(folder, name, token_dtype(tok))
                 for name, tok in (("source", source_tokenizer or tokenizer), ("target", tokenizer))}
        stream = stream_parallel_corpus(file, source_file=source_file, target_file=target_file,
                                        source_field=source_field, target_field=target_field)
        counted = Counted(_batched(itertools.islice(stream, max_pairs), pairs_per_call))
        for pairs in tqdm(encode_pair_batches(counted, target_tok, num_proc, **options),
                          desc="Encoding sentence pairs", unit=" batches"):
            _append_sequences(*sides["source"], pairs.sources)
            _append_sequences(*sides["target"], pairs.targets)
        read = counted.items
        arrays = {}
        for name, (tokens, offsets) in sides.items():
            arrays[name], arrays[f"{name}_offsets"] = tokens.close(), offsets.close()
        return {"arrays": arrays, "pairs_read": read}

    folder, meta = prepare(key, build, cache_dir=cache_dir, overwrite_cache=overwrite_cache, accelerator=accelerator)
    return TokenPairs(map_sequences(folder, "source", meta), map_sequences(folder, "target", meta), folder,
                      meta["pairs_read"])


# --------------------------------------------------------------------------- BERT documents


class TokenDocuments:
    """Documents of tokenised sentences on disk: ``documents[d]`` is a ``list`` of sentences (id lists),
    as :func:`~..bert.data.tokenize_documents` returns them. ``sentences`` holds every sentence in order;
    ``document_offsets`` ``(D + 1,)`` indexes sentences. Slicing documents gives a view. ``documents_read``
    counts the documents of the text before those without tokens were dropped (None for a view); ``folder``
    holds the token files (None in RAM)."""

    def __init__(self, sentences: TokenSequences, document_offsets: np.ndarray, documents_read: int | None = None,
                 folder: Path | None = None):
        self.sentences, self.document_offsets, self.documents_read = sentences, document_offsets, documents_read
        self.folder = folder

    @classmethod
    def from_lists(cls, documents: list[list[list[int]]]) -> TokenDocuments:
        """The same documents held in RAM as flat ``int64`` arrays (for a corpus that did not come from files)."""
        sentences = [sentence for document in documents for sentence in document]
        tokens = np.fromiter(itertools.chain.from_iterable(sentences), dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences], dtype=np.int64)])
        document_offsets = np.concatenate([[0], np.cumsum([len(d) for d in documents], dtype=np.int64)])
        return cls(TokenSequences(tokens, offsets), document_offsets, len(documents))

    def __len__(self) -> int:
        return max(len(self.document_offsets) - 1, 0)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("Documents can be sliced with step 1 only.")
            return TokenDocuments(self.sentences, self.document_offsets[start : max(start, stop) + 1],
                                  folder=self.folder)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"document index {index} out of range for {len(self)} documents")
        return self.sentences[int(self.document_offsets[index]) : int(self.document_offsets[index + 1])]

    def __iter__(self) -> Iterator[list[list[int]]]:
        return (self[i] for i in range(len(self)))


def stream_documents(path: str | Path) -> Iterator[list[str]]:
    """The documents of a text file as lists of sentences, one at a time: exactly
    ``split_documents(read_text_file(path))`` (a first pass looks for WikiText ``= Title =`` lines)."""
    from ..bert.data import _HEADING, _SENTENCE_END, _is_title

    by_title = any(_is_title(piece.rstrip("".join(LINE_BREAKS))) for piece in line_pieces(path))
    document: list[str] = []
    for piece in line_pieces(path):
        line = piece[:-1] if piece[-1] in LINE_BREAKS else piece
        stripped = line.strip()
        heading = by_title and _HEADING.match(line)
        if (heading and _is_title(line)) or (not stripped and not by_title):
            if document:
                yield document
            document = []
        if heading or not stripped:
            continue
        document.extend(s.strip() for s in _SENTENCE_END.split(stripped) if s.strip())
    if document:
        yield document


def bert_token_documents(train_files: Iterable[str | Path], tokenizer, *, sentences_per_call: int = 4096,
                         cache_dir: str | Path | None = None, overwrite_cache: bool = False,
                         accelerator=None) -> TokenDocuments:
    """BERT's documents tokenised once into token files: exactly
    ``tokenize_documents([d for f in train_files for d in split_documents(read_text_file(f))], tokenizer)``
    (sentences without special tokens; empty sentences and then empty documents dropped)."""
    train_files = list(train_files)
    key = cache_key("bert", {"tokenizer": tokenizer}, train_files, {})

    def build(folder: Path) -> dict:
        tokens, offsets = _sequence_writers(folder, "sentences", token_dtype(tokenizer))
        documents = ArrayWriter(folder / "document_offsets.bin", np.int64)
        documents.append([0])
        stream = itertools.chain.from_iterable(stream_documents(f) for f in train_files)
        read = 0
        for batch in tqdm(_document_batches(stream, sentences_per_call), desc="Tokenising documents",
                          unit=" batches"):
            ids = _tokenize_sentences([s for document in batch for s in document], tokenizer)
            read += len(batch)
            sizes = np.array([sum(1 for sentence in ids_of if sentence) for ids_of in _split_sizes(ids, batch)])
            _append_sequences(tokens, offsets, [sentence for sentence in ids if sentence])
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


__all__ = [
    "TokenDocuments",
    "TokenPairs",
    "TokenSequences",
    "bert_token_documents",
    "map_sequences",
    "seq2seq_token_pairs",
    "stream_documents",
    "stream_parallel_corpus",
]
