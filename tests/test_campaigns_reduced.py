"""Every shipped campaign expands and runs green at a reduced size (issue 21, item 5)."""

import re
from pathlib import Path

import pytest

from fltr_audit.spec.campaign import CampaignSpec, load_spec, validate_spec

from fltr_audit.spec.grid import expand
from fltr_audit.runs.campaign import execute_run

CAMPAIGNS = sorted((Path(__file__).resolve().parents[1] / "campaigns").glob("*.toml"))


def reduced(campaign: CampaignSpec) -> CampaignSpec:
    """One seed, one fold, two training rounds of 20 clients (or the smallest cohort a defense's
    aggregator declares it needs, ``min_cohort``: Krum with f = 30 needs 63), small audits; every other
    axis (algorithms, defenses, cohorts, threat models, attacks) kept, so each configuration kind runs."""
    spec = dict(campaign.table)
    spec = {**spec, "seeds": spec["seeds"][:1]}
    folds = spec["data"]["folds"]
    spec["data"] = {**spec["data"], "folds": folds[:1] if isinstance(folds, list) else folds}
    needed = max(d.build().aggregator.min_cohort for d in campaign.audit.defenses)
    spec["algorithm"] = {**spec["algorithm"], "rounds": [2], "clients": [max(20, needed)]}
    spec["audit"] = {**spec["audit"], "trials": 200}
    return validate_spec(spec)


@pytest.mark.slow
@pytest.mark.parametrize("path", CAMPAIGNS, ids=[p.stem for p in CAMPAIGNS])
def test_campaign_runs_green_reduced(path):
    """Each distinct (algorithm, defense stack, cohort, threat model) run of the campaign computes
    its tables without error and gives every attack row; a stack is its components, whatever their
    parameters (production_vs_papers' 16 defenses are 6 stacks at three budgets), and every
    defense's parameters are built and claimed. secagg_cohort_sweep's cohorts of 2 and 4 failed
    4 of 8 runs before the probe merged a last cohort of one ('1 of 1 clients survived')."""
    if '"../shared/data/' in path.read_text() and not Path("../shared/data/letor/MQ2008").is_dir():
        pytest.skip("the campaign names ../shared/data/letor/MQ2008, absent beside this checkout")
    campaign = reduced(load_spec(path))
    assert all(d.claim is not None for d in campaign.audit.defenses)  # reduced() built each stack
    runs = expand(campaign)
    seen = set()
    for run in runs:
        stack = re.sub(r"\([^)]*\)", "", run.spec.defense.name)
        kind = (run.spec.algorithm.name, stack, run.spec.probe.cohort, run.spec.probe.threat_model)
        if kind in seen:
            continue
        seen.add(kind)
        tables = execute_run(run.spec)["tables"]
        assert len(tables["attacks"]) and tables["attacks"]["attack"].notna().all(), kind
