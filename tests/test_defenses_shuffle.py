"""shuffle: the server (shuffled) view (no identities, order independent of the clients'),
the amplification bound against an exact shuffled mechanism, stack claims, bad input, audit."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld
from dp_accounting.privacy_accountant import NeighboringRelation
from scipy import stats

from attacks.epsilon_bounds import audit
from defenses.randomized_response import RandomizedResponse
from defenses.shuffle import Shuffle, amplification_applies, shuffled_epsilon
from defenses.stack import parse_defense
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.messages import THREAT_MODELS, Messages
from fltr_audit.engine.rankers import LinearRanker


@pytest.fixture(scope="module")
def data():
    return fold_split(generate("mq2008", queries=200, seed=3), 1).train


def one_round(data, defense, threat_model="server"):
    alg = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", data.n_levels), lr=0.1)
    stack = parse_defense(defense)
    params = np.random.default_rng(0).normal(size=data.n_features)
    return run_round(alg, params, None, data, np.arange(24).reshape(12, 2), np.arange(12), 1, 5,
                     threat_model=threat_model, defenses=stack)


def test_server_view_has_no_identities_and_the_same_messages_in_another_order(data):
    _, _, plain, _ = one_round(data, "dp-local-laplace(eps=1)")
    new, _, shuffled, _ = one_round(data, "dp-local-laplace(eps=1)+shuffle(n=12)")
    view = shuffled.view
    assert view.threat_model == "server (shuffled)" and "server (shuffled)" in THREAT_MODELS
    assert view.participants.size == 0 and view.dropouts.size == 0
    a, b = plain.view.messages.vector, view.messages.vector
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(np.sort(a, axis=0), np.sort(b, axis=0))  # the same multiset of rows
    np.testing.assert_allclose(view.aggregate, plain.view.aggregate, rtol=1e-12)
    np.testing.assert_allclose(new, plain.view.aggregate, rtol=1e-12)  # training is unaffected
    np.testing.assert_array_equal(shuffled.truth.client_ids, np.arange(12))  # scoring keeps the true senders


def test_message_order_is_independent_of_the_clients_order():
    """Client i's message lands at each position equally often (chi-square on the client x
    position table of 3,000 shuffles), and the fields of one message stay together."""
    n, rounds = 6, 3000
    shuffle = Shuffle(n=6).after([RandomizedResponse(p=0.9)])
    table = np.zeros((n, n))
    for r in range(rounds):
        msgs = Messages(n_interactions=np.arange(1, n + 1), seed=np.arange(n, dtype=np.uint64) * 7,
                        metric=np.arange(n, dtype=float)[:, None] * np.ones((1, 2)))
        out = shuffle.aggregate(msgs, np.arange(n), np.random.default_rng(r)).messages
        sender = out.n_interactions - 1
        assert (out.seed == sender * 7).all() and (out.metric[:, 0] == sender).all()
        table[sender, np.arange(n)] += 1
    assert stats.chisquare(table.ravel(), np.full(n * n, rounds / n)).pvalue > 0.001


@pytest.mark.parametrize("threat_model", ["server-blind"])
def test_shuffled_view_is_the_only_threat_model_a_shuffler_gives(data, threat_model):
    with pytest.raises(FltrError, match="server \\(shuffled\\)"):
        one_round(data, "dp-local-laplace(eps=1)+shuffle(n=12)", threat_model)
    with pytest.raises(FltrError, match="without a shuffler"):
        one_round(data, "dp-local-laplace(eps=1)", "server (shuffled)")


def exact_shuffled_rr_epsilon(eps0: float, n: int, delta: float) -> float:
    """The exact epsilon at delta of n shuffled binary randomized responses (eps0-LDP), the
    target's bit 0 vs 1 with everyone else's bit 0: the shuffled output is the count of ones,
    Bin(n-1, q) + Bern(q or 1-q), q = 1/(1+e^eps0); a lower bound for any valid shuffling bound."""
    q = 1 / (1 + math.exp(eps0))
    k = np.arange(n + 1)
    others = stats.binom.pmf(np.arange(n), n - 1, q)
    p0 = np.zeros(n + 1)
    p1 = np.zeros(n + 1)
    p0[:-1] += others * (1 - q)
    p0[1:] += others * q
    p1[:-1] += others * q
    p1[1:] += others * (1 - q)
    assert len(k) == len(p0)

    def delta_of(eps):
        return max(np.maximum(p1 - math.exp(eps) * p0, 0).sum(), np.maximum(p0 - math.exp(eps) * p1, 0).sum())

    lo, hi = 0.0, eps0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_of(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("eps0, n", [(0.5, 10000), (1.0, 5000), (2.0, 100000)])
def test_amplified_bound_is_above_an_exact_shuffled_mechanism_and_below_eps0(eps0, n):
    delta = 1e-6
    assert amplification_applies(eps0, n, delta)
    bound = shuffled_epsilon(eps0, n, delta)
    assert exact_shuffled_rr_epsilon(eps0, n, delta) <= bound < eps0
    e = math.exp(eps0)  # Theorem 3.1 written out
    assert bound == pytest.approx(math.log(1 + (e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / delta) / n)
                                                                    + 8 * e / n)))
    assert shuffled_epsilon(eps0, 2 * n, delta) < bound  # more users, more amplification


def test_outside_the_theorem_the_claim_is_the_local_epsilon():
    assert not amplification_applies(4.0, 1000, 1e-6)
    s = parse_defense("dp-local-laplace(eps=4)+shuffle")
    assert (s.claim.epsilon, s.claim.scope) == (4.0, "message")
    s = parse_defense("clip+dp-local-laplace(eps=1)+shuffle(n=10000)")
    assert s.claim.scope == "aggregate" and s.claim.epsilon == pytest.approx(shuffled_epsilon(1.0, 10000, 1e-6))
    assert s.claim.delta == 1e-6 and s.claim.epsilon < 1.0


def test_dp_event_is_the_claimed_epsilon_and_composes_with_the_delta_left_out():
    s = parse_defense("rr(p=0.5)+shuffle(n=100000)")
    eps0 = s.client[0].claim.epsilon
    assert s.claim.epsilon == pytest.approx(shuffled_epsilon(eps0, 100000, 1e-6))
    event, delta = s.aggregator.dp_event(), s.aggregator.dp_event_delta
    assert delta == 1e-6
    # one round: the randomized response of the claimed epsilon is eps-DP at delta 0, exactly
    def accountant():  # the claim is for replace-one neighbours (FMT), as the RR event needs
        return pld.PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)

    assert accountant().compose(event).get_epsilon(1e-12) == pytest.approx(s.claim.epsilon, rel=1e-3)
    # K rounds of a pure eps mechanism: PLD composition is below basic composition K eps and
    # above the advanced-composition lower range sqrt(K) eps / 2
    k, eps = 100, s.claim.epsilon
    # (dp-accounting 0.6's PLD accountant ignores ``count`` for this event: compose k copies)
    total = accountant().compose(dp_accounting.ComposedDpEvent([event] * k)).get_epsilon(1e-3 - k * delta)
    assert math.sqrt(k) * eps / 2 < total < k * eps
    assert total <= eps * math.sqrt(2 * k * math.log(1 / (1e-3 - k * delta))) + k * eps * math.expm1(eps)


@pytest.mark.parametrize("text, fragment", [
    ("shuffle", "needs a pure local randomizer before it (dp-local-laplace, rr); there is nothing before it"),
    ("clip+shuffle", "clip(sensitivity=5) is not one"),
    ("dp-distributed(eps=4)+shuffle", "dp-distributed(eps=4) is not one"),
    ("dp-gaussian(sigma=1)+shuffle", "dp-gaussian(sigma=1) is not one"),
    ("dp-local-laplace+shuffle(n=1)", "parameter n=1 must be an integer >= 2"),
])
def test_shuffle_without_a_local_randomizer_is_one_line_naming_it(text, fragment):
    with pytest.raises(FltrError) as err:
        parse_defense(text)
    message = str(err.value)
    assert fragment in message and "\n" not in message and message.startswith(f"defense {text!r}: ")


def test_audit_of_the_shuffled_view_never_beats_the_claim():
    """n users' binary randomized responses (eps0 = 1), shuffled; neighbours: the target's bit 0
    or 1, the others 0. The server's best statistic is the count of ones."""
    n, eps0 = 4000, 1.0
    stack = parse_defense(f"rr(p={math.exp(eps0) / (1 + math.exp(eps0))},values=[0,1])+shuffle(n={n})")
    assert stack.claim.scope == "aggregate" and stack.claim.epsilon < eps0
    rr, shuffler = stack.client[0], stack.aggregator

    def mechanism(rng, n_trials, which):
        out = np.empty(n_trials)
        for t in range(n_trials):
            metric = np.zeros((n, 1))
            metric[0, 0] = which
            msgs = rr.apply(Messages(n_interactions=np.ones(n, dtype=np.int64), metric=metric), None, rng)
            out[t] = shuffler.aggregate(msgs, np.arange(n), rng).messages.metric.sum()
        return out

    above = sum(audit(mechanism, lambda s: s, claim=stack.claim, n_trials=400, seed=seed).epsilon_lb
                > stack.claim.epsilon for seed in range(5))
    assert above <= 1  # P(Bin(5, 0.05) >= 2) = 0.023
