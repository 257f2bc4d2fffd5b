"""LinearChainCRF against brute-force enumeration of every tag sequence on tiny inputs."""

from __future__ import annotations

import itertools

import pytest
import torch

from hf_seqmodels.models.crf import IMPOSSIBLE, LinearChainCRF, bio_allowed_transitions

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def random_crf(constraints=None, seed=0) -> LinearChainCRF:
    torch.manual_seed(seed)
    crf = LinearChainCRF(len(LABELS), dict(enumerate(LABELS)), constraints=constraints)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf.double()


def brute_force_score(crf: LinearChainCRF, emissions: torch.Tensor, tags: tuple[int, ...]) -> torch.Tensor:
    """The notes' S(C, t) written out term by term, with the constraints as IMPOSSIBLE scores."""
    allowed_start, allowed = bio_allowed_transitions(LABELS) if crf.constraints else (None, None)

    def start(j):
        return IMPOSSIBLE if allowed_start and not allowed_start[j] else crf.start_transitions[j]

    def link(i, j):
        return IMPOSSIBLE if allowed and not allowed[i][j] else crf.transitions[i, j]

    score = start(tags[0]) + emissions[0, tags[0]]
    for previous, tag, row in zip(tags, tags[1:], emissions[1:], strict=False):
        score = score + link(previous, tag) + row[tag]
    return score + crf.end_transitions[tags[-1]]


def all_paths(length: int):
    return list(itertools.product(range(len(LABELS)), repeat=length))


@pytest.mark.parametrize("constraints", [None, "BIO"])
def test_log_likelihood_viterbi_and_max_marginals_equal_brute_force(constraints):
    crf = random_crf(constraints)
    torch.manual_seed(1)
    emissions = torch.randn(3, 4, len(LABELS), dtype=torch.float64)
    # row 0 full, row 1 right-padded, row 2 with holes (ignored positions inside the sequence)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [0, 1, 0, 1]], dtype=torch.bool)
    gold = torch.tensor([[1, 2, 0, 3], [3, 4, 4, -100], [-100, 1, -100, 2]])
    nll = crf.neg_log_likelihood(emissions, gold, mask)
    tags, best = crf.viterbi_decode(emissions, mask)
    marginals = crf.max_marginals(emissions, mask)
    for row in range(3):
        kept = mask[row].nonzero().squeeze(1)
        e = emissions[row, kept]
        paths = all_paths(len(kept))
        scores = torch.stack([brute_force_score(crf, e, p) for p in paths])
        gold_path = tuple(gold[row, kept].tolist())
        expected_nll = torch.logsumexp(scores, 0) - brute_force_score(crf, e, gold_path)
        torch.testing.assert_close(nll[row], expected_nll)
        torch.testing.assert_close(crf.path_score(emissions, gold, mask)[row], brute_force_score(crf, e, gold_path))
        best_path = paths[int(scores.argmax())]
        assert tuple(tags[row, kept].tolist()) == best_path
        assert (tags[row, ~mask[row]] == -100).all()
        torch.testing.assert_close(best[row], scores.max())
        for i, position in enumerate(kept.tolist()):  # m_i(y) = max over paths with tag y at i
            for y in range(len(LABELS)):
                through = scores[[k for k, p in enumerate(paths) if p[i] == y]].max()
                torch.testing.assert_close(marginals[row, position, y], through)
        assert marginals[row, kept].argmax(-1).tolist() == list(best_path)
        torch.testing.assert_close(marginals[row, ~mask[row]], emissions[row, ~mask[row]])


def test_argmax_of_max_marginals_is_viterbi_on_a_larger_batch():
    crf = random_crf("BIO", seed=3)
    torch.manual_seed(4)
    emissions = torch.randn(16, 12, len(LABELS), dtype=torch.float64) * 3
    mask = torch.rand(16, 12) > 0.2
    tags, _ = crf.viterbi_decode(emissions, mask)
    assert torch.equal(crf.max_marginals(emissions, mask).argmax(-1)[mask], tags[mask])


def test_bio_constraints_never_decode_an_invalid_sequence():
    crf = random_crf("BIO", seed=5)
    with torch.no_grad():  # make invalid moves attractive: I- tags everywhere score highest
        crf.transitions.fill_(0)
        crf.start_transitions[[2, 4]] = 50.0
    torch.manual_seed(6)
    emissions = torch.randn(32, 9, len(LABELS), dtype=torch.float64)
    emissions[..., [2, 4]] += 5.0
    emissions[:, ::2, 4] += 5.0  # ... and alternating I-PER / I-LOC
    tags, _ = crf.viterbi_decode(emissions, torch.ones(32, 9, dtype=torch.bool))
    for row in tags.tolist():
        labels = [LABELS[t] for t in row]
        for previous, label in zip(["O"] + labels, labels, strict=False):
            if label.startswith("I-"):
                assert previous in ("B-" + label[2:], label), labels
    unconstrained, _ = random_crf(None, seed=5).viterbi_decode(emissions, torch.ones(32, 9, dtype=torch.bool))
    assert (unconstrained[:, 0] % 2 == 0).any()  # without constraints some sentences do start with I-


def test_padding_does_not_change_anything():
    crf = random_crf("BIO", seed=7)
    torch.manual_seed(8)
    short = torch.randn(1, 3, len(LABELS), dtype=torch.float64)
    padded = torch.cat([short, torch.randn(1, 4, len(LABELS), dtype=torch.float64)], dim=1)
    tags = torch.tensor([[1, 2, 0]])
    padded_tags = torch.tensor([[1, 2, 0, 3, 3, 3, 3]])
    mask = torch.tensor([[1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    full = torch.ones(1, 3, dtype=torch.bool)
    torch.testing.assert_close(crf.neg_log_likelihood(padded, padded_tags, mask), crf.neg_log_likelihood(short, tags, full))
    assert torch.equal(crf.viterbi_decode(padded, mask)[0][:, :3], crf.viterbi_decode(short, full)[0])
    torch.testing.assert_close(crf.max_marginals(padded, mask)[:, :3], crf.max_marginals(short, full))


def test_an_empty_row_has_zero_loss_and_gradients_stay_finite():
    crf = random_crf("BIO", seed=9).float()
    emissions = torch.randn(2, 3, len(LABELS), requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]], dtype=torch.bool)
    nll = crf.neg_log_likelihood(emissions, torch.tensor([[1, 2, -100], [-100] * 3]), mask)
    assert nll[1] == 0 and nll[0] > 0
    nll.sum().backward()
    assert torch.isfinite(emissions.grad).all() and torch.isfinite(crf.transitions.grad).all()


@pytest.mark.parametrize("bad", ["X-FOO", "I-", "B-", "PER", "b-PER"])
def test_labels_that_are_not_bio_are_named_in_the_error(bad):
    with pytest.raises(ValueError, match=f"Invalid label '{bad}'.*'O', 'B-<type>' and 'I-<type>'"):
        LinearChainCRF(3, {0: "O", 1: bad, 2: "B-LOC"}, constraints="BIO")


def test_bio_rules():
    allowed_start, allowed = bio_allowed_transitions(LABELS)
    assert allowed_start == [True, True, False, True, False]
    assert [LABELS[i] for i in range(5) if allowed[i][2]] == ["B-PER", "I-PER"]
    assert all(allowed[i][j] for i in range(5) for j in (0, 1, 3))


def test_forbidden_positions_follow_the_previous_unmasked_tag():
    crf = random_crf("BIO")
    torch.manual_seed(10)
    tags = torch.randint(0, len(LABELS), (20, 7))
    mask = torch.rand(20, 7) > 0.3
    forbidden = crf.forbidden_positions(tags, mask)
    for row in range(20):
        previous = "O"  # the start: I-X is forbidden there as after O
        for t in range(7):
            if not mask[row, t]:
                assert not forbidden[row, t]
                continue
            label = LABELS[tags[row, t]]
            assert bool(forbidden[row, t]) == (label.startswith("I-") and previous not in ("B-" + label[2:], label))
            previous = label
    assert forbidden.any() and not random_crf(None).forbidden_positions(tags, mask).any()


def test_unnamed_labels_give_no_constraints_and_a_warning(caplog):
    with caplog.at_level("WARNING"):
        crf = LinearChainCRF(3, {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, constraints="BIO")
    assert crf.constraints is None and "unnamed" in caplog.text
    assert all(all(row) for row in crf.allowed_masks()[1].tolist())


@pytest.mark.parametrize("method", ["neg_log_likelihood", "viterbi_decode", "max_marginals"])
def test_every_recursion_compiles_to_one_graph(method):
    """The CRF reads no tensor value in Python, so compile(fullgraph=True) traces it whole (the tagger's graph
    breaks are in the recurrent stack only) and gives the eager results, masks with holes and empty rows included."""
    crf = random_crf("BIO", seed=4)
    emissions = torch.randn(3, 6, len(LABELS), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1] * 6, [1, 1, 0, 1, 1, 0], [0] * 6], dtype=torch.bool)
    args = (emissions, torch.zeros(3, 6, dtype=torch.long), mask) if method == "neg_log_likelihood" else (emissions, mask)
    torch._dynamo.reset()
    compiled = torch.compile(getattr(crf, method), fullgraph=True, backend="eager")(*args)
    eager = getattr(crf, method)(*args)
    for got, expected in zip(*(x if isinstance(x, tuple) else (x,) for x in (compiled, eager)), strict=True):
        assert torch.equal(got, expected)
