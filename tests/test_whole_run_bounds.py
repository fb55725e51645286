"""The statistics of the run audit: Steinke et al.'s p-value against a brute-force sum, its bound's
level on an eps-DP mechanism of known truth, the canary-count limit, the two-Gaussian epsilon
against the Gaussian-DP closed form, the one-run estimate and the multi-run bound on known truths."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from attacks.whole_run_bounds import (canary_limit, gaussian_pair_epsilon, multi_run_lower_bound, one_run_estimate,
                                   one_run_lower_bound, run_claim_verdict, steinke_lower_bound, steinke_p_value)


def brute_p_value(m, r, v, eps, delta):
    """The theorem's right-hand side by exact sums of binomial terms (math.comb, no scipy)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(r + 1)]
    beta = sum(pmf[v:])
    alpha = max([sum(pmf[v - i:v]) / i for i in range(1, v + 1)], default=0.0)
    return min(1.0, beta + 2 * m * delta * alpha)


@pytest.mark.parametrize("m,r,v,eps,delta", [(10, 6, 5, 0.7, 0.0), (10, 6, 5, 0.7, 1e-3), (12, 12, 12, 2.0, 1e-4),
                                             (8, 4, 1, 0.1, 1e-2), (20, 10, 0, 1.0, 1e-3)])
def test_p_value_equals_the_brute_force_sum(m, r, v, eps, delta):
    assert steinke_p_value(m, r, v, eps, delta) == pytest.approx(brute_p_value(m, r, v, eps, delta), rel=1e-9)


def test_bound_is_the_epsilon_where_the_p_value_crosses_the_level():
    lb = steinke_lower_bound(100, 40, 36, 1e-5, 0.05)
    assert steinke_p_value(100, 40, 36, lb, 1e-5) < 0.05 <= steinke_p_value(100, 40, 36, lb + 1e-3, 1e-5)


def test_one_run_bound_stays_below_the_true_epsilon_in_95_percent():
    """Each canary's bit through eps-randomized response (exactly eps-DP towards each canary)."""
    eps, m = 1.0, 200
    rng = np.random.default_rng(0)
    over = 0
    for _ in range(60):
        present = rng.random(m) < 0.5
        keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
        scores = np.where(keep, present, ~present) + rng.random(m) * 1e-3
        over += one_run_lower_bound(scores, present, 0.0).epsilon_lb > eps
    assert over <= 3 + 3  # 5 % of 60, with binomial slack (the bound is conservative)


def test_perfect_guesses_reach_the_canary_count_limit():
    present = np.arange(200) % 2 == 0
    bound = one_run_lower_bound(present.astype(float), present, 1e-5)
    assert bound.limited_by_canaries and bound.epsilon_lb == pytest.approx(canary_limit(200, 1e-5))
    assert bound.limit == bound.epsilon_lb
    assert canary_limit(2000, 1e-5) > canary_limit(200, 1e-5) > 0
    eligible = np.arange(200) < 100  # guesses among the first 100 only: a lower limit
    fewer = one_run_lower_bound(present.astype(float), present, 1e-5, eligible=eligible)
    assert fewer.limited_by_canaries and fewer.epsilon_lb == pytest.approx(canary_limit(200, 1e-5, eligible=100))
    assert fewer.epsilon_lb < bound.epsilon_lb and fewer.guesses == 100
    weak = one_run_lower_bound(np.random.default_rng(1).random(200), present, 1e-5)
    assert not weak.limited_by_canaries and weak.epsilon_lb < bound.epsilon_lb


@pytest.mark.parametrize("mu,delta", [(1.0, 1e-5), (3.0, 1e-3), (0.3, 1e-5)])
def test_two_gaussian_epsilon_matches_the_gaussian_dp_closed_form(mu, delta):
    def gdp_delta(eps):  # Dong, Roth, Su 2022, Cor. 2.13
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    exact = optimize.brentq(lambda e: gdp_delta(e) - delta, 0.0, 50.0)
    assert gaussian_pair_epsilon(0.0, 2.0, 2.0 * mu, 2.0, delta) == pytest.approx(exact, abs=2e-3)


def test_one_run_estimate_covers_the_gaussian_truth():
    rng = np.random.default_rng(3)
    present = rng.random(4000) < 0.5
    scores = rng.normal(np.where(present, 2.0, 0.0), 1.0)
    est, reason = one_run_estimate(scores, present, 1e-5, boot=50)
    truth = gaussian_pair_epsilon(0.0, 1.0, 2.0, 1.0, 1e-5)
    assert est.low <= truth <= est.high and est.high - est.low < 2.5 and reason == ""
    # message scope (bounded likelihood ratios): no fit, a reason (catches the fit left on them)
    none, reason = one_run_estimate(scores, present, 1e-5, boot=50, scope="message")
    assert np.isnan(none.epsilon) and np.isnan(none.low) and "aggregate-scope cosines" in reason


def test_one_run_estimate_fits_from_two_present_and_two_absent_canaries():
    """The fit needs a sample standard deviation on each side: two present and two absent canaries
    give the two Gaussians' epsilon (``gaussian_pair_epsilon`` of their means and sample sds), one
    on a side gives NaN (catches the fit refused at two, or attempted at one: an sd of 0 there)."""
    scores = np.array([0.1, 0.3, 1.9, 2.2])
    present = np.array([False, False, True, True])
    est, reason = one_run_estimate(scores, present, 1e-5, boot=20)
    want = gaussian_pair_epsilon(0.2, np.std([0.1, 0.3], ddof=1), 2.05, np.std([1.9, 2.2], ddof=1), 1e-5)
    assert reason == "" and est.epsilon == pytest.approx(want, rel=1e-12)
    for lone in (np.array([False, True, True, True]), np.array([False, False, False, True])):
        assert math.isnan(one_run_estimate(scores, lone, 1e-5, boot=20)[0].epsilon)


def test_multi_run_bound_on_randomized_response():
    eps, runs = 2.0, 2000
    rng = np.random.default_rng(4)
    present = rng.random(runs) < 0.5
    keep = rng.random(runs) < math.exp(eps) / (1 + math.exp(eps))
    out = multi_run_lower_bound(np.where(keep, present, ~present).astype(float), present, 0.0)
    assert 0.6 * eps < out.epsilon_lb <= eps and out.n0 + out.n1 == runs - runs // 2


def test_verdict_rule():
    assert run_claim_verdict(3.0, 2.0, 6.0) == "violated"
    assert run_claim_verdict(1.0, 2.0, 6.0) == "consistent"
    assert run_claim_verdict(1.0, 7.0, 6.0) == "untestable"
