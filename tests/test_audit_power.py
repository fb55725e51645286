"""The power of a claim audit (``fltr_audit.privacy.claim_decision``) against independent computations:
the exact sums against Monte Carlo draws of the reference mechanism's error counts through the
audit's own bounds, the GDP conversion against dp-gaussian's Balle-Wang formula, and the trials
search against brute force. Each test says which planted bug it catches."""

import math

import numpy as np
import pytest
from scipy.special import ndtr

from attacks.epsilon_bounds import epsilon_lower_bound, mu_lower_bound
from defenses.dp_gaussian import gaussian_delta
from fltr_audit.privacy.claim_decision import epsilon_power, gdp_delta, gdp_mu, mu_power, trials_for_power


@pytest.mark.parametrize("eps,m,delta", [(0.1, 2000, 0.0), (0.05, 5000, 0.0), (1.0, 60, 0.0), (0.3, 800, 1e-3),
                                         (4.5, 5000, 0.0), (8.0, 5000, 0.0)])
def test_epsilon_power_is_the_simulated_rejection_rate(eps, m, delta):
    """20,000 draws of Binomial(m, (1 - delta) / (1 + e^(2 eps))) counts through the audit's bound
    (catches a wrong reference rate, a one-sided limit, a shifted count, or the zero count left out
    where errors are rare: at eps 4.5 most draws make none)."""
    rate = (1 - delta) / (1 + math.exp(2 * eps))
    rng = np.random.default_rng(1)
    fp, fn = rng.binomial(m, rate, 20_000), rng.binomial(m, rate, 20_000)
    simulated = float((epsilon_lower_bound(fp, fn, m, m, delta) > eps).mean())
    assert epsilon_power(m, m, eps, delta) == pytest.approx(simulated, abs=0.015)


@pytest.mark.parametrize("eps,m", [(0.5, 1000), (1.0, 300), (2.0, 100)])
def test_mu_power_is_the_simulated_rejection_rate(eps, m):
    """The Gaussian at twice the claim tested at its midpoint, through the audit's mu bound."""
    delta = 1e-5
    rate = float(ndtr(-gdp_mu(2 * eps, delta) / 2))
    rng = np.random.default_rng(2)
    fp, fn = rng.binomial(m, rate, 20_000), rng.binomial(m, rate, 20_000)
    simulated = float((mu_lower_bound(fp, fn, m, m) > gdp_mu(eps, delta)).mean())
    assert mu_power(m, m, eps, delta) == pytest.approx(simulated, abs=0.015)


def test_gdp_conversion_matches_the_analytic_gaussian_mechanism():
    for eps, mu in ((0.5, 0.4), (2.0, 1.5), (8.0, 3.0)):
        assert gdp_delta(eps, mu) == pytest.approx(gaussian_delta(eps, mu, 1.0), rel=1e-10, abs=1e-15)
        assert gdp_mu(eps, gdp_delta(eps, mu)) == pytest.approx(mu, rel=1e-8)
    assert gdp_mu(1.0, 0.0) == 0.0
    assert gdp_mu(60.0, gdp_delta(60.0, 12.0)) == pytest.approx(12.0, rel=1e-8)  # a bracket of 2^4


def test_a_claim_no_gaussian_reaches_is_infinite_mu_not_a_hang():
    """delta > 1 bounds nothing: no mu's delta reaches it (gdp_delta <= 1), so the bracket search stops
    at 2^64 with mu = inf (it doubled forever before: hi reached inf, and delta(inf) = 1 < delta)."""
    assert gdp_mu(1.0, 1.5) == math.inf


def test_trials_for_power_is_the_fewest_by_brute_force():
    power = lambda a, b: epsilon_power(a, b, 0.5)  # noqa: E731
    n = trials_for_power(power)
    assert power(n - n // 2, n - n // 2) >= 0.9 > power((n - 1) - (n - 1) // 2, (n - 1) - (n - 1) // 2)


def test_verdicts_the_claim_alone_decides_skip_the_power_rule():
    """No finite claim, or an aggregate claim audited on single messages: the verdict is that, with
    no power or trials attached, whatever the bound (catches those rows sent through the power
    rule, which read them consistent or untestable)."""
    from fltr_audit.privacy.claim_decision import decide

    nan = math.nan
    for claimed, scope, bound, verdict in ((math.inf, "message", 3.0, "no claim"),
                                           (4.5, "aggregate", 9.0, "outside scope"),
                                           (4.5, "aggregate", 0.1, "outside scope")):
        d = decide(claimed, 0.0, scope, "message", bound, nan, nan, nan, 1000, 1000, 0.95)
        assert d.verdict == verdict and math.isnan(d.power) and math.isnan(d.trials_needed)


def test_the_normality_test_needs_twenty_finite_scores_per_input():
    """``gaussian_shape_pvalue``: scipy's ``normaltest`` of each half, Bonferroni over the two, from 20
    finite scores per input (scipy's kurtosis test is valid from n = 20; with 19 it warns), NaN
    below that or for a constant half; NaN and infinite scores are left out first."""
    import warnings

    from scipy import stats

    from fltr_audit.privacy.claim_decision import gaussian_shape_pvalue

    rng = np.random.default_rng(2)
    a, b = rng.normal(size=20), rng.exponential(size=20)
    want = min(1.0, 2.0 * min(stats.normaltest(a).pvalue, stats.normaltest(b).pvalue))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gaussian_shape_pvalue(a, b) == pytest.approx(want, rel=1e-12)
        assert gaussian_shape_pvalue(np.r_[a, np.nan, np.inf], b) == pytest.approx(want, rel=1e-12)
        assert math.isnan(gaussian_shape_pvalue(a[:19], b)) and math.isnan(gaussian_shape_pvalue(a, b[:19]))
        assert math.isnan(gaussian_shape_pvalue(np.ones(30), b))
