"""The leakage figures of the report: ROC curves against real and counterfactual clicks, and the
forest of every attack's leakage. Colour is the defense and marker the click model
(:mod:`reports.style`), as in every plot of the report."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.compare import compare
from reports.figure import label, png
from reports.leakage import roc_rows
from reports.panels import panels, series_label, strongest, yerr
from reports.style import visual_code
from reports.sweeps import sweep_label, swept_in

ROC_GRID = np.logspace(-3, 0, 61)
ROC_NOTE = ("Dashed: the same attack scored against clicks redrawn from the click model (what it guesses "
            "without the message). A curve below the dotted diagonal guesses worse than chance, as under "
            "pure noise (the noise-only control), and its dashed twin dips alike: only the gap between "
            "solid and dashed is leakage.")
"""The sentence under each ROC panel (glossary: 'counterfactual', 'below chance')."""
FPR_MARKS = (0.001, 0.01)
"""The false-positive rates marked on each ROC panel (the TPR columns of the attack table)."""


def _mean_roc(frame: pd.DataFrame) -> np.ndarray:
    """TPR on :data:`ROC_GRID`, each run's curve interpolated (step-free, in FPR), then averaged."""
    curves = []
    for _, run in frame.groupby("run_key", sort=False) if "run_key" in frame else [((), frame)]:
        run = run.sort_values(["fpr", "tpr"])
        run = run[np.isfinite(run["tpr"].to_numpy(dtype=np.float64))]
        if len(run):
            curves.append(np.interp(ROC_GRID, run["fpr"].to_numpy(dtype=np.float64),
                                    run["tpr"].to_numpy(dtype=np.float64)))
    return np.mean(curves, axis=0) if curves else np.full(len(ROC_GRID), np.nan)


def _roc_panel(ax, roc, table, best, clicks, code, has_roc: bool) -> None:
    """One defense's strongest attack: per click model (marker) the real (solid) and counterfactual
    (dashed) curves in the defense's colour, or the stored TPR points without curves."""
    colour = code.colour(best["defense"])
    for click in clicks:
        marker = code.marker(click)
        if has_roc:
            sel = roc[(roc["defense"] == best["defense"]) & (roc["attack"] == best["attack"])]
            if click is not None and "click_model" in sel:
                sel = sel[sel["click_model"] == click]
            for curve, style in (("real", "-"), ("counterfactual", "--")):
                part = sel[sel["curve"] == curve]
                if not part.empty:
                    ax.plot(ROC_GRID, np.maximum(_mean_roc(part), 1e-3), linestyle=style, color=colour,
                            marker=marker, markevery=(10, 12), markersize=4, markerfacecolor="white"
                            if curve == "counterfactual" else colour, drawstyle="steps-post")
        else:
            sel = table[(table["defense"] == best["defense"]) & (table["attack"] == best["attack"])
                        & ((table["click_model"] == click) if click else True)]
            x = [f for f, c in ((0.001, "tpr_at_fpr_0_001"), (0.01, "tpr_at_fpr_0_01")) if c in sel]
            y = [sel[c].mean() for c in ("tpr_at_fpr_0_001", "tpr_at_fpr_0_01") if c in sel]
            ax.plot(x, np.maximum(np.nan_to_num(y), 1e-3), marker=marker, linestyle="-", color=colour)
    ax.plot(ROC_GRID, ROC_GRID, color="0.6", linestyle=":", linewidth=1)
    for x in FPR_MARKS:
        ax.axvline(x, color="0.35", linewidth=0.8, linestyle=(0, (1, 3)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(7e-4, 1)
    ax.set_ylim(1e-3, 1.05)
    for x in FPR_MARKS:  # labelled above the panel, where no curve runs under them
        ax.annotate(f"{x:.1%}".replace(".0%", "%") + " FPR", (x, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 1), textcoords="offset points", ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_title(label(f"{best['defense']} ({best['attack']})", 40), fontsize=9, color=colour,
                 pad=14)  # above the FPR labels
    ax.grid(alpha=0.3)
    ax.text(0.0, -0.17, textwrap.fill(ROC_NOTE, 62), transform=ax.transAxes, fontsize=6.5, va="top", color="0.3")


def roc_curves(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """ROC curves of each defense's strongest informed attack on log-log axes, one panel per
    defense in its colour, one marker per click model: against the real clicks (solid) and the
    counterfactual clicks (dashed), mean over runs, with FPR 0.1 % and 1 % marked and a sentence
    under each panel. The curves are the runs' stored ROC points (``reports.leakage.roc_rows``, or
    a ``roc`` table); results without them get the stored TPR at FPR 0.1 % and 1 % as points."""
    table = compare(tables) if table is None else table
    if table.empty or table["leakage"].isna().all():
        return None
    pooled = strongest(table, ["defense"])
    if pooled.empty:  # e.g. only reference attacks ran: no informed attack to draw
        return None
    roc = tables.get("roc")
    if roc is None or roc.empty:
        roc = roc_rows(tables.get("attacks"))
    has_roc = roc is not None and not roc.empty and {"fpr", "tpr", "curve"} <= set(roc.columns)
    if not has_roc and not {"tpr_at_fpr_0_01", "tpr_at_fpr_0_001"} & set(table.columns):
        return None
    code = visual_code(tables)
    clicks = list(dict.fromkeys(table["click_model"])) if "click_model" in table else [None]
    fig, axes = panels(len(pooled), 4.9, 0.6)
    for ax, (_, best) in zip(axes.ravel(), pooled.iterrows()):
        _roc_panel(ax, roc, table, best, clicks, code, has_roc)
    for ax in axes[-1]:
        ax.set_xlabel("false-positive rate")
    for ax in axes[:, 0]:
        ax.set_ylabel("true-positive rate")
    handles = [Line2D([], [], color="0.3", linestyle="-", label="real clicks")]
    if has_roc:
        handles += [Line2D([], [], color="0.3", linestyle="--", label="counterfactual clicks")]
    handles += [Line2D([], [], color="0.6", linestyle=":", label="chance")]
    height = fig.get_figheight()
    fig.subplots_adjust(bottom=0.9 / height, top=1 - 1.2 / height, hspace=0.8)
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.75 / height))  # above the panels: the notes go below each
    fig.suptitle("ROC of each defense's strongest attack (mean over runs)", y=1 - 0.1 / height)
    return png(fig)


def leakage_forest(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Forest plot: every attack's leakage with its 95 % CI, one row per defense x attack x
    click model (and swept setting), colour per defense, marker per click model, reference attacks
    hollow; zero marked."""
    table = compare(tables) if table is None else table
    if table.empty or table["leakage"].isna().all():
        return None
    table = table[table["leakage"].notna()]
    swept = swept_in(table)
    table = table.assign(series=series_label(table))
    code = visual_code(tables)
    fig = Figure(figsize=(9, 1.2 + 0.22 * len(table)))
    ax = fig.add_subplot()
    positions, names, y = [], [], 0.0
    for _, sel in table.groupby(["series", *swept, "attack"], sort=False, dropna=False):
        first = sel.iloc[0]
        ref = bool(sel["reference"].any())
        positions.append(-(y + (len(sel) - 1) / 2))
        where = sweep_label(first, swept)
        names.append(label(f"{first['series']}{f' [{where}]' if where else ''} · {first['attack']}"
                           f"{' (reference)' if ref else ''}", 60))
        for _, r in sel.iterrows():
            colour = code.colour(r["defense"])
            err = yerr(pd.Series([r["leakage"]]), pd.Series([r["leakage_ci_low"]]), pd.Series([r["leakage_ci_high"]]),
                       -1.0)
            ax.errorbar([r["leakage"]], [-y], xerr=err, fmt=code.marker(r.get("click_model")), color=colour,
                        capsize=2, markersize=5, markerfacecolor="white" if ref else colour, elinewidth=1)
            y += 1
        y += 0.5
    ax.set_yticks(positions, names, fontsize=7)
    ax.axvline(0.0, color="0.2", linewidth=1)
    ax.set_xlabel("leakage: AUC real - AUC counterfactual (95 % CI)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Leakage of every attack (hollow: reference attacks, which do not read the message)")
    return png(fig)
