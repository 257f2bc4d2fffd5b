"""Train word, character and subword tokenizers and wrap them as ``PreTrainedTokenizerFast``.

Every kind is a ``tokenizers.Tokenizer`` built from four parts:

=========  =====================  ==========================================  ==================
kind       model                  pre-tokenizer                               decoder
=========  =====================  ==========================================  ==================
word       WordLevel              Whitespace (``\\w+|[^\\w\\s]+``)              join with spaces
char       WordLevel              Split into single code points (spaces and   Fuse (concatenate)
                                  newlines included)
bpe        BPE, byte-level        ByteLevel (GPT-2 style, 256-byte alphabet)  ByteLevel
wordpiece  WordPiece (``##``)     BertPreTokenizer (whitespace + punctuation)  WordPiece
unigram    Unigram                Metaspace (``▁``, no whitespace assumption)  Metaspace
=========  =====================  ==========================================  ==================

The normalizer comes from :class:`~hf_seqmodels.tokenization.cleaning.CleaningConfig`, so cleaning is
saved with the tokenizer and applied at encode time.  The special tokens have fixed ids
(``<pad>``=0, ``<unk>``=1, ``<bos>``=2, ``<eos>``=3, then ``[CLS]``=4, ``[SEP]``=5, ``[MASK]``=6).
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from .cleaning import CleaningConfig, build_normalizer

if TYPE_CHECKING:
    import datasets

__all__ = ["BERT_SPECIAL_TOKENS", "SPECIAL_TOKENS", "TOKENIZER_KINDS", "train_tokenizer"]

logger = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, BOS, EOS]
BERT_SPECIAL_TOKENS = [CLS, SEP, MASK]
TOKENIZER_KINDS = ("word", "char", "bpe", "wordpiece", "unigram")

_BYTE_ALPHABET_SIZE = 256  # byte-level BPE always keeps the 256 byte symbols
_DATASET_BATCH_SIZE = 1000

PathLike = str | os.PathLike


def train_tokenizer(
    files: PathLike | Sequence[PathLike] | None = None,
    *,
    dataset: datasets.Dataset | datasets.IterableDataset | None = None,
    text_column: str = "text",
    kind: str = "bpe",
    vocab_size: int = 8000,
    min_frequency: int = 2,
    cleaning: CleaningConfig | None = None,
    add_bert_special_tokens: bool = False,
    model_max_length: int | None = None,
    show_progress: bool = False,
) -> PreTrainedTokenizerFast:
    """Train a tokenizer of the given ``kind`` on text files and/or a ``datasets`` column.

    Args:
        files: text file path(s); read line by line, newlines kept.
        dataset: a ``datasets.Dataset`` (or ``IterableDataset``) whose ``text_column`` is read in batches.
            Given together with ``files``, both are used.
        kind: one of ``TOKENIZER_KINDS`` (see the module docstring for what each builds).
        vocab_size: upper bound on the vocabulary, special tokens included.  WordPiece always keeps
            its whole character alphabet and may exceed a tiny cap; byte-level BPE needs at least
            256 + special tokens.
        min_frequency: minimum count for a word (word), character (char) or merge (bpe, wordpiece).
            Unigram prunes by likelihood and has no such threshold, so it ignores this value.
        cleaning: text cleaning built into the tokenizer's normalizer; ``None`` leaves text untouched.
        add_bert_special_tokens: also add ``[CLS]``, ``[SEP]``, ``[MASK]`` and use the BERT template
            ``[CLS] A [SEP] B [SEP]`` with ``token_type_ids``; otherwise the causal-LM template ``<bos> A``.
        model_max_length: stored as ``tokenizer.model_max_length`` when given.
        show_progress: show the ``tokenizers`` training progress bar.

    Returns:
        A ``PreTrainedTokenizerFast`` with pad/unk/bos/eos (and cls/sep/mask) set, right padding.

    Raises:
        ValueError: unknown ``kind``, too small ``vocab_size``, bad ``min_frequency``, no text,
            or a missing ``text_column``.
        FileNotFoundError: a path in ``files`` does not exist.
    """
    _check_kind(kind)
    special_tokens = SPECIAL_TOKENS + (BERT_SPECIAL_TOKENS if add_bert_special_tokens else [])
    _check_sizes(kind, vocab_size, min_frequency, len(special_tokens))
    cleaning = cleaning if cleaning is not None else CleaningConfig()
    if kind == "unigram":
        logger.info("kind='unigram' prunes by likelihood; min_frequency=%d is not used.", min_frequency)
    texts = _nonempty_corpus(_iter_corpus(_resolve_files(files), dataset, text_column))

    backend = _build_backend(kind, cleaning)
    trainer = _build_trainer(kind, vocab_size, min_frequency, special_tokens, show_progress)
    _train(backend, trainer, texts, kind, vocab_size)
    _check_learned_something(backend, kind, special_tokens)
    backend.post_processor = _post_processor(add_bert_special_tokens)

    tokenizer = _wrap(backend, kind, add_bert_special_tokens, model_max_length)
    logger.info("Trained a %s tokenizer with %d tokens (cap %d).", kind, len(tokenizer), vocab_size)
    return tokenizer


# --------------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------------


def _check_kind(kind: str) -> None:
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"kind={kind!r} is not supported; allowed kinds: {', '.join(TOKENIZER_KINDS)}.")


def _min_vocab_size(kind: str, num_special: int) -> int:
    """Smallest usable vocabulary: the special tokens plus one token (plus 256 bytes for byte-level BPE)."""
    return num_special + (_BYTE_ALPHABET_SIZE if kind == "bpe" else 1)


def _check_sizes(kind: str, vocab_size: int, min_frequency: int, num_special: int) -> None:
    minimum = _min_vocab_size(kind, num_special)
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size!r} is too small for kind={kind!r}: the minimum is {minimum} "
            f"({num_special} special tokens + {minimum - num_special} learned tokens)."
        )
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency!r} must be an integer >= 1.")


# --------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------


def _resolve_files(files: PathLike | Sequence[PathLike] | None) -> list[Path]:
    """Turn ``files`` into a list of existing paths (one path alone is accepted too)."""
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = [Path(f) for f in files]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"Training file not found: {str(path)!r}")
    return paths


def _iter_files(paths: Iterable[Path]) -> Iterator[str]:
    """Lines of every file, each with its newline (character-level vocabularies need it)."""
    for path in paths:
        with open(path, encoding="utf-8", newline="") as handle:
            yield from handle


def _check_dataset(dataset: Any, text_column: str) -> None:
    """``dataset`` must be a (possibly iterable) ``datasets`` split that has ``text_column``."""
    if not hasattr(dataset, "iter"):
        raise ValueError(
            f"dataset must be a datasets.Dataset or IterableDataset (one split), got {type(dataset).__name__}."
        )
    columns = getattr(dataset, "column_names", None)  # None for some iterable datasets
    if columns is not None and text_column not in columns:
        raise ValueError(f"text_column={text_column!r} is not a column of the dataset; columns: {columns}.")


def _iter_dataset(dataset: Any, text_column: str) -> Iterator[str]:
    """The non-null values of ``text_column``, read in batches."""
    for batch in dataset.iter(batch_size=_DATASET_BATCH_SIZE):
        yield from (text for text in batch[text_column] if text is not None)


def _iter_corpus(paths: list[Path], dataset: Any, text_column: str) -> Iterator[str]:
    """All training texts: the lines of the files, then the dataset column (checked eagerly)."""
    if not paths and dataset is None:
        raise ValueError("No training text: pass files=[...] and/or dataset=... to train_tokenizer.")
    if dataset is not None:
        _check_dataset(dataset, text_column)
    texts = _iter_files(paths)
    if dataset is not None:
        texts = itertools.chain(texts, _iter_dataset(dataset, text_column))
    return texts


def _nonempty_corpus(texts: Iterator[str]) -> Iterator[str]:
    """``texts`` unchanged, after checking (eagerly, reading only up to the first one) that some
    text is not blank; raises ``ValueError`` for an empty or whitespace-only corpus."""
    blank_prefix = []
    for text in texts:
        blank_prefix.append(text)
        if text.strip():
            return itertools.chain(blank_prefix, texts)
    raise ValueError("The training corpus is empty: the files/dataset hold no text other than whitespace.")


# --------------------------------------------------------------------------------------------------
# Tokenizer parts
# --------------------------------------------------------------------------------------------------


def _build_backend(kind: str, cleaning: CleaningConfig) -> Tokenizer:
    """An untrained ``tokenizers.Tokenizer``: model, normalizer, pre-tokenizer and decoder of ``kind``."""
    if kind == "word":
        backend = Tokenizer(models.WordLevel(unk_token=UNK))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
    elif kind == "char":
        backend = Tokenizer(models.WordLevel(unk_token=UNK))
        # every code point, whitespace included, is its own pre-token; decoding concatenates them
        backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        backend.decoder = decoders.Fuse()
    elif kind == "bpe":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
    elif kind == "wordpiece":
        backend = Tokenizer(models.WordPiece(unk_token=UNK, continuing_subword_prefix="##"))
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##")
    else:  # unigram
        backend = Tokenizer(models.Unigram())
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    normalizer = build_normalizer(cleaning)
    if normalizer is not None:
        backend.normalizer = normalizer
    return backend


def _build_trainer(
    kind: str, vocab_size: int, min_frequency: int, special_tokens: list[str], show_progress: bool
) -> trainers.Trainer:
    """The ``tokenizers`` trainer of ``kind``; special tokens come first, so their ids are fixed."""
    common = {"vocab_size": vocab_size, "special_tokens": special_tokens, "show_progress": show_progress}
    if kind in ("word", "char"):
        return trainers.WordLevelTrainer(min_frequency=min_frequency, **common)
    if kind == "bpe":
        return trainers.BpeTrainer(
            min_frequency=min_frequency, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), **common
        )
    if kind == "wordpiece":
        return trainers.WordPieceTrainer(
            min_frequency=min_frequency, continuing_subword_prefix="##", **common
        )
    return trainers.UnigramTrainer(unk_token=UNK, **common)


def _train(
    backend: Tokenizer, trainer: trainers.Trainer, texts: Iterator[str], kind: str, vocab_size: int
) -> None:
    """Run the trainer; a Unigram vocabulary too small for the corpus alphabet becomes a ValueError."""
    try:
        backend.train_from_iterator(texts, trainer=trainer)
    except Exception as error:  # the Rust trainer raises a bare Exception
        if "not large enough" in str(error):
            raise ValueError(
                f"vocab_size={vocab_size} is too small for kind={kind!r}: the corpus has more distinct "
                f"characters than fit in the vocabulary ({error})."
            ) from error
        raise


def _check_learned_something(backend: Tokenizer, kind: str, special_tokens: list[str]) -> None:
    """Fail when training kept nothing but the special tokens (e.g. cleaning removed every character)."""
    if kind != "bpe" and backend.get_vocab_size() <= len(special_tokens):
        raise ValueError(
            "The training corpus is empty after cleaning and min_frequency: the vocabulary holds only "
            "the special tokens. Check the cleaning options, or lower min_frequency."
        )


def _post_processor(add_bert_special_tokens: bool) -> processors.TemplateProcessing:
    """``<bos> A`` (pair ``<bos> A <eos> B``) for causal LMs, or BERT's ``[CLS] A [SEP] B [SEP]``."""
    ids = {token: i for i, token in enumerate(SPECIAL_TOKENS + BERT_SPECIAL_TOKENS)}
    if add_bert_special_tokens:
        return processors.TemplateProcessing(
            single=f"{CLS} $A {SEP}",
            pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
            special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])],
        )
    return processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {EOS} $B:1",
        special_tokens=[(BOS, ids[BOS]), (EOS, ids[EOS])],
    )


def _wrap(
    backend: Tokenizer, kind: str, add_bert_special_tokens: bool, model_max_length: int | None
) -> PreTrainedTokenizerFast:
    """Wrap the trained backend as a ``PreTrainedTokenizerFast`` with its special tokens named."""
    kwargs: dict[str, Any] = {
        "pad_token": PAD,
        "unk_token": UNK,
        "bos_token": BOS,
        "eos_token": EOS,
        "padding_side": "right",
        # "a , b" -> "a, b" only for word level; for the others it would corrupt the text
        "clean_up_tokenization_spaces": kind == "word",
    }
    if add_bert_special_tokens:
        kwargs.update(
            cls_token=CLS,
            sep_token=SEP,
            mask_token=MASK,
            model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        )
    if model_max_length is not None:
        kwargs["model_max_length"] = model_max_length
    return PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)
