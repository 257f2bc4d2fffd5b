"""The tokenizer of a training run: loaded (``--tokenizer_name``, or the model's), or trained on the training text
and saved in the output folder (reused when resuming); the flags that describe it; the config fields a model takes
from it; a translation model's separate source tokenizer.

A tokenizer is trained by the main process only (:func:`~hf_seqmodels.tokenization.train_on_main_process`): the
scripts give the training text as a function that only the main process calls, returning the user's files (read
by the trainer itself, so its messages name the file and line; no copy is written) and/or texts; the other
processes load the saved tokenizer."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.logging import get_logger

from ...cards import SOURCE_TOKENIZER_FOLDER
from ...tokenization import TOKENIZER_KINDS, TextFile, train_on_main_process

logger = get_logger(__name__)

#: What a tokenizer is trained on: texts in memory (read as the lines of one file), or a function that only the
#: main process calls, returning ``(files, texts)``: files read by the trainer (a :class:`TextFile` may stop at a
#: character) and texts after them.
TrainingText = list[str] | Callable[[], tuple[list[TextFile], Iterable[str]]]


def tokenizer_fields(default_kind: str) -> list[tuple[str, type, Any]]:
    """The tokenizer arguments every script shares, as ``make_dataclass`` fields: a saved tokenizer
    (``--tokenizer_name``) or the settings of one trained on the training text."""
    help_ = lambda text: {"help": text}  # noqa: E731
    return [
        ("tokenizer_name", str | None, field(default=None, metadata=help_(
            "a saved tokenizer folder (default: the model's, else one trained on the training text)"))),
        ("tokenizer_kind", str, field(default=default_kind, metadata=help_(
            f"kind of a trained tokenizer: {', '.join(TOKENIZER_KINDS)}"))),
        ("vocab_size", int | None, field(default=None, metadata=help_("vocabulary size of a trained tokenizer"))),
        ("min_frequency", int | None, field(default=None, metadata=help_("minimum count of a trained token"))),
        ("lowercase", bool, field(default=False, metadata=help_("a trained tokenizer lowercases its input"))),
    ]


def add_tokenizer_flags(parser: argparse.ArgumentParser, default_kind: str) -> None:
    """:func:`tokenizer_fields` as flags of a plain ``argparse`` parser (the scripts that do not train by gradient
    descent and so take no training arguments)."""
    group = parser.add_argument_group("tokenizer")
    for name, kind, spec in tokenizer_fields(default_kind):
        if kind is bool:
            group.add_argument(f"--{name}", action="store_true", help=spec.metadata["help"])
        else:
            convert = int if kind == int | None else str
            group.add_argument(f"--{name}", type=convert, default=spec.default, help=spec.metadata["help"])


def _train_tokenizer(args: argparse.Namespace, train_text: TrainingText, accelerator: Accelerator,
                     add_bert_special_tokens: bool = False, subfolder: str | None = None,
                     vocab_size: int | None = None, **special_token_switches: bool):
    """Train a tokenizer on ``train_text`` (main process), save it in output_dir (or its ``subfolder``),
    load it everywhere. ``vocab_size`` replaces --vocab_size; ``special_token_switches`` (``add_bos_token``,
    ``add_eos_token``) choose the template, e.g. ``A <eos>`` for a translation model's sentences."""
    output_dir = Path(args.output_dir) / subfolder if subfolder else Path(args.output_dir)
    reuse = args.resume_from_checkpoint is not None and (output_dir / "tokenizer.json").is_file()

    def train():
        from ...tokenization import CleaningConfig, train_tokenizer

        files, texts = train_text() if callable(train_text) else ([], train_text)
        sizes = {k: getattr(args, k) for k in ("vocab_size", "min_frequency") if getattr(args, k) is not None}
        if vocab_size is not None:
            sizes["vocab_size"] = vocab_size
        cleaning = CleaningConfig(lowercase=True) if args.lowercase else None
        tokenizer = train_tokenizer(files or None, texts=None if files and texts == [] else texts,
                                    kind=args.tokenizer_kind, cleaning=cleaning,
                                    add_bert_special_tokens=add_bert_special_tokens, **sizes, **special_token_switches)
        where = f" (saved in {subfolder}/)" if subfolder else ""
        logger.info(f"Trained a {args.tokenizer_kind} tokenizer of {len(tokenizer)} tokens on the training text{where}.")
        return tokenizer

    return train_on_main_process(output_dir, train, accelerator, reuse=reuse)


def load_tokenizer(args: argparse.Namespace, train_texts: TrainingText, accelerator: Accelerator,
                   add_bert_special_tokens: bool = False, **special_token_switches: bool):
    """The tokenizer of --tokenizer_name, of --model_name_or_path, or one trained on ``train_texts``
    (with ``[CLS]``/``[SEP]``/``[MASK]`` when ``add_bert_special_tokens``, with the template that
    ``special_token_switches`` choose)."""
    from transformers import AutoTokenizer

    source = args.tokenizer_name or args.model_name_or_path
    if source:
        return AutoTokenizer.from_pretrained(source)
    return _train_tokenizer(args, train_texts, accelerator, add_bert_special_tokens, **special_token_switches)


def uses_separate_vocabularies(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a source tokenizer of its own: --separate_vocabularies,
    --source_tokenizer_name, or a --model_name_or_path folder with a source tokenizer."""
    model_folder = Path(args.model_name_or_path) if args.model_name_or_path else None
    from_model = model_folder is not None and (model_folder / SOURCE_TOKENIZER_FOLDER).is_dir()
    separate = bool(args.separate_vocabularies or args.source_tokenizer_name or from_model)
    if args.source_vocab_size is not None and not separate:
        raise ValueError(f"Invalid `--source_vocab_size`={args.source_vocab_size}: it sizes a separate source "
                         "tokenizer; add --separate_vocabularies, or leave it out for one shared vocabulary.")
    return separate


#: A translation model's sentences are ``A <eos>`` on both sides, as transformers' translation tokenizers
#: (Marian, T5) encode them: ``tokenizer(text_target=...)`` then gives model-ready labels.
SEQ2SEQ_TEMPLATE = {"add_bos_token": False, "add_eos_token": True}


def load_source_tokenizer(args: argparse.Namespace, train_texts: TrainingText, accelerator: Accelerator):
    """The source-side tokenizer of --source_tokenizer_name, of --model_name_or_path's
    ``source_tokenizer/`` subfolder, or one trained on ``train_texts`` (the source side) with
    --source_vocab_size tokens (default --vocab_size) and saved in ``output_dir/source_tokenizer/``
    (reused when resuming)."""
    from transformers import AutoTokenizer

    if args.source_tokenizer_name:
        return AutoTokenizer.from_pretrained(args.source_tokenizer_name)
    if args.model_name_or_path:
        folder = Path(args.model_name_or_path) / SOURCE_TOKENIZER_FOLDER
        if not folder.is_dir():
            raise ValueError(f"--model_name_or_path {args.model_name_or_path!r} has no {SOURCE_TOKENIZER_FOLDER}/ "
                             "folder: give the source tokenizer with --source_tokenizer_name.")
        return AutoTokenizer.from_pretrained(folder)
    vocab_size = args.source_vocab_size if args.source_vocab_size is not None else args.vocab_size
    return _train_tokenizer(args, train_texts, accelerator, subfolder=SOURCE_TOKENIZER_FOLDER, vocab_size=vocab_size,
                            **SEQ2SEQ_TEMPLATE)


def tokenizer_config_fields(tokenizer) -> dict[str, Any]:
    """``vocab_size`` and the pad/bos/eos ids a model config takes from its tokenizer."""
    return {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


__all__ = ["SEQ2SEQ_TEMPLATE", "TrainingText", "add_tokenizer_flags", "load_source_tokenizer", "load_tokenizer", "tokenizer_config_fields",
           "tokenizer_fields", "uses_separate_vocabularies"]
