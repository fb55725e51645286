"""campaigns/production_vs_papers*.toml: they load, and each stack's claimed epsilon over the run
(composed with dp-accounting as the file's comment says) matches its target within 1 %, never above."""

import math
from pathlib import Path

import dp_accounting
import pytest
from dp_accounting import pld, rdp
from dp_accounting.privacy_accountant import NeighboringRelation

from defenses.stack import parse_defense
from fltr_audit.spec.campaign import load_spec
from fltr_audit.spec.grid import expand

CAMPAIGNS = Path(__file__).resolve().parents[1] / "campaigns"
ROUNDS, DELTA = 100, 1e-5


def run_epsilon(stack) -> float:
    """The claimed epsilon over 100 rounds at delta 1e-5 of one FPDGD stack (sampling rate 1)."""
    agg, client = stack.aggregator, stack.client
    if agg.name.startswith("dp-fedavg"):
        return pld.PLDAccountant().compose(agg.dp_event(), ROUNDS).get_epsilon(DELTA)
    if agg.name.startswith("ddgauss"):
        return rdp.RdpAccountant().compose(agg.dp_event(), ROUNDS).get_epsilon(DELTA)
    if agg.name.startswith("shuffle"):
        accountant = pld.PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
        accountant.compose(dp_accounting.ComposedDpEvent([agg.dp_event()] * ROUNDS))
        return accountant.get_epsilon(DELTA - ROUNDS * agg.dp_event_delta)
    eps = stack.claim.epsilon  # dp-distributed, dp-local-laplace: pure eps, the Laplace mechanism
    return pld.PLDAccountant().compose(dp_accounting.LaplaceDpEvent(1 / eps), ROUNDS).get_epsilon(DELTA)


def test_fpdgd_campaign_matches_epsilon_1_4_8_over_the_run():
    spec = load_spec(CAMPAIGNS / "production_vs_papers.toml")
    assert len(expand(spec)) == 3 * 16
    defenses = [d.name for d in spec.audit.defenses if d.name != "none"]
    assert len(defenses) == 15
    for i, text in enumerate(defenses):
        target = (1, 4, 8)[i // 5]
        eps = run_epsilon(parse_defense(text))
        assert 0.99 * target <= eps <= target, (text, eps)


def test_foltr_es_campaign_matches_epsilon_over_400_randomized_responses():
    spec = load_spec(CAMPAIGNS / "production_vs_papers_foltr_es.toml")
    assert len(expand(spec)) == 3 * 4
    for text, target in zip([d.name for d in spec.audit.defenses][1:], (1, 4, 8)):
        rr = parse_defense(text).client[0]
        event = dp_accounting.RandomizedResponseDpEvent(rr.n * (1 - rr.p) / (rr.n - 1), rr.n)
        accountant = pld.PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
        eps = accountant.compose(dp_accounting.ComposedDpEvent([event] * (ROUNDS * 4))).get_epsilon(DELTA)
        assert 0.99 * target <= eps <= target, (text, eps)
        assert rr.claim.epsilon == pytest.approx(math.log(rr.p * 10 / (1 - rr.p)))
