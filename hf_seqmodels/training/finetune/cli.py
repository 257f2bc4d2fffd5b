"""Fine-tuning on downstream tasks with transformers' ``Trainer``: the logic of ``training/finetune.py``.

Three kinds of task, each with its data format, its head and its metric (an ``evaluate`` module
shipped in :mod:`hf_seqmodels.metrics`, so nothing is downloaded):

========================  ==============================  ==============================  =====================
``--task``                local files                     head (Auto class)               metric
========================  ==============================  ==============================  =====================
sequence-classification   GLUE-style TSV, CSV, JSON lines  ``…ForSequenceClassification``   accuracy, F1, MCC
                          (one sentence or a pair)                                        (Pearson/Spearman for
                                                                                          regression)
token-classification      CoNLL columns                   ``…ForTokenClassification``      entity-level P/R/F1
question-answering        SQuAD v1.1 JSON                 ``…ForQuestionAnswering``        exact match, F1
========================  ==============================  ==============================  =====================

The model is either loaded (``--model_name_or_path``: a pretraining output folder, any saved model of
ours, or a Hub BERT when online) with a fresh head, or built from a preset with random weights
(``--model_family``/``--preset`` with ``--tokenizer_name_or_path``): the baseline that shows what
pretraining buys. All of ``TrainingArguments`` are flags (``--learning_rate``, ``--num_train_epochs``,
``--eval_strategy``, ...), exactly as in transformers' example scripts.

    python training/finetune.py --task sequence-classification \\
        --model_name_or_path runs/bert-mini-wikitext2 \\
        --train_file ../shared/data/sst2/train.tsv --validation_file ../shared/data/sst2/dev.tsv \\
        --max_seq_length 64 --learning_rate 1e-4 --num_train_epochs 2 --output_dir runs/sst2
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evaluate
import numpy as np
from datasets import Dataset
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    EvalPrediction,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    set_seed,
)

from ...hub import write_model_card
from ...metrics import metric_path
from ...models import BertConfig, BiLSTMCRFConfig, RNNConfig, TextCNNConfig
from ..core.cli import build_model as build_family_model
from ..core.cli import configure_logging, dataset_label
from ..core.plotting import plot_loss_curves, write_history
from .char_features import DataCollatorForCharTagging, add_char_input_ids
from .classification_data import LabelSpace, encode_classification, label_space, read_classification_file
from .pretrained_embeddings import check_embedding_source, initialise_embeddings
from .qa_data import postprocess_predictions, prepare_eval_features, prepare_train_features, read_squad_json
from .token_classification_data import label_list, predictions_to_tags, read_conll, tokenize_and_align_labels

logger = logging.getLogger(__name__)

TASKS = {
    "sequence-classification": AutoModelForSequenceClassification,
    "token-classification": AutoModelForTokenClassification,
    "question-answering": AutoModelForQuestionAnswering,
}
MODEL_FAMILIES = {"bert": BertConfig, "bilstm_crf": BiLSTMCRFConfig, "rnn": RNNConfig, "textcnn": TextCNNConfig}


@dataclass
class FinetuneModelArguments:
    """Which model to fine-tune: a saved one, or a fresh one from a preset."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "a saved model folder (e.g. a pretrain_bert.py output) or Hub id; its head is replaced"})
    model_family: str = field(default="bert", metadata={
        "help": f"with --preset: the family of a randomly initialised model ({', '.join(MODEL_FAMILIES)})"})
    preset: str | None = field(default=None, metadata={"help": "a named config of --model_family (e.g. bert-mini)"})
    config_overrides: str | None = field(default=None, metadata={
        "help": 'with --preset: comma-separated config fields, e.g. "hidden_dropout_prob=0.2"'})
    tokenizer_name_or_path: str | None = field(default=None, metadata={
        "help": "tokenizer folder (default: the model's); required with --preset"})
    trust_remote_code: bool = field(default=False, metadata={"help": "allow a Hub model's own code"})
    pretrained_embeddings: str | None = field(default=None, metadata={
        "help": "textcnn: initial input embeddings from word vectors (word2vec text file or WordVectors folder); "
                "the config's embedding_mode (static, non-static, multichannel) decides whether they are trained"})


@dataclass
class FinetuneDataArguments:
    """The task, its data and how it is cut into model inputs."""

    task: str = field(default="sequence-classification", metadata={"help": f"one of {', '.join(TASKS)}"})
    train_file: str | None = field(default=None, metadata={
        "help": "training data: .tsv/.csv/.jsonl (classification), CoNLL text (tagging), SQuAD .json (QA)"})
    validation_file: str | None = field(default=None, metadata={"help": "held-out data in the same format"})
    test_file: str | None = field(default=None, metadata={"help": "data to predict (labels optional)"})
    dataset_name: str | None = field(default=None, metadata={
        "help": "a datasets Hub name instead of local files (needs the network), e.g. glue, conll2003, squad"})
    dataset_config_name: str | None = field(default=None, metadata={"help": "e.g. sst2 for glue"})
    dataset_label: str | None = field(default=None, metadata={
        "help": "the data's name in the model card's model-index (default: dataset_name, or the training file's folder)"})
    text_column: str | None = field(default=None, metadata={"help": "classification: the (first) text column"})
    text_pair_column: str | None = field(default=None, metadata={"help": "classification: the second sentence"})
    label_column: str = field(default="label", metadata={"help": "classification: the label column"})
    regression: bool | None = field(default=None, metadata={
        "help": "classification: force regression (true) or classification (false); default: guessed from labels"})
    max_seq_length: int = field(default=128, metadata={"help": "tokens per example (QA: per window)"})
    doc_stride: int = field(default=128, metadata={"help": "QA: tokens shared by consecutive context windows"})
    max_answer_length: int = field(default=30, metadata={"help": "QA: longest answer span, in tokens"})
    label_all_subwords: bool = field(default=False, metadata={
        "help": "tagging: label every sub-token of a word (default: the first one only)"})
    max_train_samples: int | None = field(default=None, metadata={"help": "use the first N training examples"})
    max_eval_samples: int | None = field(default=None, metadata={"help": "use the first N held-out examples"})
    preprocessing_num_workers: int | None = field(default=None)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"Invalid `task`={self.task!r}: expected one of {', '.join(TASKS)}.")
        if self.train_file is None and self.dataset_name is None:
            raise ValueError("Give `train_file` (with `validation_file`) or `dataset_name`.")
        for name in ("max_seq_length", "doc_stride", "max_answer_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"Invalid `{name}`={getattr(self, name)}: expected a positive number of tokens.")
        if self.task == "question-answering" and self.doc_stride >= self.max_seq_length:
            raise ValueError(f"Invalid `doc_stride`={self.doc_stride}: it must be smaller than "
                             f"`max_seq_length`={self.max_seq_length} (windows overlap by that many tokens).")


# ----------------------------------------------------------------------------------------------- data

HUB_COLUMNS = {  # how the usual Hub datasets name their columns
    "sequence-classification": {"sentence": "text", "sentence1": "text", "sentence2": "text_pair"},
    "token-classification": {"ner_tags": "tags"},
}


def load_raw_splits(data: FinetuneDataArguments) -> dict[str, Dataset]:
    """``{"train", "validation", "test"}`` (those given) from local files, or from a Hub dataset."""
    readers = {
        "sequence-classification": lambda p: read_classification_file(
            p, data.text_column, data.text_pair_column, data.label_column),
        "token-classification": read_conll,
        "question-answering": read_squad_json,
    }
    if data.train_file is not None:
        files = {"train": data.train_file, "validation": data.validation_file, "test": data.test_file}
        return {split: readers[data.task](path) for split, path in files.items() if path is not None}
    from datasets import load_dataset

    raw = load_dataset(data.dataset_name, data.dataset_config_name)
    splits = {}
    for split in ("train", "validation", "test"):
        if split not in raw:
            continue
        ds = raw[split]
        if data.task == "token-classification" and "ner_tags" in ds.column_names:  # ClassLabel ids -> tag names
            names = ds.features["ner_tags"].feature.names
            ds = ds.map(lambda b, names=names: {"ner_tags": [[names[t] for t in tags] for tags in b["ner_tags"]]},
                        batched=True)
        renames = {k: v for k, v in HUB_COLUMNS.get(data.task, {}).items() if k in ds.column_names}
        if data.task == "sequence-classification" and data.text_column:
            renames = {data.text_column: "text", **({data.text_pair_column: "text_pair"} if data.text_pair_column
                                                    else {})}
        ds = ds.rename_columns(renames)
        if data.task == "sequence-classification" and data.label_column in ds.column_names:
            ds = ds.rename_column(data.label_column, "label") if data.label_column != "label" else ds
            ds = ds.filter(lambda row: row["label"] != -1)  # GLUE test splits are labelled -1
            if hasattr(ds.features["label"], "names"):  # ClassLabel ids -> their names, for id2label
                names = ds.features["label"].names
                ds = ds.map(lambda b, names=names: {"label": [names[i] for i in b["label"]]}, batched=True)
        splits[split] = ds
    return splits


def _first(ds: Dataset, n: int | None) -> Dataset:
    return ds if n is None else ds.select(range(min(n, len(ds))))


def _logits(predictions) -> np.ndarray:
    """The logits of ``Trainer.predict``'s predictions (a tuple when the model returns more outputs)."""
    return predictions[0] if isinstance(predictions, tuple) else predictions


def _model_inputs(features: Dataset) -> Dataset:
    """The features without the bookkeeping columns of QA windows (``example_id``, ``offset_mapping``)."""
    return features.remove_columns([c for c in ("example_id", "offset_mapping") if c in features.column_names])


# ------------------------------------------------------------------------------------------- metrics

def classification_metrics(labels: LabelSpace):
    """``compute_metrics`` for sequence classification: argmax (or the score, for regression) against the labels."""
    metric = evaluate.load(metric_path("hfsm_classification"), "regression" if labels.is_regression else None)

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        logits = _logits(prediction.predictions)
        if labels.is_regression:
            predicted = np.squeeze(logits, axis=-1)
        else:
            predicted = np.argmax(logits, axis=-1)
        kwargs = {} if labels.is_regression or labels.num_labels == 2 else {"average": "macro"}
        return metric.compute(predictions=predicted, references=prediction.label_ids, **kwargs)

    return compute


def tagging_metrics(id2label: dict[int, str]):
    """``compute_metrics`` for token classification: entity-level precision, recall and F1 (+ token accuracy)."""
    metric = evaluate.load(metric_path("hfsm_seqeval"))

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        logits = _logits(prediction.predictions)
        predicted, references = predictions_to_tags(np.argmax(logits, axis=-1), prediction.label_ids, id2label)
        scores = metric.compute(predictions=predicted, references=references)
        return {k: v for k, v in scores.items() if k.startswith("overall_")}

    return compute


class QuestionAnsweringTrainer(Trainer):
    """A ``Trainer`` whose evaluation turns window-level start/end logits into answer texts and scores
    them against the gold answers (exact match and F1), besides the loss.

    ``eval_examples`` are the raw questions (``id``, ``context``, ``answers``); the ``eval_dataset`` given
    to the Trainer holds their tokenized windows, with ``example_id`` and ``offset_mapping``.
    """

    def __init__(self, *args, eval_examples: Dataset | None = None, max_answer_length: int = 30, **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_examples = eval_examples
        self.max_answer_length = max_answer_length
        self.squad_metric = evaluate.load(metric_path("hfsm_squad"))

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        features = eval_dataset if eval_dataset is not None else self.eval_dataset
        output = self.predict(_model_inputs(features), ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix)
        metrics = dict(output.metrics)
        if self.eval_examples is not None:
            start_logits, end_logits = output.predictions[:2]
            answers = postprocess_predictions(self.eval_examples, features, start_logits, end_logits,
                                              max_answer_length=self.max_answer_length)
            scores = self.squad_metric.compute(
                predictions=[{"id": k, "prediction_text": v} for k, v in answers.items()],
                references=[{"id": ex["id"], "answers": ex["answers"]} for ex in self.eval_examples],
            )
            metrics.update({f"{metric_key_prefix}_{k}": v for k, v in scores.items()})
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


# --------------------------------------------------------------------------------------------- model

def load_tokenizer(model_args: FinetuneModelArguments):
    source = model_args.tokenizer_name_or_path or model_args.model_name_or_path
    if source is None:
        raise ValueError("A model built from --preset needs --tokenizer_name_or_path (e.g. the tokenizer of the "
                         "pretraining run it is compared with).")
    return AutoTokenizer.from_pretrained(source, trust_remote_code=model_args.trust_remote_code)


def build_model(model_args: FinetuneModelArguments, task: str, tokenizer, head_config: dict[str, Any]):
    """The task's head on a saved model (``--model_name_or_path``), or a fresh model from ``--preset``
    (:func:`.cli_common.build_model`). ``head_config`` holds ``num_labels``/``id2label``/``label2id``
    (and ``problem_type``)."""
    try:
        return build_family_model(model_args, tokenizer, MODEL_FAMILIES, TASKS[task], **head_config)
    except ValueError as error:
        if model_args.model_name_or_path or "Unrecognized configuration class" not in str(error):
            raise
        raise ValueError(f"model_family {model_args.model_family} has no head for the task {task}: {error}") from None


# ------------------------------------------------------------------------------------------ the run

def prepare(data: FinetuneDataArguments, splits: dict[str, Dataset], tokenizer):
    """Tokenize every split for the task; returns ``(features, head_config, compute_metrics, collator)``."""
    num_proc = data.preprocessing_num_workers
    features: dict[str, Dataset] = {}
    if data.task == "sequence-classification":
        labels = label_space(splits["train"]["label"], data.regression)
        head = {"num_labels": labels.num_labels}
        if labels.is_regression:
            head["problem_type"] = "regression"
        else:
            head.update(id2label=dict(enumerate(labels.labels)), label2id=labels.label2id,
                        problem_type="single_label_classification")
        for split, ds in splits.items():
            features[split] = encode_classification(ds, tokenizer, data.max_seq_length, labels, num_proc=num_proc)
        return features, head, classification_metrics(labels), DataCollatorWithPadding(tokenizer)
    if data.task == "token-classification":
        tags = label_list(*splits.values())  # a tag seen only in validation still gets an id
        label2id = {tag: i for i, tag in enumerate(tags)}
        head = {"num_labels": len(tags), "id2label": dict(enumerate(tags)), "label2id": label2id}
        for split, ds in splits.items():
            features[split] = tokenize_and_align_labels(ds, tokenizer, label2id, data.max_seq_length,
                                                        label_all_subwords=data.label_all_subwords)
        return features, head, tagging_metrics(dict(enumerate(tags))), DataCollatorForTokenClassification(tokenizer)
    # question answering: training windows carry start/end positions, held-out windows their offsets
    def windows(ds: Dataset, prepare_fn) -> Dataset:
        return ds.map(lambda b: prepare_fn(b, tokenizer, data.max_seq_length, data.doc_stride), batched=True,
                      remove_columns=ds.column_names, num_proc=num_proc, desc="Cutting contexts into windows")

    features["train"] = windows(splits["train"], prepare_train_features)
    for split in ("validation", "test"):
        if split in splits:
            features[split] = windows(splits[split], prepare_eval_features)
    return features, {}, None, DataCollatorWithPadding(tokenizer)


def _history(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trainer's ``log_history`` in the format of :mod:`..core.plotting` (``train_loss`` / ``eval_loss`` per step)."""
    records = []
    for entry in log_history:
        record = {"step": entry.get("step"), "epoch": entry.get("epoch")}
        if "loss" in entry:
            records.append({**record, "train_loss": entry["loss"], "learning_rate": entry.get("learning_rate")})
        elif "eval_loss" in entry:
            records.append({**record, **{k: v for k, v in entry.items() if k.startswith("eval_")}})
    return records


def run(model_args: FinetuneModelArguments, data: FinetuneDataArguments,
        training_args: TrainingArguments) -> dict[str, Any]:
    """Fine-tune, evaluate on the validation split, predict the test split; returns the final metrics."""
    set_seed(training_args.seed)
    splits = load_raw_splits(data)
    if "train" not in splits:
        raise ValueError("The data has no training split.")
    splits["train"] = _first(splits["train"], data.max_train_samples)
    if "validation" in splits:
        splits["validation"] = _first(splits["validation"], data.max_eval_samples)
    tokenizer = load_tokenizer(model_args)
    features, head, compute_metrics, collator = prepare(data, splits, tokenizer)
    model = build_model(model_args, data.task, tokenizer, head)
    if data.task == "token-classification" and getattr(model.config, "char_encoder", None):
        # characters from the words, so that words outside the vocabulary keep theirs (char_features.py)
        features = {split: add_char_input_ids(f, splits[split], tokenizer, model.config, data.max_seq_length)
                    for split, f in features.items()}
        collator = DataCollatorForCharTagging(tokenizer)
    check_embedding_source(model, model_args.pretrained_embeddings)
    widest_filter = max(getattr(model.config, "filter_sizes", None) or [0])
    if widest_filter > data.max_seq_length:
        raise ValueError(f"Invalid `max_seq_length`={data.max_seq_length}: the model's widest filter spans "
                         f"{widest_filter} tokens (filter_sizes={model.config.filter_sizes}); give at least that many.")
    if model_args.pretrained_embeddings:
        initialise_embeddings(model, model_args.pretrained_embeddings, tokenizer, seed=training_args.seed)
    logger.info("Fine-tuning %s (%s parameters) on %d training examples (%d features)", type(model).__name__,
                f"{model.num_parameters():,}", len(splits["train"]), len(features["train"]))
    trainer_class = Trainer
    trainer_kwargs: dict[str, Any] = {}
    if data.task == "question-answering":
        trainer_class = QuestionAnsweringTrainer
        trainer_kwargs = {"eval_examples": splits.get("validation"), "max_answer_length": data.max_answer_length}
    trainer = trainer_class(
        model=model, args=training_args, train_dataset=features["train"], eval_dataset=features.get("validation"),
        processing_class=tokenizer, data_collator=collator, compute_metrics=compute_metrics, **trainer_kwargs,
    )
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    metrics = {"train_loss": train_result.training_loss, "train_runtime_seconds": train_result.metrics["train_runtime"],
               "train_examples": len(splits["train"])}
    if "validation" in features:
        metrics.update(trainer.evaluate())
    output_dir = Path(training_args.output_dir)
    if "test" in features:
        metrics.update(write_test_predictions(trainer, data, features["test"], splits["test"], head, output_dir))
    if trainer.is_world_process_zero():
        trainer.save_model()
        # Trainer pickles its arguments next to the weights; keep a readable JSON copy instead
        (output_dir / "training_args.bin").unlink(missing_ok=True)
        (output_dir / "training_args.json").write_text(training_args.to_json_string(), encoding="utf-8")
        (output_dir / "all_results.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")
        history = _history(trainer.state.log_history)
        write_history(history, output_dir)
        plot_loss_curves(history, output_dir, title=f"Fine-tuning: {data.task}", ylabel="cross-entropy (nats)")
        train_source = Path(data.train_file).name if data.train_file else data.dataset_name
        held_out = f", evaluated on `{Path(data.validation_file).name}`" if data.validation_file else ""
        start = model_args.model_name_or_path or f"random initialisation (preset {model_args.preset})"
        if model_args.pretrained_embeddings:
            start += f" with input embeddings from `{Path(model_args.pretrained_embeddings).name}`"
        shown = {k: v for k, v in metrics.items() if not k.endswith(("_runtime", "_per_second", "epoch"))}
        write_model_card(
            output_dir, trainer.model, tokenizer, shown,
            training_data=f"Fine-tuned for {data.task} on `{train_source}` ({len(splits['train']):,} training "
                          f"examples){held_out}, starting from {start}.",
            training_args={k: getattr(getattr(training_args, k), "value", getattr(training_args, k)) for k in (
                "learning_rate", "num_train_epochs", "per_device_train_batch_size", "weight_decay",
                "warmup_steps", "lr_scheduler_type", "seed")},  # enums (the scheduler type) by their value
            eval_dataset=dataset_label(data),
        )
    return metrics


def write_test_predictions(trainer: Trainer, data: FinetuneDataArguments, features: Dataset, examples: Dataset,
                           head: dict[str, Any], output_dir: Path) -> dict[str, float]:
    """Predict the test split and write ``test_predictions.jsonl`` (one record per example); returns the
    test metrics when the split is labelled."""
    output = trainer.predict(_model_inputs(features), metric_key_prefix="test")
    logits = output.predictions
    id2label = head.get("id2label")
    if data.task == "question-answering":
        answers = postprocess_predictions(examples, features, logits[0], logits[1],
                                          max_answer_length=data.max_answer_length)
        records = [{"id": k, "prediction_text": v} for k, v in answers.items()]
    else:
        logits = _logits(logits)
        if data.task == "token-classification":  # CoNLL test files carry tags: they also mark the words
            predicted, _ = predictions_to_tags(np.argmax(logits, axis=-1), output.label_ids, id2label)
            records = [{"tokens": ex["tokens"], "predicted_tags": tags}
                       for ex, tags in zip(examples, predicted, strict=True)]
        elif id2label is None:
            records = [{"score": float(s)} for s in np.squeeze(logits, axis=-1)]
        else:
            records = [{"label": id2label[int(i)]} for i in np.argmax(logits, axis=-1)]
    if trainer.is_world_process_zero():
        path = output_dir / "test_predictions.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        logger.info("Wrote %d test predictions to %s", len(records), path)
    return {k: v for k, v in output.metrics.items() if not k.endswith(("_runtime", "_per_second"))}


def build_parser() -> HfArgumentParser:
    return HfArgumentParser((FinetuneModelArguments, FinetuneDataArguments, TrainingArguments))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv`` (or a single ``.json`` file of arguments, as in transformers' examples) and run."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        model_args, data, training_args = parser.parse_json_file(json_file=argv[0])
    else:
        model_args, data, training_args = parser.parse_args_into_dataclasses(args=argv)
    configure_logging()
    return run(model_args, data, training_args)


__all__ = [
    "FinetuneDataArguments",
    "FinetuneModelArguments",
    "MODEL_FAMILIES",
    "QuestionAnsweringTrainer",
    "TASKS",
    "build_model",
    "build_parser",
    "load_raw_splits",
    "main",
    "run",
]
