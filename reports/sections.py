"""The report's sections after the summary, in reading order: each a builder from the computed
results to a template-ready dict (or None when the results hold nothing for it). The plot
registry (:data:`reports.plots.PLOTS`) keeps each plot's caption beside its plot; this registry
does the same for tables and lists. A section may carry a CSV download (name and text).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reports.compare import CLAIM_CONTEXT, as_references, with_ci
from reports.claims import pooled_audits
from reports.robustness import frontier_rows, utility_by_attack, utility_grid
from reports.summary import verdict_sentences
from reports.sweeps import swept_in
from reports.unlearning import NOTE as UNLEARNING_NOTE, unlearning_table
from reports.tables import (HEADERS, audit_table, claims_headers, claims_table, epsilon_section,
                            leakage_pivot, ordered, runs_summary, strongest_per_metric, strongest_wide,
                            table_section)

COMPARE_COLUMNS = ("defense", "data", "algo", "setting", "click_model", "threat_model", "attack", "n",
                   "auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage",
                   "tpr_at_fpr_0_01", "n_lists", "leakage_verdict", "f1", "ndcg10", "ndcg10_delta")


@dataclass(frozen=True)
class Results:
    """What every section reads: the store's tables, the comparison and the verdicts."""

    tables: dict[str, pd.DataFrame]
    table: pd.DataFrame  # reports.compare.compare rows, ordered
    verdicts: pd.DataFrame  # reports.compare.verdicts rows


def _csv(name: str, df: pd.DataFrame) -> dict:
    return {"name": name, "text": df.to_csv(index=False)}


def leakage_section(r: Results) -> dict | None:
    return leakage_pivot(r.table) if not r.table.empty else None


def comparison_section(r: Results) -> dict | None:
    if r.table.empty:
        return None
    shown = as_references(r.table)[[c for c in COMPARE_COLUMNS if c in r.table.columns]
                    + [f"{m}_ci_{e}" for m in ("leakage", "leakage_normalized", "f1", "ndcg10_delta")
                       for e in ("low", "high") if f"{m}_ci_{e}" in r.table.columns]]
    return table_section("Privacy-utility comparison", shown,
                         "Mean [95 % CI]: AUC of each attack against the real and the counterfactual "
                         "clicks, their difference (leakage, per list) and normalized leakage "
                         "(leakage / (1 - counterfactual AUC)); advantage (TPR - FPR at the attack's own "
                         "decisions) and TPR at 1 % FPR, means over runs; F1 for reference only (it "
                         "moves with the guess rate). compare.csv has every column, including the "
                         "tests and the claim verdicts.",
                         group=("defense", "click_model"), download=_csv("compare.csv", r.table))


def verdict_section(r: Results) -> dict | None:
    if r.verdicts.empty:
        return None
    return {"kind": "list", "title": "Verdict details", "items": verdict_sentences(r.verdicts),
            "collapsed": len(r.verdicts) > 6, "download": _csv("verdicts.csv", r.verdicts),
            "note": "One sentence per defense and context: the leakage verdict with its test, and the "
                    "claim verdict with the pooled audit (see Methods)."}


def _claim_keys(audits: pd.DataFrame | None) -> list[str]:
    """What an audit row is pooled by: the defense, the claim context columns it has and every
    swept axis (pooled over seeds and folds only)."""
    if audits is None:
        return ["defense"]
    return ["defense"] + [k for k in CLAIM_CONTEXT if k in audits.columns] + swept_in(audits)


def audit_section(r: Results) -> dict | None:
    audits = r.tables.get("audits")
    keys = _claim_keys(audits)
    pooled = pooled_audits(audits, keys)
    if pooled.empty:
        return None
    return table_section("Epsilon audits", ordered(audit_table(pooled), ("defense",)),
                         "Claimed epsilon and its scope next to the audited lower bound, pooled over runs "
                         "(summed error counts; never the largest per-run bound). A bound followed by "
                         "'limit of N trials' rests on zero errors: more trials would raise it, so it is "
                         "not a measurement of the mechanism. inf: no finite claim or estimate.")


def claims_section(r: Results) -> dict | None:
    audits = r.tables.get("audits")
    keys = _claim_keys(audits)
    frame = claims_table(audits, keys)
    if frame.empty:
        return None
    section = table_section("Epsilon claims over the run and audited bounds by neighbours", frame,
                            "Per defense: the claimed ε of one round and the claim composed over the "
                            "training run (ε at δ, for the rounds a client takes part in), next to the "
                            "audited lower bound for worst-case and natural neighbours, each pooled over runs "
                            "(summed error counts, Bonferroni over the audits of a kind). Tightness: bound / "
                            "claim per round. Trial ceiling: the largest bound the trial count can show; a bound "
                            "printed with 'limit of N trials' sits at it and is not a measurement.")
    headers = {**HEADERS, **claims_headers(frame.columns)}
    inverse = {HEADERS.get(c, c): headers.get(c, c) for c in frame.columns}
    return {**section, "columns": [inverse.get(c, c) for c in section["columns"]],
            "constants": [(inverse.get(k, k), v) for k, v in section["constants"]]}


def strongest_section(r: Results) -> dict | None:
    frame = strongest_per_metric(r.table)
    if frame.empty:
        return None
    wide = strongest_wide(frame)
    keys = [c for c in wide.columns if c in ("defense", "data", "algo", "setting", "threat_model", "click_model")]
    return table_section("Strongest attack per metric", ordered(wide, keys),
                         "For each defense and metric, the informed attack with the largest mean over runs "
                         "and that mean: no single attack is strongest on every metric. Bayes posterior: "
                         "the best of the Bayes attacks (bayes, bayes-uniform, -approx where they search), "
                         "where they ran -- the AUC ceiling of passive attacks under the click and noise "
                         "model they assume, not a ceiling on leakage (the click-model prior also predicts "
                         "the counterfactual clicks); best reference: the strongest attack that does not "
                         "read the message, for context.", keep=tuple(wide.columns), group=("defense",))


def epsilon_table_section(r: Results) -> dict | None:
    return epsilon_section(r.tables.get("epsilon"))


WHOLE_RUN_COLUMNS = {"algorithm": "algorithm", "defense": "defense", "scope": "canaries' scope",
                     "rounds": "rounds", "canaries": "canaries", "epsilon_lb": "one-run lower bound (95 %)",
                     "epsilon_estimate": "one-run estimate", "estimate_interval": "estimate interval",
                     "epsilon_lb_multi": "multi-run lower bound", "runs": "runs",
                     "mu_lb": "f-DP one-run lower bound μ (95 %)", "mu_claimed": "claim as μ-GDP",
                     "epsilon_lb_fdp": "f-DP one-run lower bound ε (95 %)",
                     "epsilon_accounted_canaries": "accounted ε (canaries, vs the server)",
                     "epsilon_server": "accounted ε (worst user, vs the server)",
                     "epsilon_observer": "accounted ε (vs an observer)", "claim_verdict": "claim verdict over the run"}


def whole_run_section(r: Results) -> dict | None:
    """``fltr-audit audit-run`` rows: the audited and the accounted epsilon over a whole run."""
    rows = r.tables.get("run_audits")
    if rows is None or rows.empty:
        return None
    frame = rows.assign(
        epsilon_lb=[f"{v:.3g}" + (" (canary-count limit)" if lim else "") for v, lim
                    in zip(rows["epsilon_lb"], rows["limited_by_canaries"].astype(bool))],
        estimate_interval=[f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(rows["estimate_low"], rows["estimate_high"])])
    if {"mu_lb", "mu_limit", "mu_claimed"} <= set(rows.columns):  # rows stored before the f-DP bound lack them
        frame = frame.assign(
            mu_lb=[f"{v:.3g}" + (" (canary-count limit)" if g and v >= lim - 1e-9 else "") for v, lim, g
                   in zip(rows["mu_lb"], rows["mu_limit"], rows["fdp_guesses"])],
            mu_claimed=[f"{v:.3g}" if v == v else "n/a (not Gaussian)" for v in rows["mu_claimed"].astype(float)])
    frame = frame[[c for c in WHOLE_RUN_COLUMNS if c in frame.columns]].rename(columns=WHOLE_RUN_COLUMNS)
    return table_section("Privacy over the whole run", frame,
                         "Canaries ride along a whole training run (canary clients for aggregate scope, canary "
                         "users for message scope). One-run lower bound: Steinke, Nasr, Jagielski 2023, sound "
                         "at 95 % ('canary-count limit': the canaries could not show more). One-run estimate: "
                         "Andrew et al. 2024, an estimate with a bootstrap interval, not a bound. Multi-run: one "
                         "canary per independent run, Clopper-Pearson. Accounted ε against the server charges "
                         "realized participations without amplification; against an observer of the released "
                         "models it is sampling-amplified. f-DP one-run lower bounds: Mahloujifar, Melis, "
                         "Chaudhuri 2025, sound at 95 %, over the canaries of the most frequent participation "
                         "count, against the Gaussian curve (μ) and the (ε, δ) curve. Verdict: for a Gaussian "
                         "claim, violated when the f-DP bound μ exceeds the claim as μ-GDP over those "
                         "participations; otherwise violated when the Steinke bound exceeds the ε accounted for "
                         "the canaries; untestable when the claim is at or above the canary-count limit.",
                         keep=tuple(frame.columns))


def unlearning_section(r: Results) -> dict | None:
    """``fltr-audit audit-unlearning`` rows: one per method (``reports.unlearning``)."""
    rows = r.tables.get("unlearning_audits")
    if rows is None or rows.empty:
        return None
    frame = unlearning_table(rows)
    return table_section("Unlearning", frame, UNLEARNING_NOTE, keep=tuple(frame.columns),
                         download=_csv("unlearning.csv", rows))


def poisoning_section(r: Results) -> dict | None:
    grid = utility_grid(utility_by_attack(r.tables.get("utility")))
    if grid.empty:
        return None
    return table_section("Utility under poisoning", grid,
                         "Offline nDCG@10 of the trained ranker, mean [95 % t interval] over runs, per poisoning "
                         "attack and fraction of malicious clients per cohort (rows; none: no attack) and defense "
                         "(columns; none: the plain mean). Integrity only: these rankers never enter the privacy "
                         "tables, whose rankers are trained without attack.", keep=tuple(grid.columns))


def robustness_section(r: Results) -> dict | None:
    frame = frontier_rows(r.tables, r.verdicts)
    if frame.empty:
        return None
    text = with_ci(frame)
    shown = text[[c for c in ROBUSTNESS_COLUMNS if c in text.columns]].rename(columns=ROBUSTNESS_COLUMNS)
    return table_section("Privacy, robustness and utility per defense", shown,
                         "Per defense: nDCG@10 without attack and its cost against the plain mean; under the "
                         "attack that lowers its own nDCG@10 most at the reference fraction; the share of the "
                         "plain mean's loss it keeps away under the attack strongest against the mean; the "
                         "leakage of its strongest privacy attack (AUC real - counterfactual) with the leakage "
                         "verdict, and the claim verdict (worst over click and threat models).",
                         keep=tuple(shown.columns), download=_csv("robustness.csv", frame))


ROBUSTNESS_COLUMNS = {"algo": "algorithm", "defense": "defense", "clean_ndcg10": "nDCG@10, no attack",
                      "clean_cost": "clean cost vs none", "fraction": "fraction", "strongest_attack": "its strongest attack",
                      "attacked_ndcg10": "nDCG@10 under it",
                      "mean_strongest": "strongest against the mean", "loss_kept_away": "share of the mean's loss kept away",
                      "leakage": "leakage (AUC)", "leakage_verdict": "leakage verdict", "claim_verdict": "claim verdict"}


def runs_sections(r: Results) -> list[dict]:
    counts, failed = runs_summary(r.tables.get("runs", pd.DataFrame()))
    return [table_section(title, frame, keep=tuple(frame.columns))
            for title, frame in (("Runs", counts), ("Failed runs", failed)) if not frame.empty]


SECTIONS = (leakage_section, comparison_section, strongest_section, verdict_section, audit_section, claims_section,
            whole_run_section, unlearning_section, epsilon_table_section, robustness_section, poisoning_section,
            runs_sections)
