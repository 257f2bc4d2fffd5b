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

Training walks the corpus centre after centre as word2vec.c does (:mod:`.word2vec_steps`, compiled), in
chunks of ``chunk_words`` raw words whose subsampling, dynamic windows and noise words are drawn at once with
array operations (windows stop at a chunk's ends). ``workers`` threads train chunks concurrently.
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
from tqdm.auto import tqdm

from ..models.config_utils import PresetMixin, check_choice, invalid
from .huffman import build_huffman_tree
from .keyed_vectors import WordVectors
from .vocabulary import SUBSAMPLING_FORMULAS, EncodedCorpus, Vocabulary, check_window
from .word2vec_steps import train_run

logger = logging.getLogger(__name__)

ARCHITECTURES = ("cbow", "skipgram")
LOSSES = ("negative_sampling", "hierarchical_softmax")
LOSS_CENTRES = 1024  # the training log's loss: the predictions of each chunk's first centres


@dataclass
class Word2VecConfig(PresetMixin):
    """Settings of a word2vec run; defaults are word2vec.c's (learning rate 0.025 skip-gram, 0.05 CBOW).

    ``workers`` threads train chunks of ``chunk_words`` raw words concurrently (1: reproducible).

    ``Word2VecConfig.from_preset(name, **overrides)``: ``tiny`` (tests), ``word2vec-c-skipgram`` and
    ``word2vec-c-cbow`` (word2vec.c's defaults with ``-cbow 0``/``1``, its subsampling formula),
    ``mikolov2013-negative`` and ``mikolov2013-hierarchical`` (Mikolov et al. 2013, "Distributed
    Representations of Words and Phrases": 300 dimensions, window 5, subsampling threshold 1e-5, 15 noise
    words or the Huffman-tree softmax).
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(vector_size=16, window=3, sample=0.0, epochs=3),  # no subsampling on tiny text
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
    chunk_words: int = 16384
    workers: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ARCHITECTURES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("subsampling_formula", self.subsampling_formula, SUBSAMPLING_FORMULAS)
        for name in ("vector_size", "window", "epochs", "chunk_words", "workers"):
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

    def sample(self, shape: tuple[int, ...], generator: np.random.Generator | None = None) -> np.ndarray:
        """``shape`` noise word ids (int32) drawn with ``generator`` (numpy's; the sampler's own when None)."""
        generator = generator if generator is not None else self.generator
        slot = generator.integers(len(self.alias), size=shape, dtype=np.int32)
        coin = generator.random(shape, dtype=np.float32)
        return np.where(coin < self.threshold[slot], slot, self.alias[slot])


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
        self.hierarchical = config.loss == "hierarchical_softmax"
        if self.hierarchical:
            self.output_vectors = torch.zeros(size - 1, dim)
            nodes, codes, mask = build_huffman_tree(vocab.counts).padded()  # (V, L) each
            self.path_nodes = nodes.numpy().astype(np.int32)
            self.path_labels = (1.0 - codes).numpy().astype(np.float32)  # 1 - d_j
            self.path_lengths = mask.sum(1).numpy().astype(np.int32)  # (V,)
        else:
            self.output_vectors = torch.zeros(size, dim)
            self.sampler = NegativeSampler(vocab, config.noise_power, np.random.default_rng([config.seed, 1]))
            # no paths: placeholders of the kernel's types
            self.path_nodes, self.path_labels = np.zeros((1, 1), np.int32), np.zeros((1, 1), np.float32)
            self.path_lengths = np.zeros(1, np.int32)
        self.keep_probabilities = vocab.keep_probabilities(config.sample, config.subsampling_formula).astype(np.float32)

    # ------------------------------------------------------------------------------------------
    # Training loop
    # ------------------------------------------------------------------------------------------

    def train(self, corpus: EncodedCorpus, progress: bool = True) -> WordVectors:
        """Train ``epochs`` passes over ``corpus``; returns the input vectors as :class:`WordVectors`.

        ``workers > 1`` Python threads train chunks concurrently on the shared matrices without locks
        (Hogwild, as word2vec.c's and gensim's threads do): the compiled steps release the GIL.
        """
        cfg = self.config
        check_window(cfg.window, corpus)
        bar = tqdm(total=len(corpus.ids) * cfg.epochs, unit="word", desc=f"word2vec {cfg.architecture}",
                   disable=not progress, mininterval=1.0)
        try:
            with ThreadPoolExecutor(cfg.workers) if cfg.workers > 1 else nullcontext() as pool:
                for epoch in range(cfg.epochs):
                    self._train_epoch(corpus, epoch, pool, bar)
        finally:
            bar.close()
        return self.word_vectors(copy=False)

    def _train_epoch(self, corpus: EncodedCorpus, epoch: int, pool: ThreadPoolExecutor | None, bar: tqdm) -> None:
        """Train the chunks of ``chunk_words`` raw words of one epoch (in ``pool``'s threads when given)."""
        cfg, size = self.config, len(corpus.ids)

        def train_chunk(index: int) -> tuple[float, int, int]:
            start, end = index * cfg.chunk_words, min((index + 1) * cfg.chunk_words, size)
            loss, count = self._train_chunk(corpus, start, end, epoch, seed=(epoch, index))
            return loss, count, end

        indices = range(-(-size // cfg.chunk_words))
        loss_sum, loss_count, done = 0.0, 0, 0
        for loss, count, end in (pool.map(train_chunk, indices) if pool else map(train_chunk, indices)):
            loss_sum, loss_count = loss_sum + loss, loss_count + count
            bar.update(end - done)
            done = end
            bar.set_postfix(loss=f"{loss_sum / max(loss_count, 1):.4f}", refresh=False)
        logger.info("word2vec epoch %d: mean loss %.4f per prediction (first %d centres of each chunk)", epoch + 1,
                    loss_sum / max(loss_count, 1), LOSS_CENTRES)

    def _train_chunk(self, corpus: EncodedCorpus, start: int, end: int, epoch: int, seed: tuple[int, int]
                     ) -> tuple[float, int]:
        """Train on the raw words ``[start, end)`` of ``corpus`` in epoch ``epoch``: subsampled, with the dynamic
        window of each kept centre (windows stop at the chunk's ends, as word2vec.c's at its 1000-word sentence
        cut), each centre's learning rate decayed by its raw position, and the noise words of its predictions.
        The draws come from generators seeded with ``(config.seed, *seed)``: the same whichever thread trains
        the chunk. Memory: ``O(chunk_words * negative)``, whatever the corpus size. Returns the summed loss of
        the first ``LOSS_CENTRES`` centres' predictions and their number."""
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, *seed])
        kept, ids, lo, counts = self._windows(corpus, start, end, rng)
        done = (epoch * len(corpus.ids) + kept) / (len(corpus.ids) * cfg.epochs)  # (K,) fraction of training
        rates = (cfg.learning_rate * np.maximum(1.0 - done, cfg.min_learning_rate_ratio)).astype(np.float32)
        return self.update(ids, lo, counts, rates, noise=None, rng=rng, loss_centres=LOSS_CENTRES)

    def update(self, ids: np.ndarray, lo: np.ndarray, counts: np.ndarray, lr: float | np.ndarray,
               noise: np.ndarray | None = None, rng: np.random.Generator | None = None,
               loss_centres: int | None = None) -> tuple[float, int]:
        """word2vec.c's steps on one run of words ``ids (K,)``, centre after centre; returns the summed loss of
        the predictions of the first ``loss_centres`` centres (all when None) and their number.

        Centre ``i``'s context words are ``ids[i + lo[i] : i + lo[i] + counts[i] + 1]`` without itself
        (``lo (K,) <= 0``, ``counts (K,)``; a centre with no context is skipped); ``lr`` one learning rate or one
        per centre. With negative sampling, ``noise (P, negative)`` gives the noise words of the ``P``
        predictions in order (skip-gram: one per context word of each centre; CBOW: one per centre with
        context), drawn from the noise distribution with ``rng`` (the sampler's own when None) if not given.
        """
        ids, lo, counts = (np.ascontiguousarray(a, dtype=np.int32) for a in (ids, lo, counts))
        rates = np.broadcast_to(np.asarray(lr, dtype=np.float32), ids.shape)
        skipgram = self.config.architecture == "skipgram"
        if self.hierarchical:
            noise = np.zeros((0, 0), np.int32)
        else:
            predictions = int(counts.sum()) if skipgram else int(np.count_nonzero(counts))
            if noise is None:
                noise = self.sampler.sample((predictions, self.config.negative), rng)
            noise = np.ascontiguousarray(noise, dtype=np.int32)
            if noise.shape != (predictions, self.config.negative):
                raise invalid("noise", f"an array of shape {tuple(noise.shape)}",
                              f"shape ({predictions}, {self.config.negative}): `negative` noise words per prediction")
        loss, count = train_run(self.input_vectors.numpy(), self.output_vectors.numpy(), ids, lo, counts,
                                np.ascontiguousarray(rates), noise, self.path_nodes, self.path_labels,
                                self.path_lengths, skipgram, self.hierarchical,
                                len(ids) if loss_centres is None else loss_centres)
        return float(loss), int(count)

    def word_vectors(self, copy: bool = True) -> WordVectors:
        """The input vectors as :class:`WordVectors`; ``copy=False`` shares the trainer's matrix (as gensim's
        ``wv.vectors`` is its model's), so that training's end allocates nothing."""
        metadata = {"method": "word2vec", **dataclasses.asdict(self.config),
                    "lowercase": self.vocab.lowercase, "tokenizer": self.vocab.tokenizer}
        return WordVectors(self.vocab.words, self.input_vectors.clone() if copy else self.input_vectors,
                           counts=self.vocab.counts.tolist(), metadata=metadata)

    def _windows(self, corpus: EncodedCorpus, start: int, end: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, ...]:
        """The raw words ``[start, end)`` subsampled and the dynamic window of each kept one, ``(K,)`` each: raw
        positions, word ids, ``lo`` (<= 0, the first context word's distance) and number of context words.
        A sentence's kept words are consecutive: a context is the run ``[lo, lo + count]`` minus the centre,
        ``R ~ U{1..window}`` words each side at most, within the sentence and the chunk."""
        keep = rng.random(end - start, dtype=np.float32) < self.keep_probabilities[corpus.ids[start:end]]
        kept = start + np.flatnonzero(keep)  # (K,) raw positions of the kept words
        ids = corpus.ids[kept].astype(np.int32)  # (K,) word ids
        sent = np.searchsorted(corpus.offsets, kept, side="right")  # (K,) sentence
        centres = np.arange(len(ids), dtype=np.int32)
        reach = rng.integers(1, self.config.window + 1, size=len(centres), dtype=np.int32)  # R per centre
        starts = np.flatnonzero(np.diff(sent, prepend=-1))  # (N,) where each sentence's kept words start
        lengths = np.diff(starts, append=len(sent))  # (N,)
        first = np.repeat(starts, lengths).astype(np.int32)  # (K,) the first kept word of each word's sentence
        lo = np.maximum(-reach, first - centres)
        counts = np.minimum(reach, first + np.repeat(lengths, lengths).astype(np.int32) - 1 - centres) - lo
        return kept, ids, lo, counts


def train_word2vec(train_files: str | Path | list, config: Word2VecConfig | None = None,
                   vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` (``vocab_kwargs``: ``min_count``, ``max_vocab_size``,
    ``lowercase``, ``tokenizer``) unless one is given, and train word2vec on them."""
    config = config or Word2VecConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    return Word2VecTrainer(vocab, config).train(corpus, progress=progress)
