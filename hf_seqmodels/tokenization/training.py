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

import io
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from .cleaning import CleaningConfig, build_normalizer
from .corpus import (
    DEFAULT_MAX_LINE_LENGTH,
    CorpusLimits,
    TextFile,
    _take_bytes,
    as_text_file,
    check_training_file,
    read_corpus,
)
from .special_tokens import apply_special_token_switches, causal_post_processor

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
FileLike = PathLike | TextFile


def train_tokenizer(
    files: FileLike | Sequence[FileLike] | None = None,
    *,
    dataset: datasets.Dataset | datasets.IterableDataset | None = None,
    text_column: str = "text",
    texts: Iterable[str] | None = None,
    kind: str = "bpe",
    vocab_size: int = 8000,
    min_frequency: int = 2,
    cleaning: CleaningConfig | None = None,
    add_bert_special_tokens: bool = False,
    model_max_length: int | None = None,
    show_progress: bool = False,
    add_bos_token: bool | None = None,
    add_eos_token: bool | None = None,
    max_train_bytes: int | None = None,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
    long_lines: str = "error",
) -> PreTrainedTokenizerFast:
    """Train a tokenizer of the given ``kind`` on text files and/or a ``datasets`` column.

    Args:
        files: text file path(s); read line by line, newlines kept. A
            :class:`~hf_seqmodels.tokenization.corpus.TextFile` with ``max_chars`` is read only up to that
            character (e.g. the training part of a file whose end is held out for validation).
        dataset: a ``datasets.Dataset`` (or ``IterableDataset``) whose ``text_column`` is read in batches.
            Given together with ``files``, both are used.
        texts: strings read after the files and the dataset, line by line as if they were written one after
            another into a file (an iterator is read once, as the training goes); messages name them
            "training text".
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
        add_bos_token, add_eos_token: the switches of transformers' Llama-style tokenizers: whether
            ``tokenizer(text)`` starts with ``<bos>`` and ends with ``<eos>``.  ``None`` keeps the
            causal-LM default (``<bos> A``: True, False).  A sequence-to-sequence tokenizer uses False,
            True (``A <eos>``, as Marian and T5 encode sources and ``text_target`` labels).  Not
            available with ``add_bert_special_tokens``.
        max_train_bytes: read at most this many UTF-8 bytes of text (files first, then the dataset);
            ``None`` reads everything.
        max_line_length: the longest line (or dataset row) in characters; see ``long_lines``.
        long_lines: ``"error"`` refuses a longer line with a message naming the file, the line, its
            length and the limit; ``"split"`` cuts it into pieces of at most ``max_line_length``.

    Returns:
        A ``PreTrainedTokenizerFast`` with pad/unk/bos/eos (and cls/sep/mask) set, right padding.

    Raises:
        ValueError: unknown ``kind``, too small ``vocab_size``, bad ``min_frequency``, no text,
            a missing ``text_column``, a bad limit, an empty, binary or non-UTF-8 file, or a line
            longer than ``max_line_length`` (with ``long_lines="error"``).
        FileNotFoundError: a path in ``files`` does not exist.
    """
    _check_kind(kind)
    special_tokens = SPECIAL_TOKENS + (BERT_SPECIAL_TOKENS if add_bert_special_tokens else [])
    _check_sizes(kind, vocab_size, min_frequency, len(special_tokens))
    switches = _check_switches(add_bos_token, add_eos_token, add_bert_special_tokens)
    limits = CorpusLimits(max_train_bytes, max_line_length, long_lines)
    cleaning = cleaning if cleaning is not None else CleaningConfig()
    if kind == "unigram":
        logger.info("kind='unigram' prunes by likelihood; min_frequency=%d is not used.", min_frequency)
    texts = _nonempty_corpus(_iter_corpus(_resolve_files(files), dataset, text_column, limits, texts))

    backend = _build_backend(kind, cleaning)
    trainer = _build_trainer(kind, vocab_size, min_frequency, special_tokens, show_progress)
    _train(backend, trainer, texts, kind, vocab_size)
    _check_learned_something(backend, kind, special_tokens)
    backend.post_processor = _post_processor(add_bert_special_tokens)

    tokenizer = _wrap(backend, kind, add_bert_special_tokens, model_max_length)
    if switches is not None:
        apply_special_token_switches(tokenizer, *switches)
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


def _check_switches(
    add_bos_token: bool | None, add_eos_token: bool | None, add_bert_special_tokens: bool
) -> tuple[bool, bool] | None:
    """The ``(add_bos_token, add_eos_token)`` pair to set (the causal default fills a ``None``), or
    ``None`` for BERT tokenizers, whose ``[CLS] A [SEP]`` template has no such switches."""
    for name, value in (("add_bos_token", add_bos_token), ("add_eos_token", add_eos_token)):
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be None, True or False.")
    if add_bert_special_tokens:
        if add_bos_token is not None or add_eos_token is not None:
            raise ValueError(
                "add_bos_token/add_eos_token cannot be combined with add_bert_special_tokens=True: the BERT "
                "template is always [CLS] A [SEP]."
            )
        return None
    return (True if add_bos_token is None else add_bos_token, False if add_eos_token is None else add_eos_token)


# --------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------


def _resolve_files(files: FileLike | Sequence[FileLike] | None) -> list[TextFile]:
    """Turn ``files`` into a list of existing, non-empty files (one path alone is accepted too)."""
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike, TextFile)):
        files = [files]
    resolved = [as_text_file(f) for f in files]
    for file in resolved:
        check_training_file(Path(file.path))
    return resolved


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


def _iter_corpus(paths: list[TextFile], dataset: Any, text_column: str, limits: CorpusLimits,
                 texts: Iterable[str] | None = None) -> Iterator[str]:
    """All training texts: the lines of the files, then the dataset column (checked eagerly), then the lines of
    ``texts``, guarded and capped by ``limits`` (see :mod:`~hf_seqmodels.tokenization.corpus`)."""
    if not paths and dataset is None and texts is None:
        raise ValueError("No training text: pass files=[...], dataset=... and/or texts=... to train_tokenizer.")
    rows = None
    if dataset is not None:
        _check_dataset(dataset, text_column)
        rows = _iter_dataset(dataset, text_column)
    corpus = read_corpus(paths, rows, CorpusLimits(None, limits.max_line_length, limits.long_lines),
                         source=f"dataset column {text_column!r}")
    if texts is not None:
        corpus = itertools.chain(corpus, read_corpus([], _text_lines(texts), CorpusLimits(
            None, limits.max_line_length, limits.long_lines), source="training text"))
    return _take_bytes(corpus, limits.max_train_bytes)


def _text_lines(texts: Iterable[str]) -> Iterator[str]:
    """The lines of the concatenated ``texts``, newlines kept, cut where a file read with ``newline=""`` is cut
    (``\\n``, ``\\r``, ``\\r\\n``); a line may run from one text into the next."""
    carry = ""
    for text in texts:
        lines = io.StringIO(carry + text, newline="").readlines()
        carry = lines.pop() if lines and not lines[-1].endswith("\n") else ""  # a "\r" may pair with a "\n"
        yield from lines
    if carry:
        yield carry


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
    return causal_post_processor(BOS, ids[BOS], EOS, ids[EOS])


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
