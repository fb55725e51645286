"""Integrity beside privacy: utility under poisoning per defense, and the frontier of privacy,
robustness and utility (docs/concepts/robustness.md).

A run with a poisoning attack writes a ``utility`` row with a ``poison`` column (its canonical text,
e.g. ``lie(fraction=0.2)``) and no privacy tables; the privacy of the same defense comes from the run
without it. ``clean_utility`` keeps the rows without poisoning for every privacy-utility comparison,
so attacked rankers never enter it. The frontier row of a defense: its nDCG@10 without attack, under
the strongest attack at the reference fraction (the attack and fraction that lower its own nDCG@10
most), the share of the plain mean's loss it keeps away under the attack strongest against the mean,
its clean cost against the plain mean, and its leakage and claim verdicts.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from reports.stats import mean_ci

CONTEXT = ("data", "algo", "setting")
NONE = "none"
_FRACTION = re.compile(r"fraction=([0-9.eE+-]+)")


def clean_utility(utility: pd.DataFrame | None) -> pd.DataFrame | None:
    """The utility rows of runs without poisoning (all rows when no run had any)."""
    if utility is None or "poison" not in utility.columns:
        return utility
    return utility[utility["poison"].isna()]


def attack_of(poison: str) -> tuple[str, float]:
    """``("lie", 0.2)`` of ``"lie(fraction=0.2)"``; ``("none", 0.0)`` for no poisoning."""
    if not isinstance(poison, str) or poison == NONE:
        return NONE, 0.0
    found = _FRACTION.search(poison)
    return poison.split("(")[0], float(found.group(1)) if found else math.nan


def utility_by_attack(utility: pd.DataFrame | None, confidence: float = 0.95) -> pd.DataFrame:
    """Mean offline nDCG@10 and its t interval over runs, per context, defense and poisoning (``none``
    for the clean runs): columns ``ndcg10``, ``ndcg10_ci_low``, ``ndcg10_ci_high``, ``n``, ``attack``,
    ``fraction``. Empty when no run was poisoned."""
    if utility is None or utility.empty or "poison" not in utility.columns:
        return pd.DataFrame()
    frame = utility.assign(poison=utility["poison"].fillna(NONE))
    keys = [k for k in CONTEXT if k in frame.columns] + ["defense", "poison"]
    rows = []
    for group, runs in frame.groupby(keys, sort=False, dropna=False):
        mean, low, high, n = mean_ci(runs["ndcg10"], confidence)
        attack, fraction = attack_of(group[-1])
        rows.append({**dict(zip(keys, group)), "attack": attack, "fraction": fraction, "ndcg10": mean,
                     "ndcg10_ci_low": low, "ndcg10_ci_high": high, "n": n})
    return pd.DataFrame(rows)


def reference_fraction(table: pd.DataFrame) -> float:
    """The fraction the frontier compares defenses at: 0.2 when the runs have it, else the largest."""
    fractions = sorted(set(table.loc[table["attack"] != NONE, "fraction"].dropna()))
    return 0.2 if 0.2 in fractions else (fractions[-1] if fractions else math.nan)


def _defense_row(own: pd.DataFrame, mean_runs: pd.DataFrame, fraction: float) -> dict:
    """One defense's frontier numbers from its rows ``own`` and the plain mean's ``mean_runs``."""
    clean = own[own["attack"] == NONE]
    attacked = own[(own["attack"] != NONE) & (own["fraction"] == fraction)]
    row = {}
    for name, frame in (("clean", clean), ("attacked", attacked)):
        if len(frame):
            pick = frame.loc[frame["ndcg10"].idxmin()]  # the clean row is one; under attack the worst
            row.update({f"{name}_ndcg10": float(pick["ndcg10"]), f"{name}_ndcg10_ci_low": float(pick["ndcg10_ci_low"]),
                        f"{name}_ndcg10_ci_high": float(pick["ndcg10_ci_high"])})
            if name == "attacked":
                row["strongest_attack"] = pick["poison"]
    row.setdefault("clean_ndcg10", math.nan)
    base_clean = mean_runs.loc[mean_runs["attack"] == NONE, "ndcg10"]
    base_attacked = mean_runs[(mean_runs["attack"] != NONE) & (mean_runs["fraction"] == fraction)]
    if len(base_clean) and len(base_attacked):
        against = base_attacked.loc[base_attacked["ndcg10"].idxmin()]
        loss = float(base_clean.iloc[0]) - float(against["ndcg10"])
        mine = own.loc[own["poison"] == against["poison"], "ndcg10"]
        row.update(mean_strongest=against["poison"], mean_loss=loss,
                   clean_cost=float(base_clean.iloc[0]) - row["clean_ndcg10"],
                   loss_kept_away=(float(mine.iloc[0]) - float(against["ndcg10"])) / loss if len(mine) and loss > 0
                   else math.nan)
    return row


def defense_rows(tables: dict[str, pd.DataFrame], confidence: float = 0.95) -> pd.DataFrame:
    """One row per context and defense (module docstring), without verdicts; empty without utility
    under attack."""
    table = utility_by_attack(tables.get("utility"), confidence)
    if table.empty:
        return table
    fraction = reference_fraction(table)
    keys = [k for k in CONTEXT if k in table.columns]
    rows = []
    for group, frame in table.groupby(keys, sort=False, dropna=False) if keys else [((), table)]:
        mean_runs = frame[frame["defense"] == NONE]
        for defense, own in frame.groupby("defense", sort=False):
            rows.append({**dict(zip(keys, group if isinstance(group, tuple) else (group,))), "defense": defense,
                         "fraction": fraction, **_defense_row(own, mean_runs, fraction)})
    return pd.DataFrame(rows)


def frontier_rows(tables: dict[str, pd.DataFrame], verdicts: pd.DataFrame | None = None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """``defense_rows`` with the defense's leakage verdict, its strongest privacy attack's leakage and
    its claim verdict where the verdicts have them (``with_verdicts``)."""
    rows = defense_rows(tables, confidence)
    return rows if rows.empty else with_verdicts(rows, verdicts)


def with_verdicts(out: pd.DataFrame, verdicts: pd.DataFrame | None) -> pd.DataFrame:
    """The leakage of the strongest privacy attack, the leakage and the claim verdicts of each defense
    of ``defense_rows`` (the worst over click models and threat models: ``leaks`` over anything else,
    ``violated`` likewise)."""
    cols = ("leakage", "leakage_verdict", "claim_verdict")
    if verdicts is None or verdicts.empty or "defense" not in verdicts.columns:
        return out.assign(**{c: np.nan for c in cols})
    on = [k for k in CONTEXT if k in out.columns and k in verdicts.columns] + ["defense"]
    rank = {"leaks": 0, "inconclusive": 1, "no measurable leakage": 2, "violated": 0, "consistent": 1,
            "untestable": 2, "outside scope": 3, "no claim": 4}
    rows = []
    for group, frame in verdicts.groupby(on, sort=False, dropna=False):
        worst = {c: min(frame[c].dropna(), key=lambda v: rank.get(v, 9), default=np.nan)
                 for c in ("leakage_verdict", "claim_verdict") if c in frame.columns}
        rows.append({**dict(zip(on, group)), "leakage": float(frame["leakage"].max()) if "leakage" in frame else np.nan,
                     **worst})
    return out.merge(pd.DataFrame(rows), on=on, how="left")


def _ci_text(mean: float, low: float, high: float) -> str:
    return f"{mean:.3f}" if pd.isna(low) else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def utility_grid(table: pd.DataFrame) -> pd.DataFrame:
    """``utility_by_attack`` as text, one row per context and poisoning (clean first, then by attack and
    fraction), one column per defense (in the runs' order): ``mean [low, high]``."""
    if table.empty:
        return table
    keys = [k for k in CONTEXT if k in table.columns and table[k].nunique(dropna=False) > 1]
    cells = table.assign(cell=[_ci_text(m, lo, hi) for m, lo, hi in
                               zip(table["ndcg10"], table["ndcg10_ci_low"], table["ndcg10_ci_high"])],
                         order=[(a != NONE, a, f) for a, f in zip(table["attack"], table["fraction"])])
    cells = cells.sort_values("order", kind="stable")
    wide = cells.pivot_table(index=keys + ["poison"], columns="defense", values="cell", aggfunc="first", sort=False)
    return wide[list(dict.fromkeys(table["defense"]))].reset_index().rename_axis(columns=None)
