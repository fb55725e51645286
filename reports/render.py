"""The audit report: ``report.html`` (self-contained) and ``report.md`` from result tables.

Reading order: a summary (one bullet per defense, from :func:`reports.compare.verdicts`),
the plots with captions that say what to read from them, the tables (columns that are
constant across a table are stated once in its caption), the methods. The HTML embeds every
plot as a ``data:`` URI and the CSV downloads as ``data:`` links, and references nothing
outside itself; jinja2 autoescaping keeps anything read from a data file (doc ids, campaign
names, config strings) from injecting markup into either file.
"""

from __future__ import annotations

import base64
import json
import math
import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import jinja2
from markupsafe import Markup
import pandas as pd

from reports.compare import MARGIN, RANDOM_PREFIX, ci_text, compare, fmt_number, verdicts, with_ci
from reports.plots import PLOTS, data_uri

REPORT_PACKAGES = ("fltr-audit", "numpy", "scipy", "pandas", "statsmodels", "scikit-learn",
                   "matplotlib", "jinja2")
COMPARE_COLUMNS = ("defense", "data", "algo", "click_model", "threat_model", "attack", "n",
                   "precision", "recall", "f1", "p_adjusted", "ndcg10", "ndcg10_delta")
HEADERS = {  # column name -> table header
    "click_model": "click model", "threat_model": "threat model", "n": "runs", "f1": "F1",
    "p_adjusted": "p vs none (Bonferroni)", "ndcg10": "nDCG@10",
    "ndcg10_delta": "ΔnDCG@10 vs none", "claimed_epsilon": "claimed ε", "claimed_delta": "claimed δ",
    "claimed_scope": "scope", "epsilon_lb": "audited ε lower bound", "epsilon_point": "ε point estimate",
    "n_audits": "audits", "n_trials": "trials", "fpr": "FPR", "fnr": "FNR", "epsilon": "ε",
    "theoretical": "theoretical bound", "best_attack": "strongest attack", "random_attack": "random baseline",
}
ZERO_DIVISION = {
    "0": "Policy \"0\": a query where an attack guesses no click has precision 0, a query "
         "without clicks has recall 0, F1 is 0 when precision + recall is 0.",
    "skip": "Policy \"skip\": a query where a metric is undefined (no guess, no click) is left "
            "out of that metric's macro mean.",
}
DEFAULT_METHODS = {
    "nDCG": "nDCG@10 with gain 2^rel - 1 and discount log2(rank + 1); the ideal DCG is taken "
            "over all judged documents of the query; queries without any relevant document "
            "are left out of the mean.",
    "Statistics": "Means over seeds and folds with two-sided 95 % Student-t intervals "
                  "(mean +- t(0.975, n-1) s / sqrt(n)). Each defended configuration is compared "
                  "with the same attack under defense none by Welch's t-test on F1, "
                  "Bonferroni-corrected over all tests of the table (statsmodels multipletests).",
    "Verdicts": f"A defense holds under a threat model when its strongest informed attack's "
                f"mean F1 is less than {MARGIN:.2f} above the best random-guessing baseline under "
                "the same defense. Otherwise it does not hold when a one-sided Welch t-test "
                "(attack > random, on per-query F1 when stored, else on per-run F1) of an attack "
                "above that margin is significant at 0.05 after Bonferroni correction over every "
                "informed attack of every verdict, and the "
                "verdict is inconclusive when it is not; with a single run and no per-query "
                "results (no test possible) it does not hold.",
    "Epsilon audits": "epsilon_lb is the largest audited lower bound over the audits of a "
                      "defense, shown next to the epsilon the defense claims and the scope of "
                      "that claim (what one unit of privacy protects).",
}
PLOT_CAPTIONS = {
    "frontier": "One marker per defense (colour) and click model (shape): x is the trained "
                "ranker's nDCG@10, y the F1 of the strongest informed attack (95 % CI when "
                "there are several runs); dotted lines mark the random-guessing F1 of each "
                "click model. Read: lower right is private and useful; a marker on its click "
                "model's random line means the attack does no better than guessing, a marker "
                "far above it means the messages leak clicks.",
    "learning_curves": "nDCG@10 per training round, mean over runs: on held-out queries (left, "
                       "where evaluated) and of the lists shown to users (right). Read: the gap "
                       "between a defense's line and the none line is the utility the defense "
                       "costs; a defense without cost lies on top of none.",
    "attack_precision_recall": "Precision (share of guessed clicks that were real clicks, left) "
                               "and recall (share of real clicks found, right) of every attack "
                               "by defense, one row per click model; the random-guessing "
                               "baseline is the last bar of each group. Read: a defense stops "
                               "an attack when its bars drop to the random bar.",
    "epsilon": "FOLtR-ES: epsilon of the randomized-response click perturbation against p, by "
               "exact enumeration per click model (solid) and the theoretical bound (dashed). "
               "Read: pick p for a target epsilon; a click model below the bound gets more "
               "privacy at that p than the bound promises.",
}
VERDICT_WORDS = {
    True: ("holds against click guessing", "click guessing does no better than random"),
    False: ("does not hold against click guessing", "click guessing succeeds"),
    None: ("is inconclusive against click guessing", "inconclusive whether click guessing beats random"),
}
SHORT_VERDICT = {True: "holds", False: "does not hold", None: "inconclusive"}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = _md
    return env


def _md(value) -> Markup:
    """Markdown-safe text: HTML metacharacters as entities (no raw HTML gets through a
    Markdown renderer), table pipes escaped, one line; quotes stay readable."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(text.replace("|", "\\|").replace("\n", " "))


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _present(r, col) -> bool:
    return col in r and r[col] is not None and not (isinstance(r[col], float) and math.isnan(r[col]))


def summary_sentences(v: pd.DataFrame) -> list[str]:
    """Plain-words verdicts with their statistical basis, one per defense and context, from
    :func:`verdicts` rows (the report's "Verdict details")."""
    out = []
    for _, r in v.iterrows():
        parts = [f"{r['click_model']} clicks"] if pd.notna(r.get("click_model")) else []
        parts += [str(r[c]) for c in ("algo", "data") if pd.notna(r.get(c))]
        ctx = ", ".join(parts)
        tm = r.get("threat_model", "n/a")
        none = r["defense"] == "none"
        head = f"{r['defense']}{' (no defense)' if none else ''}: "
        if r["random_attack"] is None or pd.isna(r["random_attack"]):
            s = (f"{head}strongest attack {r['best_attack']} F1 {_fmt(r['best_f1'])} (no random "
                 f"baseline in the results to judge it against) under threat model {tm} ({ctx})")
        else:
            against = f"{r['best_attack']} F1 {_fmt(r['best_f1'])} vs {_fmt(r['random_f1'])} for {r['random_attack']}"
            verdict = VERDICT_WORDS[r["holds"]][1 if none else 0]
            if r["holds"] is True:
                basis = f"within {MARGIN:.2f} of random"
            elif str(r["basis"]).endswith("t-test"):
                which = "" if r["tested_attack"] == r["best_attack"] else f" of {r['tested_attack']}"
                basis = f"{r['basis']}{which} over {int(r['n'])} samples, adjusted p = {r['p_adjusted']:.2g}"
            else:
                basis = f"more than {MARGIN:.2f} above random, single run so no test"
            s = f"{head}{against} — {verdict} under threat model {tm} ({ctx}; {basis})"
        if not none and pd.notna(r.get("ndcg10_delta")):
            s += f"; nDCG@10 {r['ndcg10_delta']:+.3f} against no defense"
        if pd.notna(r.get("epsilon_lb")):
            claimed = r["claimed_epsilon"]
            claim = (f"no finite epsilon claimed (scope {r['claimed_scope']})"
                     if pd.isna(claimed) or math.isinf(claimed)
                     else f"claimed epsilon {_fmt(claimed)} (scope {r['claimed_scope']})")
            s += f"; {claim}, audited lower bound {_fmt(r['epsilon_lb'])} ({r['audit_verdict']})"
        out.append(s + ".")
    return out


def _slice(r: pd.Series, rows: pd.DataFrame) -> str:
    """A row's click model, preceded by its algorithm setting where the rows hold several."""
    click = str(r["click_model"]) if "click_model" in rows and pd.notna(r["click_model"]) else ""
    if "setting" in rows and rows["setting"].nunique(dropna=False) > 1:
        click = f"{r['setting'] or 'default'} {click}".strip()
    return click


def _verdict_phrase(rows: pd.DataFrame, none: bool) -> tuple[str, str]:
    """(status, words) of one defense in one threat-model context over its click models."""
    holds = [r["holds"] if r["random_attack"] is not None and pd.notna(r["random_attack"]) else "nobase"
             for _, r in rows.iterrows()]
    clicks = [_slice(r, rows) for _, r in rows.iterrows()] if "click_model" in rows else []
    if "nobase" in holds:
        return "unknown", "no random baseline to judge the attacks against"
    if none:
        groups = {True: "click guessing does no better than random", False: "click guessing succeeds",
                  None: "inconclusive whether click guessing beats random"}
    else:
        groups = SHORT_VERDICT
    holds = [None if h is None else bool(h) for h in holds]
    distinct = [h for h in (False, None, True) if any(x is h for x in holds)]  # worst first
    status = {True: "holds", False: "fails", None: "inconclusive"}[distinct[0]]
    if len(distinct) == 1:
        noun = "settings" if "setting" in rows and rows["setting"].nunique(dropna=False) > 1 else "click models"
        every = (f" with both {noun}" if len(clicks) == 2 else f" with all {len(clicks)} {noun}"
                 if len(clicks) > 1 else f" with {clicks[0]} clicks" if clicks else "")
        return status, groups[distinct[0]] + every
    parts = [f"{groups[h]} with {', '.join(c for c, x in zip(clicks, holds) if x is h)} clicks"
             for h in distinct]
    return status, "; ".join(parts)


def _f1_phrase(rows: pd.DataFrame) -> str:
    """``olsr F1 vs random3: perfect 0.52 vs 0.30, ...`` (attack names stated once when equal)."""
    same_best = rows["best_attack"].nunique(dropna=False) == 1
    same_rand = rows["random_attack"].nunique(dropna=False) == 1
    best = f"{rows['best_attack'].iloc[0]} " if same_best else ""
    rand = f" {rows['random_attack'].iloc[0]}" if same_rand and rows["random_attack"].notna().all() else ""
    items = []
    for _, r in rows.iterrows():
        text = fmt_number(r["best_f1"], 2)
        if pd.notna(r["random_f1"]):
            text += f" vs {fmt_number(r['random_f1'], 2)}"
        who = [str(r["best_attack"])] if not same_best else []
        who += [str(r["random_attack"])] if not same_rand and pd.notna(r["random_f1"]) else []
        click = f"{_slice(r, rows)} " if _slice(r, rows) else ""
        items.append(f"{click}{text}" + (f" ({' vs '.join(who)})" if who else ""))
    return f"Strongest attack {best.strip() + ', ' if best else ''}F1 vs {rand.strip() or 'random'}: {', '.join(items)}"


def _ndcg_phrase(table_rows: pd.DataFrame, none: bool) -> str:
    if table_rows.empty or table_rows["ndcg10"].isna().all():
        return ""
    levels = sorted({round(float(x), 3) for x in table_rows["ndcg10"].dropna()})
    level = fmt_number(levels[0]) if len(levels) == 1 else f"{fmt_number(levels[0])}–{fmt_number(levels[-1])}"
    if none:
        return f"Utility: nDCG@10 {level} (the reference)"
    deltas = sorted({round(float(x), 3) for x in table_rows["ndcg10_delta"].dropna()})
    if not deltas:
        return f"Utility: nDCG@10 {level}"
    if len(deltas) == 1:
        d = deltas[0]
        cost = "no cost against no defense" if abs(d) < 0.0005 else f"{d:+.3f} against no defense"
    else:
        cost = f"{deltas[0]:+.3f} to {deltas[-1]:+.3f} against no defense"
    return f"Utility: nDCG@10 {level} ({cost})"


def _epsilon_phrase(r) -> str:
    """Claimed vs audited epsilon with the claim's scope, from one verdicts row."""
    if not _present(r, "epsilon_lb"):
        return ""
    claimed, scope = r.get("claimed_epsilon"), r.get("claimed_scope")
    scope_text = f" (scope: {scope})" if _present(r, "claimed_scope") and str(scope) != "none" else ""
    if claimed is None or pd.isna(claimed) or math.isinf(claimed):
        claim = f"No finite ε claimed{scope_text}"
    else:
        claim = f"Claimed ε {fmt_number(claimed, 2)}{scope_text}"
    audit = f"audited ε ≥ {fmt_number(r['epsilon_lb'], 2)}"
    verdict = str(r.get("audit_verdict") or "")
    if verdict.startswith("violated"):
        audit += f": claim {verdict}"
    elif verdict in ("holds", "consistent") and claim.startswith("Claimed"):
        audit += ", consistent with the claim"
    elif verdict and claim.startswith("Claimed"):
        audit += f" ({verdict})"
    return f"{claim}; {audit}"


def defense_summary(v: pd.DataFrame, table: pd.DataFrame) -> list[dict]:
    """One summary bullet per defense: whether it holds under which threat model, the
    strongest attack's F1 vs random per click model, the nDCG@10 cost and claimed vs
    audited epsilon.

    Parameters
    ----------
    v : DataFrame
        :func:`reports.compare.verdicts` rows.
    table : DataFrame
        :func:`reports.compare.compare` rows (for the nDCG@10 level).

    Returns
    -------
    list of dict
        ``defense``, ``status`` (the worst over its contexts: fails, inconclusive, unknown,
        holds; baseline for defense none), ``label`` (the status in words) and ``text``
        (plain text, no markup).
    """
    ctx = [c for c in ("threat_model", "algo", "data") if c in v.columns]
    varying = [c for c in ("algo", "data") if c in v.columns and v[c].nunique(dropna=False) > 1]
    out = []
    for defense, rows in v.groupby("defense", sort=False, dropna=False):
        none = defense == "none"
        clauses, statuses = [], []
        groups = rows.groupby(ctx, sort=False, dropna=False) if ctx else [((), rows)]
        for key, sel in groups:
            c = dict(zip(ctx, key if isinstance(key, tuple) else (key,)))
            status, words = _verdict_phrase(sel, none)
            statuses.append(status)
            where = f"Under threat model {c['threat_model']}" if "threat_model" in c else ""
            where += "".join(f", {c[k]}" for k in varying)
            trows = table[table["defense"] == defense]
            for k in ctx:
                if k in trows.columns:
                    trows = trows[trows[k] == c[k]]
            parts = [f"{where}: {words}" if where else words[0].upper() + words[1:], _f1_phrase(sel),
                     _ndcg_phrase(trows, none), _epsilon_phrase(sel.iloc[0])]
            clauses.append(". ".join(p for p in parts if p))
        status = "baseline" if none else next(
            s for s in ("fails", "inconclusive", "unknown", "holds") if s in statuses)
        label = {"baseline": "no defense", "holds": "holds", "fails": "does not hold",
                 "inconclusive": "inconclusive", "unknown": "no baseline"}[status]
        out.append({"defense": str(defense), "status": status, "label": label,
                    "text": " / ".join(clauses) + "."})
    return out


def _scope_line(tables: dict[str, pd.DataFrame], table: pd.DataFrame) -> str:
    """What the audit covers, in one sentence (algorithms, data, defenses, click models, attacks)."""
    if table.empty:
        return ""
    def uniq(col):
        return [str(x) for x in dict.fromkeys(table[col].dropna())] if col in table else []
    attacks = uniq("attack")
    rand = [a for a in attacks if a.lower().startswith(RANDOM_PREFIX)]
    runs = tables.get("runs", pd.DataFrame())
    n_seeds = runs["seed"].nunique() if "seed" in runs else 0
    parts = [f"{', '.join(a.upper() for a in uniq('algo'))} on {', '.join(uniq('data'))}"
             if uniq("algo") and uniq("data") else "",
             *(f"{len(uniq(c))} {name}" for c, name in (("defense", "defenses"), ("click_model", "click models"))
               if uniq(c)), f"{len(attacks)} attacks"]
    text = "Audit of " + ", ".join(p for p in parts if p)
    if n_seeds:
        lo, hi = int(table["n"].min()), int(table["n"].max())
        text += (f" ({n_seeds} seed{'s' if n_seeds > 1 else ''}, {lo if lo == hi else f'{lo} to {hi}'} "
                 f"run{'s' if hi > 1 else ''} per cell)")
    if rand:
        text += f". The baseline: {', '.join(rand)}, guessing clicks at random"
    return text + (f". A defense holds when no informed attack beats random guessing by {MARGIN:.2f} "
                   "F1 or more (see Methods: Verdicts).")


COLLAPSE_ROWS = 20  # longer tables and lists are folded (<details>) in the HTML


def _cell(text, bold: bool = False) -> dict:
    return {"t": str(text), "b": bool(bold), "g": False}


def _group_rows(rows: list[list[dict]], n_keys: int) -> list[list[dict]]:
    """Blank the leading key cells that repeat the row above (up to the first that changes)
    and mark the rows where the first key changes (``g``: a separator above the row)."""
    if n_keys == 0:
        return rows
    previous = None
    for row in rows:
        keys = [c["t"] for c in row[:n_keys]]
        if previous is not None:
            same = 0
            while same < n_keys and keys[same] == previous[same]:
                row[same]["t"] = ""
                same += 1
            if same == 0:
                for c in row:
                    c["g"] = True
        previous = keys
    return rows


def _constants(df: pd.DataFrame, keep=()) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Split off the columns whose value is the same in every row (and not in ``keep``)."""
    if len(df) < 2:
        return df, []
    const = [c for c in df.columns if c not in keep and df[c].astype(str).nunique() == 1]
    pairs = [(HEADERS.get(c, c), str(df[c].iloc[0]) or "n/a") for c in const]
    return df.drop(columns=const), pairs


def _table(title: str, df: pd.DataFrame, note: str = "", keep=("defense",), group=(),
           download: dict | None = None) -> dict:
    """A report table: text cells (CIs folded in), constant columns moved to the caption,
    repeats of the leading ``group`` columns blanked."""
    text = with_ci(df) if not df.empty else df
    text, consts = _constants(text, keep)
    lead = 0
    while lead < len(group) and lead < len(text.columns) and text.columns[lead] == group[lead]:
        lead += 1
    rows = _group_rows([[_cell(v) for v in row] for row in text.itertuples(index=False)], lead)
    return {"kind": "table", "title": title, "note": note, "constants": consts, "download": download,
            "columns": [HEADERS.get(str(c), str(c)) for c in text.columns], "rows": rows,
            "collapsed": len(rows) > COLLAPSE_ROWS}


def _f1_pivot(table: pd.DataFrame) -> dict | None:
    """Attack rows x click-model columns of F1 (mean [CI]); the strongest informed attack of
    each defense and click model in bold."""
    if table.empty or "click_model" not in table.columns:
        return None
    clicks = list(dict.fromkeys(table["click_model"]))
    rowkeys = ["defense"] + [c for c in ("data", "algo", "threat_model")
                             if c in table.columns and table[c].nunique(dropna=False) > 1] + ["attack"]
    const = [(HEADERS.get(c, c), str(table[c].iloc[0])) for c in ("data", "algo", "threat_model")
             if c in table.columns and c not in rowkeys]
    n_const = table["n"].nunique() == 1
    if n_const:
        const.append(("runs per cell", str(int(table["n"].iloc[0]))))
    informed = ~table["attack"].astype(str).str.lower().str.startswith(RANDOM_PREFIX)
    best = set()
    for _, sel in table[informed & table["f1"].notna()].groupby(
            [k for k in rowkeys if k != "attack"] + ["click_model"], sort=False, dropna=False):
        best.add(sel["f1"].idxmax())
    rows = []
    for key, sel in table.groupby(rowkeys, sort=False, dropna=False):
        by_click = {r["click_model"]: (i, r) for i, r in sel.iterrows()}
        cells = [_cell(k) for k in (key if isinstance(key, tuple) else (key,))]
        for click in clicks:
            if click not in by_click:
                cells.append(_cell(""))
                continue
            i, r = by_click[click]
            text = ci_text(r["f1"], r["f1_ci_low"], r["f1_ci_high"])
            cells.append(_cell(text + ("" if n_const else f" (n={int(r['n'])})"), i in best))
        rows.append(cells)
    rows = _group_rows(rows, len(rowkeys) - 1)
    return {"kind": "table", "title": "Attack F1 by defense and click model", "constants": const,
            "download": None, "collapsed": False,
            "note": "F1 of each attack, mean [95 % CI] over seeds and folds (no interval from a "
                    "single run). Bold: the strongest informed attack under that defense and "
                    "click model. Precision, recall and the test against no defense are in the "
                    "detailed comparison below and in compare.csv.",
            "columns": [HEADERS.get(k, k) for k in rowkeys] + [f"F1 ({c})" for c in clicks],
            "rows": rows}


def _ordered(df: pd.DataFrame, cols) -> pd.DataFrame:
    """Stable sort by ``cols``, each in the order its values first appear (groups rows of a
    defense together without reordering defenses, click models or attacks)."""
    cols = [c for c in cols if c in df.columns]
    if not cols or df.empty:
        return df
    ranks = {f"_rank_{c}": df[c].map({v: i for i, v in enumerate(dict.fromkeys(df[c]))}) for c in cols}
    return df.assign(**ranks).sort_values(list(ranks), kind="stable").drop(columns=list(ranks))


def _audit_table(audits: pd.DataFrame | None) -> pd.DataFrame:
    if audits is None or audits.empty:
        return pd.DataFrame()
    keys = [c for c in ("defense", "claimed_epsilon", "claimed_scope", "threat_model", "mechanism",
                        "attack", "algo", "claimed_delta", "confidence") if c in audits.columns]
    agg = {c: (c, "mean") for c in ("epsilon_lb", "epsilon_point", "fpr", "fnr") if c in audits}
    if "n_trials" in audits:
        agg["n_trials"] = ("n_trials", "sum")
    if "claim_verdict" in audits:
        agg["verdict"] = ("claim_verdict", lambda s: ", ".join(sorted(set(map(str, s)))))
    agg["n_audits"] = (keys[0], "size")
    out = audits.groupby(keys, sort=False, dropna=False).agg(**agg).reset_index()
    if "mechanism" in out and "defense" in out and (out["mechanism"] == out["defense"]).all():
        out = out.drop(columns="mechanism")  # the defense's own mechanism: says nothing new
    first = [c for c in ("defense", "claimed_epsilon", "claimed_scope", "epsilon_lb", "epsilon_point",
                         "verdict") if c in out.columns]
    return out[first + [c for c in out.columns if c not in first]]


def _epsilon_table(eps: pd.DataFrame | None) -> pd.DataFrame:
    if eps is None or eps.empty:
        return pd.DataFrame()
    cols = [c for c in eps.columns if c != "run_key"]
    keys = [c for c in ("click_model", "levels", "length", "p") if c in cols]
    return eps[cols].drop_duplicates(subset=keys or None).reset_index(drop=True)


def _epsilon_section(eps: pd.DataFrame | None) -> dict | None:
    """FOLtR-ES epsilon by enumeration: p rows x click-model columns when that is a clean
    pivot (one value per cell, the bound independent of the click model), else long."""
    frame = _epsilon_table(eps)
    if frame.empty:
        return None
    title = "FOLtR-ES epsilon by enumeration"
    note = "Epsilon of the randomized-response click perturbation, by exact enumeration."
    body, consts = _constants(with_ci(frame), keep=("click_model", "p", "epsilon"))
    keys = [c for c in body.columns if c not in ("click_model", "epsilon", "theoretical")]
    pivotable = {"click_model", "p", "epsilon"} <= set(body.columns) and set(keys) <= {
        "levels", "length", "p"} and not body.duplicated(
        [*keys, "click_model"]).any() and ("theoretical" not in body or
                                           body.groupby(keys)["theoretical"].nunique().max() == 1)
    if not pivotable:
        table = _table(title, frame, note, keep=())
        return table
    clicks = list(dict.fromkeys(body["click_model"]))
    wide = body.set_index([*keys, "click_model"])["epsilon"].unstack("click_model")[clicks]
    if "theoretical" in body:
        wide["theoretical"] = body.groupby(keys, sort=False)["theoretical"].first()
    wide = wide.reset_index()
    return {"kind": "table", "title": title, "note": note, "constants": consts, "download": None,
            "collapsed": len(wide) > COLLAPSE_ROWS, "columns": [HEADERS.get(k, k) for k in keys] + [f"ε ({c})" for c in clicks]
                       + (["theoretical bound"] if "theoretical" in body else []),
            "rows": [[_cell("" if pd.isna(v) else v) for v in row] for row in wide.itertuples(index=False)]}


def _runs_summary(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    if runs.empty:
        return pd.DataFrame(), pd.DataFrame()
    counts = runs.groupby(["campaign", "status"], dropna=False).size().rename("runs").reset_index()
    failed = runs.loc[runs["status"] == "failed", ["run_key", "campaign", "error"]]
    return counts, failed


def _versions(runs: pd.DataFrame) -> list[tuple[str, str]]:
    seen: dict[str, set[str]] = {}
    for text in runs.get("env", pd.Series(dtype=object)).dropna():
        try:
            env = json.loads(text)
        except ValueError:
            continue
        for k, v in (env.items() if isinstance(env, dict) else []):
            if isinstance(v, (str, int, float)):
                seen.setdefault(str(k), set()).add(str(v))
    rows = [(f"{k} (runs)", ", ".join(sorted(v))) for k, v in sorted(seen.items())]
    for pkg in REPORT_PACKAGES:
        try:
            rows.append((f"{pkg} (report)", metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            pass
    return rows


def _configuration(runs: pd.DataFrame) -> list[dict]:
    """The runs' stored configurations, grouped by their set of keys (training runs, an
    epsilon table, ...): per group a ``title`` and ``(key, value)`` rows, the value shown
    once when the group's runs agree, else every value joined by ``|``."""
    groups: dict[tuple, list[dict]] = {}
    for text in runs.get("config", pd.Series(dtype=object)).dropna():
        try:
            config = json.loads(text)
        except ValueError:
            continue
        if isinstance(config, dict):
            groups.setdefault(tuple(sorted(map(str, config))), []).append(config)
    out = []
    for configs in (c for key, c in groups.items() if key):
        rows = []
        for k in configs[0]:
            shown = list(dict.fromkeys(v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                                       for v in (c[k] for c in configs)))
            rows.append((str(k), " | ".join(shown)))
        kind = f" ({configs[0]['kind']})" if "kind" in configs[0] else ""
        out.append({"title": f"{len(configs)} run{'s' if len(configs) > 1 else ''}{kind}", "rows": rows})
    return out


def _methods(tables: dict[str, pd.DataFrame], extra: dict | None) -> list[tuple[str, str]]:
    attacks = tables.get("attacks", pd.DataFrame())
    utility = tables.get("utility", pd.DataFrame())
    runs = tables.get("runs", pd.DataFrame())
    items = dict(DEFAULT_METHODS)
    data = [f"{d}" for d in pd.concat([attacks.get("data", pd.Series(dtype=object)),
                                       utility.get("data", pd.Series(dtype=object))]).dropna().unique()]
    folds = sorted({str(f) for f in attacks.get("fold", pd.Series(dtype=object)).dropna().unique()})
    if data:
        items["Data"] = f"{', '.join(data)}" + (f"; folds {', '.join(folds)}" if folds else "")
    zd = sorted({str(z) for z in attacks.get("zero_division", pd.Series(dtype=object)).dropna()}) or ["0"]
    items["Zero division"] = " ".join(f"{ZERO_DIVISION.get(z, f'policy {z!r} (as recorded)')}" for z in zd) + (
        " Macro averaging: mean over queries (as Pham); micro: pooled counts.")
    seeds = sorted({int(s) for s in runs.get("seed", pd.Series(dtype=float)).dropna()})
    if seeds:
        items["Seeds"] = ", ".join(map(str, seeds))
    items.update({str(k): str(v) for k, v in (extra or {}).items()})
    return list(items.items())


def _write_atomic(path: Path, data: bytes | str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def _csv(out_dir: Path, name: str, df: pd.DataFrame) -> dict:
    """Write ``name`` next to the report; return it as a download link (a ``data:`` URI)."""
    text = df.to_csv(index=False)
    _write_atomic(out_dir / name, text)
    uri = "data:text/csv;charset=utf-8;base64," + base64.b64encode(text.encode("utf-8")).decode("ascii")
    return {"name": name, "uri": uri}


def write_report(tables: dict[str, pd.DataFrame], out_dir: str | Path,
                 title: str = "fltr-audit privacy audit", methods: dict | None = None) -> Path:
    """Write ``report.html``, ``report.md``, ``plots/*.png`` and the comparison and verdict
    CSVs into ``out_dir``.

    Parameters
    ----------
    tables : dict of DataFrames
        As :func:`fltr_audit.store.load` returns them (missing tables are skipped).
    methods : dict, optional
        Extra or overriding entries of the methods section (name -> text).

    Returns
    -------
    Path
        The HTML report.
    """
    out_dir = Path(out_dir)
    (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    runs = tables.get("runs", pd.DataFrame())
    table = compare(tables)
    v = verdicts(tables)
    plots = []
    for name, (plot_title, fn) in PLOTS.items():
        png = fn(tables)
        if png is None:
            continue
        _write_atomic(out_dir / "plots" / f"{name}.png", png)
        plots.append({"title": plot_title, "caption": PLOT_CAPTIONS.get(name, ""),
                      "uri": data_uri(png), "file": f"plots/{name}.png"})
    counts, failed = _runs_summary(runs)
    sections = []
    if not table.empty:
        table = _ordered(table, ("defense", "data", "algo", "click_model", "threat_model"))
        pivot = _f1_pivot(table)
        if pivot is not None:
            sections.append(pivot)
        shown = table[[c for c in COMPARE_COLUMNS if c in table.columns]
                      + [f"{m}_ci_{e}" for m in ("precision", "recall", "f1", "ndcg10_delta")
                         for e in ("low", "high") if f"{m}_ci_{e}" in table.columns]]
        sections.append(_table("Privacy-utility comparison", shown,
                               "Mean [95 % CI] over seeds and folds; p vs none: Welch t-test of "
                               "F1 against the same attack without defense, Bonferroni-corrected. "
                               "Claimed and audited epsilon: see the epsilon audits.",
                               group=("defense", "click_model"),
                               download=_csv(out_dir, "compare.csv", table)))
    if not v.empty:
        sections.append({"kind": "list", "title": "Verdict details", "items": summary_sentences(v),
                         "collapsed": len(v) > 6,
                         "download": _csv(out_dir, "verdicts.csv", v),
                         "note": "One sentence per defense and context, with the test behind the "
                                 "verdict (see Methods: Verdicts)."})
    audits = _audit_table(tables.get("audits"))
    if not audits.empty:
        sections.append(_table("Epsilon audits", audits,
                               "Claimed epsilon and its scope (what one unit of privacy protects) "
                               "next to the audited lower bound and point estimate, mean over runs. "
                               "inf: no finite claim or estimate."))
    eps = _epsilon_section(tables.get("epsilon"))
    if eps is not None:
        sections.append(eps)
    for title_, frame in (("Runs", counts), ("Failed runs", failed)):
        if not frame.empty:
            sections.append(_table(title_, frame, keep=tuple(frame.columns)))
    context = {
        "title": title,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n_done": int((runs.get("status", pd.Series(dtype=object)) == "done").sum()),
        "n_failed": int((runs.get("status", pd.Series(dtype=object)) == "failed").sum()),
        "campaigns": [str(c) for c in runs.get("campaign", pd.Series(dtype=object)).dropna().unique()],
        "scope": _scope_line(tables, table),
        "summary": defense_summary(v, table) if not v.empty else [],
        "tables": sections,
        "plots": plots,
        "methods": _methods(tables, methods),
        "versions": _versions(runs),
        "configuration": _configuration(runs),
    }
    env = _environment()
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    _write_atomic(html_path, env.get_template("report.html.j2").render(context))
    _write_atomic(md_path, env.get_template("report.md.j2").render(context))
    return html_path
