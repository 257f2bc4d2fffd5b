r"""The n-gram language model: counts, add-k (Laplace) and interpolated Kneser–Ney smoothing.

Not a neural network, so it lives outside ``models/``; it keeps the models' habits: a validated
:class:`NGramConfig` with named presets, ``save_pretrained(folder)`` writing ``config.json`` and the
counts as safetensors arrays (never pickle), ``from_pretrained(folder)``.

**Markov assumption** (course notes 001, §2): the next token depends on the ``n - 1`` previous ones,

.. math:: P(w_i \mid w_1, \ldots, w_{i-1}) \approx P(w_i \mid w_{i-n+1}, \ldots, w_{i-1}) = P(w \mid h),

and the maximum-likelihood estimate is :math:`c(h, w) / c(h)`. An n-gram never seen in training would
make a whole sentence impossible (notes §3.1, 数据稀疏), so the counts are smoothed (平滑):

* **add-k** (``smoothing="add_k"``; Laplace / 拉普拉斯 when ``k = 1``), on the order-``n`` counts only:
  :math:`P(w \mid h) = \dfrac{c(h, w) + k}{c(h) + k\,|V|}` (an unseen context gives the uniform ``1/|V|``).
* **interpolated Kneser–Ney** (``smoothing="kneser_ney"``; Kneser & Ney 1995, Chen & Goodman 1998),
  recursively from the order-``k`` context ``h`` (``k - 1`` tokens) to ``h'``, ``h`` without its oldest token:

  .. math:: P_{KN}(w \mid h) = \frac{\max(c_{KN}(h, w) - D_k, 0)}{\sum_v c_{KN}(h, v)}
            + \frac{D_k \, N_{1+}(h\,\bullet)}{\sum_v c_{KN}(h, v)} \, P_{KN}(w \mid h'),
     \qquad P_{KN}(w \mid \text{order } 0) = \frac{1}{|V|}

  where :math:`c_{KN}` is the raw count at the highest order ``n`` and the *continuation count*
  :math:`N_{1+}(\bullet\, h\, w) = |\{u : c(u\, h\, w) > 0\}|` at the lower orders;
  :math:`N_{1+}(h\,\bullet)` is the number of distinct tokens seen after ``h``. A context never
  seen at order ``k`` passes :math:`P_{KN}(w \mid h')` through unchanged. The discount ``D_k`` is
  given (``discount``) or estimated per order as :math:`D_k = n_1 / (n_1 + 2 n_2)`, ``n_r`` being the
  number of order-``k`` n-grams whose count :math:`c_{KN}` is ``r``.

Both are proper distributions: for every context the probabilities of the ``|V|`` predictable
tokens sum to 1. ``|V|`` (:attr:`NGramConfig.num_outcomes`) is every id in ``[0, vocab_size)``
except ``bos_token_id`` and ``pad_token_id``, which never follow a context.

**Sentence boundaries.** Every sequence is read as ``<bos>×(n-1) w_1 … w_T [<eos>]``: the ``n - 1``
``<bos>`` tokens are context only (never predicted), so ``w_1`` is predicted from the start-of-sequence
context and sentence-initial statistics are learned. ``<eos>`` is appended when ``add_eos`` (default:
whenever ``eos_token_id`` is set), which makes the probabilities of sequences of every length sum to 1;
it is then predicted and counted in the perplexity like any token. A continuous text (a whole book at
character level) is one sequence with ``add_eos=False``. For Kneser–Ney, a lower-order n-gram whose
context begins with ``<bos>`` can only be preceded by ``<bos>``, so it keeps its raw count instead of
a continuation count of 1 (the convention of KenLM).

**Unknown words.** Ids must lie in ``[0, vocab_size)`` and sequences must not contain ``<bos>`` or
``<pad>``; anything else is an error naming the sequence, the position and the id. Words a tokenizer
does not know become its ``<unk>`` id, an ordinary predictable token. A token of the vocabulary never
seen in training still gets probability: ``k / (c(h) + k|V|)`` with add-k, and its share of the
uniform distribution at the bottom of the Kneser–Ney recursion.

**Storage.** For every context length ``j = 1 … n-1`` the distinct contexts are numbered by sorting
the keys ``id(h') · vocab_size + oldest token`` (a suffix trie), and the order-``k`` n-grams by the keys
``id(h) · vocab_size + w`` with their counts; every lookup is a ``numpy.searchsorted``, so fitting and
scoring a million tokens take seconds.

>>> model = NGramLanguageModel.from_preset("trigram-kneser-ney", vocab_size=10).fit([[4, 5, 6], [4, 5, 7]])
>>> round(float(model.next_token_probs([4, 5]).sum()), 6)
1.0
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .models.config_utils import PresetMixin, check_choice, invalid

logger = logging.getLogger(__name__)

MODEL_TYPE = "hfsm_ngram"
SMOOTHINGS = ("add_k", "kneser_ney")
CONFIG_NAME = "config.json"
COUNTS_NAME = "ngram_counts.safetensors"
TOKEN_ID_FIELDS = ("pad_token_id", "unk_token_id", "bos_token_id", "eos_token_id")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(value)


@dataclasses.dataclass
class NGramConfig(PresetMixin):
    """Configuration of :class:`NGramLanguageModel`.

    Args:
        order: ``n``, the model conditions on the ``n - 1`` previous tokens (1 = unigram).
        smoothing: ``"add_k"`` or ``"kneser_ney"`` (interpolated).
        k: the pseudo-count of add-k smoothing (1 = Laplace).
        discount: Kneser–Ney discount ``D``: None (estimate ``n1 / (n1 + 2 n2)`` per order), one
            number in ``(0, 1]`` for every order, or a list of ``order`` numbers (unigram first).
        discount_fallback: the discount of an order whose counts hold no n-gram seen once
            (``n1 = 0``, where the estimate would be 0 and unseen tokens impossible); None raises instead.
        vocab_size: number of token ids; None until fitted with a tokenizer, which then sets it and
            the special ids.
        pad_token_id, unk_token_id, bos_token_id, eos_token_id: the special ids (our tokenizers'
            defaults); ``<bos>`` pads the context (required when ``order > 1``), ``<eos>`` ends a sequence.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(order=2, smoothing="kneser_ney"),
        "unigram-laplace": dict(order=1, smoothing="add_k", k=1.0),
        "bigram-laplace": dict(order=2, smoothing="add_k", k=1.0),
        "trigram-add-k": dict(order=3, smoothing="add_k", k=0.1),
        "trigram-kneser-ney": dict(order=3, smoothing="kneser_ney"),
        # Chen & Goodman (1998): interpolated Kneser–Ney 5-grams, their strongest simple baseline.
        "5gram-kneser-ney": dict(order=5, smoothing="kneser_ney"),
    }

    order: int = 3
    smoothing: str = "kneser_ney"
    k: float = 1.0
    discount: float | list[float] | None = None
    discount_fallback: float | None = 0.5
    vocab_size: int | None = None
    pad_token_id: int | None = 0
    unk_token_id: int | None = 1
    bos_token_id: int | None = 2
    eos_token_id: int | None = 3

    def __post_init__(self):
        if not _is_int(self.order) or self.order < 1:
            raise invalid("order", self.order, "an integer >= 1 (1 = unigram, 2 = bigram, ...)")
        check_choice("smoothing", self.smoothing, SMOOTHINGS)
        if not _is_number(self.k) or self.k <= 0:
            raise invalid("k", self.k, "a finite number > 0 (the add-k pseudo-count; 1 = Laplace)")
        self._check_discounts()
        if self.vocab_size is not None and (not _is_int(self.vocab_size) or self.vocab_size < 1):
            raise invalid("vocab_size", self.vocab_size, "None or an integer >= 1")
        self._check_token_ids()

    def _check_discounts(self) -> None:
        def ok(d):
            return _is_number(d) and 0 < d <= 1

        if self.discount is not None:
            if self.smoothing != "kneser_ney":
                raise invalid("discount", self.discount, "None with smoothing='add_k' (add-k has no discount)")
            values = self.discount if isinstance(self.discount, (list, tuple)) else [self.discount]
            if isinstance(self.discount, (list, tuple)) and len(values) != self.order:
                raise invalid("discount", self.discount, f"a list of order={self.order} discounts, unigram first")
            if not all(ok(d) for d in values):
                raise invalid("discount", self.discount, "None, or numbers in (0, 1]")
        if self.discount_fallback is not None and not ok(self.discount_fallback):
            raise invalid("discount_fallback", self.discount_fallback, "None or a number in (0, 1]")

    def _check_token_ids(self) -> None:
        for field in TOKEN_ID_FIELDS:
            value = getattr(self, field)
            upper = self.vocab_size if self.vocab_size is not None else math.inf
            if value is not None and (not _is_int(value) or not 0 <= value < upper):
                raise invalid(field, value, f"None or a token id in [0, vocab_size={self.vocab_size})")
        if self.order > 1 and self.bos_token_id is None:
            raise invalid("bos_token_id", None, f"a token id: an order-{self.order} model pads each sequence "
                          f"with {self.order - 1} <bos> tokens")
        if self.eos_token_id is not None and self.eos_token_id in (self.bos_token_id, self.pad_token_id):
            raise invalid("eos_token_id", self.eos_token_id, "an id other than bos_token_id and pad_token_id "
                          "(<eos> is predicted, <bos> and <pad> never are)")
        if self.vocab_size is not None and self.num_outcomes < 1:
            raise invalid("vocab_size", self.vocab_size, "room for at least one token besides <bos> and <pad>")

    @property
    def outcome_mask(self) -> np.ndarray:
        """``(vocab_size,)`` bool: True for the tokens the model predicts (all but ``<bos>`` and ``<pad>``)."""
        mask = np.ones(self.vocab_size, dtype=bool)
        for special in (self.bos_token_id, self.pad_token_id):
            if special is not None:
                mask[special] = False
        return mask

    @property
    def num_outcomes(self) -> int:
        """``|V|``: the number of predictable tokens; a uniform model's perplexity."""
        return int(self.outcome_mask.sum())

    def with_tokenizer(self, tokenizer: Any) -> NGramConfig:
        """A copy whose ``vocab_size`` and special ids are the tokenizer's (``len(tokenizer)``, ``pad_token_id``, ...)."""
        fields = {f: getattr(tokenizer, f, None) for f in TOKEN_ID_FIELDS}
        return dataclasses.replace(self, vocab_size=len(tokenizer), **fields)

    def to_dict(self) -> dict[str, Any]:
        """The config as the contents of ``config.json`` (with ``model_type``)."""
        return {"model_type": MODEL_TYPE, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NGramConfig:
        """The config of ``config.json`` contents; errors name an unknown field or another ``model_type``."""
        data = dict(data)
        model_type = data.pop("model_type", None)
        if model_type != MODEL_TYPE:
            raise invalid("model_type", model_type, f"{MODEL_TYPE!r} (this is not an n-gram model's config)")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Unknown NGramConfig fields {unknown}; known fields: {', '.join(sorted(known))}.")
        return cls(**data)


@dataclasses.dataclass
class NGramCounts:
    """The counted n-grams, as sorted integer keys (see the module docstring, "Storage").

    ``context_keys[j]`` ``(U_j,)``: distinct contexts of ``j`` tokens, key ``id(h') * V + oldest token``
    (``id`` = index in ``context_keys[j - 1]``; the empty context has id 0); ``ngram_keys[k]``
    ``(N_k,)``: distinct n-grams of order ``k``, key ``id(h) * V + w``; ``ngram_counts[k]`` ``(N_k,)``.
    """

    vocab_size: int
    context_keys: dict[int, np.ndarray]
    ngram_keys: dict[int, np.ndarray]
    ngram_counts: dict[int, np.ndarray]

    def num_contexts(self, length: int) -> int:
        """The number of distinct contexts of ``length`` tokens (1 for the empty context)."""
        return 1 if length == 0 else len(self.context_keys[length])

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The counts as named arrays, the contents of ``ngram_counts.safetensors``."""
        arrays = {f"context_keys.{j}": keys for j, keys in self.context_keys.items()}
        arrays.update({f"ngram_keys.{k}": keys for k, keys in self.ngram_keys.items()})
        arrays.update({f"ngram_counts.{k}": counts for k, counts in self.ngram_counts.items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], order: int, vocab_size: int) -> NGramCounts:
        """The counts of :meth:`to_arrays`'s arrays; errors name a missing or malformed array."""
        expected = [f"context_keys.{j}" for j in range(1, order)]
        expected += [f"{name}.{k}" for k in range(1, order + 1) for name in ("ngram_keys", "ngram_counts")]
        missing = [name for name in expected if name not in arrays]
        if missing:
            raise ValueError(f"The counts file lacks the arrays {missing} an order-{order} model needs.")
        return cls(vocab_size, {j: arrays[f"context_keys.{j}"] for j in range(1, order)},
                   {k: arrays[f"ngram_keys.{k}"] for k in range(1, order + 1)},
                   {k: arrays[f"ngram_counts.{k}"] for k in range(1, order + 1)})


def count_ngrams(tokens: np.ndarray, positions: np.ndarray, order: int, vocab_size: int) -> NGramCounts:
    """Count the n-grams of every order ``1 … order`` ending at ``positions`` of ``tokens`` ``(M,)``.

    Every position needs ``order - 1`` tokens before it (the ``<bos>`` padding guarantees it).
    """
    context = np.zeros(len(positions), dtype=np.int64)  # id of the context of length j at each position
    targets = tokens[positions]
    counts = NGramCounts(vocab_size, {}, {}, {})
    for k in range(1, order + 1):
        counts.ngram_keys[k], counts.ngram_counts[k] = np.unique(context * vocab_size + targets, return_counts=True)
        if k < order:  # extend every context by one older token
            keys, context = np.unique(context * vocab_size + tokens[positions - k], return_inverse=True)
            counts.context_keys[k] = keys
            context = context.reshape(-1)
    return counts


def _lookup(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of every query in ``sorted_keys``, -1 where it is absent (same shape as ``queries``)."""
    if len(sorted_keys) == 0:
        return np.full(np.shape(queries), -1, dtype=np.int64)
    index = np.minimum(np.searchsorted(sorted_keys, queries), len(sorted_keys) - 1)
    return np.where(sorted_keys[index] == queries, index, -1)


def _validation_error(sequences: list[np.ndarray], bad: np.ndarray, allowed: str) -> ValueError:
    """Name the first offending id (sequence index, position, value) among the concatenated sequences."""
    first = int(np.flatnonzero(bad)[0])
    ends = np.cumsum([len(s) for s in sequences])
    index = int(np.searchsorted(ends, first, side="right"))
    position = first - (int(ends[index - 1]) if index else 0)
    value = int(sequences[index][position])
    return ValueError(f"Invalid token id {value} at position {position} of sequence {index}: expected {allowed}.")


def as_sequences(data: Any) -> list[np.ndarray]:
    """One sequence (a flat list/array/tensor of ids) or several (a list of them, a 2-D array) → 1-D int arrays."""
    if isinstance(data, str) or (isinstance(data, (list, tuple)) and data and isinstance(data[0], str)):
        raise TypeError("Expected token ids, got text: fit(texts, tokenizer=...) tokenises texts.")
    if hasattr(data, "detach"):  # a torch tensor
        data = data.detach().cpu().numpy()
    if isinstance(data, np.ndarray):
        if data.ndim not in (1, 2):
            raise ValueError(f"Expected a 1-D sequence or a 2-D batch of token ids, got an array of shape {data.shape}.")
        data = [data] if data.ndim == 1 else list(data)
    else:
        data = list(data)
        if data and _is_int(data[0]):
            data = [data]
    sequences = []
    for index, sequence in enumerate(data):
        array = np.asarray(sequence.detach().cpu().numpy() if hasattr(sequence, "detach") else sequence)
        if array.size == 0:
            array = array.astype(np.int64)
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"Sequence {index} is not a flat sequence of integer token ids "
                            f"(dtype {array.dtype}, shape {array.shape}).")
        sequences.append(array.astype(np.int64, copy=False))
    return sequences


class NGramLanguageModel:
    """An n-gram language model with add-k or interpolated Kneser–Ney smoothing (see the module docstring).

    >>> model = NGramLanguageModel.from_preset("bigram-laplace", vocab_size=8)   # doctest: +SKIP
    >>> model.fit([[4, 5, 6, 5]]).perplexity([[4, 5]])                           # doctest: +SKIP
    """

    def __init__(self, config: NGramConfig | None = None, **kwargs: Any):
        if config is not None and kwargs:
            raise ValueError(f"Give a config or config fields, not both (got config and {sorted(kwargs)}).")
        self.config = config if config is not None else NGramConfig(**kwargs)
        self.counts: NGramCounts | None = None
        self.discounts: list[float] | None = None  # Kneser–Ney D_k per order (unigram first), after fitting

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> NGramLanguageModel:
        """An unfitted model of the preset ``name``; keyword arguments override single fields."""
        return cls(NGramConfig.from_preset(name, **overrides))

    def __repr__(self) -> str:
        c = self.config
        fitted = f"{self.num_ngrams} n-grams" if self.counts is not None else "not fitted"
        return f"NGramLanguageModel(order={c.order}, smoothing={c.smoothing!r}, vocab_size={c.vocab_size}, {fitted})"

    @property
    def num_ngrams(self) -> dict[int, int]:
        """Distinct n-grams per order."""
        return {k: len(keys) for k, keys in self._fitted().ngram_keys.items()}

    # ------------------------------------------------------------------ fitting

    def fit(self, data: Any, tokenizer: Any = None, add_eos: bool | None = None) -> NGramLanguageModel:
        """Count the n-grams of ``data`` and prepare the smoothed distributions; returns ``self``.

        Args:
            data: token-id sequences (a list of lists/arrays/tensors, a 2-D array, or one flat
                sequence), or texts (one string or a list) when ``tokenizer`` is given.
            tokenizer: a ``transformers`` tokenizer; each text is encoded without special tokens.
                If the config has no ``vocab_size`` yet, the tokenizer sets it and the special ids.
            add_eos: end every sequence with ``<eos>`` (default: when ``eos_token_id`` is set).
        """
        if tokenizer is not None:
            data = self._encode_texts(data, tokenizer)
        sequences = as_sequences(data)
        if self.config.vocab_size is None:
            raise invalid("vocab_size", None, "the number of token ids: set it in the config, or fit with tokenizer=")
        if sum(len(s) for s in sequences) == 0:
            raise ValueError(f"Empty training corpus: {len(sequences)} sequences and no token; "
                             "an n-gram model needs at least one token to count.")
        tokens, positions = self._layout(sequences, add_eos)
        self.counts = count_ngrams(tokens, positions, self.config.order, self.config.vocab_size)
        self._prepare()
        logger.info("Counted %s distinct n-grams (by order) in %d tokens.", self.num_ngrams, len(positions))
        return self

    def _encode_texts(self, texts: str | Iterable[str], tokenizer: Any) -> list[list[int]]:
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("With tokenizer=, fit() takes a text or a list of texts.")
        if self.config.vocab_size is None:
            self.config = self.config.with_tokenizer(tokenizer)
        elif len(tokenizer) > self.config.vocab_size:
            raise invalid("vocab_size", self.config.vocab_size, f">= the tokenizer's {len(tokenizer)} tokens")
        return tokenizer(texts, add_special_tokens=False)["input_ids"]

    def _layout(self, sequences: list[np.ndarray], add_eos: bool | None) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens (M,), positions (P,))``: the sequences padded as ``<bos>×(n-1) w_1 … w_T [<eos>]``, one
        after the other, and the positions of the predicted tokens (everything but the padding)."""
        c = self.config
        if add_eos is None:
            add_eos = c.eos_token_id is not None
        elif add_eos and c.eos_token_id is None:
            raise invalid("eos_token_id", None, "a token id to append with add_eos=True (or pass add_eos=False)")
        if sequences:
            self._check_ids(sequences)
        pad = np.full(c.order - 1, c.bos_token_id if c.order > 1 else 0, dtype=np.int64)
        eos = np.array([c.eos_token_id] if add_eos else [], dtype=np.int64)
        tokens = np.concatenate([part for s in sequences for part in (pad, s, eos)] or [np.zeros(0, np.int64)])
        lengths = np.array([len(s) + len(eos) + len(pad) for s in sequences], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        predicted = np.ones(len(tokens), dtype=bool)
        predicted[(starts[:, None] + np.arange(len(pad))).reshape(-1)] = False
        return tokens, np.flatnonzero(predicted)

    def _check_ids(self, sequences: list[np.ndarray]) -> None:
        c = self.config
        flat = np.concatenate(sequences)
        bad = (flat < 0) | (flat >= c.vocab_size)
        if bad.any():
            raise _validation_error(sequences, bad, f"ids in [0, vocab_size={c.vocab_size})")
        specials = [t for t in (c.bos_token_id, c.pad_token_id) if t is not None]
        bad = np.isin(flat, specials)
        if bad.any():
            raise _validation_error(sequences, bad, f"no <bos>/<pad> id {specials} inside a sequence (the model adds "
                                    "the <bos> padding itself; encode texts with add_special_tokens=False)")

    def _prepare(self) -> None:
        """Per-context totals (and, for Kneser–Ney, the counts c_KN, N_{1+}(h •) and D_k) from the counts."""
        c, counts, n = self.config, self._fitted(), self.config.order
        self._totals, self._types, self._smoothed_counts = {}, {}, {}
        orders = range(1, n + 1) if c.smoothing == "kneser_ney" else [n]
        for k in orders:
            kn = self._kneser_ney_counts(k) if c.smoothing == "kneser_ney" else counts.ngram_counts[k]
            context = counts.ngram_keys[k] // c.vocab_size
            size = counts.num_contexts(k - 1)
            self._smoothed_counts[k] = kn
            self._totals[k] = np.bincount(context, weights=kn, minlength=size)
            self._types[k] = np.bincount(context, minlength=size)
        if c.smoothing == "kneser_ney":
            given = c.discount if isinstance(c.discount, (list, tuple)) else [c.discount] * n
            self.discounts = [float(d) if d is not None else self._estimate_discount(k)
                              for k, d in zip(range(1, n + 1), given, strict=True)]

    def _kneser_ney_counts(self, k: int) -> np.ndarray:
        """c_KN of order ``k``: raw counts at the top order (and after a ``<bos>``-initial context), else
        the continuation counts N_{1+}(• h w), the number of distinct tokens seen before ``h w``."""
        counts, V = self._fitted(), self.config.vocab_size
        if k == self.config.order:
            return counts.ngram_counts[k]
        longer = counts.ngram_keys[k + 1]  # every (k+1)-gram u h w is one left extension of h w
        shorter_context = counts.context_keys[k][longer // V] // V  # id of h: drop u
        suffix = np.searchsorted(counts.ngram_keys[k], shorter_context * V + longer % V)
        continuation = np.bincount(suffix, minlength=len(counts.ngram_keys[k]))
        if k > 1:
            oldest = counts.context_keys[k - 1][counts.ngram_keys[k] // V] % V
            continuation = np.where(oldest == self.config.bos_token_id, counts.ngram_counts[k], continuation)
        return continuation

    def _estimate_discount(self, k: int) -> float:
        counts = self._smoothed_counts[k]
        n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
        if n1 > 0:
            return n1 / (n1 + 2 * n2)
        if self.config.discount_fallback is None:
            raise ValueError(f"Cannot estimate the Kneser–Ney discount of order {k}: no {k}-gram has count 1 "
                             f"(n1=0, n2={n2}); set `discount` or `discount_fallback` in the config.")
        logger.warning("Order %d: no n-gram seen once (n1=0), so D = n1/(n1+2 n2) = 0; using discount_fallback=%s.",
                       k, self.config.discount_fallback)
        return float(self.config.discount_fallback)

    def _fitted(self) -> NGramCounts:
        if self.counts is None:
            raise RuntimeError("The n-gram model is not fitted: call fit() or load one with from_pretrained().")
        return self.counts

    # ------------------------------------------------------------------ probabilities

    def _context_ids(self, tokens: np.ndarray, positions: np.ndarray) -> list[np.ndarray]:
        """Ids of the contexts of length ``j = 0 … n-1`` before each position, ``(P,)`` each (-1: unseen)."""
        counts, V = self._fitted(), self.config.vocab_size
        ids = [np.zeros(len(positions), dtype=np.int64)]
        for j in range(1, self.config.order):
            previous = ids[-1]
            found = _lookup(counts.context_keys[j], previous * V + tokens[positions - j])
            ids.append(np.where(previous >= 0, found, -1))
        return ids

    def _count_of(self, k: int, context: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The smoothed order-``k`` count of ``(context, token)`` (broadcast), 0 when unseen."""
        index = _lookup(self._fitted().ngram_keys[k], context * self.config.vocab_size + tokens)
        return np.where(index >= 0, self._smoothed_counts[k][np.maximum(index, 0)], 0)

    def _probabilities(self, contexts: list[np.ndarray], tokens: np.ndarray) -> np.ndarray:
        """P(token | context) for broadcastable ``contexts[j]`` (context ids) and ``tokens``."""
        c = self.config
        if c.smoothing == "add_k":
            context = contexts[c.order - 1]
            total = np.where(context >= 0, self._totals[c.order][np.maximum(context, 0)], 0.0)
            return (self._count_of(c.order, context, tokens) + c.k) / (total + c.k * c.num_outcomes)
        p = np.full(np.broadcast_shapes(contexts[0].shape, np.shape(tokens)), 1.0 / c.num_outcomes)
        for k in range(1, c.order + 1):  # interpolate from the unigram up to order n
            context, d = contexts[k - 1], self.discounts[k - 1]
            seen = np.maximum(context, 0)
            total, types = self._totals[k][seen], self._types[k][seen]
            higher = (np.maximum(self._count_of(k, context, tokens) - d, 0.0) + d * types * p) / np.maximum(total, 1)
            p = np.where(context >= 0, higher, p)
        return p

    def token_log_probs(self, data: Any, add_eos: bool | None = None) -> np.ndarray:
        """``log P(w_t | h_t)`` in nats of every predicted token of every sequence (``<eos>`` included), concatenated."""
        sequences = as_sequences(data)
        tokens, positions = self._layout(sequences, add_eos)
        return np.log(self._probabilities(self._context_ids(tokens, positions), tokens[positions]))

    def score(self, sequence: Any, add_eos: bool | None = None) -> np.ndarray:
        """Per-token log-probabilities (nats) of one sequence: ``(T,)``, or ``(T + 1,)`` with ``<eos>``."""
        sequences = as_sequences(sequence)
        if len(sequences) != 1:
            raise ValueError(f"score() takes one sequence, got {len(sequences)}; use token_log_probs() for several.")
        return self.token_log_probs(sequences, add_eos)

    def log_prob(self, sequence: Any, add_eos: bool | None = None) -> float:
        """``log P(sequence) = Σ_t log P(w_t | h_t)`` in nats."""
        return float(self.score(sequence, add_eos).sum())

    def evaluate(self, data: Any, add_eos: bool | None = None) -> dict[str, float]:
        """``loss`` (cross-entropy, nats/token), ``perplexity = exp(loss)`` and the number of scored ``tokens``."""
        log_probs = self.token_log_probs(data, add_eos)
        if log_probs.size == 0:
            raise ValueError("Nothing to score: the held-out data holds no token.")
        loss = float(-log_probs.mean())
        return {"loss": loss, "perplexity": math.exp(loss), "tokens": int(log_probs.size)}

    def perplexity(self, data: Any, add_eos: bool | None = None) -> float:
        """``PP = exp(-(1/N) Σ_t log P(w_t | h_t))`` over the held-out token ids (course notes 000, §0.2.5)."""
        return self.evaluate(data, add_eos)["perplexity"]

    def next_token_probs(self, context: Sequence[int] = ()) -> np.ndarray:
        """``(vocab_size,)`` distribution of the token after ``context`` (read as the start of a sequence:
        fewer than ``n - 1`` tokens are padded with ``<bos>``); 0 for ``<bos>`` and ``<pad>``."""
        c = self.config
        history = as_sequences([list(context)]) if len(context) else []
        if history:
            self._check_ids(history)
        keep = list(history[0][max(0, len(history[0]) - (c.order - 1)):]) if history else []
        tokens = np.array([c.bos_token_id] * (c.order - 1 - len(keep)) + keep + [0], dtype=np.int64)
        contexts = self._context_ids(tokens, np.array([len(tokens) - 1]))
        return np.where(c.outcome_mask, self._probabilities(contexts, np.arange(c.vocab_size)), 0.0)

    def generate(self, prompt: Sequence[int] = (), max_new_tokens: int = 100, *, temperature: float = 1.0,
                 do_sample: bool = True, seed: int | None = None, stop_at_eos: bool = True) -> list[int]:
        """``prompt`` + up to ``max_new_tokens`` tokens drawn from ``P(w | h)^(1/temperature)`` (renormalised),
        or the most probable token when ``do_sample=False``; stops after ``<eos>`` if ``stop_at_eos``.
        The same ``seed`` gives the same tokens."""
        if not _is_int(max_new_tokens) or max_new_tokens < 0:
            raise invalid("max_new_tokens", max_new_tokens, "an integer >= 0")
        if not _is_number(temperature) or temperature <= 0:
            raise invalid("temperature", temperature, "a finite number > 0")
        rng = np.random.default_rng(seed)
        output = [int(t) for t in prompt]
        for _ in range(max_new_tokens):
            probs = self.next_token_probs(output)
            if do_sample:
                probs = probs ** (1.0 / temperature)
                token = int(rng.choice(len(probs), p=probs / probs.sum()))
            else:
                token = int(np.argmax(probs))
            output.append(token)
            if stop_at_eos and token == self.config.eos_token_id:
                break
        return output

    # ------------------------------------------------------------------ saving and loading

    def save_pretrained(self, save_directory: str | Path) -> None:
        """Write ``config.json`` and ``ngram_counts.safetensors`` (int64 arrays, see :class:`NGramCounts`)."""
        from safetensors.numpy import save_file

        counts = self._fitted()
        folder = Path(save_directory)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_NAME).write_text(json.dumps(self.config.to_dict(), indent=2, sort_keys=True) + "\n")
        arrays = {name: np.ascontiguousarray(a, dtype=np.int64) for name, a in counts.to_arrays().items()}
        save_file(arrays, str(folder / COUNTS_NAME), metadata={"model_type": MODEL_TYPE})

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> NGramLanguageModel:
        """Load a model written by :meth:`save_pretrained`."""
        from safetensors.numpy import load_file

        folder = Path(folder)
        for name in (CONFIG_NAME, COUNTS_NAME):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{str(folder / name)!r} does not exist: not a folder written by "
                                        "NGramLanguageModel.save_pretrained.")
        config = NGramConfig.from_dict(json.loads((folder / CONFIG_NAME).read_text()))
        if config.vocab_size is None:
            raise invalid("vocab_size", None, "an integer in a fitted model's config.json")
        model = cls(config)
        model.counts = NGramCounts.from_arrays(load_file(str(folder / COUNTS_NAME)), config.order, config.vocab_size)
        model._prepare()
        return model


__all__ = ["NGramConfig", "NGramCounts", "NGramLanguageModel", "as_sequences", "count_ngrams"]
