"""Tokenizers for the classic sequence models: text cleaning and word/char/BPE/WordPiece/Unigram training.

>>> from hf_seqmodels.tokenization import CleaningConfig, train_tokenizer
>>> tok = train_tokenizer(["corpus.txt"], kind="char", cleaning=CleaningConfig())  # doctest: +SKIP
>>> tok.save_pretrained("my-tokenizer")  # doctest: +SKIP
"""

from .cleaning import UNICODE_NORMALIZATION_FORMS, CleaningConfig, build_normalizer, clean_text
from .corpus import DEFAULT_MAX_LINE_LENGTH, LONG_LINE_POLICIES, CorpusLimits, TextFile
from .shared import train_on_main_process
from .special_tokens import (
    apply_special_token_switches,
    restore_special_token_switches,
    special_token_switches,
    with_special_token_switches,
)
from .training import BERT_SPECIAL_TOKENS, SPECIAL_TOKENS, TOKENIZER_KINDS, train_tokenizer

__all__ = [
    "BERT_SPECIAL_TOKENS",
    "DEFAULT_MAX_LINE_LENGTH",
    "LONG_LINE_POLICIES",
    "SPECIAL_TOKENS",
    "TOKENIZER_KINDS",
    "UNICODE_NORMALIZATION_FORMS",
    "CleaningConfig",
    "CorpusLimits",
    "TextFile",
    "apply_special_token_switches",
    "build_normalizer",
    "clean_text",
    "restore_special_token_switches",
    "special_token_switches",
    "train_on_main_process",
    "train_tokenizer",
    "with_special_token_switches",
]
