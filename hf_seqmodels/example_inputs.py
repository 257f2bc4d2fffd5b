"""Example forward inputs for the models of the package, without labels: what export traces and checks parity on
(:func:`hf_seqmodels.export.programs.example_inputs`).

A family names the kind of inputs its models take (:attr:`~hf_seqmodels.families.Family.input_kind`); the
kinds are the keys of :data:`INPUT_KINDS`. The tests build on these inputs and add each head's labels
(``tests/model_inputs.py``).
"""

from __future__ import annotations

from typing import Any

import torch

FIRST_REGULAR_ID = 4  # ids 0-3 are <pad>, <unk>, <bos>, <eos> in every tiny preset


def random_ids(generator: torch.Generator, shape: tuple[int, ...], vocab_size: int) -> torch.LongTensor:
    """Ids in ``[FIRST_REGULAR_ID, vocab_size)``: never a special token."""
    return torch.randint(FIRST_REGULAR_ID, vocab_size, shape, generator=generator)


def sequence_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """One sequence per row: ``input_ids`` and ``attention_mask`` (all ones)."""
    ids = random_ids(generator, (batch, length), config.vocab_size)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def char_ids_of(config: Any, input_ids: torch.LongTensor, generator: torch.Generator) -> torch.LongTensor:
    """``(batch, time, char_max_word_length)`` character ids for ``input_ids``: a random spelling per token
    id (the same token always has the same characters), 1 to ``char_max_word_length`` characters from
    ``config.char_vocab`` (ids 2, 3, ...), right-padded with 0, as a tokenizer's ``char_input_ids`` are."""
    longest = config.char_max_word_length
    spellings = torch.randint(2, len(config.char_vocab) + 2, (config.vocab_size, longest), generator=generator)
    lengths = torch.randint(1, longest + 1, (config.vocab_size, 1), generator=generator)
    spellings = spellings.masked_fill(torch.arange(longest) >= lengths, 0)  # (V, L)
    return spellings[input_ids]


def tagger_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """As :func:`sequence_inputs`; with a character encoder, ``char_input_ids`` too (:func:`char_ids_of`), as a
    caller may pass them for words the vocabulary lacks, and must with ``inputs_embeds`` (characters cannot be
    read from word vectors)."""
    inputs = sequence_inputs(config, task, batch, length, generator)
    if getattr(config, "char_encoder", None):
        inputs["char_input_ids"] = char_ids_of(config, inputs["input_ids"], generator)
    return inputs


def seq2seq_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """A source of ``length`` tokens and a target of ``length - 2`` (different lengths catch transposed
    shapes): ``decoder_input_ids`` starts with ``decoder_start_token_id``."""
    source = random_ids(generator, (batch, length), getattr(config, "source_vocab_size", None) or config.vocab_size)
    target = random_ids(generator, (batch, max(length - 2, 2) - 1), config.vocab_size)
    start = torch.full((batch, 1), config.decoder_start_token_id, dtype=torch.long)
    return {"input_ids": source, "attention_mask": torch.ones_like(source),
            "decoder_input_ids": torch.cat([start, target], dim=1)}


def bert_inputs(config: Any, task: str, batch: int, length: int, generator: torch.Generator) -> dict:
    """Two segments per row (``token_type_ids`` 0 then 1); for multiple choice, two choices per row:
    every tensor ``(batch, 2, length)``."""
    ids = random_ids(generator, (batch, length), config.vocab_size)
    token_type_ids = (torch.arange(length) >= length // 2).long().expand(batch, -1).clone()
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": token_type_ids}
    if task == "AutoModelForMultipleChoice":
        inputs = {k: torch.stack([v, v.roll(1, dims=0)], dim=1) for k, v in inputs.items()}
    return inputs


#: ``{input kind: (config, task, batch_size, seq_length, generator) -> forward kwargs}``; ``task`` is the Auto
#: class name of the head (``"AutoModel"`` for the base model)
INPUT_KINDS = {"sequence": sequence_inputs, "tagger": tagger_inputs, "seq2seq": seq2seq_inputs, "bert": bert_inputs}


__all__ = ["FIRST_REGULAR_ID", "INPUT_KINDS", "bert_inputs", "char_ids_of", "random_ids",
           "seq2seq_inputs", "sequence_inputs", "tagger_inputs"]
