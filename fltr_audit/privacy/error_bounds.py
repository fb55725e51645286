"""A lower bound on epsilon from a distinguishing test's error counts (the rule every claim verdict
rests on; ``reports.claims`` explains it): with one-sided Clopper-Pearson upper limits of the
false-positive and false-negative rates (Bonferroni over the two),

    epsilon_lb = max(ln((1 - delta - FPR_u) / FNR_u), ln((1 - delta - FNR_u) / FPR_u)),

since every (epsilon, delta)-DP mechanism forces every test to satisfy
``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``. Shared by the audits
(``attacks``) and the reports that pool them."""

from __future__ import annotations

import numpy as np
from scipy import stats


def clopper_pearson_upper(errors, n, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper limit of a binomial rate at ``level``
    (``scipy.stats.beta.ppf(level, k + 1, n - k)``; 1 when every trial erred)."""
    k, n = np.asarray(errors, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        upper = stats.beta.ppf(level, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, upper)


def epsilon_of_rates(fpr, fnr, delta) -> tuple[np.ndarray, np.ndarray]:
    """(epsilon from the two DP constraints floored at 0, whether the FNR term is the larger)."""
    fpr, fnr = np.asarray(fpr, dtype=np.float64), np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fpr, 0.0) / fnr)
        b = np.log(np.maximum(1.0 - delta - fnr, 0.0) / fpr)
    a = np.where(np.isnan(a), -np.inf, a)
    b = np.where(np.isnan(b), -np.inf, b)
    return np.maximum(np.fmax(a, b), 0.0), a >= b


def epsilon_lower_bound(fp, fn, n0, n1, delta=0.0, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Lower bound on epsilon from error counts (module docstring) and whether it is limited by
    the trial count (the term that sets it divides by a zero error count's upper limit)."""
    level = 1.0 - (1.0 - np.asarray(confidence, dtype=np.float64)) / 2.0
    fpr_u = clopper_pearson_upper(fp, n0, level)
    fnr_u = clopper_pearson_upper(fn, n1, level)
    lb, fnr_term = epsilon_of_rates(fpr_u, fnr_u, np.asarray(delta, dtype=np.float64))
    limited = np.where(fnr_term, np.asarray(fn) == 0, np.asarray(fp) == 0) & (lb > 0)
    return lb, limited
