"""Defaults that decide (issue 43, item 6): an audit and a campaign plan their lists from the
minimum effect and the power by default, print the plan and its expected time before the work, and
say how to make it cheaper; a fixed --probe-lists pins the count (as the test suite does)."""

import pytest

from fltr_audit.api.audits import audit_campaign_of, audit_options
from fltr_audit.cli import main
from fltr_audit.spec.audit_options import DEFAULT_MIN_EFFECT, DEFAULT_POWER, DEFAULTS
from fltr_audit.spec.campaign import validate_spec
from fltr_audit.spec.plan import Plan, planned_lists
from reports.leakage import MIN_EFFECT

SMALL = "synthetic:mq2008?queries=80"


def test_the_defaults_plan_at_the_verdict_rules_effect():
    assert (DEFAULTS.min_effect, DEFAULTS.power) == (DEFAULT_MIN_EFFECT, DEFAULT_POWER) == (MIN_EFFECT, 0.9)
    spec = audit_campaign_of(audit_options({"attacks": ["olsr", "score", "prob", "random3"]}))
    assert spec.probe.lists == planned_lists(0.05, 0.9, ["olsr", "score", "prob", "random3"]) > 400


def test_a_campaign_plans_unless_it_fixes_its_lists():
    table = {"name": "c", "audit": {"attacks": ["olsr", "random3"]}}
    assert validate_spec(table).probe.lists == planned_lists(0.05, 0.9, ["olsr"])
    assert validate_spec({**table, "probe": {"min_effect": 0.1}}).probe.lists == planned_lists(0.1, 0.9, ["olsr"])
    assert validate_spec({**table, "probe": {"lists": 40}}).probe.lists == 40


def test_a_bad_plan_is_named_by_its_key():
    from fltr_audit.constraints import ParameterError

    with pytest.raises(ParameterError, match="probe.power"):
        validate_spec({"name": "c", "probe": {"power": 1.5}})


def test_the_plan_says_its_time_and_how_to_make_it_cheaper():
    plan = Plan(runs=2, lists=631, click_models=3, attacks=6, informed=4, min_effect=0.05, power=0.9,
                epsilon_audit=True)
    text = "\n".join(plan.lines())
    assert "631 lists per click model" in text and "expected about" in text
    assert "--min-effect 0.1" in text and "--probe-lists N" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    capped = Plan(runs=1, lists=400, click_models=1, attacks=5, informed=4, min_effect=0.05, power=0.9,
                  epsilon_audit=False)
    assert "capped" in " ".join(capped.lines())


def test_audit_prints_the_plan_before_the_tables(capsys):
    assert main(["audit", "--data", SMALL, "--rounds", "2", "--clients", "20", "--attack", "olsr,random3",
                 "--click-model", "perfect", "--no-epsilon-audit", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Plan: 1 run x 1 click model, ")
    assert out.index("Plan:") < out.index("Leakage verdict") and "fltr-audit explain TERM" in out.splitlines()[-1]


def test_a_fixed_list_count_pins_the_probe(capsys):
    assert main(["audit", "--data", SMALL, "--rounds", "2", "--clients", "20", "--attack", "olsr,random3",
                 "--click-model", "perfect", "--no-epsilon-audit", "--probe-lists", "30", "--quiet"]) == 0
    assert "Plan: 1 run x 1 click model, 30 lists per click model (as given)" in capsys.readouterr().out
