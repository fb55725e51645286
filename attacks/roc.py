"""Pooled ROC curves of a run's attack on a fixed FPR grid, for the real clicks and the mean over
the counterfactual click vectors (the report's ROC figure, ``reports.leakage.roc_rows``)."""

from __future__ import annotations

import numpy as np

from attacks.scoring import Slots


ROC_POINTS = np.logspace(-3, 0, 61)
"""The FPR grid of stored ROC curves: 0.1 % to 100 %, 20 points a decade (log-spaced)."""


def roc_on_grid(score: np.ndarray, clicks: np.ndarray, grid: np.ndarray = ROC_POINTS) -> np.ndarray:
    """TPR at each FPR of ``grid`` of the pooled ROC curve of ``score (m,)`` for click vectors
    ``(..., m)``: the largest TPR of ``sklearn.metrics.roc_curve`` at FPR <= x (ties of the score
    form one threshold). NaN rows without both classes."""
    clicks = np.asarray(clicks, dtype=bool)
    flat = clicks.reshape(-1, clicks.shape[-1])
    out = np.full((len(flat), len(grid)), np.nan)
    if flat.shape[1] == 0:
        return out.reshape(clicks.shape[:-1] + (len(grid),))
    order = np.argsort(-np.asarray(score, dtype=np.float64), kind="stable")
    s = np.asarray(score, dtype=np.float64)[order]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])              # last slot of each threshold
    tp = np.cumsum(flat[:, order], axis=1)[:, ends].astype(np.float64)
    fp = (ends + 1)[None, :] - tp
    pos, neg = flat.sum(1).astype(np.float64), (~flat).sum(1).astype(np.float64)
    for r in np.flatnonzero((pos > 0) & (neg > 0)):
        fpr = np.r_[0.0, fp[r] / neg[r]]
        tpr = np.r_[0.0, tp[r] / pos[r]]
        out[r] = tpr[np.searchsorted(fpr, grid, side="right") - 1]
    return out.reshape(clicks.shape[:-1] + (len(grid),))


def roc_points(slots: Slots | None) -> dict:
    """A run's pooled ROC curve on ``ROC_POINTS`` for the real clicks (``roc_tpr``) and the mean
    over the K counterfactual click vectors (``roc_tpr_counterfactual``), as lists (stored with the
    attack row; ``reports.leakage.roc_rows`` unfolds them)."""
    if slots is None or len(slots.score) == 0:
        return {}
    real = roc_on_grid(slots.score, slots.click)
    cf = roc_on_grid(slots.score, slots.counterfactual) if len(slots.counterfactual) else np.full((1, len(ROC_POINTS)), np.nan)
    with np.errstate(all="ignore"):
        cf_mean = np.nanmean(cf, axis=0) if np.isfinite(cf).any() else np.full(len(ROC_POINTS), np.nan)
    return {"roc_fpr": ROC_POINTS.tolist(), "roc_tpr": real.tolist(),
            "roc_tpr_counterfactual": cf_mean.tolist()}
