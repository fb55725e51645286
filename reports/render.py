"""The audit report: ``report.html`` (self-contained) and ``report.md`` from result tables.

The summary sentences come from :func:`reports.compare.verdicts`; the HTML embeds every
plot as a ``data:`` URI and references nothing outside itself; jinja2 autoescaping keeps
anything read from a data file (doc ids, campaign names, config strings) from injecting
markup into either file.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import jinja2
from markupsafe import Markup
import pandas as pd

from reports.compare import MARGIN, compare, verdicts, with_ci
from reports.plots import PLOTS, data_uri

REPORT_PACKAGES = ("fltr-audit", "numpy", "scipy", "pandas", "statsmodels", "scikit-learn",
                   "matplotlib", "jinja2")
COMPARE_COLUMNS = ("defense", "data", "algo", "click_model", "threat_model", "attack", "n",
                   "precision", "recall", "f1", "p_adjusted", "claimed_epsilon", "epsilon_lb",
                   "claimed_scope", "ndcg10", "ndcg10_delta")
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


VERDICT_WORDS = {
    True: ("holds against click guessing", "click guessing does no better than random"),
    False: ("does not hold against click guessing", "click guessing succeeds"),
    None: ("is inconclusive against click guessing", "inconclusive whether click guessing beats random"),
}


def summary_sentences(v: pd.DataFrame) -> list[str]:
    """Plain-words verdicts, one per defense and context, from :func:`verdicts` rows."""
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


def _table(title: str, df: pd.DataFrame, note: str = "") -> dict:
    text = with_ci(df) if not df.empty else df
    return {"title": title, "note": note, "columns": [str(c) for c in text.columns],
            "rows": [[str(v) for v in row] for row in text.itertuples(index=False)]}


def _audit_table(audits: pd.DataFrame | None) -> pd.DataFrame:
    if audits is None or audits.empty:
        return pd.DataFrame()
    keys = [c for c in ("algo", "defense", "mechanism", "attack", "threat_model", "claimed_epsilon",
                        "claimed_delta", "claimed_scope") if c in audits.columns]
    agg = {c: (c, "mean") for c in ("epsilon_point", "epsilon_lb", "fpr", "fnr") if c in audits}
    if "verdict" in audits:
        agg["verdict"] = ("verdict", lambda s: ", ".join(sorted(set(map(str, s)))))
    agg["n_audits"] = (keys[0], "size")
    return audits.groupby(keys, sort=False, dropna=False).agg(**agg).reset_index()


def _epsilon_table(eps: pd.DataFrame | None) -> pd.DataFrame:
    if eps is None or eps.empty:
        return pd.DataFrame()
    cols = [c for c in eps.columns if c != "run_key"]
    keys = [c for c in ("click_model", "levels", "length", "p") if c in cols]
    return eps[cols].drop_duplicates(subset=keys or None).reset_index(drop=True)


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


def write_report(tables: dict[str, pd.DataFrame], out_dir: str | Path,
                 title: str = "fltr-audit privacy audit", methods: dict | None = None) -> Path:
    """Write ``report.html``, ``report.md`` and ``plots/*.png`` into ``out_dir``.

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
        plots.append({"title": plot_title, "uri": data_uri(png), "file": f"plots/{name}.png"})
    counts, failed = _runs_summary(runs)
    sections = []
    if not table.empty:
        shown = table[[c for c in COMPARE_COLUMNS if c in table.columns]
                      + [f"{m}_ci_{e}" for m in ("precision", "recall", "f1", "ndcg10_delta")
                         for e in ("low", "high") if f"{m}_ci_{e}" in table.columns]]
        sections.append(_table("Privacy-utility comparison", shown,
                               "Mean [95 % CI] over seeds and folds; p_adjusted: Welch t-test of "
                               "F1 against defense none, Bonferroni-corrected."))
    for title_, frame, note in (
            ("Verdicts", v, "One row per defense and context (see Methods: Verdicts)."),
            ("Epsilon audits", _audit_table(tables.get("audits")), "Mean over runs."),
            ("FOLtR-ES epsilon by enumeration", _epsilon_table(tables.get("epsilon")), ""),
            ("Runs", counts, ""),
            ("Failed runs", failed, "")):
        if not frame.empty:
            sections.append(_table(title_, frame, note))
    context = {
        "title": title,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n_done": int((runs.get("status", pd.Series(dtype=object)) == "done").sum()),
        "n_failed": int((runs.get("status", pd.Series(dtype=object)) == "failed").sum()),
        "campaigns": [str(c) for c in runs.get("campaign", pd.Series(dtype=object)).dropna().unique()],
        "summary": summary_sentences(v) if not v.empty else [],
        "tables": sections,
        "plots": plots,
        "methods": _methods(tables, methods),
        "versions": _versions(runs),
    }
    env = _environment()
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    _write_atomic(html_path, env.get_template("report.html.j2").render(context))
    _write_atomic(md_path, env.get_template("report.md.j2").render(context))
    return html_path
