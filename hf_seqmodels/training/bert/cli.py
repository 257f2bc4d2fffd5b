"""Command line of ``training/pretrain_bert.py``: pretrain BERT with masked LM + next-sentence prediction.

Example (the same command runs on one process, under ``accelerate launch`` or ``torchrun``)::

    python training/pretrain_bert.py \\
        --train_file ../shared/data/wikitext2-heldout/valid.txt ../shared/data/wikitext2-heldout/test.txt \\
        --preset bert-mini --max_seq_length 128 --num_train_epochs 10 --optimizer adamw \\
        --learning_rate 5e-4 --lr_scheduler cosine --warmup_steps 500 --output_dir runs/bert-mini

A WordPiece tokenizer with ``[CLS]``/``[SEP]``/``[MASK]`` is trained on the text unless
``--tokenizer_name_or_path`` names one. The last ``--validation_split_percentage`` % of the
documents are held out for the masked-LM and next-sentence metrics.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForPreTraining

from ...models import BertConfig
from ..core.cli import (
    add_dataset_label_argument,
    add_engine_arguments,
    add_model_arguments,
    add_tokenizer_arguments,
    build_model,
    check_model_arguments,
    configure_logging,
    continued_from,
    dataset_label,
    engine_arguments,
    finish_processes,
    load_tokenizer,
)
from ..core.launch import make_accelerator
from ..core.text import read_text_file
from .data import SpecialIds, create_pretraining_examples, split_documents, tokenize_documents
from .trainer import BertPretrainingArguments, BertPretrainingLoop

logger = get_logger(__name__)

MODEL_FAMILIES = {"bert": BertConfig}

BERT_HELP = {
    "per_device_train_batch_size": "sentence pairs per process",
    "masked_positions_only": "compute vocabulary logits at the masked positions only (much cheaper)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Pretrain BERT with masked LM + next-sentence prediction.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_arguments(parser, MODEL_FAMILIES, "bert", "tiny, bert-mini, bert-small, bert-base")
    add_tokenizer_arguments(parser, default_kind="wordpiece")
    data = parser.add_argument_group("data")
    data.add_argument("--train_file", nargs="+", help="plain-text files; blank lines (or WikiText '= Title =' lines) "
                      "separate documents")
    data.add_argument("--dataset_name", help="a datasets name (instead of --train_file); one record = one document")
    data.add_argument("--dataset_config_name")
    add_dataset_label_argument(data)
    data.add_argument("--text_column", default="text")
    data.add_argument("--validation_split_percentage", type=float, default=5.0,
                      help="the last N %% of the documents are held out")
    data.add_argument("--max_seq_length", type=int, default=128)
    data.add_argument("--short_seq_prob", type=float, default=0.1, help="probability of a shorter target length")
    data.add_argument("--preprocessing_num_workers", type=int, default=None)
    add_engine_arguments(parser, BertPretrainingArguments, BERT_HELP)
    return parser


def load_documents(args: argparse.Namespace) -> list[list[str]]:
    """Documents (lists of sentences) from --train_file or --dataset_name."""
    if args.train_file:
        return [doc for path in args.train_file for doc in split_documents(read_text_file(path))]
    if args.dataset_name:
        from datasets import load_dataset

        data = load_dataset(args.dataset_name, args.dataset_config_name, split="train")
        return [doc for text in data[args.text_column] for doc in split_documents(text)]
    raise ValueError("Give --train_file (one or more text files) or --dataset_name.")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, build examples, tokenizer and model, pretrain; returns the final metrics."""
    args = build_parser().parse_args(argv)
    configure_logging()
    training_args = engine_arguments(args, BertPretrainingArguments)
    check_model_arguments(args, MODEL_FAMILIES)
    accelerator = make_accelerator(training_args)
    documents = load_documents(args)
    held_out = max(2, math.ceil(len(documents) * args.validation_split_percentage / 100))
    if len(documents) - held_out < 2:
        raise ValueError(f"{len(documents)} documents are too few to hold out {held_out} and pretrain on the rest.")
    texts = [" ".join(doc) + "\n" for doc in documents[:-held_out]]
    tokenizer = load_tokenizer(args, texts, accelerator, add_bert_special_tokens=True)
    set_seed(training_args.seed)
    model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForPreTraining)
    if model.config.max_position_embeddings < args.max_seq_length:
        raise ValueError(f"--max_seq_length {args.max_seq_length} exceeds the model's max_position_embeddings="
                         f"{model.config.max_position_embeddings}.")
    ids = tokenize_documents(documents, tokenizer, num_proc=args.preprocessing_num_workers)
    special = SpecialIds.of(tokenizer)
    make = lambda docs, seed: create_pretraining_examples(  # noqa: E731
        docs, special, max_seq_length=args.max_seq_length, short_seq_prob=args.short_seq_prob, seed=seed)
    train, evaluation = make(ids[:-held_out], training_args.seed), make(ids[-held_out:], training_args.seed + 1)
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; {len(documents):,} documents, "
                f"{len(train):,} training and {len(evaluation):,} held-out sentence pairs.")
    loop = BertPretrainingLoop(model, tokenizer, train, evaluation, training_args, accelerator)
    names = ", ".join(f"`{Path(p).name}`" for p in args.train_file) if args.train_file else f"`{args.dataset_name}`"
    results = loop.train(f"Pretrained on {names}: {len(documents) - held_out:,} documents, {len(train):,} sentence "
                         f"pairs of at most {args.max_seq_length} tokens; {len(tokenizer)}-token WordPiece vocabulary."
                         + continued_from(args),
                         dataset_label(args))
    finish_processes(accelerator)
    return results


__all__ = ["MODEL_FAMILIES", "build_parser", "load_documents", "main"]
