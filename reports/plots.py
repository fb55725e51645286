"""Report figures from result tables, as PNG bytes (matplotlib, Agg canvas, no pyplot state).

Each plot function takes the result tables (and optionally their :func:`reports.compare.compare`
table, computed once by the caller) and returns PNG bytes, or None when there is nothing to draw;
:func:`data_uri` turns the bytes into a ``data:image/png;base64,...`` URI for embedding.
"""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from fltr_audit.privacy.error_bounds import clopper_pearson_upper
from reports.claims import HUGE, dp_tradeoff, gdp_tradeoff, pooled_audits
from reports.compare import compare
from reports.figure import label as _label, png as _png
from reports.leakage_plots import leakage_forest, roc_curves
from reports.panels import panels as _panels, series_label, strongest as _strongest, yerr as _yerr
from reports.robustness_plot import robustness_frontier
from reports.style import visual_code
from reports.sweeps import swept_in


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def frontier(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Privacy-utility frontier: the strongest informed attack's leakage (95 % CI) against the
    ranker's nDCG@10, colour per defense, marker per click model (the report's visual code; one
    point per swept setting too); zero leakage dotted."""
    table = compare(tables) if table is None else table
    if table.empty or table["ndcg10"].isna().all() or table["leakage"].isna().all():
        return None
    table = table.assign(series=series_label(table))
    keys = [c for c in ("series", "click_model", "threat_model", *swept_in(table)) if c in table.columns]
    best = _strongest(table, keys)
    best = best[best["ndcg10"].notna()]
    if best.empty:
        return None
    code = visual_code(tables)
    fig = Figure(figsize=(8, 5))
    ax = fig.add_subplot()
    for _, r in best.iterrows():
        err = _yerr(pd.Series([r["leakage"]]), pd.Series([r["leakage_ci_low"]]), pd.Series([r["leakage_ci_high"]]),
                    -1.0)
        ax.errorbar([r["ndcg10"]], [r["leakage"]], yerr=err, fmt=code.marker(r.get("click_model")),
                    color=code.colour(r["defense"]), markersize=8, capsize=3, elinewidth=0.8, alpha=0.9,
                    markeredgecolor="white", markeredgewidth=0.6)
    ax.axhline(0.0, color="0.45", linestyle=":", linewidth=1)
    ax.set_xlabel("ranker nDCG@10 (higher is better)")
    ax.set_ylabel("strongest attack's leakage, AUC real - counterfactual\n(lower is more private)")
    ax.set_title("Privacy-utility frontier")
    ax.margins(x=0.08)
    ax.grid(alpha=0.3)
    return _png(fig)


def learning_curves(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Offline nDCG@10 (where evaluated) and nDCG@10 of the shown lists per round, mean
    over runs, one line per defense (line style too, so coinciding lines stay visible)."""
    curves = tables.get("curves")
    if curves is not None and "poison" in curves.columns:  # curves under poisoning: integrity, not this plot
        curves = curves[curves["poison"].isna()]
    if curves is None or curves.empty or "round" not in curves.columns:
        return None
    panels = [c for c in ("offline_ndcg10", "shown_ndcg") if c in curves and curves[c].notna().any()]
    if not panels:
        return None
    code = visual_code(tables)
    curves = curves.assign(series=series_label(curves))
    fig = Figure(figsize=(5.5 * len(panels), 4.2))
    styles = ("-", "--", "-.", ":")
    for i, col in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for d, ((series, defense), frame) in enumerate(curves.groupby(["series", "defense"], sort=False,
                                                                      dropna=False)):
            mean = frame.dropna(subset=[col]).groupby("round")[col].mean()
            ax.plot(mean.index, mean.to_numpy(), marker="." if len(mean) < 30 else None, color=code.colour(defense),
                    linestyle=styles[d % len(styles)], linewidth=2.2 - 0.3 * (d % 4),
                    label=_label(series))
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel({"offline_ndcg10": "offline nDCG@10 (held-out queries)",
                       "shown_ndcg": "nDCG@10 of the lists shown to users"}[col])
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    ncol = min(len(labels), 4)
    legend_rows = -(-len(labels) // ncol)
    fig.set_figheight(4.2 + 0.3 * legend_rows)  # room below the axes grows with the legend
    fig.legend(handles, labels, title="defense", fontsize=8, title_fontsize=8, loc="lower center",
               ncol=ncol, bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.suptitle("Learning curves (mean over runs)")
    fig.subplots_adjust(bottom=0.16 + 0.3 * legend_rows / fig.get_figheight(), wspace=0.25)
    return _png(fig)


def attack_precision_recall(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Attack precision and recall (95 % CI): one group of bars per attack, one bar per defense in
    its colour (reference attacks hatched), one row per click model, precision left, recall right."""
    table = compare(tables) if table is None else table
    if table.empty:
        return None
    code = visual_code(tables)
    table = table.assign(series=series_label(table))
    clicks = list(dict.fromkeys(table["click_model"])) if "click_model" in table else [None]
    series = list(dict.fromkeys(zip(table["series"], table["defense"])))
    attacks = list(dict.fromkeys(table["attack"]))
    reference = set(table.loc[table["reference"].astype(bool), "attack"])
    width = 0.8 / len(series)
    fig = Figure(figsize=(max(9.0, 0.35 * len(series) * len(attacks) * 2), 1.0 + 2.3 * len(clicks)))
    axes = fig.subplots(len(clicks), 2, squeeze=False, sharex=True, sharey=True)
    for j, click in enumerate(clicks):
        sel = table if click is None else table[table["click_model"] == click]
        for c, metric in enumerate(("precision", "recall")):
            ax = axes[j, c]
            cols = [metric, f"{metric}_ci_low", f"{metric}_ci_high"]
            for d, (name, defense) in enumerate(series):
                # one bar per attack; rows the label cannot tell apart (swept settings, older stores
                # without a setting column) are averaged rather than breaking the plot
                rows = sel[sel["series"] == name].groupby("attack", sort=False)[cols].mean().reindex(attacks)
                ax.bar(np.arange(len(attacks)) + (d - (len(series) - 1) / 2) * width, rows[metric].to_numpy(), width,
                       capsize=2, color=code.colour(defense), edgecolor="white",
                       hatch=["//" if a in reference else "" for a in attacks],
                       yerr=None if rows[f"{metric}_ci_low"].isna().all() else
                       _yerr(rows[metric], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"]),
                       error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            ax.set_xticks(np.arange(len(attacks)), [_label(a + (" (ref.)" if a in reference else ""), 16)
                                                    for a in attacks], fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.grid(axis="y", alpha=0.3)
            if j == 0:
                ax.set_title(metric)
            if c == 0:
                ax.set_ylabel(f"{click} clicks" if click is not None else "all clicks")
    fig.suptitle("Click-guessing attacks by defense (colour; mean, 95 % CI clipped to [0, 1]; hatched: reference)")
    return _png(fig)


def epsilon_vs_p(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """FOLtR-ES epsilon against the randomized-response parameter p, per click model and
    list length; the theoretical bound dashed. Settings shared by every line go in the title."""
    eps = tables.get("epsilon")
    if eps is None or eps.empty or not {"p", "epsilon"} <= set(eps.columns):
        return None
    keys = [c for c in ("click_model", "levels", "length") if c in eps.columns]
    eps = eps.drop_duplicates(subset=[*keys, "p"]).sort_values("p")
    shared = [k for k in keys if eps[k].nunique(dropna=False) == 1]
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    theory = {}  # the bound often does not depend on the click model: drawn once, last
    for group, frame in eps.groupby(keys, sort=False, dropna=False) if keys else [((), eps)]:
        named = [(k, v) for k, v in zip(keys, group) if k not in shared]
        label = ", ".join(str(v) if k == "click_model" else f"{k}={v}" for k, v in named) or "epsilon"
        ax.plot(frame["p"], frame["epsilon"], marker="o", label=_label(label))
        if "theoretical" in frame and frame["theoretical"].notna().any():
            where = ", ".join(f"{k}={v}" for k, v in named if k != "click_model")
            theory.setdefault(tuple(frame["theoretical"].round(12)), (frame, where))
    for frame, where in theory.values():
        ax.plot(frame["p"], frame["theoretical"], linestyle="--", color="0.2", linewidth=1.2, zorder=3,
                label=_label(f"theoretical bound ({where})" if where else "theoretical bound"))
    ax.set_xlabel("p (probability of keeping the true answer)")
    ax.set_ylabel("epsilon")
    title = "FOLtR-ES privacy: epsilon against p"
    if shared:
        title += "\n(" + ", ".join(f"{k.replace('_', ' ')} {eps[k].iloc[0]}" for k in shared) + ")"
    ax.set_title(title.replace("$", r"\$"), fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="click model" if "click_model" in keys and "click_model" not in shared else None,
              title_fontsize=8)
    return _png(fig)


def _finite(v) -> bool:
    return v is not None and pd.notna(v) and np.isfinite(v) and v < HUGE


FLOOR = 1e-5  # rates drawn at the axis floor / ceiling on logit axes
LOGIT_TICKS = [1e-4, 1e-2, 0.5, 1 - 1e-2, 1 - 1e-4]
LOGIT_LABELS = ["0.0001", "0.01", "0.5", "0.99", "0.9999"]


def audit_tradeoff(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Each pooled epsilon audit's (FPR, FNR) point, with its Clopper-Pearson upper corner, against
    the region the claim allows: the eps-DP trade-off boundary (:func:`reports.claims.dp_tradeoff`)
    and, for Gaussian mechanisms, the mu-GDP curve (:func:`reports.claims.gdp_tradeoff`); one panel
    per defense, logit axes (both ends of each rate spread out)."""
    audits = tables.get("audits")
    if audits is None or audits.empty or not {"fp", "fn", "n0", "n1"} <= set(audits.columns):
        return None
    audits = audits.dropna(subset=["fp", "fn", "n0", "n1"])
    pooled = pooled_audits(audits, ["defense"])
    if pooled.empty:
        return None
    pooled = pooled.assign(defense=series_label(pooled)) if "setting" in pooled else pooled
    # a defense's loosest (largest) claimed mu: drawn once per panel
    mus = (audits.assign(mu=pd.to_numeric(audits["mu"], errors="coerce")).groupby("defense", sort=False)["mu"].max()
           if "mu" in audits else pd.Series(dtype=float))
    defenses = list(dict.fromkeys(pooled["defense"]))
    fig, axes = _panels(len(defenses), 3.9, 0.8)
    grid = np.concatenate([np.logspace(np.log10(FLOOR), -0.31, 300), 1 - np.logspace(-0.31, np.log10(FLOOR), 300)])
    kinds = list(dict.fromkeys(pooled.get("neighbours", pd.Series(["audit"])).fillna("audit")))
    markers = dict(zip(kinds, "PX*hv"))  # shapes no click model uses (reports.style)
    code = visual_code(tables)
    for ax, defense in zip(axes.ravel(), defenses):
        sel = pooled[pooled["defense"] == defense]
        claim = sel.iloc[0]
        if _finite(claim["claimed_epsilon"]):
            ax.plot(grid, np.clip(dp_tradeoff(grid, claim["claimed_epsilon"], claim["claimed_delta"]), FLOOR, 1 - FLOOR),
                    color="0.2", linewidth=1.2, label="ε-DP boundary")
        mu = mus.get(defense, np.nan)
        if _finite(mu):
            ax.plot(grid, np.clip(gdp_tradeoff(grid, mu), FLOOR, 1 - FLOOR), color="C3", linestyle="--", linewidth=1.2,
                    label="μ-GDP curve")
        for _, a in sel.iterrows():
            kind = a.get("neighbours") if pd.notna(a.get("neighbours")) else "audit"
            level = 1.0 - (1.0 - a["confidence"]) / 2.0
            x, y, xu, yu = np.clip([a["fp"] / a["n0"], a["fn"] / a["n1"],
                                    float(clopper_pearson_upper(a["fp"], a["n0"], level)),
                                    float(clopper_pearson_upper(a["fn"], a["n1"], level))], FLOOR, 1 - FLOOR)
            color = code.colour(str(a["defense"]).split(": ")[-1])  # the defense behind its series label
            ax.plot([x, xu], [y, yu], color=color, linewidth=0.8, alpha=0.7)
            ax.plot([xu], [yu], marker=markers[kind], color=color, markerfacecolor="white", markersize=6)
            ax.plot([x], [y], marker=markers[kind], color=color, markersize=6, linestyle="",
                    label=_label(f"{kind}: {a.get('test', '')}" + (" (message; claim covers aggregate)"
                                 if a.get("claim_verdict") == "outside scope" else ""), 30))
        ax.set_xscale("logit")
        ax.set_yscale("logit")
        ax.set_xlim(FLOOR, 1 - FLOOR)
        ax.set_ylim(FLOOR, 1 - FLOOR)
        ax.set_xticks(LOGIT_TICKS, LOGIT_LABELS, fontsize=8)
        ax.set_yticks(LOGIT_TICKS, LOGIT_LABELS, fontsize=8)
        ax.minorticks_off()
        ax.set_title(_label(defense, 40), fontsize=9)
        ax.grid(alpha=0.3, linewidth=0.4)
        ax.legend(fontsize=7, loc="best")
    for ax in axes[-1]:
        ax.set_xlabel("FPR (input 0 called 1)")
    for ax in axes[:, 0]:
        ax.set_ylabel("FNR (input 1 called 0)")
    fig.suptitle("Epsilon audits against the trade-off the claim allows", y=1.03)
    return _png(fig)


def whole_run_epsilon(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """``audit-run`` rows: the accounted epsilon (for the canaries, against the server; against an
    observer dotted) and the audited ones (one-run bound, estimate with its interval, multi-run
    bound) against the run's rounds, one colour per defense; log epsilon axis."""
    rows = tables.get("run_audits")
    if rows is None or rows.empty or not {"rounds", "epsilon_lb", "epsilon_accounted_canaries"} <= set(rows.columns):
        return None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    code = visual_code(tables)
    for defense, frame in rows.sort_values("rounds").groupby("defense", sort=False):
        colour = code.colour(defense)
        x = frame["rounds"].to_numpy()
        finite = np.isfinite(frame["epsilon_accounted_canaries"].to_numpy())
        ax.plot(x[finite], frame["epsilon_accounted_canaries"].to_numpy()[finite], color=colour, marker="s",
                label=_label(f"{defense}: accounted (server)", 40))
        if "epsilon_observer" in frame and np.isfinite(frame["epsilon_observer"]).any():
            ax.plot(x, frame["epsilon_observer"], color=colour, linestyle=":", label=_label("accounted (observer)", 40))
        ax.plot(x, np.maximum(frame["epsilon_lb"], 1e-3), color=colour, linestyle="--", marker="o",
                label=_label("one-run lower bound", 40))
        if "epsilon_lb_multi" in frame and frame["epsilon_lb_multi"].notna().any():
            ax.plot(x, np.maximum(frame["epsilon_lb_multi"], 1e-3), color=colour, linestyle="-.", marker="^",
                    label=_label("multi-run lower bound", 40))
        est = frame["epsilon_estimate"].to_numpy(dtype=float)
        ok = np.isfinite(est)
        if ok.any():
            low, high = frame["estimate_low"].to_numpy(dtype=float)[ok], frame["estimate_high"].to_numpy(dtype=float)[ok]
            yerr = np.nan_to_num(np.vstack([np.maximum(est[ok] - low, 0.0), np.maximum(high - est[ok], 0.0)]))
            ax.errorbar(x[ok] * 1.02, est[ok], yerr=yerr, color=colour, fmt="x", capsize=3,
                        label=_label("one-run estimate", 40))
    ax.set_yscale("log")
    ax.set_xlabel("training rounds")
    ax.set_ylabel("epsilon over the run")
    ax.set_title("Accounted against audited epsilon over a whole run", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


PLOTS = {  # name -> (title, caption: what to read from it, function)
    "frontier": ("Privacy-utility frontier",
                 "One marker per defense (colour) and click model (shape), and per swept setting: x is the "
                 "trained ranker's nDCG@10, y the leakage (AUC real - counterfactual, 95 % CI) of the strongest informed "
                 "attack. Read: lower right is private and useful; a marker on the dotted zero line means "
                 "the attack learns nothing about the clicks from the message.", frontier),
    "leakage_forest": ("Leakage of every attack",
                       "Each attack's leakage with its 95 % CI per defense (colour) and click model (shape). "
                       "Read: an interval right of the zero line is leakage; reference attacks (hollow) "
                       "do not read the message and should straddle zero.", leakage_forest),
    "roc": ("ROC curves",
            "The strongest informed attack of each defense: true-positive against false-positive rate "
            "of its click guesses on log-log axes, against the real clicks (solid) and against "
            "counterfactual clicks from the same click model (dashed). Read: the gap between solid "
            "and dashed is what the message reveals; the low-FPR end shows whether some clicks are "
            "recovered with near certainty. A curve below the diagonal guesses worse than chance (pure "
            "noise can mislead an attack systematically); its dashed twin dips alike, so it is not leakage.",
            roc_curves),
    "learning_curves": ("Learning curves",
                        "nDCG@10 per training round, mean over runs: on held-out queries (left, where "
                        "evaluated) and of the lists shown to users (right). Read: the gap between a "
                        "defense's line and the none line is the utility the defense costs; a defense "
                        "without cost lies on top of none.", learning_curves),
    "attack_precision_recall": ("Attack precision and recall by defense and click model",
                                "Precision (share of guessed clicks that were real clicks, left) and recall "
                                "(share of real clicks found, right) of every attack by defense, one row per "
                                "click model; reference attacks in grey. Read with care: these move with how "
                                "many documents an attack guesses; leakage above is the measure.",
                                attack_precision_recall),
    "epsilon": ("Epsilon against p (FOLtR-ES)",
                "FOLtR-ES: epsilon of the randomized-response click perturbation against p, by exact "
                "enumeration per click model (solid) and the theoretical bound (dashed). Read: pick p for "
                "a target epsilon; a click model below the bound gets more privacy at that p than the "
                "bound promises.", epsilon_vs_p),
    "audit_tradeoff": ("Epsilon audits against the claimed trade-off",
                       "Each pooled epsilon audit's error rates (filled: FPR = fp / n0, FNR = fn / n1; hollow: "
                       "their 95 % Clopper-Pearson upper corner, which the bound uses) against the smallest FNR "
                       "the per-round claim allows at each FPR: the ε-DP boundary max(0, 1 - δ - e^ε FPR, "
                       "e^-ε (1 - δ - FPR)) (solid) and, for Gaussian mechanisms, the μ-GDP curve "
                       "Φ(Φ^-1(1 - FPR) - μ) (dashed); logit axes (0 and 1 stretched apart), zero counts drawn at the axis edge. "
                       "Read: a hollow corner below a curve violates that claim; a point far above it means "
                       "the claim is loose or the test weak.", audit_tradeoff),
    "robustness_frontier": ("Privacy, robustness and utility",
                            "Per algorithm, one line per defense stack (colour): at the leakage of its strongest "
                            "privacy attack, its ranker's nDCG@10 without attack (filled) and under the poisoning "
                            "attack strongest against it at the reference fraction (hollow); the marker's shape is "
                            "its claim verdict. Read: a short line high up and far left is robust, useful and "
                            "private; an X is a DP claim the robust rule broke.", robustness_frontier),
    "whole_run": ("Privacy over the whole run: accounted against audited epsilon",
                  "Per defense (colour), against the run's rounds: the ε accounted over the run for the "
                  "canaries against the server (squares, solid) and against an observer of the released "
                  "models (dotted), the one-run lower bound (circles), the multi-run lower bound (triangles) "
                  "and the one-run estimate with its interval (crosses). Read: a bound above the accounted "
                  "line violates the claim; a wide gap is a loose claim or a weak audit (one-run bounds "
                  "cannot exceed the canary-count limit).", whole_run_epsilon),
}
