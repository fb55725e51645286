"""dp-fedavg: clipping, the noise on the sum, adaptive clipping, the claim against dp-accounting,
the engine passing the global model, and the empirical audit never beating the claim."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp
from scipy import stats

from attacks.epsilon_bounds import audit, projection_statistic
from defenses.dp_fedavg import DPFedAvg, update_noise_multiplier
from defenses.dp_gaussian import gaussian_epsilon
from defenses.stack import parse_defense
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.rankers import LinearRanker


def updates_messages(updates, weights=None):
    n = len(updates)
    return Messages(n_interactions=np.ones(n, dtype=np.int64) if weights is None else np.asarray(weights),
                    vector=np.asarray(updates, dtype=np.float64), vector_kind="update")


def test_clipping_to_c_and_the_fixed_denominator():
    rng = np.random.default_rng(0)
    updates = rng.normal(size=(7, 5)) * np.array([[0.1], [3], [0.5], [10], [1], [0.2], [4]])
    agg = DPFedAvg(noise_multiplier=1e-12, clip=1.5)
    out = agg.aggregate(updates_messages(updates, weights=[1, 9, 3, 2, 5, 4, 8]), np.arange(7), rng)
    norms = np.linalg.norm(updates, axis=1)
    clipped = np.array([u if nu <= 1.5 else u * 1.5 / nu for u, nu in zip(updates, norms)])
    np.testing.assert_allclose(out.mean, clipped.sum(0) / 7, atol=1e-9)  # each user weighs 1, divided by m
    assert out.messages is None and out.stats["clipped_fraction"] == pytest.approx((norms > 1.5).mean())


def test_weight_messages_are_clipped_as_updates_from_the_global_model():
    rng = np.random.default_rng(1)
    g = rng.normal(size=4)
    upd = rng.normal(size=(3, 4)) * 5
    msgs = Messages(n_interactions=np.ones(3, dtype=np.int64), vector=g + upd, vector_kind="weights")
    out = DPFedAvg(noise_multiplier=1e-12, clip=1.0).aggregate(msgs, np.arange(3), rng, global_params=g)
    expected = g + (upd / np.linalg.norm(upd, axis=1, keepdims=True)).sum(0) / 3
    np.testing.assert_allclose(out.mean, expected, atol=1e-9)


@pytest.mark.parametrize("z, clip, m", [(1.0, 1.0, 1), (0.5, 2.0, 10)])
def test_noise_on_the_sum_is_normal_with_std_z_c(z, clip, m):
    rng = np.random.default_rng(2)
    updates = rng.normal(size=(m, 6))
    updates *= (0.5 * clip / np.linalg.norm(updates, axis=1))[:, None]  # all inside the clip: no clipping
    agg = DPFedAvg(noise_multiplier=z, clip=clip)
    msgs = updates_messages(updates)
    noise = np.concatenate([agg.aggregate(msgs, np.arange(m), rng).mean * m - updates.sum(0) for _ in range(2000)])
    standardized = noise / (z * clip)
    assert stats.kstest(standardized, "norm").pvalue > 0.001
    # variance: (N-1) s^2 / sigma^2 ~ chi2(N-1)
    n = len(standardized)
    statistic = (n - 1) * standardized.var(ddof=1)
    assert stats.chi2.ppf(0.0005, n - 1) < statistic < stats.chi2.ppf(0.9995, n - 1)


def test_claim_is_the_gaussian_mechanism_and_matches_dp_accounting():
    for z in (0.5, 1.0, 2.0):
        agg = DPFedAvg(noise_multiplier=z, clip=3.0, dp_delta=1e-5)
        assert agg.claim.epsilon == pytest.approx(gaussian_epsilon(1e-5, 3.0, 3.0 * z), rel=1e-9)
        assert agg.claim.scope == "aggregate"
        accountant = pld.PLDAccountant(value_discretization_interval=1e-4).compose(agg.dp_event())
        assert accountant.get_epsilon(1e-5) == pytest.approx(agg.claim.epsilon, rel=2e-3)


def test_dp_event_composes_over_rounds_as_the_known_gaussian():
    """K rounds at q = 1 are one Gaussian with multiplier z / sqrt(K) (exact, Balle-Wang);
    with Poisson sampling q < 1 the PLD accountant stays below the (looser) RDP accountant."""
    z, k = 2.0, 100
    event = DPFedAvg(noise_multiplier=z, clip=1.0).dp_event()
    composed = pld.PLDAccountant(value_discretization_interval=1e-4).compose(event, k).get_epsilon(1e-5)
    assert composed == pytest.approx(gaussian_epsilon(1e-5, 1.0, z / math.sqrt(k)), rel=3e-3)
    sampled = dp_accounting.PoissonSampledDpEvent(0.01, event)
    eps_pld = pld.PLDAccountant().compose(sampled, 1000).get_epsilon(1e-5)
    eps_rdp = rdp.RdpAccountant().compose(sampled, 1000).get_epsilon(1e-5)
    assert 0 < eps_pld <= eps_rdp


def test_adaptive_clip_tracks_the_target_quantile():
    rng = np.random.default_rng(3)
    agg = DPFedAvg(noise_multiplier=1.0, clip=0.1, quantile=0.5, lr=0.2, count_std=5.0)
    for _ in range(300):  # update norms uniform on [0, 2]: the median is 1
        u = rng.normal(size=(200, 3))
        u *= (rng.uniform(0, 2, size=200) / np.linalg.norm(u, axis=1))[:, None]
        agg.aggregate(updates_messages(u), np.arange(200), rng)
    assert agg.clip == pytest.approx(1.0, abs=0.15)
    # the two Gaussian queries together are one of multiplier z
    zd = agg.update_multiplier
    assert zd > 1.0 and zd**-2 + (2 * 5.0) ** -2 == pytest.approx(1.0)
    assert agg.claim.epsilon == pytest.approx(DPFedAvg(noise_multiplier=1.0).claim.epsilon)


def test_adaptive_clip_step_is_andrews_update_with_the_rounds_own_draws():
    """One round of adaptive clipping against Andrew et al. (2021), Alg. 1, with the same draws:
    the noisy fraction at or below the clip b = (#{||u|| <= C} + N(0, count_std^2)) / m, then
    C <- C exp(-lr (b - quantile)); the draws in the aggregator's order (the sum's noise, then the
    count's). Catches: a biased count noise (mean 1), the step's sign, ``<`` for ``<=`` at a norm
    equal to the clip, the count over another cohort size."""
    u = np.zeros((7, 3))
    u[:, 0] = [0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 0.9]  # one norm exactly at the clip
    agg = DPFedAvg(noise_multiplier=1.0, clip=1.0, quantile=0.4, lr=0.3, count_std=2.0)
    agg.aggregate(updates_messages(u), np.arange(7), np.random.default_rng(11))
    draws = np.random.default_rng(11)
    draws.normal(0.0, 1.0, size=3)
    b = (4 + draws.normal(0.0, 2.0)) / 7
    assert agg.clip == pytest.approx(1.0 * math.exp(-0.3 * (b - 0.4)), rel=1e-12)


def test_adaptive_clip_is_reproducible_from_the_seeded_streams():
    def run():
        agg = DPFedAvg(noise_multiplier=1.0, clip=1.0, quantile=0.3, count_std=2.0)
        rng = np.random.default_rng(4)
        for r in range(5):
            agg.aggregate(updates_messages(np.random.default_rng(r).normal(size=(20, 3))), np.arange(20), rng)
        return agg.clip

    assert run() == run()


@pytest.mark.parametrize("text, fragment", [
    ("dp-fedavg(noise_multiplier=0)", "noise_multiplier=0 must be a number in (0, 1e+100]"),
    ("dp-fedavg(noise_multiplier=-1)", "noise_multiplier=-1 must be a number in (0, 1e+100]"),
    ("dp-fedavg(clip=0)", "clip=0 must be a number in (0, 1e+100]"),
    ("dp-fedavg(quantile=1)", "quantile=1 must be a number in [0, 1)"),
    ("dp-fedavg(noise_multiplier=4,quantile=0.5,count_std=1)", "count_std = 1 must exceed noise_multiplier / 2"),
])
def test_bad_parameters_one_line_naming_the_option(text, fragment):
    with pytest.raises(FltrError) as err:
        parse_defense(text)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_engine_passes_the_global_model_and_trains():
    splits = fold_split(generate("mq2008", queries=200, seed=3), 1)
    data = splits.train
    alg = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", data.n_levels), lr=0.1)
    params = np.random.default_rng(0).normal(size=data.n_features)
    stack = parse_defense("dp-fedavg(noise_multiplier=1e-9,clip=1000)")
    queries = np.arange(20).reshape(10, 2)
    new, _, batch, out = run_round(alg, params, None, data, queries, np.arange(10), 1, 7, defenses=stack)
    assert batch.view.messages is None and batch.view.threat_model == "server"
    np.testing.assert_allclose(new, out.messages.vector.mean(0), atol=1e-6)  # no clipping, no noise to speak of


def test_audit_never_beats_the_claim_and_the_worst_pair_is_tight():
    """Cohort 1, add/remove one user: the output is (u + N(0, (zC)^2)) with ||u|| = C, or the noise
    alone. The 95 % lower bound exceeds the claim in at most the share the confidence allows
    (P(Bin(10, 0.05) >= 3) = 0.012); the projection's separation estimates mu = 1/z (a point
    estimate; the lower bound mu_lb is audit-defense's, issue #12)."""
    z, c = 1.0, 1.0
    u = np.zeros(4)
    u[0] = c
    agg = DPFedAvg(noise_multiplier=z, clip=c)

    def mechanism(rng, n_trials, which):
        msgs = updates_messages(u[None, :] if which else np.zeros((1, 4)))
        return np.stack([agg.aggregate(msgs, np.arange(1), rng).mean for _ in range(n_trials)])

    statistic = projection_statistic(np.zeros(4), u)
    above = sum(audit(mechanism, statistic, claim=agg.claim, n_trials=1000, seed=seed).epsilon_lb > agg.claim.epsilon
                for seed in range(10))
    assert above <= 2
    rng = np.random.default_rng(100)
    s0, s1 = statistic(mechanism(rng, 4000, 0)), statistic(mechanism(rng, 4000, 1))
    assert (s1.mean() - s0.mean()) / np.sqrt((s0.var() + s1.var()) / 2) >= 0.9 / z
