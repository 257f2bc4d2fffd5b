"""Text for every training task: plain files or a ``datasets`` dataset, a validation split by characters,
and tokenisation into one stream of ids."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass
class TextSplits:
    """Training and validation text, each a list of documents read in order as one stream."""

    train: list[str]
    validation: list[str]


def _invalid(field: str, value, allowed: str) -> ValueError:
    return ValueError(f"Invalid `{field}`={value!r}: expected {allowed}.")


def read_text_file(path: str | Path) -> str:
    """The whole file as one string (UTF-8); the file is one document."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Text file {str(path)!r} does not exist.")
    return path.read_text(encoding="utf-8")


def split_for_validation(texts: list[str], percentage: float) -> tuple[list[str], list[str]]:
    """Cut the concatenated ``texts`` by characters: the first ``100 - percentage`` % train, the rest validate.

    With one document this is "the first 90 % of the characters train, the last 10 % validate",
    exactly reproducible from the file. The cut point is ``floor(total * (100 - percentage) / 100)``.
    """
    if not 0.0 < percentage < 100.0:
        raise _invalid("validation_split_percentage", percentage, "a number strictly between 0 and 100")
    total = sum(len(t) for t in texts)
    cut = math.floor(total * (100.0 - percentage) / 100.0)
    train, validation, seen = [], [], 0
    for text in texts:
        if seen + len(text) <= cut:
            train.append(text)
        elif seen >= cut:
            validation.append(text)
        else:
            train.append(text[: cut - seen])
            validation.append(text[cut - seen :])
        seen += len(text)
    return train, validation


def load_text_splits(
    train_file: str | None = None,
    validation_file: str | None = None,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    text_column: str = "text",
    validation_split_percentage: float = 10.0,
) -> TextSplits:
    """Training/validation text from plain ``.txt`` files or a ``datasets`` hub dataset.

    Without validation text, the last ``validation_split_percentage`` % of the training text
    (by characters, see :func:`split_for_validation`) becomes the validation text.
    """
    if (train_file is None) == (dataset_name is None):
        raise ValueError("Give exactly one of `train_file` (a .txt file) or `dataset_name` (a datasets name).")
    if train_file is not None:
        train = [read_text_file(train_file)]
        validation = [read_text_file(validation_file)] if validation_file else None
    else:
        train, validation = _load_hub_texts(dataset_name, dataset_config_name, text_column)
    if validation is None:
        train, validation = split_for_validation(train, validation_split_percentage)
    if not any(train) or not any(validation):
        raise ValueError("The training or the validation text is empty.")
    return TextSplits(train=train, validation=validation)


def load_dataset_splits(name: str, config_name: str | None, text_column: str):
    """``(train split, validation split or None)`` of a ``datasets`` dataset, as ``datasets.Dataset`` objects
    (their Arrow files memory-mapped, not read into RAM); the validation split is ``validation``, ``valid`` or
    ``dev``."""
    import datasets

    dataset = datasets.load_dataset(name, config_name)
    if "train" not in dataset:
        raise _invalid("dataset_name", name, f"a dataset with a 'train' split (found {list(dataset)})")
    columns = dataset["train"].column_names
    if text_column not in columns:
        raise _invalid("text_column", text_column, f"one of the dataset's columns {columns}")
    validation_split = next((s for s in ("validation", "valid", "dev") if s in dataset), None)
    return dataset["train"], dataset[validation_split] if validation_split else None


def _load_hub_texts(name: str, config_name: str | None, text_column: str) -> tuple[list[str], list[str] | None]:
    """``(train texts, validation texts or None)`` of a ``datasets`` dataset (examples in order)."""
    train, validation = load_dataset_splits(name, config_name, text_column)
    return list(train[text_column]), None if validation is None else list(validation[text_column])


def _line_chunks(texts: list[str], lines_per_chunk: int) -> list[str]:
    """The texts cut at line ends into chunks of ``lines_per_chunk`` lines (``"".join`` restores them)."""
    chunks = []
    for text in texts:
        lines = text.splitlines(keepends=True)
        chunks.extend("".join(lines[i : i + lines_per_chunk]) for i in range(0, len(lines), lines_per_chunk))
    return chunks


def tokenize_texts(texts: list[str], tokenizer, num_proc: int | None = None, lines_per_chunk: int = 256) -> torch.Tensor:
    """Tokenise ``texts`` into one stream of ids, ``(L,)`` int64, without special tokens.

    The text is cut at line ends into chunks that ``datasets.Dataset.map(batched=True)`` tokenises
    (in parallel with ``num_proc``); the chunks' ids are concatenated in order.
    """
    from datasets import Dataset

    chunks = _line_chunks(texts, lines_per_chunk)
    if not chunks:
        return torch.zeros(0, dtype=torch.long)

    def encode(batch):
        return {"input_ids": tokenizer(batch["text"], add_special_tokens=False)["input_ids"]}

    dataset = Dataset.from_dict({"text": chunks})
    encoded = dataset.map(encode, batched=True, remove_columns=["text"], num_proc=num_proc, desc="Tokenising")
    return torch.tensor(list(itertools.chain.from_iterable(encoded["input_ids"])), dtype=torch.long)


def parallel_file_kind(file: str | Path) -> str:
    """``".jsonl"`` or ``".tsv"``: how a parallel-corpus file is read, from its suffix (``.json``/``.jsonl``,
    ``.tsv``/``.txt``, each optionally ``.gz``); a ValueError names any other file."""
    suffixes = [s for s in Path(file).suffixes if s != ".gz"]
    kind = suffixes[-1] if suffixes else ""
    if kind in (".jsonl", ".json"):
        return ".jsonl"
    if kind in (".tsv", ".txt"):
        return ".tsv"
    raise _invalid("train_file", file, "a .tsv or .jsonl file (optionally .gz), or a pair of line-aligned files")


def pad_right(sequences: list[list[int]], value: int, multiple_of: int | None = None) -> torch.Tensor:
    """Stack id lists into a ``(B, longest)`` LongTensor, right-padded with ``value``; with ``multiple_of``, the
    length is rounded up to a multiple of it (transformers' ``pad_to_multiple_of``)."""
    longest = max(len(s) for s in sequences)
    if multiple_of:
        longest = -(-longest // multiple_of) * multiple_of
    padded = torch.full((len(sequences), longest), value, dtype=torch.long)
    for row, ids in enumerate(sequences):
        padded[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return padded
