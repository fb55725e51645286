"""The f-DP one-run audit (``attacks.fdp_one_run``; Mahloujifar, Melis, Chaudhuri 2025): its tail
bound against exact binomial sums and a Monte Carlo of Gaussian canaries, its bounds at the level
crossing, its soundness and power over seeds on canaries with exact Gaussian scores, and the claim
as mu-GDP read from the declared mechanisms."""

import math

import numpy as np
import pytest
from scipy import stats

from attacks.fdp_one_run import (ApproxDPCurve, GaussianCurve, epsilon_lower_bound, fdp_one_run_bound,
                                 mu_lower_bound, rejects, tail_bound)
from defenses.stack import parse_defense
from attacks.worst_case import claimed_mu
from fltr_audit.privacy.claim_decision import gdp_mu
from fltr_audit.runs.whole_run_figures import fdp_pool


def binomial_tail(k, c, q):
    """P[Binomial(k, q) >= c] by exact sums (math.comb, no scipy)."""
    return sum(math.comb(k, j) * q**j * (1 - q) ** (k - j) for j in range(c, k + 1))


@pytest.mark.parametrize("m,k,c,eps", [(10, 10, 9, 1.0), (30, 30, 25, 1.0), (40, 10, 10, 1.0), (100, 20, 18, 0.5),
                                       (12, 12, 12, 2.0), (100, 100, 81, 1.0)])
def test_pure_dp_tail_covers_randomized_response_and_equals_it_when_every_guess_is_right(m, k, c, eps):
    """eps-randomized response of each canary's bit, guessed on k canaries chosen without looking:
    the right guesses are Binomial(k, e^eps / (1 + e^eps)), an eps-DP mechanism, so the f-DP tail
    bound under the (eps, 0) curve must cover the binomial tail; it is tight when every guess is
    right. Catches a wrong step i / (k - i), a start other than tau c / m and tau (k - c) / m, or an
    inverse blow-up of the wrong side."""
    q = math.exp(eps) / (1 + math.exp(eps))
    exact = binomial_tail(k, c, q)
    bound = tail_bound(ApproxDPCurve(eps, 0.0), m, k, c)
    assert exact <= bound * (1 + 1e-9) and bound <= 1.25 * exact
    if c == k:
        assert bound == pytest.approx(exact, rel=1e-6)


def test_gaussian_tail_covers_a_monte_carlo_of_gaussian_canaries_with_abstention():
    """12 canaries scored N(mu b_i, 1) (exactly mu-GDP towards each), "present" for the 3 top
    scores and "absent" for the 3 bottom ones: the bound covers the simulated P[W >= c] (200,000
    draws; tolerance 4 standard errors) and is informative (below 1/2) for six right guesses."""
    mu, m, k, n = 1.0, 12, 3, 200_000
    rng = np.random.default_rng(1)
    present = rng.random((n, m)) < 0.5
    order = np.argsort(rng.normal(np.where(present, mu, 0.0), 1.0), axis=1)
    right = (np.take_along_axis(present, order[:, m - k:], 1).sum(1)
             + (~np.take_along_axis(present, order[:, :k], 1)).sum(1))
    for c in (4, 5, 6):
        p = (right >= c).mean()
        assert tail_bound(GaussianCurve(mu), m, 2 * k, c) >= p - 4 * math.sqrt(p * (1 - p) / n)
    assert tail_bound(GaussianCurve(mu), m, 2 * k, 2 * k) < 0.5


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_gaussian_curve_binds_at_least_as_tightly_as_each_eps_delta_curve_it_implies(eps):
    """mu-GDP implies (eps, delta_mu(eps))-DP for every eps (Dong, Roth, Su 2022, Cor. 2.13), so the
    tail under the Gaussian curve is at most the tail under each of those curves."""
    mu = 1.0
    delta = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    for m, k, c in ((200, 40, 36), (200, 20, 20), (1000, 200, 170)):
        assert tail_bound(GaussianCurve(mu), m, k, c) <= tail_bound(ApproxDPCurve(eps, delta), m, k, c) * (1 + 1e-9)


def test_bounds_are_where_the_rejection_stops():
    mu = mu_lower_bound(500, 100, 95, 0.05)
    assert 0 < mu and rejects(GaussianCurve(mu), 500, 100, 95, 0.05)
    assert not rejects(GaussianCurve(mu + 1e-3), 500, 100, 95, 0.05)
    eps = epsilon_lower_bound(500, 100, 95, 1e-5, 0.05)
    assert 0 < eps and rejects(ApproxDPCurve(eps, 1e-5), 500, 100, 95, 0.05)
    assert not rejects(ApproxDPCurve(eps + 1e-3, 1e-5), 500, 100, 95, 0.05)
    assert mu_lower_bound(500, 100, 50, 0.05) == 0.0  # chance-level guesses reject nothing


def _exact_canaries(rng, m, mu):
    present = rng.random(m) < 0.5
    return rng.normal(np.where(present, mu, 0.0), 1.0), present


def test_mu_bound_is_sound_over_seeds():
    """Soundness by repetition: canaries scored N(mu b_i, 1) with exact Gaussian noise (the run is
    exactly mu-GDP towards each), 200 canaries, 100 seeds at mu = 1 and 100 at mu = 0.5; a sound 95 %
    bound exceeds the true mu in at most 5 % of seeds, so at most 10 of 100 may (pass probability
    P[Binomial(100, 0.05) <= 10] = 0.989 at the worst sound rate; observed 0 and 0). Catches an
    inverse blow-up with +mu, a missing Bonferroni split, and a bound taken above the crossing."""
    rng = np.random.default_rng(0)
    for mu in (1.0, 0.5):
        over = sum(fdp_one_run_bound(*_exact_canaries(rng, 200, mu), 1e-5).mu_lb > mu for _ in range(100))
        assert over <= 10


def test_noise_halved_gaussian_is_caught_at_two_thousand_canaries():
    """Power: the claim mu = 0.75 with the noise halved (true mu = 1.5), 2,000 canaries of one
    participation with exact scores: the 95 % bound exceeds the claim in 38 of 40 seeds measured
    (95 %; 31/40 at 1,000 canaries, 17/40 at 500). 8 seeds here, at least 6 must catch it (pass
    probability P[Binomial(8, 0.95) >= 6] = 0.994). Catches a bound that loses power (the grid's
    level split too finely, guesses on the wrong side)."""
    rng = np.random.default_rng(7)
    caught = sum(fdp_one_run_bound(*_exact_canaries(rng, 2000, 1.5), 1e-5).mu_lb > 0.75 for _ in range(8))
    assert caught >= 6


def test_perfect_guesses_reach_the_limit_and_say_so():
    present = np.arange(300) % 2 == 0
    bound = fdp_one_run_bound(present.astype(float), present, 1e-5)
    assert bound.limited_by_canaries and bound.mu_lb == pytest.approx(bound.mu_limit) and bound.correct == bound.guesses
    pool = np.arange(300) < 100  # a smaller pool: a lower limit, m = the pool
    fewer = fdp_one_run_bound(present.astype(float), present, 1e-5, pool=pool)
    assert fewer.pool == 100 and fewer.mu_limit < bound.mu_limit


def test_pool_is_the_most_frequent_positive_participation_count():
    pool, n = fdp_pool(np.array([0, 0, 0, 2, 2, 1, 3, 2, 1]))
    assert n == 2 and pool.tolist() == [False, False, False, True, True, False, False, True, False]
    assert fdp_pool(np.array([0, 1, 2, 1, 2]))[1] == 1  # a tie: the smaller count
    assert fdp_pool(np.zeros(4, dtype=int))[1] == 0


def test_claimed_mu_is_the_claims_mu_for_declared_gaussian_laws():
    """Closed forms from the parameters where the claim is the declared law's: dp-fedavg N(0, (zC)^2)
    on a sum of sensitivity C: 1/z per participation; dp-gaussian sigma C on a replace-one difference
    2C: 2/sigma; composed as sqrt(n) mu. ddgauss claims (eps, delta) through zCDP, a looser curve:
    its mu is at least sqrt(2 rho). A Laplace claim has no Gaussian curve. flwr-localdp's noise is
    calibrated on half the sensitivity: the claim's mu, not the declared law's 2 clip / std, is tested."""
    assert claimed_mu(parse_defense("dp-fedavg(noise_multiplier=2,clip=1)"), 3) == pytest.approx(math.sqrt(3) / 2)
    assert claimed_mu(parse_defense("dp-gaussian(sigma=4)"), 1) == pytest.approx(0.5)
    ddg = parse_defense("ddgauss")
    assert claimed_mu(ddg, 4) >= 2 * math.sqrt(2 * ddg.aggregator.mechanism.rho)
    assert claimed_mu(ddg, 4) == pytest.approx(2 * gdp_mu(ddg.claim.epsilon, ddg.claim.delta))
    assert math.isnan(claimed_mu(parse_defense("dp-local-laplace(eps=1)"), 1))
