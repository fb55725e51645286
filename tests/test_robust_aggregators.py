"""Robust aggregators as a stack's aggregator: what they release (weights and updates alike), their
fallbacks on odd cohorts, FLTrust against its formula, the capability each declares, how they
compose with dp-fedavg and a secure sum, and the refusals (one line naming the stack and both)."""

import numpy as np
import pytest

from defenses.robust import rules
from defenses.robust.aggregators import Krum, Median, MultiKrum, NormBound, TrimmedMean
from defenses.robust.compose import check_cohort
from defenses.robust.fltrust import FLTrust, trust_mean
from defenses.listing import list_defenses
from defenses.stack import parse_defense
from fltr_audit.engine.aggregation import FedAvg
from fltr_audit.engine.messages import Messages
from fltr_audit.errors import FltrError


def cohort(n=9, p=4, seed=0, kind="update", g=None):
    rng = np.random.default_rng(seed)
    U = rng.normal(size=(n, p))
    g = np.zeros(p) if g is None else g
    vec = U + g if kind == "weights" else U
    return U, Messages(n_interactions=np.full(n, 4, dtype=np.int64), vector=vec, vector_kind=kind)


@pytest.mark.parametrize("make,rule", [
    (lambda: Median(), rules.coordinate_median),
    (lambda: TrimmedMean(0.2), lambda U: rules.trimmed_mean(U, 0.2)),
    (lambda: Krum(2), lambda U: U[rules.krum_select(U, 2, 1)[0]]),
    (lambda: MultiKrum(2, 3), lambda U: U[rules.krum_select(U, 2, 3)].mean(0)),
    (lambda: NormBound(1.0), lambda U: rules.norm_bound(U, 1.0).mean(0)),
])
@pytest.mark.parametrize("kind", ["weights", "update"])
def test_released_update_is_the_rule_on_updates_relative_to_the_global_model(make, rule, kind):
    g = np.array([5.0, -3.0, 0.5, 2.0])
    U, msgs = cohort(kind=kind, g=g)
    agg = make().aggregate(msgs, np.arange(9), np.random.default_rng(0), global_params=g)
    released = agg.mean - g if kind == "weights" else agg.mean
    assert np.allclose(released, rule(U))  # a rule run on raw weights (not updates) fails norm-bound and kind
    assert agg.messages is msgs  # the server sees the messages: it needs them


def test_norm_bound_with_a_large_clip_is_fedavg_and_sigma_adds_noise_of_that_std():
    U, msgs = cohort(n=50, p=3)
    fed = FedAvg().aggregate(msgs, np.arange(50), np.random.default_rng(0)).mean
    assert np.allclose(NormBound(1e9).aggregate(msgs, np.arange(50), np.random.default_rng(0)).mean, fed)
    noisy = np.stack([NormBound(1e9, sigma=0.5).aggregate(msgs, np.arange(50), np.random.default_rng(s)).mean
                      for s in range(2000)])
    assert np.allclose(noisy.std(0), 0.5, rtol=0.08) and np.allclose(noisy.mean(0), fed, atol=0.05)


def test_krum_falls_back_on_small_cohorts_and_counts_it():
    krum = Krum(f=3)  # needs n >= 9
    U, msgs = cohort(n=7)
    out = krum.aggregate(msgs, np.arange(7), np.random.default_rng(0)).mean
    assert np.allclose(out, U[rules.krum_select(U, 2, 1)[0]])  # f = (7 - 3) // 2 = 2
    assert krum.fallbacks == 1
    U2, msgs2 = cohort(n=2)
    assert np.allclose(krum.aggregate(msgs2, np.arange(2), np.random.default_rng(0)).mean, U2.mean(0))
    assert krum.fallbacks == 2
    U9, msgs9 = cohort(n=9)
    krum.aggregate(msgs9, np.arange(9), np.random.default_rng(0))
    assert krum.fallbacks == 2  # a full cohort is no fallback


def test_multikrum_keeps_at_most_n_minus_f_and_zero_means_n_minus_f():
    U, msgs = cohort(n=9)
    default = MultiKrum(f=2).aggregate(msgs, np.arange(9), np.random.default_rng(0)).mean
    assert np.allclose(default, U[rules.krum_select(U, 2, 7)].mean(0))
    U5, msgs5 = cohort(n=7)
    mk = MultiKrum(f=2, m=6)
    assert np.allclose(mk.aggregate(msgs5, np.arange(7), np.random.default_rng(0)).mean,
                       U5[rules.krum_select(U5, 2, 5)].mean(0)) and mk.fallbacks == 1


def test_fltrust_equals_its_formula_by_loop():
    rng = np.random.default_rng(1)
    U, g0 = rng.normal(size=(6, 3)), rng.normal(size=3)
    num, den = np.zeros(3), 0.0
    for u in U:
        ts = max(0.0, float(u @ g0) / (np.linalg.norm(u) * np.linalg.norm(g0)))
        num += ts * u * np.linalg.norm(g0) / np.linalg.norm(u)
        den += ts
    out, trusted = trust_mean(U, g0)
    assert trusted and np.allclose(out, num / den)
    out, trusted = trust_mean(-np.abs(U) * np.sign(g0), g0)  # every update against the root: no trust
    assert not trusted and np.array_equal(out, np.zeros(3))


def test_fltrust_needs_its_root_bound_and_uses_it():
    U, msgs = cohort(n=5, p=3)
    with pytest.raises(FltrError, match="root set is not bound"):
        FLTrust().aggregate(msgs, np.arange(5), np.random.default_rng(0))
    g0 = np.array([1.0, 0.0, 0.0])
    bound = FLTrust().with_root(lambda g, rng: g0)
    assert np.allclose(bound.aggregate(msgs, np.arange(5), np.random.default_rng(0)).mean, trust_mean(U, g0)[0])


def test_each_declares_what_it_must_see():
    sees = {row["name"]: row["sees"] for row in list_defenses()}
    assert sees["median"] == sees["trimmed-mean"] == sees["fltrust"] == "updates"
    assert sees["krum"] == sees["multi-krum"] == "distances"
    assert sees["norm-bound"] == sees["secagg"] == sees["secagg-protocol"] == sees["ddgauss"] == "sum"
    assert sees["clip"] == ""


@pytest.mark.parametrize("rule", ["median", "trimmed-mean(beta=0.2)", "krum(f=1)", "multi-krum(f=1,m=3)", "fltrust"])
@pytest.mark.parametrize("secure", ["secagg", "secagg-protocol", "ddgauss"])
def test_a_rule_needing_more_than_the_sum_is_refused_with_a_secure_sum_in_either_order(rule, secure):
    for text in (f"{rule}+{secure}", f"{secure}+{rule}"):
        with pytest.raises(FltrError) as info:
            parse_defense(text)
        message = str(info.value)
        assert message.startswith(f"defense {text!r}") and "\n" not in message
        assert rule.split("(")[0] in message and secure in message and "cannot be combined" in message


def test_norm_bound_composes_with_secagg_in_either_order_and_hides_the_messages():
    a, b = parse_defense("norm-bound(clip=0.5)+secagg"), parse_defense("secagg+norm-bound(clip=0.5)")
    assert a.name == b.name == "norm-bound(clip=0.5)+secagg"
    U, msgs = cohort(n=6, p=3)
    out = a.aggregator.aggregate(msgs, np.arange(6), np.random.default_rng(0), global_params=np.zeros(3))
    assert out.messages is None and np.allclose(out.mean, rules.norm_bound(U, 0.5).mean(0))
    assert a.claim == parse_defense("secagg").claim


def test_a_rule_with_dp_fedavg_keeps_the_claim_but_declares_its_combination():
    plain, krum = parse_defense("dp-fedavg"), parse_defense("dp-fedavg+krum(f=1)")
    assert krum.name == "krum(f=1)+dp-fedavg(noise_multiplier=1)" == parse_defense("krum(f=1)+dp-fedavg").name
    assert krum.claim == plain.claim
    assert plain.aggregator.mechanism.combine == "mean" and krum.aggregator.mechanism.combine == "krum(f=1)"


def test_dp_fedavg_with_a_rule_releases_the_rule_on_clipped_updates_plus_the_same_noise():
    U, msgs = cohort(n=9, p=4)
    stack = parse_defense("median+dp-fedavg(noise_multiplier=2,clip=0.7)")
    out = stack.aggregator.aggregate(msgs, np.arange(9), np.random.default_rng(7), global_params=np.zeros(4)).mean
    noise = np.random.default_rng(7).normal(0.0, 2 * 0.7, size=4) / 9
    assert np.allclose(out, rules.coordinate_median(rules.norm_bound(U, 0.7)) + noise)


@pytest.mark.parametrize("text,clients,pattern", [
    ("krum(f=3)", 8, r"cohort of 8 clients is below 2f \+ 3 = 9"),
    ("multi-krum(f=2,m=6)", 7, r"m = 6 exceeds n - f = 5"),
    ("krum(f=3)+dp-fedavg", 8, r"below 2f \+ 3"),
])
def test_krum_cohort_rules_are_refused_at_the_door_naming_the_stack(text, clients, pattern):
    stack = parse_defense(text)
    with pytest.raises(FltrError, match=pattern) as info:
        check_cohort(stack, clients)
    assert str(info.value).startswith(f"defense {stack.name!r}") and "\n" not in str(info.value)
    check_cohort(stack, 20)  # a large enough cohort passes


@pytest.mark.parametrize("text,pattern", [
    ("trimmed-mean(beta=0.5)", r"beta=0.5 must be a number in \[0, 0.5\)"),
    ("krum(f=-1)", r"f=-1 must be an integer >= 0"),
    ("median+krum", "two robust rules"),
    ("median+shuffle", "combines with dp-fedavg or a secure sum"),
])
def test_bad_robust_stacks_are_one_line(text, pattern):
    with pytest.raises(FltrError, match=pattern) as info:
        parse_defense(text)
    assert "\n" not in str(info.value)


def foltr_round():
    from fltr_audit.engine.algorithms.foltr_es import FOLtRES
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.synthetic import generate
    from fltr_audit.engine.federation import run_round
    from fltr_audit.engine.schedule import sample_queries
    from fltr_audit.engine.randomness import stream
    from fltr_audit.engine.rankers import LinearRanker

    data = generate("mq2008", queries=120, seed=0)
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3))
    params = np.zeros(data.n_features)
    queries = sample_queries(data.n_queries, 12, 4, stream(0, "q", 1))
    return algo, data, params, queries, run_round


def test_foltr_message_updates_average_to_the_es_gradient_and_robust_rules_combine_them():
    from defenses.robust.binding import bind_run
    from fltr_audit.engine.algorithms.evolution_strategies import es_gradient

    algo, data, params, queries, run_round = foltr_round()
    _, _, batch, _ = run_round(algo, params, algo.init_server_state(params), data, queries, np.arange(12), 1, 0)
    msgs = batch.view.messages
    shares = algo.message_updates(msgs)
    assert np.allclose(shares.mean(0), es_gradient(algo.cohort_perturbations(msgs.seed), msgs.metric, algo.sigma,
                                                   algo.antithetic))
    stack = bind_run(parse_defense("median"), algo, data, 4, 0)
    released = stack.aggregator.aggregate(msgs, np.arange(12), np.random.default_rng(0), global_params=params).mean
    assert np.allclose(released, np.median(shares, axis=0))
    with pytest.raises(FltrError, match="no decoder"):  # unbound: refused, not silently the mean
        parse_defense("median").aggregator.aggregate(msgs, np.arange(12), np.random.default_rng(0))
    # the server steps with the robust combination: Adam's first step moves by lr * sign
    new, _, _, _ = run_round(algo, params, algo.init_server_state(params), data, queries, np.arange(12), 1, 0,
                             defenses=stack)
    assert np.allclose(new, params + algo.lr * np.sign(released), atol=1e-6)
