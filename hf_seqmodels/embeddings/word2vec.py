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
    defaults (256 skip-gram, 512 CBOW) were the fastest per word on a 2-core AMD EPYC (skip-gram's batch
    temporaries, ``B x 2 window x D``, stay in cache; CBOW's are ``2 window`` times smaller, and its cost is
    per-batch overhead). ``sort_batches`` batches of centres are sorted together by context size (:meth:`
    Word2VecTrainer._batch_order`).
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
    batch_words: int | None = None  # None: 256 for skip-gram, 512 for CBOW
    max_node_hits: int = 64
    chunk_words: int = 4096
    sort_batches: int = 8
    workers: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ARCHITECTURES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("subsampling_formula", self.subsampling_formula, SUBSAMPLING_FORMULAS)
        if self.batch_words is None:
            self.batch_words = 512 if self.architecture == "cbow" else 256
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

    def __init__(self, vocab: Vocabulary, power: float = 0.75, generator: torch.Generator | None = None):
        self.probabilities = vocab.noise_distribution(power)
        threshold, alias = alias_table(self.probabilities)
        self.threshold, self.alias = torch.from_numpy(threshold), torch.from_numpy(alias)  # (V,) each
        self.generator = generator

    def sample(self, shape: tuple[int, ...], generator: torch.Generator | None = None) -> torch.Tensor:
        generator = generator or self.generator
        slot = torch.randint(len(self.alias), shape, generator=generator)
        coin = torch.rand(shape, generator=generator)
        return torch.where(coin < self.threshold[slot], slot, self.alias[slot])


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
    return threshold.astype(np.float32), alias  # slots left in either list keep threshold 1


@dataclass
class Chunk:
    """The centre words of one chunk that have at least one context word, grouped into batches.

    ``contexts (C, S)`` the words around each centre, the real ones first (``S <= 2 * window`` slots, ``counts
    (C,)`` real ones per centre), ``targets (C,)`` the centres, ``negatives (C, K)`` their noise words (negative
    sampling); ``raw_done (B,)`` raw words of the epoch read at the end of each batch of ``batch_words``
    centres. Within a sorting window of batches, centres are ordered by their number of context words (then
    by Huffman path length), so that each batch pads its slots to a near-uniform width.
    """

    contexts: torch.Tensor
    counts: np.ndarray
    targets: torch.Tensor
    raw_done: np.ndarray
    batch_words: int
    negatives: torch.Tensor | None = None

    def batch(self, b: int) -> dict[str, Any]:
        """The arguments of :meth:`Word2VecTrainer.update` for the ``b``-th batch, its slots trimmed to the
        batch's most context words."""
        rows = slice(b * self.batch_words, (b + 1) * self.batch_words)
        counts = self.counts[rows]
        width = int(counts.max())
        mask = np.arange(width)[None, :] < counts[:, None]  # (B, S_b) the real slots come first
        return dict(contexts=self.contexts[rows, :width], mask=torch.from_numpy(mask), targets=self.targets[rows],
                    slots=torch.from_numpy(np.flatnonzero(mask)),
                    negatives=None if self.negatives is None else self.negatives[rows])


class Word2VecTrainer:
    """Holds the two matrices of one word2vec model and trains them on an encoded corpus."""

    def __init__(self, vocab: Vocabulary, config: Word2VecConfig) -> None:
        self.vocab = vocab
        self.config = config
        self.generator = torch.Generator().manual_seed(config.seed)
        size, dim = len(vocab), config.vector_size
        # word2vec.c: input vectors uniform in [-0.5/dim, 0.5/dim], output vectors zero
        self.input_vectors = (torch.rand(size, dim, generator=self.generator) - 0.5) / dim
        if config.loss == "negative_sampling":
            self.output_vectors = torch.zeros(size, dim)
            self.sampler = NegativeSampler(vocab, config.noise_power, self.generator)
        else:
            self.output_vectors = torch.zeros(size - 1, dim)
            nodes, codes, mask = build_huffman_tree(vocab.counts).padded()  # (V, L) each
            self.path_nodes, self.path_labels, self.path_mask = nodes, 1.0 - codes, mask  # labels 1 - d_j
            self.path_lengths = mask.sum(1).long()  # (V,)
            self.path_lengths_np = self.path_lengths.numpy()
        self.keep_probabilities = vocab.keep_probabilities(config.sample, config.subsampling_formula).astype(np.float32)

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
            loss = 0.0
            for b, raw_done in enumerate(chunk.raw_done):
                lr = self._learning_rate((epoch * size + raw_done) / (size * cfg.epochs))
                loss += self.update(lr=lr, **chunk.batch(b))
            return loss, int(chunk.counts.sum()) if cfg.architecture == "skipgram" else len(chunk.targets), end

        indices = range(-(-size // cfg.chunk_words))
        loss_sum, loss_count, done = 0.0, 0, 0
        for loss, count, end in (pool.map(train_chunk, indices) if pool else map(train_chunk, indices)):
            loss_sum, loss_count = loss_sum + loss, loss_count + count
            bar.update(end - done)
            done = end
            bar.set_postfix(loss=f"{loss_sum / max(loss_count, 1):.4f}", refresh=False)
        logger.info("word2vec epoch %d: mean loss %.4f per prediction", epoch + 1, loss_sum / max(loss_count, 1))

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
        centre (windows stop at the chunk's ends, as word2vec.c's at its 1000-word sentence cut) and its noise
        words. The draws come from generators seeded with ``(config.seed, *seed)``: the same whichever
        thread trains the chunk. Memory: ``O(chunk_words * window)``, whatever the corpus size."""
        cfg, w = self.config, self.config.window
        rng = np.random.default_rng([cfg.seed, *seed])
        keep = rng.random(end - start, dtype=np.float32) < self.keep_probabilities[corpus.ids[start:end]]
        kept = start + np.flatnonzero(keep)  # (K,) raw positions of the kept words
        ids, sent = corpus.ids[kept], np.searchsorted(corpus.offsets, kept, side="right")  # (K,) word, sentence
        centres = np.arange(len(ids), dtype=np.int32)
        reach = rng.integers(1, w + 1, size=len(centres), dtype=np.int32)  # R ~ U{1..window}, per centre
        offsets = np.concatenate([np.arange(-w, 0), np.arange(1, w + 1)]).astype(np.int32)  # (S,)
        positions = np.clip(centres[:, None] + offsets[None, :], 0, max(len(ids) - 1, 0))  # (C, S)
        # in the window (a position clipped to the corpus ends lies outside it) and in the centre's sentence
        mask = ((positions - centres[:, None] == offsets[None, :]) & (np.abs(offsets)[None, :] <= reach[:, None])
                & (sent[positions] == sent[centres][:, None]))
        counts = mask.sum(1)
        order = self._batch_order(np.flatnonzero(counts), counts, ids)  # word2vec.c skips a centre with no context
        centres, mask, positions, counts = order, mask[order], positions[order], counts[order]
        real_first = np.argsort(~mask, axis=1, kind="stable")[:, :max(int(counts.max(initial=0)), 1)]  # (C, S')
        batch_starts = np.arange(0, len(centres), cfg.batch_words)
        raw_done = (np.maximum.reduceat(kept[centres], batch_starts) + 1 if len(centres)
                    else np.zeros(0, dtype=np.int64))
        targets = torch.from_numpy(ids[centres])
        negatives = None
        if cfg.loss == "negative_sampling":
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            negatives = self.sampler.sample((len(targets), cfg.negative), generator)  # (C, K) for the whole chunk
        contexts = torch.from_numpy(ids[np.take_along_axis(positions, real_first, 1)])
        return Chunk(contexts=contexts, counts=counts, targets=targets, raw_done=raw_done,
                     batch_words=cfg.batch_words, negatives=negatives)

    def _batch_order(self, centres: np.ndarray, counts: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``centres (C,)`` reordered within each window of ``sort_batches`` batches by their number of context
        words (``counts``), then by the length of their Huffman path (hierarchical softmax), so that a batch's
        slots and paths pad to near-uniform widths. The centres of a batch update together, so only which
        centres share a batch changes, and only within the window."""
        window = np.arange(len(centres)) // (self.config.batch_words * self.config.sort_batches)
        depth = self.path_lengths_np[ids[centres]] if self.config.loss == "hierarchical_softmax" else 0
        return centres[np.lexsort((depth * np.ones_like(centres), counts[centres], window))]

    # ------------------------------------------------------------------------------------------
    # One batch: gather, score, update
    # ------------------------------------------------------------------------------------------

    def update(self, contexts: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor, lr: float,
               negatives: torch.Tensor | None = None, slots: torch.Tensor | None = None) -> float:
        """One batched SGD step on ``B`` centre words; returns the summed loss of their predictions.

        ``contexts (B, S)`` word ids around each centre, ``mask (B, S)`` which of them are real (at least one
        per row), ``targets (B,)`` the centres, ``negatives (B, K)`` their noise words (drawn here when None),
        ``slots (I,)`` the flat indices of ``mask``'s real entries (found here when None).
        Skip-gram: each real context word predicts its centre; CBOW: their mean does.
        """
        rows, labels, valid = self._output_rows(targets, negatives)  # (B, T) each
        u = self.output_vectors.index_select(0, rows.flatten()).view(*rows.shape, -1)  # (B, T, D)
        if self.config.architecture == "skipgram":
            h = self.input_vectors.index_select(0, contexts.flatten()).view(*contexts.shape, -1)  # (B, S, D)
            examples = mask.to(h.dtype)  # (B, S) each real context word is one example
        else:
            if slots is None:
                slots = mask.flatten().nonzero().squeeze(1)  # (I,)
            inputs = contexts.flatten().index_select(0, slots)  # (I,) the real context words
            counts = mask.sum(1)  # (B,) context words per centre
            h = F.embedding_bag(inputs, self.input_vectors, counts.cumsum(0) - counts, mode="mean").unsqueeze(1)
            examples = h.new_ones(len(h), 1)  # (B, 1) one example per centre, the mean of its context
        logits = torch.bmm(h, u.transpose(1, 2))  # (B, S', T) every example against every output row
        live = examples.unsqueeze(2) * valid.unsqueeze(1)  # (B, S', T) the real (example, row) pairs
        loss = float((F.logsigmoid((2 * labels - 1).unsqueeze(1) * logits) * live).sum())
        g = torch.sigmoid(logits).neg_().add_(labels.unsqueeze(1)).mul_(live).mul_(lr)  # word2vec.c's g
        if self.config.loss == "hierarchical_softmax":
            g.mul_(logits.abs() < MAX_EXP)  # no step on a node scored beyond ±MAX_EXP
        del logits, live
        grad_h = torch.bmm(g, u)  # (B, S', D) e = sum g u; zero on padded slots (their g is 0)
        del u  # each temporary goes as soon as it is used: the batch's peak memory is about three of them
        if self.config.architecture == "skipgram":
            grad_u = torch.bmm(g.transpose(1, 2), h)  # (B, T, D) sum over the examples of g h
        else:
            grad_u = g.transpose(1, 2) * h  # (B, T, D) g h: one example, an outer product
        del h
        if self.config.loss == "hierarchical_softmax":
            grad_u.mul_(self._node_cap(rows, valid * examples.sum(1, keepdim=True)).unsqueeze(2))
        self.output_vectors.index_add_(0, rows.flatten(), grad_u.flatten(0, 1))
        del grad_u
        if self.config.architecture == "skipgram":  # padded slots add zero rows
            self.input_vectors.index_add_(0, contexts.flatten(), grad_h.flatten(0, 1))
        else:  # word2vec.c: the mean's error goes to each context word undivided
            self.input_vectors.index_add_(0, inputs, grad_h.squeeze(1).index_select(0, slots // contexts.shape[1]))
        return -loss

    def _output_rows(self, targets: torch.Tensor, negatives: torch.Tensor | None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Output rows scored for each centre, ``(B, T)`` each: their ids, labels (1 for the target and 0 for
        a noise word; ``1 - d_j`` on a Huffman path) and whether they are real (word2vec.c skips a noise word
        equal to the target; a path is padded to the longest in the batch)."""
        if self.config.loss == "negative_sampling":
            if negatives is None:
                negatives = self.sampler.sample((len(targets), self.config.negative))  # (B, K)
            rows = torch.cat([targets.unsqueeze(1), negatives], dim=1)  # (B, 1 + K)
            labels = torch.zeros(rows.shape)
            labels[:, 0] = 1.0
            return rows, labels, (rows != targets.unsqueeze(1)).index_fill_(1, torch.tensor([0]), True).float()
        depth = int(self.path_lengths.index_select(0, targets).max())
        return (self.path_nodes[targets, :depth], self.path_labels[targets, :depth], self.path_mask[targets, :depth])

    def _node_cap(self, nodes: torch.Tensor, hits: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` factor ``min(1, max_node_hits / n)`` of each Huffman node, ``n`` its examples in the batch
        (``hits (B, T)``: the examples of each centre that reach each node of its path)."""
        per_node = torch.zeros(len(self.output_vectors)).index_add_(0, nodes.flatten(), hits.flatten())
        return (self.config.max_node_hits / per_node.index_select(0, nodes.flatten())).clamp_(max=1.0).view(nodes.shape)


def train_word2vec(train_files: str | Path | list, config: Word2VecConfig | None = None,
                   vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` (``vocab_kwargs``: ``min_count``, ``max_vocab_size``,
    ``lowercase``, ``tokenizer``) unless one is given, and train word2vec on them."""
    config = config or Word2VecConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    return Word2VecTrainer(vocab, config).train(corpus, progress=progress)
