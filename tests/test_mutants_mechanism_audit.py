"""Tests that kill the surviving mutants of the stack audit (attacks/mechanism_audit.py,
stack_outputs.py, mechanism_tests.py, worst_case.py; issue 22, tools/mutation.toml): the crafted
inputs and the claimed mu against their closed forms, the defended outputs against clipping done
here, the likelihood ratios against scipy's laws and the Bessel-K density, and which audit path
(test, scope, threat model) each kind of stack takes."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import integrate, special, stats

from attacks.mechanism_tests import (
    gamma_difference_logpdf,
    gamma_share_statistic,
    mechanism_statistic,
    noisy_aggregate_statistic,
    rr_statistic,
)
from attacks.mechanism_audit import audit_stack, protected_by_aggregator
from attacks.stack_outputs import aggregate_mechanism, centre, clipped, message_mechanism, metric_randomizer
from attacks.worst_case import OVERSHOOT, UNDECLARED, claimed_mu, worst_case_inputs
from defenses.stack import parse_defense
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.privacy.claim_decision import gdp_mu
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import PrivacyClaim

# --- worst-case inputs and the claimed mu, closed forms ----------------------------------------


def test_worst_case_inputs_lie_overshoot_times_beyond_the_declared_clip():
    d = 9
    a, b = worst_case_inputs(parse_defense("dp-local-laplace(eps=1,sensitivity=3)"), d)  # L1: Delta/2 on one axis
    assert np.array_equal(b, -a) and b[0] == OVERSHOOT * 1.5 and np.count_nonzero(b) == 1
    a, b = worst_case_inputs(parse_defense("dp-local-laplace(eps=1,sensitivity=3,norm=l2)"), d)  # spread evenly
    assert np.allclose(b, OVERSHOOT * 1.5 / 3.0) and np.array_equal(a, -b)
    a, b = worst_case_inputs(parse_defense("dp-distributed(eps=1,sensitivity=4)"), d)
    assert np.linalg.norm(b) == pytest.approx(OVERSHOOT * 2.0) and np.allclose(b, b[0])
    a, b = worst_case_inputs(parse_defense("dp-gaussian(sigma=1,clip=0.5)"), d)
    assert b[0] == OVERSHOOT * 0.5 and np.count_nonzero(b) == 1 and np.array_equal(a, -b)
    a, b = worst_case_inputs(parse_defense("dp-fedavg(noise_multiplier=1,clip=0.7)"), d)  # add/remove one user
    assert not a.any() and b[0] == pytest.approx(OVERSHOOT * 0.7) and np.count_nonzero(b) == 1
    a, b = worst_case_inputs(parse_defense("rr(p=0.9,values=[0.2,0.5,0.9])"), d)
    assert (a.tolist(), b.tolist()) == ([0.2], [0.9])
    assert OVERSHOOT > 1  # beyond the clip, so that a clipping defense maps them onto it


@pytest.mark.parametrize("dim", [1, 3])
def test_a_stack_without_noise_gets_undeclared_on_one_coordinate_in_any_dimension(dim):
    a, b = worst_case_inputs(parse_defense("clip(sensitivity=2)"), dim)
    assert b[0] == UNDECLARED and np.count_nonzero(b) == 1 and np.array_equal(a, -b)


def test_claimed_mu_is_the_gaussian_dp_closed_form():
    """The mu the claim asserts: Gaussian std sigma C on sensitivity 2C: mu = 2/sigma per round;
    aggregator noise z on sensitivity C: mu = 1/z; sqrt(K) over K rounds."""
    assert claimed_mu(parse_defense("dp-gaussian(sigma=2,clip=0.5)"), 4) == pytest.approx(2 / 2 * 2)
    assert claimed_mu(parse_defense("dp-fedavg(noise_multiplier=2,clip=1)"), 9) == pytest.approx(3 / 2)
    dd = parse_defense("ddgauss")
    rho = mech.declared(dd.aggregator).rho
    # the claim's mu: its (eps, delta) from the zCDP conversion asserts no less than sqrt(2 rho)
    assert claimed_mu(dd, 3) == pytest.approx(gdp_mu(dd.claim.epsilon, dd.claim.delta) * math.sqrt(3))
    assert claimed_mu(dd, 3) >= math.sqrt(2 * rho * 3)
    for text in ("dp-local-laplace(eps=1)", "dp-gaussian(sigma=1)+dp-gaussian(sigma=2)", "clip"):
        assert math.isnan(claimed_mu(parse_defense(text)))


def test_claimed_mu_of_a_discrete_gaussian_with_slack_xi_is_nan():
    agg = SimpleNamespace(mechanism=mech.DiscreteGaussianSum(1.0, 1.0, 0.5, 0.01))
    assert math.isnan(claimed_mu(SimpleNamespace(aggregator=agg, client=()), 1))


# --- what leaves the client transforms ---------------------------------------------------------


def test_clipped_is_the_l2_projection_onto_the_ball():
    u = np.array([3.0, 4.0])
    assert np.allclose(clipped(u, 1.0), [0.6, 0.8])
    assert np.array_equal(clipped(u, 5.0), u) and np.array_equal(clipped(u, 6.0), u)
    assert np.array_equal(clipped(np.zeros(2), 1.0), np.zeros(2))


def test_centre_of_weights_clipping_is_measured_relative_to_the_global_model():
    """clip(of=weights) clips u + g (the weights) to Delta/2; the centre is that minus g."""
    stack = parse_defense("clip(sensitivity=2,of=weights)")
    g, u = np.array([0.5, -1.0, 2.0]), np.array([1.0, 1.0, 1.0])
    w = u + g
    want = w * min(1.0, 1.0 / np.linalg.norm(w)) - g
    assert np.allclose(centre(stack, u, g, "weights"), want)


def test_a_gamma_share_message_carries_the_noise_of_its_cohort_size():
    """Each row is one client of a cohort of 4: its noise variance is 2 lambda^2 / 4, not that of a
    cohort of all n trials; the rows are centred on the input clipped to Delta/2."""
    stack = parse_defense("dp-distributed(eps=1,sensitivity=2)")  # lambda = 2
    u = np.array([3.0, 0.0])
    out = message_mechanism(stack, (u, u), 4)(np.random.default_rng(5), 8001, 0)
    assert out.shape == (8001, 2)
    assert out.var(axis=0) == pytest.approx([2 * 4 / 4] * 2, rel=0.1)
    assert out.mean(axis=0) == pytest.approx([1.0, 0.0], abs=0.05)


def test_a_randomized_response_message_is_one_metric_value():
    stack = parse_defense("rr(p=0.9,values=[0,1])")
    out = message_mechanism(stack, (np.array([0.0]), np.array([1.0])), 1)(np.random.default_rng(1), 4000, 1)
    assert out.shape == (4000, 1) and abs(out.mean() - 0.9) < 0.03
    assert metric_randomizer(stack).p == 0.9


def test_the_aggregate_mean_holds_the_target_and_the_others_drawn_from_others():
    """A clip-only stack: the cohort mean is (clip(u) + (m - 1) clip(o)) / m exactly."""
    stack = parse_defense("clip(sensitivity=2)")
    u, o = np.array([3.0, 4.0]), np.array([0.0, 0.5])
    out = aggregate_mechanism(stack, (u, u), 3, others=o[None, :])(np.random.default_rng(0), 5, 0)
    want = (np.array([0.6, 0.8]) + 2 * o) / 3
    assert np.allclose(out, want)
    zero_others = aggregate_mechanism(stack, (u, u), 3)(np.random.default_rng(0), 2, 0)
    assert np.allclose(zero_others, np.array([0.6, 0.8]) / 3)
    with pytest.raises(FltrError, match=r"^cohort\b"):
        aggregate_mechanism(stack, (u, u), 1)


# --- likelihood ratios -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [0.25, 1.0])
def test_gamma_difference_logpdf_differences_match_the_numerical_convolution(shape):
    """log f(y1) - log f(y2) for f the density of the difference of two Gamma(shape, 2) laws,
    by numerical convolution (scipy), at |y| from 0.01 to 12."""
    scale = 2.0
    g = stats.gamma(shape, scale=scale)

    def density(y):
        y = abs(y)
        return integrate.quad(lambda t: g.pdf(t + y) * g.pdf(t), 0, np.inf, limit=200)[0]

    ys = np.array([0.01, 0.3, 1.0, 5.0, 12.0])
    got = gamma_difference_logpdf(ys, shape, scale)
    want = np.log([density(y) for y in ys])
    assert got - got[2] == pytest.approx(want - want[2], abs=2e-4)


def test_gamma_difference_logpdf_is_the_bessel_closed_form_over_the_whole_table():
    """(k - 1/2) log z + log K_{k-1/2}(z) (scipy's kv, unscaled) at z from 1e-250 to e^6.99."""
    k, scale = 0.25, 1.5
    z = np.exp(np.array([-575.0, -100.0, -7.3, -1.0, 0.4, 3.0, 6.9975]))
    got = gamma_difference_logpdf(z * scale, k, scale)
    want = (k - 0.5) * np.log(z) + np.log(special.kve(k - 0.5, z)) - z
    assert got == pytest.approx(want, abs=2e-5)


def test_gamma_difference_logpdf_is_the_bessel_closed_form_beyond_the_table():
    """Beyond the table's end (z >= e^7, in its last cell and in the tail): still scipy's closed
    form, to the asymptote's error (4 v^2 - 1) / (8 z) < 1e-4 (catches the index clipped past the
    table's end, which reads outside it)."""
    k, scale = 0.25, 1.5
    z = np.exp(np.array([7.0012, 7.5, 9.0]))
    got = gamma_difference_logpdf(z * scale, k, scale)
    want = (k - 0.5) * np.log(z) + np.log(special.kve(k - 0.5, z)) - z
    assert got == pytest.approx(want, abs=1e-4)


def test_gamma_share_statistic_is_the_log_likelihood_ratio_over_differing_coordinates():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.0, 1.0])
    x = np.array([[0.2, 7.0, 1.5], [3.0, -2.0, 0.0]])
    got = gamma_share_statistic(a, b, 4, 2.0)(x)
    want = sum(gamma_difference_logpdf(x[:, j] - b[j], 0.25, 2.0) - gamma_difference_logpdf(x[:, j] - a[j], 0.25, 2.0)
               for j in (0, 2))
    assert got == pytest.approx(want, abs=1e-12)


def test_rr_statistic_is_log_p_over_the_other_probability():
    p, values = 0.7, np.array([0.0, 0.5, 1.0])
    s = rr_statistic(p, values, 0.0, 1.0)
    other = math.log(0.3 / 2)
    assert s(np.array([[1.0], [0.0], [0.5]])) == pytest.approx([math.log(0.7) - other, other - math.log(0.7), 0.0])
    certain = rr_statistic(1.0, values, 0.0, 1.0)(np.array([[1.0], [0.0]]))
    assert certain.tolist() == [1e6, -1e6]


def test_noisy_aggregate_statistic_is_n_0_1_against_n_1_over_z():
    """Released mean (u_clipped + noise) / m with noise N(0, (z C)^2): the statistic has mean 0
    under no update and 1/z at the clipped update, std 1 (scipy's moments of the simulated law)."""
    declared = mech.AggregatorGaussian(2.0, 2.0, 0.5, False)
    u = np.array([3.0, 4.0, 0.0])
    stat = noisy_aggregate_statistic(declared, (np.zeros(3), u), 4)
    rng = np.random.default_rng(2)
    noise = rng.normal(0, 2.0 * 0.5, size=(20000, 3))
    s0, s1 = stat(noise / 4), stat((clipped(u, 0.5) + noise) / 4)
    assert s0.mean() == pytest.approx(0, abs=0.03) and s1.mean() == pytest.approx(0.5, abs=0.03)
    assert s0.std() == pytest.approx(1, rel=0.03)


def test_noisy_aggregate_statistic_between_two_real_updates():
    """Input 0 a real update too: the statistic projects on the clipped difference c1 - c0, so it
    has mean 0 under input 0 and ||c1 - c0|| / (z C) under input 1 (no noise: exactly)."""
    declared = mech.AggregatorGaussian(1.0, 1.0, 1.0, False)
    u0, u1 = np.array([0.6, 0.0]), np.array([0.0, 0.8])
    stat = noisy_aggregate_statistic(declared, (u0, u1), 2)
    assert stat(np.array([u0 / 2, u1 / 2])) == pytest.approx([0.0, 1.0])


# --- which audit path each stack takes ---------------------------------------------------------


def test_protection_by_the_aggregator_from_its_declaration():
    assert protected_by_aggregator(parse_defense("dp-fedavg(noise_multiplier=1)")) == "noise"
    assert protected_by_aggregator(parse_defense("ddgauss")) == "noise"
    assert protected_by_aggregator(parse_defense("rr(p=0.9)+shuffle(n=1000)")) == "shuffle"
    assert protected_by_aggregator(parse_defense("dp-local-laplace(eps=1)")) is None
    claims_only = SimpleNamespace(aggregator=SimpleNamespace(claim=PrivacyClaim(1.0, 0.0, "aggregate")))
    assert protected_by_aggregator(claims_only) == "noise"
    assert protected_by_aggregator(SimpleNamespace(aggregator=SimpleNamespace())) is None


def _audit(text, **kw):
    stack = parse_defense(text)
    return audit_stack(stack, claim=stack.claim, inputs=worst_case_inputs(stack, 2), neighbours="worst-case",
                       trials=kw.pop("trials", 300), **kw)


def test_the_audit_path_of_each_kind_of_stack():
    r = _audit("dp-local-laplace(eps=1)")
    assert (r.attack, r.audited_scope, r.threat_model) == ("laplace-llr", "message", "server")
    r = _audit("dp-local-laplace(eps=1)", scope="aggregate", cohort=3)
    assert (r.attack, r.audited_scope, r.threat_model) == ("projection", "aggregate", "server (aggregate only)")
    r = _audit("dp-fedavg(noise_multiplier=1)", cohort=3)
    assert (r.attack, r.audited_scope, r.threat_model) == ("projection", "aggregate", "server (aggregate only)")
    r = _audit("rr(p=0.9,values=[0,1])+shuffle(n=3)", cohort=3)
    assert (r.attack, r.audited_scope, r.threat_model) == ("shuffle-llr", "aggregate", "server (shuffled)")
    r = _audit("dp-local-laplace(eps=1)", threat_model="curious server")
    assert r.threat_model == "curious server"
    with pytest.raises(FltrError, match=r"^test\b"):
        _audit("dp-local-laplace(eps=1)", test="magic")
    with pytest.raises(FltrError, match=r"^trials\b"):
        _audit("dp-local-laplace(eps=1)", trials=99)


def test_the_learned_test_where_asked_for_or_nothing_single_is_declared():
    r = _audit("dp-local-laplace(eps=1)", test="learned", trials=200)
    assert r.attack == "learned-logistic"
    assert mechanism_statistic(parse_defense("dp-local-laplace(eps=1)+dp-gaussian(sigma=1)"),
                               (np.zeros(2), np.ones(2)), "message", 1) is None
    plug_in = parse_defense("dp-local-laplace(eps=1)")
    plug_in = SimpleNamespace(client=(*plug_in.client, SimpleNamespace(name="unknown")),
                              aggregator=plug_in.aggregator, name="plug-in")
    assert mechanism_statistic(plug_in, (np.zeros(2), np.ones(2)), "message", 1) is None


def _spy(monkeypatch, name):
    """Record the arguments of ``attacks.mechanism_audit.<name>`` (then call it)."""
    import attacks.mechanism_audit as mechanism_audit
    calls, real = [], getattr(mechanism_audit, name)

    def spy(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(mechanism_audit, name, spy)
    return calls


def test_an_aggregate_scope_audit_audits_the_cohort_mean(monkeypatch):
    """A clip-only stack, inputs inside the clip, the 3 others zero: the audited output at scope
    aggregate is the target's update / 4 (the cohort mean), not the message itself (catches the
    scope test dropped)."""
    import attacks.mechanism_audit as mechanism_audit
    seen = []

    class Seen(Exception):
        pass

    def spy(output):
        seen.append(output)
        raise Seen

    monkeypatch.setattr(mechanism_audit, "audit", lambda output, statistic, **kw: spy(output))
    monkeypatch.setattr(mechanism_audit, "audit_chosen", lambda candidates, **kw: spy(candidates["declared-norm"][0]))
    stack, u = parse_defense("clip(sensitivity=2)"), np.array([0.1, -0.2, 0.05])
    with pytest.raises(Seen):
        audit_stack(stack, claim=stack.claim, inputs=(np.zeros(3), u), neighbours="worst-case", scope="aggregate",
                    cohort=4, trials=100)
    np.testing.assert_allclose(seen[0](np.random.default_rng(0), 2, 1), np.tile(u / 4, (2, 1)), atol=1e-15)


def test_natural_neighbours_of_a_noisy_aggregator_are_the_larger_update_against_none(monkeypatch):
    """Add/remove one user: the larger of the two real updates (norm) against a zero update
    (catches the natural-neighbour rewrite dropped, which would audit two real updates)."""
    calls = _spy(monkeypatch, "noisy_aggregate_mechanism")
    stack = parse_defense("dp-fedavg(noise_multiplier=1,clip=1)")
    small, large = np.array([0.1, 0.0]), np.array([0.0, 0.5])
    audit_stack(stack, claim=stack.claim, inputs=(large, small), neighbours="natural", cohort=3, trials=100)
    (got0, got1), cohort = calls[0][1], calls[0][2]
    np.testing.assert_array_equal(got0, np.zeros(2))
    np.testing.assert_array_equal(got1, large)
    assert cohort == 3


def test_an_amplified_shuffle_claim_is_audited_at_a_cohort_of_at_least_its_n(monkeypatch):
    """The amplified claim of shuffle(n=400) holds for cohorts of at least 400 (rr's eps0 =
    log 1.5 meets Theorem 3.1's condition there): an audit asked for a cohort of 2 must shuffle
    400 messages (catches the cohort left at 2); the audit itself is not run."""
    import attacks.mechanism_audit as mechanism_audit
    calls = []

    def stop(*args, **kw):
        calls.append(args)
        raise LookupError("stop")

    monkeypatch.setattr(mechanism_audit, "shuffle_mechanism", stop)
    stack = parse_defense("rr(p=0.6,values=[0,1])+shuffle(n=400)")
    assert mech.declared(stack.aggregator).amplified
    with pytest.raises(LookupError, match="stop"):
        audit_stack(stack, claim=stack.claim, inputs=worst_case_inputs(stack, 2), neighbours="worst-case", cohort=2,
                    trials=100)
    assert calls[0][2] == 400


def test_a_shuffle_audit_of_one_message_is_refused():
    """A shuffle of one message hides nothing: a non-amplified shuffle audited at cohort 1 is
    refused on cohort (catches the cohort check dropped)."""
    stack = parse_defense("rr(p=0.9,values=[0,1])+shuffle(n=3)")
    assert not mech.declared(stack.aggregator).amplified
    with pytest.raises(FltrError, match=r"^cohort: must be an integer >= 2 \(the messages a shuffler mixes\), got 1"):
        _audit("rr(p=0.9,values=[0,1])+shuffle(n=3)", cohort=1)


def test_a_noisy_aggregator_gets_the_learned_test_when_asked_for():
    """--test learned on a noisy aggregator trains the learned test instead of the declared
    projection (catches the learned branch dropped)."""
    r = _audit("dp-fedavg(noise_multiplier=1)", cohort=3, test="learned", trials=100)
    assert (r.attack, r.audited_scope) == ("learned-logistic", "aggregate")


def test_a_per_cohort_message_mechanism_fills_every_row_block_by_block():
    """The per-cohort path (Gamma shares) runs the client defenses on whole cohorts and keeps the
    first ``n`` rows: with the same seed its rows are exactly the blocks ``run_client`` gives one
    after another (catches a first block that starts at row 1 and leaves row 0 unwritten)."""
    from attacks.stack_outputs import run_client
    stack = parse_defense("dp-distributed(eps=1,sensitivity=2)")
    u = np.array([0.3, -0.2])
    out = message_mechanism(stack, (u, u), 4)(np.random.default_rng(3), 7, 0)
    rng = np.random.default_rng(3)
    blocks = [run_client(stack, np.repeat(u[None, :], 4, axis=0), rng) for _ in range(2)]
    assert np.array_equal(out, np.vstack(blocks)[:7])


def test_the_shuffled_cohorts_others_hold_input_zero():
    """Replace-one worst case: the ``cohort - 1`` others hold ``inputs[0]`` whatever the target
    holds (catches others drawn from input 1). Randomized response with p near 1 keeps each value:
    on input 0 every shuffled message is 0, on input 1 exactly one is 1."""
    from attacks.stack_outputs import shuffle_mechanism
    stack = parse_defense("rr(p=0.999999,values=[0,1])+shuffle(n=4)")
    mechanism = shuffle_mechanism(stack, (np.array([0.0]), np.array([1.0])), 4, lambda m: np.asarray(m)[:, 0])
    assert mechanism(np.random.default_rng(2), 6, 0).sum(axis=1).tolist() == [0.0] * 6
    assert mechanism(np.random.default_rng(2), 6, 1).sum(axis=1).tolist() == [1.0] * 6


@pytest.mark.parametrize("kind, with_others", [("update", True), ("weights", True), ("weights", False)])
def test_an_aggregate_without_client_transforms_is_the_per_trial_loop_bit_for_bit(kind, with_others, monkeypatch):
    """``aggregate_mechanism`` of plain secure aggregation simulates its trials at once: against the
    loop it replaces (``run_client`` on each trial's cohort, the others drawn trial by trial from the
    same stream, the mean), the same bits for updates and for weights around a nonzero global
    model, with and without a pool of others, over several chunks.
    Catches: the others drawn in another order, the weights' (u + g) - g rounding skipped, another
    summation order of the mean."""
    from attacks import stack_outputs
    from attacks.stack_outputs import aggregate_mechanism, run_client

    stack = parse_defense("secagg")
    assert not stack.client
    rng = np.random.default_rng(0)
    u = (rng.normal(size=7), rng.normal(size=7))
    others = rng.normal(size=(40, 7)) if with_others else None
    g = rng.normal(size=7) * 3
    loop_rng = np.random.default_rng(9)
    expected = []
    for _ in range(25):
        rows = np.zeros((6, 7))
        rows[0] = u[1]
        if others is not None:
            rows[1:] = others[loop_rng.integers(0, 40, size=5)]
        expected.append(run_client(stack, rows, loop_rng, g, kind).mean(axis=0))
    monkeypatch.setattr(stack_outputs, "TRIAL_CHUNK_VALUES", 6 * 7 * 4)  # chunks of 4 trials
    got = aggregate_mechanism(stack, u, 6, others, g, kind)(np.random.default_rng(9), 25, 1)
    assert np.array_equal(got, np.array(expected))
