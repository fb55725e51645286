"""The privacy-utility comparison of defenses, computed from result tables (DataFrames).

:func:`compare` gives, per defense (and data set, algorithm, setting, click model, threat
model) and attack: precision / recall / F1 as means over seeds and folds with 95 % Student-t
intervals and a Welch t-test of F1 against the same attack without defense (Bonferroni over
the table); the attack's AUC against the real and the counterfactual clicks and the leakage
between them with its interval (:mod:`reports.leakage`); the defense's ``leakage_verdict``
and its ``claim_verdict`` from the pooled epsilon audits (:mod:`reports.claims`); and the
ranker's nDCG@10 and its change against no defense. :func:`verdicts` gives one row per
defense and context with both verdicts and the numbers behind them.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd

from fltr_audit.base.means import nanmean
from reports.claims import HUGE, bound_text, claim_summary, claim_text, pooled_audits
from reports.leakage import ALPHA, MIN_EFFECT, leakage_table, leakage_verdicts
from reports.robustness import clean_utility
from reports.stats import adjust, mean_ci, welch_p
from reports.sweeps import with_sweeps

CONTEXT = ("data", "algo", "setting", "click_model", "threat_model")
CLAIM_CONTEXT = ("data", "algo", "setting")  # an epsilon claim is the defense's, whatever the click model
METRICS = ("precision", "recall", "f1")
BASELINE = "none"
FORMATS = ("table", "markdown", "csv", "json")
COMPACT = ("attack", "n", "auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage",
           "tpr_at_fpr_0_01", "n_lists", "leakage_verdict", "claim_verdict", "epsilon_lb", "f1",
           "ndcg10_delta")  # after the keys, what the text formats show (csv/json keep every column)
CLAIM_COLUMNS = ("claim_verdict", "claim_neighbours", "claimed_epsilon", "claimed_scope", "audited_scope",
                 "epsilon_lb", "trial_limited", "n_trials", "tightness", "audit_attack", "claim_verdict_natural",
                 "epsilon_lb_natural")
CLAIM_TEXT_COLUMNS = ("claim_verdict", "claim_neighbours", "claimed_scope", "audited_scope", "audit_attack",
                      "claim_verdict_natural")


def check_min_effect(value: float) -> float:
    """``value`` when it lies in (0, 1); else ValueError naming ``min_effect``."""
    if not (isinstance(value, (int, float)) and 0.0 < value < 1.0):
        raise ValueError(f"min_effect: must lie in (0, 1) (an AUC difference), got {value}")
    return float(value)


def _attack_rows(tables: dict[str, pd.DataFrame], averaging: str) -> pd.DataFrame:
    attacks = tables.get("attacks")
    if attacks is None or attacks.empty:
        return pd.DataFrame()
    if "averaging" in attacks.columns and (attacks["averaging"] == averaging).any():
        attacks = attacks[attacks["averaging"] == averaging]
    return attacks


def _keys(frame: pd.DataFrame, by) -> list[str]:
    return list(by) + [c for c in CONTEXT if c not in by and c in frame.columns]


def _baseline(samples: dict, keys: list[str], row: dict) -> np.ndarray | None:
    """F1 samples of the same attack and context under defense none; the threat model may differ
    (secure aggregation changes what the server sees, no defense is still the baseline)."""
    same = [i for i, k in enumerate([*keys, "attack"]) if k not in ("defense", "threat_model")]
    want = [row[k] for k in [*keys, "attack"]]
    defense = keys.index("defense")
    found = [s for g, s in samples.items() if g[defense] == BASELINE and all(g[i] == want[i] for i in same)]
    return np.concatenate(found) if found else None


def _f1_rows(attacks: pd.DataFrame, keys: list[str], confidence: float, alpha: float) -> pd.DataFrame:
    """Precision / recall / F1 means with intervals and the Welch test of F1 against defense none."""
    rows, samples = [], {}
    for group, frame in attacks.groupby([*keys, "attack"], sort=False, dropna=False):
        row = dict(zip([*keys, "attack"], group))
        for m in METRICS:
            mean, low, high, n = mean_ci(frame[m], confidence)
            row.update({m: mean, f"{m}_ci_low": low, f"{m}_ci_high": high})
        row["n"] = len(frame)
        samples[group] = frame["f1"].to_numpy(dtype=np.float64)
        rows.append(row)
    out = pd.DataFrame(rows)
    f1_base, pvals = [], []
    for group in samples:
        row = dict(zip([*keys, "attack"], group))
        if "defense" not in keys or row["defense"] == BASELINE:
            f1_base.append(math.nan)
            pvals.append(math.nan)
            continue
        base = _baseline(samples, keys, row)
        f1_base.append(nanmean(base) if base is not None else math.nan)
        pvals.append(welch_p(samples[group], base) if base is not None else math.nan)
    out["f1_baseline"] = f1_base
    out["p_value"] = pvals
    out["p_adjusted"] = adjust(pvals, "bonferroni")
    out["significant"] = [bool(p < alpha) if np.isfinite(p) else None for p in out["p_adjusted"]]
    return out


def compare(tables: dict[str, pd.DataFrame], by=("defense",), *, averaging: str = "macro",
            confidence: float = 0.95, alpha: float = ALPHA, min_effect: float = MIN_EFFECT,
            pool=()) -> pd.DataFrame:
    """The privacy-utility table: one row per ``by`` group (plus context) and attack.

    Parameters
    ----------
    tables : dict of DataFrames
        At least ``attacks``; ``per_query``, ``audits`` and ``utility`` are used when present.
    by : sequence of str
        Grouping columns of ``attacks``; data set, algorithm, setting, click model and threat
        model are always kept apart, and so is every axis the campaign sweeps
        (:mod:`reports.sweeps`: probe cohort, rounds, clients, ...) unless named in ``pool``.
        Seeds and folds are pooled (they are the samples).
    averaging : str
        Which ``averaging`` rows of ``attacks`` to use (``"macro"``: mean over lists).
    min_effect : float
        Leakage (AUC) below which a defense's leakage counts as not measurable.

    Returns
    -------
    DataFrame
        Keys, ``attack``, ``n`` (runs), ``reference``; ``<m>``, ``<m>_ci_low``, ``<m>_ci_high``
        for m in precision, recall, f1; ``f1_baseline``, ``p_value``, ``p_adjusted``,
        ``significant`` (F1 against defense none); the :func:`reports.leakage.leakage_table`
        columns (``auc``, ``auc_counterfactual``, ``leakage`` with interval, ...); when
        ``defense`` is a key, the group's ``leakage_verdict`` and its ``claim_verdict`` with
        the pooled audit (``claimed_epsilon``, ``claimed_scope``, ``audited_scope``,
        ``epsilon_lb``, ``trial_limited``, ``n_trials``, ``tightness``, ``audit_attack``);
        ``ndcg10``, ``ndcg10_delta`` and its interval.
    """
    check_min_effect(min_effect)
    tables, swept = with_sweeps(tables, pool)
    attacks = _attack_rows(tables, averaging)
    if attacks.empty:
        return pd.DataFrame()
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [*by, "attack", *METRICS] if c not in attacks.columns]
    if missing:
        raise ValueError(f"attacks table lacks column(s) {', '.join(missing)}")
    keys = _keys(attacks, [*by, *(a for a in swept if a not in by)])
    out = _f1_rows(attacks, keys, confidence, alpha)
    leak = leakage_table(tables, keys, averaging=averaging, confidence=confidence)
    out = out.merge(leak, on=[*keys, "attack"], how="left")
    if "defense" in keys:
        verdict = leakage_verdicts(leak, keys, min_effect=min_effect, alpha=alpha)
        out = out.merge(verdict[[*keys, "leakage_verdict"]], on=keys, how="left")
        out = _join_claims(out, tables.get("audits"), keys)
    out = _join_utility(out, tables.get("utility"), keys, confidence)
    first = [*keys, "attack", "n", "reference"]
    return out[first + [c for c in out.columns if c not in first]]


def _claims(audits: pd.DataFrame | None, keys: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The pooled claim verdicts by defense and every key but the click and threat models (a claim
    is the defense's, whatever the clicks; runs pool over seeds and folds only)."""
    on = ["defense"] + [k for k in keys if k not in ("defense", "click_model", "threat_model")
                        and audits is not None and k in audits.columns]
    if audits is None or audits.empty or "defense" not in audits.columns:
        return pd.DataFrame(), on
    return claim_summary(pooled_audits(audits, on), on), on


def _join_claims(out: pd.DataFrame, audits: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    claims, on = _claims(audits, keys)
    if claims.empty:
        return out.assign(**{c: None if c in CLAIM_TEXT_COLUMNS else math.nan for c in CLAIM_COLUMNS})
    return out.merge(claims[[*on, *CLAIM_COLUMNS]], on=on, how="left")


def verdicts(tables: dict[str, pd.DataFrame], *, averaging: str = "macro", alpha: float = ALPHA,
             min_effect: float = MIN_EFFECT, confidence: float = 0.95, pool=()) -> pd.DataFrame:
    """Both verdicts per defense and context (data, algorithm, setting, click model, threat model,
    and every swept axis not in ``pool``: :mod:`reports.sweeps`).

    Columns: keys; ``leakage_verdict`` with the :func:`reports.leakage.leakage_verdicts` columns
    (``headline_attack``, ``leakage`` and its simultaneous interval, ``detectable``, ``leakage_normalized``, ``auc``,
    ``auc_counterfactual``, ``n_lists``, ``basis``, ``decisive_attack``, ``p_adjusted``,
    ``missable``, ``reason``); ``leakage_text`` (the verdict in words); ``claim_verdict`` with
    the :func:`reports.claims.claim_summary` columns and ``claim_text``; ``ndcg10``,
    ``ndcg10_delta``.
    """
    check_min_effect(min_effect)
    tables, swept = with_sweeps(tables, pool)
    attacks = _attack_rows(tables, averaging)
    if attacks.empty or "defense" not in attacks.columns:
        return pd.DataFrame()
    keys = _keys(attacks, ["defense", *swept])
    leak = leakage_table(tables, keys, averaging=averaging, confidence=confidence)
    out = leakage_verdicts(leak, keys, min_effect=min_effect, alpha=alpha)
    out["leakage_text"] = [leakage_text(r, min_effect) for _, r in out.iterrows()]
    claims, on = _claims(tables.get("audits"), keys)
    if claims.empty:
        out = out.assign(claim_verdict=None, claim_text="")
    else:
        out = out.merge(claims, on=on, how="left")
        out["claim_text"] = [claim_text(r) for _, r in out.iterrows()]
    utility = _join_utility(out[keys].copy(), tables.get("utility"), keys, confidence)
    out["ndcg10"], out["ndcg10_delta"] = utility["ndcg10"].to_numpy(), utility["ndcg10_delta"].to_numpy()
    return out


def leakage_text(row, min_effect: float) -> str:
    """A leakage verdict in words: the attack that decided it with its simultaneous interval, the
    lists scored, the smallest leak it could have detected, and why."""
    verdict = row["leakage_verdict"]
    if row.get("headline_attack") is None or pd.isna(row.get("headline_attack")):
        return f"{verdict}: {row['reason']}"
    ci = (f" [{row['leakage_ci_low']:+.3f}, {row['leakage_ci_high']:+.3f}]"
          if pd.notna(row.get("leakage_ci_low")) else "")
    n = f", {int(row['n_lists'])} {'lists' if row['basis'] == 'per list' else 'runs'}"
    detect = f", detectable effect ±{row['detectable']:.3f}" if pd.notna(row.get("detectable")) else ""
    family = f" (bounds simultaneous over {int(row['n_informed'])} informed attacks)" if ci else ""
    headline = f"{row['headline_attack']}: AUC leakage {row['leakage']:+.3f}{ci}{n}{detect}{family}"
    if verdict == "leaks":
        return (f"leaks — decided by {headline}; one-sided test of zero leakage, "
                f"Holm-adjusted p = {row['p_adjusted']:.2g}")
    if verdict == "no measurable leakage":
        return (f"no measurable leakage — largest upper bound {headline}; every informed attack's upper bound "
                f"is below {min_effect:g}: leaks above {row['missable']:.3f} AUC are ruled out, smaller ones could "
                "have been missed")
    could = f"; a leak up to {row['missable']:.3f} AUC could have been missed" if pd.notna(row["missable"]) else ""
    return f"inconclusive — largest upper bound {headline}; {row['reason']}{could}"


def _utility_means(utility: pd.DataFrame, on: list[str], confidence: float) -> pd.DataFrame:
    rows = []
    for group, frame in utility.groupby(on, sort=False, dropna=False):
        delta = mean_ci(frame["ndcg10_delta"], confidence) if "ndcg10_delta" in frame else (math.nan,) * 3
        rows.append(dict(zip(on, group if isinstance(group, tuple) else (group,)),
                         ndcg10=float(frame["ndcg10"].mean()), ndcg10_delta=delta[0],
                         ndcg10_delta_ci_low=delta[1], ndcg10_delta_ci_high=delta[2]))
    return pd.DataFrame(rows)


def _join_utility(out: pd.DataFrame, utility: pd.DataFrame | None, keys: list[str],
                  confidence: float) -> pd.DataFrame:
    """nDCG@10 of the rankers trained under each defense. ``utility.click_model`` may be the
    training click model rather than the probe's: rows whose click model has no utility
    row get the mean over all of that defense's utility rows."""
    cols = ["ndcg10", "ndcg10_delta", "ndcg10_delta_ci_low", "ndcg10_delta_ci_high"]
    utility = clean_utility(utility)  # rankers trained under poisoning are integrity results (reports.robustness)
    on = [k for k in keys if utility is not None and k in utility.columns and k != "threat_model"]
    if utility is None or utility.empty or "defense" not in on or "ndcg10" not in utility.columns:
        return out.assign(**{c: math.nan for c in cols})
    merged = out.merge(_utility_means(utility, on, confidence), on=on, how="left")
    pooled_on = [k for k in on if k != "click_model"]
    if len(pooled_on) < len(on) and merged["ndcg10"].isna().any():
        pooled = out[pooled_on].merge(_utility_means(utility, pooled_on, confidence), on=pooled_on, how="left")
        missing = merged["ndcg10"].isna().to_numpy()
        for c in cols:
            merged.loc[missing, c] = pooled.loc[missing, c].to_numpy()
    return merged


def fmt_number(v, digits: int = 3, significant: bool = False) -> str:
    """One number as text: "" for NaN, "inf" for +-inf and sentinel values beyond ``HUGE``,
    ``digits`` significant digits for p-values (``significant``) and for magnitudes of a
    million or more, else ``digits`` decimals."""
    if v is None or pd.isna(v):
        return ""
    v = float(v)
    if abs(v) >= HUGE:
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}" if significant or abs(v) >= 1e6 else f"{v:.{digits}f}"


def ci_text(mean, low, high, digits: int = 3) -> str:
    """``mean [low, high]``, or the mean alone when the interval is undefined."""
    if mean is None or pd.isna(mean):
        return ""
    if low is None or pd.isna(low):
        return fmt_number(mean, digits)
    return f"{fmt_number(mean, digits)} [{fmt_number(low, digits)}, {fmt_number(high, digits)}]"


def with_ci(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Fold ``x``, ``x_ci_low``, ``x_ci_high`` into one text column ``x [low, high]``."""
    out = df.copy()
    for col in list(out.columns):
        low, high = f"{col}_ci_low", f"{col}_ci_high"
        if low in out.columns and high in out.columns:
            out[col] = [ci_text(m, lo, hi, digits) for m, lo, hi in zip(out[col], out[low], out[high])]
            out = out.drop(columns=[low, high])
    for col in out.columns:
        if out[col].dtype.kind == "f":
            out[col] = [fmt_number(v, digits, col.startswith("p_")) for v in out[col]]
    return out.astype(object).where(out.notna(), "")


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def format_table(df: pd.DataFrame, fmt: str = "table") -> str:
    """Render a comparison as ``table`` (aligned text), ``markdown``, ``csv`` or ``json``.

    ``table`` and ``markdown`` show the keys and the :data:`COMPACT` columns, each metric as
    ``mean [ci_low, ci_high]``; ``csv`` and ``json`` keep every column (JSON: one list of
    records, NaN as null).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format: unknown value {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "csv":
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()
    if fmt == "json":
        records = json.loads(df.to_json(orient="records", double_precision=10))
        return json.dumps(records, indent=2) + "\n"
    keys = list(df.columns[:list(df.columns).index("attack")]) if "attack" in df.columns else []
    shown = keys + [c for c in df.columns if c not in keys and (c in COMPACT or c.rsplit("_ci_", 1)[0] in COMPACT)]
    text = with_ci(df[shown])
    if {"epsilon_lb", "trial_limited", "n_trials"} <= set(df.columns):  # a trial count's limit is no measurement
        text["epsilon_lb"] = [bound_text(lb, lim, n).replace("ε ", "") if pd.notna(lb) else ""
                              for lb, lim, n in zip(df["epsilon_lb"], df["trial_limited"].fillna(False), df["n_trials"])]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md_cell(c) for c in text.columns) + " |",
                 "|" + "|".join("---" for _ in text.columns) + "|"]
        lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in text.itertuples(index=False)]
        return "\n".join(lines) + "\n"
    return text.to_string(index=False) + "\n"


REFERENCE = "reference"
"""What the verdict columns of a reference attack's row read: a baseline that does not read the
message is no test of the defense, so it repeats neither of the defense's verdicts."""


def as_references(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the verdict columns of reference-attack rows (``random3``, ``prior``, ...)
    set to ``reference``."""
    if "reference" not in table or table.empty:
        return table
    out = table.copy()
    is_reference = out["reference"].fillna(False).astype(bool)
    for column in ("leakage_verdict", "claim_verdict"):
        if column in out:
            out[column] = out[column].astype(object).where(~is_reference, REFERENCE)
    return out
