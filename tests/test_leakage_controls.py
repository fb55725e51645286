"""Controls of the counterfactual baseline on synthetic MQ2008-shaped data (fixed seeds).

* attacks that never read the message (``random3``, ``guess-all``, ``prior``): their leakage
  CI over lists contains 0;
* no defense and secure aggregation over cohorts of 2: OLSR leaks (CI above 0);
* a pure-noise defense (``dp-local-laplace(eps=0.01)``): OLSR's one-sided test of zero
  leakage rejects about as often as its level says, over 116 seeds x 3 click models;
* every registered attack scores every shown document (FPDGD and FOLtR-ES probes).

Several CIs are checked at once, so each is taken at the family-wise level
``1 - 0.05 / (number of CIs)`` (Bonferroni); the claims hold at 95 % for the family.
"""

import dataclasses

import numpy as np
import pytest
from scipy import stats

from attacks.registry import ATTACK_SPECS, ATTACKS, attack_spec, make_attack, needed
from attacks.scoring import leakage_interval
from fltr_audit.runs.models import build_algorithm, splits_of, trained
from fltr_audit.runs.audit import run_audit
from fltr_audit.errors import FltrError
from fltr_audit.engine.probe import probe
from fltr_audit.spec.run import RunSpec

CLICK_MODELS = ["perfect", "navigational", "informational"]
REFERENCE = ["random3", "guess-all", "prior"]


def config(defense, *, seed=0, cohort=10, queries=600, attacks=("olsr", *REFERENCE), algo="fpdgd",
           models=CLICK_MODELS, counterfactual=20):
    return RunSpec.from_json({"data": f"synthetic:mq2008?queries={queries}", "fold": 1, "normalization": "zscore", "queries": None,
            "algo": algo, "rounds": 2, "clients": 20, "queries_per_client": 2, "ranker": "linear",
            "train_click_model": "perfect", "params": {},
            "probe": {"split": "vali", "click_models": list(models), "cohort": cohort, "queries_per_client": 1,
                      "min_shown": 10, "require_click": True, "counterfactual": counterfactual},
            "defense": defense, "attacks": list(attacks), "epsilon_audit": False, "audit_trials": 100, "seed": seed})


@pytest.fixture(scope="module")
def probed():
    return {"none": run_audit(config("none")), "secagg": run_audit(config("secagg", cohort=2))}


def _intervals(tables, attack, confidence):
    pq = tables["per_query"]
    return {cm: leakage_interval(g, confidence=confidence) for cm, g in pq[pq["attack"] == attack].groupby("click_model")}


def test_reference_attacks_show_no_leakage(probed):
    confidence = 1 - 0.05 / (len(probed) * len(REFERENCE) * len(CLICK_MODELS))
    for defense, tables in probed.items():
        rows = tables["attacks"]
        assert set(rows.loc[rows["reference"], "attack"]) == set(REFERENCE)
        for attack in REFERENCE:
            found = _intervals(tables, attack, confidence)
            assert sorted(found) == sorted(CLICK_MODELS)
            for model, ci in found.items():
                assert ci["n_lists"] >= 30
                assert ci["low"] <= 0 <= ci["high"], (defense, attack, model, ci)


def test_olsr_leaks_without_defense_and_under_secagg_of_two(probed):
    confidence = 1 - 0.05 / (len(probed) * len(CLICK_MODELS))
    for defense, tables in probed.items():
        for model, ci in _intervals(tables, "olsr", confidence).items():
            assert ci["low"] > 0, (defense, model, ci)
        rows = tables["attacks"].query("attack == 'olsr' and averaging == 'macro'")
        assert (rows["leakage"] > 0).all() and not rows["reference"].any()
        assert (rows["n_counterfactual"] == 20).all()
        np.testing.assert_allclose(rows["leakage_normalized"], rows["leakage"] / (1 - rows["auc_counterfactual"]))


@pytest.mark.slow
def test_pure_noise_defense_rejects_no_more_often_than_the_level():
    """116 seeds x 3 click models = 348 one-sided tests of zero leakage at level 0.05 through the real
    engine under a pure-noise defense (the click models' probes draw independent clicks, so the
    tests are independent): at most 27 rejections (scipy.stats.binom). A test of level 5 % passes
    with probability 0.9902, one of level 10 % with probability 0.0927 (fails with 0.91)."""
    seeds, max_rejections = 116, 27
    tests = seeds * len(CLICK_MODELS)
    assert stats.binom.cdf(max_rejections, tests, 0.05) >= 0.99 and stats.binom.cdf(max_rejections, tests, 0.10) <= 0.1
    rejections = 0
    for seed in range(seeds):
        pq = run_audit(config("dp-local-laplace(eps=0.01)", seed=seed, queries=400, attacks=["olsr"]))["per_query"]
        groups = dict(list(pq.groupby("click_model")))
        assert sorted(groups) == sorted(CLICK_MODELS)
        rejections += sum(leakage_interval(g)["p_value"] < 0.05 for g in groups.values())
    assert rejections <= max_rejections, rejections


def test_every_attack_scores_every_shown_document():
    cfg = config("none", queries=300)
    splits = splits_of(cfg)
    data = splits.get("vali")
    for algo, names in (("fpdgd", [a for a in ATTACKS if a not in ("foltr-decode", "seed-replay")]),
                        ("foltr-es", ["foltr-decode", "seed-replay", *REFERENCE])):
        cfg = config("none", queries=300, algo=algo)
        algorithm = build_algorithm(cfg, splits, "navigational")
        batch = probe(algorithm, trained(cfg).params, data, seed=0, cohort_size=20)[0]
        mask = batch.view.interactions.mask
        for name in names:
            guess = make_attack(name, **needed(name, {"seed": 0, "algorithm": algorithm, "k": algorithm.k})).guess(
                batch.view)
            assert np.isfinite(guess.score[mask]).all(), name


def test_registry_specs():
    assert [s for s in ATTACK_SPECS.values() if s.reference] == [attack_spec(n) for n in
                                                                  ("random3", "random4", "guess-all", "prior")]
    assert needed("random3", {"seed": 4, "k": 10}) == {"seed": 4}
    assert needed("distance", {"seed": 4, "k": 5}) == {"k": 5}
    assert make_attack("distance", k=5).threshold == 2 and make_attack("distance").threshold == 5
    with pytest.raises(FltrError, match="^attack prior: m: must be an integer >= 1, got 0$"):
        make_attack("prior", m=0)
    with pytest.raises(FltrError, match="^attacks: unknown attack"):
        attack_spec("nope")


def test_counterfactual_setting_must_be_positive():
    with pytest.raises(FltrError, match="probe.counterfactual: must be an integer >= 1, got 0"):
        run_audit(config("none", queries=300, counterfactual=0))


def test_probe_streams_are_keyed_by_seed_and_fold():
    """Folds of one seed must not share click draws (pooled CIs over folds assume independence)."""
    from fltr_audit.runs.probe_rounds import probe_seed

    def spec(seed, fold):
        base = config("none", seed=seed)
        return base.replace(data=dataclasses.replace(base.data, fold=fold))

    seeds = {probe_seed(spec(s, f)) for s in (0, 1) for f in (1, 2, 3, 4, 5)}
    assert len(seeds) == 10 and probe_seed(spec(0, 1)) == probe_seed(spec(0, 1))
