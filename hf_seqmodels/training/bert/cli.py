"""Command line of ``training/pretrain_bert.py``: pretrain BERT with masked LM + next-sentence prediction.

Example (the same command runs on one process, under ``accelerate launch`` or ``torchrun``)::

    python training/pretrain_bert.py \\
        --train_file ../shared/data/wikitext2-heldout/valid.txt ../shared/data/wikitext2-heldout/test.txt \\
        --preset bert-mini --max_seq_length 128 --num_train_epochs 10 --optim adamw_torch \\
        --learning_rate 5e-4 --lr_scheduler_type cosine --warmup_steps 500 --output_dir runs/bert-mini

A WordPiece tokenizer with ``[CLS]``/``[SEP]``/``[MASK]`` is trained on the documents that are not held out
unless ``--tokenizer_name`` names one (the main process reads the --train_file text for it one document at a
time; the other processes load the saved tokenizer). The --train_file text is tokenised
once into memory-mapped token files under ``--cache_dir`` (``--overwrite_cache`` to redo) and the sentence
pairs are drawn as spans of them, so a corpus larger than RAM trains. The last
``--validation_split_percentage`` % of the documents are held out for the masked-LM and next-sentence
metrics, unless a ``--validation_file`` holds them; ``--max_train_samples`` / ``--max_eval_samples`` keep the
first sentence pairs only (the data names of transformers' ``run_mlm.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate.logging import get_logger
from accelerate.utils import set_seed
from transformers import AutoModelForPreTraining

from ...registry import FamiliesWithHead
from ..core.cli import (
    CommandLineParser,
    build_model,
    configure_logging,
    continued_from,
    dataset_label,
    default_actions,
    family_recipe,
    finish_processes,
    load_tokenizer,
    merged,
    model_arguments,
    parse_command_line,
    start_run,
)
from ..core.text import read_text_file
from .data import (
    SpecialIds,
    TokenDocuments,
    create_pretraining_examples,
    split_documents,
    tokenize_documents,
    tokenizer_training_texts,
)
from .token_documents import bert_token_documents
from .trainer import BERT_DEFAULTS, BertPretrainingArguments, BertPretrainingLoop

logger = get_logger(__name__)

MODEL_FAMILIES = FamiliesWithHead(AutoModelForPreTraining)  # bert
ModelArguments = model_arguments(MODEL_FAMILIES, "bert", "wordpiece", "tiny, bert-mini, bert-small, bert-base")


@dataclass
class DataArguments:
    """The documents and how sentence pairs are cut from them (names of transformers' ``run_mlm.py``)."""

    train_file: list[str] | None = field(default=None, metadata={"help": (
        "plain-text files; blank lines (or WikiText '= Title =' lines) separate documents")})
    validation_file: str | None = field(default=None, metadata={"help": (
        "a plain-text file of held-out documents (default: the last --validation_split_percentage %% of the "
        "training documents)")})
    dataset_name: str | None = field(default=None, metadata={
        "help": "a datasets name (instead of --train_file); one record = one document"})
    dataset_config_name: str | None = field(default=None, metadata={"help": "the dataset's configuration"})
    dataset_label: str | None = field(default=None, metadata={
        "help": "the data's name in the model card's model-index (default: --dataset_name or the training file's folder)"})
    text_column: str = field(default="text", metadata={"help": "the dataset's text column"})
    validation_split_percentage: float = field(default=5.0, metadata={"help": "the last N %% of the documents are held out"})
    max_seq_length: int = field(default=128, metadata={"help": "tokens per sentence pair, [CLS] and [SEP]s included"})
    short_seq_prob: float = field(default=0.1, metadata={"help": "probability of a shorter target length"})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": (
        "processes that tokenise a --dataset_name")})
    cache_dir: str | None = field(default=None, metadata={"help": (
        "folder of the token files a --train_file is tokenised into once (default: $HF_SEQMODELS_CACHE, else "
        "hf_seqmodels_tokens beside the datasets cache)")})
    overwrite_cache: bool = field(default=False, metadata={"help": "tokenise again even if token files exist"})
    max_train_samples: int | None = field(default=None, metadata={"help": "train on the first N sentence pairs"})
    max_eval_samples: int | None = field(default=None, metadata={"help": "evaluate on the first N held-out pairs"})

    def __post_init__(self):
        if self.train_file is None and self.dataset_name is None:
            raise ValueError("Give --train_file (one or more text files) or --dataset_name.")
        if self.validation_file is not None and self.train_file is None:
            raise ValueError(f"Invalid `--validation_file`={self.validation_file!r}: it goes with --train_file "
                             "(a --dataset_name holds out its last --validation_split_percentage % of documents).")
        for name in ("max_train_samples", "max_eval_samples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"Invalid `--{name}`={getattr(self, name)}: expected an integer >= 1.")
        if self.max_seq_length < 8:
            raise ValueError(f"Invalid `--max_seq_length`={self.max_seq_length}: expected at least 8 tokens.")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"Invalid `--short_seq_prob`={self.short_seq_prob}: expected a probability in [0, 1].")


def build_parser() -> CommandLineParser:
    """The command line's parser: its flags and ``--help``."""
    return CommandLineParser(
        (ModelArguments, DataArguments, BertPretrainingArguments),
        description="Pretrain BERT with masked LM + next-sentence prediction.",
        epilog=__doc__)  # the module docstring, with its examples


def parse_arguments(argv: list[str] | None = None):
    """``(model_args, data_args, training_args)`` of ``argv``, the training arguments completed by the recipe."""
    model_args, data_args, training_args = parse_command_line(build_parser(), argv)
    training_args = training_args.with_recipe(family_recipe(model_args), BERT_DEFAULTS)
    return model_args, data_args, default_actions(training_args)


def load_documents(args) -> list[list[str]]:
    """Documents (lists of sentences) from --train_file or --dataset_name, in RAM."""
    if args.train_file:
        return [doc for path in args.train_file for doc in split_documents(read_text_file(path))]
    if args.dataset_name:
        from datasets import load_dataset

        data = load_dataset(args.dataset_name, args.dataset_config_name, split="train")
        return [doc for text in data[args.text_column] for doc in split_documents(text)]
    raise ValueError("Give --train_file (one or more text files) or --dataset_name.")


def held_out_documents(args, count: int) -> int:
    """How many of the last of ``count`` documents are held out (at least 2, and 2 must be left to train on);
    none with a --validation_file."""
    if getattr(args, "validation_file", None):
        if count < 2:
            raise ValueError(f"{count} training documents are too few for next-sentence prediction (at least 2).")
        return 0
    held_out = max(2, math.ceil(count * args.validation_split_percentage / 100))
    if count - held_out < 2:
        raise ValueError(f"{count} documents are too few to hold out {held_out} and pretrain on the rest.")
    return held_out


def token_documents(args, tokenizer, documents: list[list[str]] | None, accelerator) -> TokenDocuments:
    """Every document's sentences as ids. --train_file text is tokenised once into memory-mapped token files
    (:func:`~.token_documents.bert_token_documents`: cached under --cache_dir, prepared by each machine's main
    process, mapped by every process); a --dataset_name's ``documents`` are tokenised in RAM."""
    if args.train_file:
        return bert_token_documents(args.train_file, tokenizer, cache_dir=args.cache_dir,
                                    overwrite_cache=args.overwrite_cache, accelerator=accelerator)
    ids = TokenDocuments.from_lists(tokenize_documents(documents, tokenizer, num_proc=args.preprocessing_num_workers))
    ids.documents_read = len(documents)
    return ids


def held_out_ids(args, ids: TokenDocuments, held_out: int, tokenizer, accelerator) -> TokenDocuments:
    """The documents of the held-out pairs: --validation_file's (token files as the training text's), else the
    last ``held_out`` of ``ids``."""
    if not args.validation_file:
        return ids[len(ids) - held_out :]
    held = bert_token_documents([args.validation_file], tokenizer, cache_dir=args.cache_dir,
                                overwrite_cache=args.overwrite_cache, accelerator=accelerator)
    if len(held) < 2:
        raise ValueError(f"Invalid `--validation_file`={args.validation_file!r}: it has {len(held)} document(s), "
                         "next-sentence prediction needs at least 2 (blank lines separate documents).")
    return held


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, build examples, tokenizer and model, pretrain and/or evaluate; returns the final metrics."""
    model_args, data_args, training_args = parse_arguments(argv)
    args = merged(model_args, data_args, training_args)
    configure_logging()
    train_tokenizer = not (args.tokenizer_name or args.model_name_or_path)
    documents = load_documents(args) if not args.train_file else None  # a --train_file is read as token files
    if documents is not None:
        held_out_documents(args, len(documents))
    accelerator = start_run(training_args)
    if documents is None:  # the main process streams the files' documents into the tokenizer trainer
        texts = lambda: ([], tokenizer_training_texts(args.train_file, lambda n: held_out_documents(args, n)))  # noqa: E731
    else:
        texts = ([" ".join(doc) + "\n" for doc in documents[: -held_out_documents(args, len(documents))]]
                 if train_tokenizer else [])
    tokenizer = load_tokenizer(args, texts, accelerator, add_bert_special_tokens=True)
    del texts
    set_seed(training_args.seed)
    model = build_model(args, tokenizer, MODEL_FAMILIES, AutoModelForPreTraining)
    if model.config.max_position_embeddings < args.max_seq_length:
        raise ValueError(f"Invalid `--max_seq_length`={args.max_seq_length}: the model has "
                         f"max_position_embeddings={model.config.max_position_embeddings}.")
    ids = token_documents(args, tokenizer, documents, accelerator)
    del documents  # the text is not held while training
    held_out = held_out_documents(args, ids.documents_read)
    special = SpecialIds.of(tokenizer)
    make = lambda docs, seed: create_pretraining_examples(  # noqa: E731
        docs, special, max_seq_length=args.max_seq_length, short_seq_prob=args.short_seq_prob, seed=seed)
    train_ids, eval_ids = ids[: len(ids) - held_out], held_out_ids(args, ids, held_out, tokenizer, accelerator)
    train = make(train_ids, training_args.seed)[: args.max_train_samples]  # run_mlm's: the first N examples
    evaluation = make(eval_ids, training_args.seed + 1)[: args.max_eval_samples]
    logger.info(f"{type(model).__name__} with {model.num_parameters():,} parameters; {ids.documents_read:,} "
                f"documents, {len(train):,} training and {len(evaluation):,} held-out sentence pairs.")
    loop = BertPretrainingLoop(model, tokenizer, train, evaluation, training_args, accelerator)
    if training_args.do_train:
        names = ", ".join(f"`{Path(p).name}`" for p in args.train_file) if args.train_file else f"`{args.dataset_name}`"
        results = loop.train(f"Pretrained on {names}: {ids.documents_read - held_out:,} documents, {len(train):,} "
                             f"sentence pairs of at most {args.max_seq_length} tokens; {len(tokenizer)}-token "
                             "WordPiece vocabulary." + continued_from(args), dataset_label(args))
    else:
        results = loop.evaluate_only()
    finish_processes(accelerator)
    return results


__all__ = ["DataArguments", "MODEL_FAMILIES", "ModelArguments", "held_out_documents", "held_out_ids", "load_documents",
           "main", "parse_arguments", "token_documents"]
