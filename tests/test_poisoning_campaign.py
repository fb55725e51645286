"""The poisoning setting at the doors of a run: the run spec writes it only when set (existing run keys
unchanged), round-trips it canonically, and a campaign's ``algorithm.poison`` axis expands into runs and
refuses bad input naming the key, before any run."""

import pytest

from fltr_audit.errors import FltrError
from fltr_audit.spec.campaign import validate_spec
from fltr_audit.spec.grid import expand
from fltr_audit.spec.run import RunSpec

BASE = {"data": "synthetic:mq2008", "fold": 1, "normalization": "zscore", "queries": None, "algo": "fpdgd", "rounds": 3,
        "clients": 20, "queries_per_client": 2, "ranker": "linear", "train_click_model": "perfect", "params": {},
        "probe": {}, "defense": "none", "attacks": ["olsr"], "seed": 0}


def test_the_run_config_writes_poison_only_when_set_and_round_trips():
    clean = RunSpec.from_json(BASE)
    assert "poison" not in clean.to_json()
    poisoned = RunSpec.from_json({**BASE, "poison": "sign-flip( fraction=0.2, scale=1.0 )"})
    assert poisoned.to_json()["poison"] == "sign-flip(fraction=0.2)"
    assert RunSpec.from_json(poisoned.to_json()) == poisoned and poisoned.key() != clean.key()
    assert RunSpec.from_json({**BASE, "poison": "none"}).key() == clean.key()


def spec(**algorithm):
    return validate_spec({"name": "t", "data": {"spec": "synthetic:mq2008"},
                          "algorithm": {"name": "fpdgd", "rounds": 2, "clients": 20, **algorithm},
                          "audit": {"defenses": ["none", "median"], "attacks": ["olsr"]}})


def test_the_poison_axis_expands_and_leaves_the_clean_runs_keys_alone():
    runs = expand(spec(poison=["none", "lie(fraction=0.2)", "adaptive(fraction=0.1)"]))
    assert len(runs) == 6
    assert sorted({r.config.get("poison") for r in runs}, key=str) == [None, "adaptive(fraction=0.1)",
                                                                          "lie(fraction=0.2)"]
    clean = {r.key for r in expand(spec())}
    assert clean == {r.key for r in runs if "poison" not in r.config}


@pytest.mark.parametrize("algorithm,defenses,pattern", [
    ({"poison": "lie(fraction=0.5)"}, None, r"key 'algorithm.poison': lie: fraction: must be a number in \[0, 0.5\)"),
    ({"poison": ["none", "bogus(fraction=0.1)"]}, None, "unknown poisoning attack 'bogus'"),
    ({"name": "foltr-es", "poison": "lie(fraction=0.2)"}, None, "foltr-es's messages carry seed\\+metric"),
    ({}, ["krum(f=9)"], r"key 'audit.defenses': .*below 2f \+ 3 = 21"),
    ({}, ["krum+secagg"], "cannot be combined"),
])
def test_bad_robustness_input_names_the_campaign_key(algorithm, defenses, pattern):
    raw = {"name": "t", "data": {"spec": "synthetic:mq2008"},
           "algorithm": {"name": "fpdgd", "rounds": 2, "clients": 20, **algorithm},
           "audit": {"defenses": defenses or ["none"],
                     "attacks": ["foltr-decode"] if "name" in algorithm else ["olsr"]}}
    with pytest.raises(FltrError, match=pattern) as info:
        validate_spec(raw, source="c.toml")
    assert str(info.value).startswith("c.toml: ") and "\n" not in str(info.value)


def test_attack_rows_under_a_robust_output_name_their_threat_model():
    from fltr_audit.runs.audit import run_audit

    tables = run_audit(RunSpec.from_json({**BASE, "defense": "krum(f=2,view=output)", "epsilon_audit": False,
                                          "probe": {"click_models": ["perfect"], "cohort": 20, "counterfactual": 2}}))
    assert set(tables["attacks"]["threat_model"]) == {"server (robust output)"}
    assert tables["utility"]["aggregator_fallbacks"].iloc[0] == 0  # training cohorts of 20 hold krum(f=2)
