"""Extractive question answering data (SQuAD v1.1): reading the JSON, windows of long contexts with the
answer's token positions, and window logits turned back into answer texts for the ``hfsm_squad`` metric.

    examples = read_squad_json("dev-v1.1.json")
    columns = examples.column_names
    train_features = train_examples.map(prepare_train_features, batched=True, remove_columns=columns,
                                        fn_kwargs=dict(tokenizer=tokenizer, max_length=384, doc_stride=128))
    eval_features = examples.map(prepare_eval_features, batched=True, remove_columns=columns,
                                 fn_kwargs=dict(tokenizer=tokenizer, max_length=384, doc_stride=128))
    start_logits, end_logits = trainer.predict(eval_features).predictions
    answers = postprocess_predictions(examples, eval_features, start_logits, end_logits)  # {id: text}

A context longer than the window is cut into several windows ``[CLS] question [SEP] context-part [SEP]``
that overlap by ``doc_stride`` tokens; one example becomes one or more features, so ``map`` must remove the
example columns. The answer of an example is the best span over all its windows, found by
:func:`hf_seqmodels.qa_spans.best_spans` (the scoring of the ``hfsm-question-answering`` pipeline).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any

import datasets
import numpy as np
from transformers import PreTrainedTokenizerBase

from ...qa_spans import best_spans

_FEATURES = datasets.Features({
    "id": datasets.Value("string"),
    "title": datasets.Value("string"),
    "context": datasets.Value("string"),
    "question": datasets.Value("string"),
    "answers": datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}),
})


def read_squad_json(path: str | os.PathLike, check_answer_offsets: bool = True) -> datasets.Dataset:
    """Read a SQuAD v1.1 JSON file (``{"data": [{"title", "paragraphs": [{"context", "qas": [{"id",
    "question", "answers": [{"text", "answer_start"}]}]}]}]}``), one row per question.

    Args:
        path: the JSON file.
        check_answer_offsets: require ``context[answer_start:answer_start + len(text)] == text`` for every answer.

    Returns:
        A ``Dataset`` with ``id``, ``title``, ``context``, ``question`` (strings) and ``answers``
        (``{"text": [str, ...], "answer_start": [int, ...]}``), the layout of the Hub's ``squad`` dataset.

    Raises:
        ValueError: a missing or mistyped field, a duplicate id, or an answer not at its offset; the message
            names the file and the place (e.g. ``data[0].paragraphs[2].qas[1]``).
    """
    with open(path, encoding="utf-8") as handle:
        payload = json.load(handle)
    where = os.fspath(path)
    rows: dict[str, list] = {name: [] for name in _FEATURES}
    seen = set()
    for a, article in enumerate(_field(payload, "data", list, where)):
        title = article.get("title", "") if isinstance(article, dict) else ""
        for p, paragraph in enumerate(_field(article, "paragraphs", list, f"{where}: data[{a}]")):
            place = f"{where}: data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, place)
            for q, qa in enumerate(_field(paragraph, "qas", list, place)):
                place_q = f"{place}.qas[{q}]"
                question_id = str(_field(qa, "id", (str, int), place_q))
                if question_id in seen:
                    raise ValueError(f"{place_q}: the id {question_id!r} occurs more than once.")
                seen.add(question_id)
                texts, starts = [], []
                for n, answer in enumerate(_field(qa, "answers", list, place_q)):
                    text = _field(answer, "text", str, f"{place_q}.answers[{n}]")
                    start = _field(answer, "answer_start", int, f"{place_q}.answers[{n}]")
                    if check_answer_offsets and context[start:start + len(text)] != text:
                        raise ValueError(
                            f"{place_q}.answers[{n}]: the context holds {context[start:start + len(text)]!r} at "
                            f"answer_start={start}, not the answer {text!r}."
                        )
                    texts.append(text)
                    starts.append(start)
                rows["id"].append(question_id)
                rows["title"].append(title)
                rows["context"].append(context)
                rows["question"].append(_field(qa, "question", str, place_q))
                rows["answers"].append({"text": texts, "answer_start": starts})
    return datasets.Dataset.from_dict(rows, features=_FEATURES)


def _field(record: Any, key: str, kind: type | tuple[type, ...], place: str) -> Any:
    """``record[key]``, checked to be of ``kind``."""
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{place}: missing the field {key!r}.")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{place}: the field {key!r} must be {names}, got {type(value).__name__}.")
    return value


def _encode_windows(examples: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int,
                    doc_stride: int):
    """``[CLS] question [SEP] context-part [SEP]`` windows of every example, with offsets and the
    ``overflow_to_sample_mapping`` from window to example."""
    if not tokenizer.is_fast:
        raise ValueError(f"Question answering features need a fast tokenizer (for the offsets), got "
                         f"{type(tokenizer).__name__}.")
    if not 0 <= doc_stride < max_length:
        raise ValueError(f"doc_stride must be >= 0 and < max_length={max_length}, got {doc_stride}.")
    questions = [question.lstrip() for question in examples["question"]]  # leading spaces waste the window
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    for index, ids in enumerate(tokenizer(questions, add_special_tokens=False)["input_ids"]):
        if room - len(ids) <= doc_stride:
            raise ValueError(
                f"The question {questions[index]!r} takes {len(ids)} tokens, which leaves {room - len(ids)} of "
                f"max_length={max_length} for the context, not more than doc_stride={doc_stride}: raise "
                "max_length or lower doc_stride."
            )
    return tokenizer(questions, examples["context"], truncation="only_second", max_length=max_length,
                     stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)


def prepare_train_features(examples: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int,
                           doc_stride: int) -> dict[str, list]:
    """Training windows of a batch of examples with the token positions of their answer.

    For ``Dataset.map(batched=True, remove_columns=examples.column_names)``; the first answer of each
    example is the target. A window that holds the whole answer gets the positions of its first and last
    token; any other window points both positions at its ``[CLS]`` token (index 0).

    Args:
        examples: a batch of :func:`read_squad_json` rows (``question``, ``context``, ``answers``).
        tokenizer: a fast tokenizer (for the offsets) that encodes pairs, e.g. ``[CLS] A [SEP] B [SEP]``.
        max_length: tokens per window, special tokens included.
        doc_stride: tokens shared by consecutive windows of one context.

    Returns:
        The tokenizer's columns (one row per window, unpadded) plus ``start_positions`` and ``end_positions``.
    """
    encoded = _encode_windows(examples, tokenizer, max_length, doc_stride)
    example_of = encoded.pop("overflow_to_sample_mapping")
    all_offsets = encoded.pop("offset_mapping")
    encoded["start_positions"], encoded["end_positions"] = [], []
    for window, offsets in enumerate(all_offsets):
        context = [t for t, sequence in enumerate(encoded.sequence_ids(window)) if sequence == 1]
        answers = examples["answers"][example_of[window]]
        start = end = _cls_index(encoded["input_ids"][window], tokenizer)
        if context and answers["text"]:
            first_char = answers["answer_start"][0]
            last_char = first_char + len(answers["text"][0])  # exclusive
            if offsets[context[0]][0] <= first_char and last_char <= offsets[context[-1]][1]:
                start = max(t for t in context if offsets[t][0] <= first_char)
                end = min(t for t in context if offsets[t][1] >= last_char)
        encoded["start_positions"].append(start)
        encoded["end_positions"].append(end)
    return encoded


def prepare_eval_features(examples: dict[str, list], tokenizer: PreTrainedTokenizerBase, max_length: int,
                          doc_stride: int) -> dict[str, list]:
    """Evaluation windows of a batch of examples, for :func:`postprocess_predictions`.

    For ``Dataset.map(batched=True, remove_columns=examples.column_names)``; arguments as in
    :func:`prepare_train_features`.

    Returns:
        The tokenizer's columns (one row per window, unpadded) plus ``example_id`` (the ``id`` of the window's
        example) and ``offset_mapping``: ``(start, end)`` character offsets of the context tokens, ``None``
        for the question and special tokens. ``Trainer`` drops both extra columns before the forward pass.
    """
    encoded = _encode_windows(examples, tokenizer, max_length, doc_stride)
    example_of = encoded.pop("overflow_to_sample_mapping")
    encoded["example_id"] = [examples["id"][index] for index in example_of]
    encoded["offset_mapping"] = [
        [offset if sequence == 1 else None for offset, sequence in zip(offsets, encoded.sequence_ids(window),
                                                                         strict=True)]
        for window, offsets in enumerate(encoded["offset_mapping"])
    ]
    return encoded


def _cls_index(input_ids: list[int], tokenizer: PreTrainedTokenizerBase) -> int:
    """Where the window's ``[CLS]`` token is (0 when the tokenizer has none)."""
    cls = tokenizer.cls_token_id
    return input_ids.index(cls) if cls is not None and cls in input_ids else 0


def postprocess_predictions(
    examples: datasets.Dataset,
    features: datasets.Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    max_answer_length: int = 30,
) -> dict[str, str]:
    """The answer text of every example: the best span over all the windows of its context.

    Args:
        examples: the :func:`read_squad_json` rows (``id``, ``context``).
        features: their :func:`prepare_eval_features` windows (``example_id``, ``offset_mapping``), in the
            order of the logits.
        start_logits: ``(num_windows, T)`` start logits, ``T`` at least the longest window (``Trainer``
            pads shorter windows, with -100; those positions are masked out like every non-context token).
        end_logits: ``(num_windows, T)`` end logits.
        max_answer_length: longest answer in tokens.

    Returns:
        ``{example id: answer text}`` (``""`` for an example without any context token in its windows).
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    if start_logits.ndim != 2 or start_logits.shape != end_logits.shape or len(start_logits) != len(features):
        raise ValueError(
            f"start_logits and end_logits must both have the shape (num_windows={len(features)}, tokens), got "
            f"{start_logits.shape} and {end_logits.shape}."
        )
    all_offsets = features["offset_mapping"]
    if max(map(len, all_offsets), default=0) > start_logits.shape[1]:
        raise ValueError(f"The logits cover {start_logits.shape[1]} tokens but the longest window has "
                         f"{max(map(len, all_offsets))}: pass the logits of these features.")
    windows_of = defaultdict(list)
    for window, example_id in enumerate(features["example_id"]):
        windows_of[example_id].append(window)
    answers = {}
    for example_id, context in zip(examples["id"], examples["context"], strict=True):
        windows = windows_of.get(example_id, [])
        context_mask = np.zeros((len(windows), start_logits.shape[1]), dtype=bool)  # (W, T)
        for row, window in enumerate(windows):
            context_mask[row, : len(all_offsets[window])] = [offset is not None for offset in all_offsets[window]]
        spans = best_spans(start_logits[windows], end_logits[windows], context_mask,
                           max_answer_len=max_answer_length)
        if not spans:  # no window holds a context token
            answers[example_id] = ""
            continue
        offsets = all_offsets[windows[spans[0].window]]
        answers[example_id] = context[offsets[spans[0].start][0]:offsets[spans[0].end][1]]
    return answers


__all__ = ["postprocess_predictions", "prepare_eval_features", "prepare_train_features", "read_squad_json"]
