"""The f-DP claim verdict over a run, end to end through the real engine (``audit_whole_run``): a
dp-fedavg plug-in whose noise multiplier is halved while its claim stays is ``violated``; the
correct dp-fedavg at the same size is not."""

import pytest

import fltr_audit
from defenses.registration import register_defense
from tests.broken_fedavg import HalfNoiseFedAvg

CONTROL = dict(canaries=9000, population=9000, clients=8, rounds=340, queries_per_client=1, ranker="mlp",
               data="synthetic:mq2008?queries=200", seed=0)
"""One participation for ~2,000 canaries (rate 8 / 9,000 over 340 rounds); 480 MLP parameters keep the
other canaries of a round from drowning each one (a present canary adds C u, the others' directions
about 4 / 480 of the noise's variance)."""


@pytest.fixture(scope="module", autouse=True)
def broken_plugin():
    register_defense("halfnoise-fedavg", HalfNoiseFedAvg, role="aggregator", guarantee="broken", replace=True)


def test_noise_halved_dp_fedavg_is_violated_and_the_correct_one_is_not():
    """The claim mu = 1 per participation (z = 1); halved noise makes it 2. Measured over seeds 0-5
    of this size: the broken plug-in violated in 6 of 6, the correct one consistent in 6 of 6 (the
    exact-score power is 39/40 at 2,000 canaries: test_whole_run_fdp). Catches a verdict that
    ignores the f-DP bound (the Steinke bound against the accounted epsilon does not see it), a
    claim read from the noise actually drawn, and a pool mixing participation counts."""
    broken = fltr_audit.audit_whole_run("fpdgd", defense="halfnoise-fedavg(noise_multiplier=1,clip=1)", **CONTROL)
    correct = fltr_audit.audit_whole_run("fpdgd", defense="dp-fedavg(noise_multiplier=1,clip=1)", **CONTROL)
    for out in (broken, correct):
        assert out.verdict_by == "f-DP mu" and out.fdp_participations == 1 and out.fdp_pool > 1500
        assert out.mu_claimed == pytest.approx(1.0) and out.mu_limit > 1.5
    assert broken.claim_verdict == "violated" and broken.mu_lb > 1.0
    assert correct.claim_verdict == "consistent" and correct.mu_lb < 1.0
    assert broken.epsilon_lb < broken.epsilon_accounted_canaries  # the Steinke bound alone would miss it
