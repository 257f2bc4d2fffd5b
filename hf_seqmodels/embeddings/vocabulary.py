"""The vocabulary shared by word2vec, GloVe and the SVD baseline: word counts, ``min_count``,
``max_vocab_size``, the corpus as word ids, frequent-word subsampling and the noise distribution.

A corpus is one or more text files; each non-empty line is a sentence (windows never cross a line,
as in word2vec.c and GloVe's ``cooccur``). Lines are split by our word tokenizer's pre-tokenizer
(``tokenizer="word"``: ``tokenizers.pre_tokenizers.Whitespace``, i.e. runs of ``\\w+`` or of
punctuation) or on whitespace only (``tokenizer="whitespace"``, as word2vec.c), after the package's
text cleaning (lowercasing by default). Words below ``min_count`` are dropped from the corpus before
any window is taken, as in word2vec.c.

Subsampling of frequent words (Mikolov et al. 2013), with :math:`f(w) = \\text{count}(w) / T` the word's
share of the :math:`T` in-vocabulary tokens and :math:`t` the threshold ``sample``:

* ``"paper"`` (the course notes' formula): discard with :math:`P(w) = 1 - \\sqrt{t / f(w)}`, i.e. keep
  with :math:`\\min(1, \\sqrt{t/f(w)})`;
* ``"word2vec_c"`` (word2vec.c and gensim): keep with :math:`\\min(1, \\sqrt{t/f(w)} + t/f(w))`.

Negative samples are drawn from the unigram distribution raised to 3/4:
:math:`P_n(w) = \\text{count}(w)^{0.75} / \\sum_v \\text{count}(v)^{0.75}`.
"""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import pre_tokenizers

from ..models.config_utils import check_choice, invalid
from ..tokenization import CleaningConfig, build_normalizer

logger = logging.getLogger(__name__)

TOKENIZERS = ("word", "whitespace")
SUBSAMPLING_FORMULAS = ("paper", "word2vec_c")
PathLike = str | Path


@dataclass
class EncodedCorpus:
    """A corpus as word ids: ``ids`` (all sentences one after another; int32) and ``offsets`` (int64; sentence ``s`` is
    ``ids[offsets[s]:offsets[s + 1]]``). ``raw_words`` counts the tokens before out-of-vocabulary words were
    dropped."""

    ids: np.ndarray
    offsets: np.ndarray
    raw_words: int

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1

    def sentence_index(self) -> np.ndarray:
        """``(len(ids),)`` the sentence each token belongs to."""
        return np.repeat(np.arange(self.num_sentences), np.diff(self.offsets))

    def longest_sentence(self) -> int:
        """The number of words of the longest sentence."""
        return int(np.diff(self.offsets).max(initial=0))


class Vocabulary:
    """Words sorted by decreasing count (ties: first occurrence first), with their counts.

    Build one with :meth:`from_files` or :meth:`from_sentences`; ``words[i]`` has id ``i``.
    """

    def __init__(self, words: Sequence[str], counts: Sequence[int], lowercase: bool = True,
                 tokenizer: str = "word") -> None:
        check_choice("tokenizer", tokenizer, TOKENIZERS)
        if len(words) != len(counts):
            raise invalid("counts", f"<{len(counts)} counts>", f"one count per word ({len(words)} words)")
        self.words = list(words)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.word_to_index = {w: i for i, w in enumerate(self.words)}
        self.lowercase = lowercase
        self.tokenizer = tokenizer
        self._normalizer = build_normalizer(CleaningConfig(lowercase=lowercase))  # None: nothing to clean
        self._pre_tokenizer = pre_tokenizers.Whitespace() if tokenizer == "word" else None

    def __len__(self) -> int:
        return len(self.words)

    @property
    def total_words(self) -> int:
        """In-vocabulary tokens in the corpus the counts came from."""
        return int(self.counts.sum())

    # ------------------------------------------------------------------------------------------
    # Building
    # ------------------------------------------------------------------------------------------

    def tokenize(self, line: str) -> list[str]:
        """The words of ``line``, split (and lowercased) as the vocabulary was counted."""
        if self._normalizer is not None:
            line = self._normalizer.normalize_str(line)
        if self._pre_tokenizer is None:
            return line.split()
        return [piece for piece, _ in self._pre_tokenizer.pre_tokenize_str(line)]

    @classmethod
    def from_files(cls, paths: PathLike | Sequence[PathLike], min_count: int = 5,
                   max_vocab_size: int | None = None, lowercase: bool = True,
                   tokenizer: str = "word") -> Vocabulary:
        """Count the words of text files (one sentence per line) and keep the frequent ones."""
        probe = cls([], [], lowercase=lowercase, tokenizer=tokenizer)
        return cls.from_sentences((probe.tokenize(line) for line in _read_lines(paths)), min_count=min_count,
                                  max_vocab_size=max_vocab_size, lowercase=lowercase, tokenizer=tokenizer)

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str]], min_count: int = 5,
                       max_vocab_size: int | None = None, lowercase: bool = True,
                       tokenizer: str = "word") -> Vocabulary:
        """Keep the words seen at least ``min_count`` times, then the ``max_vocab_size`` most frequent.

        Raises ``ValueError`` for an empty corpus, for fewer than two kept words (nothing to train), and
        when fewer words reach ``min_count`` than ``max_vocab_size`` asks for.
        """
        if not isinstance(min_count, int) or min_count < 1:
            raise invalid("min_count", min_count, "an integer >= 1")
        if max_vocab_size is not None and (not isinstance(max_vocab_size, int) or max_vocab_size < 2):
            raise invalid("max_vocab_size", max_vocab_size, "None or an integer >= 2")
        counter: Counter[str] = Counter()
        for tokens in sentences:
            counter.update(tokens)
        if not counter:
            raise ValueError("The corpus is empty: it holds no word (only blank lines or whitespace).")
        ranked = sorted(counter.items(), key=lambda kv: -kv[1])  # stable: ties keep first occurrence
        kept = [(w, c) for w, c in ranked if c >= min_count]
        if len(kept) < 2:
            raise invalid("min_count", min_count,
                          f"a value that keeps at least 2 words (the corpus has {len(counter)} distinct words, "
                          f"the most frequent seen {ranked[0][1]} times)")
        if max_vocab_size is not None:
            if len(kept) < max_vocab_size:
                raise invalid("max_vocab_size", max_vocab_size,
                              f"at most {len(kept)}: the corpus has {len(counter)} distinct words, {len(kept)} "
                              f"of them seen at least min_count={min_count} times (or max_vocab_size=None)")
            kept = kept[:max_vocab_size]
        logger.info("Vocabulary: %d of %d distinct words (min_count=%d, max_vocab_size=%s), %d of %d tokens.",
                    len(kept), len(counter), min_count, max_vocab_size, sum(c for _, c in kept),
                    sum(counter.values()))
        return cls([w for w, _ in kept], [c for _, c in kept], lowercase=lowercase, tokenizer=tokenizer)

    # ------------------------------------------------------------------------------------------
    # Encoding
    # ------------------------------------------------------------------------------------------

    def encode_files(self, paths: PathLike | Sequence[PathLike]) -> EncodedCorpus:
        """:meth:`encode_sentences` of the lines of text files, read as a stream."""
        return self.encode_sentences(self.tokenize(line) for line in _read_lines(paths))

    def encode_sentences(self, sentences: Iterable[Sequence[str]]) -> EncodedCorpus:
        """Word ids of each sentence, out-of-vocabulary words dropped; sentences left empty are skipped.

        The ids are numpy int32 (4 bytes a token), written to a
        temporary file in chunks of :data:`ENCODE_CHUNK_TOKENS` and read back once at the end, so the peak memory
        is the final arrays plus one chunk of Python ints, never a Python list of the whole corpus (about 21
        bytes a token)."""
        ids, lengths = _SpilledArray(np.int32), _SpilledArray(np.int64)
        lengths.extend([0])  # offsets[0]
        chunk: list[int] = []
        chunk_lengths: list[int] = []
        raw = 0
        lookup = self.word_to_index
        for tokens in sentences:
            raw += len(tokens)
            before = len(chunk)
            chunk.extend(lookup[t] for t in tokens if t in lookup)
            if len(chunk) > before:
                chunk_lengths.append(len(chunk) - before)
                if len(chunk) >= ENCODE_CHUNK_TOKENS:
                    ids.extend(chunk)
                    lengths.extend(chunk_lengths)
                    chunk, chunk_lengths = [], []
        ids.extend(chunk)
        lengths.extend(chunk_lengths)
        if len(lengths) == 1:
            raise ValueError("The corpus is empty: no sentence holds an in-vocabulary word.")
        offsets = lengths.finish()
        np.cumsum(offsets, out=offsets)  # in place: 0 and the sentence lengths become the offsets
        return EncodedCorpus(ids=ids.finish(), offsets=offsets, raw_words=raw)

    # ------------------------------------------------------------------------------------------
    # Sampling distributions
    # ------------------------------------------------------------------------------------------

    def keep_probabilities(self, sample: float = 1e-3, formula: str = "paper") -> np.ndarray:
        """``(len(self),)`` probability of keeping each word when subsampling (module docstring)."""
        check_choice("subsampling_formula", formula, SUBSAMPLING_FORMULAS)
        if not sample >= 0:
            raise invalid("sample", sample, "a threshold >= 0 (0 disables subsampling)")
        if sample == 0:
            return np.ones(len(self))
        ratio = sample / (self.counts / self.total_words)  # t / f(w)
        keep = np.sqrt(ratio) if formula == "paper" else np.sqrt(ratio) + ratio
        return np.minimum(keep, 1.0)

    def noise_distribution(self, power: float = 0.75) -> np.ndarray:
        """``(len(self),)`` the negative-sampling distribution ``count^power / sum(count^power)``."""
        weights = self.counts.astype(np.float64) ** power
        return weights / weights.sum()

    def to_dict(self) -> dict:
        """The vocabulary as JSON-ready data: words, counts and how words were split."""
        return {"words": self.words, "counts": self.counts.tolist(), "lowercase": self.lowercase,
                "tokenizer": self.tokenizer}


def check_window(window: int, corpus: EncodedCorpus) -> None:
    """A window must be >= 1, and some sentence must hold two words (else no pair exists to train on)."""
    if not isinstance(window, int) or window < 1:
        raise invalid("window", window, "an integer >= 1")
    longest = corpus.longest_sentence()
    if longest < 2:
        raise invalid("window", window, f"sentences of at least 2 in-vocabulary words around it; the longest "
                                        f"sentence has {longest}, so no (word, context) pair exists")
    if window >= longest:
        logger.warning("window=%d is not smaller than the longest sentence (%d words): windows are cut at "
                       "sentence ends, so a larger window changes nothing.", window, longest)


#: Tokens of Python ints held at a time by :meth:`Vocabulary.encode_sentences` before they join the numpy buffer.
ENCODE_CHUNK_TOKENS = 1 << 16


class _SpilledArray:
    """A 1-D numpy array built by appending chunks: each chunk is written to an unnamed temporary file as it comes,
    and :meth:`finish` reads the file back into one array. Peak memory is the final array plus one chunk; a buffer
    grown in RAM would hold the old and the new buffer at once whenever ``realloc`` copies."""

    def __init__(self, dtype: type[np.integer]) -> None:
        self.dtype = dtype
        self._file = tempfile.TemporaryFile(prefix="encoded-")
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def extend(self, values: list[int]) -> None:
        np.asarray(values, dtype=self.dtype).tofile(self._file)
        self._size += len(values)

    def finish(self) -> np.ndarray:
        """``(len(self),)`` the values; the temporary file is closed (and so deleted)."""
        with self._file:
            self._file.seek(0)
            return np.fromfile(self._file, dtype=self.dtype, count=self._size)


def _read_lines(paths: PathLike | Sequence[PathLike]) -> Iterator[str]:
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise invalid("train_file", paths, "at least one text file")
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"Invalid `train_file`={str(path)!r}: no such file.")
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield line
