"""GloVe's memory does not grow with the corpus beyond its co-occurrence matrix: the counting holds one chunk's
pairs and the in-memory runs (no array the size of the corpus), and training computes log X and f(X) per batch
(no per-entry copies of the counts)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import torch

from hf_seqmodels.embeddings import glove
from hf_seqmodels.embeddings.cooccurrence import count_cooccurrences
from hf_seqmodels.embeddings.glove import GloVeConfig, GloVeTrainer
from hf_seqmodels.embeddings.vocabulary import EncodedCorpus, Vocabulary


def encoded(tokens: int, vocab_size: int, seed: int = 0) -> EncodedCorpus:
    """``tokens`` random ids in sentences of 3..12 tokens."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 13, size=tokens // 3)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), tokens)]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return EncodedCorpus(ids=rng.integers(vocab_size, size=int(offsets[-1])), offsets=offsets, raw_words=0)


def test_counting_holds_no_array_the_size_of_the_corpus(monkeypatch):
    corpus = encoded(1_000_000, vocab_size=20)  # 8 MB of ids; a per-token int64 index would be 8 MB more

    def whole_index(self):
        raise AssertionError("the counting built the corpus-sized sentence index")

    monkeypatch.setattr(EncodedCorpus, "sentence_index", whole_index)
    tracemalloc.start()
    try:
        counts = count_cooccurrences(corpus, 20, window=2, chunk_tokens=5_000, max_entries=50_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB traced while counting"
    assert len(counts) == 20 * 20  # every pair of 20 words co-occurs in 1 M tokens


def test_chunked_sentence_bounds_equal_the_whole_index():
    corpus = encoded(30_000, vocab_size=50, seed=1)
    chunked = count_cooccurrences(corpus, 50, window=5, chunk_tokens=97, max_entries=300)
    # the reference: every pair up to 5 apart whose tokens lie in the same sentence of the whole index
    sentence, ids, expected = corpus.sentence_index(), corpus.ids, np.zeros((50, 50))
    for distance in range(1, 6):
        same = sentence[:-distance] == sentence[distance:]
        left, right = ids[:-distance][same], ids[distance:][same]
        np.add.at(expected, (left, right), 1.0 / distance)
        np.add.at(expected, (right, left), 1.0 / distance)
    np.testing.assert_allclose(chunked.to_dense().numpy(), expected)
    assert chunked.rows.dtype == chunked.cols.dtype == np.int32  # 16 bytes per entry with the float64 value


def test_glove_weights_are_computed_per_batch_with_the_same_vectors(monkeypatch):
    sentences = [["a", "b", "c", "d"], ["b", "c", "e"], ["a", "d", "e", "c"]] * 10
    vocab = Vocabulary.from_sentences(sentences, min_count=1)
    counts = count_cooccurrences(vocab.encode_sentences(sentences), len(vocab), window=2)
    config = GloVeConfig(vector_size=4, window=2, epochs=3, batch_size=4)
    seen = []
    weight = glove.glove_weight

    def recording(x, *args):
        seen.append(len(x))
        return weight(x, *args)

    monkeypatch.setattr(glove, "glove_weight", recording)
    vectors = GloVeTrainer(vocab, config).train(counts, progress=False)
    assert max(seen) <= config.batch_size < len(counts)
    # the reference: log X and f(X) of every entry computed once, as before
    reference = GloVeTrainer(vocab, config)
    values = torch.from_numpy(counts.values).float()
    log_x, f = values.log(), weight(values, config.x_max, config.alpha)
    rows, cols = torch.from_numpy(counts.rows), torch.from_numpy(counts.cols)
    for _ in range(config.epochs):
        order = torch.randperm(len(values), generator=reference.generator)
        for start in range(0, len(order), config.batch_size):
            k = order[start : start + config.batch_size]
            reference._step(rows[k], cols[k], log_x[k], f[k])
    torch.testing.assert_close(vectors.vectors, reference.word + reference.context, rtol=0, atol=0)


def test_merge_blocks_hold_about_max_entries_even_for_zipf_keys():
    """Frequent words have the small ids: blocks of equal key ranges would put nearly every entry in the first."""
    from hf_seqmodels.embeddings.cooccurrence import _block_bounds

    rng = np.random.default_rng(0)
    vocab_size, max_entries = 5_000, 20_000
    runs = []
    for _ in range(4):
        rows, cols = rng.zipf(1.3, size=(2, 30_000)) % vocab_size
        keys = np.unique(rows * vocab_size + cols)
        runs.append((keys, np.ones(len(keys))))
    total = sum(len(keys) for keys, _ in runs)
    bounds = _block_bounds(runs, total, vocab_size * vocab_size, max_entries)
    sizes = [sum(int(np.searchsorted(k, high) - np.searchsorted(k, low)) for k, _ in runs)
             for low, high in zip(bounds[:-1], bounds[1:], strict=True)]
    assert sum(sizes) == total and len(sizes) >= total // max_entries
    assert max(sizes) <= 1.25 * max_entries, sizes
    equal_ranges = np.linspace(0, vocab_size * vocab_size, len(sizes) + 1).astype(np.int64)
    first = sum(int(np.searchsorted(k, equal_ranges[1])) for k, _ in runs)
    assert first > 2 * max_entries  # what the equal key ranges gave
