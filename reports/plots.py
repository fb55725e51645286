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
from matplotlib.ticker import MaxNLocator

from reports.compare import RANDOM_PREFIX, compare

DPI = 110


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _label(text) -> str:
    """Plain text for matplotlib (no mathtext), wrapped at defense-stack joints."""
    text = str(text).replace("$", r"\$")
    return "\n+".join(textwrap.fill(part, 24, break_long_words=False) for part in text.split("+"))


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


def _informed(table: pd.DataFrame) -> pd.DataFrame:
    return table[~table["attack"].astype(str).str.lower().str.startswith(RANDOM_PREFIX)]


def frontier(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Privacy-utility frontier: strongest informed attack's F1 (95 % CI) against the
    ranker's nDCG@10, one point per defense (marker per click model)."""
    table = compare(tables)
    if table.empty or table["ndcg10"].isna().all():
        return None
    table = _informed(table[table["f1"].notna()])
    keys = [c for c in ("defense", "click_model", "threat_model") if c in table.columns]
    best = table.loc[table.groupby(keys, sort=False, dropna=False)["f1"].idxmax()]
    best = best[best["ndcg10"].notna()]
    if best.empty:
        return None
    fig = Figure(figsize=(7.5, 5))
    ax = fig.add_subplot()
    markers = "osD^vP*X"
    clicks = list(dict.fromkeys(best.get("click_model", pd.Series(["all"] * len(best)))))
    for i, click in enumerate(clicks):
        sel = best[best["click_model"] == click] if "click_model" in best else best
        ax.errorbar(sel["ndcg10"], sel["f1"], yerr=_yerr(sel["f1"], sel["f1_ci_low"], sel["f1_ci_high"]),
                    fmt=markers[i % len(markers)], capsize=3, elinewidth=0.8, alpha=0.85,
                    label=_label(click))
    for defense, sel in best.groupby("defense", sort=False):  # one label per defense
        top = sel.loc[sel["f1"].idxmax()]
        ax.annotate(_label(defense), (top["ndcg10"], top["f1"]), fontsize=7,
                    xytext=(5, 5), textcoords="offset points")
    ax.set_xlabel("ranker nDCG@10 (higher is better)")
    ax.set_ylabel("strongest attack F1 (lower is more private)")
    ax.set_title("Privacy-utility frontier")
    ax.grid(alpha=0.3)
    ax.legend(title="click model", fontsize=8)
    return _png(fig)


def learning_curves(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Offline nDCG@10 (where evaluated) and nDCG@10 of the shown lists per round, mean
    over runs, one line per defense."""
    curves = tables.get("curves")
    if curves is None or curves.empty or "round" not in curves.columns:
        return None
    panels = [c for c in ("offline_ndcg10", "shown_ndcg") if c in curves and curves[c].notna().any()]
    if not panels:
        return None
    fig = Figure(figsize=(6 * len(panels), 4.2))
    for i, col in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for defense, frame in curves.groupby("defense", sort=False, dropna=False):
            mean = frame.dropna(subset=[col]).groupby("round")[col].mean()
            ax.plot(mean.index, mean.to_numpy(), marker="." if len(mean) < 30 else None,
                    label=_label(defense))
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel({"offline_ndcg10": "offline nDCG@10 (held-out queries)",
                       "shown_ndcg": "nDCG@10 of the lists shown to users"}[col])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Learning curves (mean over runs)")
    return _png(fig)


def attack_precision_recall(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """Attack precision and recall (95 % CI) by defense, one column per click model."""
    table = compare(tables)
    if table.empty:
        return None
    clicks = list(dict.fromkeys(table["click_model"])) if "click_model" in table else [None]
    defenses = list(dict.fromkeys(table["defense"]))
    attacks = list(dict.fromkeys(table["attack"]))
    width = 0.8 / len(attacks)
    fig = Figure(figsize=(max(5.0, 1.2 * len(defenses)) * len(clicks), 7.5))
    axes = fig.subplots(2, len(clicks), squeeze=False, sharey=True)
    for j, click in enumerate(clicks):
        sel = table if click is None else table[table["click_model"] == click]
        for r, metric in enumerate(("precision", "recall")):
            ax = axes[r, j]
            for a, attack in enumerate(attacks):
                rows = sel[sel["attack"] == attack].set_index("defense").reindex(defenses)
                ax.bar(np.arange(len(defenses)) + (a - (len(attacks) - 1) / 2) * width,
                       rows[metric].to_numpy(), width, capsize=2, label=_label(attack),
                       yerr=_yerr(rows[metric], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"]),
                       error_kw={"elinewidth": 0.8, "ecolor": "0.25"})
            ax.set_xticks(np.arange(len(defenses)), [_label(d) for d in defenses], fontsize=7)
            ax.set_ylim(0, 1.05)
            ax.set_ylabel(metric)
            ax.grid(axis="y", alpha=0.3)
            if r == 0:
                ax.set_title(f"click model: {_label(click)}" if click is not None else "all")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, title="attack", fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Click-guessing attacks by defense (mean, 95 % CI clipped to [0, 1])")
    return _png(fig)


def epsilon_vs_p(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """FOLtR-ES epsilon against the randomized-response parameter p, per click model and
    list length; the theoretical bound dashed."""
    eps = tables.get("epsilon")
    if eps is None or eps.empty or not {"p", "epsilon"} <= set(eps.columns):
        return None
    keys = [c for c in ("click_model", "levels", "length") if c in eps.columns]
    eps = eps.drop_duplicates(subset=[*keys, "p"]).sort_values("p")
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.add_subplot()
    theory_done = set()
    for group, frame in eps.groupby(keys, sort=False, dropna=False) if keys else [((), eps)]:
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, group))
        ax.plot(frame["p"], frame["epsilon"], marker="o", label=_label(label))
        if "theoretical" in frame and frame["theoretical"].notna().any():
            tkey = tuple(frame["theoretical"].round(12))
            if tkey not in theory_done:  # the bound often does not depend on the click model
                theory_done.add(tkey)
                where = ", ".join(f"{k}={v}" for k, v in zip(keys, group) if k != "click_model")
                ax.plot(frame["p"], frame["theoretical"], linestyle="--", color="0.3",
                        label=_label(f"theoretical bound ({where})" if where else "theoretical bound"))
    ax.set_xlabel("p (probability of keeping the true answer)")
    ax.set_ylabel("epsilon")
    ax.set_title("FOLtR-ES privacy: epsilon against p")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


PLOTS = {
    "frontier": ("Privacy-utility frontier", frontier),
    "learning_curves": ("Learning curves", learning_curves),
    "attack_precision_recall": ("Attack precision and recall by defense and click model",
                                attack_precision_recall),
    "epsilon": ("Epsilon against p (FOLtR-ES)", epsilon_vs_p),
}
