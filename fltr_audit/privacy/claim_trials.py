"""How many trials an epsilon audit needs before it can test a claimed epsilon.

An audit's lower bound (``attacks.epsilon_bounds``, ``reports.claims``) is largest when its test makes no
error on the evaluation halves of m outputs per input. Then both one-sided Clopper-Pearson upper
limits at level ``L = 1 - (1 - confidence) / 2`` are the Beta(1, m) quantile
``u_m = 1 - (1 - L)^(1/m)``, and the bound is the audit's *ceiling*

    ceiling(m) = max(ln((1 - delta - u_m) / u_m), 0),

the largest epsilon m outputs per input can show; a claim at or above it is ``untestable``.
The ceiling grows with m, so the fewest trials per input n (evaluation halves of
``m = n - n // 2``) whose ceiling exceeds a claim epsilon is the smallest m with
``u_m < (1 - delta) / (1 + e^epsilon)``, ``n = 2 m - 1``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import stats

TRIALS_LIMIT = 1 << 62
"""``trials_to_test`` searches up to this many trials per input; a claim they cannot test gets it
(read: at least this many)."""


def ceiling(m: int, delta: float = 0.0, confidence: float = 0.95) -> float:
    """``max(ln((1 - delta - u_m) / u_m), 0)`` with ``u_m`` the one-sided Clopper-Pearson upper
    limit of zero errors in m trials at level ``1 - (1 - confidence) / 2`` (module docstring)."""
    level = 1.0 - (1.0 - confidence) / 2.0
    u = float(stats.beta.ppf(level, 1.0, float(m)))
    with np.errstate(divide="ignore"):
        value = float(np.log(max(1.0 - delta - u, 0.0) / u))
    return max(value, 0.0)


def trials_to_test(claimed_epsilon: float, delta: float = 0.0, confidence: float = 0.95) -> int:
    """The fewest trials per input whose ``ceiling`` of the evaluation half ``n - n // 2``
    exceeds ``claimed_epsilon`` (below them the claim is ``untestable``): a doubling, then a
    bisection search on the growing ceiling. 0 for an infinite claim; ``TRIALS_LIMIT`` when
    even that many cannot test it."""
    if not math.isfinite(claimed_epsilon):
        return 0

    return fewest_trials(lambda n: ceiling(n - n // 2, delta, confidence) > claimed_epsilon, 4, TRIALS_LIMIT)


def fewest_trials(enough: Callable[[int], bool], start: int, limit: int) -> int:
    """The fewest trials n for which the monotone ``enough(n)`` holds: doubling from ``start`` until
    it does (or ``limit`` is reached), then bisection between the last two."""
    hi = start
    while not enough(hi) and hi < limit:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
