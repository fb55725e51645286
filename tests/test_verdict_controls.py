"""Verdict controls with known truth (issue #11, item 5): simulated lists where the leakage of
every attack is known, scored the way the engine scores them (AUC against the real clicks and
against K counterfactual click draws), and randomized response with a known epsilon."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from fltr_audit.privacy.error_bounds import epsilon_lower_bound
from reports.compare import compare, verdicts
from tests.power import binomial_plan

CLICK_PROBS = {"perfect": (0.0, 0.5, 1.0), "navigational": (0.05, 0.5, 0.95), "informational": (0.4, 0.7, 0.9)}
LISTS, DOCS, K = 300, 10, 20


def list_auc(scores: np.ndarray, clicks: np.ndarray) -> np.ndarray:
    """Per-row AUC (Mann-Whitney): rows of ``scores`` (no ties) against 0/1 ``clicks`` of the same
    shape, broadcast over leading axes; NaN where a row lacks a click or a non-click."""
    ranks = np.argsort(np.argsort(scores, axis=-1), axis=-1) + 1.0
    ranks = np.broadcast_to(ranks, clicks.shape)
    n1 = clicks.sum(-1)
    n0 = clicks.shape[-1] - n1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n1 > 0) & (n0 > 0), ((ranks * clicks).sum(-1) - n1 * (n1 + 1) / 2) / (n1 * n0), np.nan)


def test_list_auc_matches_sklearn():
    rng = np.random.default_rng(0)
    s, c = rng.normal(size=(30, DOCS)), rng.random((30, DOCS)) < 0.4
    ours = list_auc(s, c.astype(float))
    for i in range(30):
        expected = roc_auc_score(c[i], s[i]) if 0 < c[i].sum() < DOCS else np.nan
        assert ours[i] == pytest.approx(expected, nan_ok=True)


def simulate(seed: int, click_model: str, defense: str, lists: int = LISTS) -> dict[str, pd.DataFrame]:
    """One run: per list, real clicks and K counterfactual draws from the click model; attacks
    score the shown documents. Under ``none`` the message carries the clicks (olsr reads them);
    under any other defense it is noise (true leakage 0 for every attack)."""
    rng = np.random.default_rng([seed, len(click_model), defense == "none"])
    LISTS = lists
    labels = rng.integers(0, 3, size=(LISTS, DOCS))
    p = np.asarray(CLICK_PROBS[click_model])[labels]
    real = (rng.random((LISTS, DOCS)) < p).astype(float)
    counterfactual = (rng.random((K, LISTS, DOCS)) < p).astype(float)
    message = real if defense == "none" else rng.random((LISTS, DOCS)) < 0.5  # noise: independent of clicks
    scores = {  # (reference?, scores): informed attacks read the message, references do not
        "olsr": (False, message + rng.normal(0, 0.5, (LISTS, DOCS))),
        "score": (False, 0.5 * message + labels + rng.normal(0, 1, (LISTS, DOCS))),
        "prior": (True, labels + rng.normal(0, 0.1, (LISTS, DOCS))),
        "random4": (True, rng.random((LISTS, DOCS))),
    }
    attacks, per_query = [], []
    for name, (reference, s) in scores.items():
        auc = list_auc(s, real)
        cf = list_auc(s[None], counterfactual)
        valid = np.isfinite(cf).sum(0)
        auc_cf = np.where(valid > 0, np.nansum(cf, axis=0) / np.maximum(valid, 1), np.nan)
        keep = np.isfinite(auc) & np.isfinite(auc_cf)
        per_query.append(pd.DataFrame(dict(run_key=f"r{seed}", click_model=click_model, defense=defense,
                                           attack=name, client=np.arange(LISTS), auc=auc, auc_counterfactual=auc_cf)))
        attacks.append(dict(run_key=f"r{seed}", data="sim", algo="fpdgd", click_model=click_model, defense=defense,
                            threat_model="server", attack=name, averaging="macro", reference=reference,
                            precision=0.5, recall=0.5, f1=0.5, auc=auc[keep].mean(),
                            auc_counterfactual=auc_cf[keep].mean(), leakage=(auc - auc_cf)[keep].mean()))
    return {"attacks": pd.DataFrame(attacks), "per_query": pd.concat(per_query, ignore_index=True)}


LEVEL = binomial_plan(0.05, 0.10)


@pytest.mark.slow
@pytest.mark.parametrize("click_model", sorted(CLICK_PROBS))
def test_pure_noise_defense_leaks_at_most_at_the_test_level(click_model):
    """346 independent pure-noise runs (true leakage 0 for every attack), at most 27 "leaks" verdicts
    (scipy.stats.binom): a verdict rule at level 5 % passes with probability 0.9909, one at level
    10 % passes with probability 0.0986 (fails with 0.90)."""
    assert (LEVEL.runs, LEVEL.max_failures) == (346, 27) and LEVEL.pass_correct >= 0.99
    assert LEVEL.pass_defective <= 0.1
    runs = [simulate(seed, click_model, f"noise-{seed}", lists=100) for seed in range(LEVEL.runs)]
    tables = {name: pd.concat([r[name] for r in runs], ignore_index=True) for name in ("attacks", "per_query")}
    v = verdicts(tables)
    assert len(v) == LEVEL.runs
    false_leaks = int((v["leakage_verdict"] == "leaks").sum())
    assert false_leaks <= LEVEL.max_failures, false_leaks


def test_reference_attacks_have_leakage_near_zero_and_no_defense_leaks():
    covered, total = 0, 0
    for seed in range(10):
        for click_model in CLICK_PROBS:
            tables = simulate(seed, click_model, "none")
            v = verdicts(tables)
            assert v["leakage_verdict"].iloc[0] == "leaks" and v["strongest_attack"].iloc[0] == "olsr"
            ref = compare(tables).query("reference")
            covered += int(((ref["leakage_ci_low"] <= 0) & (ref["leakage_ci_high"] >= 0)).sum())
            total += len(ref)
    # 95 % intervals around a true 0: the share covering 0 is about 0.95 (3.5 standard errors below)
    assert covered / total >= 0.95 - 3.5 * math.sqrt(0.05 * 0.95 / total), (covered, total)


def _tables(diffs: dict[str, np.ndarray], reference=()) -> dict[str, pd.DataFrame]:
    """One defense, attacks whose per-list leakage is given (AUC counterfactual 0.6)."""
    attacks, per_query = [], []
    for name, d in diffs.items():
        per_query.append(pd.DataFrame(dict(run_key="r", click_model="perfect", defense="d", attack=name,
                                           auc=0.6 + d, auc_counterfactual=0.6)))
        attacks.append(dict(run_key="r", click_model="perfect", defense="d", threat_model="server", attack=name,
                            averaging="macro", reference=name in reference, precision=0.5, recall=0.5, f1=0.5,
                            auc=0.6 + d.mean(), auc_counterfactual=0.6, leakage=d.mean()))
    return {"attacks": pd.DataFrame(attacks), "per_query": pd.concat(per_query, ignore_index=True)}


def test_a_true_leak_of_0_1_is_found_with_enough_lists():
    """346 independent defenses, each with a true leak of 0.1 (olsr) beside an attack without leakage:
    every verdict is "leaks" by olsr, and the reported interval misses 0.1 at most 27 times
    (scipy.stats.binom): an interval of coverage 95 % passes with probability 0.9909, one of coverage
    90 % with probability 0.0986 (fails with 0.90)."""
    frames = []
    for seed in range(COVER.runs):
        rng = np.random.default_rng(seed)
        t = _tables({"olsr": rng.normal(0.1, 0.3, 400), "score": rng.normal(0.0, 0.3, 400)})
        frames.append({name: df.assign(defense=f"d{seed}", run_key=f"r{seed}") for name, df in t.items()})
    tables = {name: pd.concat([f[name] for f in frames], ignore_index=True) for name in ("attacks", "per_query")}
    v = verdicts(tables)
    assert len(v) == COVER.runs
    assert (v["leakage_verdict"] == "leaks").all() and (v["strongest_attack"] == "olsr").all()
    missed = int(((v["leakage_ci_low"] > 0.1) | (v["leakage_ci_high"] < 0.1)).sum())
    assert missed <= COVER.max_failures, missed


COVER = binomial_plan(0.05, 0.10)


def test_no_measurable_leakage_only_when_every_upper_bound_is_below_the_minimum_effect():
    rng = np.random.default_rng(7)
    diffs = {"olsr": rng.normal(0.005, 0.05, 200), "score": rng.normal(0.0, 0.04, 200)}
    highs = {k: stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))[1] for k, d in diffs.items()}
    top = max(highs.values())
    assert 0 < min(highs.values()) < top < 0.02  # both bounds positive, inside the default
    tables = _tables(diffs)
    for min_effect, expected in ((top + 1e-4, "no measurable leakage"), (top - 1e-4, "inconclusive"),
                                 (min(highs.values()) - 1e-4, "inconclusive"),
                                 (0.02, "no measurable leakage")):
        v = verdicts(tables, min_effect=min_effect)
        assert v["leakage_verdict"].iloc[0] == expected, (min_effect, highs)
        assert v["missable"].iloc[0] == pytest.approx(top)
    # an attack without an interval (one list) blocks the rule: it could hide any leak
    one = _tables({**diffs, "prob": np.array([0.0])})
    assert verdicts(one)["leakage_verdict"].iloc[0] == "inconclusive"


def test_adding_a_reference_attack_does_not_change_verdicts():
    for seed in range(10):
        for click_model in CLICK_PROBS:
            for defense in ("none", "noise"):
                tables = simulate(seed, click_model, defense)
                without = {n: t[~t["attack"].isin(["prior", "random4"])] for n, t in tables.items()}
                a, b = verdicts(without), verdicts(tables)
                assert a["leakage_verdict"].tolist() == b["leakage_verdict"].tolist()
                assert a["p_adjusted"].tolist() == pytest.approx(b["p_adjusted"].tolist(), nan_ok=True)


# --- pooled epsilon bounds: randomized response over 11 values, p = 0.9 ---------------------

RR_P, RR_VALUES = 0.9, 11
TRUE_EPSILON = math.log(RR_P / ((1 - RR_P) / (RR_VALUES - 1)))  # ln 90
# the optimal test of input a vs b decides "b" iff the output is b: FPR = q, FNR = 1 - p, which
# meets FNR + e^eps FPR = 1 with equality (the audit can reach the true epsilon)
RR_FPR, RR_FNR = (1 - RR_P) / (RR_VALUES - 1), 1 - RR_P


def test_the_optimal_rr_test_is_tight():
    assert RR_FNR + math.exp(TRUE_EPSILON) * RR_FPR == pytest.approx(1.0)


def test_pooled_bound_exceeds_the_true_epsilon_rarely_and_the_maximum_often():
    runs, n, reps = 15, 1000, 200
    rng = np.random.default_rng(2026)
    fp = rng.binomial(n, RR_FPR, size=(reps, runs))
    fn = rng.binomial(n, RR_FNR, size=(reps, runs))
    pooled, _ = epsilon_lower_bound(fp.sum(1), fn.sum(1), runs * n, runs * n, 0.0, 0.95)
    per_run, _ = epsilon_lower_bound(fp, fn, n, n, 0.0, 0.95)
    pooled_misses = int((pooled > TRUE_EPSILON).sum())
    max_misses = int((per_run.max(1) > TRUE_EPSILON).sum())
    assert pooled_misses <= 0.05 * reps, pooled_misses
    assert max_misses > 0.05 * reps and max_misses > pooled_misses, (max_misses, pooled_misses)
    # the pooled bound is also the stronger estimate: closer to the truth on average
    assert np.median(pooled) > np.median(per_run)


def test_pooled_bound_matches_a_hand_computation():
    fp, fn, n = 9, 103, 1000
    u0 = stats.beta.ppf(0.975, fp + 1, n - fp)
    u1 = stats.beta.ppf(0.975, fn + 1, n - fn)
    lb, limited = epsilon_lower_bound(fp, fn, n, n, 0.0, 0.95)
    assert lb == pytest.approx(max(math.log((1 - u0) / u1), math.log((1 - u1) / u0)))
    assert not limited
    # zero errors: the bound is the trial count's limit (7.21 at 10,000 trials per input)
    lb, limited = epsilon_lower_bound(0, 0, 5000, 5000, 0.0, 0.95)
    u = 1 - 0.025 ** (1 / 5000)
    assert lb == pytest.approx(math.log((1 - u) / u)) and round(float(lb), 2) == 7.21 and limited
