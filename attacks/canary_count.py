"""How many canaries a whole-run audit needs before it can test a claim (issue 37, item 6): the
count whose canary-count limit -- the bound every guess right would give -- exceeds the claim.

* Steinke et al.'s bound (``attacks.whole_run_bounds.canary_limit``) against the accounted
  epsilon, with the same share of the canaries taking part;
* the f-DP bound in mu (``attacks.fdp_one_run``: perfect guesses over the pool at the best guess
  count) against the claim's mu, with the same share of the canaries in the pool.

Doubling, then bisection on the count (the limits grow with it).
"""

from __future__ import annotations

import math

from attacks.fdp_one_run import guess_counts, mu_lower_bound
from attacks.whole_run_bounds import CONFIDENCE, canary_limit

CANARIES_LIMIT = 1 << 24
"""The search stops here (read: at least this many)."""


def _mu_limit(pool: int, confidence: float) -> float:
    counts = guess_counts(pool)
    if not counts:
        return 0.0
    level = (1.0 - confidence) / len(counts)
    return max(mu_lower_bound(pool, 2 * k, 2 * k, level) for k in counts)


def canaries_to_test(claim: float, canaries: int, delta: float, confidence: float = CONFIDENCE,
                     share: float = 1.0, gdp: bool = False) -> int:
    """The fewest canaries (at least ``canaries``) whose limit exceeds ``claim``: the accounted
    epsilon (``gdp`` False) or the claim's mu (``gdp`` True); ``share`` of them take part (are in
    the f-DP pool)."""
    share = min(max(float(share), 1e-9), 1.0)

    def enough(m: int) -> bool:
        eligible = max(int(round(share * m)), 1)
        limit = _mu_limit(eligible, confidence) if gdp else canary_limit(m, delta, confidence, eligible)
        return limit > claim

    if not math.isfinite(claim):
        return CANARIES_LIMIT
    lo, hi = max(int(canaries), 2) - 1, max(int(canaries), 2)
    while not enough(hi) and hi < CANARIES_LIMIT:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
