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
matrix, so the updates of a row within a batch add up. That is word2vec.c's sum of steps except for
rows hit many times in one batch: the Huffman nodes near the root lie on nearly every path. A node's
summed update is therefore capped at ``max_node_hits`` steps' worth (a node hit :math:`n` times moves by
its summed update times :math:`\\min(1, \\text{max\\_node\\_hits} / n)`); nodes hit fewer times move
exactly as in word2vec.c. Subsampling, the dynamic windows and the noise words of
``chunk_words`` centre words are drawn at once, with array operations.
"""

from __future__ import annotations

import dataclasses
import logging
import math
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
    of a few dozen words a frequent row gets many at once, so use a small value there (e.g. 64).
    ``max_node_hits`` caps the summed update of a Huffman node within a batch (module docstring).

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
    batch_words: int = 512
    max_node_hits: int = 64
    chunk_words: int = 16384
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ARCHITECTURES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("subsampling_formula", self.subsampling_formula, SUBSAMPLING_FORMULAS)
        for name in ("vector_size", "window", "epochs", "batch_words", "max_node_hits", "chunk_words"):
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
    """Draws noise words from ``P_n(w) ∝ count(w)^power`` by inverting its cumulative distribution
    (a uniform draw located among the ``V`` cumulative sums, as gensim's ``cum_table``; memory ``O(V)``)."""

    def __init__(self, vocab: Vocabulary, power: float = 0.75, generator: torch.Generator | None = None):
        self.probabilities = vocab.noise_distribution(power)
        self.cumulative = torch.from_numpy(np.cumsum(self.probabilities))  # (V,) float64, last 1.0
        self.generator = generator

    def sample(self, shape: tuple[int, ...]) -> torch.Tensor:
        draws = torch.rand(shape, generator=self.generator, dtype=torch.float64)
        return torch.searchsorted(self.cumulative, draws, right=True).clamp_(max=len(self.cumulative) - 1)


@dataclass
class Chunk:
    """The training examples of ``chunk_words`` consecutive kept centre words, in centre order.

    ``inputs (I,)`` input word ids; example ``n`` reads ``inputs[input_starts[n]:input_starts[n + 1]]`` (one
    context word with skip-gram, all context words of a centre with CBOW) and predicts ``targets[n]``
    (``(N,)``, the centre word); ``starts (B+1,)`` the first example of each batch; ``raw_done (B,)`` raw
    words of the epoch read at the end of each batch.
    """

    inputs: torch.Tensor
    input_starts: torch.Tensor  # (N+1,) first input of each example
    targets: torch.Tensor
    starts: np.ndarray
    raw_done: np.ndarray
    negatives: torch.Tensor | None = None  # (N, K) pre-drawn noise words (negative sampling)


class Word2VecTrainer:
    """Holds the two matrices of one word2vec model and trains them on an encoded corpus."""

    def __init__(self, vocab: Vocabulary, config: Word2VecConfig) -> None:
        self.vocab = vocab
        self.config = config
        self.generator = torch.Generator().manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed)
        size, dim = len(vocab), config.vector_size
        # word2vec.c: input vectors uniform in [-0.5/dim, 0.5/dim], output vectors zero
        self.input_vectors = (torch.rand(size, dim, generator=self.generator) - 0.5) / dim
        if config.loss == "negative_sampling":
            self.output_vectors = torch.zeros(size, dim)
            self.sampler = NegativeSampler(vocab, config.noise_power, self.generator)
        else:
            self.output_vectors = torch.zeros(size - 1, dim)
            tree = build_huffman_tree(vocab.counts)
            lengths = torch.tensor([len(p) for p in tree.points])
            self.path_starts = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])  # (V+1,)
            self.path_nodes = torch.tensor([n for p in tree.points for n in p])  # (sum of depths,)
            self.path_labels = 1.0 - torch.tensor([float(c) for c in tree.codes for c in c])  # 1 - d_j
        self.keep_probabilities = vocab.keep_probabilities(config.sample, config.subsampling_formula)
        self._buffers: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------------------------------
    # Training loop
    # ------------------------------------------------------------------------------------------

    def train(self, corpus: EncodedCorpus, progress: bool = True) -> WordVectors:
        cfg = self.config
        check_window(cfg.window, corpus)
        sentence = corpus.sentence_index()
        total = len(corpus.ids) * cfg.epochs
        bar = tqdm(total=total, unit="word", desc=f"word2vec {cfg.architecture}", disable=not progress,
                   mininterval=1.0)
        for epoch in range(cfg.epochs):
            kept = np.flatnonzero(self.rng.random(len(corpus.ids)) < self.keep_probabilities[corpus.ids])
            ids, sent = corpus.ids[kept], sentence[kept]
            loss_sum, loss_count, done_before = 0.0, 0, 0
            for start in range(0, len(ids), cfg.chunk_words):
                chunk = self._chunk(ids, sent, kept, start, min(start + cfg.chunk_words, len(ids)))
                for b in range(len(chunk.starts) - 1):
                    lr = self._learning_rate((epoch * len(corpus.ids) + chunk.raw_done[b]) / total)
                    loss, count = self._train_batch(chunk, int(chunk.starts[b]), int(chunk.starts[b + 1]), lr)
                    loss_sum, loss_count = loss_sum + loss, loss_count + count
                bar.update(int(chunk.raw_done[-1]) - done_before)
                done_before = int(chunk.raw_done[-1])
                bar.set_postfix(loss=f"{loss_sum / max(loss_count, 1):.4f}", lr=f"{lr:.5f}", refresh=False)
            bar.update(len(corpus.ids) - done_before)
            logger.info("word2vec epoch %d: mean loss %.4f per prediction", epoch + 1, loss_sum / max(loss_count, 1))
        bar.close()
        return self.word_vectors()

    def word_vectors(self) -> WordVectors:
        metadata = {"method": "word2vec", **dataclasses.asdict(self.config),
                    "lowercase": self.vocab.lowercase, "tokenizer": self.vocab.tokenizer}
        return WordVectors(self.vocab.words, self.input_vectors.clone(), counts=self.vocab.counts.tolist(),
                           metadata=metadata)

    def _learning_rate(self, fraction_done: float) -> float:
        cfg = self.config
        return cfg.learning_rate * max(1.0 - fraction_done, cfg.min_learning_rate_ratio)

    # ------------------------------------------------------------------------------------------
    # Examples of a chunk of centre words, drawn with array operations
    # ------------------------------------------------------------------------------------------

    def _chunk(self, ids: np.ndarray, sent: np.ndarray, kept: np.ndarray, start: int, end: int) -> Chunk:
        """Dynamic windows of the kept centres ``[start, end)``, the examples they give and their noise words."""
        cfg, w = self.config, self.config.window
        centres = np.arange(start, end)
        reach = self.rng.integers(1, w + 1, size=len(centres))  # R ~ U{1..window}, per centre
        offsets = np.concatenate([np.arange(-w, 0), np.arange(1, w + 1)])
        positions = centres[:, None] + offsets[None, :]  # (C, 2w)
        clipped = np.clip(positions, 0, len(ids) - 1)
        mask = ((positions >= 0) & (positions < len(ids)) & (np.abs(offsets)[None, :] <= reach[:, None])
                & (sent[clipped] == sent[centres][:, None]))  # (C, 2w) in the window and the same sentence
        centre_of, slot = np.nonzero(mask)  # (I,) each context word, grouped by centre
        inputs = torch.from_numpy(ids[clipped[centre_of, slot]])
        per_centre = mask.sum(1)  # (C,)
        batch_centres = np.append(np.arange(0, len(centres), cfg.batch_words), len(centres))  # (B+1,)
        raw_done = kept[centres[batch_centres[1:] - 1]] + 1  # raw words of the epoch read after each batch
        context_starts = np.concatenate([[0], np.cumsum(per_centre)])  # (C+1,)
        if cfg.architecture == "skipgram":  # one example per (context, centre) pair
            input_starts = torch.arange(len(inputs) + 1)
            targets, starts = ids[centres[centre_of]], context_starts[batch_centres]
        else:  # CBOW: one example per centre with at least one context word
            has_context = per_centre > 0
            example_starts = np.concatenate([[0], np.cumsum(has_context)])  # (C+1,) examples before each centre
            input_starts = torch.from_numpy(context_starts[np.append(np.flatnonzero(has_context), len(centres))])
            targets, starts = ids[centres[has_context]], example_starts[batch_centres]
        targets = torch.from_numpy(targets)
        negatives = None
        if cfg.loss == "negative_sampling":
            negatives = self.sampler.sample((len(targets), cfg.negative))  # (N, K) drawn for the whole chunk
        return Chunk(inputs=inputs, input_starts=input_starts, targets=targets, starts=starts, raw_done=raw_done,
                     negatives=negatives)

    # ------------------------------------------------------------------------------------------
    # One batch: gather, score, update
    # ------------------------------------------------------------------------------------------

    def _train_batch(self, chunk: Chunk, first: int, last: int, lr: float) -> tuple[float, int]:
        """Examples ``[first, last)`` of ``chunk``: one SGD step of both matrices; returns (summed loss, count)."""
        if last <= first:
            return 0.0, 0
        a, b = int(chunk.input_starts[first]), int(chunk.input_starts[last])
        negatives = None if chunk.negatives is None else chunk.negatives[first:last]
        return self.update(chunk.inputs[a:b], chunk.input_starts[first:last + 1] - a, chunk.targets[first:last], lr,
                           negatives), last - first

    def update(self, inputs: torch.Tensor, input_starts: torch.Tensor, targets: torch.Tensor, lr: float,
               negatives: torch.Tensor | None = None) -> float:
        """One batched SGD step on ``N`` examples; returns their summed loss.

        Example ``n`` predicts ``targets[n]`` from the input words ``inputs[input_starts[n]:input_starts[n + 1]]``
        (one word with skip-gram, the context words with CBOW); ``inputs (I,)``, ``input_starts (N+1,)``,
        ``targets (N,)``; ``negatives (N, K)`` the noise words (drawn here when None).
        """
        offsets = input_starts[:-1]  # (N,)
        if self.config.architecture == "skipgram":
            h = self.input_vectors.index_select(0, inputs)  # (N, D) the context word
        else:
            h = F.embedding_bag(inputs, self.input_vectors, offsets, mode="mean")  # (N, D) mean of the context
        if self.config.loss == "negative_sampling":
            grad_h, loss = self._negative_sampling_step(h, targets, lr, negatives)
        else:
            grad_h, loss = self._hierarchical_softmax_step(h, targets, lr)
        if self.config.architecture == "cbow":  # word2vec.c: the mean's error goes to each context word undivided
            grad_h = torch.repeat_interleave(grad_h, input_starts.diff(), dim=0)  # (I, D)
        self.input_vectors.index_add_(0, inputs, grad_h)
        return loss

    def _negative_sampling_step(self, h: torch.Tensor, target: torch.Tensor, lr: float,
                                negatives: torch.Tensor | None) -> tuple[torch.Tensor, float]:
        """Inputs ``h (N, D)``, targets ``(N,)``: updates ``output_vectors``, returns the error ``e (N, D)``."""
        if negatives is None:
            negatives = self.sampler.sample((len(target), self.config.negative))  # (N, K)
        rows = torch.cat([target.unsqueeze(1), negatives], dim=1)  # (N, T) T = 1 + K
        shape = (*rows.shape, h.shape[1])  # (N, T, D)
        u = torch.index_select(self.output_vectors, 0, rows.flatten(),
                               out=self._scratch("u", (rows.numel(), shape[2]))).view(shape)
        product = torch.mul(u, h.unsqueeze(1), out=self._scratch("product", shape))  # (N, T, D)
        logits = product.sum(-1)  # (N, T)
        labels = torch.zeros(rows.shape)
        labels[:, 0] = 1.0
        loss = float(-F.logsigmoid((2 * labels - 1) * logits).sum())
        g = (labels - torch.sigmoid(logits)).mul_(lr)  # (N, T) word2vec.c's g
        g[:, 1:].mul_(negatives != target.unsqueeze(1))  # word2vec.c skips a noise word equal to the target
        grad_h = torch.bmm(g.unsqueeze(1), u).squeeze(1)  # (N, D) e = sum g u
        update = torch.mul(g.unsqueeze(2), h.unsqueeze(1), out=product)  # (N, T, D) g h per row
        self.output_vectors.index_add_(0, rows.flatten(), update.flatten(0, 1))
        return grad_h, loss

    def _hierarchical_softmax_step(self, h: torch.Tensor, target: torch.Tensor, lr: float
                                   ) -> tuple[torch.Tensor, float]:
        """Inputs ``h (N, D)``, targets ``(N,)``: updates the nodes on the targets' paths, returns ``e (N, D)``."""
        nodes, labels, owner = self._path_rows(target)  # (M,) each
        shape = (len(nodes), h.shape[1])  # (M, D)
        h_rows = torch.index_select(h, 0, owner, out=self._scratch("h_rows", shape))  # the input of each entry
        u = torch.index_select(self.output_vectors, 0, nodes, out=self._scratch("u", shape))
        logits = torch.mul(u, h_rows, out=self._scratch("product", shape)).sum(1)  # (M,)
        loss = float(-F.logsigmoid((2 * labels - 1) * logits).sum())
        g = (labels - torch.sigmoid(logits)).mul_(lr).mul_(logits.abs() < MAX_EXP)  # (M,) no step beyond MAX_EXP
        grad_h = torch.zeros_like(h).index_add_(0, owner, u.mul_(g.unsqueeze(1)))  # (N, D) e = sum g u
        hits = torch.bincount(nodes, minlength=len(self.output_vectors)).index_select(0, nodes)  # (M,)
        g.mul_((self.config.max_node_hits / hits).clamp_(max=1.0))  # cap a node's summed update (docstring)
        self.output_vectors.index_add_(0, nodes, h_rows.mul_(g.unsqueeze(1)))  # u += g h
        return grad_h, loss

    def _scratch(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """A reused buffer viewed as ``shape``: large temporaries are not allocated (and page-faulted) per batch."""
        size = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < size:
            buffer = self._buffers[name] = torch.empty(max(size, 2 * (0 if buffer is None else buffer.numel())))
        return buffer[:size].view(shape)

    def _path_rows(self, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inner nodes on each target's Huffman path, flattened: ``nodes, labels (1 - d_j), owner``, each ``(M,)``
        (``owner``: the example of each entry)."""
        starts = self.path_starts.index_select(0, target)
        lengths = self.path_starts.index_select(0, target + 1) - starts  # (N,)
        owner = torch.repeat_interleave(lengths)  # (M,)
        first = torch.cumsum(lengths, 0) - lengths  # (N,) first entry of each example
        position = torch.arange(len(owner)) - first.index_select(0, owner) + starts.index_select(0, owner)
        return self.path_nodes.index_select(0, position), self.path_labels.index_select(0, position), owner


def train_word2vec(train_files: str | Path | list, config: Word2VecConfig | None = None,
                   vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` (``vocab_kwargs``: ``min_count``, ``max_vocab_size``,
    ``lowercase``, ``tokenizer``) unless one is given, and train word2vec on them."""
    config = config or Word2VecConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    return Word2VecTrainer(vocab, config).train(corpus, progress=progress)
