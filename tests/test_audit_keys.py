"""Every audit draws from the stream of its ``audit_key``: the run key (everything that defines the
run) and the audit's kind. Two runs that differ in any setting get independent audits, so pooling
never counts a copy twice (issue 37, item 1). Each test below fails when ``RunSpec.audit_seed``
ignores the part of the key it changes."""

from __future__ import annotations

import pytest

from fltr_audit.spec.run import RunSpec

BASE = RunSpec.from_json({
    "data": "synthetic:mq2008", "fold": 1, "normalization": "zscore", "queries": None,
    "algo": "fpdgd", "rounds": 20, "clients": 1000, "queries_per_client": 4, "ranker": "linear",
    "train_click_model": "perfect", "params": {},
    "probe": {"split": "vali", "click_models": ["perfect"], "cohort": 100, "queries_per_client": 1,
              "min_shown": 10, "require_click": True, "counterfactual": 20},
    "epsilon_audit": True, "audit_trials": 10000,
    "defense": "dp-local-laplace(eps=4.5)", "attacks": ["olsr"], "seed": 0,
})

CHANGES = {
    "data": {"data": "synthetic:mq2008?queries=150"}, "fold": {"fold": 2}, "normalization": {"normalization": "none"},
    "queries": {"queries": 100}, "algo": {"algo": "fedips"}, "rounds": {"rounds": 21}, "clients": {"clients": 999},
    "queries_per_client": {"queries_per_client": 3}, "ranker": {"ranker": "mlp"},
    "train_click_model": {"train_click_model": "navigational"}, "params": {"params": {"lr": 0.2}},
    "population": {"population": 5000}, "non_iid": {"non_iid": "click-preference"},
    "probe.split": {"probe": {"split": "test"}}, "probe.click_models": {"probe": {"click_models": ["informational"]}},
    "probe.cohort": {"probe": {"cohort": 2}}, "probe.queries_per_client": {"probe": {"queries_per_client": 2}},
    "probe.min_shown": {"probe": {"min_shown": 5}}, "probe.require_click": {"probe": {"require_click": False}},
    "probe.counterfactual": {"probe": {"counterfactual": 10}}, "threat_model": {"threat_model": "server-blind"},
    "probe.lists": {"probe": {"lists": 500}}, "epsilon_audit": {"epsilon_audit": False},
    "audit_trials": {"audit_trials": 5000}, "audit_run_canaries": {"audit_run_canaries": 100},
    "defense": {"defense": "dp-local-laplace(eps=4)"}, "attacks": {"attacks": ["score"]}, "seed": {"seed": 1},
}


def changed(change: dict) -> RunSpec:
    config = BASE.to_json()
    for key, value in change.items():
        if key == "probe":
            config["probe"] = {**config["probe"], **value}
        else:
            config[key] = value
    return RunSpec.from_json(config)


def test_every_setting_of_the_run_config_is_covered():
    """A setting added to the run spec gets its own case here (its audits must depend on it)."""
    full = changed({"population": 5000, "non_iid": "click-preference", "audit_run_canaries": 100,
                    "threat_model": "server-malicious", "probe": {"lists": 500}}).to_json()
    keys = {k for k in full if k != "probe"} | {f"probe.{k}" for k in full["probe"]}
    assert keys - set(CHANGES) == {"manipulation"}  # tested on its own below


def test_the_manipulation_of_a_malicious_server_is_part_of_the_key():
    isolate = changed({"threat_model": "server-malicious", "manipulation": "isolate"})
    inconsistent = changed({"threat_model": "server-malicious", "manipulation": "inconsistent"})
    assert isolate.audit_seed("natural") != inconsistent.audit_seed("natural")


@pytest.mark.parametrize("part", sorted(CHANGES))
def test_changing_any_part_of_the_run_changes_every_audit_stream(part):
    other = changed(CHANGES[part])
    assert other.key() != BASE.key()
    for kind in ("worst-case", "natural"):
        assert other.audit_seed(kind) != BASE.audit_seed(kind)
        assert other.audit_key(kind) != BASE.audit_key(kind)


def test_the_same_run_gives_the_same_audits_and_kinds_are_independent():
    again = RunSpec.from_json(BASE.to_json())
    assert again.audit_seed("worst-case") == BASE.audit_seed("worst-case")
    assert BASE.audit_seed("worst-case") != BASE.audit_seed("natural")
    renamed = RunSpec.from_json({**BASE.to_json(), "campaign": "other"})  # a campaign's name is not a setting
    assert renamed.audit_key("natural") == BASE.audit_key("natural")


def test_the_spec_is_hashable_by_its_run_key():
    assert hash(BASE) == int(BASE.key(), 16)
    assert len({BASE, RunSpec.from_json(BASE.to_json()), changed({"seed": 1})}) == 2
