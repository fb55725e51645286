"""What a sweep shows: for each numeric axis a campaign sweeps (a run setting such as the probe
cohort, or a defense parameter such as the claimed ε), the verdict's statistic drawn against it
with its interval -- leakage, the audited ε bound, nDCG@10 -- one line per defense in its colour,
one marker per click model, and one sentence that says what the sweep shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from reports.figure import label, png
from reports.leakage import MIN_EFFECT
from reports.style import visual_code
from reports.summary import LEAKAGE_ORDER
from reports.sweeps import NUMERIC, axis_name, defense_axes, swept_in

PANELS = (("leakage", "leakage of the deciding attack\n(AUC real - counterfactual, simultaneous 95 % CI)"),
          ("epsilon_lb", "audited ε, 95 % lower bound"),
          ("ndcg10", "ranker nDCG@10"))


def _lines(v: pd.DataFrame, axis: str | None) -> list[tuple[str, str, pd.DataFrame]]:
    """(line label, colour key, rows with an ``x`` column) per line of one axis: per defense for a
    run setting (``axis``), per family of defense strings for a defense parameter (``axis`` None)."""
    if axis is not None:
        rows = v.assign(x=pd.to_numeric(v[axis], errors="coerce"))
        return [(str(d), str(d), sel) for d, sel in rows.groupby("defense", sort=False)]
    out = []
    for _, (parameter, family, members) in defense_axes(v["defense"]).items():
        sel = v[v["defense"].isin(members)]
        out.append((family, next(iter(members)), sel.assign(x=sel["defense"].map(members))))
    return out


def _verdict_at(sel: pd.DataFrame) -> pd.DataFrame:
    """Per x: the largest leakage over the click models and the worst leakage verdict."""
    rank = {v: i for i, v in enumerate(LEAKAGE_ORDER)}
    rows = []
    for x, at in sel.groupby("x", sort=True):
        worst = min(at["leakage_verdict"].dropna(), key=lambda v: rank.get(v, 9), default="n/a")
        rows.append({"x": x, "leakage": at["leakage"].max(), "verdict": worst})
    return pd.DataFrame(rows)


def _points(values) -> str:
    names = [f"{x:g}" for x in values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def sweep_sentence(lines: list[tuple[str, str, pd.DataFrame]], name: str) -> str:
    """One sentence: per line, the leakage at the ends of the sweep and where each verdict holds."""
    parts = []
    for title, _, sel in lines:
        at = _verdict_at(sel.dropna(subset=["x"]))
        if at.empty or at["leakage"].isna().all():
            continue
        first, last = at.iloc[0], at.iloc[-1]
        trend = ("falls" if last["leakage"] < first["leakage"] else
                 "rises" if last["leakage"] > first["leakage"] else "stays")
        where = "; ".join(f"{verdict} at {name} {_points(at.loc[at['verdict'] == verdict, 'x'])}"
                          for verdict in dict.fromkeys(at["verdict"]))
        parts.append(f"{title}'s leakage {trend} from {first['leakage']:+.3f} at {name} {first['x']:g} to "
                     f"{last['leakage']:+.3f} at {last['x']:g} ({where})")
    return (f"Swept over {name}: " + "; ".join(parts) + ".") if parts else ""


def _draw(ax, column: str, lines, code, claimed: bool) -> bool:
    """One panel: per line and click model (marker) the statistic against x, each point with its
    interval in its defense's colour (a family of defense strings: a grey line through its members)."""
    drawn = False
    for _, colour_key, sel in lines:
        for click, part in sel.groupby("click_model", sort=False) if "click_model" in sel else [(None, sel)]:
            part = part.dropna(subset=["x", column]).sort_values("x")
            part = part[np.isfinite(part[column].to_numpy(dtype=np.float64))]
            if column != "leakage":  # one value per defense and x: a claim and a ranker are the defense's
                part = part.drop_duplicates("x")
            if part.empty:
                continue
            colours = [code.colour(d) for d in part["defense"]]
            if len(set(colours)) > 1:
                ax.plot(part["x"], part[column], color="0.6", linewidth=1.0, zorder=1)
            for (_, r), colour in zip(part.iterrows(), colours):
                low, high = r.get(f"{column}_ci_low"), r.get(f"{column}_ci_high")
                err = None if low is None or pd.isna(low) else [[max(r[column] - low, 0)], [max(high - r[column], 0)]]
                ax.errorbar([r["x"]], [r[column]], yerr=err, color=colour, marker=code.marker(click), capsize=3,
                            markersize=6, lolims=column == "epsilon_lb", zorder=2)
            if len(set(colours)) == 1:
                ax.plot(part["x"], part[column], color=colours[0], linewidth=1.2, zorder=1)
            drawn = True
    if column == "leakage":
        ax.axhline(0.0, color="0.3", linewidth=0.8)
    if claimed and column == "epsilon_lb":
        xs = pd.concat([sel["x"] for _, _, sel in lines]).dropna()
        grid = np.geomspace(max(xs.min(), 1e-6), xs.max(), 50)
        ax.plot(grid, grid, color="0.5", linestyle="--", linewidth=0.8)  # bound = claim
    return drawn


def _figure(lines, name: str, claimed: bool, code, min_effect: float) -> bytes | None:
    columns = [(c, t) for c, t in PANELS if any(c in sel and sel[c].notna().any() for _, _, sel in lines)]
    if not columns:
        return None
    fig = Figure(figsize=(4.6 * len(columns), 4.0))
    xs = pd.concat([sel["x"] for _, _, sel in lines]).dropna()
    drawn = False
    for i, (column, title) in enumerate(columns):
        ax = fig.add_subplot(1, len(columns), i + 1)
        drawn |= _draw(ax, column, lines, code, claimed)
        if column == "leakage":
            ax.axhline(min_effect, color="0.5", linestyle=":", linewidth=0.8)
        if len(xs) and xs.min() > 0 and xs.max() / xs.min() >= 10:
            ax.set_xscale("log")
        ax.set_xticks(sorted(set(xs)), [f"{x:g}" for x in sorted(set(xs))])
        ax.minorticks_off()
        ax.set_xlabel(name)
        ax.set_ylabel(title, fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Against the swept {name} (colour: defense; marker: click model)", fontsize=10)
    fig.tight_layout()
    return png(fig) if drawn else None


def sweep_plots(tables: dict[str, pd.DataFrame], v: pd.DataFrame,
                min_effect: float = MIN_EFFECT) -> list[dict]:
    """One figure per numeric swept axis: ``{"title", "caption", "png", "sentence"}``."""
    if v is None or v.empty:
        return []
    code = visual_code(tables)
    axes = [(a, axis_name(a)) for a in swept_in(v) if a in NUMERIC or a.startswith("param_")]
    out = [(name, name, _lines(v, axis), False) for axis, name in axes]
    for family, (parameter, _, _) in defense_axes(v["defense"]).items():
        lines = [line for line in _lines(v, None) if line[0] == family]
        out.append((f"{axis_name(parameter)} of {family}", axis_name(parameter), lines, parameter == "eps"))
    figures = []
    for name, short, lines, claimed in out:
        picture = _figure(lines, name, claimed, code, min_effect)
        if picture is None:
            continue
        sentence = sweep_sentence(lines, short)
        figures.append({"title": f"Sweep: {name}", "png": picture, "sentence": sentence,
                        "caption": f"{sentence} Each point is one setting (seeds and folds pooled) with its "
                                   "interval: leakage with its simultaneous 95 % CI (dotted: the minimum effect), "
                                   "the audited ε as a 95 % lower bound (arrow: the claim lies above it when "
                                   "consistent; dashed: bound = claim), nDCG@10 of the trained ranker."})
    return figures
