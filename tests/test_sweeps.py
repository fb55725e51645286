"""Sweeps kept apart (issue 43): a setting the campaign sweeps is never pooled over by a verdict,
a table, the report or ``campaign status``; its numeric axes are drawn against the verdict's
statistic with one sentence. The planted bug these catch: pooling the cohorts of a sweep into one
``leaks`` row (a cohort of 100 that does not leak hidden behind a cohort of 2 that does)."""

import json

import numpy as np
import pandas as pd
import pytest

from reports.compare import compare, verdicts
from reports.sweep_plot import sweep_plots
from reports.sweeps import defense_axes, swept_axes, with_swept_settings, with_sweeps

COHORTS = {2: 0.25, 100: 0.0}  # true leakage of olsr at each probe cohort
LISTS = 200


def _tables(cohorts=COHORTS, seeds=(0, 1)) -> dict[str, pd.DataFrame]:
    """Runs of secagg at each cohort and seed: per-list leakage around the cohort's true value."""
    rng = np.random.default_rng(7)
    runs, attacks, per_query = [], [], []
    for cohort, leak in cohorts.items():
        for seed in seeds:
            key = f"k{cohort}-{seed}"
            config = {"data": "synthetic:mq2008", "algo": "fpdgd", "rounds": 20, "clients": 1000, "seed": seed,
                      "fold": 1, "defense": "secagg", "probe": {"cohort": cohort, "split": "vali"}}
            runs.append({"run_key": key, "campaign": "sweep", "status": "done", "config": json.dumps(config),
                         "seed": seed})
            for attack, reference, true in (("olsr", False, leak), ("random3", True, 0.0)):
                cf = np.clip(0.6 + rng.normal(0, 0.05, LISTS), 0, 1)
                auc = cf + true + rng.normal(0, 0.05, LISTS)
                per_query.append(pd.DataFrame({"run_key": key, "click_model": "perfect", "defense": "secagg",
                                               "attack": attack, "auc": auc, "auc_counterfactual": cf,
                                               "probe_cohort": cohort}))
                attacks.append({"run_key": key, "data": "synthetic:mq2008", "algo": "fpdgd", "fold": 1, "seed": seed,
                                "click_model": "perfect", "defense": "secagg", "threat_model": "server (aggregate only)",
                                "attack": attack, "reference": reference, "averaging": "macro", "precision": 0.5,
                                "recall": 0.5, "f1": 0.5, "auc": float(np.mean(auc)),
                                "auc_counterfactual": float(np.mean(cf)), "leakage": float(np.mean(auc - cf)),
                                "probe_cohort": cohort, "n_queries": LISTS})
    utility = pd.DataFrame([{"run_key": r["run_key"], "defense": "secagg", "data": "synthetic:mq2008",
                             "algo": "fpdgd", "click_model": "perfect", "ndcg10": 0.7, "ndcg10_delta": 0.0,
                             "seed": r["seed"], "fold": 1} for r in runs])
    return {"runs": pd.DataFrame(runs), "attacks": pd.DataFrame(attacks), "per_query": pd.concat(per_query),
            "utility": utility}


def test_the_swept_cohort_is_found_and_the_seed_is_not():
    tables = _tables()
    assert swept_axes(tables["runs"]) == ["probe_cohort"]
    assert swept_axes(_tables(cohorts={2: 0.25})["runs"]) == []


def test_verdicts_keep_each_cohort_apart():
    v = verdicts(_tables())
    assert sorted(v["probe_cohort"]) == [2, 100]
    by = dict(zip(v["probe_cohort"], v["leakage_verdict"]))
    assert by[2] == "leaks" and by[100] == "no measurable leakage"


def test_compare_pools_a_swept_axis_only_when_told():
    tables = _tables()
    kept = compare(tables)
    assert set(kept["probe_cohort"]) == {2, 100}
    pooled = compare(tables, pool=("probe_cohort",))
    olsr = pooled[pooled["attack"] == "olsr"]
    assert len(olsr) == 1 and olsr["n_lists"].iloc[0] == 2 * len(COHORTS) * (LISTS)


def test_with_sweeps_adds_the_axis_to_utility_rows():
    tables, axes = with_sweeps(_tables())
    assert axes == ["probe_cohort"] and set(tables["utility"]["probe_cohort"]) == {2, 100}


def test_the_sweep_plot_says_what_the_sweep_shows():
    tables, _ = with_sweeps(_tables())
    (figure,) = sweep_plots(tables, verdicts(tables))
    assert figure["png"].startswith(b"\x89PNG")
    sentence = figure["sentence"]
    assert sentence.startswith("Swept over probe cohort: secagg's leakage falls from +0.2")
    assert "leaks at probe cohort 2" in sentence and "no measurable leakage at probe cohort 100" in sentence


def test_status_shows_the_swept_settings():
    tables = _tables()
    status = tables["runs"][["run_key", "campaign", "status"]].assign(defense="secagg", seed=tables["runs"]["seed"])
    out = with_swept_settings(status, tables["runs"][["run_key", "config"]])
    assert list(out.columns) == ["run_key", "campaign", "status", "defense", "probe_cohort", "seed"]
    assert out.attrs["swept"] == ["probe_cohort"]


@pytest.mark.parametrize("defenses, expected", [
    (["none", "dp-local-laplace(eps=1)", "dp-local-laplace(eps=4.5)"],
     {"dp-local-laplace(eps=·)": ("eps", {"dp-local-laplace(eps=1)": 1.0, "dp-local-laplace(eps=4.5)": 4.5})}),
    (["none", "secagg", "dp-local-laplace(eps=1)"], {}),
])
def test_a_swept_defense_parameter_is_one_family(defenses, expected):
    found = {family: (parameter, members) for family, (parameter, _, members) in defense_axes(defenses).items()}
    assert found == expected
