"""FOLtR-ES accounted per transmitted value (issue 37, item 4) and pure-DP composition monotone in
delta (item 7): closed forms (r B epsilon), dp-accounting called directly, and the user-level /
per-value figures with their units."""

import math

import dp_accounting as dpa
import pytest
from dp_accounting import pld

import fltr_audit
from defenses.accounting import DISCRETIZATION, ParticipationSchedule, RunAccountant, compose_epsilon, privacy_spent
from defenses.stack import parse_defense
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.maxrr import rr_epsilon


def test_the_issue_call_charges_b_values_per_participation():
    """Issue 37's acceptance: 7 participations x B = 4 values x eps 4.4998 = 126.0 at user level;
    the per-value figure is the former 31.50."""
    spent = fltr_audit.accountant("rr(p=0.9)", rounds=100, clients=100, population=10000).spent(1e-5)
    eps = rr_epsilon(0.9, 11)
    assert spent.participations_max == 7 and spent.values_per_participation == 4
    assert round(spent.epsilon_server, 1) == 126.0
    assert spent.epsilon_server == pytest.approx(28 * eps, rel=1e-12)
    assert spent.epsilon_server_per_value == pytest.approx(7 * eps, rel=1e-12)
    assert spent.epsilon_server_q99 == pytest.approx(4 * spent.participations_q99 * eps, rel=1e-12)
    assert spent.epsilon_server_unit == "user (4 values per participation)"
    assert spent.epsilon_server_per_value_unit.startswith("one value per participation")


@pytest.mark.parametrize("b", [1, 2, 7])
def test_rr_per_value_equals_dp_accounting_composing_r_b_events(b):
    """The user-level figure against dp-accounting's PLD accountant composing r B randomized
    responses (replace-one), and the pure composition it may not exceed."""
    stack = parse_defense("rr(p=0.8)")
    spent = privacy_spent(stack, ParticipationSchedule.full(3), 1e-6, queries_per_client=b)
    accountant = pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE, DISCRETIZATION)
    for _ in range(3 * b):
        accountant.compose(stack.client[0].dp_event())
    direct = min(accountant.get_epsilon(1e-6), 3 * b * stack.claim.epsilon)
    assert spent.epsilon_server == pytest.approx(direct, rel=1e-9)
    assert spent.epsilon_server_per_value == pytest.approx(privacy_spent(
        stack, ParticipationSchedule.full(3), 1e-6, queries_per_client=1).epsilon_server, rel=1e-12)


@pytest.mark.parametrize("text", ["dp-local-laplace(eps=2)", "dp-gaussian(sigma=1,clip=1)",
                                  "dp-fedavg(noise_multiplier=1,clip=1)"])
def test_a_claim_per_message_does_not_depend_on_b(text):
    stack = parse_defense(text)
    s = ParticipationSchedule.of_run(0, 20, 10, 100)
    one, eight = privacy_spent(stack, s, 1e-5, 1), privacy_spent(stack, s, 1e-5, 8)
    assert one == eight and eight.values_per_participation == 1
    assert eight.epsilon_server_per_value == eight.epsilon_server
    assert eight.epsilon_server_unit == "user (one message per participation)"


@pytest.mark.parametrize("event", [dpa.LaplaceDpEvent(0.25), parse_defense("rr(p=0.9)").client[0].dp_event()])
@pytest.mark.parametrize("rate", [1.0, 0.01])
def test_pure_composition_never_grows_with_delta(event, rate):
    """Issue 37, item 7: 31.49998 at delta 1e-5 above 31.49867 at delta 0 was a PLD artefact."""
    deltas = [0.0, 1e-12, 1e-9, 1e-5, 1e-3, 0.1]
    figures = [compose_epsilon(event, 7, rate, d)[0] for d in deltas]
    assert all(b <= a for a, b in zip(figures, figures[1:])), figures
    pure = 7 * (4.0 if isinstance(event, dpa.LaplaceDpEvent) else rr_epsilon(0.9, 11))
    assert figures[0] == pytest.approx(pure if rate == 1 or not isinstance(event, dpa.LaplaceDpEvent)
                                       else 7 * math.log1p(rate * math.expm1(4.0)))


def test_b_must_be_a_positive_integer():
    with pytest.raises(ParameterError, match="^queries_per_client: must be an integer"):
        RunAccountant(parse_defense("rr"), ParticipationSchedule.full(2), 0)
