"""Word embeddings: vocabulary, Huffman tree, samplers, co-occurrences, the three trainers and WordVectors."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from hf_seqmodels.cli import main as hf_seqmodels_main
from hf_seqmodels.embeddings import WordVectors, train_word2vec
from hf_seqmodels.embeddings.cooccurrence import count_cooccurrences
from hf_seqmodels.embeddings.glove import GloVeConfig, GloVeTrainer, glove_weight
from hf_seqmodels.embeddings.huffman import build_huffman_tree
from hf_seqmodels.embeddings.keyed_vectors import _spearman
from hf_seqmodels.embeddings.svd import SVDConfig, train_svd
from hf_seqmodels.embeddings.vocabulary import Vocabulary
from hf_seqmodels.embeddings.word2vec import NegativeSampler, Word2VecConfig, Word2VecTrainer
from hf_seqmodels.training.classic.embeddings_cli import main as cli_main

ANIMALS = ["cat", "dog", "horse", "cow", "sheep", "goat"]
VEHICLES = ["car", "bus", "truck", "train", "bike", "van"]


@pytest.fixture(scope="module")
def topic_corpus(tmp_path_factory) -> str:
    """Sentences of 8 words from one topic each: words of a topic share all their contexts."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices(rng.choice([ANIMALS, VEHICLES]), k=8)) for _ in range(600)]
    path = tmp_path_factory.mktemp("corpus") / "topics.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def assert_topics_separate(vectors: WordVectors) -> None:
    for topic in (ANIMALS, VEHICLES):
        for word in topic:
            neighbours = [w for w, _ in vectors.most_similar(word, topn=len(topic) - 1)]
            assert set(neighbours) == set(topic) - {word}, (word, neighbours)


# ------------------------------------------------------------------------------------------------
# Huffman tree
# ------------------------------------------------------------------------------------------------


def test_huffman_code_lengths_match_the_textbook_example():
    # CLRS 16.3: frequencies a:45 b:13 c:12 d:16 e:9 f:5 give code lengths 1, 3, 3, 3, 4, 4
    tree = build_huffman_tree([45, 13, 12, 16, 9, 5])
    assert [len(c) for c in tree.codes] == [1, 3, 3, 3, 4, 4]


def test_huffman_codes_are_prefix_free_and_frequent_words_get_short_codes():
    counts = np.random.default_rng(0).zipf(1.5, size=200).clip(max=10**6)
    tree = build_huffman_tree(counts)
    codes = ["".join(map(str, c)) for c in tree.codes]
    assert len(set(codes)) == len(codes)
    for a in codes:
        for b in codes:
            assert a == b or not b.startswith(a)
    assert sum(2.0 ** -len(c) for c in codes) == pytest.approx(1.0)  # a full binary tree
    order = np.argsort(-counts, kind="stable")
    lengths = [len(codes[i]) for i in order]
    for (i, j) in zip(order[:-1], order[1:], strict=True):
        if counts[i] > counts[j]:
            assert len(codes[i]) <= len(codes[j])
    assert lengths[0] <= lengths[-1]
    for code, point in zip(tree.codes, tree.points, strict=True):
        assert len(code) == len(point) and point[0] == len(counts) - 2  # every path starts at the root
        assert all(0 <= p < len(counts) - 1 for p in point)


def test_hierarchical_softmax_probabilities_sum_to_one():
    """P(w | h) = prod_j sigma((1 - 2 d_j) u_{p_j} . h) is a distribution over the vocabulary."""
    tree = build_huffman_tree([50, 20, 20, 7, 3, 1, 1])
    points, codes, mask = tree.padded()
    generator = torch.Generator().manual_seed(0)
    nodes, h = torch.randn(tree.num_inner_nodes, 4, generator=generator), torch.randn(4, generator=generator)
    signs = 1 - 2 * codes  # (V, L)
    log_p = (torch.nn.functional.logsigmoid(signs * (nodes[points] @ h)) * mask).sum(1)  # (V,)
    assert log_p.exp().sum().item() == pytest.approx(1.0, abs=1e-6)


# ------------------------------------------------------------------------------------------------
# Sampling distributions
# ------------------------------------------------------------------------------------------------


def _chi_square(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    return float(((observed - expected) ** 2 / expected).sum())


def test_negative_samples_follow_unigram_to_the_three_quarters():
    vocab = Vocabulary([f"w{i}" for i in range(6)], [1000, 400, 100, 30, 10, 3])
    sampler = NegativeSampler(vocab, power=0.75, generator=np.random.default_rng(0))
    draws = sampler.sample((400, 500)).flatten()
    observed = np.bincount(draws, minlength=6)
    counts = vocab.counts.astype(float)
    expected = counts**0.75 / (counts**0.75).sum()
    # chi-square with 5 degrees of freedom: 20.5 is its 0.999 quantile
    assert _chi_square(observed, expected) < 20.5
    assert _chi_square(observed, counts / counts.sum()) > 1000  # the plain unigram distribution is rejected


def test_subsampling_keep_probabilities_match_the_formulas():
    counts = np.array([5000, 1000, 100, 10])
    vocab = Vocabulary(["a", "b", "c", "d"], counts)
    f = counts / counts.sum()
    t = 1e-2
    np.testing.assert_allclose(vocab.keep_probabilities(t, "paper"), np.minimum(1, np.sqrt(t / f)))
    np.testing.assert_allclose(vocab.keep_probabilities(t, "word2vec_c"), np.minimum(1, np.sqrt(t / f) + t / f))
    assert vocab.keep_probabilities(t, "paper")[0] == pytest.approx(math.sqrt(1e-2 / (5000 / 6110)))
    assert vocab.keep_probabilities(t, "paper")[-1] == 1.0
    np.testing.assert_array_equal(vocab.keep_probabilities(0.0), np.ones(4))


# ------------------------------------------------------------------------------------------------
# Co-occurrences and GloVe's weighting
# ------------------------------------------------------------------------------------------------

NOTES_CORPUS = [["I", "like", "deep", "learning", "."], ["I", "like", "NLP", "."], ["I", "enjoy", "flying", "."]]


def test_cooccurrence_counts_match_the_course_notes_table():
    vocab = Vocabulary.from_sentences(NOTES_CORPUS, min_count=1, lowercase=False)
    order = ["I", "like", "enjoy", "deep", "learning", "NLP", "flying", "."]
    notes_table = [  # course notes 001 §6.2, window 2
        [0, 2, 1, 1, 0, 1, 1, 0], [2, 0, 0, 1, 1, 1, 0, 1], [1, 0, 0, 0, 0, 0, 1, 1], [1, 1, 0, 0, 1, 0, 0, 1],
        [0, 1, 0, 1, 0, 0, 0, 1], [1, 1, 0, 0, 0, 0, 0, 1], [1, 0, 1, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 0],
    ]
    idx = [vocab.word_to_index[w] for w in order]
    corpus = vocab.encode_sentences(NOTES_CORPUS)
    uniform = count_cooccurrences(corpus, len(vocab), window=2, weighting="uniform").to_dense()
    assert uniform[idx][:, idx].tolist() == notes_table
    harmonic = count_cooccurrences(corpus, len(vocab), window=2, weighting="harmonic").to_dense()
    i = vocab.word_to_index
    assert harmonic[i["I"], i["like"]] == 2.0  # distance 1 in two sentences
    assert harmonic[i["I"], i["deep"]] == 0.5  # distance 2 once
    assert harmonic[i["like"], i["."]] == 0.5  # distance 2 in "I like NLP ."; 3 in sentence 1 (outside)
    assert harmonic[i["I"], i["enjoy"]] == 1.0 and harmonic[i["I"], i["."]] == 0.0
    assert torch.equal(harmonic, harmonic.T)


def test_glove_weighting_function():
    x = torch.tensor([0.0, 1.0, 50.0, 100.0, 250.0])
    expected = torch.tensor([0.0, 0.01**0.75, 0.5**0.75, 1.0, 1.0])
    torch.testing.assert_close(glove_weight(x), expected)
    torch.testing.assert_close(glove_weight(torch.tensor([5.0]), x_max=10.0, alpha=1.0), torch.tensor([0.5]))


# ------------------------------------------------------------------------------------------------
# Each method learns the topics of a synthetic corpus
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
@pytest.mark.parametrize("loss", ["negative_sampling", "hierarchical_softmax"])
def test_word2vec_separates_the_topics(topic_corpus, architecture, loss):
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    config = Word2VecConfig(architecture=architecture, loss=loss, vector_size=16, window=3, sample=0.0,
                            epochs=3, seed=0)
    trainer = Word2VecTrainer(vocab, config)
    vectors = trainer.train(vocab.encode_files(topic_corpus), progress=False)
    assert_topics_separate(vectors)
    rows = len(vocab) if loss == "negative_sampling" else len(vocab) - 1
    assert trainer.output_vectors.shape == (rows, 16)
    assert vectors.metadata["architecture"] == architecture


def test_glove_separates_the_topics(topic_corpus):
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    cooccurrences = count_cooccurrences(vocab.encode_files(topic_corpus), len(vocab), window=5)
    trainer = GloVeTrainer(vocab, GloVeConfig(vector_size=8, x_max=10.0, epochs=50, batch_size=16))
    vectors = trainer.train(cooccurrences, progress=False)
    assert_topics_separate(vectors)
    torch.testing.assert_close(vectors.vectors, trainer.word + trainer.context)
    # the fit: w_i·w̃_j + b_i + b̃_j approaches log X_ij
    i, j = torch.from_numpy(cooccurrences.rows), torch.from_numpy(cooccurrences.cols)
    fit = (trainer.word[i] * trainer.context[j]).sum(1) + trainer.word_bias[i] + trainer.context_bias[j]
    log_x = torch.from_numpy(cooccurrences.values).float().log()
    assert (fit - log_x).abs().mean() < 0.1 * log_x.abs().mean()


def test_svd_separates_the_topics(topic_corpus):
    for matrix in ("ppmi", "counts"):  # two topics: rank-2 structure
        vectors = train_svd(topic_corpus, SVDConfig(vector_size=2, window=3, matrix=matrix), min_count=1)
        assert vectors.vectors.shape == (12, 2)
        assert_topics_separate(vectors)


def test_training_is_seeded(topic_corpus):
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    corpus = vocab.encode_files(topic_corpus)
    config = Word2VecConfig(vector_size=8, epochs=1, sample=1e-1, seed=3)
    first = Word2VecTrainer(vocab, config).train(corpus, progress=False)
    second = Word2VecTrainer(vocab, config).train(corpus, progress=False)
    assert torch.equal(first.vectors, second.vectors)


# ------------------------------------------------------------------------------------------------
# WordVectors: queries, export and import
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def toy_vectors() -> WordVectors:
    # gender on axis 0, royalty on axis 1; "apple" far from both
    words = ["man", "woman", "king", "queen", "apple", "prince"]
    vectors = torch.tensor([[1.0, 0.1, 0.0], [-1.0, 0.1, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0],
                            [0.0, 0.0, 1.0], [0.9, 1.1, 0.2]])
    return WordVectors(words, vectors, counts=[6, 5, 4, 3, 2, 1], metadata={"method": "toy"})


def test_analogy_and_neighbours(toy_vectors, tmp_path):
    assert toy_vectors.analogy("man", "king", "woman")[0][0] == "queen"
    # the query words are excluded even when closest to the target
    assert all(w not in {"man", "king", "woman"} for w, _ in toy_vectors.analogy("man", "king", "woman", topn=5))
    assert toy_vectors.most_similar("king", topn=1)[0][0] == "prince"
    assert toy_vectors.similarity("king", "king") == pytest.approx(1.0)
    questions = tmp_path / "q.txt"
    questions.write_text(": royalty\nman king woman queen\nMAN KING WOMAN QUEEN\nman woman king apple\n"
                         ": unknown\nman king zebra queen\n")
    result = toy_vectors.evaluate_analogies(questions)
    assert (result.correct, result.total, result.skipped) == (2, 3, 1)
    assert result.accuracy == pytest.approx(2 / 3) and result.sections == {"royalty": (2, 3)}
    questions.write_text("man king woman\n")
    with pytest.raises(ValueError, match="line 1 .* expected four words"):
        toy_vectors.evaluate_analogies(questions)


def test_save_and_load_are_exact(toy_vectors, tmp_path):
    toy_vectors.save(tmp_path / "wv")
    loaded = WordVectors.load(tmp_path / "wv")
    assert torch.equal(loaded.vectors, toy_vectors.vectors) and loaded.words == toy_vectors.words
    assert loaded.counts == toy_vectors.counts and loaded.metadata == {"method": "toy"}
    assert not list((tmp_path / "wv").glob("*.bin")) and not list((tmp_path / "wv").glob("*.pkl"))


def test_word2vec_format_round_trips(tmp_path):
    vectors = WordVectors(["a", "b", "ü"], torch.randn(3, 5, generator=torch.Generator().manual_seed(0)) / 7)
    path = vectors.save_word2vec_format(tmp_path / "v.txt", precision=6)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "3 5" and lines[3].startswith("ü ")
    loaded = WordVectors.load_word2vec_format(path)
    printed = torch.tensor([[float(f"{v:.6g}") for v in row] for row in vectors.vectors.tolist()])
    assert loaded.words == vectors.words and torch.equal(loaded.vectors, printed)
    assert (loaded.vectors - vectors.vectors).abs().max() < 1e-6
    binary = WordVectors.load_word2vec_format(vectors.save_word2vec_format(tmp_path / "v.bin", binary=True),
                                              binary=True)
    assert binary.words == vectors.words and torch.equal(binary.vectors, vectors.vectors)


def test_embedding_exports(toy_vectors, caplog):
    embedding = toy_vectors.to_embedding(freeze=True)
    assert isinstance(embedding, torch.nn.Embedding) and not embedding.weight.requires_grad
    torch.testing.assert_close(embedding(torch.tensor([2])), toy_vectors.vectors[2:3])
    vocab = {"<pad>": 0, "King": 1, "queen": 2, "unseen": 3, "[UNK]": 5}
    with caplog.at_level("INFO"):
        matrix = toy_vectors.embedding_matrix_for_vocab(vocab, init_range=0.05, padding_idx=0)
    assert "cover 2 of 5 tokens" in caplog.text
    assert matrix.shape == (6, 3)
    assert torch.equal(matrix[1], toy_vectors["king"]) and torch.equal(matrix[2], toy_vectors["queen"])
    assert torch.equal(matrix[0], torch.zeros(3))
    assert matrix[[3, 4, 5]].abs().max() <= 0.05 and matrix[3].abs().sum() > 0
    assert toy_vectors.vocab_coverage(vocab) == pytest.approx(2 / 5)
    assert toy_vectors.vocab_coverage(vocab, lowercase_fallback=False) == pytest.approx(1 / 5)


# ------------------------------------------------------------------------------------------------
# Errors and the command line
# ------------------------------------------------------------------------------------------------


def test_errors_name_the_field_and_the_value(tmp_path):
    with pytest.raises(ValueError, match="corpus is empty"):
        Vocabulary.from_sentences([[], []])
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match="corpus is empty"):
        Vocabulary.from_files(tmp_path / "blank.txt")
    sentences = [["a", "b", "c"], ["a", "b"]]
    with pytest.raises(ValueError, match=r"`max_vocab_size`=10: expected at most 3.*3 distinct words"):
        Vocabulary.from_sentences(sentences, min_count=1, max_vocab_size=10)
    with pytest.raises(ValueError, match=r"`min_count`=5: expected a value that keeps at least 2 words"):
        Vocabulary.from_sentences(sentences, min_count=5)
    vocab = Vocabulary.from_sentences([["a"], ["b"], ["a"]], min_count=1)
    with pytest.raises(ValueError, match=r"`window`=5: .*longest sentence has 1"):
        Word2VecTrainer(vocab, Word2VecConfig(vector_size=4)).train(vocab.encode_sentences([["a"], ["b"]]))
    with pytest.raises(ValueError, match=r"`architecture`='skip-gram': expected one of 'cbow', 'skipgram'"):
        Word2VecConfig(architecture="skip-gram")
    with pytest.raises(ValueError, match=r"`loss`='softmax'"):
        Word2VecConfig(loss="softmax")
    with pytest.raises(ValueError, match=r"`subsampling_formula`='gensim'"):
        Word2VecConfig(subsampling_formula="gensim")
    with pytest.raises(ValueError, match=r"`x_max`=0"):
        GloVeConfig(x_max=0)
    with pytest.raises(ValueError, match=r"`vector_size`=12: expected fewer dimensions than the 3"):
        train_svd(_write(tmp_path, "a b c\nb c a\n"), SVDConfig(vector_size=12), min_count=1)


def _write(folder, text: str) -> str:
    path = folder / "corpus.txt"
    path.write_text(text)
    return str(path)


def test_command_line_writes_vectors_and_analogy_accuracy(topic_corpus, tmp_path):
    questions = tmp_path / "analogies.txt"
    questions.write_text(": topics\ncat dog car bus\n")
    out = tmp_path / "svd"
    cli_main(["--train_file", topic_corpus, "--method", "svd", "--vector_size", "4", "--min_count", "1",
              "--output_dir", str(out), "--analogies_file", str(questions)])
    loaded = WordVectors.load(out)
    text = WordVectors.load_word2vec_format(out / "vectors.txt")
    assert loaded.words == text.words and loaded.vector_size == 4 and loaded.metadata["method"] == "svd"
    summary = json.loads((out / "analogies.json").read_text())
    assert summary["answered"] == 1 and summary["skipped"] == 0
    out = tmp_path / "w2v"
    hf_seqmodels_main(["embeddings", "--train_file", topic_corpus, "--method", "word2vec", "--architecture", "cbow", "--loss",
              "hierarchical_softmax", "--vector_size", "8", "--num_train_epochs", "1", "--min_count", "1",
              "--output_dir", str(out)])
    assert WordVectors.load(out).metadata["loss"] == "hierarchical_softmax"
    with pytest.raises(ValueError, match=r"--per_device_train_batch_size=8 applies to glove only"):
        cli_main(["--train_file", topic_corpus, "--method", "word2vec", "--per_device_train_batch_size", "8",
                  "--min_count", "1", "--output_dir", str(tmp_path / "w2v-batch")])


def test_named_presets_build_and_the_tiny_ones_learn_the_topics(topic_corpus):
    assert Word2VecConfig.from_preset("mikolov2013-negative").negative == 15
    assert Word2VecConfig.from_preset("word2vec-c-cbow", epochs=1).learning_rate == 0.05  # word2vec.c's CBOW rate
    assert GloVeConfig.from_preset("pennington2014").vector_size == 300
    assert SVDConfig.from_preset("notes-counts").matrix == "counts"
    for config_class in (Word2VecConfig, GloVeConfig, SVDConfig):
        assert {"tiny"} < set(config_class.available_presets())
        for name in config_class.available_presets():
            config_class.from_preset(name)
        with pytest.raises(ValueError, match=r"`preset`='nope'.*tiny"):
            config_class.from_preset("nope")
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    assert_topics_separate(Word2VecTrainer(vocab, Word2VecConfig.from_preset("tiny")).train(
        vocab.encode_files(topic_corpus), progress=False))
    assert_topics_separate(train_svd(topic_corpus, SVDConfig.from_preset("tiny"), min_count=1))


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
def test_hierarchical_softmax_stays_finite_on_a_zipfian_corpus(tmp_path, architecture):
    """The inner nodes near the Huffman root lie on almost every word's path of a Zipfian text (as natural text
    is): word2vec.c's one-step-at-a-time updates keep them finite."""
    rng = np.random.default_rng(0)
    size = 3000
    p = 1.0 / np.arange(1, size + 1)
    ids = rng.choice(size, size=(4000, 30), p=p / p.sum())
    corpus = _write(tmp_path, "\n".join(" ".join(f"w{i}" for i in row) for row in ids) + "\n")
    config = Word2VecConfig(architecture=architecture, loss="hierarchical_softmax", epochs=1)
    vectors = train_word2vec(corpus, config, min_count=1)
    assert torch.isfinite(torch.as_tensor(vectors.vectors)).all()


# ------------------------------------------------------------------------------------------------
# The training steps against word2vec.c's equations, written out by hand
# ------------------------------------------------------------------------------------------------


def _word2vec_c_hierarchical_softmax(syn0, syn1, context, word, tree, alpha):
    """word2vec.c's hierarchical-softmax step, loop for loop: the input ``neu1`` is the mean of the
    ``context`` rows of ``syn0`` (one row: skip-gram), the target ``word``'s path runs through ``syn1``."""
    syn0, syn1 = syn0.clone(), syn1.clone()
    neu1 = sum(syn0[c] for c in context) / len(context)
    neu1e = torch.zeros_like(neu1)
    for d in range(len(tree.codes[word])):
        node = tree.points[word][d]
        f = float(neu1 @ syn1[node])
        if f <= -6 or f >= 6:
            continue
        g = (1 - tree.codes[word][d] - 1 / (1 + math.exp(-f))) * alpha
        neu1e += g * syn1[node]
        syn1[node] += g * neu1
    for c in context:
        syn0[c] += neu1e
    return syn0, syn1


def _word2vec_c_negative_sampling(syn0, syn1neg, context, word, negatives, alpha):
    """word2vec.c's negative-sampling step for one input (the mean of the ``context`` rows): the target
    ``word`` with label 1, then each noise word with label 0, skipping a noise word equal to the target."""
    syn0, syn1neg = syn0.clone(), syn1neg.clone()
    neu1 = sum(syn0[c] for c in context) / len(context)
    neu1e = torch.zeros_like(neu1)
    for target, label in [(word, 1), *((n, 0) for n in negatives)]:
        if label == 0 and target == word:
            continue
        g = (label - torch.sigmoid(neu1 @ syn1neg[target])) * alpha
        neu1e += g * syn1neg[target]
        syn1neg[target] += g * neu1
    for c in context:
        syn0[c] += neu1e
    return syn0, syn1neg


def _trainer(architecture, loss, vocab, seed=0, scale=1.0):
    trainer = Word2VecTrainer(vocab, Word2VecConfig(architecture=architecture, loss=loss, vector_size=4, negative=3))
    generator = torch.Generator().manual_seed(seed)
    trainer.input_vectors.copy_(torch.randn(len(vocab), 4, generator=generator))
    trainer.output_vectors.copy_(torch.randn(len(trainer.output_vectors), 4, generator=generator) * scale)
    return trainer


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
def test_hierarchical_softmax_step_matches_word2vec_c(architecture):
    vocab = Vocabulary(["a", "b", "c", "d", "e"], [50, 20, 10, 5, 2])
    trainer = _trainer(architecture, "hierarchical_softmax", vocab)
    trainer.output_vectors[3] *= 20  # the root: scores beyond ±6, where word2vec.c makes no step
    tree = build_huffman_tree(vocab.counts)
    # one centre ("e", 4) in a run of words; skip-gram: one context word before it, CBOW: two before, one after
    if architecture == "skipgram":
        context, ids, lo, counts = [2], [2, 4], [0, -1], [0, 1]
    else:
        context, ids, lo, counts = [0, 2, 3], [0, 2, 4, 3], [0, 0, -2, 0], [0, 0, 3, 0]
    syn0, syn1 = _word2vec_c_hierarchical_softmax(trainer.input_vectors, trainer.output_vectors, context, 4,
                                                  tree, alpha=0.1)
    assert abs(float(trainer.input_vectors[context].mean(0) @ trainer.output_vectors[3])) >= 6
    assert not torch.equal(syn1[:3], trainer.output_vectors[:3])  # the other three nodes of the path move
    loss, predictions = trainer.update(np.array(ids), np.array(lo), np.array(counts), lr=0.1)
    assert loss > 0 and predictions == 1
    torch.testing.assert_close(trainer.input_vectors, syn0)
    torch.testing.assert_close(trainer.output_vectors, syn1)


@pytest.mark.parametrize("architecture", ["skipgram", "cbow"])
@pytest.mark.parametrize("loss", ["negative_sampling", "hierarchical_softmax"])
def test_a_run_of_centres_takes_word2vec_c_steps_one_after_another(architecture, loss):
    """Training walks a run of words centre after centre: skip-gram makes one step per context word (each with
    its own noise words, in order), CBOW one per centre; each step starts from the weights the last one left,
    as in word2vec.c. Windows of different sizes, a noise word equal to the target, a centre with no context."""
    vocab = Vocabulary(["a", "b", "c", "d", "e", "f"], [60, 30, 20, 10, 5, 2])
    trainer = _trainer(architecture, loss, vocab, seed=1, scale=0.5)
    tree = build_huffman_tree(vocab.counts)
    ids, lo, counts = [1, 0, 2, 4, 3, 5, 0], [0, -1, -2, -1, 0, -3, -1], [1, 2, 3, 2, 0, 3, 1]
    lr = np.array([0.1, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04], dtype=np.float32)
    pairs = [(i, j) for i in range(len(ids)) for j in range(i + lo[i], i + lo[i] + counts[i] + 1) if j != i]
    steps = pairs if architecture == "skipgram" else [(i, None) for i in range(len(ids)) if counts[i]]
    noise = np.random.default_rng(0).integers(0, 6, size=(len(steps), 3)).astype(np.int32)
    noise[0, 1] = ids[steps[0][0]]  # a noise word equal to the target: skipped
    syn0, syn1 = trainer.input_vectors.clone(), trainer.output_vectors.clone()
    for p, (i, j) in enumerate(steps):
        context = [ids[j]] if j is not None else [ids[k] for k in range(i + lo[i], i + lo[i] + counts[i] + 1) if k != i]
        if loss == "negative_sampling":
            syn0, syn1 = _word2vec_c_negative_sampling(syn0, syn1, context, ids[i], noise[p].tolist(), float(lr[i]))
        else:
            syn0, syn1 = _word2vec_c_hierarchical_softmax(syn0, syn1, context, ids[i], tree, float(lr[i]))
    total, predictions = trainer.update(np.array(ids), np.array(lo), np.array(counts), lr,
                                        noise=noise if loss == "negative_sampling" else None, loss_centres=3)
    assert predictions == sum(1 for i, _ in steps if i < 3) and total > 0
    torch.testing.assert_close(trainer.input_vectors, syn0)
    torch.testing.assert_close(trainer.output_vectors, syn1)


def test_the_interpolated_sigmoid_is_within_2e_6_of_the_exact_one():
    from hf_seqmodels.embeddings.word2vec_steps import _sigmoid

    for f in np.concatenate([np.linspace(-8, 8, 2001), [-6.0, np.nextafter(6.0, 0.0), 6.0, -5.9999995]]):
        f = np.float32(f)
        assert abs(_sigmoid(f) - 1 / (1 + math.exp(-float(f)))) < 2e-6, f


def test_noise_words_of_the_wrong_shape_are_refused():
    vocab = Vocabulary(["a", "b", "c"], [5, 3, 2])
    trainer = Word2VecTrainer(vocab, Word2VecConfig(architecture="skipgram", vector_size=4, negative=2))
    with pytest.raises(ValueError, match=r"`noise`.*\(3, 2\)"):  # 3 (context, centre) pairs, 2 noise words each
        trainer.update(np.array([0, 1, 2]), np.array([0, -1, -1]), np.array([1, 1, 1]), lr=0.1,
                       noise=np.zeros((2, 2), dtype=np.int32))


def test_a_chunk_reads_only_its_raw_words():
    """Subsampling and windows work chunk by chunk (memory bounded by ``chunk_words``, not the corpus): a
    window stops at its chunk's ends and reaches at most ``window`` words each side."""
    words = [f"w{i}" for i in range(100)]
    vocab = Vocabulary.from_sentences([words], min_count=1)  # ties keep first occurrence: w_i has id i
    corpus = vocab.encode_sentences([words])
    trainer = Word2VecTrainer(vocab, Word2VecConfig(vector_size=4, window=3, sample=0.0, chunk_words=10))
    rng = np.random.default_rng(0)
    for index in range(10):
        kept, ids, lo, counts = trainer._windows(corpus, 10 * index, 10 * index + 10, rng)
        assert ids.tolist() == list(range(10 * index, 10 * index + 10))  # no subsampling: every word kept
        first, last = np.arange(10) + lo, np.arange(10) + lo + counts
        assert (first >= 0).all() and (last <= 9).all() and (lo >= -3).all() and (last - np.arange(10) <= 3).all()
        assert (counts >= 1).all()


def test_trained_vectors_share_the_input_matrix(topic_corpus):
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    trainer = Word2VecTrainer(vocab, Word2VecConfig.from_preset("tiny", epochs=1))
    vectors = trainer.train(vocab.encode_files(topic_corpus), progress=False)
    assert vectors.vectors.data_ptr() == trainer.input_vectors.data_ptr()  # no copy at the end of training
    assert trainer.word_vectors().vectors.data_ptr() != trainer.input_vectors.data_ptr()  # a copy on demand


def test_worker_threads_train_the_shared_matrices(topic_corpus):
    vocab = Vocabulary.from_files(topic_corpus, min_count=1)
    config = Word2VecConfig(vector_size=16, window=3, sample=0.0, epochs=3, chunk_words=512, workers=2)
    assert_topics_separate(Word2VecTrainer(vocab, config).train(vocab.encode_files(topic_corpus), progress=False))
    with pytest.raises(ValueError, match="`workers`=0"):
        Word2VecConfig(workers=0)


def test_streamed_cooccurrence_counts_with_spilled_runs_equal_counting_at_once():
    rng = np.random.default_rng(0)
    sentences = [[f"w{i}" for i in rng.zipf(1.3, size=rng.integers(2, 30)) % 50] for _ in range(300)]
    vocab = Vocabulary.from_sentences(sentences, min_count=1)
    corpus = vocab.encode_sentences(sentences)
    at_once = count_cooccurrences(corpus, len(vocab), window=4, chunk_tokens=10**9)
    streamed = count_cooccurrences(corpus, len(vocab), window=4, chunk_tokens=37, max_entries=200)
    np.testing.assert_array_equal(streamed.rows, at_once.rows)
    np.testing.assert_array_equal(streamed.cols, at_once.cols)
    np.testing.assert_allclose(streamed.values, at_once.values)
    assert len(at_once) > 4 * 200  # several spilled runs and several merge blocks
    # by hand: the pairs of every sentence, distance d weighted 1/d
    expected: dict[tuple[int, int], float] = {}
    for tokens in sentences:
        ids = [vocab.word_to_index[t] for t in tokens]
        for x in range(len(ids)):
            for y in range(max(0, x - 4), min(len(ids), x + 5)):
                if y != x:
                    expected[ids[x], ids[y]] = expected.get((ids[x], ids[y]), 0.0) + 1 / abs(x - y)
    assert len(expected) == len(at_once)
    got = dict(zip(zip(at_once.rows.tolist(), at_once.cols.tolist(), strict=True), at_once.values.tolist(),
                   strict=True))
    assert all(got[key] == pytest.approx(value) for key, value in expected.items())


def test_word_pair_evaluation_is_spearmans_rank_correlation(toy_vectors, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("# comment\nking\tqueen\t7\nking\tprince\t9\nman\tprince\t1\nWOMAN\tqueen\t6\nking\tzebra\t3\n")
    result = toy_vectors.evaluate_word_pairs(pairs)
    assert (result.pairs, result.skipped) == (4, 1)
    cosines = [toy_vectors.similarity(a, b) for a, b in [("king", "queen"), ("king", "prince"), ("man", "prince"),
                                                          ("woman", "queen")]]
    human = [7, 9, 1, 6]
    rank = {v: r for r, v in enumerate(sorted(cosines))}  # no ties here: Pearson of the ranks
    d2 = sum((rank[c] - sorted(human).index(h)) ** 2 for c, h in zip(cosines, human, strict=True))
    assert result.spearman == pytest.approx(1 - 6 * d2 / (4 * (16 - 1)))
    assert _spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))  # tied: mean rank
    pairs.write_text("king queen 7\n")
    with pytest.raises(ValueError, match="line 1 .*word_a<TAB>word_b<TAB>score"):
        toy_vectors.evaluate_word_pairs(pairs)


def _glove_c_entry(params: dict, squared: dict, i: int, j: int, x: float, eta: float, x_max: float) -> float:
    """glove.c's update of one co-occurrence entry, written out coordinate by coordinate (returns ½ f diff²)."""
    w, c = params["word"][i], params["context"][j]
    diff = float(w @ c) + float(params["word_bias"][i]) + float(params["context_bias"][j]) - math.log(x)
    fdiff = (1.0 if x > x_max else (x / x_max) ** 0.75) * diff
    cost = 0.5 * fdiff * diff
    fdiff *= eta  # glove.c: "fdiff *= eta", so gradsq sums (eta * gradient)^2
    temp1, temp2 = fdiff * c.clone(), fdiff * w.clone()
    w -= temp1 / squared["word"][i].sqrt()
    c -= temp2 / squared["context"][j].sqrt()
    squared["word"][i] += temp1 * temp1
    squared["context"][j] += temp2 * temp2
    params["word_bias"][i] -= fdiff / squared["word_bias"][i].sqrt()
    params["context_bias"][j] -= fdiff / squared["context_bias"][j].sqrt()
    squared["word_bias"][i] += fdiff * fdiff
    squared["context_bias"][j] += fdiff * fdiff
    return cost


def _random_glove_trainer(size: int, learning_rate: float = 0.05) -> GloVeTrainer:
    vocab = Vocabulary([f"w{k}" for k in range(size)], list(range(size, 0, -1)))
    trainer = GloVeTrainer(vocab, GloVeConfig(vector_size=4, learning_rate=learning_rate, x_max=10.0))
    generator = torch.Generator().manual_seed(0)
    for p in trainer._parameters().values():
        p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).float())
    for g_sq in trainer.squared.values():
        g_sq.uniform_(1.0, 3.0, generator=generator)  # as after earlier steps
    return trainer


def test_glove_batch_of_distinct_rows_is_glove_c_entry_by_entry():
    """Entries with distinct words and distinct context words: the batch step is glove.c's loop over them, with
    the accumulator summing (η g)² (summing g² instead shrinks every later step 1/η = 20 times more)."""
    trainer = _random_glove_trainer(6, learning_rate=0.2)
    params = {name: p.clone() for name, p in trainer._parameters().items()}
    squared = {name: g.clone() for name, g in trainer.squared.items()}
    entries = [(0, 3, 4.0), (1, 5, 30.0), (4, 0, 0.5)]
    expected_cost = sum(_glove_c_entry(params, squared, i, j, x, 0.2, 10.0) for i, j, x in entries)
    i, j, x = (torch.tensor(column) for column in zip(*entries, strict=True))
    cost = trainer._step(i, j, x.float().log(), glove_weight(x.float(), 10.0, 0.75))
    assert cost == pytest.approx(expected_cost, rel=1e-5)
    for name, p in trainer._parameters().items():
        torch.testing.assert_close(p, params[name], msg=name)
        torch.testing.assert_close(trainer.squared[name], squared[name], msg=name)


def test_glove_row_in_several_entries_takes_each_entrys_step_and_their_squares():
    """A word in two entries of a batch: each entry's glove.c step from the batch's start, summed; the accumulator
    grows by the sum of their squares (as two updates would), not by the square of the summed gradient."""
    trainer = _random_glove_trainer(5)
    entries = [(2, 0, 3.0), (2, 4, 12.0)]
    starts = []
    for i, j, x in entries:  # each entry alone, from the same start
        params = {name: p.clone() for name, p in trainer._parameters().items()}
        squared = {name: g.clone() for name, g in trainer.squared.items()}
        _glove_c_entry(params, squared, i, j, x, 0.05, 10.0)
        starts.append((params, squared))
    before = {name: p.clone() for name, p in trainer._parameters().items()}
    squared_before = {name: g.clone() for name, g in trainer.squared.items()}
    i, j, x = (torch.tensor(column) for column in zip(*entries, strict=True))
    trainer._step(i, j, x.float().log(), glove_weight(x.float(), 10.0, 0.75))
    for name, p in trainer._parameters().items():
        moved = sum(params[name] - before[name] for params, _ in starts)
        grown = sum(squared[name] - squared_before[name] for _, squared in starts)
        torch.testing.assert_close(p, before[name] + moved, msg=name)
        torch.testing.assert_close(trainer.squared[name], squared_before[name] + grown, msg=name)
