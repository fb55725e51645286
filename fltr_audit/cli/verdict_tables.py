"""Console tables of the two verdicts (``demo`` and ``audit``), narrow enough for 100 columns."""

from __future__ import annotations

import math

import pandas as pd

from fltr_audit.cli.common import print_table
from reports.claims import bound_text
from reports.summary import CLAIM_ORDER, LEAKAGE_ORDER

WIDTH = 100


def _ci(r) -> str:
    if pd.isna(r.get("leakage")):
        return "n/a"
    if pd.isna(r.get("leakage_ci_low")):
        return f"{r['leakage']:+.3f}"
    return f"{r['leakage']:+.3f} [{r['leakage_ci_low']:+.3f}, {r['leakage_ci_high']:+.3f}]"


def leakage_rows(v: pd.DataFrame) -> list[dict]:
    """Per defense, threat model and click model: the strongest informed attack's leakage and
    the leakage verdict."""
    rows = []
    for _, r in v.iterrows():
        rows.append({"defense": str(r["defense"]), "clicks": str(r.get("click_model", "")),
                     "strongest attack": str(r["strongest_attack"] or "n/a"),
                     "leakage [95 % CI]": _ci(r), "leakage verdict": str(r["leakage_verdict"])})
    return rows


def _worst(values, order) -> str:
    present = [x for x in order if x in set(values)]
    return present[0] if present else "n/a"


def claim_rows(v: pd.DataFrame) -> list[dict]:
    """Per defense: the worst leakage verdict over click models and threat models, the claim
    verdict, claimed and audited epsilon (pooled over runs; trial limits named), nDCG@10 cost."""
    rows = []
    for defense, sel in v.groupby("defense", sort=False):
        r = sel.iloc[0]
        claimed = r.get("claimed_epsilon")
        audited = (bound_text(r["epsilon_lb"], r["trial_limited"], r["n_trials"]).replace("ε ", "")
                   if pd.notna(r.get("epsilon_lb")) else "not audited")
        delta = sel["ndcg10_delta"].dropna()
        rows.append({"defense": str(defense), "leakage verdict": _worst(sel["leakage_verdict"], LEAKAGE_ORDER),
                     "claim verdict": _worst(sel.get("claim_verdict", pd.Series(dtype=object)).dropna(), CLAIM_ORDER),
                     "claimed ε": "none" if claimed is None or pd.isna(claimed) or math.isinf(claimed)
                     else f"{claimed:.2f} ({r['claimed_scope']})",
                     "audited ε": audited,
                     "ΔnDCG@10": f"{delta.mean():+.3f}" if len(delta) else "n/a"})
    return rows


def print_verdicts(v: pd.DataFrame, min_effect: float) -> None:
    """Both verdict tables on stdout."""
    if v.empty:
        return
    print_table("Leakage: strongest informed attack, AUC real - counterfactual (95 % CI)",
                leakage_rows(v), min_width=WIDTH)
    print_table(f"Verdicts per defense (no measurable leakage: every upper bound < {min_effect:g} AUC; "
                "ε pooled over runs)", claim_rows(v), min_width=WIDTH)
