"""word2vec (Mikolov et al. 2013; course notes 001 §3–§10): CBOW and skip-gram, each trained with
negative sampling or with hierarchical softmax, with word2vec.c's update equations.

Two matrices: input vectors :math:`v_w` (the word vectors we keep, ``input_vectors``) and output
vectors :math:`u` (``output_vectors``: one per word for negative sampling, one per Huffman inner node
for hierarchical softmax). For a centre word :math:`w_t` and its context :math:`C_t` (the words at most
:math:`R` positions away, :math:`R \\sim U\\{1..\\text{window}\\}` drawn per centre: the dynamic window):

* **skip-gram** predicts :math:`w_t` from each context word alone, :math:`h = v_c` for :math:`c \\in C_t`
  (word2vec.c's order: the context word is the input, the centre word the target);
* **CBOW** predicts :math:`w_t` from the average :math:`h = \\frac{1}{|C_t|}\\sum_{c \\in C_t} v_c`.

The output layer scores the target :math:`o = w_t` given :math:`h`:

* **negative sampling**: :math:`J = -\\log\\sigma(u_o^\\top h) - \\sum_{k=1}^{K}\\log\\sigma(-u_{n_k}^\\top h)`
  with :math:`n_k \\sim P_n(w) \\propto \\text{count}(w)^{0.75}`;
* **hierarchical softmax**: :math:`J = -\\sum_j \\log\\sigma\\big((1 - 2d_j)\\,u_{p_j}^\\top h\\big)` over the
  inner nodes :math:`p_j` and code bits :math:`d_j` of :math:`o`'s Huffman path (:mod:`.huffman`).

Both are binary logistic losses with label :math:`y` (1 for the target, 0 for a noise word, :math:`1 - d_j`
on a path). word2vec.c's step for one prediction, with :math:`g = \\alpha\\,(y - \\sigma(u^\\top h))`:

.. math::  e \\mathrel{+}= g\\,u, \\qquad u \\mathrel{+}= g\\,h \\qquad \\text{(each target or node)}, \\qquad
           v_c \\mathrel{+}= e \\quad \\text{(the input word; with CBOW every context word, undivided)}.

As in word2vec.c, noise words equal to the target are skipped and with hierarchical softmax a node whose
score lies outside :math:`(-6, 6)` is not updated (word2vec.c's ``MAX_EXP``). The learning rate decays
linearly from ``learning_rate`` to ``learning_rate * min_learning_rate_ratio`` over all epochs. Frequent
words are subsampled (:meth:`.Vocabulary.keep_probabilities`) before windows are taken.

Training is batched: ``batch_words`` centre words at a time share one gather and one ``index_add_`` per
matrix, so the updates of a row within a batch add up (which centres share a batch is chosen within a few
batches' window to keep the padding small: :meth:`Word2VecTrainer._batch_order`). That is word2vec.c's sum of steps except for
rows hit many times in one batch: the Huffman nodes near the root lie on nearly every path. A node's
summed update is therefore capped at ``max_node_hits`` steps' worth (a node hit :math:`n` times moves by
its summed update times :math:`\\min(1, \\text{max\\_node\\_hits} / n)`); nodes hit fewer times move
exactly as in word2vec.c. Subsampling, the dynamic windows and the noise words of
``chunk_words`` raw words are drawn at once, with array operations (windows stop at a chunk's ends).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..models.config_utils import PresetMixin, check_choice, invalid
from .huffman import build_huffman_tree
from .keyed_vectors import WordVectors
from .vocabulary import SUBSAMPLING_FORMULAS, EncodedCorpus, Vocabulary, check_window

logger = logging.getLogger(__name__)

ARCHITECTURES = ("cbow", "skipgram")
LOSSES = ("negative_sampling", "hierarchical_softmax")
MAX_EXP = 6.0  # word2vec.c: hierarchical-softmax nodes scored outside (-MAX_EXP, MAX_EXP) are not updated


@dataclass
class Word2VecConfig(PresetMixin):
    """Settings of a word2vec run; defaults are word2vec.c's (learning rate 0.025 skip-gram, 0.05 CBOW).

    ``batch_words`` centre words share one update, in which the updates of a row add up: on a vocabulary
    of a few dozen words a frequent row gets many at once, so use a small value there (e.g. 64). The
    defaults (256 skip-gram; CBOW 1024 with negative sampling, 512 with hierarchical softmax, whose analogies
    suffered at 1024) were the fastest per word on a 2-core AMD EPYC that kept the quality (skip-gram's batch
    temporaries, ``B x 2 window x D``, stay in cache; CBOW's are ``2 window`` times smaller, and its cost is
    per-batch overhead). ``sort_batches`` batches of centres are shuffled and sorted together by context size
    and path length (:meth:`Word2VecTrainer._batch_order`); the default, 64 for skip-gram and 8 for CBOW,
    sorts a whole chunk for skip-gram (its padded slots and paths 84 % real instead of 59 % with 8), while
    CBOW, sorted by path length alone, would put the same frequent words in one batch.
    ``max_node_hits`` caps the summed update of a Huffman node within a batch (module docstring).
    ``workers`` threads train chunks of ``chunk_words`` raw words concurrently (1: reproducible).

    ``Word2VecConfig.from_preset(name, **overrides)``: ``tiny`` (tests), ``word2vec-c-skipgram`` and
    ``word2vec-c-cbow`` (word2vec.c's defaults with ``-cbow 0``/``1``, its subsampling formula),
    ``mikolov2013-negative`` and ``mikolov2013-hierarchical`` (Mikolov et al. 2013, "Distributed
    Representations of Words and Phrases": 300 dimensions, window 5, subsampling threshold 1e-5, 15 noise
    words or the Huffman-tree softmax).
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(vector_size=16, window=3, sample=0.0, epochs=3, batch_words=64),  # no subsampling on tiny text
        "word2vec-c-skipgram": dict(architecture="skipgram", subsampling_formula="word2vec_c"),
        "word2vec-c-cbow": dict(architecture="cbow", subsampling_formula="word2vec_c"),
        "mikolov2013-negative": dict(architecture="skipgram", loss="negative_sampling", vector_size=300, window=5,
                                     negative=15, sample=1e-5),
        "mikolov2013-hierarchical": dict(architecture="skipgram", loss="hierarchical_softmax", vector_size=300,
                                         window=5, sample=1e-5),
    }

    architecture: str = "skipgram"
    loss: str = "negative_sampling"
    vector_size: int = 100
    window: int = 5
    negative: int = 5
    noise_power: float = 0.75
    sample: float = 1e-3
    subsampling_formula: str = "paper"
    learning_rate: float | None = None  # None: 0.025 for skip-gram, 0.05 for CBOW
    min_learning_rate_ratio: float = 1e-4
    epochs: int = 5
    batch_words: int | None = None  # None: 256 skip-gram, 1024 CBOW (512 with hierarchical softmax)
    max_node_hits: int = 64
    chunk_words: int = 16384
    sort_batches: int | None = None  # None: 64 for skip-gram, 8 for CBOW
    workers: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ARCHITECTURES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("subsampling_formula", self.subsampling_formula, SUBSAMPLING_FORMULAS)
        if self.batch_words is None:
            self.batch_words = 256 if self.architecture == "skipgram" else 1024 if self.loss == "negative_sampling" else 512
        if self.sort_batches is None:
            self.sort_batches = 64 if self.architecture == "skipgram" else 8
        for name in ("vector_size", "window", "epochs", "batch_words", "max_node_hits", "chunk_words", "sort_batches", "workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise invalid(name, value, "an integer >= 1")
        if self.loss == "negative_sampling" and (not isinstance(self.negative, int) or self.negative < 1):
            raise invalid("negative", self.negative, "an integer >= 1 with loss='negative_sampling'")
        if not self.sample >= 0:
            raise invalid("sample", self.sample, "a threshold >= 0 (0 disables subsampling)")
        if self.learning_rate is None:
            self.learning_rate = 0.05 if self.architecture == "cbow" else 0.025
        if not self.learning_rate > 0:
            raise invalid("learning_rate", self.learning_rate, "a positive number")
        if not 0 <= self.min_learning_rate_ratio <= 1:
            raise invalid("min_learning_rate_ratio", self.min_learning_rate_ratio, "a ratio in [0, 1]")


class NegativeSampler:
    """Draws noise words from ``P_n(w) ∝ count(w)^power`` with Walker's alias method: one uniform slot
    ``s`` and one coin per draw, the draw being ``s`` when the coin falls below ``threshold[s]`` and
    ``alias[s]`` otherwise (memory ``O(V)``, constant time per draw, the distribution exact)."""

    def __init__(self, vocab: Vocabulary, power: float = 0.75, generator: np.random.Generator | None = None):
        self.probabilities = vocab.noise_distribution(power)
        self.threshold, self.alias = alias_table(self.probabilities)  # (V,) each
        self.generator = generator if generator is not None else np.random.default_rng(0)

    def sample(self, shape: tuple[int, ...], generator: np.random.Generator | None = None) -> torch.Tensor:
        """``shape`` noise word ids (int64) drawn with ``generator`` (numpy's; the sampler's own when None)."""
        generator = generator if generator is not None else self.generator
        slot = generator.integers(len(self.alias), size=shape, dtype=np.int32)
        coin = generator.random(shape, dtype=np.float32)
        return torch.from_numpy(np.where(coin < self.threshold[slot], slot, self.alias[slot]))


def alias_table(probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias table of a distribution over ``V`` outcomes (Vose's construction): ``threshold (V,)``
    float32 and ``alias (V,)`` int64 such that slot ``s`` (chosen uniformly) gives ``s`` with probability
    ``threshold[s]`` and ``alias[s]`` otherwise."""
    scaled = np.asarray(probabilities, dtype=np.float64) * len(probabilities)
    threshold, alias = np.ones(len(scaled)), np.arange(len(scaled))
    small, large = list(np.flatnonzero(scaled < 1.0)), list(np.flatnonzero(scaled >= 1.0))
    while small and large:
        s, big = small.pop(), large.pop()
        threshold[s], alias[s] = scaled[s], big
        scaled[big] -= 1.0 - scaled[s]
        (small if scaled[big] < 1.0 else large).append(big)
    return threshold.astype(np.float32), alias.astype(np.int32)  # slots left in either list keep threshold 1


@dataclass
class Batch:
    """The centre words of one update and what they are scored against (``B`` centres).

    ``targets (B,)`` the centres; ``contexts (B, S)`` the words around each, the real ones first (padded with
    the centre itself, whose padded steps are zero), ``mask (B, S)`` which are real (at least one per row);
    ``rows (B, T)`` the output rows scored for each centre (its target and noise words, or the inner nodes of
    its Huffman path), ``labels (B, T)`` or ``(T,)`` their labels (1 the target, 0 a noise word, ``1 - d_j`` on
    a path) and ``valid (B, T)`` 1.0 on the real ones. CBOW also gets the real context words flat, ``inputs
    (I,)`` centre after centre, ``offsets (B,)`` where each centre's start in ``inputs``, and its centres come
    in decreasing number of context words, ``column_sizes[k]`` of them having more than ``k``: slot ``k`` of
    the first ``column_sizes[k]`` centres is real.
    """

    targets: torch.Tensor
    contexts: torch.Tensor
    mask: torch.Tensor
    rows: torch.Tensor
    labels: torch.Tensor
    valid: torch.Tensor
    inputs: torch.Tensor | None = None
    offsets: torch.Tensor | None = None
    column_sizes: list[int] | None = None

    def by_context_size(self) -> Batch:
        """The batch with its centres in decreasing number of context words (real slots first in each row)
        and CBOW's flat ``inputs``, ``offsets`` and ``column_sizes`` (the centres of a batch update together,
        so their order does not change the step)."""
        counts = self.mask.sum(1)  # (B,)
        order = torch.argsort(counts, descending=True, stable=True)
        counts, mask = counts[order], self.mask[order]
        real_first = torch.argsort((~mask).to(torch.uint8), dim=1, stable=True)  # (B, S)
        contexts, mask = self.contexts[order].gather(1, real_first), mask.gather(1, real_first)
        labels = self.labels[order] if self.labels.dim() == 2 else self.labels
        return Batch(self.targets[order], contexts, mask, self.rows[order], labels, self.valid[order],
                     inputs=contexts[mask], offsets=(counts.cumsum(0) - counts).to(contexts.dtype),
                     column_sizes=mask.sum(0).tolist())


@dataclass
class Chunk:
    """The centre words of one chunk that have at least one context word, cut into batches of ``batch_words``.

    The fields of :class:`Batch` for all ``C`` centres of the chunk (``contexts (C, S)`` padded to the chunk's
    most context words, ``rows (C, T)`` to its deepest Huffman path) plus, per batch, the raw words of the epoch
    read at its end (``raw_done``), its most context words (``widths``) and its deepest path (``depths``), so that
    :meth:`batch` trims each batch to its own sizes. Within a sorting window of batches, centres are ordered by
    their number of context words (then by Huffman path length), so that a batch pads to near-uniform widths.
    CBOW's ``inputs (I,)`` are the real context words centre after centre, ``starts (C,)`` where each centre's
    start relative to its batch, ``column_sizes`` per batch; a batch's centres come in decreasing number of
    context words.
    """

    targets: torch.Tensor
    contexts: torch.Tensor
    mask: torch.Tensor
    rows: torch.Tensor
    labels: torch.Tensor
    valid: torch.Tensor
    raw_done: np.ndarray
    widths: list[int]
    depths: list[int] | None
    batch_words: int
    inputs: torch.Tensor | None = None
    input_ends: np.ndarray | None = None  # (B + 1,) where each batch's context words start in ``inputs``
    starts: torch.Tensor | None = None
    column_sizes: list[list[int]] | None = None

    def batch(self, b: int) -> Batch:
        """The ``b``-th batch, its slots trimmed to its most context words and its paths to its deepest."""
        rows = slice(b * self.batch_words, (b + 1) * self.batch_words)
        width, columns = self.widths[b], slice(None, self.depths[b] if self.depths is not None else None)
        labels = self.labels[rows, columns] if self.labels.dim() == 2 else self.labels
        flat = {}
        if self.inputs is not None:
            flat_rows = slice(int(self.input_ends[b]), int(self.input_ends[b + 1]))
            flat = dict(inputs=self.inputs[flat_rows], offsets=self.starts[rows], column_sizes=self.column_sizes[b])
        return Batch(targets=self.targets[rows], contexts=self.contexts[rows, :width], mask=self.mask[rows, :width],
                     rows=self.rows[rows, columns], labels=labels, valid=self.valid[rows, columns], **flat)


class Word2VecTrainer:
    """Holds the two matrices of one word2vec model and trains them on an encoded corpus."""

    def __init__(self, vocab: Vocabulary, config: Word2VecConfig) -> None:
        self.vocab = vocab
        self.config = config
        self.generator = torch.Generator().manual_seed(config.seed)
        size, dim = len(vocab), config.vector_size
        self.dim = dim
        # word2vec.c: input vectors uniform in [-0.5/dim, 0.5/dim], output vectors zero
        self.input_vectors = (torch.rand(size, dim, generator=self.generator) - 0.5) / dim
        if config.loss == "negative_sampling":
            self.output_vectors = torch.zeros(size, dim)
            self.sampler = NegativeSampler(vocab, config.noise_power, np.random.default_rng([config.seed, 1]))
            self.noise_labels = torch.zeros(1 + config.negative)  # (1 + K,) the target, then the noise words
            self.noise_labels[0] = 1.0
        else:
            self.output_vectors = torch.zeros(size - 1, dim)
            nodes, codes, mask = build_huffman_tree(vocab.counts).padded()  # (V, L) each
            self.path_nodes, self.path_labels, self.path_mask = nodes.int(), 1.0 - codes, mask  # labels 1 - d_j
            self.path_lengths = mask.sum(1).long()  # (V,)
            self.path_lengths_np = self.path_lengths.numpy()
        self.keep_probabilities = vocab.keep_probabilities(config.sample, config.subsampling_formula).astype(np.float32)
        self._workspace = threading.local()  # per worker thread: the batch buffers (:meth:`_buffer`)

    # ------------------------------------------------------------------------------------------
    # Training loop
    # ------------------------------------------------------------------------------------------

    def train(self, corpus: EncodedCorpus, progress: bool = True) -> WordVectors:
        """Train ``epochs`` passes over ``corpus``; returns the input vectors as :class:`WordVectors`.

        Torch runs single-threaded meanwhile (its thread count is restored after): the batches are too small
        for its intra-op threads to pay. ``workers > 1`` Python threads instead train chunks concurrently on
        the shared matrices without locks (Hogwild, as word2vec.c's and gensim's threads do).
        """
        cfg = self.config
        check_window(cfg.window, corpus)
        bar = tqdm(total=len(corpus.ids) * cfg.epochs, unit="word", desc=f"word2vec {cfg.architecture}",
                   disable=not progress, mininterval=1.0)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(cfg.workers) if cfg.workers > 1 else nullcontext() as pool:
                for epoch in range(cfg.epochs):
                    self._train_epoch(corpus, epoch, pool, bar)
        finally:
            torch.set_num_threads(threads)
            bar.close()
        return self.word_vectors(copy=False)

    def _train_epoch(self, corpus: EncodedCorpus, epoch: int, pool: ThreadPoolExecutor | None, bar: tqdm) -> None:
        """Train the chunks of ``chunk_words`` raw words of one epoch (in ``pool``'s threads when given)."""
        cfg, size = self.config, len(corpus.ids)

        def train_chunk(index: int) -> tuple[float, int, int]:
            start, end = index * cfg.chunk_words, min((index + 1) * cfg.chunk_words, size)
            chunk = self._chunk(corpus, start, end, seed=(epoch, index))
            loss, count = 0.0, 0
            for b, raw_done in enumerate(chunk.raw_done):
                lr = self._learning_rate((epoch * size + raw_done) / (size * cfg.epochs))
                batch = chunk.batch(b)
                loss += self.step(batch, lr, with_loss=b == 0)  # the loss of each chunk's first batch, for the log
                count += (int(batch.mask.sum()) if cfg.architecture == "skipgram" else len(batch.targets)) * (b == 0)
            return loss, count, end

        indices = range(-(-size // cfg.chunk_words))
        loss_sum, loss_count, done = 0.0, 0, 0
        for loss, count, end in (pool.map(train_chunk, indices) if pool else map(train_chunk, indices)):
            loss_sum, loss_count = loss_sum + loss, loss_count + count
            bar.update(end - done)
            done = end
            bar.set_postfix(loss=f"{loss_sum / max(loss_count, 1):.4f}", refresh=False)
        logger.info("word2vec epoch %d: mean loss %.4f per prediction (first batch of each chunk)", epoch + 1, loss_sum / max(loss_count, 1))

    def word_vectors(self, copy: bool = True) -> WordVectors:
        """The input vectors as :class:`WordVectors`; ``copy=False`` shares the trainer's matrix (as gensim's
        ``wv.vectors`` is its model's), so that training's end allocates nothing."""
        metadata = {"method": "word2vec", **dataclasses.asdict(self.config),
                    "lowercase": self.vocab.lowercase, "tokenizer": self.vocab.tokenizer}
        return WordVectors(self.vocab.words, self.input_vectors.clone() if copy else self.input_vectors, counts=self.vocab.counts.tolist(),
                           metadata=metadata)

    def _learning_rate(self, fraction_done: float) -> float:
        cfg = self.config
        return cfg.learning_rate * max(1.0 - fraction_done, cfg.min_learning_rate_ratio)

    # ------------------------------------------------------------------------------------------
    # Examples of a chunk of centre words, drawn with array operations
    # ------------------------------------------------------------------------------------------

    def _chunk(self, corpus: EncodedCorpus, start: int, end: int, seed: tuple[int, int]) -> Chunk:
        """The raw words ``[start, end)`` of ``corpus``, subsampled, with the dynamic window of each kept
        centre (windows stop at the chunk's ends, as word2vec.c's at its 1000-word sentence cut) and its output
        rows. The draws come from generators seeded with ``(config.seed, *seed)``: the same whichever thread
        trains the chunk. Memory: ``O(chunk_words * window)``, whatever the corpus size."""
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, *seed])
        kept, ids, lo, counts = self._windows(corpus, start, end, rng)
        order = self._batch_order(np.flatnonzero(counts), counts, ids, rng)  # no context: skipped (word2vec.c)
        batch_of = np.arange(len(order)) // cfg.batch_words
        if cfg.architecture == "cbow":  # within each batch, most context words first
            order = order[np.argsort(batch_of * (2 * cfg.window + 1) - counts[order], kind="stable")]
        order = order.astype(np.int32)
        lo, counts = lo[order], counts[order]
        slot = np.arange(max(int(counts.max(initial=0)), 1), dtype=np.int32)  # (S,)
        offset = lo[:, None] + slot  # (C, S) the k-th real slot's distance from its centre, centre skipped
        offset += offset >= 0
        mask = slot < counts[:, None]  # (C, S) real slots first
        contexts = ids[order[:, None] + np.where(mask, offset, 0)]  # padded slots: the centre itself
        batch_starts = np.arange(0, len(order), cfg.batch_words)
        reduce = (lambda a: np.maximum.reduceat(a, batch_starts)) if len(order) else (lambda a: a[:0])
        targets = torch.from_numpy(ids[order])
        rows, labels, valid = self._output_rows(targets, rng=rng)  # (C, T) each
        depths = None
        if cfg.loss == "hierarchical_softmax":
            depths = reduce(self.path_lengths_np[ids[order]]).tolist()
        chunk = Chunk(targets=targets, contexts=torch.from_numpy(contexts), mask=torch.from_numpy(mask), rows=rows,
                      labels=labels, valid=valid, raw_done=reduce(kept[order]) + 1, widths=reduce(counts).tolist(),
                      depths=depths, batch_words=cfg.batch_words)
        if cfg.architecture == "cbow":  # context words flat, their offsets relative to their batch
            ends = np.cumsum(counts, dtype=np.int32)
            chunk.input_ends = np.append(0, ends[np.minimum(batch_starts + cfg.batch_words, len(order)) - 1])
            chunk.inputs = torch.from_numpy(contexts[mask])
            chunk.starts = torch.from_numpy((ends - counts - chunk.input_ends[batch_of]).astype(np.int32))
            sizes = np.add.reduceat(mask, batch_starts, axis=0) if len(order) else np.zeros((0, 1), dtype=int)
            chunk.column_sizes = [row[:width].tolist() for row, width in zip(sizes, chunk.widths, strict=True)]
        return chunk

    def _windows(self, corpus: EncodedCorpus, start: int, end: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, ...]:
        """The raw words ``[start, end)`` subsampled and the dynamic window of each kept one, ``(K,)`` each: raw
        positions, word ids, ``lo`` (<= 0, the first context word's distance) and number of context words.
        A sentence's kept words are consecutive: a context is the run ``[lo, lo + count]`` minus the centre,
        ``R ~ U{1..window}`` words each side at most, within the sentence and the chunk."""
        keep = rng.random(end - start, dtype=np.float32) < self.keep_probabilities[corpus.ids[start:end]]
        kept = start + np.flatnonzero(keep)  # (K,) raw positions of the kept words
        ids = corpus.ids[kept].astype(np.int32)  # (K,) word ids; int32 halves the chunk's index arrays
        sent = np.searchsorted(corpus.offsets, kept, side="right")  # (K,) sentence
        centres = np.arange(len(ids), dtype=np.int32)
        reach = rng.integers(1, self.config.window + 1, size=len(centres), dtype=np.int32)  # R per centre
        starts = np.flatnonzero(np.diff(sent, prepend=-1))  # (N,) where each sentence's kept words start
        lengths = np.diff(starts, append=len(sent))  # (N,)
        first = np.repeat(starts, lengths).astype(np.int32)  # (K,) the first kept word of each word's sentence
        lo = np.maximum(-reach, first - centres)
        counts = np.minimum(reach, first + np.repeat(lengths, lengths).astype(np.int32) - 1 - centres) - lo
        return kept, ids, lo, counts

    def _batch_order(self, centres: np.ndarray, counts: np.ndarray, ids: np.ndarray, rng: np.random.Generator
                     ) -> np.ndarray:
        """``centres (C,)`` reordered within each window of ``sort_batches`` batches: shuffled, then sorted by
        their number of context words (``counts``; skip-gram pads its slots) and by the length of their Huffman
        path (hierarchical softmax pads its paths), so that a batch pads to near-uniform widths. The centres of
        a batch update together from the same weights, so the shuffle keeps neighbouring centres, which share
        context words, mostly in different batches (CBOW with negative sampling pads nothing: it is only
        shuffled); only which centres share a batch changes, and only within the window."""
        window = np.arange(len(centres)) // (self.config.batch_words * self.config.sort_batches)
        keys = [rng.random(len(centres))]
        if self.config.loss == "hierarchical_softmax":
            keys.append(self.path_lengths_np[ids[centres]])
        if self.config.architecture == "skipgram":
            keys.append(counts[centres])
        return centres[np.lexsort((*keys, window))]

    def _output_rows(self, targets: torch.Tensor, negatives: torch.Tensor | None = None,
                     rng: np.random.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Output rows scored for each centre, ``(B, T)``: their ids, labels (1 for the target and 0 for a
        noise word, ``(T,)`` shared by all centres; ``1 - d_j`` on a Huffman path, ``(B, T)``) and whether they
        are real (1.0: word2vec.c skips a noise word equal to the target; a path is padded to the longest).
        Noise words are drawn here with ``rng`` (the sampler's own when None) unless ``negatives (B, K)`` are given."""
        if self.config.loss == "negative_sampling":
            if negatives is None:
                negatives = self.sampler.sample((len(targets), self.config.negative), rng)  # (B, K)
            rows = torch.cat([targets.unsqueeze(1), negatives], dim=1)  # (B, 1 + K)
            valid = rows != targets.unsqueeze(1)
            valid[:, 0] = True
            return rows, self.noise_labels, valid.float()
        depth = int(self.path_lengths.index_select(0, targets).max()) if len(targets) else 1
        return self.path_nodes[targets, :depth], self.path_labels[targets, :depth], self.path_mask[targets, :depth]

    # ------------------------------------------------------------------------------------------
    # One batch: gather, score, update
    # ------------------------------------------------------------------------------------------

    def update(self, contexts: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor, lr: float,
               negatives: torch.Tensor | None = None) -> float:
        """One batched SGD step on ``B`` centre words; returns the summed loss of their predictions.

        ``contexts (B, S)`` word ids around each centre, ``mask (B, S)`` which of them are real (at least one
        per row), ``targets (B,)`` the centres, ``negatives (B, K)`` their noise words (drawn here when None).
        Skip-gram: each real context word predicts its centre; CBOW: their mean does.
        """
        batch = Batch(targets, contexts, mask, *self._output_rows(targets, negatives))
        return self.step(batch.by_context_size() if self.config.architecture == "cbow" else batch, lr)

    def step(self, batch: Batch, lr: float, with_loss: bool = True) -> float:
        """:meth:`update` on a prepared :class:`Batch` (what training runs); returns the summed loss (0.0 when
        not ``with_loss``: training computes it on one batch per chunk, for the log)."""
        if self.config.architecture == "skipgram":
            return self._skipgram_step(batch, lr, with_loss)
        return self._cbow_step(batch, lr, with_loss)

    def _skipgram_step(self, batch: Batch, lr: float, with_loss: bool) -> float:
        """Every real context word of a centre predicts it: ``h (B, S, D)`` against the centre's ``T`` rows."""
        contexts, rows, (size, width), dim = batch.contexts, batch.rows.reshape(-1), batch.contexts.shape, self.dim
        h = torch.index_select(self.input_vectors, 0, contexts.reshape(-1), out=self._buffer("h", size * width))
        h = h.view(size, width, dim)  # (B, S, D)
        u = torch.index_select(self.output_vectors, 0, rows, out=self._buffer("u", len(rows))).view(size, -1, dim)
        logits = torch.bmm(h, u.transpose(1, 2))  # (B, S, T) every context word against every output row
        live = batch.mask.unsqueeze(2) * batch.valid.unsqueeze(1)  # (B, S, T) the real (example, row) pairs
        g, loss = self._errors(logits, batch.labels.unsqueeze(-2), live, lr, with_loss)  # (B, S, T)
        grad_h = torch.bmm(g, u, out=self._buffer("grad_h", size * width).view(size, width, dim))  # (B, S, D) e = sum g u
        if self.config.loss == "hierarchical_softmax":
            g.mul_(self._node_cap(batch.rows, batch.valid * batch.mask.sum(1, keepdim=True)).unsqueeze(1))
        torch.bmm(g.transpose(1, 2), h, out=u)  # (B, T, D) sum over the examples of g h, in u's place
        self.output_vectors.index_add_(0, rows, u.view(-1, dim))
        self.input_vectors.index_add_(0, contexts.reshape(-1), grad_h.view(-1, dim))  # padded slots add zeros
        return loss

    def _cbow_step(self, batch: Batch, lr: float, with_loss: bool) -> float:
        """The mean of a centre's context words predicts it: ``h (B, D)`` against the centre's ``T`` rows; the
        mean's error goes to each context word undivided (word2vec.c)."""
        rows, dim = batch.rows.reshape(-1), self.dim
        h = F.embedding_bag(batch.inputs, self.input_vectors, batch.offsets, mode="mean")  # (B, D)
        u = torch.index_select(self.output_vectors, 0, rows, out=self._buffer("u", len(rows))).view(len(h), -1, dim)
        logits = torch.bmm(h.unsqueeze(1), u.transpose(1, 2)).squeeze(1)  # (B, T); 5x faster than u @ h on a CPU
        g, loss = self._errors(logits, batch.labels, batch.valid, lr, with_loss)  # (B, T)
        grad_h = torch.bmm(g.unsqueeze(1), u, out=self._buffer("grad_h", len(h)).unsqueeze(1)).squeeze(1)  # (B, D) e = sum g u
        if self.config.loss == "hierarchical_softmax":
            g.mul_(self._node_cap(batch.rows, batch.valid))
        torch.mul(g.unsqueeze(2), h.unsqueeze(1), out=u)  # (B, T, D) g h, in u's place
        self.output_vectors.index_add_(0, rows, u.view(-1, dim))
        for k, size in enumerate(batch.column_sizes):  # slot k of the first `size` centres: their errors, no copy
            self.input_vectors.index_add_(0, batch.contexts[:size, k], grad_h[:size])
        return loss

    def _buffer(self, name: str, rows: int) -> torch.Tensor:
        """A ``(rows, D)`` float buffer of this thread, kept between batches and grown to the largest batch: the
        batch tensors of varying sizes otherwise leave the allocator holding freed memory (a third of the peak)
        and cost page faults."""
        buffer = getattr(self._workspace, name, None)
        if buffer is None or len(buffer) < rows:
            buffer = torch.empty(rows, self.dim)
            setattr(self._workspace, name, buffer)
        return buffer[:rows]

    def _errors(self, logits: torch.Tensor, labels: torch.Tensor, live: torch.Tensor, lr: float, with_loss: bool
                ) -> tuple[torch.Tensor, float]:
        """word2vec.c's ``g = lr (y - sigma(logit))`` on the real pairs (``live``; with hierarchical softmax
        also 0 on a node scored beyond ±MAX_EXP), same shape as ``logits``, and the summed loss (0.0 unless
        ``with_loss``)."""
        loss = -float(F.logsigmoid(logits * (2 * labels - 1)).mul_(live).sum()) if with_loss else 0.0
        g = torch.sigmoid(logits).neg_().add_(labels).mul_(live).mul_(lr)
        if self.config.loss == "hierarchical_softmax":
            g.mul_(logits.abs() < MAX_EXP)  # no step on a node scored beyond ±MAX_EXP
        return g, loss

    def _node_cap(self, nodes: torch.Tensor, hits: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` factor ``min(1, max_node_hits / n)`` of each Huffman node, ``n`` its examples in the batch
        (``hits (B, T)``: the examples of each centre that reach each node of its path)."""
        nodes = nodes.reshape(-1)
        per_node = torch.bincount(nodes, weights=hits.reshape(-1), minlength=len(self.output_vectors))
        return (self.config.max_node_hits / per_node.index_select(0, nodes)).clamp_(max=1.0).view(hits.shape).float()


def train_word2vec(train_files: str | Path | list, config: Word2VecConfig | None = None,
                   vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` (``vocab_kwargs``: ``min_count``, ``max_vocab_size``,
    ``lowercase``, ``tokenizer``) unless one is given, and train word2vec on them."""
    config = config or Word2VecConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    return Word2VecTrainer(vocab, config).train(corpus, progress=progress)
