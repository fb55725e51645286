"""Pieces the report's plots share: error bars of clipped intervals, a grid of panels, the series
label of a defense and the strongest informed attack of each group."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def yerr(mean: pd.Series, low: pd.Series, high: pd.Series, floor: float = 0.0) -> np.ndarray:
    """Error bar lengths of an interval clipped to [floor, 1] (precision, recall, F1 lie in
    [0, 1], leakage in [-1, 1]; a t interval over two runs need not)."""
    m = mean.to_numpy(dtype=np.float64)
    lo = np.clip(low.to_numpy(dtype=np.float64), floor, 1.0)
    hi = np.clip(high.to_numpy(dtype=np.float64), floor, 1.0)
    return np.nan_to_num(np.vstack([np.maximum(m - lo, 0.0), np.maximum(hi - m, 0.0)]))


def panels(n: int, height: float, margin: float) -> tuple[Figure, np.ndarray]:
    """A figure of ``n`` panels with shared axes, three per row (rows x 3 axes, the unused hidden)."""
    n = max(int(n), 1)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig = Figure(figsize=(4.2 * cols, height * rows + margin))
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes


def series_label(frame: pd.DataFrame) -> pd.Series:
    """The defense, prefixed by the data set, algorithm and setting where the table holds
    several of them (so that one plot series never mixes two algorithms)."""
    label = frame["defense"].astype(str)
    for col in ("setting", "algo", "data"):
        if col in frame.columns and frame[col].nunique(dropna=False) > 1:
            label = frame[col].fillna("").astype(str) + ": " + label
    return label


def informed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of attacks that read the message (not reference attacks)."""
    return table[~table["reference"].astype(bool)]


def strongest(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys`` group the informed attack with the largest leakage."""
    rows = informed(table)
    rows = rows[rows["leakage"].notna()]
    if rows.empty:
        return rows
    return rows.loc[rows.groupby(keys, sort=False, dropna=False)["leakage"].idxmax()]
