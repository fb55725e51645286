"""ddgauss: the exact discrete Gaussian sampler, the rotation, conditional rounding, the modular
sum, the decoded mean, the claim against dp-accounting, bad input and the audit's soundness."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from scipy import stats
from scipy.linalg import hadamard as hadamard_matrix

from attacks.epsilon_bounds import audit, projection_statistic
from defenses.ddgauss import (DDGauss, discrete_gaussian, hadamard, rounded_norm_bound, sum_tau, wrap_probability,
                              zcdp_epsilon)
from defenses.stack import parse_defense
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages


def dgauss_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    """The exact pmf of N_Z(0, sigma2) on ``support`` (normalized over a support wide enough that
    the mass left out is below 1e-30)."""
    wide = np.arange(-int(40 * math.sqrt(sigma2)) - 40, int(40 * math.sqrt(sigma2)) + 41)
    z = np.exp(-wide.astype(float) ** 2 / (2 * sigma2)).sum()
    return np.exp(-support.astype(float) ** 2 / (2 * sigma2)) / z, wide


def chi_square_pvalue(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """Pearson's chi-square of integer samples against a pmf on the consecutive integers
    ``support``; cells with expected count below 5 are pooled into the two tails."""
    n = len(samples)
    keep = np.flatnonzero(pmf * n >= 5)
    lo, hi = keep[0], keep[-1]
    counts = np.bincount(np.clip(samples - support[0], 0, len(support) - 1), minlength=len(support))
    observed = np.concatenate([[counts[:lo].sum()], counts[lo:hi + 1], [counts[hi + 1:].sum()]])
    expected = np.concatenate([[pmf[:lo].sum()], pmf[lo:hi + 1], [pmf[hi + 1:].sum()]]) * n
    nonzero = expected > 0
    return stats.chisquare(observed[nonzero], expected[nonzero] * observed.sum() / expected[nonzero].sum()).pvalue


@pytest.mark.parametrize("sigma2", [0.3, 2.5, 40.0])
def test_discrete_gaussian_sampler_matches_the_exact_pmf(sigma2):
    samples = discrete_gaussian(sigma2, (30000,), np.random.default_rng(0))
    _, wide = dgauss_pmf(sigma2, np.arange(1))
    pmf, _ = dgauss_pmf(sigma2, wide)
    assert chi_square_pvalue(samples, wide, pmf) > 0.001
    rounded = np.round(np.random.default_rng(0).normal(0, math.sqrt(sigma2), 30000)).astype(np.int64)
    if sigma2 < 1:  # the test tells a rounded continuous Gaussian apart where the two differ
        assert chi_square_pvalue(rounded, wide, pmf) < 1e-6


def test_aggregated_integer_noise_is_the_sum_of_the_clients_discrete_gaussians():
    """Zero updates: the server's centred integer sum is pure noise, the n-fold convolution of
    N_Z(0, sigma_l^2) (not itself a discrete Gaussian), checked against that exact pmf."""
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=7, n=8, dim=16)  # a few steps of noise per client
    n = 8
    sigma2 = agg.local_sigma(n) ** 2
    rng = np.random.default_rng(1)
    sums = np.concatenate([agg.noisy_sum(np.zeros((n, 5)), np.ones(16), rng)[0] for _ in range(400)])
    _, wide = dgauss_pmf(sigma2, np.arange(1))
    pmf, _ = dgauss_pmf(sigma2, wide)
    total = pmf
    for _ in range(n - 1):
        total = np.convolve(total, pmf)
    support = np.arange(len(total)) + n * wide[0]
    assert chi_square_pvalue(sums, support, total) > 0.001
    assert sums.var() == pytest.approx(n * sigma2, rel=0.05)


def test_hadamard_is_the_orthonormal_walsh_hadamard_transform():
    x = np.random.default_rng(2).normal(size=(3, 32))
    np.testing.assert_allclose(hadamard(x), x @ hadamard_matrix(32).T / math.sqrt(32), atol=1e-12)
    np.testing.assert_allclose(hadamard(hadamard(x)), x, atol=1e-12)


def test_conditional_rounding_keeps_the_norm_bound_and_is_nearly_unbiased():
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=16, n=10, dim=16)
    rng = np.random.default_rng(3)
    u = rng.normal(size=(10, 12))
    signs = rng.choice([-1.0, 1.0], size=16)
    draws = np.stack([agg.encode(u, signs, rng)[0] for _ in range(300)])
    assert (np.linalg.norm(draws.astype(float), axis=2) <= agg.sensitivity + 1e-9).all()
    padded = np.zeros((10, 16))
    padded[:, :12] = u * np.minimum(1, 1 / np.linalg.norm(u, axis=1))[:, None]
    target = hadamard(padded * signs) / agg.gamma
    assert np.abs(draws.mean(0) - target).max() < 4 * 0.5 / math.sqrt(300)


def test_modular_sum_is_exact_mod_2_to_the_b_and_recovers_the_sum_without_wrap_around():
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=20, n=10, dim=16)
    rng = np.random.default_rng(4)
    values = rng.integers(-(2**40), 2**40, size=(50, 16))
    ring = agg.modular_sum(values)
    exact = [sum(int(v) for v in values[:, j]) % 2**20 for j in range(16)]
    assert ring.tolist() == exact
    small = rng.integers(-1000, 1000, size=(50, 16))  # |sum| < 2^19: no wrap-around
    np.testing.assert_array_equal(agg.centre(agg.modular_sum(small)), small.sum(0))


def test_the_secure_aggregation_protocol_gives_the_same_modular_sum():
    plain = DDGauss(noise_multiplier=1.0, clip=1.0, bits=20, n=6, dim=16)
    protocol = parse_defense("ddgauss(noise_multiplier=1,clip=1,bits=20,n=6,dim=16,secagg=protocol)").aggregator
    values = np.random.default_rng(8).integers(-(2**30), 2**30, size=(6, 16))
    np.testing.assert_array_equal(protocol.modular_sum(values, np.random.default_rng(0)), plain.modular_sum(values))


def test_decoded_mean_is_unbiased_within_its_stated_error():
    agg = DDGauss(noise_multiplier=0.5, clip=1.0, bits=18, n=20, dim=16)
    rng = np.random.default_rng(5)
    u = rng.normal(size=(20, 10)) * 0.2
    msgs = Messages(n_interactions=np.ones(20, dtype=np.int64), vector=u, vector_kind="update")
    true = (u * np.minimum(1, 1 / np.linalg.norm(u, axis=1))[:, None]).mean(0)
    errors = np.stack([agg.aggregate(msgs, np.arange(20), rng).mean - true for _ in range(400)])
    stated = agg.mean_error_std(20)
    assert errors.std(axis=0).max() <= 1.1 * stated
    assert np.abs(errors.mean(0)).max() <= 4.5 * stated / math.sqrt(400)


def test_stats_report_wrap_around():
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=20, n=100, dim=64)
    msgs = Messages(n_interactions=np.ones(100, dtype=np.int64),
                    vector=np.random.default_rng(6).normal(size=(100, 46)), vector_kind="update")
    out = agg.aggregate(msgs, np.arange(100), np.random.default_rng(7))
    assert out.stats["wrapped_coordinates"] == 0
    assert 0 <= out.stats["wrap_probability"] <= 1.001e-6
    assert wrap_probability(20, 10**6, 1.0, 1.0, 64, agg.gamma) == 1.0  # far more clients than it was scaled for


def test_claim_is_the_papers_zcdp_bound_through_dp_accounting():
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=20, n=1000, dim=64, dp_delta=1e-5)
    event = agg.dp_event()
    assert isinstance(event, dp_accounting.ZCDpEvent)
    via_rdp = rdp.RdpAccountant().compose(event).get_epsilon(1e-5)
    assert agg.claim.epsilon <= via_rdp <= agg.claim.epsilon * 1.001  # continuous alpha vs dp-accounting's grid
    # with tau negligible the bound is a Gaussian's rho = (sensitivity / total noise)^2 / 2
    assert sum_tau(agg.local_sigma(1000), 1000) < 1e-12
    s = agg.sensitivity / (agg.noise_std / agg.gamma)
    assert event.rho == pytest.approx(s * s / 2, rel=1e-6)
    assert s == pytest.approx(rounded_norm_bound(1.0 / agg.gamma, 64) * agg.gamma, rel=1e-12)
    k = 100  # zCDP composes additively: 100 rounds are rho * 100
    total = rdp.RdpAccountant().compose(event, k).get_epsilon(1e-5)
    assert total == pytest.approx(zcdp_epsilon(event.rho * k, event.xi * k, 1e-5), rel=1e-3)


@pytest.mark.parametrize("text, fragment", [
    ("ddgauss(noise_multiplier=0)", "noise_multiplier=0 must be a number in (0, 1e+100]"),
    ("ddgauss(clip=-1)", "clip=-1 must be a number in (0, 1e+100]"),
    ("ddgauss(bits=10)", "bits = 10 are too few for the noise of n = 1000 clients"),
    ("ddgauss(bits=2,n=100000)", "bits = 2 are too few for the rounding errors of n = 100000 clients"),
    ("ddgauss(dim=48)", "dim=48 must be a power of two"),
])
def test_bad_parameters_one_line_naming_the_option(text, fragment):
    with pytest.raises(FltrError) as err:
        parse_defense(text)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_model_larger_than_dim_is_refused():
    msgs = Messages(n_interactions=np.ones(2, dtype=np.int64), vector=np.zeros((2, 70)), vector_kind="update")
    with pytest.raises(FltrError, match="set dim to a power of two >= 70"):
        DDGauss(dim=64, n=2).aggregate(msgs, np.arange(2), np.random.default_rng(0))
    with pytest.raises(FltrError, match="set dim to a power of two >= 70"):
        DDGauss(dim=64, n=2).zero_cohort_means(np.zeros(70), 2, 5, np.random.default_rng(0))


def test_audit_never_beats_the_claim():
    """Cohort 1 (n = 1), neighbours: the user's clipped update u (||u|| = C) or a zero update."""
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=16, n=1, dim=8)
    u = np.zeros(8)
    u[0] = 1.0

    def mechanism(rng, n_trials, which):
        """n_trials independent one-client rounds at once (one public rotation for all: the
        guarantee holds for every rotation), through the defense's own steps."""
        signs = rng.choice([-1.0, 1.0], size=8)
        ints, _ = agg.encode(np.repeat((u if which else 0 * u)[None, :], n_trials, axis=0), signs, rng)
        noisy = ints + discrete_gaussian(agg.local_sigma(1) ** 2, ints.shape, rng)
        ring = agg.centre(noisy.view(np.uint64) & np.uint64(2**agg.bits - 1))  # a one-client modular sum
        return hadamard(ring * agg.gamma) * signs

    msgs = Messages(n_interactions=np.ones(1, dtype=np.int64), vector=u[None, :], vector_kind="update")
    one = np.stack([agg.aggregate(msgs, np.arange(1), np.random.default_rng(s)).mean for s in range(200)])
    fast = mechanism(np.random.default_rng(0), 200, 1)
    assert stats.ks_2samp(one @ u, fast @ u).pvalue > 0.001  # the batched mechanism is the aggregator's
    statistic = projection_statistic(np.zeros(8), u)
    above = sum(audit(mechanism, statistic, claim=agg.claim, n_trials=1000, seed=seed).epsilon_lb > agg.claim.epsilon
                for seed in range(10))
    assert above <= 2  # P(Bin(10, 0.05) >= 3) = 0.012


@pytest.mark.parametrize("z, bits, shares", [(1.0, 16, False), (0.08, 8, True)])
def test_zero_cohort_means_equal_in_law_the_aggregators_own_rounds(z, bits, shares):
    """``zero_cohort_means`` (all trials at once) against ``aggregate`` round by round on the same
    worst case (the target's clipped update, three zero updates): two-sample KS on the target's
    direction and on a random one, and the per-coordinate means and variances. Both sum laws:
    one N_Z(0, n s^2) where tau is negligible (s ~ 1600 steps), share by share where it is not
    (s = 0.63, tau = 0.29). Catches: the others' shares forgotten or counted at the wrong
    variance, one public rotation for all trials, the decoding's sign or scale, the wrong law."""
    from defenses.ddgauss import ONE_GAUSSIAN_TAU

    agg = DDGauss(noise_multiplier=z, clip=1.0, bits=bits, n=4, dim=8)
    assert (sum_tau(agg.local_sigma(4), 4) > ONE_GAUSSIAN_TAU) == shares
    u = np.array([0.6, -0.8, 0, 0, 0, 0, 0])
    rows = np.zeros((4, 7))
    rows[0] = u
    msgs = Messages(n_interactions=np.ones(4, dtype=np.int64), vector=rows, vector_kind="update")
    rng = np.random.default_rng(11)
    slow = np.stack([agg.aggregate(msgs, np.arange(4), rng).mean for _ in range(1500)])
    fast = agg.zero_cohort_means(u, 4, 3000, np.random.default_rng(12))
    other = np.random.default_rng(13).normal(size=7)
    for direction in (u, other):
        assert stats.ks_2samp(slow @ direction, fast @ direction).pvalue > 0.001
    se = np.sqrt(slow.var(axis=0) / 1500 + fast.var(axis=0) / 3000)
    assert (np.abs(slow.mean(axis=0) - fast.mean(axis=0)) < 4.5 * se).all()
    assert np.allclose(fast.var(axis=0), slow.var(axis=0), rtol=0.2)


def test_a_zero_update_encodes_to_zero_under_any_rotation():
    """The premise of ``zero_cohort_means``: the zero rows of a cohort round to the zero vector
    without a redraw, whatever the signs. Catches: a rounding that could move a zero coordinate."""
    agg = DDGauss(noise_multiplier=0.08, clip=1.0, bits=8, n=4, dim=8)
    rng = np.random.default_rng(0)
    ints, redraws = agg.encode(np.zeros((500, 5)), rng.choice([-1.0, 1.0], size=(500, 8)), rng)
    assert not ints.any() and redraws == 0


def test_the_worst_case_aggregate_audit_runs_ten_thousand_trials_through_the_batched_rounds():
    """``noisy_aggregate_mechanism`` hands a ddgauss stack's trials to ``zero_cohort_means`` at once
    (the audit's whole 10^4 trials per input in seconds), and the audit stays below the claim."""
    from attacks.mechanism_audit import audit_stack
    from attacks.worst_case import worst_case_inputs

    stack = parse_defense("ddgauss(noise_multiplier=1,clip=1,bits=20,n=100,dim=64)")
    result = audit_stack(stack, claim=stack.claim, inputs=worst_case_inputs(stack, 50), neighbours="worst-case",
                         scope="aggregate", trials=10_000, cohort=100, seed=3, min_trials=4)
    assert result.epsilon_lb <= stack.claim.epsilon


def test_the_rounded_norm_bound_is_theorem_one_at_hand_computed_points():
    """Kairouz et al. (2021), Theorem 1: conditional rounding keeps ||x|| <= min(c + sqrt(d),
    sqrt(c^2 + d/4 + sqrt(2 log(1/beta)) (c + sqrt(d)/2))). At beta = e^-1/2 the factor
    sqrt(2 log(1/beta)) is 1: c = 10, d = 64 gives sqrt(100 + 16 + 14) = sqrt(130) (the
    conditioned bound); c = 0.5, d = 4 gives sqrt(0.25 + 1 + 1.5) = sqrt(2.75) < 2.5; at beta =
    e^-2 (factor 2), c = 3, d = 16: sqrt(9 + 4 + 2 * 5) = sqrt(23). Catches: a factor divided
    instead of multiplied, d/4 or sqrt(d)/2 misread, the smaller of the two bounds not taken."""
    assert rounded_norm_bound(10.0, 64, math.exp(-0.5)) == pytest.approx(math.sqrt(130.0), rel=1e-14)
    assert rounded_norm_bound(0.5, 4, math.exp(-0.5)) == pytest.approx(math.sqrt(2.75), rel=1e-14)
    assert rounded_norm_bound(3.0, 16, math.exp(-2.0)) == pytest.approx(math.sqrt(23.0), rel=1e-14)
    assert rounded_norm_bound(0.0, 1, math.exp(-8.0)) == pytest.approx(1.0, rel=1e-14)  # c + sqrt(d) is smaller


def test_the_discrete_gaussian_variance_at_closed_form_points():
    """Var N_Z(0, s2): at s2 = 9 it is s2 to double precision (Poisson summation: the difference is
    of order e^(-2 pi^2 s2) = e^-178); at s2 = 0.1 only y = +-1 and +-2 count (y = +-3 weigh
    e^-45): (2 e^-5 + 8 e^-20) / (1 + 2 e^-5 + 2 e^-20). Catches: exp(-y^2 s2 / 2) for
    exp(-y^2 / (2 s2)), the sum cut too short."""
    from defenses.ddgauss import discrete_gaussian_variance

    assert discrete_gaussian_variance(9.0) == pytest.approx(9.0, rel=1e-12)
    assert discrete_gaussian_variance(4.0) == pytest.approx(4.0, rel=1e-12)
    e5, e20 = math.exp(-5), math.exp(-20)
    assert discrete_gaussian_variance(0.1) == pytest.approx((2 * e5 + 8 * e20) / (1 + 2 * e5 + 2 * e20), rel=1e-12)
