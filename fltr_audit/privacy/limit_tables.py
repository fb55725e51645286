"""Binomial-rate limits computed once per (trials, level): an audit's threshold search asks for the
Clopper-Pearson limit of error counts out of the same number of trials at every candidate threshold,
direction and input pair -- thousands of ``scipy.stats.beta.ppf`` evaluations of the same few
hundred values. ``tabulated`` reads them from a table of every count instead; the values are the
same, bit for bit, since the limit is computed elementwise (``tests/test_limit_tables.py``)."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

Limit = Callable[[np.ndarray, int, float], np.ndarray]
"""An elementwise limit of error counts: ``limit(errors, n, level)``."""

MAX_TRIALS = 1 << 16
"""Counts out of more trials are computed directly (a table of 2^16 limits costs about 0.2 s and 512 KB)."""
SHARE = 64
"""A table is built (or read) for a call of at least (n + 1) / SHARE counts: it then costs at most
SHARE such calls, and a threshold search asks for hundreds of counts, many times; a few counts out
of n are computed directly."""


def tabulated(limit: Limit, errors: np.ndarray, n: int, level: float) -> np.ndarray:
    """``limit(errors, n, level)``, read from a table of ``limit`` at every count 0..n when ``errors``
    are at least (n + 1) / ``SHARE`` whole counts between 0 and ``n`` out of at most ``MAX_TRIALS`` trials."""
    errors = np.asarray(errors, dtype=np.float64)
    if n <= MAX_TRIALS and n == int(n) and errors.size * SHARE >= n + 1:
        counts = errors.astype(np.int64)
        if np.array_equal(counts, errors) and counts.min(initial=0) >= 0 and counts.max(initial=0) <= n:
            return np.asarray(_table(limit, int(n), float(level))[counts])
    return limit(errors, n, level)


@functools.lru_cache(maxsize=32)
def _table(limit: Limit, n: int, level: float) -> np.ndarray:
    """``limit`` at every count 0..n, read-only."""
    table = np.array(limit(np.arange(n + 1, dtype=np.float64), n, level), dtype=np.float64)
    table.setflags(write=False)
    return table
