"""The language model's token streams: a plain-text corpus or a ``datasets`` split tokenised once into token files.

:func:`lm_token_streams` writes exactly :func:`~..core.text.tokenize_texts` of :func:`~..core.text.load_text_splits`'s
texts, :func:`lm_dataset_token_streams` the same of a ``datasets`` dataset's splits, each as one flat array of ids per
split, prepared and cached by :mod:`..core.token_files`; :class:`~.data.StreamWindows` reads the windows of
truncated BPTT from them. Text is read in blocks of characters and tokenised in batches of line chunks: neither the
corpus as one ``str`` nor its ids as one Python list is ever held.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ...models.config_utils import invalid
from ..core.token_files import (
    ArrayWriter,
    batched,
    cache_key,
    count_characters,
    dataset_identity,
    dataset_texts,
    line_pieces,
    map_array,
    prepare,
    token_dtype,
)

CHUNKS_PER_CALL = 64  # line chunks tokenised per tokenizer call


def _split_at(pieces: Iterator[str], cut: int) -> tuple[Iterator[str], Iterator[str]]:
    """The pieces of the first ``cut`` characters and those of the rest, as ``text[:cut]`` and
    ``text[cut:]`` would split (the piece holding the cut is cut in two). Consume the first fully first."""
    rest: list[str] = []

    def head() -> Iterator[str]:
        seen = 0
        for piece in pieces:
            if seen + len(piece) <= cut:
                seen += len(piece)
                yield piece
                continue
            if cut > seen:
                yield piece[: cut - seen]
            rest.append(piece[cut - seen :])
            return

    def tail() -> Iterator[str]:
        yield from rest
        yield from pieces

    return head(), tail()


def _chunks(pieces: Iterable[str], lines_per_chunk: int) -> Iterator[str]:
    """Consecutive groups of ``lines_per_chunk`` pieces joined (``core.text._line_chunks``)."""
    iterator = iter(pieces)
    while group := list(itertools.islice(iterator, lines_per_chunk)):
        yield "".join(group)


def _write_stream(chunks: Iterable[str], tokenizer, writer: ArrayWriter, progress: tqdm) -> None:
    """Tokenise ``chunks`` (no special tokens) in batches and append their ids, in order, to ``writer``."""
    for batch in batched(chunks, CHUNKS_PER_CALL):
        ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
        writer.append(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64))
        progress.update(sum(len(chunk) for chunk in batch))


@dataclass
class LMTokenStreams:
    """A language model's token streams, read-only memory maps ``(L,)`` of ``uint16``/``uint32`` ids."""

    train: np.ndarray
    validation: np.ndarray
    folder: Path


def lm_token_streams(train_file: str | Path, tokenizer, *, validation_file: str | Path | None = None,
                     validation_split_percentage: float = 10.0, lines_per_chunk: int = 256,
                     cache_dir: str | Path | None = None, overwrite_cache: bool = False,
                     accelerator=None) -> LMTokenStreams:
    """The training and validation streams of a plain-text LM corpus, tokenised once into token files.

    The ids equal ``tokenize_texts(load_text_splits(train_file, validation_file, ...).train, tokenizer)``
    (and ``.validation``): without ``validation_file`` the last ``validation_split_percentage`` % of the
    training file's characters validate; the text is tokenised in chunks of ``lines_per_chunk`` lines
    without special tokens.
    """
    if validation_file is None and not 0.0 < validation_split_percentage < 100.0:
        raise invalid("validation_split_percentage", validation_split_percentage,
                       "a number strictly between 0 and 100")
    files = [train_file] + ([validation_file] if validation_file else [])
    arguments = {"lines_per_chunk": lines_per_chunk, "validation_file": validation_file is not None,
                 "validation_split_percentage": None if validation_file else validation_split_percentage}
    key = cache_key("lm", {"tokenizer": tokenizer}, files, arguments)

    def build(folder: Path) -> dict:
        dtype = token_dtype(tokenizer)
        train_chars = count_characters(train_file)
        if validation_file:
            train, validation = line_pieces(train_file), line_pieces(validation_file)
            total = train_chars + count_characters(validation_file)
        else:
            cut = math.floor(train_chars * (100.0 - validation_split_percentage) / 100.0)  # as split_for_validation
            train, validation = _split_at(line_pieces(train_file), cut)
            total = train_chars
        arrays = {}
        with tqdm(total=total, unit="char", unit_scale=True, desc="Tokenising into token files") as progress:
            for name, pieces in (("train", train), ("validation", validation)):  # train first: see _split_at
                writer = ArrayWriter(folder / f"{name}.bin", dtype)
                _write_stream(_chunks(pieces, lines_per_chunk), tokenizer, writer, progress)
                arrays[name] = writer.close()
        if not arrays["train"]["length"] or not arrays["validation"]["length"]:
            raise ValueError(f"The training or the validation text of {str(train_file)!r} has no tokens.")
        return {"arrays": arrays}

    folder, meta = prepare(key, build, cache_dir=cache_dir, overwrite_cache=overwrite_cache, accelerator=accelerator)
    return LMTokenStreams(map_array(folder, "train", meta), map_array(folder, "validation", meta), folder)


def _text_chunks(texts: Iterable[str], lines_per_chunk: int) -> Iterator[str]:
    """:func:`~..core.text._line_chunks` one text at a time: each text cut at line ends into chunks of
    ``lines_per_chunk`` lines (a chunk never spans two texts)."""
    for text in texts:
        lines = text.splitlines(keepends=True)
        yield from ("".join(lines[i : i + lines_per_chunk]) for i in range(0, len(lines), lines_per_chunk))


def dataset_train_texts(train, text_column: str = "text", validation_split_percentage: float | None = None
                        ) -> Iterator[str]:
    """The texts of the ``train`` split that train: all of them, or with ``validation_split_percentage`` the
    first ``100 - p`` % of their characters (as :func:`~..core.text.split_for_validation` cuts)."""
    if validation_split_percentage is None:
        return dataset_texts(train, text_column)
    total = sum(len(text) for text in dataset_texts(train, text_column))
    cut = math.floor(total * (100.0 - validation_split_percentage) / 100.0)
    return _split_at(dataset_texts(train, text_column), cut)[0]


def lm_dataset_token_streams(train, tokenizer, *, validation=None, text_column: str = "text",
                             validation_split_percentage: float = 10.0, lines_per_chunk: int = 256,
                             cache_dir: str | Path | None = None, overwrite_cache: bool = False,
                             accelerator=None) -> LMTokenStreams:
    """:func:`lm_token_streams` of a ``datasets`` dataset's ``train`` (and ``validation``) split, whose Arrow
    files are memory-mapped already: the ids equal ``tokenize_texts`` of
    ``load_text_splits(dataset_name=...)``'s texts, written once into token files keyed by the splits' contents
    (:func:`~..core.token_files.dataset_identity`) and the tokenizer.
    The examples are read a batch at a time; no split is held in RAM."""
    if validation is None and not 0.0 < validation_split_percentage < 100.0:
        raise invalid("validation_split_percentage", validation_split_percentage,
                       "a number strictly between 0 and 100")
    if text_column not in train.column_names:
        raise invalid("text_column", text_column, f"one of the dataset's columns {train.column_names}")
    arguments = {"lines_per_chunk": lines_per_chunk, "text_column": text_column,
                 "train": dataset_identity(train, text_column),
                 "validation": None if validation is None else dataset_identity(validation, text_column),
                 "validation_split_percentage": None if validation is not None else validation_split_percentage}
    key = cache_key("lm-dataset", {"tokenizer": tokenizer}, [], arguments)

    def build(folder: Path) -> dict:
        dtype = token_dtype(tokenizer)
        train_chars = sum(len(text) for text in dataset_texts(train, text_column))
        if validation is not None:
            texts = dataset_texts(train, text_column), dataset_texts(validation, text_column)
        else:
            texts = _split_at(dataset_texts(train, text_column),
                              math.floor(train_chars * (100.0 - validation_split_percentage) / 100.0))
        arrays = {}
        with tqdm(total=train_chars, unit="char", unit_scale=True, desc="Tokenising into token files") as progress:
            for name, split in zip(("train", "validation"), texts, strict=True):  # train first: see _split_at
                writer = ArrayWriter(folder / f"{name}.bin", dtype)
                _write_stream(_text_chunks(split, lines_per_chunk), tokenizer, writer, progress)
                arrays[name] = writer.close()
        if not arrays["train"]["length"] or not arrays["validation"]["length"]:
            raise ValueError("The training or the validation text of the dataset has no tokens.")
        return {"arrays": arrays}

    folder, meta = prepare(key, build, cache_dir=cache_dir, overwrite_cache=overwrite_cache, accelerator=accelerator)
    return LMTokenStreams(map_array(folder, "train", meta), map_array(folder, "validation", meta), folder)


__all__ = ["LMTokenStreams", "dataset_train_texts", "lm_dataset_token_streams", "lm_token_streams"]
