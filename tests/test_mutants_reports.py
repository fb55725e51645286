"""Tests that kill the surviving mutants of the verdict reports (reports/leakage.py,
reports/claims.py; issue 22, tools/mutation.toml): the leakage table against scipy's t-test and
t interval on the per-list differences, the fall-backs it takes, the planned sample size against
the power it promises, and the claim bounds against Clopper-Pearson limits (scipy's beta law)
put into the DP inequalities by bisection."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reports.claims import (
    bound_text,
    claim_summary,
    claim_text,
    finish_bounds,
    gdp_tradeoff,
    pooled_audits,
    pooled_text,
)
from fltr_audit.privacy.claim_trials import trials_to_test
from fltr_audit.privacy.error_bounds import clopper_pearson_upper, epsilon_lower_bound
from reports.leakage import ALPHA, MIN_EFFECT, leakage_table, leakage_verdicts, planned_lists, roc_rows

# --- leakage ------------------------------------------------------------------------------------


def _per_list(n=30, shift=0.05, seed=0):
    rng = np.random.default_rng(seed)
    cf = rng.uniform(0.3, 0.7, n)
    auc = cf + shift + rng.normal(0, 0.1, n)
    adv_cf = rng.uniform(0, 0.2, n)
    adv = adv_cf + rng.normal(0.01, 0.05, n)
    per_query = pd.DataFrame({"run_key": "r", "click_model": "perfect", "defense": "d", "attack": "a",
                              "auc": auc, "auc_counterfactual": cf, "advantage": adv,
                              "advantage_counterfactual": adv_cf})
    attacks = pd.DataFrame([{"run_key": "r", "click_model": "perfect", "defense": "d", "attack": "a",
                             "reference": False, "leakage": 0.123, "advantage": 0.5,
                             "advantage_counterfactual": 0.4}])
    return per_query, attacks


def test_the_leakage_of_per_list_rows_is_scipys_paired_t_test():
    per_query, attacks = _per_list()
    row = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"]).iloc[0]
    d = per_query["auc"] - per_query["auc_counterfactual"]
    low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert row["basis"] == "per list" and row["n_lists"] == 30
    assert row["leakage"] == pytest.approx(d.mean(), rel=1e-12)
    assert (row["leakage_ci_low"], row["leakage_ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert row["p_leakage"] == pytest.approx(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue, rel=1e-9)
    adv = per_query["advantage"] - per_query["advantage_counterfactual"]
    assert row["advantage_leakage"] == pytest.approx(adv.mean(), rel=1e-12)
    room = 1 - per_query["auc_counterfactual"].mean()
    assert row["leakage_normalized"] == pytest.approx(d.mean() / room, rel=1e-12)
    assert row["leakage_normalized_ci_high"] == pytest.approx(high / room, rel=1e-9)


def test_runs_without_per_list_rows_fall_back_to_the_runs_leakage():
    _, attacks = _per_list()
    runs = pd.concat([attacks.assign(run_key=f"r{i}", leakage=v) for i, v in enumerate([0.1, 0.3, 0.2])])
    row = leakage_table({"attacks": runs}, ["defense"]).iloc[0]
    assert row["basis"] == "per run" and row["n_lists"] == 3 and row["leakage"] == pytest.approx(0.2)
    low, _ = stats.t.interval(0.95, 2, loc=0.2, scale=stats.sem([0.1, 0.3, 0.2]))
    assert row["leakage_ci_low"] == pytest.approx(low, rel=1e-9)
    single = leakage_table({"attacks": attacks}, ["defense"]).iloc[0]
    assert single["basis"] == "single run (no interval)" and single["leakage"] == pytest.approx(0.123)


def test_per_list_rows_that_two_threat_models_of_one_run_share_are_not_used():
    """Two attack rows of one run that the per-list rows cannot tell apart (no threat_model
    column there): the table falls back to the runs rather than pairing lists twice."""
    per_query, attacks = _per_list()
    two = pd.concat([attacks.assign(threat_model="server"), attacks.assign(threat_model="observer", leakage=0.2)])
    table = leakage_table({"attacks": two, "per_query": per_query}, ["defense", "threat_model"])
    assert (table["basis"] == "single run (no interval)").all()
    assert table["leakage"].tolist() == pytest.approx([0.123, 0.2])


def test_one_list_is_not_a_per_list_sample_but_two_or_three_are():
    per_query, attacks = _per_list(n=1)
    row = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"]).iloc[0]
    assert row["basis"] == "single run (no interval)" and row["leakage"] == pytest.approx(0.123)
    for n in (2, 3):
        per_query, attacks = _per_list(n=n)
        row = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"]).iloc[0]
        d = per_query["auc"] - per_query["auc_counterfactual"]
        assert (row["basis"], row["n_lists"]) == ("per list", n) and row["leakage"] == pytest.approx(d.mean())
        assert row["leakage_se"] == pytest.approx(stats.sem(d), rel=1e-12) and row["leakage_df"] == n - 1


def test_per_list_rows_that_do_not_name_their_run_or_attack_are_not_used():
    """Per-list rows without a run_key or an attack column cannot be paired with their run's attack
    row: the table falls back to the run's own figure instead of pooling lists of other runs or
    attacks (catches the check dropped: the lists would be joined on click model and defense only)."""
    per_query, attacks = _per_list()
    for missing in ("run_key", "attack"):
        row = leakage_table({"attacks": attacks, "per_query": per_query.drop(columns=missing)}, ["defense"]).iloc[0]
        assert row["basis"] == "single run (no interval)" and row["leakage"] == pytest.approx(0.123)


def test_the_default_alpha_and_min_effect_of_the_verdicts():
    """A clear leak (30 lists, mean 0.05, sd 0.1): 'leaks' at the default alpha 0.05, whose
    one-sided 95 % bound is scipy's t bound; a p between 0.05 and 0.5 is not a leak."""
    assert (ALPHA, MIN_EFFECT) == (0.05, 0.05)
    per_query, attacks = _per_list(shift=0.05)
    table = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"])
    v = leakage_verdicts(table, ["defense"]).iloc[0]
    d = per_query["auc"] - per_query["auc_counterfactual"]
    assert v["leakage_verdict"] == "leaks" and v["ci_kind"].startswith("simultaneous one-sided 95%")
    assert v["leakage_ci_low"] == pytest.approx(d.mean() - stats.t.ppf(0.95, 29) * stats.sem(d), rel=1e-9)
    weak = table.assign(p_leakage=0.2)
    assert leakage_verdicts(weak, ["defense"]).iloc[0]["leakage_verdict"] != "leaks"


def test_a_verdict_with_no_room_above_the_counterfactual_has_no_normalized_bounds():
    per_query, attacks = _per_list()
    table = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"])
    v = leakage_verdicts(table.assign(auc_counterfactual=1.0), ["defense"]).iloc[0]
    assert "leakage_normalized_ci_low" not in v or pd.isna(v["leakage_normalized_ci_low"])
    v = leakage_verdicts(table, ["defense"]).iloc[0]
    room = 1 - table.iloc[0]["auc_counterfactual"]
    assert v["leakage_normalized_ci_low"] == pytest.approx(v["leakage_ci_low"] / room, rel=1e-12)


def test_no_leak_is_ruled_out_only_when_the_upper_bound_is_below_the_minimum_effect():
    """No leak (30 lists, mean 0, sd 0.1, upper bound ~0.03): 'no measurable leakage' at the default
    minimum effect 0.05, 'inconclusive' with the bound named at 0.01 (catches the minimum-effect test
    dropped, which ruled out every unproven leak)."""
    per_query, attacks = _per_list(shift=0.0, seed=3)
    table = leakage_table({"attacks": attacks, "per_query": per_query}, ["defense"])
    v = leakage_verdicts(table, ["defense"]).iloc[0]
    assert v["leakage_verdict"] == "no measurable leakage" and v["missable"] < MIN_EFFECT
    tight = leakage_verdicts(table, ["defense"], min_effect=0.01).iloc[0]
    assert tight["leakage_verdict"] == "inconclusive"
    assert tight["reason"] == f"upper bound {tight['missable']:.3f} not below the minimum effect 0.01"


def test_a_group_of_reference_attacks_only_gets_a_row_without_bounds():
    """A defense whose only attack rows are reference attacks (they do not read the message): its
    verdict row exists, with no informed attack, no missable bound and not 'leaks' -- nothing to
    take a maximum over (catches the bounds read from an empty set)."""
    per_query, attacks = _per_list()
    table = leakage_table({"attacks": attacks.assign(reference=True), "per_query": per_query}, ["defense"])
    v = leakage_verdicts(table, ["defense"]).iloc[0]
    assert v["n_informed"] == 0 and pd.isna(v["missable"]) and v["leakage_verdict"] != "leaks"


def test_roc_rows_unfold_the_stored_curves_and_skip_rows_without_one():
    """Each attack row's stored curve becomes one long row per FPR for the real clicks and one for
    the counterfactual mean, a one-point curve too; a row without FPRs adds nothing, whatever TPRs it
    holds (catches the row test inverted, which dropped every stored curve, or dropped, or skipping
    one-point curves)."""
    fpr, real, cf = [0.001, 0.01, 1.0], [0.2, 0.5, 1.0], [0.001, 0.02, 1.0]
    attacks = pd.DataFrame([
        {"run_key": "r", "defense": "none", "attack": "olsr", "roc_fpr": fpr, "roc_tpr": real,
         "roc_tpr_counterfactual": cf},
        {"run_key": "r", "defense": "none", "attack": "random3", "roc_fpr": None, "roc_tpr": real,
         "roc_tpr_counterfactual": None},
        {"run_key": "r", "defense": "none", "attack": "score", "roc_fpr": [1.0], "roc_tpr": [1.0],
         "roc_tpr_counterfactual": [1.0]}])
    rows = roc_rows(attacks)
    assert list(rows["attack"].unique()) == ["olsr", "score"]
    olsr = rows[rows["attack"] == "olsr"]
    assert olsr.loc[olsr["curve"] == "real", "tpr"].tolist() == real
    assert olsr.loc[olsr["curve"] == "counterfactual", "tpr"].tolist() == cf
    assert olsr.loc[olsr["curve"] == "real", "fpr"].tolist() == fpr
    assert len(rows[rows["attack"] == "score"]) == 2


@pytest.mark.parametrize("power,m", [(0.8, 1), (0.9, 4), (0.99, 2)])
def test_planned_lists_is_the_smallest_n_with_the_power_it_promises(power, m):
    """At zero leakage (per-list sd 0.3) an attack's upper bound is below d with probability
    Phi(d sqrt(n) / sd - z_{1-alpha/m}); all m independent attacks at once: that to the m-th.
    The planned n reaches ``power`` and n - 1 does not (normal approximation, as documented)."""
    d, sd = 0.05, 0.3

    def joint(n):
        return stats.norm.cdf(d * math.sqrt(n) / sd - stats.norm.ppf(1 - 0.05 / m)) ** m

    n = planned_lists(d, power, m, sd=sd)
    assert joint(n) >= power - 1e-12 and joint(n - 1) < power
    with pytest.raises(ValueError, match=r"^power\b"):
        planned_lists(d, 1.5, m)


# --- claims -------------------------------------------------------------------------------------


def _eps(fpr, fnr, delta):
    """The smallest eps >= 0 with FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta."""
    def ok(e):
        return fpr + math.exp(e) * fnr >= 1 - delta - 1e-15 and fnr + math.exp(e) * fpr >= 1 - delta - 1e-15
    if ok(0.0):
        return 0.0
    if not ok(700.0):
        return math.inf
    lo, hi = 0.0, 700.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (40, 500)])
def test_clopper_pearson_upper_solves_the_binomial_tail(k, n):
    got = float(clopper_pearson_upper(k, n, 0.975))
    if k == n:
        assert got == 1.0
    else:
        assert stats.binom.cdf(k, n, got) == pytest.approx(0.025, rel=1e-6)


@pytest.mark.parametrize("tests", [1, 3])
def test_finish_bounds_is_bonferroni_over_its_audits(tests):
    """Each row's bound at 1 - (1 - 0.95) / tests, split again over the two rates; tightness is
    the bound over the claim."""
    out = pd.DataFrame({"fp": [5, 0], "fn": [60, 0], "n0": [500, 400], "n1": [500, 400], "confidence": 0.95,
                        "claimed_delta": [0.0, 0.01], "claimed_epsilon": [2.0, 1.0], "claimed_scope": "message",
                        "audited_scope": "message"})
    got = finish_bounds(out, tests=tests)
    level = 1 - 0.05 / tests / 2
    for i, r in out.iterrows():
        fpr_u = stats.beta.ppf(level, r["fp"] + 1, r["n0"] - r["fp"])
        fnr_u = stats.beta.ppf(level, r["fn"] + 1, r["n1"] - r["fn"])
        want = _eps(fpr_u, fnr_u, r["claimed_delta"])
        assert got.loc[i, "epsilon_lb"] == pytest.approx(want, abs=1e-9)
        assert got.loc[i, "tightness"] == pytest.approx(want / r["claimed_epsilon"], abs=1e-9)
        assert got.loc[i, "epsilon_point"] == pytest.approx(
            _eps(r["fp"] / r["n0"], r["fn"] / r["n1"], r["claimed_delta"]), abs=1e-9)
    assert got.loc[1, "trial_limited"] and not got.loc[0, "trial_limited"]


def test_the_pooled_mu_bound_is_the_gaussian_tradeoff_of_both_upper_limits():
    """mu_lb = Phi^-1(1 - U_fp) - Phi^-1(U_fn), each rate's one-sided Clopper-Pearson upper limit at
    1 - (1 - 0.95) / 2 (scipy's beta law), floored at 0; NaN where the audit measured no mu (catches
    another split of the confidence over the two rates)."""
    out = pd.DataFrame({"fp": [5, 5], "fn": [60, 60], "n0": [500, 500], "n1": [500, 500], "confidence": 0.95,
                        "claimed_delta": 1e-5, "claimed_epsilon": 2.0, "claimed_scope": "message",
                        "audited_scope": "message", "mu": [1.0, np.nan], "mu_fp": [40, 40], "mu_fn": [90, 90],
                        "gof_pvalue": 0.5})
    got = finish_bounds(out)
    u_fp, u_fn = stats.beta.ppf(0.975, 41, 460), stats.beta.ppf(0.975, 91, 410)
    assert got.loc[0, "mu_lb"] == pytest.approx(stats.norm.ppf(1 - u_fp) - stats.norm.ppf(u_fn), rel=1e-9)
    assert np.isnan(got.loc[1, "mu_lb"])


def test_audits_that_record_no_claimed_delta_are_pooled_at_delta_0():
    """Older audit rows without ``claimed_delta`` claim pure DP: the pooled bound is the delta = 0
    bound of the summed counts, each rate's Clopper-Pearson limit (scipy's beta law) at
    1 - 0.05 / 2 put into the inequalities here (catches a default delta of 1, which bounds 0)."""
    audits = pd.DataFrame({"mechanism": "m", "attack": "a", "claimed_epsilon": 1.0, "claimed_scope": "message",
                           "epsilon_lb": 0.5, "n_trials": 1000, "fp": [3, 5], "fn": [7, 2], "n0": 500, "n1": 500,
                           "fpr": [0.006, 0.01], "fnr": [0.014, 0.004]})
    got = pooled_audits(audits, [])
    assert len(got) == 1 and got.loc[0, "claimed_delta"] == 0.0
    level = 1 - 0.05 / 2
    want = _eps(stats.beta.ppf(level, 8 + 1, 1000 - 8), stats.beta.ppf(level, 9 + 1, 1000 - 9), 0.0)
    assert want > 0.5 and got.loc[0, "epsilon_lb"] == pytest.approx(want, abs=1e-9)


def test_a_defense_with_only_a_worst_case_audit_has_no_natural_figures():
    """Without a natural audit the summary's natural columns say 'none': no verdict, no bound, not
    trial-limited (catches a default that claims a trial-limited natural audit)."""
    audits = pd.DataFrame({"defense": "d", "mechanism": "m", "attack": "a", "claimed_epsilon": 1.0,
                           "claimed_delta": 0.0, "claimed_scope": "message", "audited_scope": "message",
                           "neighbours": "worst-case", "epsilon_lb": 0.5, "n_trials": 1000, "fp": [3], "fn": [7],
                           "n0": 500, "n1": 500, "fpr": [0.006], "fnr": [0.014]})
    summary = claim_summary(pooled_audits(audits, ["defense"]), ["defense"])
    row = summary.iloc[0]
    assert row["claim_verdict_natural"] is None and math.isnan(row["epsilon_lb_natural"])
    assert not row["trial_limited_natural"]


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_the_gdp_tradeoff_is_the_error_of_the_best_test_of_two_unit_gaussians(mu):
    """N(0, 1) against N(mu, 1): the most powerful test at false-positive rate a rejects above
    t = the (1 - a) quantile of N(0, 1); its false-negative rate is P(N(mu, 1) <= t), scipy's
    normal law at loc mu (catches Phi(t + mu) for Phi(t - mu))."""
    fpr = np.array([0.01, 0.1, 0.5])
    t = stats.norm.isf(fpr)
    np.testing.assert_allclose(gdp_tradeoff(fpr, mu), stats.norm(loc=mu).cdf(t), rtol=1e-10)


def test_trials_to_test_is_the_fewest_whose_ceiling_exceeds_the_claim():
    for eps in (1.0, 3.0):
        n = trials_to_test(eps)
        m, m1 = n - n // 2, (n - 1) - (n - 1) // 2
        assert float(epsilon_lower_bound(0, 0, m, m)[0]) > eps >= float(epsilon_lower_bound(0, 0, m1, m1)[0])


def test_bound_text():
    assert bound_text(None, False, 10) == "ε not audited" and bound_text(math.nan, False, 10) == "ε not audited"
    assert bound_text(0.0812, False, 10_000) == "ε ≥ 0.08"
    assert bound_text(7.2134, True, 10_000) == "ε ≥ 7.21 (limit of 10,000 trials)"
    assert bound_text(1e300, False, 10) == "ε ≥ inf"


def _summary_row(**kw):
    row = dict(claim_verdict="consistent", claimed_epsilon=2.0, claimed_scope="message", audited_scope="message",
               epsilon_lb=0.5, trial_limited=False, n_trials=1000, claim_neighbours="worst-case", tightness=0.25)
    row.update(kw)
    return pd.Series(row)


def test_claim_text_names_scope_pooling_and_natural_neighbours():
    assert "(scope: message)" in claim_text(_summary_row())
    assert "scope:" not in claim_text(_summary_row(claimed_scope="none"))
    assert "runs pooled" not in claim_text(_summary_row())
    assert ", 3 runs pooled" in claim_text(_summary_row(runs=3))
    assert "runs pooled" not in claim_text(_summary_row(runs=1))
    text = claim_text(_summary_row(claim_verdict_natural="violated", epsilon_lb_natural=2.5,
                                   trial_limited_natural=False, n_trials_natural=100))
    assert "natural neighbours: violated, ε ≥ 2.50" in text
    assert "single messages with worst-case neighbours" in claim_text(_summary_row())
    for unnamed in (math.nan, None, "audited"):  # rows without a neighbour kind name none
        assert "neighbours" not in claim_text(_summary_row(claim_neighbours=unnamed))


def test_pooled_text_counts_distinct_audits_and_their_copies():
    """Rows keyed by audit: one audit with one copy still says so (two runs were one audit); one
    audit without copies says nothing; older rows without ``copies`` count runs."""
    assert pooled_text(pd.Series({"runs": 1, "copies": 1})) == ", 1 distinct audit pooled (1 copy counted once)"
    assert pooled_text(pd.Series({"runs": 1, "copies": 0})) == ""
    assert pooled_text(pd.Series({"runs": 4, "copies": 8})) == ", 4 distinct audits pooled (8 copies counted once)"
    assert pooled_text(pd.Series({"runs": 3, "copies": 0})) == ", 3 distinct audits pooled"
    assert pooled_text(pd.Series({"runs": 3})) == ", 3 runs pooled"


def test_claim_summary_keeps_the_natural_verdict_beside_the_worst_case_one():
    base = dict(claimed_epsilon=1.0, claimed_delta=0.0, claimed_scope="message", audited_scope="message",
                confidence=0.95, runs=1, claim_basis="pooled error counts", n_trials=2000, attack="x")
    pooled = pd.DataFrame([dict(base, defense="d", neighbours="worst-case", fp=0, fn=0, n0=1000, n1=1000),
                           dict(base, defense="d", neighbours="natural", fp=100, fn=800, n0=1000, n1=1000)])
    row = claim_summary(pooled, ["defense"]).iloc[0]
    assert row["claim_neighbours"] == "worst-case" and row["claim_verdict"] == "violated"
    assert row["claim_verdict_natural"] == "consistent"
    fpr_u = stats.beta.ppf(0.975, 101, 900)
    fnr_u = stats.beta.ppf(0.975, 801, 200)
    assert row["epsilon_lb_natural"] == pytest.approx(_eps(fpr_u, fnr_u, 0.0), abs=1e-9)
