"""Report tables as template-ready dicts: text cells with intervals folded in, columns that are
the same in every row moved to the caption, repeated keys blanked, the strongest attack in bold.
"""

from __future__ import annotations

import pandas as pd

import numpy as np

from reports.claims import bound_text, claim_summary, pooled_audits
from reports.compare import ci_text, with_ci
from reports.sweeps import swept_in

HEADERS = {  # column name -> table header
    "click_model": "click model", "threat_model": "threat model", "n": "runs", "f1": "F1",
    "ndcg10": "nDCG@10", "ndcg10_delta": "ΔnDCG@10 vs none", "claimed_epsilon": "claimed ε",
    "claimed_delta": "claimed δ", "claimed_scope": "claimed scope", "audited_scope": "audited on",
    "epsilon_lb": "audited ε lower bound", "epsilon_point": "ε point estimate", "n_trials": "trials",
    "fpr": "FPR", "fnr": "FNR", "epsilon": "ε", "theoretical": "theoretical bound", "auc": "AUC",
    "auc_counterfactual": "AUC counterfactual", "leakage": "leakage (AUC)",
    "leakage_normalized": "leakage normalized", "advantage": "advantage",
    "tpr_at_fpr_0_01": "TPR at FPR 1 %", "n_lists": "lists", "leakage_verdict": "leakage verdict",
    "claim_verdict": "claim verdict", "runs_pooled": "runs pooled", "tightness": "tightness (lb / claim)",
    "audit_attack": "audit attack",
}


def ordered(df: pd.DataFrame, cols) -> pd.DataFrame:
    """Stable sort by ``cols``, each in the order its values first appear (groups rows of a
    defense together without reordering defenses, click models or attacks)."""
    cols = [c for c in cols if c in df.columns]
    if not cols or df.empty:
        return df
    ranks = {f"_rank_{c}": df[c].map({v: i for i, v in enumerate(dict.fromkeys(df[c]))}) for c in cols}
    return df.assign(**ranks).sort_values(list(ranks), kind="stable").drop(columns=list(ranks))


COLLAPSE_ROWS = 20  # longer tables and lists are folded (<details>) in the HTML


def cell(text, bold: bool = False) -> dict:
    return {"t": str(text), "b": bool(bold), "g": False}


def group_rows(rows: list[list[dict]], n_keys: int) -> list[list[dict]]:
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


def constants(df: pd.DataFrame, keep=()) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Split off the columns whose value is the same in every row (and not in ``keep``)."""
    if len(df) < 2:
        return df, []
    const = [c for c in df.columns if c not in keep and df[c].astype(str).nunique() == 1]
    pairs = [(HEADERS.get(c, c), str(df[c].iloc[0]) or "n/a") for c in const]
    return df.drop(columns=const), pairs


def table_section(title: str, df: pd.DataFrame, note: str = "", keep=("defense",), group=(),
                  download: dict | None = None) -> dict:
    """A report table: text cells (CIs folded in), constant columns moved to the caption,
    repeats of the leading ``group`` columns blanked."""
    text = with_ci(df) if not df.empty else df
    text, consts = constants(text, keep)
    lead = 0
    while lead < len(group) and lead < len(text.columns) and text.columns[lead] == group[lead]:
        lead += 1
    rows = group_rows([[cell(v) for v in row] for row in text.itertuples(index=False)], lead)
    return {"kind": "table", "title": title, "note": note, "constants": consts, "download": download,
            "columns": [HEADERS.get(str(c), str(c)) for c in text.columns], "rows": rows,
            "collapsed": len(rows) > COLLAPSE_ROWS}


def _epsilon_table(eps: pd.DataFrame | None) -> pd.DataFrame:
    if eps is None or eps.empty:
        return pd.DataFrame()
    cols = [c for c in eps.columns if c != "run_key"]
    keys = [c for c in ("click_model", "levels", "length", "p") if c in cols]
    return eps[cols].drop_duplicates(subset=keys or None).reset_index(drop=True)


def epsilon_section(eps: pd.DataFrame | None) -> dict | None:
    """FOLtR-ES epsilon by enumeration: p rows x click-model columns when that is a clean
    pivot (one value per cell, the bound independent of the click model), else long."""
    frame = _epsilon_table(eps)
    if frame.empty:
        return None
    title = "FOLtR-ES epsilon by enumeration"
    note = "Epsilon of the randomized-response click perturbation, by exact enumeration."
    body, consts = constants(with_ci(frame), keep=("click_model", "p", "epsilon"))
    keys = [c for c in body.columns if c not in ("click_model", "epsilon", "theoretical")]
    pivotable = {"click_model", "p", "epsilon"} <= set(body.columns) and set(keys) <= {
        "levels", "length", "p"} and not body.duplicated(
        [*keys, "click_model"]).any() and ("theoretical" not in body or
                                           body.groupby(keys)["theoretical"].nunique().max() == 1)
    if not pivotable:
        return table_section(title, frame, note, keep=())
    clicks = list(dict.fromkeys(body["click_model"]))
    wide = body.set_index([*keys, "click_model"])["epsilon"].unstack("click_model")[clicks]
    if "theoretical" in body:
        wide["theoretical"] = body.groupby(keys, sort=False)["theoretical"].first()
    wide = wide.reset_index()
    return {"kind": "table", "title": title, "note": note, "constants": consts, "download": None,
            "collapsed": len(wide) > COLLAPSE_ROWS, "columns": [HEADERS.get(k, k) for k in keys] + [f"ε ({c})" for c in clicks]
                       + (["theoretical bound"] if "theoretical" in body else []),
            "rows": [[cell("" if pd.isna(v) else v) for v in row] for row in wide.itertuples(index=False)]}


def runs_summary(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run counts per campaign and status, and the failed runs with their errors."""
    if runs.empty:
        return pd.DataFrame(), pd.DataFrame()
    counts = runs.groupby(["campaign", "status"], dropna=False).size().rename("runs").reset_index()
    failed = runs.loc[runs["status"] == "failed", ["run_key", "campaign", "error"]]
    return counts, failed




def leakage_pivot(table: pd.DataFrame) -> dict | None:
    """Attack rows x click-model columns of leakage (mean [CI]); the strongest informed attack
    of each defense and click model in bold; reference attacks marked."""
    if table.empty or "click_model" not in table.columns or table["leakage"].isna().all():
        return None
    clicks = list(dict.fromkeys(table["click_model"]))
    rowkeys = ["defense"] + [c for c in ("data", "algo", "setting", "threat_model")
                             if c in table.columns and table[c].nunique(dropna=False) > 1] + swept_in(table) + ["attack"]
    const = [(HEADERS.get(c, c), str(table[c].iloc[0])) for c in ("data", "algo", "threat_model")
             if c in table.columns and c not in rowkeys]
    informed = ~table["reference"].astype(bool)
    best = set()
    for _, sel in table[informed & table["leakage"].notna()].groupby(
            [k for k in rowkeys if k != "attack"] + ["click_model"], sort=False, dropna=False):
        best.add(sel["leakage"].idxmax())
    rows = []
    for key, sel in table.groupby(rowkeys, sort=False, dropna=False):
        by_click = {r["click_model"]: (i, r) for i, r in sel.iterrows()}
        key = list(key if isinstance(key, tuple) else (key,))
        if bool(sel["reference"].any()):
            key[-1] = f"{key[-1]} (reference)"
        cells = [cell(k) for k in key]
        for click in clicks:
            if click not in by_click:
                cells.append(cell(""))
                continue
            i, r = by_click[click]
            cells.append(cell(ci_text(r["leakage"], r["leakage_ci_low"], r["leakage_ci_high"]), i in best))
        rows.append(cells)
    rows = group_rows(rows, len(rowkeys) - 1)
    bases = ", ".join(sorted({str(b) for b in table["basis"].dropna()}))
    return {"kind": "table", "title": "Leakage by defense and click model", "constants": const,
            "download": None, "collapsed": False,
            "note": "AUC of each attack against the real clicks minus its AUC against counterfactual "
                    "clicks (same click model, same list, same message), mean [95 % CI] over lists "
                    f"pooled over seeds and folds ({bases}). 0: the attack learns nothing from the "
                    "message. Bold: the strongest informed attack under that defense and click model.",
            "columns": [HEADERS.get(k, k) for k in rowkeys] + [f"leakage ({c})" for c in clicks],
            "rows": rows}


def audit_table(pooled: pd.DataFrame) -> pd.DataFrame:
    """Pooled epsilon audits as shown: the bound in words (trial limits named), the verdict."""
    if pooled.empty:
        return pd.DataFrame()
    out = pooled.assign(epsilon_lb=[bound_text(lb, lim, n) for lb, lim, n in zip(
        pooled["epsilon_lb"], pooled["trial_limited"], pooled["n_trials"])])
    if "mechanism" in out and (out["mechanism"] == out["defense"]).all():
        out = out.drop(columns="mechanism")  # the defense's own mechanism: says nothing new
    first = [c for c in ("defense", "claim_verdict", "claimed_epsilon", "claimed_scope", "audited_scope",
                         "epsilon_lb", "tightness", "epsilon_point", "attack", "test", "neighbours", "runs",
                         "n_trials", "fp", "fn") if c in out.columns]
    return out[first].rename(columns={"attack": "audit_attack", "runs": "runs_pooled"})


def _number(v, fmt: str = ".2f") -> str:
    if v is None or pd.isna(v):
        return ""
    return "inf" if np.isinf(v) or v >= 1e300 else "0" if v == 0 else format(v, fmt)


def _span(values: pd.Series, fmt: str = ".2f") -> str:
    """One value, or the range ``a–b`` when runs differ."""
    values = values.dropna()
    if values.empty:
        return ""
    low, high = _number(values.min(), fmt), _number(values.max(), fmt)
    return low if low == high else f"{low}–{high}"


NEIGHBOURS = ("worst-case", "natural")
RUN_PRIVACY = ("epsilon_server", "participations_max", "epsilon_observer", "delta_total")
"""The privacy-over-the-run columns of the claims table (``fltr_audit.store.records.RunPrivacy``)."""


def claims_table(audits: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    """One row per ``keys`` group: the claim per round and composed over the run
    (against the server: the worst user's ``epsilon_server`` and its realized participations;
    against an observer of the released models: ``epsilon_observer``; at ``delta_total``), and per neighbour kind the
    pooled audited bound (:func:`reports.claims.claim_summary`, trial limits named), its
    tightness (bound / claim) and the trial ceiling (largest bound the trial count can show)."""
    pooled = pooled_audits(audits, keys)
    if pooled.empty:
        return pd.DataFrame()
    keys = [k for k in keys if k in pooled.columns]
    audits = audits.assign(neighbours=audits["neighbours"].fillna("audited")) if "neighbours" in audits \
        else audits.assign(neighbours="audited")
    pooled = pooled.assign(neighbours=pooled["neighbours"].fillna("audited")) if "neighbours" in pooled \
        else pooled.assign(neighbours="audited")
    overall = claim_summary(pooled, keys)
    per = claim_summary(pooled, keys + ["neighbours"])
    kinds = [k for k in NEIGHBOURS if k in set(per["neighbours"])] + \
        [k for k in dict.fromkeys(per["neighbours"]) if k not in NEIGHBOURS]
    rows = []
    for _, top in overall.iterrows():
        match = np.logical_and.reduce([audits[k].astype(str) == str(top[k]) for k in keys]) if keys else \
            np.ones(len(audits), bool)
        runs = audits[match]
        row = {k: top[k] for k in keys}
        row.update({"claim_verdict": top["claim_verdict"], "claimed_epsilon": _number(top["claimed_epsilon"]),
                    "claimed_delta": _number(top["claimed_delta"], ".0e"),
                    "claimed_scope": top["claimed_scope"]})
        for col in RUN_PRIVACY:
            if col in runs:
                row[col] = _span(runs[col], {"delta_total": ".0e", "participations_max": ".0f"}.get(col, ".2f"))
        sel = per[np.logical_and.reduce([per[k].astype(str) == str(top[k]) for k in keys])] if keys else per
        for kind in kinds:
            hit = sel[sel["neighbours"] == kind]
            if hit.empty:
                row.update({f"lb_{kind}": "not audited", f"tightness_{kind}": "", f"ceiling_{kind}": ""})
                continue
            h = hit.iloc[0]
            row.update({f"lb_{kind}": bound_text(h["epsilon_lb"], h["trial_limited"], h["n_trials"]),
                        f"tightness_{kind}": "outside scope" if h["claim_verdict"] == "outside scope"
                        else _number(h["tightness"]),
                        f"ceiling_{kind}": f"{_number(h['ceiling'])} ({int(h['n_trials']):,} trials)"})
        rows.append(row)
    return pd.DataFrame(rows)


CLAIM_HEADERS = {"claimed_epsilon": "claimed ε per round", "claimed_delta": "claimed δ",
                 "epsilon_server": "ε over the run vs the server (worst user)",
                 "participations_max": "its participations",
                 "epsilon_observer": "ε vs an observer of the models (sampling-amplified)", "delta_total": "at δ"}


def claims_headers(columns) -> dict:
    """Table headers of :func:`claims_table` columns (the neighbour kind in each)."""
    out = {}
    for c in columns:
        for prefix, name in (("lb_", "audited ε ({})"), ("tightness_", "tightness ({})"),
                             ("ceiling_", "trial ceiling ({})")):
            if c.startswith(prefix):
                out[c] = name.format(c[len(prefix):])
    return {**CLAIM_HEADERS, **out}


STRENGTH_METRICS = {"auc": "AUC", "tpr_at_fpr_0_01": "TPR at FPR 1 %", "leakage": "leakage (AUC)",
                    "advantage": "advantage", "f1": "F1"}
BAYES = ("bayes", "bayes-approx", "bayes-uniform", "bayes-uniform-approx")
"""The Bayes-posterior attacks (``attacks.bayes``): the AUC ceiling of passive attacks under the model they assume."""


def strongest_per_metric(table: pd.DataFrame) -> pd.DataFrame:
    """Per defense (and data, algorithm, setting, threat model, click model where the table holds
    several) and metric: the informed attack with the largest mean (the Bayes attacks compete
    too), the best Bayes-posterior value (``BAYES``) and the best reference attack's. No single
    attack is crowned: each metric names its own. The Bayes column is a ceiling on AUC, not on
    leakage: its click-model prior also predicts the counterfactual clicks."""
    metrics = [m for m in STRENGTH_METRICS if m in table.columns and table[m].notna().any()]
    if table.empty or not metrics or "attack" not in table.columns:
        return pd.DataFrame()
    keys = ["defense"] + [c for c in ("data", "algo", "setting", "threat_model", "click_model")
                          if c in table.columns and table[c].nunique(dropna=False) > 1]
    reference = table["reference"].astype(bool) if "reference" in table else pd.Series(False, index=table.index)
    bayes = table["attack"].isin(BAYES)
    rows = []
    for group, sel in table.groupby(keys, sort=False, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        for m in metrics:
            vals = sel[m]
            informed = vals[~reference[sel.index]].dropna()
            refs = vals[reference[sel.index]].dropna()
            posterior = vals[bayes[sel.index]].dropna()
            row = dict(zip(keys, group), metric=STRENGTH_METRICS[m])
            if informed.empty:
                row.update(strongest="", value="")
            else:
                best = informed.idxmax()
                row.update(strongest=sel.at[best, "attack"], value=_number(informed[best], ".3f"))
            row["bayes"] = _number(posterior.max(), ".3f") if not posterior.empty else ""
            row["reference"] = (f"{sel.at[refs.idxmax(), 'attack']} {_number(refs.max(), '.3f')}"
                                if not refs.empty else "")
            rows.append(row)
    out = pd.DataFrame(rows)
    return out if (out["bayes"] != "").any() else out.drop(columns="bayes")


def strongest_wide(long: pd.DataFrame) -> pd.DataFrame:
    """:func:`strongest_per_metric` as one row per group: per metric "attack value"; the Bayes
    posterior's and the best reference values joined "a / b / ..." in metric order (the reference
    attack named once when the same one is best on every metric)."""
    keys = [c for c in long.columns if c not in ("metric", "strongest", "value", "bayes", "reference")]
    metrics = list(dict.fromkeys(long["metric"]))
    rows = []
    for group, sel in long.groupby(keys, sort=False, dropna=False):
        sel = sel.set_index("metric").reindex(metrics)
        row = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        row.update({m: f"{sel.at[m, 'strongest']} {sel.at[m, 'value']}".strip() for m in metrics})
        if "bayes" in sel:
            row["Bayes posterior"] = " / ".join(v or "–" for v in sel["bayes"].fillna(""))
        refs = sel["reference"].fillna("")
        names = {r.rsplit(" ", 1)[0] for r in refs if r}
        if len(names) == 1:
            row["best reference"] = f"{names.pop()}: " + " / ".join(r.rsplit(" ", 1)[-1] if r else "–" for r in refs)
        else:
            row["best reference"] = " / ".join(r or "–" for r in refs)
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.rename(columns={"Bayes posterior": "Bayes posterior (metrics in column order)",
                               "best reference": "best reference (metrics in column order)"})
