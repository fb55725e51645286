"""Privacy-critical functions against independent computations, at the points where they can be
wrong (issue 22): the epsilon / mu bounds from error rates (every branch, delta where it binds),
what leaves each noise defense (the clip centre and the noise scale, with the power to see a
factor 2 in sensitivity), the accountant against closed forms and hand-composed privacy loss,
and the secure-aggregation fixed-point ring where its headroom binds.

Each oracle here is computed without the code under test: bisection on the defining
inequalities, scipy's binomial / normal / Laplace laws, exact enumeration of privacy-loss
distributions."""

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from attacks.epsilon_bounds import (
    audit,
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
    mu_from_rates,
    mu_lower_bound,
)
from defenses.accounting import ParticipationSchedule, compose_epsilon
from defenses.accounting import privacy_spent as run_privacy_spent
from defenses.clipping import Clip
from defenses.dp_distributed import DistributedLaplace
from defenses.dp_gaussian import Gaussian
from defenses.dp_local import LocalLaplace
from defenses.randomized_response import RandomizedResponse
from defenses.secagg_protocol import FixedPoint
from defenses.stack import parse_defense
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Messages

# --- oracles ---------------------------------------------------------------------------------


def eps_oracle(fpr: float, fnr: float, delta: float) -> float:
    """The smallest eps >= 0 with FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta
    (the (eps, delta)-DP constraints on one test), by bisection on the constraints themselves."""

    def ok(e):
        w = math.exp(e)
        return fpr + w * fnr >= 1 - delta - 1e-15 and fnr + w * fpr >= 1 - delta - 1e-15

    if ok(0.0):
        return 0.0
    if not ok(700.0):
        return math.inf
    lo, hi = 0.0, 700.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def mu_oracle(fpr: float, fnr: float) -> float:
    """The smallest mu >= 0 whose Gaussian trade-off curve T(a) = Phi(Phi^-1(1 - a) - mu) lies at
    or below both (FPR, FNR) and (FNR, FPR), by bisection on scipy's normal law."""

    def ok(m):  # scipy.special's ndtr / ndtri are the normal cdf / ppf without stats.norm's overhead
        return (fnr >= special.ndtr(special.ndtri(1 - fpr) - m) - 1e-12) and \
            (fpr >= special.ndtr(special.ndtri(1 - fnr) - m) - 1e-12)

    if ok(0.0):
        return 0.0
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def cp_upper_oracle(k: int, n: int, level: float) -> float:
    """The one-sided Clopper-Pearson upper limit: the rate q with P(Binom(n, q) <= k) = 1 - level."""
    if k >= n:
        return 1.0
    return optimize.brentq(lambda q: stats.binom.cdf(k, n, q) - (1 - level), 1e-15, 1 - 1e-15, xtol=1e-14)


# --- epsilon and mu from error rates -----------------------------------------------------------

RATES = [0.0, 1e-4, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0]


@pytest.mark.parametrize("delta", [0.0, 1e-3, 0.05, 0.2])
def test_epsilon_from_rates_is_the_smallest_epsilon_the_test_allows(delta):
    """Every (FPR, FNR) pair of a grid, both branches (FPR < FNR and FPR > FNR) and delta where it
    binds: equals the bisection oracle on the DP inequalities (catches delta dropped from one branch)."""
    grid = list(itertools.product(RATES, RATES))
    got = epsilon_from_rates(np.array([g[0] for g in grid]), np.array([g[1] for g in grid]), delta)
    assert got.shape == (len(grid),)
    for (fpr, fnr), value in zip(grid, got):
        want = eps_oracle(fpr, fnr, delta)
        if math.isinf(want):
            assert math.isinf(value), (fpr, fnr, delta)
        else:
            assert value == pytest.approx(want, abs=1e-9), (fpr, fnr, delta)


def test_delta_binds_in_each_branch_separately():
    """Points where one branch decides and delta changes it: 0.05 errors of one kind, 0.3 of the other."""
    for fpr, fnr in [(0.05, 0.3), (0.3, 0.05)]:
        for delta in (0.01, 0.1):
            assert float(epsilon_from_rates(fpr, fnr, delta)) == pytest.approx(math.log((1 - delta - max(fpr, fnr))
                                                                                     / min(fpr, fnr)), rel=1e-12)
            assert float(epsilon_from_rates(fpr, fnr, delta)) < float(epsilon_from_rates(fpr, fnr, 0.0))


def test_mu_from_rates_is_the_smallest_gaussian_curve_below_the_test():
    grid = [(a, b) for a, b in itertools.product(RATES[1:-1], RATES[1:-1])]
    got = mu_from_rates(np.array([g[0] for g in grid]), np.array([g[1] for g in grid]))
    for (fpr, fnr), value in zip(grid, got):
        assert value == pytest.approx(mu_oracle(fpr, fnr), abs=1e-8), (fpr, fnr)
    assert float(mu_from_rates(0.6, 0.6)) == 0.0


@pytest.mark.parametrize("n", [10, 500])
@pytest.mark.parametrize("level", [0.95, 0.975])
def test_clopper_pearson_upper_limit_every_count(n, level):
    ks = np.arange(0, n + 1, max(1, n // 25))
    got = clopper_pearson_upper(ks, n, level)
    np.testing.assert_allclose(got, [cp_upper_oracle(int(k), n, level) for k in ks], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("fp,fn,n0,n1", [(0, 0, 500, 500), (3, 40, 500, 500), (40, 3, 500, 700), (120, 90, 400, 300)])
@pytest.mark.parametrize("delta", [0.0, 0.01])
def test_lower_bounds_put_bonferroni_split_clopper_pearson_limits_into_the_formula(fp, fn, n0, n1, delta):
    """At confidence 0.95 each rate gets its 97.5 % upper limit (Bonferroni over the two rates)."""
    fpr_u, fnr_u = cp_upper_oracle(fp, n0, 0.975), cp_upper_oracle(fn, n1, 0.975)
    assert float(epsilon_lower_bound(fp, fn, n0, n1, delta, 0.95)) == pytest.approx(eps_oracle(fpr_u, fnr_u, delta),
                                                                                   abs=1e-7)
    assert float(mu_lower_bound(fp, fn, n0, n1, 0.95)) == pytest.approx(mu_oracle(fpr_u, fnr_u), abs=1e-6)


def test_audit_counts_errors_on_the_evaluation_half_and_reports_the_bound_of_those_counts():
    """A deterministic mechanism with known outputs: the held-out halves separate perfectly at 0.5,
    the evaluation halves carry 30 false positives of 500 and 70 false negatives of 500."""
    n = 1000

    def mechanism(rng, size, which):
        out = np.full(size, float(which))
        out[n - 30:] = 1.0 if which == 0 else out[n - 30:]   # input 0: 30 outputs like input 1 ...
        if which == 1:
            out[n - 70:] = 0.0                              # ... input 1: 70 like input 0
        return out

    claim = PrivacyClaim(epsilon=2.0, delta=0.0, scope="message")
    r = audit(mechanism, lambda x: x, claim=claim, n_trials=n, seed=0)
    assert (r.fp, r.fn, r.n0, r.n1, r.direction) == (30, 70, 500, 500, 1)
    assert 0.0 <= r.threshold < 1.0
    assert (r.fpr, r.fnr) == (0.06, 0.14)
    assert r.epsilon_point == pytest.approx(eps_oracle(0.06, 0.14, 0.0), abs=1e-9)
    want = eps_oracle(cp_upper_oracle(30, 500, 0.975), cp_upper_oracle(70, 500, 0.975), 0.0)
    assert r.epsilon_lb == pytest.approx(want, abs=1e-7)
    assert r.ceiling == pytest.approx(eps_oracle(cp_upper_oracle(0, 500, 0.975), cp_upper_oracle(0, 500, 0.975), 0.0),
                                      abs=1e-7)
    assert not r.trial_limited and r.claim_verdict == ("violated" if want > 2.0 else "consistent")
    assert r.tightness == pytest.approx(want / 2.0)
    flipped = audit(lambda rng, s, w: -mechanism(rng, s, w), lambda x: x, claim=claim, n_trials=n, seed=0)
    assert (flipped.fp, flipped.fn, flipped.direction) == (30, 70, -1)
    # both directions separate: input 0 at 50, input 1 at 0 (60 %) or 100 (40 %). Flagging "below 50"
    # errs on 40 % of input 1, "above 50" on 60 %: the direction with the larger bound (-1) wins,
    # although the other's threshold (~75) exceeds both bounds
    def two_sided(rng, size, which):
        return np.full(size, 50.0) if which == 0 else np.where(np.arange(size) % 10 < 6, 0.0, 100.0)

    both = audit(two_sided, lambda x: x, claim=claim, n_trials=n, seed=0)
    assert (both.direction, both.fp, both.fn) == (-1, 0, 200)


# --- what leaves each defense ------------------------------------------------------------------

def _same_rows(u: np.ndarray, n: int, kind: str, g: np.ndarray) -> Messages:
    vector = np.broadcast_to(u + (g if kind == "weights" else 0), (n, len(u))).copy()
    return Messages(n_interactions=np.ones(n, dtype=np.int64), vector=vector, vector_kind=kind)


@pytest.mark.parametrize("kind", ["weights", "update"])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_local_laplace_output_is_centred_on_the_update_clipped_to_half_delta(kind, norm):
    """n copies of one large update u: the mean of the defended updates estimates the clipped update,
    which must have norm Delta/2 along u (clipping to Delta would double it: 40 standard errors off)."""
    sens, eps, P, n = 3.0, 30.0, 6, 4000
    rng = np.random.default_rng(11)
    g, u = rng.normal(0, 1, P), rng.normal(0, 5, P)
    out = LocalLaplace(eps=eps, sensitivity=sens, norm=norm).apply(_same_rows(u, n, kind, g), g, rng).updates(g)
    size = np.abs(u).sum() if norm == "l1" else np.linalg.norm(u)
    centre = u * (sens / 2) / size
    se = (sens / eps) * math.sqrt(2 / n)
    assert np.all(np.abs(out.mean(axis=0) - centre) < 5 * se)
    assert 5 * se < np.abs(centre).max() / 4


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_local_laplace_noise_scale_is_delta_over_epsilon(eps):
    """Updates inside the ball pass unclipped; the noise left on them has mean |x| = Delta/eps
    (Laplace: E|X| = b) to 2 % -- a scale of Delta/(2 eps) or 2 Delta/eps is 50 standard errors off."""
    sens, P, n = 4.0, 10, 5000
    rng = np.random.default_rng(12)
    g = rng.normal(0, 1, P)
    u = np.full(P, 0.1)                          # L1 norm 1 < Delta/2: untouched by the clip
    out = LocalLaplace(eps=eps, sensitivity=sens).apply(_same_rows(u, n, "update", g), g, rng).updates(g)
    noise = (out - u).ravel()
    assert np.abs(noise).mean() == pytest.approx(sens / eps, rel=0.02)
    assert stats.kstest(noise, stats.laplace(scale=sens / eps).cdf).pvalue > 1e-3


def test_gaussian_output_is_centred_on_the_update_clipped_to_c_with_std_sigma_c():
    sigma, clip, P, n = 0.5, 2.0, 8, 6000
    rng = np.random.default_rng(13)
    g, u = rng.normal(0, 1, P), rng.normal(0, 5, P)
    out = Gaussian(sigma=sigma, clip=clip).apply(_same_rows(u, n, "update", g), g, rng).updates(g)
    centre = u * clip / np.linalg.norm(u)
    assert np.all(np.abs(out.mean(axis=0) - centre) < 5 * sigma * clip / math.sqrt(n))
    assert (out - centre).std() == pytest.approx(sigma * clip, rel=0.02)


def test_distributed_laplace_clips_weights_to_half_delta_and_the_cohort_noise_is_laplace_lambda():
    """Cohort of n identical large weight vectors: each message's mean over coordinates estimates the
    clipped weights' coordinate Delta/(2 sqrt(P)) (16 standard errors from Delta/sqrt(P)); the cohort's
    summed noise has mean |x| = lambda (Laplace) and one share variance 2 lambda^2 / n."""
    eps, sens, P, n = 4.5, 5.0, 20000, 10
    rng = np.random.default_rng(14)
    g = rng.normal(0, 1, P)
    w = np.full(P, 3.0)
    msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), vector=np.tile(w, (n, 1)), vector_kind="weights")
    out = DistributedLaplace(eps=eps, sensitivity=sens).apply(msgs, g, rng).weights(g)
    lam = sens / eps
    coordinate = sens / 2 / math.sqrt(P)
    assert out.mean() == pytest.approx(coordinate, abs=5 * lam * math.sqrt(2 / (n * P * n)))
    noise = out - coordinate
    assert np.abs(noise.sum(axis=0)).mean() == pytest.approx(lam, rel=0.03)
    assert noise.var() == pytest.approx(2 * lam**2 / n, rel=0.08)


@pytest.mark.parametrize("of", ["weights", "update"])
def test_clip_output_norm_is_half_delta(of):
    sens, P = 5.0, 7
    rng = np.random.default_rng(15)
    g = rng.normal(0, 2, P)
    vec = rng.normal(0, 1, (40, P)) * rng.uniform(0.05, 3, (40, 1))   # the clipped quantity itself
    msgs = Messages(n_interactions=np.ones(40, dtype=np.int64), vector=vec + (g if of == "update" else 0),
                    vector_kind="weights")
    out = Clip(sensitivity=sens, of=of).apply(msgs, g, rng)
    before = msgs.weights(g) if of == "weights" else msgs.updates(g)
    after = out.weights(g) if of == "weights" else out.updates(g)
    norms = np.linalg.norm(before, axis=1)
    big = norms > sens / 2
    assert big.any() and (~big).any()
    np.testing.assert_allclose(np.linalg.norm(after[big], axis=1), sens / 2)
    np.testing.assert_allclose(after[~big], before[~big])


def test_randomized_response_transition_frequencies():
    """Each value kept with probability p, else one of the n - 1 others uniformly: the output counts
    of one input value against the multinomial law (chi-square), and the claim ln(p (n-1) / (1-p))."""
    p, values = 0.7, (0.0, 0.25, 0.5, 1.0)
    rr = RandomizedResponse(p=p, values=values)
    assert rr.claim.epsilon == pytest.approx(math.log(p * 3 / (1 - p)))
    m = 40000
    msgs = Messages(n_interactions=np.ones(m, dtype=np.int64), metric=np.full((m, 1), 0.5), vector=None)
    out = rr.apply(msgs, np.zeros(1), np.random.default_rng(16)).metric.ravel()
    counts = np.array([(out == v).sum() for v in values])
    expected = m * np.array([(1 - p) / 3, (1 - p) / 3, p, (1 - p) / 3])
    assert counts.sum() == m and stats.chisquare(counts, expected).pvalue > 1e-3
    assert abs(counts[2] / m - p) < 0.01


# --- the accountant ----------------------------------------------------------------------------

def privacy_spent(stack, rounds: int, sampling_rate: float = 1.0, delta: float | None = None) -> dict:
    """``K`` rounds at participation rate ``q`` on the accountant of the whole run
    (``defenses.accounting.privacy_spent`` over a schedule whose worst user took part in every
    round): ``epsilon_total`` is the figure against the server at q = 1 and against an observer of
    the released models (Poisson-sampled at q) below it."""
    schedule = ParticipationSchedule(int(rounds), float(sampling_rate), np.array([int(rounds)], dtype=np.int64))
    spent = run_privacy_spent(stack, schedule, delta, queries_per_client=1)  # one value per message
    epsilon = spent.epsilon_server if sampling_rate == 1.0 else spent.epsilon_observer
    accountant = spent.accountant if sampling_rate == 1.0 else spent.accountant_observer
    return {"epsilon_total": epsilon, "delta_total": spent.delta_total, "accountant": accountant}


def _pure_rr_epsilon(p: float, n: int) -> float:
    return math.log(p * (n - 1) / (1 - p))


@pytest.mark.parametrize("q", [1.0, 0.1])
def test_randomized_response_at_delta_zero_is_never_amplified_by_sampling(q):
    """Against the server there is no sampling amplification for RR (dp-accounting cannot amplify a
    replace-one event): K rounds cost K ln(p (n-1)/(1-p)) at any participation rate."""
    spent = privacy_spent(parse_defense("rr(p=0.9)"), 7, q)
    assert spent["epsilon_total"] == pytest.approx(7 * _pure_rr_epsilon(0.9, 11), rel=1e-12)


def test_laplace_at_delta_zero_full_and_sampled_against_the_worst_privacy_loss():
    """Full participation: K eps. Poisson sampling at rate q: the largest log-likelihood ratio of
    (1-q) Lap(0) + q Lap(1) against Lap(0) over a grid of outputs (approached in the far tail),
    times K -- computed from scipy's Laplace density, not from the formula."""
    eps, q, k = 2.0, 0.1, 10
    stack = parse_defense(f"dp-local-laplace(eps={eps})")
    assert privacy_spent(stack, k, 1.0)["epsilon_total"] == pytest.approx(k * eps, rel=1e-12)
    b = 1 / eps                                # sensitivity 1 in the event's units
    x = np.linspace(-10, 12, 200001)
    p0, p1 = stats.laplace.pdf(x, 0, b), stats.laplace.pdf(x, 1, b)
    mix = (1 - q) * p0 + q * p1
    worst = max(np.log(mix / p0).max(), np.log(p0 / mix).max())
    assert privacy_spent(stack, k, q)["epsilon_total"] == pytest.approx(k * worst, rel=1e-9)


@pytest.mark.parametrize("delta", [1e-2, 1e-4])
def test_laplace_at_positive_delta_one_round_is_the_closed_form(delta):
    """One Laplace round: delta(eps') = 1 - exp((eps' - eps) / 2), so eps'(delta) = eps + 2 ln(1 - delta)
    (the PLD accountant's discretization is pessimistic: within 2e-3 above)."""
    eps = 2.0
    got, _ = compose_epsilon(parse_defense(f"dp-local-laplace(eps={eps})").client[0].dp_event(), 1, 1.0, delta)
    want = eps + 2 * math.log(1 - delta)
    assert want - 1e-9 <= got <= want + 2e-3


def _rr_delta(eps_prime: float, eps: float, p: float, n: int, k: int) -> float:
    """delta(eps') of k rounds of randomized response, worst replace-one pair, by enumeration of its
    privacy loss: +eps with probability p (the true value), -eps with (1-p)/(n-1) (the neighbour's
    value), 0 otherwise; delta = E[(1 - e^(eps' - L))_+]."""
    a, b = p, (1 - p) / (n - 1)
    total = 0.0
    for i in range(k + 1):
        for j in range(k + 1 - i):
            prob = math.comb(k, i) * math.comb(k - i, j) * a**i * b**j * (1 - a - b) ** (k - i - j)
            loss = eps * (i - j)
            total += prob * max(0.0, 1 - math.exp(eps_prime - loss))
    return total


@pytest.mark.parametrize("q", [1.0, 0.1])
def test_randomized_response_at_positive_delta_against_hand_composed_privacy_loss(q):
    p, n, k, delta = 0.9, 11, 5, 1e-3
    eps = _pure_rr_epsilon(p, n)
    want = optimize.brentq(lambda e: _rr_delta(e, eps, p, n, k) - delta, 0.0, k * eps - 1e-9, xtol=1e-10)
    got = privacy_spent(parse_defense(f"rr(p={p})"), k, q, delta)["epsilon_total"]
    assert want - 1e-6 <= got <= want + 0.02


@pytest.mark.parametrize("rounds", [1, 16])
def test_gaussian_composition_is_the_gaussian_closed_form(rounds):
    """K rounds of Gaussian noise multiplier s compose to one with s / sqrt(K): mu = sqrt(K) / s and
    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) (Balle & Wang 2018, Thm. 8)."""
    sigma, delta = 2.0, 1e-5
    mu = math.sqrt(rounds) / (sigma / 2)        # noise multiplier std / (2C) = sigma / 2

    def gdelta(e):
        return stats.norm.cdf(mu / 2 - e / mu) - math.exp(e) * stats.norm.cdf(-mu / 2 - e / mu)

    want = optimize.brentq(lambda e: gdelta(e) - delta, 0.0, 200.0, xtol=1e-12)
    got = privacy_spent(parse_defense(f"dp-gaussian(sigma={sigma},clip=1,dp_delta={delta})"), rounds)["epsilon_total"]
    assert want - 1e-6 <= got <= want * 1.01 + 1e-3


# --- the secure-aggregation fixed-point ring --------------------------------------------------

def _ring_sum(codec: FixedPoint, x: np.ndarray, rng) -> np.ndarray:
    """The n clients' encodings summed in Z_(2^bits) (Python integers: no float or uint64 shortcuts)."""
    enc = codec.encode(x, rng)
    modulus = 1 << codec.bits
    total = [sum(int(v) for v in col) % modulus for col in enc.T]
    return np.array(total, dtype=np.uint64)


def test_1024_clients_at_256_in_32_bits_decode_plus_and_minus_262144():
    codec = FixedPoint.for_cohort(1024, 256.0, 32)
    rng = np.random.default_rng(17)
    x = np.tile(np.array([256.0, -256.0, 255.75, 0.0]), (1024, 1))
    np.testing.assert_allclose(codec.decode(_ring_sum(codec, x, rng)), [262144.0, -262144.0, 261888.0, 0.0])


@pytest.mark.parametrize("bits", [16, 24, 32, 40, 64])
@pytest.mark.parametrize("n", [2, 3, 1023, 1024, 1025])
@pytest.mark.parametrize("bound", [0.5, 3.0, 256.0])
def test_the_sum_of_n_extreme_values_never_wraps(bits, n, bound):
    """Every client at +bound (or -bound): the decoded sum is +-n bound (to n resolution steps), at the
    bit widths and cohort sizes where the headroom binds."""
    try:
        codec = FixedPoint.for_cohort(n, bound, bits)
    except Exception:
        # refused only when the ring truly has no room: n bound must then need more than bits - 2 bits
        assert math.log2(n * bound) > bits - 3
        return
    rng = np.random.default_rng(n + bits)
    x = np.tile(np.array([bound, -bound]), (n, 1))
    got = codec.decode(_ring_sum(codec, x, rng))
    np.testing.assert_allclose(got, [n * bound, -n * bound], atol=n * codec.resolution + 1e-9 * n * bound)


@pytest.mark.parametrize("make", [lambda: LocalLaplace(eps=1e-11, sensitivity=1.0),
                                  lambda: DistributedLaplace(eps=1e-11, sensitivity=1.0),
                                  lambda: Gaussian(sigma=1e6, clip=1e5)])
def test_a_noise_scale_above_the_cap_is_refused(make):
    """Delta/eps = 1e11 (sigma C = 1e11) exceeds MAX_NOISE_SCALE = 1e10: refused by name."""
    from fltr_audit.errors import FltrError

    with pytest.raises(FltrError, match="noise scale"):
        make()


def test_claims_of_the_noise_defenses():
    """Pure eps at delta 0 with the scope each defense protects (a claim with delta > 0 or the wrong
    scope would change every verdict and the accountant)."""
    assert LocalLaplace(eps=1.5, sensitivity=2.0).claim == PrivacyClaim(epsilon=1.5, delta=0.0, scope="message")
    assert DistributedLaplace(eps=1.5, sensitivity=2.0).claim == PrivacyClaim(epsilon=1.5, delta=0.0,
                                                                               scope="aggregate")
    rr = RandomizedResponse(p=0.8, values=(0.0, 1.0))
    assert rr.claim.epsilon == pytest.approx(math.log(0.8 / 0.2), rel=1e-12)
    assert (rr.claim.delta, rr.claim.scope) == (0.0, "message")


@pytest.mark.parametrize("sigma,clip,delta", [(1.0, 2.0, 1e-5), (0.7, 0.5, 1e-3)])
def test_gaussian_claim_is_the_analytic_gaussian_epsilon_for_sensitivity_2c(sigma, clip, delta):
    """The claim's epsilon solves Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) = delta for D = 2C,
    s = sigma C (Balle & Wang 2018, Thm. 8), by scipy's normal law and brentq."""
    D, s = 2 * clip, sigma * clip

    def gdelta(e):
        return stats.norm.cdf(D / (2 * s) - e * s / D) - math.exp(e) * stats.norm.cdf(-D / (2 * s) - e * s / D)

    want = optimize.brentq(lambda e: gdelta(e) - delta, 0.0, 100.0, xtol=1e-12)
    claim = Gaussian(sigma=sigma, clip=clip, dp_delta=delta).claim
    assert claim.epsilon == pytest.approx(want, rel=1e-7) and claim.delta == delta and claim.scope == "message"


@pytest.mark.parametrize("rounds", [1, 10])
def test_zcdp_composition_lies_between_the_exact_gaussian_and_the_classic_conversion(rounds):
    """rho-zCDP composed K times is (K rho)-zCDP; at delta its epsilon is at most the classic
    conversion min_a (K rho a + ln(1/delta)/(a - 1)) and at least the exact epsilon of the Gaussian
    mechanism with mu = sqrt(2 K rho) (which is exactly K rho-zCDP); delta 0 gives inf."""
    import dp_accounting as dpa

    rho, delta = 0.05, 1e-6
    got, accountant = compose_epsilon(dpa.ZCDpEvent(rho), rounds, 1.0, delta)
    r = rounds * rho
    classic = min(r * a + math.log(1 / delta) / (a - 1) for a in np.linspace(1.001, 2000, 200000))
    mu = math.sqrt(2 * r)

    def gdelta(e):
        return stats.norm.cdf(mu / 2 - e / mu) - math.exp(e) * stats.norm.cdf(-mu / 2 - e / mu)

    exact = optimize.brentq(lambda e: gdelta(e) - delta, 0.0, 100.0)
    assert exact <= got <= classic + 1e-9 and accountant.startswith("rdp")
    assert math.isinf(compose_epsilon(dpa.ZCDpEvent(rho), rounds, 1.0, 0.0)[0])


def test_randomized_response_over_two_values_and_the_bit_packing():
    from defenses.randomized_response import pack_bits, unpack_bits
    from fltr_audit.errors import FltrError

    RandomizedResponse(p=0.9, values=(0.0, 1.0))                     # the binary domain is allowed
    with pytest.raises(FltrError):
        RandomizedResponse(p=0.9, values=(1.0,))
    bits = np.array(list(itertools.product([0, 1], repeat=4)), dtype=bool)
    codes = pack_bits(bits)
    assert sorted(codes.tolist()) == list(range(16))
    assert codes.tolist() == [sum(int(b) << i for i, b in enumerate(row)) for row in bits]
    np.testing.assert_array_equal(unpack_bits(codes, 4), bits)


@pytest.mark.parametrize("bits,n,bound", [(32, 1024, 256.0), (24, 16, 4.0), (40, 2, 1.0), (16, 8, 2.0)])
def test_fixed_point_scale_is_the_finest_whose_n_fold_sum_fits(bits, n, bound):
    """At powers of two the headroom is exact: n bound 2^frac fits in the signed ring (< 2^(bits-1)),
    n bound 2^(frac+1) does not -- one bit less headroom wraps, one bit more wastes precision."""
    codec = FixedPoint.for_cohort(n, bound, bits)
    assert n * bound * 2.0 ** codec.frac < 2.0 ** (bits - 1) <= n * bound * 2.0 ** (codec.frac + 1)


@pytest.mark.parametrize("kwargs,message", [
    ({"n_trials": 3}, "^n_trials: must be an integer >= 4, got 3$"),
    ({"confidence": 1.0}, r"^confidence: must be a number in \(0, 1\), got 1.0$"),
    ({"confidence": 0.0}, r"^confidence: must be a number in \(0, 1\), got 0.0$"),
    ({"rounds": 0}, "^rounds: must be an integer >= 1, got 0$"), ({"rounds": 2.5}, "^rounds: must be an integer"),
    ({"neighbours": "nearby"}, "^neighbours")])
def test_audit_refuses_bad_parameters_by_name(kwargs, message):
    from fltr_audit.errors import FltrError

    with pytest.raises(FltrError, match=message):
        audit(lambda rng, n, w: rng.random(n) + w, lambda x: x, claim=PrivacyClaim(), **{"n_trials": 100, **kwargs})
    audit(lambda rng, n, w: rng.random(n) + w, lambda x: x, claim=PrivacyClaim(), n_trials=4, rounds=1,
          confidence=0.5, neighbours="worst-case")                      # the edges themselves are accepted


def test_a_gaussian_sigma_whose_epsilon_overflows_is_refused():
    from fltr_audit.errors import FltrError

    with pytest.raises(FltrError, match="too small"):
        Gaussian(sigma=1e-200)


def test_shuffle_pays_its_delta_once_per_round_and_composes_the_rest_by_hand():
    """The shuffler's (eps_s, delta_s) claim as a binary randomized response of eps_s plus delta_s per
    round: over K rounds at total delta D, epsilon solves delta_RR(eps; K) = D - K delta_s (privacy
    loss +-eps_s enumerated), inf when D <= K delta_s; the default D is 2 K delta_s."""
    stack = parse_defense("dp-local-laplace(eps=1)+shuffle(n=1000)")
    eps_s, delta_s = stack.claim.epsilon, stack.claim.delta
    assert delta_s > 0 and stack.claim.scope == "aggregate"
    k = 4
    p = math.exp(eps_s) / (1 + math.exp(eps_s))

    def by_hand(total_delta):
        rest = total_delta - k * delta_s
        return optimize.brentq(lambda e: _rr_delta(e, eps_s, p, 2, k) - rest, 0.0, k * eps_s, xtol=1e-10)

    default = privacy_spent(stack, k)
    assert default["delta_total"] == pytest.approx(2 * k * delta_s)
    want = by_hand(2 * k * delta_s)
    assert want - 1e-6 <= default["epsilon_total"] <= want + 0.02
    explicit = privacy_spent(stack, k, 1.0, 10 * k * delta_s)["epsilon_total"]
    assert by_hand(10 * k * delta_s) - 1e-6 <= explicit <= by_hand(10 * k * delta_s) + 0.02
    for too_small in (k * delta_s, 0.5 * k * delta_s):
        spent = privacy_spent(stack, k, 1.0, too_small)
        assert math.isinf(spent["epsilon_total"]) and spent["accountant"].startswith("none")


def test_scores_in_chunks_equal_one_pass_and_rounds_sum_their_scores():
    from attacks.epsilon_bounds import scores_of

    def mechanism(rng, n, which):
        return rng.random(n) + which

    one = scores_of(mechanism, lambda x: x, np.random.default_rng(3), 100, 1, chunk=1000)
    chunked = scores_of(mechanism, lambda x: x, np.random.default_rng(3), 100, 1, chunk=7)
    np.testing.assert_array_equal(one, chunked)
    summed = scores_of(lambda rng, n, w: np.full(n, 2.5), lambda x: x, np.random.default_rng(0), 10, 0, rounds=3,
                       chunk=4)
    np.testing.assert_array_equal(summed, np.full(10, 7.5))


@pytest.mark.parametrize("kwargs,message", [
    ({"rounds": 0}, "^rounds: must be an integer >= 1, got 0$"), ({"rounds": 2.5}, "^rounds: must be an integer"),
    ({"population": 5}, r"^population: must be at least clients \(10\), got 5$"),
    ({"delta": -0.1}, r"^delta: must be a number in \[0, 1\), got -0.1$")])
def test_privacy_spent_refuses_bad_parameters_by_name(kwargs, message):
    from fltr_audit.errors import FltrError

    args = {"rounds": 3, "population": None, "delta": None, **kwargs}
    with pytest.raises(FltrError, match=message):
        schedule = ParticipationSchedule.of_run(0, args["rounds"], 10, args["population"])
        run_privacy_spent(parse_defense("dp-local-laplace(eps=1)"), schedule, args["delta"])


def test_an_approximate_dp_event_has_no_finite_epsilon_at_delta_zero():
    spent = privacy_spent(parse_defense("dp-gaussian(sigma=1,clip=1)"), 3, 1.0, 0.0)
    assert math.isinf(spent["epsilon_total"]) and "delta 0" in spent["accountant"]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_secagg_protocol_refuses_vectors_fixed_point_cannot_encode(bad):
    from defenses.secagg_protocol import SecAggProtocol
    from fltr_audit.errors import FltrError

    vector = np.zeros((3, 4))
    vector[1, 2] = bad
    msgs = Messages(n_interactions=np.ones(3, dtype=np.int64), vector=vector, vector_kind="update")
    with pytest.raises(FltrError, match="NaN or infinity"):
        SecAggProtocol().aggregate(msgs, np.arange(3), np.random.default_rng(0))
