"""Report additions for the epsilon audits and the attack frontier: the claim's trade-off
region, the claims-over-the-run table and the strongest attack per metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reports import plots
from fltr_audit.privacy.error_bounds import epsilon_of_rates
from reports.claims import dp_tradeoff, gdp_tradeoff
from reports.render import render_report
from reports.tables import claims_table, strongest_per_metric, strongest_wide
from synthetic_results import DP, run_audit_rows, synthetic_tables

FPR = np.linspace(0.0, 1.0, 101)


def test_eps_zero_and_mu_zero_allow_only_guessing():
    np.testing.assert_allclose(dp_tradeoff(FPR, 0.0), 1.0 - FPR, atol=1e-15)
    np.testing.assert_allclose(gdp_tradeoff(FPR, 0.0), 1.0 - FPR, atol=1e-12)
    np.testing.assert_allclose(dp_tradeoff(FPR, 0.0, 0.1), np.maximum(0.9 - FPR, 0.0), atol=1e-15)


def test_dp_tradeoff_hand_values():
    # eps = ln 2: max(0, 1 - 2 FPR, (1 - FPR) / 2)
    np.testing.assert_allclose(dp_tradeoff([0.1, 0.5, 0.9], np.log(2.0)), [0.8, 0.25, 0.05])
    # delta shifts both lines down: eps = ln 2, delta = 0.1, FPR = 0.1 -> max(0.7, 0.4)
    np.testing.assert_allclose(dp_tradeoff(0.1, np.log(2.0), 0.1), 0.7)


def test_boundary_point_gives_back_its_epsilon():
    """A test on the boundary of eps-DP is exactly as strong as eps (claims.epsilon_of_rates inverts it)."""
    for eps in (0.5, 1.0, 4.5):
        fpr = np.array([1e-4, 1e-3, 0.5 * np.exp(-eps)])
        np.testing.assert_allclose(epsilon_of_rates(fpr, dp_tradeoff(fpr, eps), 0.0)[0], eps, rtol=1e-9)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.5])
def test_laplace_mechanism_at_its_claim_lies_on_or_above_the_boundary(eps):
    """Threshold tests of Lap(0, 1/eps) against Lap(1, 1/eps) (sensitivity 1) never cross the
    eps-DP boundary and touch it (t = 1: FPR = e^-eps / 2, FNR = 1/2)."""
    t = np.linspace(-5.0, 6.0, 2201)
    fpr = stats.laplace.sf(t, loc=0.0, scale=1.0 / eps)
    fnr = stats.laplace.cdf(t, loc=1.0, scale=1.0 / eps)
    gap = fnr - dp_tradeoff(fpr, eps)
    assert gap.min() >= -1e-12
    assert gap.min() < 1e-9
    assert (fnr < dp_tradeoff(fpr, 0.95 * eps) - 1e-6).any()  # a smaller claim is violated


def test_gaussian_mechanism_traces_the_mu_gdp_curve():
    """Threshold tests of N(0, sigma) against N(1, sigma) by Monte Carlo lie on mu = 1 / sigma."""
    rng = np.random.default_rng(7)
    sigma, n = 0.8, 200_000
    x0, x1 = rng.normal(0.0, sigma, n), rng.normal(1.0, sigma, n)
    for t in (0.2, 0.5, 0.9):
        fpr, fnr = (x0 > t).mean(), (x1 <= t).mean()
        assert abs(fnr - gdp_tradeoff(fpr, 1.0 / sigma)) < 4 * np.sqrt(fnr * (1 - fnr) / n) + 0.003


def _frame() -> pd.DataFrame:
    rows = [  # attack, reference, auc, tpr, leakage, advantage, f1
        ("olsr", False, 0.90, 0.20, 0.30, 0.40, 0.50),
        ("score", False, 0.80, 0.35, 0.25, 0.45, 0.55),
        ("bayes", False, 0.95, 0.60, 0.10, 0.50, 0.45),
        ("bayes-uniform", False, 0.85, 0.30, 0.35, 0.20, 0.40),
        ("guess-all", True, 0.50, 0.01, 0.00, 0.00, 0.90),
    ]
    frame = pd.DataFrame(rows, columns=["attack", "reference", "auc", "tpr_at_fpr_0_01", "leakage",
                                        "advantage", "f1"])
    return pd.concat([frame.assign(defense="none", click_model="perfect"),
                      frame.assign(defense="dp", click_model="perfect", auc=frame["auc"][::-1].to_numpy())],
                     ignore_index=True)


def test_strongest_attack_per_metric_lets_every_informed_attack_compete():
    out = strongest_per_metric(_frame()).set_index(["defense", "metric"])
    assert list(out.columns) == ["strongest", "value", "bayes", "reference"]
    none = out.loc["none"]
    assert none.loc["AUC", "strongest"] == "bayes" and none.loc["AUC", "value"] == "0.950"
    assert none.loc["TPR at FPR 1 %", "strongest"] == "bayes"
    assert none.loc["leakage (AUC)", "strongest"] == "bayes-uniform"   # the AUC ceiling is no leakage ceiling
    assert none.loc["F1", "strongest"] == "score"  # the reference's 0.90 does not count
    assert none.loc["F1", "reference"] == "guess-all 0.900"
    # the Bayes column: the best of the Bayes attacks on each metric
    assert none.loc["AUC", "bayes"] == "0.950" and none.loc["leakage (AUC)", "bayes"] == "0.350"
    # AUCs reversed under dp: the pick follows the numbers, not the attack's name
    dp = _frame().query("defense == 'dp'")
    informed = dp[~dp["reference"]]
    assert out.loc[("dp", "AUC"), "strongest"] == informed.loc[informed["auc"].idxmax(), "attack"]
    assert "click_model" not in out.reset_index().columns  # one click model: not a key


def test_strongest_attack_wide_has_one_row_per_defense():
    wide = strongest_wide(strongest_per_metric(_frame())).set_index("defense")
    assert list(wide.columns[:5]) == ["AUC", "TPR at FPR 1 %", "leakage (AUC)", "advantage", "F1"]
    assert wide.loc["none", "AUC"] == "bayes 0.950" and wide.loc["none", "F1"] == "score 0.550"
    assert wide.loc["none", "Bayes posterior (metrics in column order)"] == "0.950 / 0.600 / 0.350 / 0.500 / 0.450"
    assert wide.loc["none", "best reference (metrics in column order)"].startswith("guess-all: 0.500 / 0.010")


def test_strongest_attack_without_bayes_has_no_bayes_column():
    frame = _frame().query("attack not in ('bayes', 'bayes-uniform')")
    assert "bayes" not in strongest_per_metric(frame).columns
    frame = frame.assign(attack=frame["attack"].replace({"olsr": "bayes-approx"}))
    out = strongest_per_metric(frame).set_index(["defense", "metric"])
    assert out.loc[("none", "AUC"), "bayes"] == "0.900" and out.loc[("none", "AUC"), "strongest"] == "bayes-approx"


def _audits_with_worst_case() -> pd.DataFrame:
    audits = synthetic_tables()["audits"]
    worst = audits.assign(neighbours="worst-case", fp=0, fn=0, fpr=0.0, fnr=0.0)
    both = pd.concat([audits, worst], ignore_index=True)
    return both.assign(epsilon_server=np.where(both["defense"] == DP, 19.2, np.inf), delta_total=1e-5,
                       participations_max=20, epsilon_observer=np.where(both["defense"] == DP, 3.1, np.inf))


def test_claims_table_sets_neighbours_side_by_side():
    out = claims_table(_audits_with_worst_case(), ["defense"]).set_index("defense")
    dp = out.loc[DP]
    assert dp["claimed_epsilon"] == "4.50" and dp["epsilon_server"] == "19.20" and dp["epsilon_observer"] == "3.10"
    assert dp["delta_total"] == "1e-05" and dp["participations_max"] == "20"
    assert "limit of 12,000 trials" in dp["lb_worst-case"] and dp["lb_worst-case"].startswith("ε ≥ ")
    assert "limit" not in dp["lb_natural"]  # the natural audit erred: a measurement
    assert dp["ceiling_worst-case"].endswith("(12,000 trials)")
    # zero errors: the worst-case bound is the ceiling, above the claim (a trial-limited violation)
    ceiling = float(dp["ceiling_worst-case"].split()[0])
    assert dp["tightness_worst-case"] == f"{ceiling / 4.5:.2f}" and dp["claim_verdict"] == "violated"
    assert float(dp["tightness_natural"]) < 1.0
    assert out.loc["none", "epsilon_server"] == "inf" and out.loc["none", "tightness_natural"] == ""


def _sections(html: str) -> list[str]:
    import re
    return re.findall(r"<h2>([^<]*)</h2>", html)


def test_report_shows_the_additions_when_the_columns_exist(monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {"audit_tradeoff": plots.PLOTS["audit_tradeoff"]})
    t = synthetic_tables()
    t["audits"] = _audits_with_worst_case()
    files = render_report(t)
    html = files["report.html"]
    assert files["plots/audit_tradeoff.png"].startswith(b"\x89PNG")
    assert "Epsilon audits against the claimed trade-off" in html
    names = _sections(html)
    assert "Strongest attack per metric" in names
    assert "Epsilon claims over the run and audited bounds by neighbours" in names
    assert "audited ε (worst-case)" in html and "audited ε (natural)" in html and "ε over the run" in html
    assert "Strongest attack per metric" in files["report.md"]
    strongest = html[html.index("<h2>Strongest attack per metric</h2>"):]
    strongest = strongest[:strongest.index("<h2>", 5)]
    assert "<th>TPR at FPR 1 %</th>" in strongest and "olsr 0." in strongest


def test_report_skips_the_additions_cleanly_without_their_columns(monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {"audit_tradeoff": plots.PLOTS["audit_tradeoff"]})
    t = synthetic_tables()
    files = render_report({**t, "audits": pd.DataFrame()})
    assert "plots/audit_tradeoff.png" not in files
    assert "Epsilon claims over the run and audited bounds by neighbours" not in _sections(files["report.html"])
    old = t["audits"].drop(columns=["fp", "fn", "n0", "n1", "neighbours"])  # older rows: rebuilt counts
    files = render_report({**t, "audits": old})
    assert "plots/audit_tradeoff.png" not in files
    html = files["report.html"]
    assert "Epsilon claims over the run and audited bounds by neighbours" in _sections(html)
    assert "ε over the run" not in html  # no epsilon_server column: nothing claimed over the run
    bare = t["attacks"].drop(columns=["auc", "tpr_at_fpr_0_01", "leakage", "advantage", "f1"])
    assert strongest_per_metric(bare) .empty


def test_audit_tradeoff_draws_gaussian_claims_and_skips_without_counts():
    audits = _audits_with_worst_case()
    audits = audits.assign(mu=np.where(audits["defense"] == DP, 1.5, None))  # stored NULLs come back as None
    assert plots.audit_tradeoff({"audits": audits}).startswith(b"\x89PNG")
    assert plots.audit_tradeoff({"audits": audits.drop(columns="fp")}) is None
    assert plots.audit_tradeoff({}) is None


def test_methods_explain_the_bayes_attacks_only_where_they_ran():
    from reports.methods import methods

    with_bayes = dict(methods({"attacks": _frame()}, None, 0.02))
    assert "not a ceiling on leakage" in with_bayes["Bayes attacks"]
    without = dict(methods({"attacks": _frame().query("~attack.str.startswith('bayes')")}, None, 0.02))
    assert "Bayes attacks" not in without


def test_report_shows_privacy_over_the_whole_run(monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {"whole_run": plots.PLOTS["whole_run"]})
    files = render_report({**synthetic_tables(), "run_audits": run_audit_rows()})
    assert files["plots/whole_run.png"].startswith(b"\x89PNG")
    html = files["report.html"]
    assert "Privacy over the whole run" in _sections(html)
    section = html[html.index("<h2>Privacy over the whole run</h2>"):]
    section = section[:section.index("<h2>", 5)] if "<h2>" in section[5:] else section
    assert "2.5 (canary-count limit)" in section and "untestable" in section and "[1, 3]" in section
    bare = render_report({k: v for k, v in synthetic_tables().items() if k != "run_audits"})
    assert "Privacy over the whole run" not in _sections(bare["report.html"])
    assert "plots/whole_run.png" not in bare
