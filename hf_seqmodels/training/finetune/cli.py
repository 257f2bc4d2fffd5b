"""Command line of ``training/finetune.py``: fine-tune on classification, tagging or extractive QA.

The three tasks (:mod:`.tasks`): ``sequence-classification`` (GLUE-style TSV/CSV/JSON lines, one sentence or
a pair; regression for real-valued labels; accuracy, F1, MCC or Pearson/Spearman), ``token-classification``
(CoNLL columns; entity-level precision/recall/F1) and ``question-answering`` (SQuAD v1.1 JSON, long contexts
in overlapping windows; exact match and F1).

The model is either loaded (``--model_name_or_path``: a pretraining output folder, any saved model of ours, or
a Hub BERT when online) with a fresh head, or built from ``--model_family``/``--preset`` with random weights
and ``--tokenizer_name`` (fine-tuning trains no tokenizer): the baseline that shows what pretraining buys.
Training runs on the package's one loop (:class:`~.trainer.FinetuneTrainingLoop`), with transformers'
``TrainingArguments`` names, atomic checkpoints, ``--resume_from_checkpoint latest`` and stop signals. A
loaded model trains with transformers' defaults (AdamW at 5e-5, linear decay, 3 epochs, batches of 8); a
preset with its recipe (the head's own where the family has one). Flags override both::

    python training/finetune.py --task sequence-classification \\
        --model_name_or_path runs/bert-mini-wikitext2 \\
        --train_file ../shared/data/sst2/train.tsv --validation_file ../shared/data/sst2/dev.tsv \\
        --max_seq_length 64 --learning_rate 1e-4 --num_train_epochs 2 --output_dir runs/sst2

Without ``--do_train/--do_eval/--do_predict`` the script trains, evaluates when there is held-out data and
predicts ``--test_file`` when one is given (``test_predictions.jsonl``, ``predict_results.json``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoTokenizer

from ...cards import write_model_card
from ...registry import FamiliesWithHead
from ..core.cards import engine_card_arguments
from ..core.cli import (
    CommandLineParser,
    configure_logging,
    dataset_label,
    finish_processes,
    model_arguments,
    model_family,
    model_preset,
    parse_command_line,
    start_run,
)
from ..core.cli import build_model as build_family_model
from ..core.finished_run import SELF_ATTENTION_PLOT
from ..core.run_files import save_metrics
from .char_features import DataCollatorForCharTagging, add_char_input_ids
from .pretrained_embeddings import check_embedding_source, initialise_embeddings
from .tasks import TASKS, FinetuneTask, load_raw_splits, prepare_task
from .trainer import BATCH_DEFAULTS, FINETUNE_DEFAULTS, FinetuneTrainingArguments, FinetuneTrainingLoop, Split

logger = get_logger(__name__)

MODEL_FAMILIES = FamiliesWithHead(*TASKS.values())  # bert, bilstm_crf, rnn, textcnn
PREDICTIONS_FILE = "test_predictions.jsonl"
#: the tokenizer-training options of the shared model arguments: fine-tuning loads its tokenizer
TOKENIZER_TRAINING = ("vocab_size", "min_frequency", "lowercase")

_ModelArguments = model_arguments(MODEL_FAMILIES, "bert", "word", "tiny, bert-mini, kim2014, lample2016")


@dataclass
class ModelArguments(_ModelArguments):
    """Which model to fine-tune (a saved one, or a fresh one from a preset), its tokenizer, and TextCNN's
    initial word vectors."""

    pretrained_embeddings: str | None = field(default=None, metadata={
        "help": "textcnn: initial input embeddings from word vectors (word2vec text file or WordVectors folder); "
                "the config's embedding_mode (static, non-static, multichannel) decides whether they are trained"})

    def __post_init__(self):
        super().__post_init__()
        for name in TOKENIZER_TRAINING:
            if getattr(self, name) not in (None, False):
                raise ValueError(f"Invalid `--{name}`={getattr(self, name)!r}: fine-tuning trains no tokenizer; "
                                 "give a saved one with --tokenizer_name (or the model's, with --model_name_or_path).")


@dataclass
class DataArguments:
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
    max_predict_samples: int | None = field(default=None, metadata={"help": "predict the first N test examples"})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "processes that tokenise"})
    overwrite_cache: bool = field(default=False, metadata={
        "help": "tokenise again instead of reading the datasets cache files of an earlier run"})

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"Invalid `task`={self.task!r}: expected one of {', '.join(TASKS)}.")
        if self.train_file is None and self.dataset_name is None:
            raise ValueError("Give `train_file` (with `validation_file`) or `dataset_name`.")
        for name in ("max_seq_length", "doc_stride", "max_answer_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"Invalid `{name}`={getattr(self, name)}: expected a positive number of tokens.")
        for name in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"Invalid `{name}`={getattr(self, name)}: expected an integer >= 1.")
        if self.task == "question-answering" and self.doc_stride >= self.max_seq_length:
            raise ValueError(f"Invalid `doc_stride`={self.doc_stride}: it must be smaller than "
                             f"`max_seq_length`={self.max_seq_length} (windows overlap by that many tokens).")


# the names of the Trainer-based version of this script
FinetuneModelArguments, FinetuneDataArguments = ModelArguments, DataArguments


# ------------------------------------------------------------------------------------------ arguments

def finetune_recipe(model_args: ModelArguments, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(recipe, task defaults)``: a loaded model (``--model_name_or_path``) fine-tunes with transformers'
    defaults and no recipe; a new one (``--preset``/``--config_name``) with its family's recipe for the task's
    head (BERT's fine-tuning recipe, the recurrent classifier's) or else the preset's."""
    family = None if model_args.model_name_or_path else model_family(model_args)
    if family is None:  # a loaded model, or a config of another library: transformers' defaults
        return {}, FINETUNE_DEFAULTS
    if TASKS[task] not in family.heads:
        raise ValueError(f"model_family {family.name} has no head for the task {task}: its heads are "
                         f"{', '.join(auto.__name__ for auto in family.heads)}.")
    return family.training_recipe(model_preset(model_args), TASKS[task]), BATCH_DEFAULTS


def build_parser() -> CommandLineParser:
    """The command line's parser: its flags and ``--help``."""
    return CommandLineParser(
        (ModelArguments, DataArguments, FinetuneTrainingArguments),
        description="Fine-tune a model of the package on sequence classification, token classification or "
                    "extractive QA.",
        epilog=__doc__)  # the module docstring, with its examples


def parse_arguments(argv: list[str] | None = None) -> tuple[ModelArguments, DataArguments, FinetuneTrainingArguments]:
    """``(model_args, data_args, training_args)`` of ``argv``, the training arguments completed by the recipe."""
    model_args, data_args, training_args = parse_command_line(build_parser(), argv)
    recipe, defaults = finetune_recipe(model_args, data_args.task)
    return model_args, data_args, training_args.with_recipe(recipe, defaults)


def choose_actions(args: FinetuneTrainingArguments, splits: dict[str, Any]) -> FinetuneTrainingArguments:
    """The run's actions: without any of ``--do_train/--do_eval/--do_predict``, train, evaluate when there is
    held-out data and predict when there is a test split. Evaluation needs held-out data, prediction a test split."""
    if not (args.do_train or args.do_eval or args.do_predict):
        args = dataclasses.replace(args, do_train=True, do_eval="validation" in splits, do_predict="test" in splits)
    if args.do_eval and "validation" not in splits:
        raise ValueError("--do_eval needs held-out data: give --validation_file (or a dataset with a validation split).")
    if args.do_predict and "test" not in splits:
        raise ValueError("--do_predict needs --test_file (or a dataset with a test split).")
    if "validation" not in splits and args.eval_strategy != "no":  # the default "epoch" with nothing to evaluate
        args = dataclasses.replace(args, eval_strategy="no")
    return args


# --------------------------------------------------------------------------------------------- model

def load_tokenizer(model_args: ModelArguments):
    """The tokenizer of ``--tokenizer_name``, else of ``--model_name_or_path``."""
    source = model_args.tokenizer_name or model_args.model_name_or_path
    if source is None:
        raise ValueError("A model built from --preset needs --tokenizer_name (e.g. the tokenizer of the "
                         "pretraining run it is compared with); fine-tuning trains no tokenizer.")
    return AutoTokenizer.from_pretrained(source, trust_remote_code=model_args.trust_remote_code)


def build_model(model_args: ModelArguments, task: str, tokenizer, head_config: dict[str, Any]):
    """The task's head on a saved model (``--model_name_or_path``), or a fresh model from ``--preset``.
    ``head_config`` holds ``num_labels``/``id2label``/``label2id`` (and ``problem_type``)."""
    try:
        return build_family_model(model_args, tokenizer, MODEL_FAMILIES, TASKS[task], **head_config)
    except ValueError as error:
        if model_args.model_name_or_path or "Unrecognized configuration class" not in str(error):
            raise
        raise ValueError(f"model_family {model_args.model_family} has no head for the task {task}: {error}") from None


def fit_model_to_data(model, model_args: ModelArguments, data: DataArguments, task: FinetuneTask,
                      splits: dict, features: dict, tokenizer, seed: int) -> dict:
    """Checks and additions that depend on both model and data: character features for a tagger with a
    character encoder (the collator pads them), the word vectors of ``--pretrained_embeddings``, and a window
    no narrower than a TextCNN's widest filter. Returns the features (with ``char_input_ids`` where added)."""
    if data.task == "token-classification" and getattr(model.config, "char_encoder", None):
        # characters from the words, so that words outside the vocabulary keep theirs (char_features.py)
        features = {split: add_char_input_ids(f, splits[split], tokenizer, model.config, data.max_seq_length)
                    for split, f in features.items()}
        task.collator = DataCollatorForCharTagging(tokenizer)
    check_embedding_source(model, model_args.pretrained_embeddings)
    widest_filter = max(getattr(model.config, "filter_sizes", None) or [0])
    if widest_filter > data.max_seq_length:
        raise ValueError(f"Invalid `max_seq_length`={data.max_seq_length}: the model's widest filter spans "
                         f"{widest_filter} tokens (filter_sizes={model.config.filter_sizes}); give at least that many.")
    if model_args.pretrained_embeddings:
        initialise_embeddings(model, model_args.pretrained_embeddings, tokenizer, seed=seed)
    return features


# ------------------------------------------------------------------------------------------ the run

def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv`` (or one ``.json``/``.yaml`` file of arguments), then train, evaluate and predict as asked;
    returns the results."""
    model_args, data, training_args = parse_arguments(argv)
    configure_logging()
    splits = load_raw_splits(data)
    if "train" not in splits:
        raise ValueError("The data has no training split (its labels define the head).")
    training_args = choose_actions(training_args, splits)
    accelerator = start_run(training_args)
    if "validation" not in splits:
        logger.info("No held-out data: no evaluation (--eval_strategy no).")
    tokenizer = load_tokenizer(model_args)
    features, task = prepare_task(data, splits, tokenizer)
    set_seed(training_args.seed)
    model = build_model(model_args, data.task, tokenizer, task.head)
    features = fit_model_to_data(model, model_args, data, task, splits, features, tokenizer, training_args.seed)
    logger.info(f"Fine-tuning {type(model).__name__} ({model.num_parameters():,} parameters) on "
                f"{len(splits['train']):,} training examples ({len(features['train']):,} features).")
    validation = Split("validation", splits["validation"], features["validation"]) if "validation" in splits else None
    loop = FinetuneTrainingLoop(model, tokenizer, task, features["train"], validation, training_args, accelerator)
    results: dict[str, Any] = {}
    if training_args.do_train:
        results = loop.train(describe_data(model_args, data, len(splits["train"])), dataset_label(data))
    elif training_args.do_eval:
        results = loop.evaluate_only()
    if training_args.do_predict:
        results.update(predict(loop, Split("test", splits["test"], features["test"])))
    if training_args.do_train:
        write_card(loop, model_args, data, results, len(splits["train"]))
    finish_processes(accelerator)
    return results


def predict(loop: FinetuneTrainingLoop, split: Split) -> dict[str, Any]:
    """Predict ``split``: ``test_predictions.jsonl`` (one record per example) and ``predict_results.json``
    (``predict_loss`` and the task's metric when the split is labelled, ``predict_samples``)."""
    metrics, records = loop.predict(split)
    if loop.accelerator.is_main_process:
        output_dir = Path(loop.args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        path = output_dir / PREDICTIONS_FILE
        path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
        save_metrics(output_dir, "predict", metrics)
        logger.info(f"Wrote {len(records)} predictions to {path}; {metrics}")
    return metrics


def describe_data(model_args: ModelArguments, data: DataArguments, num_examples: int) -> str:
    """One sentence for the model card: the task, the data and where the weights started."""
    train_source = Path(data.train_file).name if data.train_file else data.dataset_name
    held_out = f", evaluated on `{Path(data.validation_file).name}`" if data.validation_file else ""
    start = model_args.model_name_or_path or f"random initialisation (preset {model_args.preset})"
    if model_args.pretrained_embeddings:
        start += f" with input embeddings from `{Path(model_args.pretrained_embeddings).name}`"
    return (f"Fine-tuned for {data.task} on `{train_source}` ({num_examples:,} training examples){held_out}, "
            f"starting from {start}.")


def write_card(loop: FinetuneTrainingLoop, model_args: ModelArguments, data: DataArguments,
               results: dict[str, Any], num_examples: int) -> None:
    """The model card with every metric of the run (the task's, not only the losses); every process must call
    this (a sharded model is gathered)."""
    model = loop.gathered_model()
    if not loop.accelerator.is_main_process:
        return
    output_dir = Path(loop.args.output_dir)
    shown = {k: v for k, v in results.items() if not k.endswith(("_runtime_seconds", "_per_second", "num_processes"))}
    images = {"Self-attention of the last layer on a held-out example (rows: queries, columns: keys)":
              SELF_ATTENTION_PLOT} if (output_dir / SELF_ATTENTION_PLOT).is_file() else None
    hyper = {**engine_card_arguments(loop.args, loop.accelerator.num_processes), **loop.card_arguments()}
    write_model_card(output_dir, model, loop.tokenizer, shown, training_data=describe_data(model_args, data, num_examples),
                     training_args=hyper, eval_dataset=dataset_label(data), images=images)

__all__ = ["DataArguments", "FinetuneDataArguments", "FinetuneModelArguments", "MODEL_FAMILIES", "ModelArguments",
           "build_model", "choose_actions", "finetune_recipe", "load_tokenizer", "main", "parse_arguments", "predict"]
