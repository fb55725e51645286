"""Privacy over a run: dp_event of each DP defense, privacy_spent against dp-accounting called
directly, pure composition, sampling, and bad input."""

import math

import dp_accounting as dpa
import pytest
from dp_accounting import pld

from defenses.accounting import DISCRETIZATION, privacy_spent
from defenses.stack import parse_defense
from fltr_audit.errors import FltrError


def direct(event, rounds, delta, q=1.0):
    accountant = pld.PLDAccountant(value_discretization_interval=DISCRETIZATION)
    accountant.compose(dpa.PoissonSampledDpEvent(q, event) if q < 1 else event, rounds)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_gaussian_total_equals_dp_accounting_called_directly(q):
    spent = privacy_spent(parse_defense("dp-gaussian(sigma=1,clip=1)"), 30, q)
    assert spent["epsilon_total"] == pytest.approx(direct(dpa.GaussianDpEvent(0.5), 30, 1e-5, q), rel=1e-9)
    assert spent["delta_total"] == 1e-5 and spent["rounds_participated"] == pytest.approx(30 * q)
    assert spent["accountant"].startswith("pld")


def test_gaussian_event_reproduces_the_analytic_claim():
    stack = parse_defense("dp-gaussian(sigma=1,clip=1)")
    assert direct(stack.client[0].dp_event(), 1, 1e-5) == pytest.approx(stack.claim.epsilon, rel=1e-3)


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_laplace_at_positive_delta_equals_dp_accounting(q):
    spent = privacy_spent(parse_defense("dp-local-laplace(eps=4.5)"), 30, q, 1e-5)
    assert spent["epsilon_total"] == pytest.approx(direct(dpa.LaplaceDpEvent(1 / 4.5), 30, 1e-5, q), rel=1e-9)


def test_laplace_full_participation_composes_to_k_eps():
    """Pure DP: K rounds of eps-DP are exactly K eps at delta 0; the PLD accountant, which
    answers inf at delta 0 (truncated tails), approaches K eps from below as delta -> 0."""
    stack = parse_defense("dp-local-laplace(eps=2)")
    spent = privacy_spent(stack, 10, 1.0)
    assert spent["epsilon_total"] == 20.0 and spent["accountant"] == "pure composition"
    near = privacy_spent(stack, 10, 1.0, 1e-12)["epsilon_total"]
    assert 0.98 * 20 <= near <= 20.0 + 1e-6
    sampled = privacy_spent(stack, 10, 0.1)
    assert sampled["epsilon_total"] == pytest.approx(10 * math.log1p(0.1 * math.expm1(2.0)))


def test_randomized_response_event_matches_the_claim_and_composes_per_round():
    stack = parse_defense("rr(p=0.9)")
    accountant = pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(stack.client[0].dp_event())
    assert accountant.get_epsilon(1e-9) == pytest.approx(stack.claim.epsilon, abs=1e-3)
    assert privacy_spent(stack, 5, 1.0)["epsilon_total"] == pytest.approx(5 * stack.claim.epsilon)
    # composed round by round (dp-accounting 0.6 drops the count of compose(rr_event, 5))
    assert privacy_spent(stack, 5, 1.0, 1e-9)["epsilon_total"] == pytest.approx(5 * stack.claim.epsilon, rel=1e-3)


def test_aggregate_claim_and_no_claim():
    dist = privacy_spent(parse_defense("clip+dp-distributed(eps=4.5)"), 3, 1.0)
    assert dist["epsilon_total"] == pytest.approx(13.5) and dist["epsilon_per_round"] == 4.5
    for text in ("none", "secagg", "clip"):
        spent = privacy_spent(parse_defense(text), 3, 1.0)
        assert math.isinf(spent["epsilon_total"]) and spent["accountant"] == "none"


@pytest.mark.parametrize("kwargs,option", [({"rounds": 0}, "--rounds"), ({"sampling_rate": 0.0}, "--population"),
                                           ({"sampling_rate": 1.5}, "--population"), ({"delta": 1.0}, "--delta")])
def test_bad_input(kwargs, option):
    args = {"rounds": 3, "sampling_rate": 1.0, "delta": None, **kwargs}
    with pytest.raises(FltrError, match=option):
        privacy_spent(parse_defense("dp-gaussian"), **args)
