"""Clipping and the DP noise defenses: distributions checked against scipy with fixed seeds."""

import numpy as np
import pytest
from scipy import integrate, stats

from defenses.clipping import Clip, clip_rows
from defenses.dp_distributed import DistributedLaplace, gamma_difference_noise
from defenses.dp_gaussian import Gaussian, gaussian_delta
from defenses.dp_local import LocalLaplace
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages


def _messages(n, P, kind="weights", scale=10.0, seed=0):
    rng = np.random.default_rng(seed)
    return Messages(n_interactions=np.full(n, 4), vector=rng.normal(0, scale, (n, P)), vector_kind=kind)


# --- clipping ---------------------------------------------------------------------------

@pytest.mark.parametrize("norm, order", [("l2", 2), ("l1", 1)])
def test_clip_rows_bounds_norms_and_keeps_direction(norm, order):
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (200, 7)) * rng.uniform(0.01, 10, (200, 1))
    out = clip_rows(x, 2.5, norm)
    before, after = np.linalg.norm(x, ord=order, axis=1), np.linalg.norm(out, ord=order, axis=1)
    assert np.all(after <= 2.5 * (1 + 1e-12))
    small = before <= 2.5
    assert small.any() and (~small).any()
    np.testing.assert_array_equal(out[small], x[small])  # inside the ball: untouched
    np.testing.assert_allclose(after[~small], 2.5)  # outside: onto the sphere
    np.testing.assert_allclose(out[~small] / after[~small, None], x[~small] / before[~small, None])


def test_clip_weights_is_fpdgd_eq13_on_both_message_kinds():
    g = np.random.default_rng(2).normal(0, 3, 6)
    w = _messages(50, 6)
    clipped = Clip(sensitivity=5).apply(w, g, np.random.default_rng(0)).vector
    norms = np.linalg.norm(w.vector, axis=1)
    np.testing.assert_allclose(clipped, w.vector * np.minimum(1, 5 / (2 * norms))[:, None])  # Eq. 13
    u = w.replace(vector=w.vector - g, vector_kind="update")  # the same clients, FedIPS kind
    out = Clip(sensitivity=5).apply(u, g, np.random.default_rng(0))
    assert out.vector_kind == "update"
    np.testing.assert_allclose(out.vector + g, clipped)


def test_clip_update_bounds_the_update():
    g = np.full(6, 4.0)
    m = _messages(50, 6)
    out = Clip(sensitivity=3, of="update").apply(m, g, np.random.default_rng(0))
    assert np.all(np.linalg.norm(out.vector - g, axis=1) <= 1.5 + 1e-12)


def test_vector_defenses_refuse_foltr_es_messages():
    m = Messages(n_interactions=np.full(3, 4), seed=np.arange(3, dtype=np.uint64), metric=np.zeros((3, 4)))
    for d in (Clip(), DistributedLaplace(), LocalLaplace(), Gaussian()):
        with pytest.raises(FltrError, match="needs vector messages"):
            d.apply(m, np.zeros(2), np.random.default_rng(0))


# --- dp-distributed (FPDGD Eq. 15-16) ---------------------------------------------------

def test_gamma_difference_sum_is_laplace():
    # Eq. 15: the sum of n shares gamma - gamma', gamma ~ Gamma(1/n, lambda), is Laplace(lambda).
    n, lam = 100, 2.5
    shares = gamma_difference_noise(n, lam, (n, 4000), np.random.default_rng(3))
    total = shares.sum(axis=0)
    assert stats.kstest(total, stats.laplace(scale=lam).cdf).pvalue > 0.01
    # the KS test has power here: the same samples are far from a normal of equal variance
    assert stats.kstest(total, stats.norm(scale=np.sqrt(2) * lam).cdf).pvalue < 0.01


def test_single_share_has_variance_two_lambda_squared_over_n():
    # Var(gamma - gamma') = 2 * (1/n) * lambda^2. Excess kurtosis is 3n, so the relative standard
    # error of a sample variance over N draws is sqrt((3n + 2) / N): 1.2 % for n = 50, N = 1e6;
    # the 6 % tolerance is five standard errors.
    n, lam = 50, 2.5
    share = gamma_difference_noise(n, lam, (1_000_000,), np.random.default_rng(4))
    assert share.var() == pytest.approx(2 * lam**2 / n, rel=0.06)
    assert share.var() < (2 * lam**2) / 10  # far below the Laplace(lambda) variance


def test_single_share_is_practically_zero_for_a_large_cohort():
    # n = 1000, lambda = 2.5: both Gammas below 1e-6 with probability G(1e-6)^2 ~ 0.971 (scipy);
    # |share| < 1e-6 otherwise needs the two within 1e-6 of each other, probability below
    # 2 * density(1e-6) * 2e-6 < 0.005; the lower side allows five binomial standard errors.
    n, lam, N = 1000, 2.5, 400_000
    share = gamma_difference_noise(n, lam, (N,), np.random.default_rng(5))
    frac = np.mean(np.abs(share) < 1e-6)
    both = stats.gamma(1 / n, scale=lam).cdf(1e-6) ** 2
    assert both - 5 * np.sqrt(both * (1 - both) / N) <= frac <= both + 0.005
    assert 0.96 < frac < 0.98


def test_dp_distributed_clips_weights_and_the_cohort_noise_sums_to_laplace():
    n, P, sens, eps = 40, 3000, 5.0, 4.5
    m = _messages(n, P, scale=1.0)
    g = np.zeros(P)
    d = DistributedLaplace(eps=eps, sensitivity=sens)
    out = d.apply(m, g, np.random.default_rng(6))
    noise = out.vector - clip_rows(m.vector, sens / 2)
    assert d.claim.scope == "aggregate" and d.claim.epsilon == eps and d.scale == sens / eps
    # n = messages.n_clients shares per coordinate: their sum over the cohort is Laplace(Delta/eps)
    assert stats.kstest(noise.sum(axis=0), stats.laplace(scale=sens / eps).cdf).pvalue > 0.01


# --- local Laplace and Gaussian ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["weights", "update"])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_local_laplace_clips_update_and_has_scale_sensitivity_over_eps(kind, norm):
    n, P, sens, eps = 400, 20, 3.0, 1.5
    m = _messages(n, P, kind=kind)
    g = np.random.default_rng(7).normal(0, 1, P)
    d = LocalLaplace(eps=eps, sensitivity=sens, norm=norm)
    out = d.apply(m, g, np.random.default_rng(8))
    # the clip centre and the noise scale are measured on the defense's output, with the power to see a
    # factor 2, in tests/test_privacy_critical.py; here: the noise left around the clipped update is Laplace
    clipped = clip_rows(m.updates(g), sens / 2, norm)
    noise = out.updates(g) - clipped
    assert stats.kstest(noise.ravel(), stats.laplace(scale=sens / eps).cdf).pvalue > 0.01
    assert d.claim.scope == "message" and d.claim.epsilon == eps


def test_gaussian_noise_std_is_sigma_times_clip():
    n, P = 300, 30
    m = _messages(n, P, kind="update")
    g = np.zeros(P)
    d = Gaussian(sigma=0.7, clip=2.0)
    out = d.apply(m, g, np.random.default_rng(9))
    clipped = clip_rows(m.vector, 2.0)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 2.0 + 1e-12)
    assert stats.kstest((out.vector - clipped).ravel(), stats.norm(scale=1.4).cdf).pvalue > 0.01


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_gaussian_claim_matches_the_hockey_stick_divergence(sigma):
    # Independent check of the analytic bound: integrate max(0, p(x) - e^eps q(x)) for
    # p = N(0, s^2), q = N(2C, s^2) (two clipped messages 2C apart) at the claimed epsilon.
    C = 1.5
    d = Gaussian(sigma=sigma, clip=C, dp_delta=1e-5)
    s, eps = sigma * C, d.claim.epsilon
    p, q = stats.norm(0, s), stats.norm(2 * C, s)
    hockey, _ = integrate.quad(lambda x: max(0.0, p.pdf(x) - np.exp(eps) * q.pdf(x)), -20 * s, 2 * C + 20 * s,
                               points=[C - eps * s**2 / (2 * C)], epsabs=1e-13, limit=200)
    assert hockey == pytest.approx(1e-5, rel=1e-4)
    assert gaussian_delta(eps, 2 * C, s) == pytest.approx(1e-5, rel=1e-6)
    assert d.claim.delta == 1e-5 and d.claim.scope == "message"
