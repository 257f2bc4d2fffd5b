"""Vocabulary.encode_sentences / encode_files stream the ids into numpy arrays (4 bytes a token), chunk by chunk."""

import tracemalloc

import numpy as np
import pytest

from hf_seqmodels.embeddings import vocabulary as vocabulary_module
from hf_seqmodels.embeddings.cooccurrence import count_cooccurrences
from hf_seqmodels.embeddings.vocabulary import EncodedCorpus, Vocabulary


def reference_encoding(vocab: Vocabulary, sentences):
    """The ids, offsets and raw word count, computed with plain Python lists (the behaviour to keep)."""
    ids, offsets, raw = [], [0], 0
    for tokens in sentences:
        raw += len(tokens)
        kept = [vocab.word_to_index[t] for t in tokens if t in vocab.word_to_index]
        if kept:
            ids += kept
            offsets.append(len(ids))
    return ids, offsets, raw


@pytest.mark.parametrize("chunk_tokens", [1, 3, 1 << 16])
def test_encode_files_gives_the_ids_and_offsets_of_every_sentence(tmp_path, monkeypatch, chunk_tokens):
    monkeypatch.setattr(vocabulary_module, "ENCODE_CHUNK_TOKENS", chunk_tokens)
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("The cat sat on the mat.\nrare words only\n\nthe dog, the cat!\n", encoding="utf-8")
    second.write_text("a mat for the dog\nzebra\n", encoding="utf-8")
    vocab = Vocabulary.from_files([first, second], min_count=2)
    corpus = vocab.encode_files([first, second])
    lines = (first.read_text() + second.read_text()).splitlines()
    ids, offsets, raw = reference_encoding(vocab, [vocab.tokenize(line) for line in lines if line.strip()])
    assert corpus.ids.dtype == np.int32 and corpus.offsets.dtype == np.int64
    assert corpus.ids.tolist() == ids and corpus.offsets.tolist() == offsets and corpus.raw_words == raw
    assert corpus.num_sentences == 3  # "rare words only" and "zebra" hold no kept word


def test_an_encoded_corpus_holds_4_bytes_a_token_at_its_peak(monkeypatch):
    monkeypatch.setattr(vocabulary_module, "ENCODE_CHUNK_TOKENS", 1000)
    words = [f"w{i}" for i in range(50)]
    vocab = Vocabulary(words, [1] * len(words))
    rng = np.random.default_rng(0)
    sentences = [[words[i] for i in rng.integers(0, 50, 20)] for _ in range(10_000)]  # 200,000 tokens
    tracemalloc.start()
    try:
        corpus = vocab.encode_sentences(iter(sentences))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    tokens = len(corpus.ids)
    assert tokens == 200_000 and corpus.ids.nbytes == 4 * tokens
    # ids (4 bytes a token) + offsets (8 bytes a sentence = 0.4 a token) + one chunk; lists of ints took >= 16
    assert peak < 5.5 * tokens, f"{peak / tokens:.1f} bytes a token"


def test_cooccurrence_pair_keys_of_a_large_vocabulary_do_not_overflow_int32_ids():
    """Ids are int32 whatever the vocabulary; the pair keys ``a * V + b`` (up to V**2) are int64."""
    size = 50_000  # 50,000**2 > 2**31
    corpus = EncodedCorpus(ids=np.array([size - 1, size - 2, 7], dtype=np.int32), offsets=np.array([0, 3]), raw_words=3)
    matrix = count_cooccurrences(corpus, size, window=1, weighting="uniform")
    pairs = sorted(zip(matrix.rows.tolist(), matrix.cols.tolist(), strict=True))
    assert pairs == [(7, size - 2), (size - 2, 7), (size - 2, size - 1), (size - 1, size - 2)]


def test_a_corpus_without_a_known_word_is_refused():
    vocab = Vocabulary(["a", "b"], [3, 2])
    with pytest.raises(ValueError, match="no sentence holds an in-vocabulary word"):
        vocab.encode_sentences([["x"], [], ["y", "z"]])
