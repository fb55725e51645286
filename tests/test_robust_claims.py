"""Verdict rules end to end through the real engine and audit (``run_audit``), with controls: a correct
DP claim (dp-fedavg, consistent), the same claim aggregated by Krum or the median (violated: the noise
was calibrated for the mean), a rule that keeps it (norm-bound under the same clip), and the integrity
side -- no attack, a known-strong attack, a robust aggregator -- reported beside, never mixed in."""

import numpy as np
import pytest

from fltr_audit.runs.audit import run_audit
from fltr_audit.spec.run import RunSpec


def config(defense, poison=None, trials=1000, rounds=6):
    cfg = {"data": "synthetic:mq2008", "fold": 1, "normalization": "zscore", "queries": None, "algo": "fpdgd",
           "rounds": rounds, "clients": 40, "queries_per_client": 2, "ranker": "linear", "train_click_model": "perfect",
           "params": {}, "probe": {"split": "vali", "click_models": ["perfect"], "cohort": 40, "queries_per_client": 1,
                                   "min_shown": 10, "require_click": True, "counterfactual": 5},
           "defense": defense, "attacks": ["olsr"], "epsilon_audit": True, "audit_trials": trials, "seed": 0}
    if poison:
        cfg["poison"] = poison
    return RunSpec.from_json(cfg)


def worst_case(tables):
    audits = tables["audits"]
    return audits[audits["neighbours"] == "worst-case"].iloc[0]


@pytest.mark.parametrize("defense,verdict", [
    ("dp-fedavg", "consistent"),                               # control: a correct claim
    ("median+dp-fedavg", "violated"),                          # the mean's claim, the median's output
    ("krum(f=1)+dp-fedavg", "violated"),                       # Krum releases one client's update
    ("norm-bound(clip=1)+dp-fedavg", "consistent"),            # clipping then the mean keeps the claim
])
def test_the_claim_verdict_of_dp_fedavg_composed_with_a_robust_rule(defense, verdict):
    row = worst_case(run_audit(config(defense)))
    assert row["claim_verdict"] == verdict
    if verdict == "violated":
        assert row["epsilon_lb"] > row["claimed_epsilon"]


def test_the_violation_comes_from_the_rules_worst_case_cohort_not_from_zero_others():
    from attacks.mechanism_audit import audit_stack
    from attacks.worst_case import worst_case_inputs
    from defenses.stack import parse_defense

    stack = parse_defense("median+dp-fedavg")
    common = dict(claim=stack.claim, inputs=worst_case_inputs(stack, 8), scope="aggregate", trials=1000, cohort=41,
                  seed=1, min_trials=4)
    natural = audit_stack(stack, neighbours="natural", **common)  # natural neighbours: the others hold zero
    assert natural.as_dict()["claim_verdict"] == "consistent"
    assert audit_stack(stack, neighbours="worst-case", **common).as_dict()["claim_verdict"] == "violated"


def test_integrity_controls_and_separation_from_privacy():
    clean = run_audit(config("none", rounds=15))
    attacked = run_audit(config("none", "adaptive(fraction=0.2)", rounds=15))
    defended = run_audit(config("median", "adaptive(fraction=0.2)", rounds=15))
    nothing = run_audit(config("none", "sign-flip(fraction=0)", rounds=15))  # an attack with no malicious member
    base = clean["utility"]["ndcg10"].iloc[0]
    assert base - attacked["utility"]["ndcg10"].iloc[0] > 0.1
    assert defended["utility"]["ndcg10"].iloc[0] > attacked["utility"]["ndcg10"].iloc[0] + 0.05
    assert nothing["utility"]["ndcg10"].iloc[0] == pytest.approx(base)
    # the integrity run carries its poisoning and no privacy tables; the clean one no poison column
    assert set(attacked) == {"utility", "curves"} and attacked["utility"]["poison"].iloc[0] == "adaptive(fraction=0.2)"
    assert attacked["utility"]["malicious_mean"].iloc[0] == 8.0
    assert "poison" not in clean["utility"] and "attacks" in clean
