"""Privacy over a run: dp_event of each DP defense, the server's figure (realized participations, no
amplification) in closed form, the observer's figure against dp-accounting called directly, the
realized participation schedule against the engine's, the accountant object, and bad input."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import pld
from scipy import stats

from defenses.accounting import DISCRETIZATION, ParticipationSchedule, RunAccountant, privacy_spent
from defenses.stack import parse_defense
from fltr_audit.errors import FltrError


def direct(event, rounds, delta, q=1.0):
    accountant = pld.PLDAccountant(value_discretization_interval=DISCRETIZATION)
    accountant.compose(dpa.PoissonSampledDpEvent(q, event) if q < 1 else event, rounds)
    return accountant.get_epsilon(delta)


def schedule(rounds, q, counts=None):
    return ParticipationSchedule(rounds, q, np.asarray(counts if counts is not None else [rounds]))


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_gaussian_observer_equals_dp_accounting_poisson_sampled(q):
    counts = [30] if q == 1 else [0, 2, 3]
    spent = privacy_spent(parse_defense("dp-gaussian(sigma=1,clip=1)"), schedule(30, q, counts))
    assert spent.epsilon_observer == pytest.approx(direct(dpa.GaussianDpEvent(0.5), 30, 1e-5, q), rel=1e-9)
    assert spent.delta_total == 1e-5 and spent.participations_max == max(counts)
    assert spent.accountant_observer.startswith("pld")


def test_gaussian_event_reproduces_the_analytic_claim():
    stack = parse_defense("dp-gaussian(sigma=1,clip=1)")
    assert direct(stack.client[0].dp_event(), 1, 1e-5) == pytest.approx(stack.claim.epsilon, rel=1e-3)


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_laplace_at_positive_delta_observer_equals_dp_accounting(q):
    spent = privacy_spent(parse_defense("dp-local-laplace(eps=4.5)"), schedule(30, q), 1e-5)
    assert spent.epsilon_observer == pytest.approx(direct(dpa.LaplaceDpEvent(1 / 4.5), 30, 1e-5, q), rel=1e-9)


def test_a_user_with_r_participations_is_charged_r_eps_against_the_server():
    """Closed form, not dp-accounting: a pure eps-DP local mechanism read by the server r times
    costs r eps; the sampling rate gives the server nothing (it drew the cohorts)."""
    counts = [0, 7, 3, 3] + [1] * 196  # 200 users: max 7, 99th percentile 3
    spent = privacy_spent(parse_defense("dp-local-laplace(eps=4.5)"), schedule(100, 0.01, counts))
    assert spent.epsilon_server == 7 * 4.5 and spent.participations_max == 7
    assert spent.epsilon_server_q99 == 3 * 4.5 and spent.participations_q99 == 3
    # pure composition under Poisson sampling (Balle et al. 2018, Thm. 9), 63.7, is above the server's
    # 31.5 at delta 0: the observer, who sees less than the server, gets the server's figure
    assert 100 * math.log1p(0.01 * math.expm1(4.5)) > 31.5 == spent.epsilon_observer
    few = privacy_spent(parse_defense("dp-local-laplace(eps=4.5)"), schedule(5, 0.01, counts))
    assert few.epsilon_observer == pytest.approx(5 * math.log1p(0.01 * math.expm1(4.5)))


def test_laplace_full_participation_composes_to_k_eps():
    """Pure DP: K rounds of eps-DP are exactly K eps at delta 0; the PLD accountant, which
    answers inf at delta 0 (truncated tails), approaches K eps from below as delta -> 0."""
    stack = parse_defense("dp-local-laplace(eps=2)")
    spent = privacy_spent(stack, ParticipationSchedule.full(10))
    assert spent.epsilon_server == 20.0 == spent.epsilon_observer and spent.accountant == "pure composition"
    near = privacy_spent(stack, ParticipationSchedule.full(10), 1e-12).epsilon_server
    assert 0.98 * 20 <= near <= 20.0 + 1e-6


def test_randomized_response_event_matches_the_claim_and_composes_per_round():
    stack = parse_defense("rr(p=0.9)")
    accountant = pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(stack.client[0].dp_event())
    assert accountant.get_epsilon(1e-9) == pytest.approx(stack.claim.epsilon, abs=1e-3)
    # one value per message (B = 1); B values per participation: tests/test_accounting_per_value.py
    assert privacy_spent(stack, ParticipationSchedule.full(5), queries_per_client=1).epsilon_server == \
        pytest.approx(5 * stack.claim.epsilon)
    # composed round by round (dp-accounting 0.6 drops the count of compose(rr_event, 5))
    near = privacy_spent(stack, ParticipationSchedule.full(5), 1e-9, queries_per_client=1).epsilon_server
    assert near == pytest.approx(5 * stack.claim.epsilon, rel=1e-3)


def test_aggregate_claim_and_no_claim():
    dist = privacy_spent(parse_defense("clip+dp-distributed(eps=4.5)"), ParticipationSchedule.full(3))
    assert dist.epsilon_server == pytest.approx(13.5) and dist.epsilon_per_round == 4.5
    for text in ("none", "secagg", "clip"):
        spent = privacy_spent(parse_defense(text), ParticipationSchedule.full(3))
        assert math.isinf(spent.epsilon_server) and math.isinf(spent.epsilon_observer) and spent.accountant == "none"


def test_realized_counts_follow_the_population_schedule():
    """Counts ~ Binomial(rounds, clients / population) for each user, summing to rounds x clients."""
    s = ParticipationSchedule.of_run(3, 100, 100, 10_000)
    assert s.counts.sum() == 100 * 100 and s.sampling_rate == 0.01 and len(s.counts) == 10_000
    observed = np.bincount(s.counts, minlength=6)[:6]
    expected = stats.binom.pmf(np.arange(6), 100, 0.01) * 10_000
    observed[-1] += (s.counts > 5).sum()
    expected[-1] += stats.binom.sf(5, 100, 0.01) * 10_000
    assert stats.chisquare(observed, expected).pvalue > 0.001
    assert s.worst == s.counts.max() and s.quantile(0.99) == np.sort(s.counts)[9899]
    assert not np.array_equal(s.counts, ParticipationSchedule.of_run(4, 100, 100, 10_000).counts)
    assert ParticipationSchedule.of_run(3, 7, 5).counts.tolist() == [7] * 5  # no population: every round


def test_accountant_object_answers_from_the_same_code_as_privacy_spent():
    stack = parse_defense("dp-fedavg(noise_multiplier=1,clip=1)")
    s = ParticipationSchedule.of_run(0, 50, 10, 1000)
    acc = RunAccountant(stack, s)
    spent = privacy_spent(stack, s, 1e-5)
    assert acc.get_epsilon(1e-5) == spent.epsilon_server
    assert acc.get_epsilon(1e-5, scope="observer") == spent.epsilon_observer
    assert acc.get_epsilon(1e-5, quantile=0.99) == spent.epsilon_server_q99
    assert acc.get_epsilon(1e-5) == pytest.approx(direct(stack.aggregator.dp_event(), s.worst, 1e-5), rel=1e-9)
    assert acc.get_epsilon(1e-6) > acc.get_epsilon(1e-5)


@pytest.mark.parametrize("make,message", [
    (lambda: ParticipationSchedule.of_run(0, 0, 3), "^rounds: must be an integer >= 1, got 0$"),
    (lambda: ParticipationSchedule.of_run(0, 3, 5, 4), r"^population: must be at least clients \(5\), got 4$"),
    (lambda: privacy_spent(parse_defense("dp-gaussian"), ParticipationSchedule.full(3), 1.0),
     r"^delta: must be a number in \[0, 1\), got 1.0$")])
def test_bad_input_names_the_parameter(make, message):
    with pytest.raises(FltrError, match=message):
        make()
