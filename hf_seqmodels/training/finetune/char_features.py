"""Character ids of every token, taken from the words of the text, for models with a character encoder.

A model with ``config.char_encoder`` looks each token's characters up in its ``token_chars`` table, so a
word outside the word vocabulary (the ``<unk>`` token) gets the characters of ``<unk>``: none. Fine-tuning
knows the words, so it can do better: :func:`add_char_input_ids` gives each token the characters of the
span of its word it covers (the whole word for a word-level tokenizer, ``"ing"`` for WordPiece's
``##ing``; nothing for special tokens), and :class:`DataCollatorForCharTagging` pads them to
``char_input_ids`` ``(batch, time, char_max_word_length)``, which the model uses instead of its table.

For known tokens the two agree (the table holds the same spans), except that the text keeps its case
when the tokenizer lowercases. The token-classification pipeline has only token ids and uses the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import datasets
import torch
from transformers import DataCollatorForTokenClassification, PreTrainedTokenizerBase

from ...models.char_encoder import words_to_char_ids


def add_char_input_ids(features: datasets.Dataset, examples: datasets.Dataset, tokenizer: PreTrainedTokenizerBase,
                       config, max_length: int) -> datasets.Dataset:
    """``features`` (one row per sentence of ``examples``, from ``tokenize_and_align_labels`` with the same
    ``max_length``) plus a ``char_input_ids`` column: per token, its characters (``config.char_vocab`` ids,
    ``config.char_max_word_length`` of them, 0-padded)."""
    if len(features) != len(examples):
        raise ValueError(f"features has {len(features)} rows but examples has {len(examples)}: they must be the "
                         "same sentences in the same order.")
    rows = []
    for start in range(0, len(examples), 1000):
        words = examples[start : start + 1000]["tokens"]
        encoded = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length,
                            return_offsets_mapping=True)
        for row, sentence in enumerate(words):
            spans = [sentence[w][a:b] if w is not None else ""
                     for w, (a, b) in zip(encoded.word_ids(row), encoded["offset_mapping"][row], strict=True)]
            rows.append(words_to_char_ids(spans, config.char_vocab, config.char_max_word_length))
    lengths = [len(ids) for ids in features["input_ids"]]
    if [len(r) for r in rows] != lengths:
        raise ValueError("char_input_ids do not line up with input_ids: were the features made with another "
                         "tokenizer or max_length?")
    return features.add_column("char_input_ids", rows)


@dataclass
class DataCollatorForCharTagging(DataCollatorForTokenClassification):
    """``DataCollatorForTokenClassification`` that also pads ``char_input_ids`` to ``(batch, time, L)``
    (zeros at padded tokens, on the tokenizer's padding side)."""

    def torch_call(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        if not features or "char_input_ids" not in features[0]:
            return super().torch_call(features)
        features = [dict(f) for f in features]
        chars = [f.pop("char_input_ids") for f in features]
        batch = super().torch_call(features)
        time = batch["input_ids"].shape[1]
        width = max((len(word) for row in chars for word in row), default=1)
        padded = torch.zeros(len(chars), time, width, dtype=torch.long)
        for i, row in enumerate(chars):
            if row:
                offset = time - len(row) if self.tokenizer.padding_side == "left" else 0
                padded[i, offset : offset + len(row)] = torch.tensor(row, dtype=torch.long)
        batch["char_input_ids"] = padded
        return batch


__all__ = ["DataCollatorForCharTagging", "add_char_input_ids"]
