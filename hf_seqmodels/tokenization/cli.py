"""Command line for :func:`~hf_seqmodels.tokenization.training.train_tokenizer`.

Example::

    python tokenizer_scripts/train_tokenizer.py --train_file corpus.txt --tokenizer_kind char --output_dir tok-char
    python tokenizer_scripts/train_tokenizer.py --dataset_name wikitext --dataset_config_name \\
        wikitext-2-raw-v1 --tokenizer_kind bpe --vocab_size 8000 --lowercase --output_dir tok-bpe
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .cleaning import UNICODE_NORMALIZATION_FORMS, CleaningConfig
from .corpus import DEFAULT_MAX_LINE_LENGTH, LONG_LINE_POLICIES
from .training import TOKENIZER_KINDS, train_tokenizer

logger = logging.getLogger(__name__)

_CLEANING_FIELDS = [f for f in dataclasses.fields(CleaningConfig) if f.name != "unicode_normalization"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; one ``--<step>`` flag per boolean field of :class:`CleaningConfig`."""
    parser = argparse.ArgumentParser(description="Train a tokenizer and save it with save_pretrained.")
    data = parser.add_argument_group("training text (at least one of --train_file / --dataset_name)")
    data.add_argument(
        "--train_file",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="Text file(s); repeatable.",
    )
    data.add_argument("--dataset_name", help="A datasets.load_dataset name (downloaded from the Hub).")
    data.add_argument("--dataset_config_name", help="The dataset configuration, e.g. wikitext-2-raw-v1.")
    data.add_argument("--dataset_split", default="train", help="Split to train on (default: train).")
    data.add_argument(
        "--text_column", default="text", help="Dataset column holding the text (default: text)."
    )

    model = parser.add_argument_group("tokenizer")
    model.add_argument(
        "--tokenizer_kind", choices=TOKENIZER_KINDS, default="bpe", help="Tokenization kind (default: bpe)."
    )
    model.add_argument("--vocab_size", type=int, default=8000, help="Vocabulary cap (default: 8000).")
    model.add_argument("--min_frequency", type=int, default=2, help="Minimum token/merge count (default: 2).")
    model.add_argument(
        "--bert_special_tokens",
        action="store_true",
        help="Add [CLS] [SEP] [MASK] and the BERT template with token_type_ids.",
    )
    model.add_argument("--model_max_length", type=int, default=None, help="Stored as model_max_length.")
    for name, default in (("add_bos_token", "true"), ("add_eos_token", "false")):
        model.add_argument(
            f"--{name}",
            type=_boolean,
            default=None,
            metavar="{true,false}",
            help=f"Whether tokenizer(text) gets <{name[4:7]}> (default {default}; a sequence-to-sequence tokenizer "
            "uses --add_bos_token false --add_eos_token true). Not with --bert_special_tokens.",
        )

    limits = parser.add_argument_group("input limits (memory stays bounded)")
    limits.add_argument(
        "--max_train_bytes",
        type=int,
        default=None,
        help="Read at most this many UTF-8 bytes of training text (default: all of it).",
    )
    limits.add_argument(
        "--max_line_length",
        type=int,
        default=DEFAULT_MAX_LINE_LENGTH,
        help=f"Longest line in characters (default: {DEFAULT_MAX_LINE_LENGTH:,}).",
    )
    limits.add_argument(
        "--long_lines",
        choices=LONG_LINE_POLICIES,
        default="error",
        help="A longer line stops training with an error (default) or is split into pieces.",
    )

    cleaning = parser.add_argument_group("cleaning (built into the tokenizer, all off by default)")
    for field in _CLEANING_FIELDS:
        cleaning.add_argument(f"--{field.name}", action="store_true", help=field.metadata.get("help"))
    cleaning.add_argument(
        "--unicode_normalization",
        choices=UNICODE_NORMALIZATION_FORMS,
        default=None,
        help="Unicode normalization form applied first.",
    )

    parser.add_argument("--output_dir", required=True, help="Folder for save_pretrained.")
    parser.add_argument("--show_progress", action="store_true", help="Show the training progress bar.")
    return parser


def _boolean(value: str) -> bool:
    """``true``/``false`` (any case, also 1/0, yes/no) for the switch flags."""
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _fail(error: Exception) -> NoReturn:
    """A user error (bad file, bad value): one line ``error: ...`` on stderr, exit status 2, no traceback."""
    message = " ".join(str(error).split())
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _cleaning_config(args: argparse.Namespace) -> CleaningConfig:
    flags = {field.name: getattr(args, field.name) for field in _CLEANING_FIELDS}
    return CleaningConfig(unicode_normalization=args.unicode_normalization, **flags)


def _load_dataset(args: argparse.Namespace) -> Any:
    """The ``--dataset_split`` split of ``--dataset_name``, or ``None`` when no dataset is named."""
    if args.dataset_name is None:
        return None
    import datasets  # imported here: slow to import and only needed for this path

    logger.info(
        "Loading dataset %s (%s), split %s.", args.dataset_name, args.dataset_config_name, args.dataset_split
    )
    return datasets.load_dataset(args.dataset_name, args.dataset_config_name, split=args.dataset_split)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv``, train the tokenizer, save it to ``--output_dir`` and print a one-line summary."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.train_file and args.dataset_name is None:
        parser.error("give training text with --train_file and/or --dataset_name")
    try:
        tokenizer = train_tokenizer(
            args.train_file or None,
            dataset=_load_dataset(args),
            text_column=args.text_column,
            kind=args.tokenizer_kind,
            vocab_size=args.vocab_size,
            min_frequency=args.min_frequency,
            cleaning=_cleaning_config(args),
            add_bert_special_tokens=args.bert_special_tokens,
            model_max_length=args.model_max_length,
            show_progress=args.show_progress,
            add_bos_token=args.add_bos_token,
            add_eos_token=args.add_eos_token,
            max_train_bytes=args.max_train_bytes,
            max_line_length=args.max_line_length,
            long_lines=args.long_lines,
        )
    except (ValueError, OSError) as error:  # bad values and files (FileNotFoundError, unreadable, ...)
        _fail(error)
    tokenizer.save_pretrained(args.output_dir)
    logger.info("Vocabulary size %d; saved to %s.", len(tokenizer), args.output_dir)
    print(f"Saved a {args.tokenizer_kind} tokenizer with {len(tokenizer)} tokens to {args.output_dir}")
