"""Audits of defense stacks as mechanisms: the likelihood-ratio statistics against scipy and
numerical integration, tightness on worst-case neighbours, soundness over seeds, the flawed
published variants, composition over rounds, the learned test, and the audit-defense CLI."""


import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import ndtr, ndtri

from attacks.epsilon_bounds import audit, epsilon_lower_bound, mu_from_rates
from attacks.mechanism_tests import gamma_difference_logpdf, laplace_statistic, rr_statistic
from attacks.mechanism_audit import audit_stack
from attacks.stack_outputs import message_mechanism
from attacks.worst_case import worst_case_inputs
from fltr_audit.privacy.claim_decision import claim_verdict
from defenses.stack import parse_defense
from fltr_audit.cli import main
from fltr_audit.engine.interfaces import PrivacyClaim
from tests.power import binomial_plan
from tests.cli_json import cli_result


def worst(text, dim=46, trials=50_000, **kw):
    stack = parse_defense(text)
    return audit_stack(stack, claim=kw.pop("claim", stack.claim), inputs=worst_case_inputs(stack, dim),
                       neighbours="worst-case", trials=trials, **kw)


def test_claim_verdict_rules():
    assert claim_verdict(float("inf"), "none", "message", 7.2) == "no claim"
    assert claim_verdict(4.5, "aggregate", "message", 9.0) == "outside scope"
    assert claim_verdict(4.5, "aggregate", "aggregate", 9.0) == "violated"
    assert claim_verdict(4.5, "message", "message", 4.5) == "consistent"
    assert claim_verdict(4.5, "message", "message", 4.51) == "violated"


def test_mu_from_rates_inverts_the_gdp_tradeoff_curve():
    fpr = np.array([0.001, 0.05, 0.3])
    for mu in (0.5, 2.0):
        fnr = ndtr(ndtri(1 - fpr) - mu)
        np.testing.assert_allclose(mu_from_rates(fpr, fnr), mu, rtol=1e-9)
        np.testing.assert_allclose(mu_from_rates(fnr, fpr), mu, rtol=1e-9)  # symmetric curve


def test_laplace_statistic_is_the_scipy_log_likelihood_ratio():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=5), rng.normal(size=5)
    a[2] = b[2]
    x = rng.normal(size=(100, 5)) * 3
    llr = (stats.laplace.logpdf(x, b, 0.7) - stats.laplace.logpdf(x, a, 0.7)).sum(1)
    np.testing.assert_allclose(laplace_statistic(a, b, 0.7)(x), llr, atol=1e-9)


@pytest.mark.parametrize("shape", [0.3, 0.7])
def test_gamma_difference_density_against_numerical_convolution(shape):
    """f(y) = int g(t + y) g(t) dt for y > 0 (g the Gamma(shape, scale) density): log-density
    differences between points match the closed form (constants cancel)."""
    scale = 1.3
    g = stats.gamma(shape, scale=scale).pdf

    def density(y):
        y = abs(y)
        return integrate.quad(lambda t: g(t + y) * g(t), 0, np.inf, limit=200)[0]

    ys = np.array([0.05, 0.4, 1.5, 4.0, -2.0])
    numeric = np.log([density(y) for y in ys])
    closed = gamma_difference_logpdf(ys, shape, scale)
    np.testing.assert_allclose(closed - closed[0], numeric - numeric[0], atol=2e-4)


def test_gamma_difference_density_of_shape_one_is_laplace():
    y = np.linspace(-6, 6, 13)
    closed = gamma_difference_logpdf(y, 1.0, 2.0)
    lap = stats.laplace.logpdf(y, 0, 2.0)
    np.testing.assert_allclose(closed - closed[0], lap - lap[0], atol=1e-6)


def test_rr_statistic_is_the_transition_ratio():
    stack = parse_defense("rr(p=0.9)")
    rr = stack.client[0]
    a, b = worst_case_inputs(stack, 1)
    x = np.array([[a[0]], [b[0]], [rr.values[3]]])
    ratio = np.log(0.9 / (0.1 / 10))
    np.testing.assert_allclose(rr_statistic(0.9, rr.values, a[0], b[0])(x), [-ratio, ratio, 0.0])


@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0])
def test_worst_case_audit_of_dp_local_laplace_is_tight(eps):
    r = worst(f"dp-local-laplace(eps={eps})")
    assert r.test == "laplace-llr" and r.neighbours == "worst-case" and r.audited_scope == "message"
    assert 0.9 * eps <= r.epsilon_lb <= eps and r.claim_verdict == "consistent"
    assert r.tightness == pytest.approx(r.epsilon_lb / eps)
    assert r.fp + r.fn > 0 and not r.trial_limited and r.ceiling > r.epsilon_lb


def test_worst_case_audit_of_randomized_response_is_tight():
    r = worst("rr(p=0.9)")
    assert r.test == "rr-llr" and 0.9 * 4.4998 <= r.epsilon_lb <= r.claimed_epsilon


def test_worst_case_gaussian_mu_bound_is_tight():
    # the median of three seeds: one bound's threshold may fall in a tail, where it is loose
    runs = [worst("dp-gaussian(sigma=1,clip=1)", trials=100_000, seed=s) for s in range(3)]
    r = runs[0]
    assert r.mu == pytest.approx(2.0) and np.median([x.mu_lb for x in runs]) >= 0.9 * 2.0  # one may exceed mu (5 %)
    assert r.epsilon_lb <= r.claimed_epsilon and np.isnan(worst("dp-local-laplace(eps=1)", trials=200).mu_lb)


SOUND = binomial_plan(0.05, 0.10)


@pytest.mark.slow
@pytest.mark.parametrize("text,trials", [("rr(p=0.9)", 2000), ("dp-local-laplace(eps=1)", 1000)])
def test_bound_exceeds_a_correct_claim_no_more_often_than_the_confidence_allows(text, trials):
    """346 seeds at 95 %, at most 27 violations of the (true) claim (scipy.stats.binom): an audit
    whose bound misses 5 % of the time passes with probability 0.9909; one missing 10 % of the time
    (coverage 90 % instead of 95 %) passes with probability 0.0986, i.e. fails with 0.90."""
    assert (SOUND.runs, SOUND.max_failures) == (346, 27) and SOUND.pass_correct >= 0.99
    assert SOUND.pass_defective <= 0.1
    stack = parse_defense(text)
    inputs = worst_case_inputs(stack, 4)
    failures = sum(audit_stack(stack, claim=stack.claim, inputs=inputs, neighbours="worst-case", trials=trials,
                               seed=s).claim_verdict == "violated" for s in range(SOUND.runs))
    assert failures <= SOUND.max_failures


@pytest.mark.slow
def test_mu_bound_exceeds_the_true_mu_no_more_often_than_the_confidence_allows():
    """346 seeds, at most 27 mu bounds above the true mu = 2: P(pass) = 0.9909 at a 5 % miss rate,
    0.0986 at 10 % (scipy.stats.binom)."""
    stack = parse_defense("dp-gaussian(sigma=1,clip=1)")
    inputs = worst_case_inputs(stack, 4)
    failures = sum(audit_stack(stack, claim=stack.claim, inputs=inputs, neighbours="worst-case", trials=2000,
                               seed=s).mu_lb > 2.0 for s in range(SOUND.runs))
    assert failures <= SOUND.max_failures


def test_flawed_published_variants_are_audited_above_their_claim():
    l2 = worst("dp-local-laplace(eps=1,norm=l2)", trials=20_000)
    assert l2.epsilon_lb > 2.0 and l2.claim_verdict == "violated"        # true epsilon sqrt(46) = 6.8
    share = worst("dp-distributed(eps=1)", trials=20_000, cohort=100)
    assert share.test == "gamma-share-llr" and share.epsilon_lb > 3.0 and share.claim_verdict == "outside scope"
    agg = worst("dp-distributed(eps=4.5)", trials=5000, cohort=3, scope="aggregate")   # true: 4.5 sqrt(46)
    assert agg.audited_scope == "aggregate" and agg.epsilon_lb > 4.5 and agg.claim_verdict == "violated"
    l1 = worst("dp-local-laplace(eps=1)", trials=20_000)
    assert l1.claim_verdict == "consistent"


def test_rounds_combine_outputs_and_are_judged_against_the_composed_claim():
    stack = parse_defense("dp-local-laplace(eps=1)")
    r = audit_stack(stack, claim=PrivacyClaim(2.0, 0.0, "message"), inputs=worst_case_inputs(stack, 3),
                    neighbours="worst-case", trials=50_000, rounds=2)
    assert r.rounds == 2 and 1.2 < r.epsilon_lb <= 2.0 and r.claim_verdict == "consistent"


def test_learned_test_finds_the_leak_without_the_noise_family():
    r = worst("dp-local-laplace(eps=2)", dim=3, trials=20_000, test="learned")
    assert r.test == "learned-logistic" and 1.0 < r.epsilon_lb <= 2.0


def test_ceiling_is_the_zero_error_bound_and_marks_trial_limited_results():
    stack = parse_defense("dp-gaussian(sigma=0.01,clip=1)")                 # nearly noise-free
    r = audit_stack(stack, claim=stack.claim, inputs=worst_case_inputs(stack, 2), neighbours="worst-case",
                    trials=1000)
    assert r.fp == r.fn == 0 and r.trial_limited
    assert r.ceiling == pytest.approx(float(epsilon_lower_bound(0, 0, r.n0, r.n1, r.claimed_delta)))
    assert r.epsilon_lb == pytest.approx(r.ceiling)


def test_chunked_scores_equal_one_pass():
    stack = parse_defense("dp-local-laplace(eps=1)")
    inputs = worst_case_inputs(stack, 3)
    mech, stat = message_mechanism(stack, inputs, 1), laplace_statistic(*inputs, stack.client[0].scale)
    one = audit(mech, stat, claim=stack.claim, n_trials=1000, seed=3, chunk=1000)
    # chunks draw the same stream in the same order: identical outputs and counts
    many = audit(mech, stat, claim=stack.claim, n_trials=1000, seed=3, chunk=128)
    assert (one.fp, one.fn, one.epsilon_lb) == (many.fp, many.fn, many.epsilon_lb)


@pytest.mark.parametrize("argv,option", [
    (["dp-gaussian", "--neighbours", "typical"], "--neighbours"),
    (["dp-gaussian", "--trials", "99"], "--trials"),
    (["dp-gaussian", "--dim", "0"], "--dim"),
    (["none"], "STACK"),
    (["secagg"], "STACK"),
])
def test_cli_bad_input_names_the_option(argv, option, capsys):
    assert main(["audit-defense", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]


def test_cli_json_rows_and_store(tmp_path, capsys):
    from fltr_audit.store.results import load

    store = tmp_path / "r.sqlite"
    code = main(["audit-defense", "clip+dp-distributed(eps=4.5)", "--dim", "8", "--trials", "400", "--probe-cohort", "3",
                 "--aggregate-trials", "200", "--json", "--store", str(store), "--rounds", "2"])
    assert code == 0
    out = cli_result(capsys.readouterr().out)
    rows = out["audits"]
    assert [r["audited_scope"] for r in rows] == ["message", "aggregate"]
    assert rows[0]["claimed_epsilon"] == 9.0 and rows[0]["rounds"] == 2 and rows[1]["n_trials"] == 200
    assert all(r["seconds"] > 0 for r in rows) and out["privacy"]["epsilon_server"] == 9.0
    audits = load(store)["audits"]
    assert len(audits) == 2 and set(audits["neighbours"]) == {"worst-case"}
    assert audits["claim_verdict"].tolist() == [r["claim_verdict"] for r in rows]


def test_natural_neighbours_are_one_message_with_and_without_one_click():
    """The natural pair of an FPDGD audit: the replayed step with all of a probe client's clicks
    equals that client's real undefended update, and the other input differs by one click."""
    from fltr_audit.runs.models import splits_of, trained
    from fltr_audit.runs.natural_neighbours import natural_messages
    from fltr_audit.spec.campaign import validate_spec
    from fltr_audit.spec.grid import expand

    spec = validate_spec({"name": "t", "algorithm": {"rounds": 2, "clients": 100},
                          "probe": {"click_models": ["informational"]}, "audit": {"attacks": ["olsr"]}})
    config = expand(spec)[0].spec
    splits = splits_of(config)
    pool, g, kind, (u0, u1) = natural_messages(config, splits, trained(config))
    assert kind == "weights"
    assert np.min(np.abs(pool - u1[None, :]).max(axis=1)) < 1e-9 * max(1.0, np.abs(u1).max())
    assert np.linalg.norm(u1 - u0) > 0


@pytest.mark.parametrize("text", ["dp-local-laplace(eps=1,sensitivity=2)", "dp-local-laplace(eps=1,norm=l2)",
                                  "dp-distributed(eps=2,sensitivity=2)"])
def test_messages_on_the_separable_coordinates_have_the_full_messages_law(text):
    """``separable_coordinates``: the target's message restricted to the coordinates where the
    inputs differ (both zero elsewhere) against the stack run on those coordinates alone -- per
    coordinate two-sample KS (the randomizer's own code on both sides) and the Laplace ratio's law.
    Catches: a clip whose norm reads coordinates the audit drops, noise that is not independent per
    coordinate, coordinates kept where the inputs agree."""
    from attacks.stack_outputs import separable_coordinates

    stack = parse_defense(text)
    dim = 9
    a, b = np.zeros(dim), np.zeros(dim)
    a[[1, 4]], b[[1, 4]] = (-0.9, 0.5), (0.9, -0.5)
    kept = separable_coordinates(stack, (a, b))
    assert kept.tolist() == [1, 4]
    full = message_mechanism(stack, (a, b), 4)(np.random.default_rng(1), 4000, 1)[:, kept]
    part = message_mechanism(stack, (a[kept], b[kept]), 4)(np.random.default_rng(2), 4000, 1)
    for j in range(2):
        assert stats.ks_2samp(full[:, j], part[:, j]).pvalue > 0.001
    a[0] = b[0] = 0.1  # the inputs agree on a nonzero coordinate: a clip reads it, nothing is dropped
    assert separable_coordinates(stack, (a, b)) is None
    assert separable_coordinates(parse_defense("dp-gaussian(sigma=1,clip=1)"), (a, b)) is None


def test_the_shuffle_audit_reads_ten_thousand_trials_and_stays_below_the_claim():
    """The amplified shuffle claim (cohort of the shuffler's n = 1,000) audited at 10^4 trials per
    input on the separable coordinate of the L1 worst case, in chunks; the same trials through the
    full 46-coordinate messages give the same law of the multiset's ratio (KS), and neither beats
    the claim."""
    from attacks.mechanism_tests import mechanism_statistic, shuffle_statistic
    from attacks.stack_outputs import shuffle_mechanism

    stack = parse_defense("dp-local-laplace(eps=1)+shuffle")
    a, b = worst_case_inputs(stack, 46)
    result = audit_stack(stack, claim=stack.claim, inputs=(a, b), neighbours="worst-case", scope="aggregate",
                         trials=10_000, cohort=100, seed=0, min_trials=4)
    assert result.epsilon_lb <= stack.claim.epsilon
    full = shuffle_mechanism(stack, (a, b), 1000, mechanism_statistic(stack, (a, b), "message", 1000)[0])
    one = shuffle_mechanism(stack, (a[:1], b[:1]), 1000, mechanism_statistic(stack, (a[:1], b[:1]), "message", 1000)[0])
    x = shuffle_statistic(full(np.random.default_rng(3), 300, 1))
    y = shuffle_statistic(one(np.random.default_rng(4), 3000, 1))
    assert stats.ks_2samp(x, y).pvalue > 0.001


