"""Plackett-Luce: sampling frequencies against exact probabilities, log-probabilities against
a brute force in 60-digit decimal arithmetic (no overflow even for scores of +-1000)."""

import itertools
from decimal import Decimal, localcontext

import numpy as np
import pytest
from scipy import stats

from fltr_audit.engine.plackett_luce import gumbel_noise, log_denominators, log_prob, perturbed_topk, sample_topk, topk


def _brute_log_dens(scores, valid, ranking):
    """log of sum exp(s_j) over valid j not placed before each position, in Decimal."""
    with localcontext() as ctx:
        ctx.prec = 60
        out, placed = [], set()
        for r in ranking:
            total = sum(
                (Decimal(float(s)).exp() for j, s in enumerate(scores)
                 if valid[j] and j not in placed and s != -np.inf),
                Decimal(0),
            )
            out.append(float(total.ln()) if total > 0 else -np.inf)
            if r >= 0:
                placed.add(r)
        return np.array(out)


def _brute_prob(scores, valid, ranking):
    with localcontext() as ctx:
        ctx.prec = 60
        p, remaining = Decimal(1), [j for j in range(len(scores)) if valid[j]]
        for r in ranking:
            p *= Decimal(float(scores[r])).exp() / sum(Decimal(float(scores[j])).exp() for j in remaining)
            remaining.remove(r)
        return p


def test_sampling_frequencies_match_exact_pl_probabilities():
    # 5 entries, one invalid; top-3 prefixes of the 4 valid ones: 24 outcomes.
    scores = np.array([0.5, -1.0, 2.0, 0.0, 1.0])
    valid = np.array([True, True, True, False, True])
    n = 200_000
    rng = np.random.default_rng(12345)
    samples = sample_topk(np.broadcast_to(scores, (n, 5)), np.broadcast_to(valid, (n, 5)), 3, rng)
    assert not np.isin(samples, [3, -1]).any()
    outcomes = list(itertools.permutations([0, 1, 2, 4], 3))
    exact = np.array([float(_brute_prob(scores, valid, o)) for o in outcomes])
    assert abs(exact.sum() - 1) < 1e-12
    index = {o: i for i, o in enumerate(outcomes)}
    counts = np.bincount([index[tuple(s)] for s in samples.tolist()], minlength=len(outcomes))
    # Pearson chi-square goodness of fit (23 df; every expected count >= 5 here):
    # a correct sampler fails this with probability 0.001 for a random seed, the seed is fixed.
    assert (n * exact).min() > 5
    assert stats.chisquare(counts, n * exact).pvalue > 1e-3
    # and no cell off by more than 5 multinomial standard deviations
    sd = np.sqrt(n * exact * (1 - exact))
    assert np.all(np.abs(counts - n * exact) < 5 * sd)


def test_sampling_pads_with_minus_one_and_respects_validity():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(1000, 6))
    valid = np.zeros((1000, 6), bool)
    valid[:, [1, 4]] = True
    s = sample_topk(scores, valid, 4, rng)
    assert s.shape == (1000, 4)
    assert np.all(np.sort(s[:, :2], axis=1) == [1, 4]) and np.all(s[:, 2:] == -1)
    # k beyond the axis length is padded too
    assert sample_topk(scores[:2, :3], None, 5, rng)[:, 3:].tolist() == [[-1, -1], [-1, -1]]
    # a valid -inf score is never drawn before a finite one
    s2 = sample_topk(np.array([[-np.inf, 0.0, 1.0]] * 200), None, 3, rng)
    assert np.all(s2[:, 2] == 0)


def test_topk_is_deterministic_with_ties_by_position():
    scores = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 3.0, 1.0, 3.0]])
    valid = np.array([[True, True, True, True], [True, True, False, True]])
    assert topk(scores, valid, 3).tolist() == [[0, 1, 2], [1, 3, 0]]
    assert topk(scores, valid, 5).tolist() == [[0, 1, 2, 3, -1], [1, 3, 0, -1, -1]]


@pytest.mark.parametrize("k", [1, 5, 16, 17, 40])  # both the argmax-pass and the sort path
def test_topk_matches_python_sorted(k):
    rng = np.random.default_rng(k)
    scores = np.round(rng.normal(size=(200, 30)), 0)               # many ties
    scores[rng.random(scores.shape) < 0.05] = -np.inf              # valid -inf scores
    valid = rng.random(scores.shape) < 0.7
    got = topk(scores, valid, k)
    for row, s, v in zip(got, scores, valid):
        expected = sorted(np.flatnonzero(v), key=lambda j: (-s[j], j))[:k]
        assert row.tolist() == expected + [-1] * (k - len(expected))


CASES = [
    # (scores, valid, rankings) -- ties, extreme scores, -inf, padding, partial prefixes
    ([0.3, -1.2, 0.3, 2.0, 0.0], [1, 1, 1, 1, 1], "all"),
    ([0.0, 0.0, 0.0, 0.0], [1, 1, 1, 1], "all"),
    ([1000.0, 0.0, -1000.0, 0.0], [1, 1, 1, 1], "all"),
    ([800.0, 799.0, -700.0, 5.0], [1, 1, 0, 1], "all"),
    ([100.0, 0.0, 0.0], [1, 1, 1], "all"),
    ([2.0, -np.inf, 1.0], [1, 1, 1], [[0, 2, 1], [2, 0, -1], [0, -1, -1]]),
]


@pytest.mark.parametrize("scores,valid,rankings", CASES)
def test_log_denominators_and_log_prob_against_brute_force(scores, valid, rankings):
    scores = np.array(scores)
    valid = np.array(valid, bool)
    idx = np.flatnonzero(valid)
    if rankings == "all":
        # every full ranking and every length-2 prefix (padded with -1)
        full = [list(p) for p in itertools.permutations(idx)]
        pref = [list(p) + [-1] * (len(idx) - 2) for p in itertools.permutations(idx, 2)]
        rankings = full + pref
    rankings = np.array(rankings)
    R = len(rankings)
    S, V = np.broadcast_to(scores, (R, len(scores))), np.broadcast_to(valid, (R, len(scores)))
    dens = log_denominators(S, V, rankings)
    lp = log_prob(S, V, rankings)
    for r, d, l in zip(rankings, dens, lp):
        np.testing.assert_allclose(d, _brute_log_dens(scores, valid, r), rtol=1e-12, atol=1e-12)
        placed = [j for j in r if j >= 0]
        if any(scores[j] == -np.inf for j in placed):
            assert l == -np.inf
            continue
        p = _brute_prob(scores, valid, placed)
        expected = float(p.ln()) if p > 0 else -np.inf
        if np.isfinite(expected):
            np.testing.assert_allclose(l, expected, rtol=1e-12, atol=1e-12)
        else:
            assert l < -700  # beyond float range: the PL probability underflows
    if np.all(np.isfinite(scores)):
        # full rankings are a probability distribution
        n_full = len(list(itertools.permutations(idx)))
        total = np.logaddexp.reduce(lp[:n_full])
        assert abs(total) < 1e-12


def test_batched_shapes():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(4, 3, 7))
    valid = rng.random((4, 3, 7)) < 0.8
    r = sample_topk(scores, valid, 5, rng)
    assert r.shape == (4, 3, 5)
    lp = log_prob(scores, valid, r)
    assert lp.shape == (4, 3)
    flat = log_prob(scores.reshape(12, 7), valid.reshape(12, 7), r.reshape(12, 5))
    np.testing.assert_array_equal(lp.ravel(), flat)


def test_perturbed_topk_with_drawn_noise_equals_sample_topk():
    scores = np.random.default_rng(3).normal(size=(50, 30))
    valid = np.random.default_rng(4).random((50, 30)) < 0.8
    a = sample_topk(scores, valid, 10, np.random.default_rng(11))
    gumbel = gumbel_noise(np.random.default_rng(11), scores.shape)
    assert np.array_equal(a, perturbed_topk(scores, valid, 10, gumbel))


def test_gumbel_noise_is_standard_gumbel():
    """KS test against scipy's standard Gumbel (200,000 draws). Catches: a sign flip (-G is
    Gumbel-min), log(E) without the minus, a rate other than 1."""
    from scipy import stats

    g = gumbel_noise(np.random.default_rng(5), (200_000,))
    assert g.dtype == np.float32 and np.isfinite(g).all()
    assert stats.kstest(g.astype(np.float64), stats.gumbel_r.cdf).pvalue > 1e-3


def test_log_denominators_do_not_depend_on_the_padded_width():
    """A row padded with invalid entries to any width has the same bits (the sum runs left to
    right). Catches: numpy's pairwise sum, whose grouping follows the row length."""
    rng = np.random.default_rng(6)
    for m in (9, 130, 150, 257, 400):
        scores = rng.normal(size=(20, m)) * 3
        ranking = np.argsort(-scores, axis=1)[:, :10]
        narrow = log_denominators(scores, None, ranking)
        for pad in (1, 7, 100, 333):
            wide = np.concatenate([scores, rng.normal(size=(20, pad))], axis=1)
            valid = np.broadcast_to(np.arange(m + pad) < m, wide.shape)
            assert np.array_equal(log_denominators(wide, valid, ranking), narrow)
