"""The report's one visual code: a defense has the same colour and a click model the same marker in
every plot, fixed per report from its result tables (:func:`visual_code`), and one legend says so
(:func:`legend_png`, drawn once above the plots)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.figure import label, png

BASELINE_COLOUR = "0.15"
"""Defense ``none`` (the baseline): near black in every plot."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")
CLICK_MARKERS = {"perfect": "o", "navigational": "s", "informational": "D", "pbm": "^"}
OTHER_MARKERS = "v<>PX*h"


@dataclass(frozen=True)
class VisualCode:
    """Colour per defense, marker per click model."""

    colours: dict[str, str]
    markers: dict[str, str]

    def colour(self, defense) -> str:
        return self.colours.get(str(defense), "0.5")

    def marker(self, click_model) -> str:
        return self.markers.get(str(click_model), "o")


def _values(tables: dict[str, pd.DataFrame], column: str) -> list[str]:
    seen: dict[str, None] = {}
    for name in ("attacks", "utility", "audits", "curves", "run_audits"):
        frame = tables.get(name)
        if frame is not None and not frame.empty and column in frame.columns:
            seen.update(dict.fromkeys(str(v) for v in frame[column].dropna()))
    return list(seen)


def visual_code(tables: dict[str, pd.DataFrame]) -> VisualCode:
    """The report's colours (by the defenses' first appearance; ``none`` near black) and markers
    (fixed for the click models the project knows, then by appearance)."""
    defenses = [d for d in _values(tables, "defense") if d != "none"]
    colours = {"none": BASELINE_COLOUR, **{d: PALETTE[i % len(PALETTE)] for i, d in enumerate(defenses)}}
    others = [c for c in _values(tables, "click_model") if c not in CLICK_MARKERS]
    markers = {**CLICK_MARKERS, **{c: OTHER_MARKERS[i % len(OTHER_MARKERS)] for i, c in enumerate(others)}}
    return VisualCode(colours, markers)


def legend_png(tables: dict[str, pd.DataFrame]) -> bytes | None:
    """The one legend of the report's plots: colour = defense, marker = click model."""
    code = visual_code(tables)
    defenses = [d for d in code.colours if d in set(_values(tables, "defense"))]
    clicks = _values(tables, "click_model")
    if not defenses:
        return None
    fig = Figure(figsize=(10, 0.5 + 0.22 * max(len(defenses), len(clicks), 1)))
    handles = [Line2D([], [], color=code.colour(d), linewidth=6, label=label(d, 60)) for d in defenses]
    fig.legend(handles=handles, title="colour = defense (in every plot)", loc="upper left", fontsize=8,
               title_fontsize=9, frameon=False, alignment="left", bbox_to_anchor=(0.0, 1.0))
    if clicks:
        marks = [Line2D([], [], color="0.3", marker=code.marker(c), linestyle="", markersize=7, label=c)
                 for c in clicks]
        fig.legend(handles=marks, title="marker = click model (in every plot)", loc="upper left", fontsize=8,
                   title_fontsize=9, frameon=False, alignment="left", bbox_to_anchor=(0.55, 1.0))
    return png(fig)
