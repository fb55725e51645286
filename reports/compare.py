"""The privacy-utility comparison of defenses, computed from result tables (DataFrames).

:func:`compare` gives, per defense (and data set, algorithm, click model, threat model) and
attack, the attack's precision / recall / F1 as a mean over seeds and folds with a 95 %
Student-t confidence interval, a Welch t-test of F1 against the same attack without
defense (``defense == "none"``) with Bonferroni correction over every test in the table,
the audited epsilon lower bound next to the claimed epsilon and its scope, and the mean
change of the ranker's nDCG@10 against no defense. :func:`verdicts` says, per defense and
threat model, whether the best attack does better than random guessing.
"""

from __future__ import annotations

import io
import json
import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

CONTEXT = ("data", "algo", "setting", "click_model", "threat_model")
METRICS = ("precision", "recall", "f1")
BASELINE = "none"
RANDOM_PREFIX = "random"
MARGIN = 0.05  # F1 above random guessing that counts as a working attack
FORMATS = ("table", "markdown", "csv", "json")
COMPACT_DROP = ("p_value", "audit_attack")  # left out of the text formats (csv/json keep them)


def mean_ci(values, confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean and two-sided Student-t interval ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``.

    NaN values are ignored; the interval is NaN with fewer than two values.
    Returns (mean, low, high, n).
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half, n


def welch_p(a, b, alternative: str = "two-sided") -> float:
    """p-value of Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``); NaN if either
    sample has fewer than two values."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size < 2 or b.size < 2:
        return math.nan
    with warnings.catch_warnings():  # identical samples: scipy warns and returns NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)


def bonferroni(pvalues) -> np.ndarray:
    """Bonferroni-adjusted p-values (statsmodels ``multipletests``) over the finite ones;
    NaN stays NaN and is not counted in the family."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="bonferroni")[1]
    return out


def _attack_rows(tables: dict[str, pd.DataFrame], averaging: str) -> pd.DataFrame:
    attacks = tables.get("attacks")
    if attacks is None or attacks.empty:
        return pd.DataFrame()
    if "averaging" in attacks.columns and (attacks["averaging"] == averaging).any():
        attacks = attacks[attacks["averaging"] == averaging]
    return attacks


def _keys(frame: pd.DataFrame, by) -> list[str]:
    return list(by) + [c for c in CONTEXT if c not in by and c in frame.columns]


def compare(tables: dict[str, pd.DataFrame], by=("defense",), *, averaging: str = "macro",
            confidence: float = 0.95, alpha: float = 0.05) -> pd.DataFrame:
    """The privacy-utility table: one row per ``by`` group (plus context) and attack.

    Parameters
    ----------
    tables : dict of DataFrames
        At least ``attacks``; ``audits`` and ``utility`` are used when present.
    by : sequence of str
        Grouping columns of ``attacks``; data set, algorithm, click model and threat model
        are always kept apart. Seeds and folds are pooled (they are the samples).
    averaging : str
        Which ``averaging`` rows of ``attacks`` to use (``"macro"``: mean over queries).

    Returns
    -------
    DataFrame
        Keys, ``attack``, ``n``, ``<m>``, ``<m>_ci_low``, ``<m>_ci_high`` for m in precision,
        recall, f1; ``f1_baseline`` (same attack, defense none), ``p_value`` (Welch, two-sided),
        ``p_adjusted`` (Bonferroni over all rows with a test), ``significant``;
        ``claimed_epsilon``, ``claimed_scope``, ``epsilon_lb``, ``audit_attack``,
        ``audit_verdict`` (largest lower bound over the audits of that defense);
        ``ndcg10``, ``ndcg10_delta`` and its interval.
    """
    attacks = _attack_rows(tables, averaging)
    if attacks.empty:
        return pd.DataFrame()
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [*by, "attack", *METRICS] if c not in attacks.columns]
    if missing:
        raise ValueError(f"attacks table lacks column(s) {', '.join(missing)}")
    keys = _keys(attacks, by)
    rows = []
    samples = {}
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
        base_key = tuple(BASELINE if k == "defense" else row[k] for k in [*keys, "attack"])
        base = samples.get(base_key)
        f1_base.append(float(np.nanmean(base)) if base is not None and base.size else math.nan)
        pvals.append(welch_p(samples[group], base) if base is not None else math.nan)
    out["f1_baseline"] = f1_base
    out["p_value"] = pvals
    out["p_adjusted"] = bonferroni(pvals)
    out["significant"] = [bool(p < alpha) if np.isfinite(p) else None for p in out["p_adjusted"]]
    out = _join_audits(out, tables.get("audits"), keys)
    out = _join_utility(out, tables.get("utility"), keys, confidence)
    first = [*keys, "attack", "n"]
    return out[first + [c for c in out.columns if c not in first]]


def _join_audits(out: pd.DataFrame, audits: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    cols = ["claimed_epsilon", "claimed_scope", "epsilon_lb", "audit_attack", "audit_verdict"]
    on = [k for k in keys if audits is not None and k in audits.columns]
    if audits is None or audits.empty or "defense" not in on or "epsilon_lb" not in audits.columns:
        return out.assign(**{c: None if c in ("claimed_scope", "audit_attack", "audit_verdict")
                             else math.nan for c in cols})
    best = []
    for group, frame in audits.groupby(on, sort=False, dropna=False):
        top = frame.loc[frame["epsilon_lb"].fillna(-np.inf).idxmax()]
        best.append(dict(zip(on, group if isinstance(group, tuple) else (group,)),
                         claimed_epsilon=frame["claimed_epsilon"].max() if "claimed_epsilon" in frame else math.nan,
                         claimed_scope=top.get("claimed_scope"), epsilon_lb=top["epsilon_lb"],
                         audit_attack=top.get("attack"), audit_verdict=top.get("claim_verdict")))
    return out.merge(pd.DataFrame(best), on=on, how="left")


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


def query_f1(per_query: pd.DataFrame) -> np.ndarray:
    """Per-query F1: the ``f1`` column when recorded, else 2 tp / (2 tp + fp + fn) with
    0 where the denominator is 0 (the zero-division policy "0")."""
    if "f1" in per_query.columns:
        return per_query["f1"].to_numpy(dtype=np.float64)
    tp, fp, fn = (per_query[c].to_numpy(dtype=np.float64) for c in ("tp", "fp", "fn"))
    den = 2 * tp + fp + fn
    return np.divide(2 * tp, den, out=np.zeros_like(den), where=den > 0)


def _samples(attacks: pd.DataFrame, per_query: pd.DataFrame | None, attack: str,
             defense: str, click_model) -> tuple[np.ndarray, str]:
    """F1 samples of one attack in one group: per query when the store has them, else per run."""
    runs = attacks[attacks["attack"] == attack]
    if per_query is not None and not per_query.empty and {"run_key", "attack", "defense"} <= set(per_query):
        sel = per_query[per_query["run_key"].isin(runs["run_key"]) & (per_query["attack"] == attack)
                        & (per_query["defense"] == defense)]
        if click_model is not None and "click_model" in sel.columns:
            sel = sel[sel["click_model"] == click_model]
        if ({"f1"} <= set(sel) or {"tp", "fp", "fn"} <= set(sel)) and len(sel) >= 2:
            return query_f1(sel), "per-query t-test"
    return runs["f1"].to_numpy(dtype=np.float64), "run-level t-test"


def _test(sel: pd.DataFrame, per_query, attack: str, random_attack: str, ctx: dict) -> tuple[float, int, str]:
    """One-sided Welch p (attack > random), sample size and basis for one group."""
    a, basis = _samples(sel, per_query, attack, ctx["defense"], ctx.get("click_model"))
    b, basis_b = _samples(sel, per_query, random_attack, ctx["defense"], ctx.get("click_model"))
    if basis != basis_b:
        a, basis = _samples(sel, None, attack, ctx["defense"], None)
        b, _ = _samples(sel, None, random_attack, ctx["defense"], None)
    p = welch_p(a, b, alternative="greater")
    return p, min(a.size, b.size), basis if np.isfinite(p) else "no test (single run)"


def verdicts(tables: dict[str, pd.DataFrame], *, averaging: str = "macro", alpha: float = 0.05,
             margin: float = MARGIN) -> pd.DataFrame:
    """Per defense and context: does any informed attack beat random guessing?

    Each informed attack (not named ``random*``) is set against the best random-guessing
    baseline under the same defense; its ``effect`` is the difference of their mean F1. The
    defense *holds* when the strongest attack's effect is below ``margin`` (no attack is more
    than marginally better than guessing). Otherwise it does *not* hold when an attack with
    an effect of at least ``margin`` is significantly better than random: one-sided Welch
    t-test on per-query F1 when the store has ``per_query`` rows, else on per-run F1 (at
    least two runs each), Bonferroni-corrected over every attack of every group (so picking
    the strongest attack afterwards does not inflate significance). When no such test is
    significant the verdict is inconclusive (``holds`` None); when no test is possible (a
    single run) it does not hold. Without a random baseline ``holds`` is None.

    Columns: keys, best_attack, best_f1, random_attack, random_f1, effect (of the best
    attack), tested_attack, n, p_value, p_adjusted (of the best attack's test, or of another
    attack above the margin whose adjusted p is smaller: ``tested_attack`` names it),
    basis, holds, ndcg10_delta, claimed_epsilon, claimed_scope, epsilon_lb, audit_verdict.
    """
    table = compare(tables, by=("defense",), averaging=averaging, alpha=alpha)
    if table.empty:
        return pd.DataFrame()
    attacks = _attack_rows(tables, averaging)
    keys = _keys(attacks, ["defense"])
    is_random = table["attack"].astype(str).str.lower().str.startswith(RANDOM_PREFIX)
    rows, tests = [], []  # tests: (row index, attack, effect, p, n, basis)
    for group, frame in table.groupby(keys, sort=False, dropna=False):
        frame = frame[frame["f1"].notna()]
        informed, rand = frame[~is_random.loc[frame.index]], frame[is_random.loc[frame.index]]
        if informed.empty:
            continue
        best = informed.loc[informed["f1"].idxmax()]
        ctx = dict(zip(keys, group))
        row = dict(ctx, best_attack=best["attack"], best_f1=best["f1"], random_attack=None,
                   random_f1=math.nan, effect=math.nan)
        if not rand.empty:
            r = rand.loc[rand["f1"].idxmax()]
            row.update(random_attack=r["attack"], random_f1=r["f1"], effect=best["f1"] - r["f1"])
            sel = attacks
            for k, v in ctx.items():
                sel = sel[sel[k] == v]
            for _, att in informed.iterrows():
                p, n, basis = _test(sel, tables.get("per_query"), att["attack"], r["attack"], ctx)
                tests.append((len(rows), att["attack"], att["f1"] - r["f1"], p, n, basis))
        for c in ("ndcg10_delta", "claimed_epsilon", "claimed_scope", "epsilon_lb", "audit_verdict"):
            row[c] = best[c]
        rows.append(row)
    adjusted = bonferroni([t[3] for t in tests])
    for row in rows:
        row.update(tested_attack=None, n=math.nan, p_value=math.nan, p_adjusted=math.nan, basis=None)
    for (i, attack, effect, p, n, basis), p_adj in zip(tests, adjusted):
        if attack == rows[i]["best_attack"]:
            rows[i].update(tested_attack=attack, n=n, p_value=p, p_adjusted=p_adj, basis=basis)
    for (i, attack, effect, p, n, basis), p_adj in zip(tests, adjusted):
        if effect >= margin and p_adj < rows[i]["p_adjusted"]:  # a more significant attack decides
            rows[i].update(tested_attack=attack, n=n, p_value=p, p_adjusted=p_adj, basis=basis)
    for row in rows:
        if row["random_attack"] is None:
            row["holds"] = None
        elif row["effect"] < margin:
            row["holds"] = True
        elif np.isfinite(row["p_adjusted"]):
            row["holds"] = False if row["p_adjusted"] < alpha else None
        else:
            row["holds"] = False
    out = pd.DataFrame(rows)
    out["holds"] = pd.Series([r["holds"] for r in rows], index=out.index, dtype=object)
    first = [*keys, "best_attack", "best_f1", "random_attack", "random_f1", "effect",
             "tested_attack", "n", "p_value", "p_adjusted", "basis", "holds"]
    return out[first + [c for c in out.columns if c not in first]]


HUGE = 1e300  # audits record an unbounded estimate as the largest float; shown as inf


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

    ``table`` and ``markdown`` show each metric as ``mean [ci_low, ci_high]`` and leave out
    the unadjusted p-value and the audit attack's name; ``csv`` and ``json`` keep every
    column (JSON: a list of records, NaN as null).
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format: unknown value {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "csv":
        buf = io.StringIO()
        df.to_csv(buf, index=False)
        return buf.getvalue()
    if fmt == "json":
        records = json.loads(df.to_json(orient="records", double_precision=10))
        return json.dumps(records, indent=2) + "\n"
    text = with_ci(df.drop(columns=[c for c in COMPACT_DROP if c in df.columns]))
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md_cell(c) for c in text.columns) + " |",
                 "|" + "|".join("---" for _ in text.columns) + "|"]
        lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in text.itertuples(index=False)]
        return "\n".join(lines) + "\n"
    return text.to_string(index=False) + "\n"
