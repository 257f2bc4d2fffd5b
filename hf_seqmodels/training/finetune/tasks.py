"""The three fine-tuning tasks: reading their data, cutting it into model inputs, and scoring predictions.

==========================  ==============================  ===============================  =====================
task                        local files                     head (Auto class)                metric
==========================  ==============================  ===============================  =====================
``sequence-classification`` GLUE-style TSV, CSV, JSON lines ``…ForSequenceClassification``   accuracy, F1, MCC
                            (one sentence or a pair)                                         (Pearson/Spearman for
                                                                                             regression)
``token-classification``    CoNLL columns                   ``…ForTokenClassification``      entity-level P/R/F1
``question-answering``      SQuAD v1.1 JSON                 ``…ForQuestionAnswering``        exact match, F1
==========================  ==============================  ===============================  =====================

:func:`prepare_task` tokenises every split and returns a :class:`FinetuneTask`: the head's config fields
(``num_labels``, ``id2label``...), the collator, and how a feature's model outputs become a metric
(:meth:`FinetuneTask.score`) and a line of ``test_predictions.jsonl`` (:meth:`FinetuneTask.records`).
The metrics are ``evaluate`` modules shipped in :mod:`hf_seqmodels.metrics`: nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import evaluate
import numpy as np
from datasets import Dataset
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
)

from ...metrics import metric_path
from .classification_data import LabelSpace, encode_classification, label_space, read_classification_file
from .qa_data import postprocess_predictions, prepare_eval_features, prepare_train_features, read_squad_json
from .token_classification_data import (
    IGNORE_INDEX,
    label_list,
    predictions_to_tags,
    read_conll,
    tokenize_and_align_labels,
)

TASKS = {
    "sequence-classification": AutoModelForSequenceClassification,
    "token-classification": AutoModelForTokenClassification,
    "question-answering": AutoModelForQuestionAnswering,
}
#: the columns of QA windows that locate an answer in its context; they are no model input
BOOKKEEPING_COLUMNS = ("example_id", "offset_mapping")
HUB_COLUMNS = {  # how the usual Hub datasets name their columns
    "sequence-classification": {"sentence": "text", "sentence1": "text", "sentence2": "text_pair"},
    "token-classification": {"ner_tags": "tags"},
}
#: the logit given to the padded positions of QA windows: never part of an answer
PAD_LOGIT = -1e4


# ------------------------------------------------------------------------------------------------ reading

def read_split(data, path: str) -> Dataset:
    """One split of ``data.task`` from a local file."""
    if data.task == "sequence-classification":
        return read_classification_file(path, data.text_column, data.text_pair_column, data.label_column)
    return read_conll(path) if data.task == "token-classification" else read_squad_json(path)


def load_raw_splits(data) -> dict[str, Dataset]:
    """``{"train", "validation", "test"}`` (those given) from local files or a ``datasets`` dataset, each cut to
    its first ``--max_train_samples`` / ``--max_eval_samples`` / ``--max_predict_samples`` examples."""
    if data.train_file is not None:
        files = {"train": data.train_file, "validation": data.validation_file, "test": data.test_file}
        splits = {split: read_split(data, path) for split, path in files.items() if path is not None}
    else:
        splits = _hub_splits(data)
    limits = {"train": data.max_train_samples, "validation": data.max_eval_samples, "test": data.max_predict_samples}
    return {split: ds if limits[split] is None else ds.select(range(min(limits[split], len(ds))))
            for split, ds in splits.items()}


def _hub_splits(data) -> dict[str, Dataset]:
    from datasets import load_dataset

    raw = load_dataset(data.dataset_name, data.dataset_config_name)
    splits = {}
    for split in ("train", "validation", "test"):
        if split not in raw:
            continue
        ds = raw[split]
        options = {"load_from_cache_file": map_options(data)["load_from_cache_file"]}
        if data.task == "token-classification" and "ner_tags" in ds.column_names:  # ClassLabel ids -> tag names
            names = ds.features["ner_tags"].feature.names
            ds = ds.map(lambda b, names=names: {"ner_tags": [[names[t] for t in tags] for tags in b["ner_tags"]]},
                        batched=True, **options)
        renames = {k: v for k, v in HUB_COLUMNS.get(data.task, {}).items() if k in ds.column_names}
        if data.task == "sequence-classification" and data.text_column:
            renames = {data.text_column: "text", **({data.text_pair_column: "text_pair"} if data.text_pair_column
                                                    else {})}
        ds = ds.rename_columns(renames)
        if data.task == "sequence-classification" and data.label_column in ds.column_names:
            ds = ds.rename_column(data.label_column, "label") if data.label_column != "label" else ds
            ds = ds.filter(lambda row: row["label"] != -1, **options)  # GLUE test splits are labelled -1
            if hasattr(ds.features["label"], "names"):  # ClassLabel ids -> their names, for id2label
                names = ds.features["label"].names
                ds = ds.map(lambda b, names=names: {"label": [names[i] for i in b["label"]]}, batched=True,
                            **options)
        splits[split] = ds
    return splits


# ------------------------------------------------------------------------------------------------ the task

@dataclass
class FinetuneTask:
    """What differs between the three tasks once the data is tokenised.

    Model outputs are kept per feature (:meth:`feature_output`): a classifier's ``(C,)`` logits, a tagger's
    ``(T,)`` predicted tag ids, a QA window's ``(2, T)`` start and end logits, ``T`` the feature's own length.
    """

    name: str
    head: dict[str, Any]
    collator: Any
    labels: LabelSpace | None = None
    max_answer_length: int = 30
    metric: Any = field(default=None, repr=False)

    @property
    def id2label(self) -> dict[int, str] | None:
        return self.head.get("id2label")

    def feature_output(self, output, row: int, keep: slice) -> np.ndarray:
        """Row ``row`` of a batch's model ``output``, its real positions ``keep`` only."""
        if self.name == "sequence-classification":
            return output.logits[row].float().cpu().numpy()
        if self.name == "token-classification":
            return output.logits[row, keep].argmax(-1).cpu().numpy()
        return np.stack([output.start_logits[row, keep].float().cpu().numpy(),
                         output.end_logits[row, keep].float().cpu().numpy()])

    def score(self, outputs: list[np.ndarray], features: Dataset, examples: Dataset) -> dict[str, float]:
        """The task's metric of ``outputs`` (one per feature of ``features``, made from ``examples``); empty
        when the data has no labels."""
        if self.name == "question-answering":
            if not has_answers(examples):
                return {}
            answers = self.answers(outputs, features, examples)
            return self.metric.compute(
                predictions=[{"id": k, "prediction_text": v} for k, v in answers.items()],
                references=[{"id": ex["id"], "answers": ex["answers"]} for ex in examples])
        if "labels" not in features.column_names:
            return {}
        if self.name == "token-classification":
            predicted, references = predictions_to_tags(_padded(outputs, 0), features["labels"], self.id2label)
            scores = self.metric.compute(predictions=predicted, references=references)
            return {k: v for k, v in scores.items() if k.startswith("overall_")}
        logits = np.stack(outputs)  # (N, C)
        predicted = logits[:, 0] if self.labels.is_regression else logits.argmax(-1)
        kwargs = {} if self.labels.is_regression or self.labels.num_labels == 2 else {"average": "macro"}
        return self.metric.compute(predictions=predicted, references=features["labels"], **kwargs)

    def answers(self, outputs: list[np.ndarray], features: Dataset, examples: Dataset) -> dict[str, str]:
        logits = _padded(outputs, PAD_LOGIT)  # (N, 2, T)
        return postprocess_predictions(examples, features, logits[:, 0], logits[:, 1],
                                       max_answer_length=self.max_answer_length)

    def records(self, outputs: list[np.ndarray], features: Dataset, examples: Dataset) -> list[dict[str, Any]]:
        """One ``test_predictions.jsonl`` record per example."""
        if self.name == "question-answering":
            return [{"id": k, "prediction_text": v} for k, v in self.answers(outputs, features, examples).items()]
        if self.name == "token-classification":  # CoNLL test files carry tags: they also mark the words
            predicted, _ = predictions_to_tags(_padded(outputs, 0), features["labels"], self.id2label)
            return [{"tokens": ex["tokens"], "predicted_tags": tags}
                    for ex, tags in zip(examples, predicted, strict=True)]
        if self.labels.is_regression:
            return [{"score": float(logits[0])} for logits in outputs]
        return [{"label": self.id2label[int(logits.argmax())]} for logits in outputs]


def _padded(rows: list[np.ndarray], value: float) -> np.ndarray:
    """Rows of different lengths along their last axis, padded with ``value`` into one array."""
    width = max((row.shape[-1] for row in rows), default=0)
    out = np.full((len(rows), *rows[0].shape[:-1], width) if rows else (0, 0), value,
                  dtype=rows[0].dtype if rows else np.float32)
    for i, row in enumerate(rows):
        out[i, ..., : row.shape[-1]] = row
    return out


def has_answers(examples: Dataset) -> bool:
    """Whether every question of a SQuAD split has a gold answer (a test file may have none)."""
    return all(answers["text"] for answers in examples["answers"])


def target_counts(task: str, features: Dataset, per_sentence: bool) -> np.ndarray:
    """``(N,)`` the number of targets each feature adds to its batch's mean loss: 1 per example for
    classification, QA and a sentence-level loss (``per_sentence``, the CRF's), else the labelled tokens."""
    if task != "token-classification" or per_sentence:
        return np.ones(len(features), dtype=np.int64)
    return np.array([sum(label != IGNORE_INDEX for label in labels) for labels in features["labels"]], dtype=np.int64)


# ------------------------------------------------------------------------------------------------ tokenising

def map_options(data) -> dict[str, Any]:
    """What every ``Dataset.map`` of the data takes from the command line, as in transformers' examples:
    ``--preprocessing_num_workers`` processes, and ``--overwrite_cache`` to recompute instead of reading the
    cache files of an earlier run (a dataset read from local files is in memory and has none)."""
    return {"num_proc": data.preprocessing_num_workers,
            "load_from_cache_file": False if getattr(data, "overwrite_cache", False) else None}


def prepare_task(data, splits: dict[str, Dataset], tokenizer) -> tuple[dict[str, Dataset], FinetuneTask]:
    """Tokenise every split for ``data.task``; returns ``(features per split, task)``."""
    if data.task == "sequence-classification":
        return _prepare_classification(data, splits, tokenizer)
    if data.task == "token-classification":
        tags = label_list(*splits.values())  # a tag seen only in validation still gets an id
        label2id = {tag: i for i, tag in enumerate(tags)}
        features = {split: tokenize_and_align_labels(ds, tokenizer, label2id, data.max_seq_length,
                                                     label_all_subwords=data.label_all_subwords,
                                                     **map_options(data))
                    for split, ds in splits.items()}
        head = {"num_labels": len(tags), "id2label": dict(enumerate(tags)), "label2id": label2id}
        return features, FinetuneTask(data.task, head, DataCollatorForTokenClassification(tokenizer),
                                      metric=evaluate.load(metric_path("hfsm_seqeval")))
    features = {split: _qa_windows(data, ds, tokenizer, training=split == "train") for split, ds in splits.items()}
    return features, FinetuneTask(data.task, {}, DataCollatorWithPadding(tokenizer),
                                  max_answer_length=data.max_answer_length,
                                  metric=evaluate.load(metric_path("hfsm_squad")))


def _prepare_classification(data, splits, tokenizer):
    labels = label_space(splits["train"]["label"], data.regression)
    head: dict[str, Any] = {"num_labels": labels.num_labels}
    if labels.is_regression:
        head["problem_type"] = "regression"
    else:
        head.update(id2label=dict(enumerate(labels.labels)), label2id=labels.label2id,
                    problem_type="single_label_classification")
    features = {split: encode_classification(ds, tokenizer, data.max_seq_length, labels, **map_options(data))
                for split, ds in splits.items()}
    metric = evaluate.load(metric_path("hfsm_classification"), "regression" if labels.is_regression else None)
    return features, FinetuneTask(data.task, head, DataCollatorWithPadding(tokenizer), labels, metric=metric)


def _qa_windows(data, examples: Dataset, tokenizer, training: bool) -> Dataset:
    """Windows of a SQuAD split: training windows with their answer's positions; held-out windows with
    ``example_id`` and ``offset_mapping`` too, and the positions when every question has an answer (for the
    evaluation loss)."""
    labelled = has_answers(examples)

    def windows(batch):
        if training:
            return prepare_train_features(batch, tokenizer, data.max_seq_length, data.doc_stride)
        encoded = dict(prepare_eval_features(batch, tokenizer, data.max_seq_length, data.doc_stride))
        if labelled:  # the same windows: the same tokenizer call
            positions = prepare_train_features(batch, tokenizer, data.max_seq_length, data.doc_stride)
            encoded.update(start_positions=positions["start_positions"], end_positions=positions["end_positions"])
        return encoded

    return examples.map(windows, batched=True, remove_columns=examples.column_names, **map_options(data),
                        desc="Cutting contexts into windows")


__all__ = ["BOOKKEEPING_COLUMNS", "FinetuneTask", "TASKS", "has_answers", "load_raw_splits", "map_options", "prepare_task",
           "read_split", "target_counts"]
