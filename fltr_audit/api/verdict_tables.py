"""Console tables of the two verdicts (``demo``, ``audit`` and ``AuditResult.summary``), at most 100 columns wide: long
defense stacks break at their ``+`` joints, long cells over two lines."""

from __future__ import annotations

import math
import re
import textwrap
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from fltr_audit.spec.defense import DefenseSpec
from reports.claims import bound_text

WIDTH = 100
NAME_WIDTH = 18


def wrap_name(name: str, width: int = NAME_WIDTH) -> str:
    """A defense stack over lines of at most ``width`` characters, broken before its ``+`` joints
    and parameter lists ``(...)`` (a single longer piece keeps its own line)."""
    lines = [""]
    for piece in re.split(r"(?=[+(])", str(name)):
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


def print_rows(title: str, rows: list[dict], right: tuple[str, ...] = (), whole: tuple[str, ...] = ("defense",),
               console: Any = None) -> None:
    """``rows`` (dicts with the same keys) as a rich table on ``console`` (default: stdout),
    ``WIDTH`` columns at most; the ``whole`` columns keep their (pre-broken) lines, the others
    fold to fit."""

    table = Table(title=title, title_justify="left")
    for key in rows[0]:
        table.add_column(key, justify="right" if key in right else "left", overflow="fold", no_wrap=key in whole)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    (console or Console(width=WIDTH)).print(table)


def _ci(r) -> str:
    if pd.isna(r.get("leakage")):
        return "n/a"
    if pd.isna(r.get("leakage_ci_low")):
        return f"{r['leakage']:+.3f}"
    return f"{r['leakage']:+.3f}\n[{r['leakage_ci_low']:+.3f}, {r['leakage_ci_high']:+.3f}]"


def leakage_rows(v: pd.DataFrame) -> list[dict]:
    """Per defense, threat model and click model: the attack that decided the verdict
    (``reports.leakage.leakage_verdicts``), its leakage with the simultaneous interval, the lists
    scored, the effect it could have detected, and the verdict (the defense named on its first
    row only)."""
    rows, previous = [], None
    for _, r in v.iterrows():
        name = wrap_name(r["defense"]) if r["defense"] != previous else ""  # room for the verdict words
        previous = r["defense"]
        rows.append({"defense": name, "clicks": str(r.get("click_model", "")),
                     "attack": str(r["headline_attack"] or "n/a"),
                     "leakage [sim. CI]": _ci(r),
                     "lists\n±detect": ("n/a" if pd.isna(r.get("n_lists")) else f"{int(r['n_lists']):,}")
                     + ("" if pd.isna(r.get("detectable")) else f"\n±{r['detectable']:.3f}"),
                     "leakage verdict": str(r["leakage_verdict"])})
    return rows


def print_attacks(table: pd.DataFrame) -> None:
    """The attack table within 100 columns: AUC, counterfactual AUC, leakage, TPR at 1 % FPR and F1;
    each defense and click model named once."""

    def num(row, col, fmt):
        return format(row[col], fmt) if col in row and pd.notna(row[col]) else "n/a"

    if table.empty:
        Console(width=WIDTH).print("Attacks: no list was scored.")
        return
    rows, previous = [], (None, None)
    for _, r in table.iterrows():
        same_defense = r["defense"] == previous[0]
        rows.append({"defense": "" if same_defense else wrap_name(r["defense"]),
                     "clicks": "" if same_defense and r["click_model"] == previous[1] else r["click_model"],
                     "attack": f"{r['attack']}{' (ref.)' if bool(r.get('reference', False)) else ''}",
                     "AUC": num(r, "auc", ".3f"), "AUC cf.": num(r, "auc_counterfactual", ".3f"),
                     "leakage": num(r, "leakage", "+.3f"), "TPR@1%": num(r, "tpr_at_fpr_0_01", ".3f"),
                     "F1": num(r, "f1", ".3f")})
        previous = (r["defense"], r["click_model"])
    lists = table["n_queries"]
    count = f"{lists.min():,}" if lists.min() == lists.max() else f"{lists.min():,} to {lists.max():,}"
    print_rows(f"Attacks, means over runs ({count} lists per row); leakage = AUC real - counterfactual",
               rows, right=("AUC", "AUC cf.", "leakage", "TPR@1%", "F1"))


def stated_claim(defense: str) -> tuple[float, str]:
    """(epsilon, scope) the defense stack claims, read from the stack itself: shown even when no
    audit ran (``--no-epsilon-audit``)."""
    try:
        claim = DefenseSpec.parse(defense).claim
    except Exception:  # a stored name this installation cannot parse (e.g. a plug-in not installed)
        return math.nan, ""
    return claim.epsilon, claim.scope


def claim_rows(v: pd.DataFrame) -> list[dict]:
    """Per defense: the claim verdict and the neighbours it rests on (with tightness when
    consistent), the claimed epsilon and its scope (from the stack when no audit ran), the audited
    bound pooled over runs (trial limits named), the natural neighbours' verdict beside it, the
    nDCG@10 cost."""
    rows = []
    for defense, sel in v.groupby("defense", sort=False):
        r = sel.iloc[0]
        verdict = r.get("claim_verdict")
        natural = ""
        if verdict is None or pd.isna(verdict):
            verdict, audited = "no audit", "n/a"
        else:
            audited = bound_text(r["epsilon_lb"], r["trial_limited"], r["n_trials"]).replace(" (", "\n(")
            if verdict == "consistent" and pd.notna(r.get("tightness")):
                verdict += f"\n(lb/claim\n{r['tightness']:.2f})"
            if verdict == "untestable" and pd.notna(r.get("trials_needed")):
                verdict += f"\n(needs {int(r['trials_needed']):,} trials)"
            if isinstance(r.get("claim_neighbours"), str) and r["claim_neighbours"] != "audited":
                audited += f"\n({r['claim_neighbours']})"
            if isinstance(r.get("claim_verdict_natural"), str):
                natural = f"{r['claim_verdict_natural']}\n" + bound_text(
                    r.get("epsilon_lb_natural"), bool(r.get("trial_limited_natural")),
                    r.get("n_trials_natural") or 0).replace(" (", "\n(")
        claimed, scope = r.get("claimed_epsilon"), r.get("claimed_scope")
        if claimed is None or pd.isna(claimed):
            claimed, scope = stated_claim(str(defense))
        delta = sel["ndcg10_delta"].dropna()
        rows.append({"defense": wrap_name(defense), "claim verdict": verdict,
                     "claimed ε": "none" if pd.isna(claimed) or math.isinf(claimed)
                     else f"{claimed:.2f}\n" + textwrap.fill(f"({scope})", 13),
                     "audited, runs pooled": audited + (f"\nnatural: {natural}" if natural else ""),
                     "ΔnDCG@10": f"{delta.mean():+.3f}" if len(delta) else "n/a"})
    return rows


def print_verdicts(v: pd.DataFrame, min_effect: float, console: Any = None) -> None:
    """Both verdict tables on ``console`` (default: stdout)."""
    if v.empty:
        return
    print_rows("Leakage verdict per click model: the attack that decided it, AUC real - counterfactual "
               "(one-sided 95 % bounds simultaneous over the informed attacks); 'leaks': Holm-adjusted p < 0.05; "
               f"'no measurable leakage': every upper bound < {min_effect:g}; ±detect: the smallest leak the "
               "lists could tell from zero", leakage_rows(v), whole=("leakage [sim. CI]", "clicks", "leakage verdict"),
               console=console)
    print_rows("Claim verdict: claimed ε against the audited 95 % lower bound", claim_rows(v),
               right=("ΔnDCG@10",), whole=("defense", "ΔnDCG@10"),
               console=console)
