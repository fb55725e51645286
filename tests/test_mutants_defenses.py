"""Tests that kill the surviving mutants of the noise defenses, their dp_accounting events and the
accountant (issue 22, tools/mutation.toml). Every expected value is a closed form computed here
from the defense's parameters (the Laplace epsilon 1/b, the randomized-response keep
probability, Balle & Wang's Gaussian delta with scipy's normal law), never the code's own formula.
"""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from scipy import stats

from defenses.accounting import ParticipationSchedule, RunAccountant, compose_epsilon
from defenses.clipping import MAX_NOISE_SCALE, Clip, check_noise_scale, clip_rows, require_vector
from defenses.ddgauss import DDGauss
from defenses.dp_distributed import DistributedLaplace, gamma_difference_noise
from defenses.dp_gaussian import Gaussian, gaussian_delta
from defenses.dp_local import LocalLaplace
from defenses.randomized_response import RandomizedResponse
from defenses.secagg import IdealSecAgg
from defenses.stack import parse_defense
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages

# --- one round's dp_accounting event, against the claim's closed form --------------------------


@pytest.mark.parametrize("make", [lambda: LocalLaplace(eps=1.5, sensitivity=2.0),
                                  lambda: LocalLaplace(eps=0.5, sensitivity=3.0, norm="l2"),
                                  lambda: DistributedLaplace(eps=1.5, sensitivity=2.0),
                                  lambda: DistributedLaplace(eps=4.5, sensitivity=5.0)])
def test_a_laplace_event_has_the_claimed_epsilon_one_over_its_noise_multiplier(make):
    """Laplace(b) on a sensitivity-1 query is (1/b)-DP: the event of Laplace(Delta/eps) on a
    sensitivity-Delta query must carry b = 1/eps (catches scale * sensitivity for scale / sensitivity,
    dp_distributed.py's old survivor, now in mechanism_events.dp_event)."""
    defense = make()
    event = defense.dp_event()
    assert isinstance(event, dpa.LaplaceDpEvent)
    assert event.noise_multiplier == pytest.approx(1.0 / defense.claim.epsilon, rel=1e-12)
    eps, _ = compose_epsilon(event, 3, 1.0, 0.0)  # pure composition: 3 eps
    assert eps == pytest.approx(3 * defense.claim.epsilon, rel=1e-12)


@pytest.mark.parametrize("sigma,clip", [(1.0, 2.0), (0.7, 0.5)])
def test_a_gaussian_event_has_std_over_the_sensitivity_2c(sigma, clip):
    """N(0, (sigma C)^2) on a sensitivity-2C query is the Gaussian event of multiplier sigma / 2."""
    event = Gaussian(sigma=sigma, clip=clip, dp_delta=1e-5).dp_event()
    assert isinstance(event, dpa.GaussianDpEvent)
    assert event.noise_multiplier == pytest.approx(sigma / 2, rel=1e-12)


@pytest.mark.parametrize("p,values", [(0.9, (0.0, 0.5, 1.0)), (0.75, (0.0, 1.0)), (0.5, (1.0, 2.0, 3.0, 4.0, 5.0))])
def test_a_randomized_response_event_keeps_the_true_value_with_probability_p(p, values):
    """dp-accounting's mechanism sends a uniform one of k values with probability nu, so it keeps
    the true value with probability 1 - nu + nu / k and sends each other with nu / k: both must be
    the defense's (p and (1 - p) / (k - 1)); its pure epsilon is log(p (k - 1) / (1 - p))."""
    rr = RandomizedResponse(p=p, values=values)
    event = rr.dp_event()
    k = len(values)
    assert event.num_buckets == k
    nu = event.noise_parameter
    assert 1 - nu + nu / k == pytest.approx(p, rel=1e-12)
    assert nu / k == pytest.approx((1 - p) / (k - 1), rel=1e-12)
    eps, label = compose_epsilon(event, 2, 1.0, 0.0)
    assert eps == pytest.approx(2 * math.log(p * (k - 1) / (1 - p)), rel=1e-12)
    assert label == "pure composition"


def test_an_aggregator_gaussian_event_is_its_noise_multiplier():
    stack = parse_defense("dp-fedavg(noise_multiplier=1.7,clip=0.5)")
    from defenses.accounting import dp_event_of

    event = dp_event_of(stack)
    assert isinstance(event, dpa.GaussianDpEvent)
    assert event.noise_multiplier == pytest.approx(1.7, rel=1e-12)


def test_a_shuffle_event_is_the_binary_randomized_response_of_the_claimed_epsilon():
    """Binary randomized response with noise nu has epsilon log((1 - nu / 2) / (nu / 2)); the
    shuffler's event must have the claimed epsilon."""
    from defenses.accounting import dp_event_of

    stack = parse_defense("dp-local-laplace(eps=1)+shuffle(n=1000)")
    event = dp_event_of(stack)
    assert isinstance(event, dpa.RandomizedResponseDpEvent) and event.num_buckets == 2
    nu = event.noise_parameter
    assert math.log((1 - nu / 2) / (nu / 2)) == pytest.approx(stack.claim.epsilon, rel=1e-9)


# --- the accountant's labels and branches ------------------------------------------------------


def test_full_participation_at_delta_zero_is_plain_pure_composition():
    """At rate 1 no sampling formula may be used (its label says which accountant answered)."""
    eps, label = compose_epsilon(dpa.LaplaceDpEvent(0.5), 4, 1.0, 0.0)
    assert (eps, label) == (pytest.approx(8.0, rel=1e-12), "pure composition")
    eps, label = compose_epsilon(dpa.LaplaceDpEvent(0.5), 4, 0.1, 0.0)
    assert eps == pytest.approx(4 * math.log1p(0.1 * math.expm1(2.0)), rel=1e-12)
    assert label == "pure composition, poisson sampling"


def test_a_zcdp_event_at_delta_zero_is_infinite_and_says_why():
    eps, label = compose_epsilon(dpa.ZCDpEvent(0.1, 0.0), 3, 1.0, 0.0)
    assert math.isinf(eps) and label.startswith("rdp (delta 0")
    eps, label = compose_epsilon(dpa.ZCDpEvent(0.1, 0.0), 3, 1.0, 1e-5)
    # rho-zCDP composed 3 times is 3 rho-zCDP: eps <= 3 rho + 2 sqrt(3 rho log(1/delta)) (Bun & Steinke 2016)
    assert 0 < eps <= 0.3 + 2 * math.sqrt(0.3 * math.log(1e5)) and label == "rdp"


@pytest.mark.parametrize("delta", [-0.1, 1.0, 1.5])
def test_the_run_accountant_refuses_a_delta_outside_0_1(delta):
    acc = RunAccountant(parse_defense("dp-local-laplace(eps=1)"), ParticipationSchedule.full(3))
    with pytest.raises(FltrError, match=r"^delta: must be a number in \[0, 1\)"):
        acc.get_epsilon(delta)
    assert acc.get_epsilon(0.0) == pytest.approx(3.0, rel=1e-12)


def test_a_user_who_never_took_part_spent_nothing():
    """The 99th-percentile user of 100 absent users and one present one took part 0 times."""
    sched = ParticipationSchedule(rounds=10, sampling_rate=0.01, counts=np.array([0] * 100 + [2]))
    acc = RunAccountant(parse_defense("dp-local-laplace(eps=1)"), sched)
    assert acc.get_epsilon(0.0, quantile=0.99) == 0.0
    assert acc.get_epsilon(0.0) == pytest.approx(2.0, rel=1e-12)


# --- clipping and the noise-scale check --------------------------------------------------------


def test_the_noise_scale_cap_is_inclusive_at_1e10():
    check_noise_scale("x", "Delta/eps", MAX_NOISE_SCALE)
    check_noise_scale("x", "Delta/eps", 1e-300)
    for bad in (np.nextafter(1e10, np.inf), 1e10 + 0.5, 0.0, -1.0, math.inf, math.nan):
        with pytest.raises(FltrError, match="Delta/eps"):
            check_noise_scale("x", "Delta/eps", bad)
    assert MAX_NOISE_SCALE == 1e10


def test_clip_rows_l1_and_l2_norms_against_numpy_and_the_bound():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 6)) * rng.uniform(0.01, 5, size=(50, 1))
    for norm, measure in [("l1", lambda v: np.abs(v).sum(axis=1)), ("l2", lambda v: np.linalg.norm(v, axis=1))]:
        out = clip_rows(x, 1.5, norm)
        before, after = measure(x), measure(out)
        want = np.minimum(before, 1.5)
        assert after == pytest.approx(want, rel=1e-12)
        # each row only rescaled by a non-negative factor
        assert np.allclose(out * before[:, None], x * after[:, None])


def test_clip_declares_its_l2_bound_of_half_delta():
    for of in ("weights", "update"):
        m = Clip(sensitivity=3.0, of=of).mechanism
        assert (m.bound, m.of, m.norm) == (1.5, of, "l2")


def test_require_vector_refuses_messages_without_a_vector_only():
    class NoVector:
        vector = None

    class WithVector:
        vector = np.zeros((2, 3))

    with pytest.raises(FltrError, match="needs vector messages"):
        require_vector(NoVector(), "clip")
    require_vector(WithVector(), "clip")


# --- the Gaussian delta, against Balle & Wang with scipy's normal law --------------------------


@pytest.mark.parametrize("eps,sens,std", [(0.5, 2.0, 1.0), (1.0, 1.0, 3.0), (3.0, 2.0, 0.7), (0.0, 1.0, 1.0)])
def test_gaussian_delta_is_balle_wang_theorem_8(eps, sens, std):
    n = stats.norm
    want = n.cdf(sens / (2 * std) - eps * std / sens) - math.exp(eps) * n.cdf(-sens / (2 * std) - eps * std / sens)
    assert gaussian_delta(eps, sens, std) == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_gaussian_claim_at_its_delta_and_refusal_of_a_tiny_sigma():
    g = Gaussian(sigma=1.0, clip=1.0, dp_delta=1e-5)
    assert gaussian_delta(g.claim.epsilon, 2.0, 1.0) == pytest.approx(1e-5, rel=1e-6)
    with pytest.raises(FltrError, match="too small"):
        Gaussian(sigma=1e-200, clip=1.0, dp_delta=1e-5)


# --- the Gamma shares of the distributed Laplace mechanism -------------------------------------


@pytest.mark.parametrize("n", [1, 4])
def test_n_gamma_difference_shares_sum_to_laplace_lambda(n):
    """Sum of n shares ~ Laplace(0, lambda): KS against scipy's law (a share with shape n instead of
    1/n, or a sum instead of a difference, fails at once); one share has variance 2 lambda^2 / n."""
    rng = np.random.default_rng(11)
    lam = 2.5
    shares = gamma_difference_noise(n, lam, (n, 40_000), rng)
    total = shares.sum(axis=0)
    assert stats.kstest(total, stats.laplace(0, lam).cdf).pvalue > 1e-3
    assert shares.var() == pytest.approx(2 * lam ** 2 / n, rel=0.05)


# --- the secure-aggregation protocol's unmasking round -----------------------------------------


def test_unmasking_uploads_one_share_per_alive_holder_of_each_needed_secret():
    """4 clients, complete graph (each secret held by all 4), client 3 dropped: every secret is
    needed (a survivor's self-mask seed, or the dropout's mask key) and has 3 alive holders, so
    round 4 uploads 4 x 3 shares of 4 + 64 bytes; the sum is the survivors' inputs."""
    from defenses import secagg_protocol as sp

    inputs = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.uint64)
    state = sp.ProtocolState(inputs=inputs, bits=16, neighbours=sp.neighbour_graph(4, 0, np.random.default_rng(0)),
                             alive=np.array([True, True, True, False]), threshold=0.5, name="t",
                             stats={"bytes_up": 0, "bytes_down": 0, "mask_key_agreements": 0,
                                    "encryption_key_agreements": 0}, ring_mask=np.uint64((1 << 16) - 1))
    sp.advertise_keys(state)  # two 32-byte public keys up per client, each neighbour's down
    assert (state.stats["bytes_up"], state.stats["bytes_down"]) == (64 * 4, 64 * 4 * 3)
    sp.share_keys(state)  # per (client, neighbour): nonce 12 + two 64-byte shares + tag 16
    assert state.stats["bytes_up"] == 64 * 4 + (12 + 2 * 64 + 16) * 4 * 3
    sp.collect_masked_inputs(state)  # 3 survivors x 2 coordinates x 2 bytes (16-bit ring)
    before = state.stats["bytes_up"]
    assert before == 64 * 4 + (12 + 2 * 64 + 16) * 4 * 3 + 3 * 2 * 2
    sp.unmask(state)
    assert state.stats["bytes_up"] - before == 4 * 3 * (4 + 64)
    assert state.total.tolist() == [9, 12]


@pytest.mark.parametrize("delta,sens,std", [(1e-5, 2.0, 10.0), (1e-3, 1.0, 2.0), (1e-5, 2.0, 1.0)])
def test_gaussian_epsilon_is_the_root_of_balle_wang_delta(delta, sens, std):
    """Against bisection on Theorem 8 written with scipy's normal law, including points where the
    epsilon lies in (0, 1) (a search started at 1 instead of 0 answers 0 there)."""
    from defenses.dp_gaussian import gaussian_epsilon

    def bw(e):
        n = stats.norm
        return n.cdf(sens / (2 * std) - e * std / sens) - math.exp(e) * n.cdf(-sens / (2 * std) - e * std / sens)

    lo, hi = 0.0, 64.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if bw(mid) <= delta else (mid, hi)
    assert gaussian_epsilon(delta, sens, std) == pytest.approx(hi, abs=1e-9)
    assert hi > 0


@pytest.mark.parametrize("values,p", [((0.0, 0.0, 1.0), 0.9), ((1.0,), 0.9), ((0.0, 1.0), 0.5), ((0.0, 1.0), 1.5)])
def test_randomized_response_refuses_a_degenerate_domain_or_keep_probability(values, p):
    """At least two distinct values, and 1/n < p <= 1 (p = 1/n keeps no information: epsilon 0)."""
    with pytest.raises(FltrError):
        RandomizedResponse(p=p, values=values)
    RandomizedResponse(p=1.0, values=(0.0, 1.0))


def test_the_secagg_error_bound_is_one_resolution_per_survivor_over_the_weight():
    """Stochastic rounding moves each survivor's value by less than one resolution 2^-frac, so the
    weighted mean is off by at most n_alive 2^-frac / total weight (plus float rounding): the
    stated bound is that to a relative 1e-6 (a bound n_alive / 2^-frac holds too, uselessly)."""
    from defenses.secagg_protocol import SecAggProtocol

    rng = np.random.default_rng(0)
    n = 6
    vector = rng.uniform(-0.5, 0.5, size=(n, 3))
    weights = np.arange(1, n + 1)
    msgs = Messages(vector=vector, vector_kind="update", n_interactions=weights)
    agg = SecAggProtocol(bits=32, range=1.0).aggregate(msgs, np.arange(n), np.random.default_rng(1))
    want = n * 2.0 ** -agg.stats["fraction_bits"] / weights.sum()
    assert agg.stats["error_bound"] == pytest.approx(want, rel=1e-6)
    exact = (vector * weights[:, None]).sum(axis=0) / weights.sum()
    assert np.abs(agg.mean - exact).max() <= agg.stats["error_bound"]


def test_distributed_laplace_clips_the_weights_to_half_delta():
    """Weights (3, 4) (norm 5) against Delta = 2: each client sends (0.6, 0.8) plus its share of
    Laplace(Delta/eps); at eps = 100 and 2,000 clients a share has std 0.02 sqrt(2/2000)."""
    n = 2000
    msgs = Messages(vector=np.tile([3.0, 4.0], (n, 1)), vector_kind="weights", n_interactions=np.ones(n, dtype=np.int64))
    g = np.zeros(2)
    out = DistributedLaplace(eps=100.0, sensitivity=2.0).apply(msgs, g, np.random.default_rng(0)).weights(g)
    assert out.mean(axis=0) == pytest.approx([0.6, 0.8], abs=1e-3)


# dp_fedavg.py (issue 22: three of four sampled mutants survived)

@pytest.mark.parametrize("z, count_std", [(0.5, 1.0), (1.0, 5.0), (3.0, 50.0), (1.0, 0.6)])
def test_the_update_multiplier_and_the_count_compose_to_the_claimed_multiplier(z, count_std):
    """Andrew et al. 2021, Sec. 3.1: the sum (std z_D C, sensitivity C) and the count (std
    count_std, sensitivity 1/2) are one Gaussian mechanism of multiplier z when
    z^-2 = z_D^-2 + (2 count_std)^-2 (Gaussian mechanisms compose by adding mu^2 = (1/z)^2)."""
    from defenses.dp_fedavg import update_noise_multiplier

    z_update = update_noise_multiplier(z, count_std)
    assert z_update > z
    assert z_update**-2 + (1 / (2 * count_std)) ** 2 == pytest.approx(z**-2, rel=1e-12)
    assert update_noise_multiplier(z, z / 2) == math.inf  # the count alone spends the budget


@pytest.mark.parametrize("quantile", [1.0, 1.5, -0.1])
def test_adaptive_clipping_refuses_a_target_quantile_outside_0_1(quantile):
    from defenses.dp_fedavg import DPFedAvg

    with pytest.raises(FltrError, match="quantile"):
        DPFedAvg(quantile=quantile, count_std=50.0)
    assert DPFedAvg(quantile=0.999, count_std=50.0).adaptive


def test_the_count_noise_refusal_names_half_the_noise_multiplier():
    from defenses.dp_fedavg import DPFedAvg

    with pytest.raises(FltrError, match=r"count_std = 0\.7 must exceed noise_multiplier / 2 = 1\b"):
        DPFedAvg(noise_multiplier=2.0, quantile=0.5, count_std=0.7)
    assert DPFedAvg(noise_multiplier=2.0, quantile=0.5, count_std=1.01).adaptive


def test_ddgauss_runs_a_round_whose_local_std_is_half_a_step_or_more_and_refuses_below():
    """Prop. 14 of Kairouz et al. needs each client's discrete Gaussian std sigma_l = z C /
    (gamma sqrt(n)) >= 1/2 step. With bits = 11 for 100 clients (z = C = 1), a round of 100 clients
    has sigma_l = 0.70 and one of 150 has 0.57 (computed here from gamma): both must aggregate;
    200 clients (0.49) must be refused (catches the round's threshold 1 instead of 1/2)."""
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=11, n=100, dim=16)

    def sigma(n):
        return 1.0 * 1.0 / (agg.gamma * math.sqrt(n))

    assert 0.5 <= sigma(150) < sigma(100) < 1.0 and sigma(200) < 0.5
    for n in (100, 150):
        msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), vector=np.full((n, 16), 0.01), vector_kind="update")
        out = agg.aggregate(msgs, np.arange(n), np.random.default_rng(0))
        assert np.isfinite(out.mean).all()
    msgs = Messages(n_interactions=np.ones(200, dtype=np.int64), vector=np.zeros((200, 16)), vector_kind="update")
    with pytest.raises(FltrError, match="< 1/2 of a step"):
        agg.aggregate(msgs, np.arange(200), np.random.default_rng(0))


def test_a_sampled_zcdp_event_is_composed_without_amplification_and_says_so():
    """zCDP has no Poisson amplification in the RDP accountant: at q = 0.5 the epsilon is the
    full-participation one (an upper bound) and the label says no amplification was applied
    (catches the label's q < 1 flipped to q > 1)."""
    full, label_full = compose_epsilon(dpa.ZCDpEvent(0.1, 0.0), 3, 1.0, 1e-5)
    half, label_half = compose_epsilon(dpa.ZCDpEvent(0.1, 0.0), 3, 0.5, 1e-5)
    assert half == full and label_full == "rdp" and label_half == "rdp, no sampling amplification"


def test_secagg_aggregates_a_round_of_exactly_two_clients_and_counts_their_bytes():
    """Two clients are the fewest whose sum hides each message: a round of 2 is aggregated (their
    weighted mean), and its upload is 2 clients x (5 values + 1 weight) x 8 bytes (catches a
    minimum of 3, and the byte count's arithmetic)."""
    vec = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 2.0, 1.0, 0.0, -1.0]])
    msgs = Messages(n_interactions=np.array([1, 3], dtype=np.int64), vector=vec, vector_kind="update")
    out = IdealSecAgg().aggregate(msgs, np.arange(2), np.random.default_rng(0))
    np.testing.assert_allclose(out.mean, (vec[0] + 3 * vec[1]) / 4)
    assert out.stats["bytes_up"] == 2 * 6 * 8


def test_ddgauss_counts_whole_bytes_per_coordinate_in_its_upload():
    """Each of n clients uploads dim coordinates of ``bits`` bits, each in whole bytes: 20 bits
    take 3 bytes, so 3 clients x 16 coordinates x 3 bytes (catches bits / 16 for bits / 8)."""
    agg = DDGauss(noise_multiplier=1.0, clip=1.0, bits=20, n=3, dim=16)
    msgs = Messages(n_interactions=np.ones(3, dtype=np.int64), vector=np.zeros((3, 16)), vector_kind="update")
    assert agg.aggregate(msgs, np.arange(3), np.random.default_rng(0)).stats["bytes_up"] == 3 * 16 * 3
