"""Report figures from result tables, as PNG bytes (matplotlib, Agg canvas, no pyplot state).

Each plot function returns PNG bytes, or None when the tables hold nothing to draw;
:func:`data_uri` turns the bytes into a ``data:image/png;base64,...`` URI for embedding.
"""

from __future__ import annotations

import base64
import io
import textwrap

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from reports.compare import RANDOM_PREFIX, compare

DPI = 110


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _label(text, width: int = 24) -> str:
    """Plain text for matplotlib (no mathtext), wrapped at defense-stack joints."""
    text = str(text).replace("$", r"\$")
    return "\n+".join(textwrap.fill(part, width, break_long_words=False) for part in text.split("+"))


def _yerr(mean: pd.Series, low: pd.Series, high: pd.Series) -> np.ndarray:
    """Error bar lengths of an interval clipped to [0, 1] (precision, recall, F1 are
    bounded; a t interval over two runs is not)."""
    m = mean.to_numpy(dtype=np.float64)
    lo = np.clip(low.to_numpy(dtype=np.float64), 0.0, 1.0)
    hi = np.clip(high.to_numpy(dtype=np.float64), 0.0, 1.0)
    return np.nan_to_num(np.vstack([np.maximum(m - lo, 0.0), np.maximum(hi - m, 0.0)]))


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def series_label(frame: pd.DataFrame) -> pd.Series:
    """The defense, prefixed by the data set, algorithm and setting where the table holds
    several of them (so that one plot series never mixes two algorithms)."""
    label = frame["defense"].astype(str)
    for col in ("setting", "algo", "data"):
        if col in frame.columns and frame[col].nunique(dropna=False) > 1:
            label = frame[col].fillna("").astype(str) + ": " + label
    return label


def _informed(table: pd.DataFrame) -> pd.DataFrame:
    return table[~table["attack"].astype(str).str.lower().str.startswith(RANDOM_PREFIX)]


def frontier(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Privacy-utility frontier: strongest informed attack's F1 (95 % CI) against the
    ranker's nDCG@10, colour per defense, marker per click model; the random-guessing F1
    of each click model as a dotted line."""
    table = compare(tables)
    if table.empty or table["ndcg10"].isna().all():
        return None
    table = table[table["f1"].notna()]
    table = table.assign(defense=series_label(table))
    is_random = table["attack"].astype(str).str.lower().str.startswith(RANDOM_PREFIX)
    keys = [c for c in ("defense", "click_model", "threat_model") if c in table.columns]
    informed = table[~is_random]
    best = informed.loc[informed.groupby(keys, sort=False, dropna=False)["f1"].idxmax()]
    best = best[best["ndcg10"].notna()]
    if best.empty:
        return None
    fig = Figure(figsize=(10, 5))
    ax = fig.add_subplot()
    markers = "osD^vP*X"
    colors = [f"C{i % 10}" for i in range(best["defense"].nunique())]
    defenses = list(dict.fromkeys(best["defense"]))
    clicks = list(dict.fromkeys(best["click_model"])) if "click_model" in best else [None]
    for d, defense in enumerate(defenses):
        for i, click in enumerate(clicks):
            sel = best[(best["defense"] == defense) & ((best["click_model"] == click) if click else True)]
            if sel.empty:
                continue
            ax.errorbar(sel["ndcg10"], sel["f1"], yerr=_yerr(sel["f1"], sel["f1_ci_low"], sel["f1_ci_high"]),
                        fmt=markers[i % len(markers)], color=colors[d], markersize=8, capsize=3,
                        elinewidth=0.8, alpha=0.9, markeredgecolor="white", markeredgewidth=0.6)
    floors = []  # random guessing: the F1 an attack must beat, per click model
    for click in clicks:
        rand = table[is_random & ((table["click_model"] == click) if click else True)]
        if not rand.empty:
            floors.append((rand["f1"].mean(), f"random: {click}" if click else "random"))
            ax.axhline(floors[-1][0], color="0.45", linestyle=":", linewidth=1)
    low, high = ax.get_ylim()
    gap, last = 0.035 * (high - low), -np.inf  # keep the labels of close lines apart
    for y, text in sorted(floors):
        last = max(y, last + gap)
        ax.annotate(text, (1.0, last), xycoords=("axes fraction", "data"), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7, color="0.35")
    defense_handles = [Line2D([], [], color=colors[d], marker="o", linestyle="", markersize=7,
                              label=_label(x)) for d, x in enumerate(defenses)]
    click_handles = [Line2D([], [], color="0.3", marker=markers[i % len(markers)], linestyle="",
                            markersize=7, label=_label(c)) for i, c in enumerate(clicks) if c]
    fig.subplots_adjust(right=0.72)  # right of the axes: random-line labels, then the legends
    fig.legend(handles=defense_handles, title="defense (colour)", fontsize=8, title_fontsize=8,
               loc="upper left", bbox_to_anchor=(0.84, 0.88), alignment="left")
    if click_handles:
        fig.legend(handles=click_handles, title="click model (marker)", fontsize=8, title_fontsize=8,
                   loc="lower left", bbox_to_anchor=(0.84, 0.11), alignment="left")
    ax.set_xlabel("ranker nDCG@10 (higher is better)")
    ax.set_ylabel("strongest attack F1 (lower is more private)")
    ax.set_title("Privacy-utility frontier")
    ax.margins(x=0.08)
    ax.grid(alpha=0.3)
    return _png(fig)


def learning_curves(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Offline nDCG@10 (where evaluated) and nDCG@10 of the shown lists per round, mean
    over runs, one line per defense (line style too, so coinciding lines stay visible)."""
    curves = tables.get("curves")
    if curves is None or curves.empty or "round" not in curves.columns:
        return None
    panels = [c for c in ("offline_ndcg10", "shown_ndcg") if c in curves and curves[c].notna().any()]
    if not panels:
        return None
    curves = curves.assign(defense=series_label(curves))
    fig = Figure(figsize=(5.5 * len(panels), 4.2))
    styles = ("-", "--", "-.", ":")
    for i, col in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for d, (defense, frame) in enumerate(curves.groupby("defense", sort=False, dropna=False)):
            mean = frame.dropna(subset=[col]).groupby("round")[col].mean()
            ax.plot(mean.index, mean.to_numpy(), marker="." if len(mean) < 30 else None,
                    linestyle=styles[d % len(styles)], linewidth=2.2 - 0.3 * (d % 4),
                    label=_label(defense))
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


def attack_precision_recall(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Attack precision and recall (95 % CI) by defense: one row per click model, precision
    left, recall right."""
    table = compare(tables)
    if table.empty:
        return None
    table = table.assign(defense=series_label(table))
    clicks = list(dict.fromkeys(table["click_model"])) if "click_model" in table else [None]
    defenses = list(dict.fromkeys(table["defense"]))
    attacks = list(dict.fromkeys(table["attack"]))
    width = 0.8 / len(attacks)
    fig = Figure(figsize=(max(9.0, 0.35 * len(defenses) * len(attacks) * 2), 1.0 + 2.3 * len(clicks)))
    axes = fig.subplots(len(clicks), 2, squeeze=False, sharex=True, sharey=True)
    for j, click in enumerate(clicks):
        sel = table if click is None else table[table["click_model"] == click]
        for c, metric in enumerate(("precision", "recall")):
            ax = axes[j, c]
            for a, attack in enumerate(attacks):
                cols = [metric, f"{metric}_ci_low", f"{metric}_ci_high"]
                # one bar per label; rows the label cannot tell apart (e.g. older stores without
                # a setting column) are averaged rather than breaking the plot
                rows = sel[sel["attack"] == attack].groupby("defense", sort=False)[cols].mean().reindex(defenses)
                ax.bar(np.arange(len(defenses)) + (a - (len(attacks) - 1) / 2) * width,
                       rows[metric].to_numpy(), width, capsize=2, label=_label(attack),
                       color=f"C{a % 10}" if not str(attack).lower().startswith(RANDOM_PREFIX) else "0.6",
                       yerr=None if rows[f"{metric}_ci_low"].isna().all() else
                       _yerr(rows[metric], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"]),
                       error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            ax.set_xticks(np.arange(len(defenses)), [_label(d, 16) for d in defenses], fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.grid(axis="y", alpha=0.3)
            if j == 0:
                ax.set_title(metric)
            if c == 0:
                ax.set_ylabel(f"{click} clicks" if click is not None else "all clicks")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, title="attack", fontsize=8, title_fontsize=8, loc="upper center",
               ncol=len(labels), bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.suptitle("Click-guessing attacks by defense (mean, 95 % CI clipped to [0, 1])")
    return _png(fig)


def epsilon_vs_p(tables: dict[str, pd.DataFrame]) -> bytes | None:
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


PLOTS = {
    "frontier": ("Privacy-utility frontier", frontier),
    "learning_curves": ("Learning curves", learning_curves),
    "attack_precision_recall": ("Attack precision and recall by defense and click model",
                                attack_precision_recall),
    "epsilon": ("Epsilon against p (FOLtR-ES)", epsilon_vs_p),
}
