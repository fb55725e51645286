"""Leakage: how much better an attack guesses a user's real clicks than counterfactual clicks.

The engine scores every attack twice on every probed list: against the clicks the user made and
against K clicks redrawn from the same click model on the same shown list (the message the
attack read is unchanged). ``per_query`` rows carry the list's ``auc`` and ``auc_counterfactual``
(mean over the K draws), ``advantage`` and ``advantage_counterfactual``; ``attacks`` rows carry
the same per run (``leakage`` = mean over lists of AUC real - counterfactual).

:func:`leakage_table` turns them into, per group and attack, the paired difference
real - counterfactual (``leakage`` for AUC, ``advantage_leakage`` for advantage) with a 95 %
Student-t interval over lists pooled over seeds and folds, and a one-sided p-value of
"leakage > 0". Without per-list rows it falls back to the runs' ``leakage`` values (t interval
over runs); the ``basis`` column says which. An attack that ignores the message has zero
leakage in expectation whatever its guess rate or side knowledge, since the counterfactual
clicks are as predictable from that knowledge as the real ones.

:func:`leakage_verdicts` gives each group (a defense in one context) one ``leakage_verdict``:

* ``leaks``: a one-sided t-test of zero leakage rejects at ``alpha`` for at least one informed
  (non-reference) attack, Holm-corrected over the group's informed attacks;
* ``no measurable leakage``: every informed attack's upper bound, simultaneous over the group's
  informed attacks (Bonferroni, ``simultaneous_bounds``), is below ``min_effect``;
* ``inconclusive``: neither.

The leakage printed with a verdict is the attack that decided it (``headline_attack``) with its
simultaneous interval. A group is one click model: verdicts are read per click model, and a
family never spans click models. ``planned_lists`` gives the lists needed to reach either
decisive verdict at a minimum effect with a given power.

Reference attacks (``reference`` column: baselines that do not read the message) are reported
but never enter a verdict, so adding one cannot change it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from reports.stats import greater_than_zero_p, holm, mean_ci

MIN_EFFECT = 0.05  # AUC: the smallest leak worth calling "measurable" (audit_options.DEFAULT_MIN_EFFECT)
ALPHA = 0.05
MAX_PLANNED = 2.0**62
"""The largest number of lists ``planned_lists`` counts (beyond: a ValueError naming min_effect)."""
PLANNING_SD = 0.3
"""Per-list sd of AUC real - counterfactual assumed by ``planned_lists``: measured 0.13-0.29 on
the demo's synthetic MQ2008 over attacks, click models and defenses (seed 0)."""
PAIRS = {"leakage": ("auc", "auc_counterfactual"),
         "advantage_leakage": ("advantage", "advantage_counterfactual")}
RUN_MEANS = ("tpr_at_fpr_0_01", "tpr_at_fpr_0_001", "n_counterfactual")
LIST_JOIN = ("run_key", "click_model", "defense", "attack", "threat_model", "probe_cohort")
BASIS = {"list": "per list", "run": "per run", "single": "single run (no interval)", "none": "not measured"}


def is_reference(frame: pd.DataFrame) -> pd.Series:
    """The rows' ``reference`` flag (baselines that do not read the message); False where the
    table has no such column (results recorded before the flag existed)."""
    if "reference" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["reference"].fillna(False).astype(bool)


def _list_rows(per_query: pd.DataFrame | None, attacks: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """Per-list paired differences with the group keys of their run's attack row, or None when
    per-list scores are missing or cannot be told apart by the columns they share."""
    if per_query is None or per_query.empty or not {"auc", "auc_counterfactual"} <= set(per_query.columns):
        return None
    on = [c for c in LIST_JOIN if c in per_query.columns and c in attacks.columns]
    if "run_key" not in on or "attack" not in on:
        return None
    need = [c for c in [*keys, "attack"] if c not in per_query.columns]
    index = attacks[on + need].drop_duplicates()
    if index.duplicated(on).any():
        return None  # e.g. two threat models of one run that the per-list rows do not name
    rows = per_query.merge(index, on=on, how="inner")
    for name, (real, cf) in PAIRS.items():
        if {real, cf} <= set(rows.columns):
            rows[name] = rows[real].astype(np.float64) - rows[cf].astype(np.float64)
    return rows


def _interval(row: dict, name: str, values, confidence: float) -> None:
    mean, low, high, _ = mean_ci(values, confidence)
    row.update({name: mean, f"{name}_ci_low": low, f"{name}_ci_high": high})


def leakage_table(tables: dict[str, pd.DataFrame], keys: list[str], *, averaging: str = "macro",
                  confidence: float = 0.95) -> pd.DataFrame:
    """Leakage statistics per ``keys`` group and attack (see the module docstring).

    Returns
    -------
    DataFrame
        ``keys``, ``attack``, ``reference``; ``auc``, ``auc_counterfactual`` (means on the same
        basis as the leakage, so ``leakage = auc - auc_counterfactual``); ``leakage`` and
        ``advantage_leakage`` with ``_ci_low`` / ``_ci_high``; ``leakage_normalized`` =
        leakage / (1 - auc_counterfactual) (the interval scaled alike);
        ``advantage``, ``advantage_counterfactual``, ``tpr_at_fpr_0_01``,
        ``tpr_at_fpr_0_001`` (means over runs); ``p_leakage`` (one-sided, leakage > 0),
        ``n_lists`` (samples of the leakage: lists, or runs), ``basis``.
    """
    attacks = tables.get("attacks")
    if attacks is None or attacks.empty:
        return pd.DataFrame()
    if "averaging" in attacks.columns and (attacks["averaging"] == averaging).any():
        attacks = attacks[attacks["averaging"] == averaging]
    attacks = attacks.assign(reference=is_reference(attacks))
    lists = _list_rows(tables.get("per_query"), attacks, keys)
    by_list = dict(iter(lists.groupby([*keys, "attack"], sort=False, dropna=False))) if lists is not None else {}
    rows = []
    for group, runs in attacks.groupby([*keys, "attack"], sort=False, dropna=False):
        row = dict(zip([*keys, "attack"], group), reference=bool(runs["reference"].any()))
        sample = by_list.get(group)
        if sample is not None and {"auc", "auc_counterfactual"} <= set(sample):
            sample = sample[np.isfinite(sample["leakage"])]
        if sample is not None and len(sample) >= 2:
            basis, source, leak = BASIS["list"], sample, sample["leakage"]
            adv = sample["advantage_leakage"] if "advantage_leakage" in sample else pd.Series(dtype=float)
        else:
            source = runs
            leak = runs["leakage"] if "leakage" in runs else (
                runs["auc"] - runs["auc_counterfactual"] if {"auc", "auc_counterfactual"} <= set(runs) else
                pd.Series(np.nan, index=runs.index))
            adv = (runs["advantage"] - runs["advantage_counterfactual"]
                   if {"advantage", "advantage_counterfactual"} <= set(runs) else pd.Series(dtype=float))
            n = int(np.isfinite(leak.to_numpy(dtype=np.float64)).sum())
            basis = BASIS["none"] if n == 0 else BASIS["single"] if n == 1 else BASIS["run"]
        for col in ("auc", "auc_counterfactual"):
            row[col] = float(source[col].mean()) if col in source else math.nan
        _interval(row, "leakage", leak, confidence)
        _interval(row, "advantage_leakage", adv, confidence)
        room = 1.0 - row["auc_counterfactual"]
        for end in ("", "_ci_low", "_ci_high"):
            row[f"leakage_normalized{end}"] = row[f"leakage{end}"] / room if room > 0 else math.nan
        for col in ("advantage", "advantage_counterfactual", *RUN_MEANS):
            row[col] = float(runs[col].mean()) if col in runs else math.nan
        finite = np.asarray(leak, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        se = float(finite.std(ddof=1) / math.sqrt(finite.size)) if finite.size >= 2 else math.nan
        row.update(p_leakage=greater_than_zero_p(leak), n_lists=int(finite.size), basis=basis,
                   leakage_se=se, leakage_df=finite.size - 1)
        rows.append(row)
    return pd.DataFrame(rows)


def simultaneous_bounds(leakage, se, df, m: int, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Bonferroni-simultaneous one-sided bounds over a family of ``m`` attacks:
    ``leakage -+ t_{1 - alpha/m, df} se``. Each lower bound (and, separately, each upper bound)
    holds for all m attacks at once with probability >= 1 - alpha. The lower bound of an
    attack is > 0 exactly when its one-sided t-test p-value is < alpha / m (Holm's first step),
    so ``leaks`` (some Holm rejection) is never printed beside a deciding interval containing 0."""
    crit = stats.t.ppf(1.0 - alpha / max(int(m), 1), np.maximum(np.asarray(df, dtype=np.float64), 1.0))
    half = crit * np.asarray(se, dtype=np.float64)
    leakage = np.asarray(leakage, dtype=np.float64)
    return leakage - half, leakage + half


def planned_lists(min_effect: float, power: float, attacks: int, *, alpha: float = ALPHA,
                  sd: float = PLANNING_SD) -> int:
    """Lists to score per click model so that, at zero leakage, all ``m = attacks`` informed
    attacks' simultaneous upper bounds fall below ``min_effect`` together with probability at
    least ``power`` (normal approximation, per-list sd ``PLANNING_SD``, attacks taken as
    independent -- conservative, since attacks on one message are positively correlated):
    ``n = ((z_{1 - alpha/m} + z_{power^(1/m)}) sd / min_effect)^2``. The same n finds a leak of
    ``min_effect`` in one attack with probability at least ``power``."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power: must lie in (0, 1), got {power}")
    if not 0.0 < min_effect < 1.0:
        raise ValueError(f"min_effect: must lie in (0, 1), got {min_effect}")
    m = max(int(attacks), 1)
    z = stats.norm.ppf(1.0 - alpha / m) + stats.norm.ppf(power ** (1.0 / m))
    ratio = float(z) * sd / min_effect  # a tiny min_effect makes it huge (or inf): never squared past MAX_PLANNED
    if not (ratio <= math.sqrt(MAX_PLANNED)):
        raise ValueError(f"min_effect: {min_effect:g} at power {power:g} needs more than {MAX_PLANNED:.1e} lists "
                         "per click model; raise it")
    return int(math.ceil(ratio * ratio))


def leakage_verdicts(table: pd.DataFrame, keys: list[str], *, min_effect: float = MIN_EFFECT,
                     alpha: float = ALPHA) -> pd.DataFrame:
    """One leakage verdict per ``keys`` group of a :func:`leakage_table` (one family: its
    informed attacks, in one click model; no reading across click models).

    Returns
    -------
    DataFrame
        ``keys``; ``leakage_verdict``; ``headline_attack`` -- the attack that decided: the
        Holm-deciding attack (smallest p) when the group leaks, else the attack with the largest
        simultaneous upper bound (the one that keeps or allows "no measurable leakage") -- with
        its ``leakage`` and ``leakage_ci_low`` / ``leakage_ci_high`` (simultaneous over the
        family, ``simultaneous_bounds``), ``leakage_normalized``, ``auc``,
        ``auc_counterfactual``, ``n_lists`` and ``basis``; ``detectable`` (the headline's
        half-width: the smallest leak it could have told from zero); ``ci_kind``;
        ``strongest_attack`` (largest point estimate, for reference); ``decisive_attack`` and
        ``p_adjusted`` (Holm) of the most significant informed attack; ``missable`` (the largest
        simultaneous upper bound); ``n_informed``; ``reason`` (why, in words, when the verdict
        is inconclusive).
    """
    out = []
    if table.empty:
        return pd.DataFrame()
    for group, frame in table.groupby(keys, sort=False, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        informed = frame[~frame["reference"].astype(bool)].copy()
        m = len(informed)
        row = dict(zip(keys, group), n_informed=m, strongest_attack=None, decisive_attack=None, headline_attack=None,
                   p_adjusted=math.nan, missable=math.nan, detectable=math.nan, reason="",
                   ci_kind=f"simultaneous one-sided {1 - alpha:.0%} bounds (Bonferroni over {m} attacks)")
        if {"leakage_se", "leakage_df"} <= set(informed.columns):
            informed["leakage_ci_low"], informed["leakage_ci_high"] = simultaneous_bounds(
                informed["leakage"], informed["leakage_se"], informed["leakage_df"], m, alpha)
        measured = informed[np.isfinite(informed["leakage"].to_numpy(dtype=np.float64))]
        if not measured.empty:
            row["strongest_attack"] = measured.loc[measured["leakage"].idxmax(), "attack"]
        p = informed["p_leakage"].to_numpy(dtype=np.float64)
        tested = np.isfinite(p)
        reject = False
        decisive = None
        if tested.any():
            adjusted = holm(p[tested])
            j = int(np.argmin(p[tested]))  # the smallest raw p (Holm's first step); adjusted ties are common
            reject = bool(adjusted[j] < alpha)
            decisive = informed.index[tested][j]
            row.update(p_adjusted=float(adjusted[j]), decisive_attack=informed.loc[decisive, "attack"])
        highs = informed["leakage_ci_high"].to_numpy(dtype=np.float64)
        bounded = np.isfinite(highs).any()
        if len(highs) and np.isfinite(highs).all():
            row["missable"] = float(highs.max())
        headline = decisive if reject else (informed.index[int(np.nanargmax(highs))] if bounded else
                                            measured["leakage"].idxmax() if not measured.empty else None)
        if headline is not None:
            top = informed.loc[headline]
            row["headline_attack"] = top["attack"]
            for col in ("leakage", "leakage_ci_low", "leakage_ci_high", "leakage_normalized", "auc",
                        "auc_counterfactual", "n_lists", "basis"):
                row[col] = top[col]
            row["detectable"] = float(top["leakage_ci_high"] - top["leakage"])
            room = 1.0 - float(top["auc_counterfactual"])
            if room > 0:
                row["leakage_normalized_ci_low"] = top["leakage_ci_low"] / room
                row["leakage_normalized_ci_high"] = top["leakage_ci_high"] / room
        if reject:
            verdict = "leaks"
        elif np.isfinite(row["missable"]) and row["missable"] < min_effect:
            verdict = "no measurable leakage"
        else:
            verdict = "inconclusive"
            row["reason"] = ("no informed attack" if informed.empty else
                             "no counterfactual scores in the results" if measured.empty else
                             "no interval (one sample)" if not np.isfinite(highs).all() else
                             f"upper bound {row['missable']:.3f} not below the minimum effect {min_effect:g}")
        row["leakage_verdict"] = verdict
        out.append(row)
    return pd.DataFrame(out)


ROC_KEYS = ("run_key", "data", "algo", "setting", "fold", "seed", "threat_model", "click_model", "defense", "attack")


def roc_rows(attacks: pd.DataFrame | None) -> pd.DataFrame:
    """The stored per-run ROC curves (``attacks.roc.roc_points`` on the attack rows) as long
    rows: the row's keys, ``curve`` (``real`` or ``counterfactual``: mean over the K redrawn
    click vectors), ``fpr``, ``tpr``. Empty when no row carries a curve."""
    if attacks is None or attacks.empty or "roc_tpr" not in attacks.columns:
        return pd.DataFrame(columns=[*ROC_KEYS, "curve", "fpr", "tpr"])
    keys = [k for k in ROC_KEYS if k in attacks.columns]
    parts = []
    for _, r in attacks.iterrows():
        fpr = r.get("roc_fpr")
        if not isinstance(fpr, (list, tuple, np.ndarray)) or len(fpr) == 0:
            continue
        for curve, col in (("real", "roc_tpr"), ("counterfactual", "roc_tpr_counterfactual")):
            tpr = r.get(col)
            if isinstance(tpr, (list, tuple, np.ndarray)) and len(tpr) == len(fpr):
                parts.append(pd.DataFrame({**{k: r[k] for k in keys}, "curve": curve,
                                           "fpr": np.asarray(fpr, dtype=np.float64),
                                           "tpr": np.asarray(tpr, dtype=np.float64)}))
    if not parts:
        return pd.DataFrame(columns=[*keys, "curve", "fpr", "tpr"])
    return pd.concat(parts, ignore_index=True)
