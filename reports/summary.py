"""The report's summary: per defense two badges (leakage verdict, claim verdict) and one
paragraph, and the per-context verdict sentences, all from :func:`reports.compare.verdicts` rows.
"""

from __future__ import annotations

import pandas as pd

from reports.compare import fmt_number
from reports.sweeps import sweep_label, swept_in

LEAKAGE_ORDER = ("leaks", "inconclusive", "no measurable leakage")  # worst first
CLAIM_ORDER = ("violated", "outside scope", "untestable", "consistent", "no claim")
BADGE_CLASS = {"leaks": "bad", "inconclusive": "warn", "no measurable leakage": "good",
               "violated": "bad", "outside scope": "warn", "untestable": "warn", "consistent": "good",
               "no claim": "none"}


def _slice(r: pd.Series, rows: pd.DataFrame) -> str:
    """A row's click model, preceded by its algorithm setting where the rows hold several."""
    click = str(r["click_model"]) if "click_model" in rows and pd.notna(r["click_model"]) else ""
    if "setting" in rows and rows["setting"].nunique(dropna=False) > 1:
        click = f"{r['setting'] or 'default'} {click}".strip()
    return click


def _at(r: pd.Series, rows: pd.DataFrame) -> str:
    """`` at probe cohort 2``: a row's swept settings, where the rows sweep any."""
    where = sweep_label(r, swept_in(rows))
    return f" at {where}" if where else ""


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _leak_phrase(rows: pd.DataFrame) -> str:
    """``leaks with perfect clicks (olsr +0.30 [+0.29, +0.31]); no measurable leakage with ...``;
    slices without a measurement are named together with their reason."""
    parts = []
    for verdict in LEAKAGE_ORDER:
        sel = rows[rows["leakage_verdict"] == verdict]
        if sel.empty:
            continue
        items, unmeasured = [], {}
        for _, r in sel.iterrows():
            where, at = _slice(r, rows), _at(r, rows)
            if pd.isna(r.get("headline_attack")) or r.get("headline_attack") is None:
                unmeasured.setdefault(str(r["reason"]), []).append(f"{where} clicks{at}" if at else where)
                continue
            ci = (f" [{r['leakage_ci_low']:+.3f}, {r['leakage_ci_high']:+.3f}]"
                  if pd.notna(r.get("leakage_ci_low")) else "")
            items.append(f"{where} clicks{at} ({r['headline_attack']} {r['leakage']:+.3f}{ci})".strip())
        items += [f"{_names(wheres)}{'' if 'clicks' in wheres[0] else ' clicks'}: {reason}".strip()
                  for reason, wheres in unmeasured.items()]
        parts.append(f"{verdict} with {', '.join(items)}")
    return "; ".join(parts)


def _ndcg_phrase(rows: pd.DataFrame, none: bool) -> str:
    if "ndcg10" not in rows or rows["ndcg10"].isna().all():
        return ""
    levels = sorted({round(float(x), 3) for x in rows["ndcg10"].dropna()})
    level = fmt_number(levels[0]) if len(levels) == 1 else f"{fmt_number(levels[0])}–{fmt_number(levels[-1])}"
    if none:
        return f"Utility: nDCG@10 {level} (the reference)"
    deltas = sorted({round(float(x), 3) for x in rows["ndcg10_delta"].dropna()})
    if not deltas:
        return f"Utility: nDCG@10 {level}"
    cost = (("no cost" if abs(deltas[0]) < 0.0005 else f"{deltas[0]:+.3f}") if len(deltas) == 1
            else f"{deltas[0]:+.3f} to {deltas[-1]:+.3f}")
    return f"Utility: nDCG@10 {level} ({cost} against no defense)"


def _missable_phrase(rows: pd.DataFrame) -> str:
    """How small a leak the audit could have missed, where no leak was found."""
    quiet = rows[rows["leakage_verdict"] != "leaks"]
    missable = quiet["missable"].max()
    if quiet.empty or pd.isna(missable):
        return ""
    return (f"Where no leak was found, leaks above {missable:.3f} AUC are ruled out (95 % upper bound); "
            "smaller ones could have been missed")


def _worst(values, order) -> str | None:
    present = [v for v in order if v in set(values)]
    return present[0] if present else None


def defense_leakage(rows: pd.DataFrame, alpha: float = 0.05) -> str | None:
    """One defense's leakage badge over its contexts (click models, threat models): ``leaks``
    only if the smallest Holm-adjusted p of a leaking context stays below ``alpha`` after
    Bonferroni over the contexts (each context is its own family of attacks); ``no measurable
    leakage`` only if every context reads so; else ``inconclusive``. Rows without
    ``p_adjusted`` keep their own verdicts (the worst one)."""
    verdicts = rows["leakage_verdict"]
    if "p_adjusted" not in rows or not (verdicts == "leaks").any():
        return _worst(verdicts, LEAKAGE_ORDER)
    p = pd.to_numeric(rows["p_adjusted"], errors="coerce")
    if p[verdicts == "leaks"].isna().any():
        return "leaks"
    if float(p.min()) * len(rows) < alpha:
        return "leaks"
    return "inconclusive"


def _neighbours(rows: pd.DataFrame, claim: str) -> str:
    """`` (worst-case neighbours)``: the neighbours the shown claim verdict rests on, if recorded."""
    if "claim_neighbours" not in rows or claim == "no claim":
        return ""
    kinds = rows.loc[rows["claim_verdict"] == claim, "claim_neighbours"].dropna()
    kinds = [k for k in dict.fromkeys(kinds) if k != "audited"]
    return f" ({', '.join(kinds)} neighbours)" if kinds else ""


def defense_summary(v: pd.DataFrame) -> list[dict]:
    """One summary item per defense: ``defense``, ``badges`` (list of (css class, label): the
    defense's leakage verdict over its contexts, corrected over them (``defense_leakage``), then
    its claim verdict) and ``text``: per threat
    model the leakage verdict with the strongest attack's leakage per click model, the smallest
    leak the audit could have missed, the nDCG@10 cost and the claim in words."""
    ctx = [c for c in ("threat_model", "algo", "data") if c in v.columns]
    varying = [c for c in ("algo", "data") if c in v.columns and v[c].nunique(dropna=False) > 1]
    out = []
    for defense, rows in v.groupby("defense", sort=False, dropna=False):
        clauses = []
        for key, sel in rows.groupby(ctx, sort=False, dropna=False) if ctx else [((), rows)]:
            c = dict(zip(ctx, key if isinstance(key, tuple) else (key,)))
            where = f"Under threat model {c['threat_model']}" if "threat_model" in c else "Leakage"
            where += "".join(f", {c[k]}" for k in varying)
            miss = _missable_phrase(sel)
            claim = next((t for t in sel.get("claim_text", pd.Series(dtype=object)) if t), "")
            parts = [f"{where}: {_leak_phrase(sel)}", miss, _ndcg_phrase(sel, defense == "none"), claim]
            clauses.append(". ".join(p for p in parts if p))
        leak = defense_leakage(rows)
        claim = _worst(rows.get("claim_verdict", pd.Series(dtype=object)).dropna(), CLAIM_ORDER)
        badges = [(BADGE_CLASS[leak], leak)] if leak else []
        badges.append((BADGE_CLASS[claim], f"claim{_neighbours(rows, claim)}: {claim}") if claim
                      else ("none", "no audit"))
        out.append({"defense": str(defense), "badges": badges, "text": " / ".join(clauses) + "."})
    return out


def verdict_sentences(v: pd.DataFrame) -> list[str]:
    """One sentence per defense and context: both verdicts with the numbers and tests behind them."""
    out = []
    swept = swept_in(v)
    for _, r in v.iterrows():
        ctx = [f"{r['click_model']} clicks"] if pd.notna(r.get("click_model")) else []
        ctx += [sweep_label(r, swept)] if swept else []
        ctx += [str(r[c]) for c in ("setting", "algo", "data") if c in r and pd.notna(r[c]) and str(r[c])]
        s = f"{r['defense']} under threat model {r.get('threat_model', 'n/a')} ({', '.join(ctx)}): {r['leakage_text']}"
        if r.get("claim_text"):
            s += f". {r['claim_text']}"
        out.append(s + ".")
    return out


def scope_line(tables: dict[str, pd.DataFrame], table: pd.DataFrame, min_effect: float) -> str:
    """What the audit covers, in one sentence, and how its leakage verdicts are reached."""
    if table.empty:
        return ""

    def uniq(col):
        return [str(x) for x in dict.fromkeys(table[col].dropna())] if col in table else []

    attacks = uniq("attack")
    reference = [str(a) for a in dict.fromkeys(table.loc[table["reference"].astype(bool), "attack"])]
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
    if reference:
        text += f". Reference attacks that do not read the message: {', '.join(reference)}"
    return text + (". Leakage is an attack's AUC against the user's real clicks minus its AUC against "
                   "clicks redrawn from the same click model on the same list; a defense leaks when a "
                   "Holm-corrected one-sided test finds leakage above zero, and shows no measurable "
                   f"leakage when every informed attack's 95 % upper bound is below {min_effect:g} "
                   "(see Methods).")
