"""``WordVectors``: the one result type of every embedding trainer (word2vec, GloVe, SVD).

A table of words and their vectors with the queries of the course notes and the exports our
models need:

* ``most_similar(word)`` – nearest neighbours by cosine similarity
  :math:`\\cos(u, v) = u^\\top v / (\\lVert u\\rVert \\lVert v\\rVert)`;
* ``analogy(a, b, c)`` – "a is to b as c is to ?": the word :math:`x` (not one of a, b, c) whose
  unit vector is closest in cosine to :math:`\\hat v_b - \\hat v_a + \\hat v_c` (3CosAdd, Mikolov et al.
  2013; ``analogy("man", "king", "woman")`` → ``queen``);
* ``evaluate_analogies(file)`` – accuracy on a file in the Google analogy format
  (``: section`` lines, then ``a b c d`` lines);
* ``save(folder)`` / ``load(folder)`` – ``vectors.safetensors`` + ``vocab.json`` (never pickle);
* ``save_word2vec_format`` / ``load_word2vec_format`` – the text (or binary) format of word2vec.c,
  readable by gensim's ``KeyedVectors.load_word2vec_format``;
* ``to_embedding()`` – a ``torch.nn.Embedding`` with these rows; ``embedding_matrix_for_vocab(vocab)``
  – an initial input-embedding matrix for a tokenizer's vocabulary (found words copied, the others
  drawn uniformly), as in Kim (2014).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

logger = logging.getLogger(__name__)

VECTORS_FILE = "vectors.safetensors"
VOCAB_FILE = "vocab.json"


@dataclass
class AnalogyResult:
    """Accuracy on an analogy file; questions with a word outside the vocabulary are skipped
    (not counted as wrong), as gensim's ``evaluate_word_analogies`` does."""

    correct: int
    total: int  # questions answered (all four words known)
    skipped: int  # questions with an unknown word
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)  # section -> (correct, total)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def coverage(self) -> float:
        """Fraction of the file's questions whose four words are all in the vocabulary."""
        asked = self.total + self.skipped
        return self.total / asked if asked else 0.0


@dataclass
class WordPairResult:
    """Rank correlation with human similarity judgements; pairs with an unknown word are skipped."""

    spearman: float
    pairs: int
    skipped: int


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's correlation of the ranks (tied values share their mean rank)."""
    if len(x) < 2:
        return float("nan")

    def ranks(values: Sequence[float]) -> torch.Tensor:
        v = torch.tensor(values, dtype=torch.float64)
        below = (v.unsqueeze(0) < v.unsqueeze(1)).sum(1)  # (n,) values below each
        equal = (v.unsqueeze(0) == v.unsqueeze(1)).sum(1)  # (n,) ties, itself included
        return below + (equal + 1) / 2

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx @ ry) / (rx.norm() * ry.norm()))


class WordVectors:
    """Words and their vectors, row ``i`` of ``vectors`` belonging to ``words[i]``.

    Args:
        words: the vocabulary, most frequent first by convention (no duplicates).
        vectors: ``(len(words), vector_size)`` float tensor (or anything ``torch.as_tensor`` takes).
        counts: optional corpus counts of the words (saved and reloaded with them).
        metadata: optional JSON-serialisable description of the training run.
    """

    def __init__(
        self,
        words: Sequence[str],
        vectors: Any,
        counts: Sequence[int] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        vectors = torch.as_tensor(vectors, dtype=torch.float32).detach().cpu().contiguous()
        if vectors.dim() != 2 or vectors.shape[0] != len(words):
            raise ValueError(
                f"Invalid `vectors` of shape {tuple(vectors.shape)}: expected (len(words)={len(words)}, vector_size)."
            )
        self.words = list(words)
        self.word_to_index = {w: i for i, w in enumerate(self.words)}
        if len(self.word_to_index) != len(self.words):
            seen: set[str] = set()
            dup = next(w for w in self.words if w in seen or seen.add(w))
            raise ValueError(f"Invalid `words`: {dup!r} appears more than once; expected distinct words.")
        if counts is not None and len(counts) != len(self.words):
            raise ValueError(f"Invalid `counts` of length {len(counts)}: expected len(words)={len(self.words)}.")
        self.vectors = vectors
        self.counts = None if counts is None else [int(c) for c in counts]
        self.metadata = dict(metadata or {})
        norms = vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
        self._unit = vectors / norms  # (V, D) rows of length 1, for cosine similarities

    # ------------------------------------------------------------------------------------------
    # Lookup
    # ------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.word_to_index

    def __getitem__(self, word: str) -> torch.Tensor:
        return self.vectors[self.index(word)]

    @property
    def vector_size(self) -> int:
        return self.vectors.shape[1]

    def index(self, word: str) -> int:
        """The row of ``word``; KeyError naming the word and the vocabulary size if it has none."""
        try:
            return self.word_to_index[word]
        except KeyError:
            raise KeyError(f"Word {word!r} is not in the vocabulary ({len(self)} words).") from None

    def similarity(self, word_a: str, word_b: str) -> float:
        """Cosine similarity of two words."""
        return float(self._unit[self.index(word_a)] @ self._unit[self.index(word_b)])

    # ------------------------------------------------------------------------------------------
    # Queries
    # ------------------------------------------------------------------------------------------

    def most_similar(self, word: str, topn: int = 10) -> list[tuple[str, float]]:
        """The ``topn`` words with the highest cosine similarity to ``word`` (itself excluded)."""
        i = self.index(word)
        return self._nearest(self._unit[i], exclude=[i], topn=topn)

    def analogy(self, a: str, b: str, c: str, topn: int = 1) -> list[tuple[str, float]]:
        """Words ``x`` completing "``a`` is to ``b`` as ``c`` is to ``x``" by 3CosAdd.

        ``x = argmax_x cos(x, v̂_b - v̂_a + v̂_c)`` over the vocabulary minus {a, b, c}; e.g.
        ``analogy("man", "king", "woman")`` is king - man + woman ≈ queen.
        """
        ia, ib, ic = self.index(a), self.index(b), self.index(c)
        target = self._unit[ib] - self._unit[ia] + self._unit[ic]
        return self._nearest(target / target.norm().clamp_min(1e-12), exclude=[ia, ib, ic], topn=topn)

    def _nearest(self, unit_query: torch.Tensor, exclude: Iterable[int], topn: int) -> list[tuple[str, float]]:
        if topn < 1:
            raise ValueError(f"Invalid `topn`={topn!r}: expected a positive integer.")
        scores = self._unit @ unit_query  # (V,)
        scores[list(exclude)] = -math.inf
        values, indices = scores.topk(min(topn, len(self)))
        return [(self.words[j], float(v)) for v, j in zip(values.tolist(), indices.tolist(), strict=True) if v > -math.inf]

    def evaluate_analogies(
        self, path: str | Path, case_insensitive: bool = True, restrict_vocab: int | None = None
    ) -> AnalogyResult:
        """Accuracy of ``analogy(a, b, c)[0] == d`` over the ``a b c d`` lines of ``path``.

        Args:
            path: Google analogy format: ``: section`` headers, one question ``a b c d`` per line.
            case_insensitive: lowercase the questions (and match against lowercased vocabulary words).
            restrict_vocab: answer only from (and ask only about) the first ``restrict_vocab`` words,
                as gensim's argument of the same name (``None``: the whole vocabulary).
        """
        limit = len(self) if restrict_vocab is None else min(restrict_vocab, len(self))
        lookup: dict[str, int] = {}
        for i, w in enumerate(self.words[:limit]):
            lookup.setdefault(w.lower() if case_insensitive else w, i)
        unit = self._unit[:limit]
        result = AnalogyResult(correct=0, total=0, skipped=0)
        section = "(none)"
        for line_number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith(":"):
                section = line[1:].strip()
                continue
            parts = line.lower().split() if case_insensitive else line.split()
            if len(parts) != 4:
                raise ValueError(
                    f"Invalid analogy line {line_number} of {path}: {raw!r}; expected four words `a b c d`."
                )
            if any(p not in lookup for p in parts):
                result.skipped += 1
                continue
            ia, ib, ic, id_ = (lookup[p] for p in parts)
            target = unit[ib] - unit[ia] + unit[ic]
            scores = unit @ target
            scores[[ia, ib, ic]] = -math.inf
            hit = int(scores.argmax()) == id_
            sec_correct, sec_total = result.sections.get(section, (0, 0))
            result.sections[section] = (sec_correct + hit, sec_total + 1)
            result.correct += hit
            result.total += 1
        return result

    def evaluate_word_pairs(self, path: str | Path, case_insensitive: bool = True) -> WordPairResult:
        """Spearman correlation between human scores and cosine similarities over a word-pair file.

        Args:
            path: one pair per line, ``word_a<TAB>word_b<TAB>score`` (WordSim353's format as shipped with
                gensim's test data; lines starting with ``#`` are comments). Pairs with an unknown word are
                skipped, as gensim's ``evaluate_word_pairs`` does.
        """
        lookup = {(w.lower() if case_insensitive else w): i for i, w in reversed(list(enumerate(self.words)))}
        human, model, skipped = [], [], 0
        for line_number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            if not raw.strip() or raw.startswith("#"):
                continue
            parts = raw.split("\t")
            if len(parts) != 3:
                raise ValueError(f"Invalid word-pair line {line_number} of {path}: {raw!r}; expected "
                                 f"`word_a<TAB>word_b<TAB>score`.")
            a, b = (p.strip().lower() if case_insensitive else p.strip() for p in parts[:2])
            if a not in lookup or b not in lookup:
                skipped += 1
                continue
            human.append(float(parts[2]))
            model.append(float(self._unit[lookup[a]] @ self._unit[lookup[b]]))
        return WordPairResult(spearman=_spearman(human, model), pairs=len(human), skipped=skipped)

    # ------------------------------------------------------------------------------------------
    # Export to our models
    # ------------------------------------------------------------------------------------------

    def to_embedding(self, freeze: bool = False, padding_idx: int | None = None) -> torch.nn.Embedding:
        """A ``torch.nn.Embedding`` whose row ``i`` is the vector of ``words[i]``."""
        return torch.nn.Embedding.from_pretrained(self.vectors.clone(), freeze=freeze, padding_idx=padding_idx)

    def vocab_coverage(self, vocab: dict[str, int], lowercase_fallback: bool = True) -> float:
        """Fraction of the tokens of ``vocab`` that ``embedding_matrix_for_vocab`` finds a vector for."""
        found = sum(self._find(token, lowercase_fallback) is not None for token in vocab)
        return found / len(vocab) if vocab else 0.0

    def embedding_matrix_for_vocab(
        self,
        vocab: dict[str, int],
        init_range: float = 0.25,
        padding_idx: int | None = None,
        lowercase_fallback: bool = True,
        seed: int = 0,
    ) -> torch.Tensor:
        """An initial input-embedding matrix for a tokenizer's ``vocab`` (token → id).

        Row ``vocab[t]`` is the vector of token ``t`` when ``t`` is in these vectors (or, with
        ``lowercase_fallback``, when ``t.lower()`` is); the other rows are drawn from
        ``U(-init_range, init_range)`` (Kim 2014 uses 0.25 with 300-d word2vec vectors), and the row
        ``padding_idx`` (if given) is zero. The coverage (tokens found / tokens) is logged at INFO;
        ``vocab_coverage`` returns it.

        Returns:
            ``(max(vocab.values()) + 1, vector_size)`` float32 tensor.
        """
        if not vocab:
            raise ValueError("Invalid `vocab`={}: expected a non-empty mapping token -> id.")
        if init_range < 0:
            raise ValueError(f"Invalid `init_range`={init_range!r}: expected a number >= 0.")
        bad = [(t, i) for t, i in vocab.items() if not isinstance(i, int) or i < 0]
        if bad:
            raise ValueError(f"Invalid `vocab` entry {bad[0]!r}: expected non-negative integer ids.")
        size = max(vocab.values()) + 1
        generator = torch.Generator().manual_seed(seed)
        matrix = (torch.rand(size, self.vector_size, generator=generator) * 2 - 1) * init_range
        found = 0
        for token, token_id in vocab.items():
            row = self._find(token, lowercase_fallback)
            if row is not None:
                matrix[token_id] = self.vectors[row]
                found += 1
        if padding_idx is not None:
            matrix[padding_idx] = 0.0
        logger.info("Pretrained vectors cover %d of %d tokens (%.1f%%); the others are drawn from U(-%g, %g).",
                    found, len(vocab), 100.0 * found / len(vocab), init_range, init_range)
        return matrix

    def _find(self, token: str, lowercase_fallback: bool) -> int | None:
        row = self.word_to_index.get(token)
        if row is None and lowercase_fallback:
            row = self.word_to_index.get(token.lower())
        return row

    # ------------------------------------------------------------------------------------------
    # Saving and loading
    # ------------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> Path:
        """Write ``vectors.safetensors`` (key ``vectors``) and ``vocab.json`` (words, counts, metadata)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({"vectors": self.vectors}, str(folder / VECTORS_FILE))
        vocab = {"words": self.words, "counts": self.counts, "metadata": self.metadata}
        (folder / VOCAB_FILE).write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> WordVectors:
        """The vectors :meth:`save` wrote to ``folder`` (``vectors.safetensors`` and ``vocab.json``)."""
        folder = Path(folder)
        for name in (VECTORS_FILE, VOCAB_FILE):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder} has no {name}: expected a folder written by WordVectors.save.")
        vocab = json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8"))
        vectors = load_file(str(folder / VECTORS_FILE))["vectors"]
        return cls(vocab["words"], vectors, counts=vocab.get("counts"), metadata=vocab.get("metadata"))

    def save_word2vec_format(self, path: str | Path, binary: bool = False, precision: int = 6) -> Path:
        """Write word2vec.c's format: a ``"<words> <dims>"`` header, then one word per line.

        Text: ``word v1 v2 ...`` with each value printed as ``f"{v:.{precision}g}"`` (``precision``
        significant digits). Binary: ``word `` then ``vector_size`` little-endian float32, then ``\\n``.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._check_words_for_text_format()
        header = f"{len(self)} {self.vector_size}\n".encode()
        with open(path, "wb") as f:
            f.write(header)
            if binary:
                data = self.vectors.numpy().astype("<f4")
                for word, row in zip(self.words, data, strict=True):
                    f.write(word.encode("utf-8") + b" " + row.tobytes() + b"\n")
            else:
                fmt = f"{{:.{precision}g}}"
                for word, row in zip(self.words, self.vectors.tolist(), strict=True):
                    f.write((word + " " + " ".join(fmt.format(v) for v in row) + "\n").encode("utf-8"))
        return path

    @classmethod
    def load_word2vec_format(cls, path: str | Path, binary: bool = False) -> WordVectors:
        """Read word2vec.c's text (or ``binary=True``) format, e.g. files from gensim or GloVe + header."""
        import numpy as np

        path = Path(path)
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8").split()
            if len(header) != 2 or not all(h.isdigit() for h in header):
                raise ValueError(f"{path}: invalid header {' '.join(header)!r}; expected '<num_words> <vector_size>'.")
            num_words, size = int(header[0]), int(header[1])
            words: list[str] = []
            if binary:
                rows = np.empty((num_words, size), dtype=np.float32)
                for i in range(num_words):
                    chars = bytearray()
                    while (ch := f.read(1)) != b" ":
                        if not ch:
                            raise ValueError(f"{path}: file ends after {i} of {num_words} words.")
                        if ch != b"\n":
                            chars += ch
                    words.append(chars.decode("utf-8"))
                    rows[i] = np.frombuffer(f.read(4 * size), dtype="<f4")
            else:
                lines = f.read().decode("utf-8").splitlines()
                if len(lines) != num_words:
                    raise ValueError(f"{path}: header announces {num_words} words, the file has {len(lines)} lines.")
                rows = np.empty((num_words, size), dtype=np.float32)
                for i, line in enumerate(lines):
                    parts = line.rstrip().split(" ")
                    if len(parts) != size + 1:
                        raise ValueError(
                            f"{path}: line {i + 2} has {len(parts) - 1} values; expected vector_size={size}."
                        )
                    words.append(parts[0])
                    rows[i] = [float(v) for v in parts[1:]]
        return cls(words, torch.from_numpy(rows))

    def _check_words_for_text_format(self) -> None:
        bad = next((w for w in self.words if not w or any(ch.isspace() for ch in w)), None)
        if bad is not None:
            raise ValueError(f"Word {bad!r} is empty or holds whitespace: the word2vec format cannot store it.")
