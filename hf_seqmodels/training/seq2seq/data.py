"""Parallel-corpus data for sequence-to-sequence training: reading, tokenising, batching by length.

A corpus comes from

* a TSV file with a header row (``source_field``/``target_field`` name its columns) or without one
  (the fields are column numbers, ``0`` and ``1``);
* a JSON-lines file (the fields are keys; a dotted key such as ``translation.en`` reads the nested
  records of Hugging Face translation datasets);
* two line-aligned plain-text files, line ``i`` of the source translating line ``i`` of the
  target (``.gz`` files are read as they are);
* a ``datasets`` dataset, for users who are online.

Every sentence is encoded by its tokenizer with the sequence-to-sequence template ``A <eos>`` (what
transformers' Marian and T5 tokenizers give for sources and for ``text_target`` labels); a tokenizer
saved with the causal ``<bos> A`` template is used through a copy switched to it
(:func:`~hf_seqmodels.tokenization.with_special_token_switches`). The model's decoder starts from
``decoder_start_token_id``. Sources are encoded with the source tokenizer when the model has
separate source and target vocabularies, else with the one shared tokenizer. A training corpus from
files is encoded once into memory-mapped token files (:func:`~.token_pairs.seq2seq_token_pairs`,
the same ids as :func:`encode_corpus`). :class:`LengthBatches` groups sentences of similar length
(sorted by source then target length, from the length index alone) into batches of a fixed number of
sentences or of at most ``max_tokens`` padded tokens, and visits the batches in a new order every
epoch (seeded, so a resumed run reads the same batches in the same order).
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...tokenization import TextFile
from ...tokenization.special_tokens import with_special_token_switches
from ..core.length_batches import LengthGroups
from ..core.text import pad_right, parallel_file_kind


@dataclass
class ParallelCorpus:
    """Sentence pairs: ``targets[i]`` translates ``sources[i]``."""

    sources: list[str]
    targets: list[str]

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ValueError(f"A parallel corpus needs as many targets as sources, got {len(self.sources)} sources "
                             f"and {len(self.targets)} targets.")

    def __len__(self) -> int:
        return len(self.sources)


def _open_text(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"File {str(path)!r} does not exist.")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8", newline="")


def _read_lines(path: Path) -> list[str]:
    with _open_text(path) as f:
        return [line.rstrip("\r\n") for line in f]


def _field(record: dict, key: str, path: Path, line: int) -> str:
    """``record[key]`` (a dotted key reads nested fields); a language code also finds ``record["translation"][key]``,
    the layout of transformers' ``run_translation.py`` data (``{"translation": {"en": ..., "de": ...}}``)."""
    if key not in record and isinstance(record.get("translation"), dict) and key in record["translation"]:
        return str(record["translation"][key])
    value = record
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{str(path)!r}, record {line}: no field {key!r} (fields: {', '.join(record)}).")
        value = value[part]
    return str(value)


def _read_jsonl(path: Path, source_field: str, target_field: str) -> ParallelCorpus:
    sources, targets = [], []
    with _open_text(path) as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                record = json.loads(line)
                sources.append(_field(record, source_field, path, number))
                targets.append(_field(record, target_field, path, number))
    return ParallelCorpus(sources, targets)


def _read_tsv(path: Path, source_field: str, target_field: str) -> ParallelCorpus:
    with _open_text(path) as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row]
    if source_field.isdigit() and target_field.isdigit():
        columns = int(source_field), int(target_field)
    else:
        header = rows.pop(0) if rows else []
        missing = [name for name in (source_field, target_field) if name not in header]
        if missing:
            raise KeyError(f"{str(path)!r}: no column {missing[0]!r} in the header {header}; name the columns with "
                           "--source_lang/--target_lang, or give column numbers for a file without a header.")
        columns = header.index(source_field), header.index(target_field)
    short = [i for i, row in enumerate(rows) if len(row) <= max(columns)]
    if short:
        raise ValueError(f"{str(path)!r}: row {short[0] + 1} has fewer than {max(columns) + 1} columns.")
    return ParallelCorpus([row[columns[0]] for row in rows], [row[columns[1]] for row in rows])


def read_parallel_corpus(file: str | None = None, *, source_file: str | None = None, target_file: str | None = None,
                         source_field: str = "source", target_field: str = "target") -> ParallelCorpus:
    """Read a TSV/JSON-lines ``file``, or the line-aligned pair ``source_file``/``target_file``."""
    if file is not None:
        read = _read_jsonl if parallel_file_kind(file) == ".jsonl" else _read_tsv
        return read(Path(file), source_field, target_field)
    if source_file is None or target_file is None:
        raise ValueError("Give a .tsv/.jsonl file, or both a source file and a target file.")
    return ParallelCorpus(_read_lines(Path(source_file)), _read_lines(Path(target_file)))


def _stream_tsv(path: Path, source_field: str, target_field: str) -> Iterator[tuple[str, str]]:
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
    with _open_text(path) as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                record = json.loads(line)
                yield _field(record, source_field, path, number), _field(record, target_field, path, number)


def _stream_aligned(source_file: Path, target_file: Path) -> Iterator[tuple[str, str]]:
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
    """``(source, target)`` pairs read one line at a time, as :func:`read_parallel_corpus`
    reads them all."""
    if file is not None:
        stream = _stream_jsonl if parallel_file_kind(file) == ".jsonl" else _stream_tsv
        return stream(Path(file), source_field, target_field)
    if source_file is None or target_file is None:
        raise ValueError("Give a .tsv/.jsonl file, or both a source file and a target file.")
    return _stream_aligned(Path(source_file), Path(target_file))


def tokenizer_training_text(sides: tuple[str, ...], file: str | None = None, *, source_file: str | None = None,
                            target_file: str | None = None, source_field: str = "source",
                            target_field: str = "target", max_pairs: int | None = None
                            ) -> tuple[list[TextFile], Iterable[str]]:
    """``(files, texts)`` a tokenizer of ``sides`` (``"sources"`` and/or ``"targets"``, in that order) is
    trained on: the aligned plain-text files themselves when each side is a whole uncompressed file (so the
    trainer's messages name them), else ``sentence + "\\n"`` of every pair of ``file`` or of the aligned files
    (at most ``max_pairs``), streamed one side after the other."""
    named = {"sources": source_file, "targets": target_file}
    if file is None and max_pairs is None and not any(str(named[s]).endswith(".gz") for s in sides):
        return [TextFile(named[side]) for side in sides], []
    return [], _side_texts(sides, file, source_file, target_file, source_field, target_field, max_pairs)


def _side_texts(sides: tuple[str, ...], file: str | None, source_file: str | None, target_file: str | None,
                source_field: str, target_field: str, max_pairs: int | None) -> Iterator[str]:
    for side in sides:
        column = 0 if side == "sources" else 1
        pairs = stream_parallel_corpus(file, source_file=source_file, target_file=target_file,
                                       source_field=source_field, target_field=target_field)
        for pair in itertools.islice(pairs, max_pairs):
            yield pair[column] + "\n"


def load_parallel_dataset(name: str, config_name: str | None, split: str, source_field: str,
                          target_field: str) -> ParallelCorpus:
    """A split of a ``datasets`` dataset (e.g. ``bentrevett/multi30k`` with fields ``en``/``de``, or
    ``wmt16`` ``de-en`` with ``translation.en``/``translation.de``). Needs the network the first time."""
    from datasets import load_dataset

    data = load_dataset(name, config_name, split=split)
    records = [dict(zip(data.column_names, values, strict=True)) for values in zip(*data[:].values(), strict=True)]
    path = Path(f"{name}/{split}")
    return ParallelCorpus([_field(r, source_field, path, i) for i, r in enumerate(records, 1)],
                          [_field(r, target_field, path, i) for i, r in enumerate(records, 1)])


# --------------------------------------------------------------------------- ids


@dataclass
class EncodedPairs:
    """Token ids of each sentence pair, each ending with ``<eos>``."""

    sources: list[list[int]]
    targets: list[list[int]]

    def __len__(self) -> int:
        return len(self.sources)


def seq2seq_tokenizer(tokenizer, side: str = "target"):
    """``tokenizer`` with the sequence-to-sequence template ``A <eos>`` (``add_bos_token=False``,
    ``add_eos_token=True``): itself when it has it already, else a copy (the one given never changes)."""
    if tokenizer.eos_token_id is None:
        raise ValueError(f"The {side} tokenizer has no eos_token: sequence-to-sequence training needs one to "
                         "end sentences.")
    return with_special_token_switches(tokenizer, add_bos_token=False, add_eos_token=True)


def _fit(ids: list[int], max_length: int | None) -> list[int]:
    """``ids`` cut to ``max_length``, keeping the final ``<eos>`` the tokenizer added."""
    return ids if not max_length or len(ids) <= max_length else ids[: max_length - 1] + ids[-1:]


def encode_corpus(corpus: ParallelCorpus, tokenizer, *, source_tokenizer=None, max_source_length: int | None = None,
                  max_target_length: int | None = None, drop_longer: bool = True) -> EncodedPairs:
    """Encode both sides with the ``A <eos>`` template: the targets as ``tokenizer(text_target=...)`` labels,
    the sources with ``source_tokenizer`` (separate vocabularies) or ``tokenizer`` too. Pairs with an empty
    side are dropped; pairs longer than the limits (``<eos>`` included) are dropped (``drop_longer``, for
    training) or cut before their ``<eos>`` (for evaluation)."""
    target_tok = seq2seq_tokenizer(tokenizer, "target")
    source_tok = seq2seq_tokenizer(source_tokenizer or tokenizer, "source")
    source_ids = source_tok(corpus.sources)["input_ids"]
    target_ids = target_tok(text_target=corpus.targets)["input_ids"]
    sources, targets = [], []
    for src, tgt in zip(source_ids, target_ids, strict=True):
        if len(src) <= 1 or len(tgt) <= 1:  # nothing but <eos>
            continue
        too_long = (max_source_length and len(src) > max_source_length) or (
            max_target_length and len(tgt) > max_target_length)
        if too_long and drop_longer:
            continue
        sources.append(_fit(src, max_source_length))
        targets.append(_fit(tgt, max_target_length))
    return EncodedPairs(sources, targets)


def collate_pairs(sources: list[list[int]], targets: list[list[int]] | None, pad_token_id: int,
                  pad_to_multiple_of: int | None = None) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask`` ``(B, S)`` and ``labels`` ``(B, T)`` (padding -100), each
    length rounded up to a multiple of ``pad_to_multiple_of`` when given. ``pad_token_id`` pads the sources only:
    the source tokenizer's."""
    multiple = pad_to_multiple_of
    batch = {"input_ids": pad_right(sources, pad_token_id, multiple),
             "attention_mask": pad_right([[1] * len(s) for s in sources], 0, multiple)}
    if targets is not None:
        batch["labels"] = pad_right(targets, -100, multiple)
    return batch


def pair_lengths(pairs) -> tuple[np.ndarray, np.ndarray]:
    """``(source lengths, target lengths)``, each ``(N,)`` int64: the length index of token files
    (:class:`~.token_pairs.TokenPairs`) or the lengths of in-RAM :class:`EncodedPairs`."""
    sides = (pairs.sources, pairs.targets)
    if all(hasattr(side, "lengths") for side in sides):
        return sides[0].lengths, sides[1].lengths
    return tuple(np.fromiter(map(len, side), dtype=np.int64, count=len(side)) for side in sides)


class LengthBatches(LengthGroups):
    """Batches of sentence pairs of similar length, in a seeded random order per epoch.

    ``pairs`` are :class:`EncodedPairs` in RAM or :class:`~.token_pairs.TokenPairs` read from
    memory-mapped token files; only their length index is held, and a batch reads its own pairs.
    The pairs are sorted by (source length, target length) (a stable sort) and cut into global
    batches of ``batch_size`` pairs, or of as many pairs as fit in ``max_tokens`` padded tokens
    (``rows × longest side``). Global batch ``k`` of epoch ``e`` is the ``k``-th of a permutation
    drawn with seed ``seed + e``; process ``p`` of ``P`` takes its rows ``p, p + P, ...``, so ``P``
    processes together read exactly the batches one process would (:class:`~..core.length_batches.LengthGroups`).
    Batches with fewer pairs than processes are dropped. ``pad_to_multiple_of`` rounds each side's padded length up
    to a multiple of it (on a GPU: tensor-core shapes, and few distinct shapes for a compiled step); the token budget
    counts the unpadded longest side.
    """

    carries_state = False

    def __init__(self, pairs, pad_token_id: int, *, batch_size: int | None = None,
                 max_tokens: int | None = None, seed: int = 0, process_index: int = 0, num_processes: int = 1,
                 pad_to_multiple_of: int | None = None):
        self.pairs, self.pad_token_id = pairs, pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of
        source_lengths, self.target_lengths = pair_lengths(pairs)
        order = np.lexsort((self.target_lengths, source_lengths))  # (N,) by source, then target length
        super().__init__(order, np.maximum(source_lengths, self.target_lengths), batch_size=batch_size,
                         max_tokens=max_tokens, seed=seed, process_index=process_index, num_processes=num_processes)

    def batch(self, index: int, epoch: int = 0) -> dict[str, torch.Tensor]:
        """This process's rows of global batch ``index`` of ``epoch``, collated; ``num_items_in_batch`` is
        the number of target tokens of the whole global batch (all processes), ``num_tokens`` of these rows
        (counted here, on the CPU: on the device the count would make the host wait for it)."""
        group, rows = self.rows(index, epoch)
        rows = rows.tolist()
        batch = collate_pairs([self.pairs.sources[i] for i in rows], [self.pairs.targets[i] for i in rows],
                              self.pad_token_id, self.pad_to_multiple_of)
        batch["num_items_in_batch"] = int(self.target_lengths[group].sum())
        batch["num_tokens"] = int(self.target_lengths[rows].sum())
        return batch


__all__ = [
    "EncodedPairs",
    "LengthBatches",
    "ParallelCorpus",
    "collate_pairs",
    "encode_corpus",
    "load_parallel_dataset",
    "pair_lengths",
    "read_parallel_corpus",
    "seq2seq_tokenizer",
    "tokenizer_training_text",
]
