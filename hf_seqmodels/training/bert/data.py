"""BERT pretraining data: sentence pairs for next-sentence prediction and dynamic masking for the masked LM.

The recipe of Devlin et al. (2019) and of Google's ``create_pretraining_data.py``, on ``datasets``:

1. :func:`split_documents` cuts raw text into documents (blank lines or WikiText ``= Title =`` headings)
   and each document into sentences.
2. :func:`create_pretraining_examples` walks each tokenised document, gathering sentences until a
   target length is reached (``max_seq_length - 3``, or with probability ``short_seq_prob`` a shorter
   random length), splits the chunk at a random sentence boundary into A and B, and with probability
   ``1 - nsp_probability`` (0.5) replaces B by sentences of another random document (label 1,
   NotNext; label 0 is IsNext). The pair is truncated to fit, longer side first, and laid out as
   ``[CLS] A [SEP] B [SEP]`` with segment ids 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]``.
3. :func:`mask_tokens` masks dynamically, at batch time: 15 % of the tokens that are not special
   and not padding are chosen (optionally whole words: a WordPiece ``##`` piece goes with its word);
   of those 80 % become ``[MASK]``, 10 % a random token, 10 % stay; labels are -100 elsewhere.
"""

from __future__ import annotations

import itertools
import random
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...models.config_utils import invalid
from ..core.text import pad_right
from ..core.token_files import LINE_BREAKS, TokenSequences, line_pieces

_HEADING = re.compile(r"^\s*=( =)* .* =( =)*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def _is_title(line: str) -> bool:
    """WikiText's article title ``= Title =`` (sections are ``= = Section = =``)."""
    return bool(_HEADING.match(line)) and line.strip().count("=") == 2


def split_documents(text: str) -> list[list[str]]:
    """Documents as lists of sentences. Text with WikiText ``= Title =`` lines is cut at the titles (its
    section headings are dropped); other text is cut at blank lines."""
    by_title = any(_is_title(line) for line in text.splitlines())
    documents: list[list[str]] = [[]]
    for line in text.splitlines():
        stripped = line.strip()
        if by_title and _HEADING.match(line):
            if _is_title(line):
                documents.append([])
            continue
        if not stripped:
            if not by_title:
                documents.append([])
            continue
        documents[-1].extend(s.strip() for s in _SENTENCE_END.split(stripped) if s.strip())
    return [d for d in documents if d]


class TokenDocuments:
    """Documents of tokenised sentences, on disk (:func:`~.token_documents.bert_token_documents`) or in RAM
    (:meth:`from_lists`): ``documents[d]`` is a ``list`` of sentences (id lists),
    as :func:`tokenize_documents` returns them. ``sentences`` holds every sentence in order;
    ``document_offsets`` ``(D + 1,)`` indexes sentences. Slicing documents gives a view. ``documents_read``
    counts the documents of the text before those without tokens were dropped (None for a view); ``folder``
    holds the token files (None in RAM)."""

    def __init__(self, sentences: TokenSequences, document_offsets: np.ndarray, documents_read: int | None = None,
                 folder: Path | None = None):
        self.sentences, self.document_offsets, self.documents_read = sentences, document_offsets, documents_read
        self.folder = folder

    @classmethod
    def from_lists(cls, documents: list[list[list[int]]]) -> TokenDocuments:
        """The same documents held in RAM as flat ``int64`` arrays (for a corpus that did not come from files)."""
        sentences = [sentence for document in documents for sentence in document]
        tokens = np.fromiter(itertools.chain.from_iterable(sentences), dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences], dtype=np.int64)])
        document_offsets = np.concatenate([[0], np.cumsum([len(d) for d in documents], dtype=np.int64)])
        return cls(TokenSequences(tokens, offsets), document_offsets, len(documents))

    def __len__(self) -> int:
        return max(len(self.document_offsets) - 1, 0)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("Documents can be sliced with step 1 only.")
            return TokenDocuments(self.sentences, self.document_offsets[start : max(start, stop) + 1],
                                  folder=self.folder)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"document index {index} out of range for {len(self)} documents")
        return self.sentences[int(self.document_offsets[index]) : int(self.document_offsets[index + 1])]

    def __iter__(self) -> Iterator[list[list[int]]]:
        return (self[i] for i in range(len(self)))


def stream_documents(path: str | Path) -> Iterator[list[str]]:
    """The documents of a text file as lists of sentences, one at a time: exactly
    ``split_documents(read_text_file(path))`` (a first pass looks for WikiText ``= Title =`` lines)."""
    by_title = any(_is_title(piece.rstrip("".join(LINE_BREAKS))) for piece in line_pieces(path))
    document: list[str] = []
    for piece in line_pieces(path):
        line = piece[:-1] if piece[-1] in LINE_BREAKS else piece
        stripped = line.strip()
        heading = by_title and _HEADING.match(line)
        if (heading and _is_title(line)) or (not stripped and not by_title):
            if document:
                yield document
            document = []
        if heading or not stripped:
            continue
        document.extend(s.strip() for s in _SENTENCE_END.split(stripped) if s.strip())
    if document:
        yield document


@dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    mask: int
    pad: int

    @classmethod
    def of(cls, tokenizer) -> SpecialIds:
        missing = [n for n in ("cls_token_id", "sep_token_id", "mask_token_id", "pad_token_id")
                   if getattr(tokenizer, n, None) is None]
        if missing:
            raise ValueError(f"BERT pretraining needs a tokenizer with [CLS], [SEP], [MASK] and padding; missing "
                             f"{', '.join(missing)} (train one with add_bert_special_tokens=True).")
        return cls(tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id, tokenizer.pad_token_id)


class PairExamples:
    """NSP sentence-pair examples held as spans of a flat id array: example ``i`` is
    ``[CLS] tokens[a0:a1] [SEP] tokens[b0:b1] [SEP]`` with ``spans[i] = (a0, a1, b0, b1)``.

    ``tokens`` is the sentence array of :class:`TokenDocuments` (a memory map of token
    files, or an array in RAM), so 40 bytes per example stay in RAM and the ids are read when a batch asks.
    Indexing gives the example as a dict of ``input_ids``, ``token_type_ids`` and ``next_sentence_label``
    (0 IsNext, 1 NotNext); slicing gives a view.
    """

    def __init__(self, tokens: np.ndarray, spans: np.ndarray, labels: np.ndarray, special: SpecialIds):
        self.tokens, self.spans, self.labels, self.special = tokens, spans, labels, special

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return PairExamples(self.tokens, self.spans[index], self.labels[index], self.special)
        a0, a1, b0, b1 = self.spans[index].tolist()
        return _layout(self.tokens[a0:a1].tolist(), self.tokens[b0:b1].tolist(), int(self.labels[index]),
                       self.special)

    def __iter__(self) -> Iterator[dict[str, list[int]]]:
        return (self[i] for i in range(len(self)))


def create_pretraining_examples(documents: TokenDocuments | list[list[list[int]]], special: SpecialIds, *,
                                max_seq_length: int = 128, short_seq_prob: float = 0.1,
                                nsp_probability: float = 0.5, seed: int = 0) -> PairExamples:
    """Sentence-pair examples from tokenised ``documents``: :class:`TokenDocuments`
    (token files) or lists of sentences of ids.

    Each document is walked, gathering sentences until a target length is reached; the chunk is split
    at a random sentence boundary into A and B, and B is replaced by a random other document's sentences
    (NotNext) with probability ``1 - nsp_probability``. The pair is truncated to fit, the longer side at
    its front or back at random. A chunk of a single sentence can only get a random B, as in the
    original implementation. Only the spans are computed, from the offsets; no id is read.
    """
    if max_seq_length < 8:
        raise invalid("max_seq_length", max_seq_length, "an integer >= 8")
    if not isinstance(documents, TokenDocuments):
        documents = TokenDocuments.from_lists(documents)
    if len(documents) < 2:
        raise ValueError(f"Next-sentence prediction needs at least 2 documents to draw random sentences from, "
                         f"got {len(documents)}.")
    walk = _PairWalk(documents, max_seq_length - 3, random.Random(seed))  # - [CLS], [SEP], [SEP]
    for index in range(len(documents)):
        walk.document(index, short_seq_prob, nsp_probability)
    spans = np.frombuffer(walk.spans, dtype=np.int64).reshape(-1, 4)  # (N, 4)
    return PairExamples(documents.sentences.tokens, spans, np.frombuffer(walk.labels, dtype=np.int8), special)


class _PairWalk:
    """The walk of :func:`create_pretraining_examples` over token offsets: every draw of the random
    generator happens in the order of Google's ``create_pretraining_data.py`` (and of our earlier walk
    over id lists, whose examples it reproduces exactly)."""

    def __init__(self, documents: TokenDocuments, max_tokens: int, rng: random.Random):
        self.documents, self.max_tokens, self.rng = documents, max_tokens, rng
        self.sentence_offsets, self.document_offsets = documents.sentences.offsets, documents.document_offsets
        self.spans, self.labels = array("q"), array("b")

    def starts(self, index: int) -> list[int]:
        """The token offsets of document ``index``'s sentences and of its end: ``(sentences + 1)`` ints."""
        first, last = int(self.document_offsets[index]), int(self.document_offsets[index + 1])
        return self.sentence_offsets[first : last + 1].tolist()

    def document(self, index: int, short_seq_prob: float, nsp_probability: float) -> None:
        rng, starts = self.rng, self.starts(index)
        count = len(starts) - 1
        target = rng.randint(2, self.max_tokens) if rng.random() < short_seq_prob else self.max_tokens
        first, i = 0, 0  # the chunk is sentences first..i
        while i < count:
            if i == count - 1 or starts[i + 1] - starts[first] >= target:
                size = i - first + 1
                a_end = first + (rng.randint(1, size - 1) if size >= 2 else 1)
                a = [starts[first], starts[a_end]]
                if size >= 2 and rng.random() < nsp_probability:
                    b, label = [starts[a_end], starts[i + 1]], 0
                else:
                    b, label = self.random_continuation(index, target - (a[1] - a[0])), 1
                    i = a_end - 1  # the sentences B did not use are read again
                self.truncate(a, b)
                if a[1] > a[0] and b[1] > b[0]:
                    self.spans.extend(a + b)
                    self.labels.append(label)
                first = i + 1
            i += 1

    def random_continuation(self, avoid: int, length: int) -> list[int]:
        """The span of at least ``length`` tokens (or to the end) from a random sentence of a random other
        document."""
        pick = self.rng.randrange(len(self.documents) - 1)
        starts = self.starts(pick + (pick >= avoid))
        begin = self.rng.randrange(len(starts) - 1)
        end = begin + 1
        while end < len(starts) - 1 and starts[end] - starts[begin] < length:
            end += 1
        return [starts[begin], starts[end]]

    def truncate(self, a: list[int], b: list[int]) -> None:
        """Drop tokens from the longer span (B on a tie), at its front or back at random, until both fit."""
        while (a[1] - a[0]) + (b[1] - b[0]) > self.max_tokens:
            longer = a if a[1] - a[0] > b[1] - b[0] else b
            if self.rng.random() < 0.5:
                longer[0] += 1
            else:
                longer[1] -= 1


def _layout(a: list[int], b: list[int], label: int, special: SpecialIds) -> dict[str, list[int]]:
    input_ids = [special.cls, *a, special.sep, *b, special.sep]
    token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "next_sentence_label": label}


def tokenize_documents(documents: list[list[str]], tokenizer, num_proc: int | None = None) -> list[list[list[int]]]:
    """Every sentence of every document as ids (no special tokens), with ``datasets.map`` in batches."""
    from datasets import Dataset

    flat = [(d, s) for d, doc in enumerate(documents) for s in doc]
    data = Dataset.from_dict({"doc": [d for d, _ in flat], "text": [s for _, s in flat]})
    data = data.map(lambda batch: {"ids": tokenizer(batch["text"], add_special_tokens=False)["input_ids"]},
                    batched=True, num_proc=num_proc, remove_columns=["text"], desc="Tokenising sentences")
    out: list[list[list[int]]] = [[] for _ in documents]
    for doc, ids in zip(data["doc"], data["ids"], strict=True):
        if ids:
            out[doc].append(ids)
    return [d for d in out if d]


def collate_examples(examples: list[dict], pad_token_id: int, pad_to_multiple_of: int | None = None
                     ) -> dict[str, torch.Tensor]:
    """Right-pad ``input_ids``/``token_type_ids`` (to a multiple of ``pad_to_multiple_of`` when given), build
    ``attention_mask``, stack ``next_sentence_label``."""
    multiple = pad_to_multiple_of
    return {"input_ids": pad_right([e["input_ids"] for e in examples], pad_token_id, multiple),
            "token_type_ids": pad_right([e["token_type_ids"] for e in examples], 0, multiple),
            "attention_mask": pad_right([[1] * len(e["input_ids"]) for e in examples], 0, multiple),
            "next_sentence_label": torch.tensor([e["next_sentence_label"] for e in examples], dtype=torch.long)}


def mask_tokens(input_ids: torch.Tensor, special_mask: torch.Tensor, vocab_size: int, mask_token_id: int, *,
                mlm_probability: float = 0.15, generator: torch.Generator | None = None,
                word_starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's dynamic masking of ``input_ids`` ``(B, T)``; returns ``(masked input_ids, labels)``.

    ``special_mask`` ``(B, T)`` is True at special tokens and padding, which are never chosen.
    ``word_starts`` ``(B, T)`` (True where a word begins) switches on whole-word masking: a word is
    chosen with probability ``mlm_probability`` and all its pieces are masked together.
    """
    if not 0.0 < mlm_probability < 1.0:
        raise invalid("mlm_probability", mlm_probability, "a probability in (0, 1)")
    shape = input_ids.shape
    draw = torch.rand(shape, generator=generator)  # (B, T)
    if word_starts is not None:  # every piece takes the draw of the first piece of its word
        word_index = torch.cumsum(word_starts.long(), dim=1) - 1  # (B, T)
        first = torch.where(word_starts, draw, torch.full_like(draw, 2.0))
        per_word = torch.full_like(draw, 2.0).scatter_reduce(1, word_index.clamp(min=0), first, "amin")
        draw = per_word.gather(1, word_index.clamp(min=0))
    chosen = (draw < mlm_probability) & ~special_mask
    labels = input_ids.masked_fill(~chosen, -100)
    action = torch.rand(shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_token_id
    random_positions = chosen & (action >= 0.8) & (action < 0.9)
    masked[random_positions] = torch.randint(vocab_size, shape, generator=generator)[random_positions]
    return masked, labels


def special_tokens_mask(input_ids: torch.Tensor, special: SpecialIds) -> torch.Tensor:
    """True at ``[CLS]``, ``[SEP]``, ``[MASK]`` and padding."""
    return (input_ids == special.cls) | (input_ids == special.sep) | (input_ids == special.pad) | (
        input_ids == special.mask)


def wordpiece_word_starts(input_ids: torch.Tensor, tokenizer) -> torch.Tensor:
    """True at tokens that begin a word (WordPiece continuation pieces start with ``##``)."""
    tokens = tokenizer.convert_ids_to_tokens(input_ids.flatten().tolist())
    starts = torch.tensor([not t.startswith("##") for t in tokens], dtype=torch.bool)
    return starts.view_as(input_ids)


def tokenizer_training_texts(train_files: Iterable[str | Path], held_out: Callable[[int], int]) -> Iterator[str]:
    """The text a tokenizer is trained on: one line per sentence (``sentence + "\\n"``) of every document of
    ``train_files`` (:func:`split_documents`'s documents, streamed) but the last ``held_out(count)`` ones,
    ``count`` being the number of documents. A sentence is a line of the file, so a long article (a WikiText
    one runs past 100,000 characters) never becomes one over-long line of tokenizer text. The files are read
    twice (to count, then to give the text), so no more than one document is held in memory."""
    train_files = list(train_files)
    count = sum(1 for path in train_files for _ in stream_documents(path))
    kept = count - held_out(count)
    documents = (document for path in train_files for document in stream_documents(path))
    for _, document in zip(range(kept), documents, strict=False):
        for sentence in document:
            yield sentence + "\n"


__all__ = [
    "PairExamples",
    "SpecialIds",
    "TokenDocuments",
    "collate_examples",
    "create_pretraining_examples",
    "mask_tokens",
    "special_tokens_mask",
    "split_documents",
    "stream_documents",
    "tokenize_documents",
    "tokenizer_training_texts",
    "wordpiece_word_starts",
]
