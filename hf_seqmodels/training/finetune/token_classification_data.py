"""Token classification data (e.g. named entities): CoNLL files, word labels aligned to sub-tokens, and
predictions turned back into tag sequences for the ``hfsm_seqeval`` metric.

    train = read_conll("train.txt")                        # columns tokens, tags (one row per sentence)
    labels = label_list(train)                             # ["O", "B-LOC", ...]
    label2id = {label: i for i, label in enumerate(labels)}
    features = tokenize_and_align_labels(train, tokenizer, label2id, max_length=128)
    ...
    predicted, reference = predictions_to_tags(logits, features["labels"], dict(enumerate(labels)))
    evaluate.load(metric_path("hfsm_seqeval")).compute(predictions=predicted, references=reference)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import datasets
import numpy as np
from transformers import PreTrainedTokenizerBase

IGNORE_INDEX = -100  # label of the positions the loss and the metric skip
DOCSTART = "-DOCSTART-"

_FEATURES = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                               "tags": datasets.Sequence(datasets.Value("string"))})


def read_conll(path: str | os.PathLike, token_column: int = 0, tag_column: int = -1) -> datasets.Dataset:
    """Read a CoNLL file: one token per line in whitespace-separated columns, blank lines between
    sentences, ``-DOCSTART-`` lines skipped (CoNLL-2003: ``word POS chunk NER``).

    Args:
        path: the file (UTF-8).
        token_column: the column of the word (Python index: negative counts from the right).
        tag_column: the column of the tag.

    Returns:
        A ``Dataset`` with one row per sentence: ``tokens`` and ``tags``, two lists of strings of equal length.

    Raises:
        ValueError: a line with another number of columns than the file's first token line, or too few
            columns for ``token_column``/``tag_column`` (the message names the file and the line).
    """
    sentences: dict[str, list[list[str]]] = {"tokens": [], "tags": []}
    tokens: list[str] = []
    tags: list[str] = []
    width = None  # the number of columns of the first token line; every line must have as many

    def end_sentence() -> None:
        if tokens:
            sentences["tokens"].append(list(tokens))
            sentences["tags"].append(list(tags))
            tokens.clear()
            tags.clear()

    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns:
                end_sentence()
                continue
            if columns[0] == DOCSTART:
                end_sentence()
                continue
            if width is None:
                width = len(columns)
                _check_columns(width, token_column, tag_column, path, number)
            if len(columns) != width:
                raise ValueError(
                    f"{os.fspath(path)}, line {number}: expected {width} whitespace-separated columns like the "
                    f"first token line, got {len(columns)}: {line.rstrip()!r}."
                )
            tokens.append(columns[token_column])
            tags.append(columns[tag_column])
    end_sentence()
    return datasets.Dataset.from_dict(sentences, features=_FEATURES)


def _check_columns(width: int, token_column: int, tag_column: int, path, number: int) -> None:
    for name, column in (("token_column", token_column), ("tag_column", tag_column)):
        if not -width <= column < width:
            raise ValueError(f"{os.fspath(path)}, line {number}: {name}={column} is out of range for a line "
                             f"of {width} columns.")
    if token_column % width == tag_column % width:
        raise ValueError(f"{os.fspath(path)}, line {number}: token_column={token_column} and "
                         f"tag_column={tag_column} are the same column of a line of {width} columns.")


def label_list(*splits: datasets.Dataset, tag_column: str = "tags") -> list[str]:
    """The tags used in one or more datasets (e.g. train and validation), sorted, ``"O"`` first when present."""
    seen = set()
    for dataset in splits:
        for tags in dataset[tag_column]:
            seen.update(tags)
    return sorted(seen, key=lambda tag: (tag != "O", tag))


def tokenize_and_align_labels(
    dataset: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    label2id: Mapping[str, int],
    max_length: int,
    label_all_subwords: bool = False,
    **map_options,
) -> datasets.Dataset:
    """Tokenise the words of each sentence and give every sub-token the label of its word.

    Only the first sub-token of a word gets the word's label id; the others get ``-100`` (or, with
    ``label_all_subwords``, the word's label with ``B-`` turned into ``I-`` when that tag exists), as do the
    special tokens, so the loss and :func:`predictions_to_tags` see one label per word. Sentences longer than
    ``max_length`` tokens are truncated (the words cut off are not labelled).

    Args:
        dataset: rows with ``tokens`` and ``tags`` (lists of strings), e.g. from :func:`read_conll`.
        tokenizer: a fast tokenizer (``word_ids()`` is needed).
        label2id: tag -> label id; every tag of ``dataset`` must be in it.
        max_length: the longest encoding in tokens, special tokens included.
        label_all_subwords: label the continuation sub-tokens too.
        map_options: for ``Dataset.map`` (``num_proc``, ``load_from_cache_file``).

    Returns:
        A ``Dataset`` of the tokenizer's columns (``input_ids``, ``attention_mask``, ...) and ``labels``
        (one id per token, ``-100`` where not labelled), unpadded, for ``DataCollatorForTokenClassification``.

    Raises:
        ValueError: a slow tokenizer, or a tag missing from ``label2id``.
    """
    if not tokenizer.is_fast:
        raise ValueError(f"tokenize_and_align_labels needs a fast tokenizer (for word_ids()), got "
                         f"{type(tokenizer).__name__}.")
    continuation = {
        label_id: label2id.get("I-" + tag[2:], label_id) if tag.startswith("B-") else label_id
        for tag, label_id in label2id.items()
    }

    def align(batch):
        encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
        encoded["labels"] = []
        for row, tags in enumerate(batch["tags"]):
            word_labels = [_label_id(tag, label2id) for tag in tags]
            labels, previous = [], None
            for word in encoded.word_ids(row):
                if word is None:
                    labels.append(IGNORE_INDEX)
                elif word != previous:
                    labels.append(word_labels[word])
                else:
                    labels.append(continuation[word_labels[word]] if label_all_subwords else IGNORE_INDEX)
                previous = word
            encoded["labels"].append(labels)
        return encoded

    return dataset.map(align, batched=True, remove_columns=dataset.column_names, **map_options)


def _label_id(tag: str, label2id: Mapping[str, int]) -> int:
    if tag not in label2id:
        raise ValueError(f"The tag {tag!r} is not in label2id; known tags: {', '.join(label2id)}.")
    return label2id[tag]


def predictions_to_tags(
    predictions: np.ndarray,
    labels: np.ndarray | Sequence[Sequence[int]],
    id2label: Mapping[int, str] | Sequence[str],
) -> tuple[list[list[str]], list[list[str]]]:
    """Predicted and reference tag sequences of the labelled positions, for ``hfsm_seqeval``.

    Args:
        predictions: ``(N, T, num_labels)`` logits or ``(N, T)`` predicted label ids.
        labels: ``(N, T)`` reference label ids with ``-100`` at the positions to skip (padding, special
            tokens and continuation sub-tokens), as made by :func:`tokenize_and_align_labels` and padded by
            the collator or ``Trainer``; rows may also be lists of different lengths.
        id2label: label id -> tag (e.g. ``model.config.id2label``) or the list of tags.

    Returns:
        ``(predicted, reference)``: two lists of ``N`` tag lists, one tag per position whose label is not -100.
    """
    predictions = np.asarray(predictions)
    if predictions.ndim == 3:
        predictions = predictions.argmax(-1)
    if predictions.ndim != 2:
        raise ValueError(f"predictions must be (N, T, num_labels) logits or (N, T) label ids, got shape "
                         f"{predictions.shape}.")
    if len(predictions) != len(labels):
        raise ValueError(f"predictions has {len(predictions)} rows but labels has {len(labels)}.")
    predicted, reference = [], []
    for row, (guess, gold) in enumerate(zip(predictions, labels, strict=True)):
        if len(gold) > len(guess):
            raise ValueError(f"Row {row}: {len(gold)} labels but only {len(guess)} predicted positions.")
        kept = [(int(g), int(r)) for g, r in zip(guess, gold, strict=False) if r != IGNORE_INDEX]
        predicted.append([id2label[g] for g, _ in kept])
        reference.append([id2label[r] for _, r in kept])
    return predicted, reference


__all__ = ["label_list", "predictions_to_tags", "read_conll", "tokenize_and_align_labels"]
