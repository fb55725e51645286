"""Small statistics shared by the comparison tables: t intervals, Welch tests, p-value corrections."""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests


def finite(values) -> np.ndarray:
    """``values`` as float64 with NaN and infinities left out."""
    x = np.asarray(values, dtype=np.float64)
    return x[np.isfinite(x)]


def mean_ci(values, confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean and two-sided Student-t interval ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``.

    NaN values are ignored; the interval is NaN with fewer than two values.
    Returns (mean, low, high, n).
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half, n


def greater_than_zero_p(values) -> float:
    """One-sided p-value of Student's one-sample t-test of mean > 0 (``scipy.stats.ttest_1samp``);
    NaN with fewer than two values or no spread (no test possible)."""
    x = finite(values)
    if x.size < 2 or np.ptp(x) == 0:
        return math.nan
    return float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)


def welch_p(a, b, alternative: str = "two-sided") -> float:
    """p-value of Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``); NaN if either
    sample has fewer than two values."""
    a, b = finite(a), finite(b)
    if a.size < 2 or b.size < 2:
        return math.nan
    with warnings.catch_warnings():  # identical samples: scipy warns and returns NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)


def adjust(pvalues, method: str) -> np.ndarray:
    """Adjusted p-values (statsmodels ``multipletests``, e.g. ``bonferroni``, ``holm``) over
    the finite ones; NaN stays NaN and is not counted in the family."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values: sorted ascending, ``p_(i) * (m - i)`` made monotone
    with a running maximum, capped at 1 (what statsmodels ``multipletests(method="holm")``
    returns, without its per-call ``gc.collect()``, which costs a tenth of a second in a large
    process and is run once per defense)."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)), 1.0)
    out = np.empty_like(p)
    out[order] = stepped
    return out
