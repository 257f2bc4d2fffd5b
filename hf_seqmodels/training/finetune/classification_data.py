"""Sentence and sentence-pair classification data: GLUE-style TSV (SST-2, MRPC, ...), CSV or JSON lines.

Every reader returns a :class:`datasets.Dataset` with the same columns whatever the file called them:
``text``, ``text_pair`` (sentence-pair tasks only) and ``label`` (absent from unlabelled test files).
Labels stay as written (strings or numbers); :func:`label_space` decides between classification and
regression and fixes the label order, and :func:`encode_classification` tokenizes.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset

# Column names used by the GLUE tasks and common sentiment corpora, tried in this order.
TEXT_COLUMNS = ("sentence", "content", "text", "review")
PAIR_COLUMNS = (("sentence1", "sentence2"), ("question1", "question2"), ("question", "sentence"),
                ("premise", "hypothesis"))


def _read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a headed TSV/CSV file or of a JSON-lines file, as dicts keyed by column name."""
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    delimiter = "," if suffix == ".csv" else "\t"
    with path.open(encoding="utf-8", newline="") as f:
        # GLUE TSVs are not quoted: a double quote inside a sentence is just a character
        quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
        reader = csv.DictReader(f, delimiter=delimiter, quoting=quoting)
        rows = list(reader)
        header = reader.fieldnames or []
    for number, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise ValueError(f"{path}, line {number}: expected {len(header)} {'tab' if delimiter == chr(9) else 'comma'}"
                             f"-separated fields ({', '.join(header)}), got a different number.")
    return rows


def resolve_text_columns(columns: list[str], text_column: str | None = None,
                         text_pair_column: str | None = None) -> tuple[str, str | None]:
    """The text column and the optional second-sentence column: the given names, or the first GLUE
    convention (``sentence1``/``sentence2``, ``question``/``sentence``, ..., then ``sentence``, ``content``,
    ``text``) that the file has."""
    for name, value in (("text_column", text_column), ("text_pair_column", text_pair_column)):
        if value is not None and value not in columns:
            raise ValueError(f"Invalid `{name}`={value!r}: the data has the columns {', '.join(columns)}.")
    if text_column is not None:
        return text_column, text_pair_column
    for first, second in PAIR_COLUMNS:
        if first in columns and second in columns:
            return first, second
    for name in TEXT_COLUMNS:
        if name in columns:
            return name, text_pair_column
    raise ValueError(f"Cannot tell which column holds the text among {', '.join(columns)}: pass `text_column` "
                     f"(and `text_pair_column` for sentence pairs).")


def read_classification_file(path: str | Path, text_column: str | None = None, text_pair_column: str | None = None,
                             label_column: str = "label") -> Dataset:
    """Read a headed ``.tsv`` (GLUE layout), ``.csv`` or ``.json``/``.jsonl`` file into ``text``
    (+ ``text_pair``) (+ ``label``) columns. A file without ``label_column`` is read as unlabelled."""
    path = Path(path)
    rows = _read_rows(path)
    if not rows:
        raise ValueError(f"{path} has no rows.")
    columns = list(rows[0])
    text, pair = resolve_text_columns(columns, text_column, text_pair_column)
    data = {"text": [str(r[text]) for r in rows]}
    if pair is not None:
        data["text_pair"] = [str(r[pair]) for r in rows]
    if label_column in columns:
        data["label"] = [r[label_column] for r in rows]
    return Dataset.from_dict(data)


@dataclass(frozen=True)
class LabelSpace:
    """The labels of a classification task in a fixed order, or regression (``labels is None``)."""

    labels: tuple[str, ...] | None

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def label2id(self) -> dict[str, int] | None:
        return None if self.labels is None else {label: i for i, label in enumerate(self.labels)}

    def encode(self, value) -> int | float:
        """The training target of one raw label: its index, or the float for regression."""
        if self.labels is None:
            return float(value)
        key = _label_key(value)
        if key not in self.label2id:
            raise ValueError(f"Invalid label {value!r}: the training data has the labels {', '.join(self.labels)}.")
        return self.label2id[key]


def _label_key(value) -> str:
    """Labels as strings with integral numbers written as integers (``1``, ``1.0`` and ``"1"`` are one label)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def label_space(labels: list, regression: bool | None = None) -> LabelSpace:
    """Classification over the sorted distinct labels (numerically when they are all integers), or
    regression when ``regression`` is True or, if it is None, when some label is a non-integral number
    (e.g. STS-B's similarity scores)."""
    keys = [_label_key(v) for v in labels]
    if not keys:
        raise ValueError("No labels: the training data needs a label column.")

    def number(key: str) -> float | None:
        try:
            value = float(key)
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    numbers = [number(k) for k in keys]
    numeric = all(n is not None for n in numbers)
    if regression is None:
        regression = numeric and any(not n.is_integer() for n in numbers)
    if regression:
        if not numeric:
            bad = next(k for k, n in zip(keys, numbers, strict=True) if n is None)
            raise ValueError(f"Regression needs numeric labels, got {bad!r}.")
        return LabelSpace(None)
    distinct = set(keys)
    ordered = sorted(distinct, key=int) if numeric else sorted(distinct)
    if len(ordered) < 2:
        raise ValueError(f"Classification needs at least two distinct labels, the training data has {ordered}.")
    return LabelSpace(tuple(ordered))


def encode_classification(dataset: Dataset, tokenizer, max_length: int, labels: LabelSpace | None = None,
                          num_proc: int | None = None, load_from_cache_file: bool | None = None) -> Dataset:
    """Tokenize ``text`` (+ ``text_pair``) to at most ``max_length`` tokens (pairs are truncated longest
    first) and turn ``label`` into ``labels``; the raw columns are dropped. Padding is left to the collator."""
    has_pair = "text_pair" in dataset.column_names
    has_labels = "label" in dataset.column_names and labels is not None

    def encode(batch):
        encoded = tokenizer(batch["text"], batch["text_pair"] if has_pair else None, truncation=True,
                            max_length=max_length)
        if has_labels:
            encoded["labels"] = [labels.encode(v) for v in batch["label"]]
        return encoded

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names, num_proc=num_proc,
                       load_from_cache_file=load_from_cache_file, desc="Tokenizing")


__all__ = [
    "LabelSpace",
    "PAIR_COLUMNS",
    "TEXT_COLUMNS",
    "encode_classification",
    "label_space",
    "read_classification_file",
    "resolve_text_columns",
]
