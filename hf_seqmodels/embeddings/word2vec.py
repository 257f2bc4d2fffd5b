"""word2vec (Mikolov et al. 2013; course notes 001 §3–§10): CBOW and skip-gram, each trained with
negative sampling or with hierarchical softmax.

Two matrices: input vectors :math:`v_w` (the word vectors we keep, ``input_vectors``) and output
vectors :math:`u` (``output_vectors``: one per word for negative sampling, one per Huffman inner node
for hierarchical softmax). For a centre word :math:`w_t` and its context :math:`C_t` (the words at most
:math:`R` positions away, :math:`R \\sim U\\{1..\\text{window}\\}` drawn per centre: the dynamic window):

* **skip-gram** predicts each context word :math:`c \\in C_t` from :math:`h = v_{w_t}`;
* **CBOW** predicts :math:`w_t` from the average :math:`h = \\frac{1}{|C_t|}\\sum_{c \\in C_t} v_c`.

The output layer scores a target :math:`o` given :math:`h`:

* **negative sampling**: :math:`J = -\\log\\sigma(u_o^\\top h) - \\sum_{k=1}^{K}\\log\\sigma(-u_{n_k}^\\top h)`
  with :math:`n_k \\sim P_n(w) \\propto \\text{count}(w)^{0.75}`;
* **hierarchical softmax**: :math:`J = -\\sum_j \\log\\sigma\\big((1 - 2d_j)\\,u_{p_j}^\\top h\\big)` over the
  inner nodes :math:`p_j` and code bits :math:`d_j` of :math:`o`'s Huffman path (:mod:`.huffman`).

Both are binary logistic losses, so one update serves them: with label :math:`y` (1 for the true
target, 0 for a noise word; :math:`1 - d_j` on a path) and :math:`g = \\alpha\\,(y - \\sigma(u^\\top h))`,
plain SGD does :math:`u \\mathrel{+}= g\\,h` and :math:`h` receives :math:`\\sum g\\,u`. As in word2vec.c,
CBOW adds :math:`h`'s update to every context vector undivided, negatives equal to the target are
skipped (with hierarchical softmax, an inner node hit :math:`n` times in one batch moves by its summed
update divided by :math:`\\sqrt{n}`: the nodes near the root are on nearly every path), and the
learning rate decays linearly from ``learning_rate`` to ``learning_rate * min_learning_rate_ratio`` over all
epochs. Frequent words are subsampled
(:meth:`.Vocabulary.keep_probabilities`) before windows are taken.

Training is batched: ``batch_words`` centre words at a time, their pairs built with array operations,
one gather / ``index_add_`` per matrix per batch (updates of the same row within a batch add up).
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
from tqdm.auto import tqdm

from ..models.config_utils import PresetMixin, check_choice, invalid
from .huffman import build_huffman_tree
from .keyed_vectors import WordVectors
from .vocabulary import SUBSAMPLING_FORMULAS, EncodedCorpus, Vocabulary, check_window

logger = logging.getLogger(__name__)

ARCHITECTURES = ("cbow", "skipgram")
LOSSES = ("negative_sampling", "hierarchical_softmax")


@dataclass
class Word2VecConfig(PresetMixin):
    """Settings of a word2vec run; defaults are word2vec.c's (learning rate 0.025 skip-gram, 0.05 CBOW).

    ``batch_words`` centre words share one update, in which the updates of a row add up: on a vocabulary
    of a few dozen words a frequent row gets many at once, so use a small value there (e.g. 64).

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
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ARCHITECTURES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("subsampling_formula", self.subsampling_formula, SUBSAMPLING_FORMULAS)
        for name in ("vector_size", "window", "epochs", "batch_words"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
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
    """Draws noise words from ``P_n(w) ∝ count(w)^power`` through a table of ``table_size`` word ids in
    which word ``w`` fills a share ``P_n(w)`` of the cells (word2vec.c's unigram table; a uniform cell
    index picks a word with probability ``P_n(w)`` up to rounding to ``1 / table_size``)."""

    def __init__(self, vocab: Vocabulary, power: float = 0.75, generator: torch.Generator | None = None,
                 table_size: int = 10_000_000):
        self.probabilities = vocab.noise_distribution(power)
        cells = np.round(np.cumsum(self.probabilities) * table_size).astype(np.int64)  # end cell of each word
        self.table = torch.from_numpy(np.repeat(np.arange(len(vocab), dtype=np.int32), np.diff(cells, prepend=0)))
        self.generator = generator

    def sample(self, shape: tuple[int, ...]) -> torch.Tensor:
        cells = torch.randint(len(self.table), (math.prod(shape),), generator=self.generator)
        return self.table.index_select(0, cells).long().view(shape)


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
            self.paths, self.codes, self.path_mask = build_huffman_tree(vocab.counts).padded()
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
        loss_sum, loss_count = 0.0, 0
        for epoch in range(cfg.epochs):
            kept = np.flatnonzero(self.rng.random(len(corpus.ids)) < self.keep_probabilities[corpus.ids])
            ids, sent = corpus.ids[kept], sentence[kept]
            done_before = 0
            for batch, start in enumerate(range(0, len(ids), cfg.batch_words)):
                end = min(start + cfg.batch_words, len(ids))
                done = int(kept[end - 1]) + 1  # raw words of this epoch read so far
                lr = self._learning_rate((epoch * len(corpus.ids) + done) / total)
                loss, pairs = self._train_batch(ids, sent, start, end, lr)
                loss_sum, loss_count = loss_sum + loss, loss_count + pairs
                bar.update(done - done_before)
                done_before = done
                if batch % 100 == 0:
                    bar.set_postfix(loss=f"{loss_sum / max(loss_count, 1):.4f}", lr=f"{lr:.5f}", refresh=False)
            bar.update(len(corpus.ids) - done_before)
            logger.info("word2vec epoch %d: mean loss %.4f per prediction", epoch + 1,
                        loss_sum / max(loss_count, 1))
            loss_sum, loss_count = 0.0, 0
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
    # One batch of centre words
    # ------------------------------------------------------------------------------------------

    def _context_positions(self, sent: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions of every centre in ``[start, end)`` and of its context words, dynamic window:
        ``(B, 2 * window)`` positions and a boolean mask of the real ones."""
        w = self.config.window
        centres = np.arange(start, end)
        reach = self.rng.integers(1, w + 1, size=len(centres))  # R ~ U{1..window}, per centre
        offsets = np.concatenate([np.arange(-w, 0), np.arange(1, w + 1)])
        positions = centres[:, None] + offsets[None, :]  # (B, 2w)
        inside = (positions >= 0) & (positions < len(sent))
        clipped = np.clip(positions, 0, len(sent) - 1)
        mask = inside & (np.abs(offsets)[None, :] <= reach[:, None]) & (sent[clipped] == sent[centres][:, None])
        return clipped, mask

    def _train_batch(self, ids: np.ndarray, sent: np.ndarray, start: int, end: int, lr: float) -> tuple[float, int]:
        positions, mask = self._context_positions(sent, start, end)
        centre_ids = torch.from_numpy(ids[start:end])
        if self.config.architecture == "skipgram":
            rows, cols = np.nonzero(mask)
            if len(rows) == 0:
                return 0.0, 0
            inputs = centre_ids[torch.from_numpy(rows)]  # (P,) centre of each pair
            h = self.input_vectors.index_select(0, inputs)  # (P, D)
            grad_h, loss = self._output_step(h, torch.from_numpy(ids[positions[rows, cols]]), lr)
            self.input_vectors.index_add_(0, inputs, grad_h)
            return loss, len(rows)
        has_context = mask.any(axis=1)
        if not has_context.any():
            return 0.0, 0
        context = torch.from_numpy(ids[positions[has_context]])  # (B, 2w)
        weight = torch.from_numpy(mask[has_context]).float()  # (B, 2w)
        context_vectors = self.input_vectors.index_select(0, context.flatten()).view(*context.shape, -1)  # (B, 2w, D)
        h = (context_vectors * weight.unsqueeze(-1)).sum(1) / weight.sum(1, keepdim=True)  # (B, D)
        grad_h, loss = self._output_step(h, centre_ids[torch.from_numpy(has_context)], lr)
        # word2vec.c: the averaged input's update goes to each context word undivided
        self.input_vectors.index_add_(0, context.flatten(), (grad_h.unsqueeze(1) * weight.unsqueeze(-1)).flatten(0, 1))
        return loss, len(h)

    def _output_step(self, h: torch.Tensor, target: torch.Tensor, lr: float) -> tuple[torch.Tensor, float]:
        """One SGD step of the output layer for inputs ``h (N, D)`` predicting ``target (N,)``.

        Updates ``output_vectors`` in place and returns the update of ``h`` and the summed loss.
        """
        if self.config.loss == "negative_sampling":
            negatives = self.sampler.sample((len(target), self.config.negative))  # (N, K)
            rows = torch.cat([target.unsqueeze(1), negatives], dim=1)  # (N, 1+K)
            labels = torch.zeros(rows.shape)
            labels[:, 0] = 1.0
            weight = torch.ones(rows.shape)
            weight[:, 1:] = (negatives != target.unsqueeze(1)).float()  # word2vec.c skips n_k == target
        else:
            rows, codes, weight = self.paths[target], self.codes[target], self.path_mask[target]  # (N, L)
            labels = 1.0 - codes
        shape = (*rows.shape, h.shape[1])
        flat = self._scratch("u", (rows.numel(), h.shape[1]))
        u = torch.index_select(self.output_vectors, 0, rows.flatten(), out=flat).view(shape)  # (N, T, D)
        product = torch.mul(u, h.unsqueeze(1), out=self._scratch("product", shape))  # (N, T, D)
        logits = product.sum(-1)  # (N, T)
        g = (labels - torch.sigmoid(logits)) * weight * lr  # (N, T)
        loss = -(torch.nn.functional.logsigmoid((2 * labels - 1) * logits) * weight).sum()
        grad_h = torch.bmm(g.unsqueeze(1), u).squeeze(1)  # (N, D)
        if self.config.loss == "hierarchical_softmax":
            # the inner nodes near the root lie on almost every path: a batch's summed updates of such a
            # node are thousands of SGD steps at once and diverge; a node hit n times moves by sum / sqrt(n)
            hits = torch.bincount(rows.flatten(), minlength=len(self.output_vectors)).clamp_(min=1)
            g = g / hits[rows].float().sqrt()
        update = torch.mul(g.unsqueeze(-1), h.unsqueeze(1), out=product)  # (N, T, D): g u-update per target
        self.output_vectors.index_add_(0, rows.flatten(), update.flatten(0, 1))
        return grad_h, float(loss)

    def _scratch(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """A reused buffer viewed as ``shape`` (large temporaries are not reallocated every batch)."""
        size = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < size:
            buffer = self._buffers[name] = torch.empty(max(size, 2 * (0 if buffer is None else buffer.numel())))
        return buffer[:size].view(shape)


def train_word2vec(train_files: str | Path | list, config: Word2VecConfig | None = None,
                   vocab: Vocabulary | None = None, progress: bool = True, **vocab_kwargs) -> WordVectors:
    """Build the vocabulary of ``train_files`` (``vocab_kwargs``: ``min_count``, ``max_vocab_size``,
    ``lowercase``, ``tokenizer``) unless one is given, and train word2vec on them."""
    config = config or Word2VecConfig()
    vocab = vocab or Vocabulary.from_files(train_files, **vocab_kwargs)
    corpus = vocab.encode_files(train_files)
    return Word2VecTrainer(vocab, config).train(corpus, progress=progress)
