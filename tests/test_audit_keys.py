"""Every audit draws from the stream of its ``audit_key``: the run's settings (its data named by
content, not by place) and the audit's kind. Two runs that differ in any setting get independent audits, so pooling
never counts a copy twice (issue 37, item 1). Each test below fails when ``RunSpec.audit_seed``
ignores the part of the key it changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import fltr_audit
from fltr_audit.engine.data.letor_write import write_letor
from fltr_audit.engine.data.load import load_splits
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


def _letor_folder(folder: Path) -> Path:
    """A 5-fold LETOR folder of a small synthetic set (Fold1 only holds files: the run reads it)."""
    splits = load_splits("synthetic:mq2008", fold=1, queries=60, seed=3)
    for name, part in zip(("train", "vali", "test"), (splits.train, splits.vali, splits.test)):
        (folder / "Fold1").mkdir(parents=True, exist_ok=True)
        write_letor(part, folder / "Fold1" / f"{name}.txt")
    return folder


def test_the_same_data_in_another_folder_gives_the_same_audits_and_other_data_other_audits(tmp_path):
    """The audit streams follow the data's content, not its place: a copy of the folder (not a
    link) keeps every audit key; one label changed in the copy changes them. The run keys (a
    store's rows) still follow the place."""
    here = _letor_folder(tmp_path / "here")
    there = tmp_path / "elsewhere" / "copy"
    shutil.copytree(here, there)
    at_here, at_there = changed({"data": str(here)}), changed({"data": str(there)})
    assert at_here.key() != at_there.key()
    for kind in ("worst-case", "natural"):
        assert at_there.audit_key(kind) == at_here.audit_key(kind)
    test_file = there / "Fold1" / "test.txt"
    text = test_file.read_text()
    test_file.write_text(("1" if text[0] == "0" else "0") + text[1:])
    for kind in ("worst-case", "natural"):
        assert changed({"data": str(there)}).audit_key(kind) != at_here.audit_key(kind)


def test_an_audit_of_a_moved_data_set_reports_the_same_bounds(tmp_path):
    """Through the real engine: the claim audit of the same data in two folders gives the same
    lower bounds (it differed with the folder's path before the audit key named the content)."""
    here = _letor_folder(tmp_path / "here")
    there = tmp_path / "moved"
    shutil.copytree(here, there)
    options = dict(folds=[1], rounds=2, clients=20, defenses=["dp-local-laplace(eps=2)"], attacks=["olsr"],
                   click_models=["perfect"], seeds=[0], trials=400, probe_lists=60)
    audits = [fltr_audit.audit(data=str(folder), **options).audits for folder in (here, there)]
    bounds = [a.sort_values("neighbours")[["epsilon_lb", "fp", "fn"]].values.tolist() for a in audits]
    assert len(bounds[0]) == 2 and bounds[0] == bounds[1]
