"""Tests of the n-gram language model (``hf_seqmodels.ngram``) and ``training/train_ngram.py``."""

from __future__ import annotations

import json
import math
import runpy
import sys
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from hf_seqmodels.ngram import NGramConfig, NGramLanguageModel
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.classic.ngram_cli import main

REPO = Path(__file__).resolve().parents[1]
PAD, UNK, BOS, EOS, A, B, C = range(7)  # our tokenizers' special ids, then three words
# Padded (bigram): <bos> a b <eos> | <bos> a c <eos> | <bos> b a b <eos>
HAND_CORPUS = [[A, B], [A, C], [B, A, B]]
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 20


def random_corpus(seed: int, vocab_size: int = 12, sequences: int = 30) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(4, vocab_size, size=rng.integers(0, 9)).tolist() for _ in range(sequences)]


def every_context(order: int, vocab_size: int, seed: int = 0) -> list[list[int]]:
    """Contexts to check: empty, short (bos-padded), seen and unseen ones of full length."""
    rng = np.random.default_rng(seed)
    return [[]] + [rng.integers(3, vocab_size, size=length).tolist() for length in range(1, order + 2) for _ in range(6)]


# ---------------------------------------------------------------- distributions


@pytest.mark.parametrize("smoothing", ["add_k", "kneser_ney"])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_probabilities_sum_to_one_for_every_context(smoothing, order):
    model = NGramLanguageModel(order=order, smoothing=smoothing, k=0.5, vocab_size=12).fit(random_corpus(0))
    for context in every_context(order, 12):
        probs = model.next_token_probs(context)
        assert probs.shape == (12,)
        assert probs[BOS] == 0 and probs[PAD] == 0
        assert (probs[model.config.outcome_mask] > 0).all()
        assert math.isclose(probs.sum(), 1.0, abs_tol=1e-12), (context, probs.sum())


def test_kneser_ney_bigram_matches_hand_computation():
    """Bigram counts: (B,a)=2 (a,b)=2 (b,E)=2 (a,c)=1 (c,E)=1 (B,b)=1 (b,a)=1; |V| = 5 (unk, eos, a, b, c).

    D_2 = n1/(n1 + 2 n2) = 4/(4 + 6). Continuation counts N1+(•w): a: {B, b} = 2, b: {a, B} = 2,
    c: {a} = 1, eos: {b, c} = 2, total 7 over 4 types; D_1 = 1/(1 + 2·3).
    """
    model = NGramLanguageModel(order=2, smoothing="kneser_ney", vocab_size=7).fit(HAND_CORPUS)
    d1, d2 = Fraction(1, 7), Fraction(4, 10)
    unigram = {w: (max(c - d1, 0) / 7 + d1 * 4 / 7 * Fraction(1, 5)) for w, c in
               {UNK: 0, EOS: 2, A: 2, B: 2, C: 1}.items()}
    assert unigram[A] == Fraction(69, 245)
    after_a = {B: (2 - d2) / 3 + d2 * 2 / 3 * unigram[B], C: (1 - d2) / 3 + d2 * 2 / 3 * unigram[C],
               EOS: d2 * 2 / 3 * unigram[EOS], UNK: d2 * 2 / 3 * unigram[UNK], A: d2 * 2 / 3 * unigram[A]}
    assert model.discounts == pytest.approx([float(d1), float(d2)])
    probs = model.next_token_probs([A])
    for w, expected in after_a.items():
        assert probs[w] == pytest.approx(float(expected), rel=1e-12)
    # a context never seen (c is only followed by eos; unk never occurs): the unigram distribution
    assert model.next_token_probs([UNK])[A] == pytest.approx(float(unigram[A]), rel=1e-12)


def test_kneser_ney_trigram_matches_hand_computation():
    """P(a | <bos> <bos>) of a trigram model: raw counts at order 3, and the bigram (<bos>, w) keeps its
    raw count (only <bos> can precede it).

    Trigrams: (B,B,a)=2 (a,b,E)=2 (B,a,b) (B,a,c) (a,c,E) (B,B,b) (B,b,a) (b,a,b) = 1 → D_3 = 6/(6 + 4).
    Bigram c_KN: (B,a)=2 (B,b)=1 raw; (a,b)=|{B, b}|=2, (b,E) (a,c) (c,E) (b,a) = 1 → D_2 = 5/(5 + 4).
    """
    model = NGramLanguageModel(order=3, smoothing="kneser_ney", vocab_size=7).fit(HAND_CORPUS)
    d1, d2, d3 = Fraction(1, 7), Fraction(5, 9), Fraction(6, 10)
    unigram_a = Fraction(69, 245)  # as in the bigram test: same continuation counts
    bigram_a = (2 - d2) / 3 + d2 * 2 / 3 * unigram_a  # context <bos>: c_KN (B,a)=2, (B,b)=1
    trigram_a = (2 - d3) / 3 + d3 * 2 / 3 * bigram_a  # context <bos> <bos>: (B,B,a)=2, (B,B,b)=1
    assert model.discounts == pytest.approx([float(d1), float(d2), float(d3)])
    assert model.next_token_probs([])[A] == pytest.approx(float(trigram_a), rel=1e-12)
    assert model.score([A], add_eos=False)[0] == pytest.approx(math.log(trigram_a), rel=1e-12)


def test_add_k_matches_hand_computation():
    """Laplace bigram: P(w | h) = (c(h, w) + 1) / (c(h) + |V|), |V| = 5."""
    model = NGramLanguageModel.from_preset("bigram-laplace", vocab_size=7).fit(HAND_CORPUS)
    assert model.next_token_probs([A])[B] == pytest.approx(3 / 8)  # (2 + 1) / (3 + 5)
    assert model.next_token_probs([B])[C] == pytest.approx(1 / 8)  # (0 + 1) / (3 + 5)
    assert model.next_token_probs([C])[EOS] == pytest.approx(2 / 6)  # (1 + 1) / (1 + 5)
    assert model.next_token_probs([UNK])[A] == pytest.approx(1 / 5)  # unseen context: uniform
    # log P(a b <eos>) = log P(a|<bos>) + log P(b|a) + log P(<eos>|b), P(a|<bos>) = (2+1)/(3+5), P(eos|b) = (2+1)/(3+5)
    assert model.log_prob([A, B]) == pytest.approx(math.log(3 / 8) + math.log(3 / 8) + math.log(3 / 8))
    k = NGramLanguageModel(order=2, smoothing="add_k", k=0.25, vocab_size=7).fit(HAND_CORPUS)
    assert k.next_token_probs([A])[B] == pytest.approx((2 + 0.25) / (3 + 0.25 * 5))


def reference_kneser_ney(corpus: list[list[int]], order: int, vocab: list[int], bos: int, eos: int):
    """Interpolated Kneser–Ney written directly from the formulas with dictionaries of tuples."""
    grams = [Counter() for _ in range(order + 1)]
    padded = [[bos] * (order - 1) + s + [eos] for s in corpus]
    for s in padded:
        for i in range(order - 1, len(s)):
            for k in range(1, order + 1):
                grams[k][tuple(s[i - k + 1:i + 1])] += 1
    kn = [None] * (order + 1)
    kn[order] = grams[order]
    for k in range(1, order):
        kn[k] = Counter()
        for gram in grams[k + 1]:
            kn[k][gram[1:]] += 1
        for gram in grams[k]:
            if k > 1 and gram[0] == bos:
                kn[k][gram] = grams[k][gram]
    totals, types, discounts = [defaultdict(int) for _ in kn], [defaultdict(int) for _ in kn], [None]
    for k in range(1, order + 1):
        for gram, c in kn[k].items():
            totals[k][gram[:-1]] += c
            types[k][gram[:-1]] += 1
        n1, n2 = sum(c == 1 for c in kn[k].values()), sum(c == 2 for c in kn[k].values())
        discounts.append(n1 / (n1 + 2 * n2) if n1 else 0.5)

    def prob(context: tuple, w: int) -> float:
        p = 1 / len(vocab)
        for k in range(1, order + 1):
            h = context[len(context) - k + 1:] if k > 1 else ()
            if totals[k].get(h):
                d = discounts[k]
                p = max(kn[k][h + (w,)] - d, 0) / totals[k][h] + d * types[k][h] / totals[k][h] * p
        return p

    return prob


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_kneser_ney_matches_a_direct_implementation(order):
    corpus = random_corpus(order, vocab_size=9, sequences=40)
    model = NGramLanguageModel(order=order, smoothing="kneser_ney", vocab_size=9).fit(corpus)
    reference = reference_kneser_ney(corpus, order, vocab=[UNK, EOS] + list(range(4, 9)), bos=BOS, eos=EOS)
    for held_out in random_corpus(100 + order, vocab_size=9, sequences=5):
        context = [BOS] * (order - 1)
        expected = []
        for w in held_out + [EOS]:
            expected.append(math.log(reference(tuple(context[len(context) - order + 1:] if order > 1 else []), w)))
            context.append(w)
        np.testing.assert_allclose(model.score(held_out), expected, rtol=1e-12)


@pytest.mark.parametrize("smoothing", ["add_k", "kneser_ney"])
def test_uniform_model_perplexity_is_the_vocabulary_size(smoothing):
    """A unigram model of a corpus holding every token once is uniform (KN: D = n1/(n1+2 n2) = 1)."""
    config = dict(order=1, smoothing=smoothing, vocab_size=6, pad_token_id=None, unk_token_id=None,
                  bos_token_id=None, eos_token_id=None)
    model = NGramLanguageModel(**config).fit([[0, 1, 2, 3, 4, 5]])
    assert model.config.num_outcomes == 6
    assert model.perplexity([[3, 1, 4, 1, 5], [0, 2]]) == pytest.approx(6.0, rel=1e-12)


def test_perplexity_is_exp_of_mean_negative_log_prob():
    model = NGramLanguageModel.from_preset("trigram-kneser-ney", vocab_size=12).fit(random_corpus(1))
    held_out = random_corpus(2, sequences=4)
    log_probs = [model.log_prob(s) for s in held_out]
    tokens = sum(len(s) + 1 for s in held_out)  # each sequence's <eos> is predicted too
    assert model.perplexity(held_out) == pytest.approx(math.exp(-sum(log_probs) / tokens), rel=1e-12)
    stream = model.evaluate(held_out[0], add_eos=False)
    assert stream["tokens"] == len(held_out[0])


def test_unseen_token_of_the_vocabulary_gets_probability():
    model = NGramLanguageModel.from_preset("trigram-kneser-ney", vocab_size=20).fit(random_corpus(3))
    assert np.isfinite(model.log_prob([19, 19, 4, 19]))  # id 19 never occurs in training


# ---------------------------------------------------------------- fitting from text, saving, sampling


@pytest.fixture(scope="module")
def char_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(CORPUS)
    return train_tokenizer([str(path)], kind="char")


def test_fit_with_a_tokenizer_equals_fit_on_its_ids(char_tokenizer):
    lines = CORPUS.splitlines()
    from_text = NGramLanguageModel.from_preset("trigram-kneser-ney").fit(lines, tokenizer=char_tokenizer)
    assert from_text.config.vocab_size == len(char_tokenizer)
    assert from_text.config.eos_token_id == char_tokenizer.eos_token_id
    ids = char_tokenizer(lines, add_special_tokens=False)["input_ids"]
    from_ids = NGramLanguageModel(from_text.config).fit(ids)
    held_out = char_tokenizer(["the cat sat on the log."], add_special_tokens=False)["input_ids"]
    assert from_text.perplexity(held_out) == from_ids.perplexity(held_out)


@pytest.mark.parametrize("smoothing", ["add_k", "kneser_ney"])
def test_save_and_load_give_identical_scores(tmp_path, smoothing):
    model = NGramLanguageModel(order=3, smoothing=smoothing, k=0.1, vocab_size=12).fit(random_corpus(4))
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "ngram_counts.safetensors"]
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "hfsm_ngram" and saved["order"] == 3
    assert all(a.dtype == np.int64 for a in safetensors.numpy.load_file(tmp_path / "ngram_counts.safetensors").values())
    loaded = NGramLanguageModel.from_pretrained(tmp_path)
    assert loaded.config == model.config
    assert loaded.discounts == model.discounts
    held_out = random_corpus(5, sequences=6)
    np.testing.assert_array_equal(loaded.token_log_probs(held_out), model.token_log_probs(held_out))


def test_sampling_is_reproducible_and_follows_the_distribution():
    model = NGramLanguageModel.from_preset("trigram-kneser-ney", vocab_size=12).fit(random_corpus(6))
    first = model.generate([4, 5], max_new_tokens=40, seed=7, stop_at_eos=False)
    assert first[:2] == [4, 5] and len(first) == 42
    assert model.generate([4, 5], max_new_tokens=40, seed=7, stop_at_eos=False) == first
    assert model.generate([4, 5], max_new_tokens=40, seed=8, stop_at_eos=False) != first
    greedy = model.generate([4], max_new_tokens=1, do_sample=False)
    assert greedy[-1] == int(np.argmax(model.next_token_probs([4])))
    stops = model.generate([], max_new_tokens=500, seed=0)
    assert EOS not in stops[:-1]
    # a unigram model's samples: empirical frequencies close to P(w) (4000 draws: within 0.03)
    unigram = NGramLanguageModel(order=1, smoothing="add_k", vocab_size=12).fit(random_corpus(6))
    draws = unigram.generate([], max_new_tokens=4000, seed=0, stop_at_eos=False)
    frequencies = np.bincount(draws, minlength=12) / len(draws)
    np.testing.assert_allclose(frequencies, unigram.next_token_probs([]), atol=0.03)
    # temperature sharpens: a cold sample is mostly the argmax
    cold = unigram.generate([], max_new_tokens=200, seed=0, temperature=0.05, stop_at_eos=False)
    assert Counter(cold).most_common(1)[0][0] == int(np.argmax(unigram.next_token_probs([])))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(("fields", "message"), [
    (dict(order=0), "`order`=0: expected an integer >= 1"),
    (dict(order=2.5), "`order`=2.5"),
    (dict(smoothing="witten_bell"), "`smoothing`='witten_bell': expected one of 'add_k', 'kneser_ney'"),
    (dict(smoothing="add_k", k=0), "`k`=0: expected a positive number"),
    (dict(smoothing="add_k", k=-1.0), "`k`=-1.0"),
    (dict(discount=1.5), "`discount`=1.5: expected None, or numbers in (0, 1]"),
    (dict(order=2, discount=[0.5]), "expected a list of order=2 discounts"),
    (dict(smoothing="add_k", discount=0.5), "add-k has no discount"),
    (dict(order=2, bos_token_id=None), "`bos_token_id`=None: expected a token id: an order-2 model pads"),
    (dict(eos_token_id=2), "`eos_token_id`=2: expected an id other than bos_token_id"),
    (dict(vocab_size=3), "`eos_token_id`=3: expected None or a token id in [0, vocab_size=3)"),
    (dict(vocab_size=0), "`vocab_size`=0"),
])
def test_config_errors_name_field_value_and_allowed(fields, message):
    with pytest.raises(ValueError, match=None) as error:
        NGramConfig(**fields)
    assert message in str(error.value)


def test_input_errors():
    model = NGramLanguageModel(order=2, vocab_size=8)
    with pytest.raises(RuntimeError, match="not fitted"):
        model.perplexity([[4]])
    with pytest.raises(ValueError, match="Empty training corpus"):
        model.fit([[], []])
    with pytest.raises(ValueError, match=r"Invalid token id 9 at position 1 of sequence 1: expected ids in \[0, "
                                         r"vocab_size=8\)"):
        model.fit([[4, 5], [6, 9]])
    with pytest.raises(ValueError, match=r"token id 2 at position 0 of sequence 0: expected no <bos>/<pad>"):
        model.fit([[BOS, 4]])
    with pytest.raises(TypeError, match="got text"):
        model.fit(["some text"])
    with pytest.raises(TypeError, match="integer token ids"):
        model.fit([[4.5, 5.0]])
    with pytest.raises(ValueError, match="`vocab_size`=None"):
        NGramLanguageModel(order=2).fit([[4, 5]])
    model.fit([[4, 5, 6]])
    with pytest.raises(ValueError, match="token id -1"):
        model.score([4, -1])
    with pytest.raises(ValueError, match="`temperature`=0"):
        model.generate([4], temperature=0)
    with pytest.raises(ValueError, match="Nothing to score"):
        model.evaluate([[]], add_eos=False)
    with pytest.raises(ValueError, match="`preset`='4gram'"):
        NGramLanguageModel.from_preset("4gram")


def test_from_pretrained_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        NGramLanguageModel.from_pretrained(tmp_path)
    NGramLanguageModel(order=2, vocab_size=8).fit([[4, 5]]).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "hfsm_rnn"}))
    with pytest.raises(ValueError, match="`model_type`='hfsm_rnn'"):
        NGramLanguageModel.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "order": 3}))
    with pytest.raises(ValueError, match="lacks the arrays"):
        NGramLanguageModel.from_pretrained(tmp_path)


# ---------------------------------------------------------------- command line


def test_command_line_fits_evaluates_and_saves(tmp_path, capsys):
    text = tmp_path / "train.txt"
    text.write_text(CORPUS)
    out = tmp_path / "run"
    results = main(["--train_file", str(text), "--tokenizer_kind", "char", "--preset", "trigram-kneser-ney",
                    "--order", "4", "--output_dir", str(out), "--num_sample_tokens", "30", "--prompt", "the "])
    assert "Validation perplexity" in capsys.readouterr().out
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved["order"] == 4 and saved["smoothing"] == "kneser_ney" and saved["sample"].startswith("the ")
    from transformers import AutoTokenizer

    model, tokenizer = NGramLanguageModel.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    validation = CORPUS[int(len(CORPUS) * 0.9):]  # the CLI's default split: the last 10 % of the characters
    ids = tokenizer(validation, add_special_tokens=False)["input_ids"]
    assert results["eval_tokens"] == len(ids)
    assert saved["eval_loss"] == pytest.approx(model.evaluate(ids, add_eos=False)["loss"], rel=1e-12)
    assert saved["eval_perplexity"] == pytest.approx(math.exp(saved["eval_loss"]))


def test_command_line_line_by_line_and_script(tmp_path, monkeypatch):
    train, validation = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text(CORPUS)
    validation.write_text("the cat sat on the log.\nthe dog sat.\n")
    out, script = tmp_path / "run", REPO / "training" / "train_ngram.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--train_file", str(train), "--validation_file", str(validation),
                                      "--tokenizer_kind", "word", "--line_by_line", "--smoothing", "add_k", "--k", "0.5",
                                      "--order", "2", "--num_sample_tokens", "0", "--output_dir", str(out)])
    with pytest.raises(SystemExit) as finished:
        runpy.run_path(str(script), run_name="__main__")
    assert finished.value.code == 0
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved["eval_tokens"] == 7 + 1 + 4 + 1  # words and punctuation of both lines, plus one <eos> each
    assert saved["smoothing"] == "add_k" and "sample" not in saved


def test_hf_seqmodels_ngram_subcommand(tmp_path, capsys):
    from hf_seqmodels.cli import main as hf_seqmodels_main

    text = tmp_path / "train.txt"
    text.write_text(CORPUS)
    assert hf_seqmodels_main(["ngram", "--train_file", str(text), "--preset", "bigram-laplace",
                              "--num_sample_tokens", "0", "--output_dir", str(tmp_path / "run")]) == 0
    assert "Validation perplexity" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "eval_results.json").read_text())["smoothing"] == "add_k"
