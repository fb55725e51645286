"""The frontier of privacy, robustness and utility: one panel per algorithm, one point per defense
stack (``reports.robustness.frontier_rows``: ``defense_rows`` with their verdicts)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.compare import verdicts as compute_verdicts
from reports.figure import label as _label, png as _png
from reports.robustness import defense_rows, with_verdicts
from reports.style import visual_code

VERDICT_MARKERS = {"violated": "X", "consistent": "P", "untestable": "*", "outside scope": "h", "no claim": "8"}
"""Shapes no click model uses (``reports.style``: a marker means a click model in every other plot)."""


def robustness_frontier(tables: dict[str, pd.DataFrame], table: pd.DataFrame | None = None) -> bytes | None:
    """Per algorithm: x the leakage of the defense's strongest privacy attack, y its nDCG@10 without
    attack (filled) and under its strongest poisoning attack (hollow), joined by a line; the marker's
    shape is the claim verdict."""
    rows = defense_rows(tables)
    if rows.empty:  # no utility under attack: nothing to draw, no verdicts to compute
        return None
    rows = with_verdicts(rows, compute_verdicts(tables) if "attacks" in tables else None)
    if rows["leakage"].isna().all():
        return None
    rows = rows[rows["leakage"].notna()]
    algos = list(dict.fromkeys(rows["algo"])) if "algo" in rows else [None]
    fig = Figure(figsize=(6.0 * len(algos) + 3.0, 4.8))
    defenses = list(dict.fromkeys(rows["defense"]))
    code = visual_code(tables)  # a defense's colour is the same in every plot of the report
    colors = {d: code.colour(d) for d in defenses}
    for i, algo in enumerate(algos):
        ax = fig.add_subplot(1, len(algos), i + 1)
        own = rows[rows["algo"] == algo] if algo is not None else rows
        for _, row in own.iterrows():
            marker = VERDICT_MARKERS.get(row.get("claim_verdict"), "8")
            ax.plot([row["leakage"]] * 2, [row["clean_ndcg10"], row.get("attacked_ndcg10")],
                    color=colors[row["defense"]], linewidth=1.2, alpha=0.7)
            ax.plot(row["leakage"], row["clean_ndcg10"], marker=marker, color=colors[row["defense"]], markersize=9,
                    linestyle="")
            ax.plot(row["leakage"], row.get("attacked_ndcg10"), marker=marker, markerfacecolor="white",
                    color=colors[row["defense"]], markersize=9, linestyle="")
        ax.axvline(0.0, color="0.45", linestyle=":", linewidth=1)
        ax.set_xlabel("leakage of the strongest privacy attack\n(AUC real - counterfactual; left is private)")
        ax.set_ylabel("nDCG@10: no attack (filled), strongest poisoning (hollow)")
        ax.set_title(f"{algo}" if algo is not None else "frontier")
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[d], marker="o", linestyle="", label=_label(d, 30)) for d in defenses]
    shown = set(rows.get("claim_verdict", []))
    handles += [Line2D([], [], color="0.3", marker=m, linestyle="", label=f"claim {v}")
                for v, m in VERDICT_MARKERS.items() if v in shown]
    fig.subplots_adjust(right=1.0 - 2.9 / fig.get_figwidth(), bottom=0.18)
    fig.legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.0 - 2.8 / fig.get_figwidth(), 0.5))
    fig.suptitle("Privacy, robustness and utility: one point per defense stack")
    return _png(fig)
