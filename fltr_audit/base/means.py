"""The mean of what was measured: NaN marks a value that could not be (a query without a relevant
document, a round without other members), and a mean of none of them is NaN without numpy's
"Mean of empty slice" warning on the user's terminal."""

from __future__ import annotations

from typing import Any

import numpy as np


def nanmean(x: Any) -> float:
    """``np.nanmean(x)`` (the same bits) as a float; NaN, without the warning, when every value is NaN
    or there is none."""
    x = np.asarray(x, dtype=np.float64)
    return float("nan") if np.isnan(x).all() else float(np.nanmean(x))
