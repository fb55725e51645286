"""The one-run audit against an f-DP curve (Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential
Privacy in One Run", ICML 2025, arXiv:2410.22235; its bound for guesses with abstention, the
"audit with cap" recursion).

``m`` canaries, each present with probability 1/2; the auditor guesses the secret of ``guesses`` of
them (abstaining on the rest) and ``correct`` of those guesses are right. If the run is f-DP
towards each canary, the probability tau of at least ``correct`` right guesses obeys a
constraint computed backwards over i = correct - 1, ..., 0 from r = tau c / m, h = tau (k - c) / m
(c = correct, k = guesses):

    h_i = max(h_{i+1}, fbar^{-1}(r_{i+1})),    r_i = min(1, r_{i+1} + i / (k - i) (h_i - h_{i+1}))

where fbar^{-1} inverts the curve's *blow-up* fbar(x) = 1 - f(x) (an event of probability x
without the canary has probability at most fbar(x) with it). An f-DP mechanism reaches tau only if
r_0 + h_0 <= k / m; so "at least ``correct`` right" has probability below any tau that breaks
that inequality, and the curve is rejected at level ``level`` when tau = level breaks it
(``rejects``; ``tail_bound`` is the smallest tau that keeps it: an upper bound on
P[W >= correct]).

Curves (``GaussianCurve``, ``ApproxDPCurve``):

* mu-GDP (Dong, Roth, Su 2022): f(x) = Phi(Phi^{-1}(1 - x) - mu), fbar^{-1}(y) = Phi(Phi^{-1}(y) - mu);
* (eps, delta)-DP: fbar(x) = min(1, delta + e^eps x, 1 - e^-eps (1 - delta - x)), whose inverse is
  the larger of the two pieces' inverses, max(0, (y - delta) e^-eps, 1 - delta - e^eps (1 - y)).

The bounds: the smallest mu (eps) whose curve is not rejected (``mu_lower_bound``,
``epsilon_lower_bound``; the rejection is monotone in both). ``fdp_one_run_bound`` guesses
"present" for the k highest and "absent" for the k lowest scores for each k of the grid of
``attacks.whole_run_bounds`` at level (1 - confidence) / len(grid) (Bonferroni), over a pool of
canaries chosen from the schedule alone (never the secrets): the canaries outside it are part of
the mechanism's randomness, so the theorem's m is the pool's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from attacks.whole_run_bounds import CONFIDENCE, GUESS_FRACTIONS, untied_order

MU_MAX = 64.0
EPS_MAX = 60.0
BISECTIONS = 40
"""Bisection steps of ``tail_bound`` (in tau)."""
TOLERANCE = 1e-4
"""The bounds' bisection stops when the bracket is this narrow (in mu or epsilon)."""
_NORMAL = NormalDist()


@dataclass(frozen=True)
class GaussianCurve:
    """mu-GDP: the trade-off curve of N(0, 1) against N(mu, 1)."""

    mu: float

    def inverse_blow_up(self, y: float) -> float:
        """fbar^{-1}(y) = Phi(Phi^{-1}(y) - mu)."""
        if y <= 0.0:
            return 0.0
        return 1.0 if y >= 1.0 else _NORMAL.cdf(_NORMAL.inv_cdf(y) - self.mu)


@dataclass(frozen=True)
class ApproxDPCurve:
    """(epsilon, delta)-DP as a trade-off curve."""

    epsilon: float
    delta: float

    def inverse_blow_up(self, y: float) -> float:
        """fbar^{-1}(y) = max(0, (y - delta) e^-eps, 1 - delta - e^eps (1 - y)) (module docstring)."""
        e = math.exp(self.epsilon)
        return min(1.0, max(0.0, (y - self.delta) / e, 1.0 - self.delta - e * (1.0 - y)))


def _constraint(curve, m: int, guesses: int, correct: int, tau: float) -> float:
    """r_0 + h_0 of the recursion (module docstring) started at tau."""
    r, h = tau * correct / m, tau * (guesses - correct) / m
    for i in range(correct - 1, -1, -1):
        h_next = max(h, curve.inverse_blow_up(r))
        if h_next == h:  # h stays, so r stays: nothing changes any more
            break
        r, h = min(1.0, r + i / (guesses - i) * (h_next - h)), h_next
    return r + h


def _check(m: int, guesses: int, correct: int) -> None:
    if not 0 <= correct <= guesses <= m or m < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= m, m >= 1; got correct={correct}, guesses={guesses}, m={m}")


def rejects(curve, m: int, guesses: int, correct: int, level: float) -> bool:
    """Whether ``correct`` right guesses among ``guesses`` of ``m`` canaries reject the curve at
    ``level``: the recursion started at tau = level breaks r_0 + h_0 <= guesses / m."""
    _check(m, guesses, correct)
    if guesses == 0 or correct == 0:
        return False
    return _constraint(curve, m, guesses, correct, level) > guesses / m * (1.0 + 1e-12)


def tail_bound(curve, m: int, guesses: int, correct: int) -> float:
    """An upper bound on P[at least ``correct`` right guesses] under the curve: the largest tau at
    which the recursion keeps r_0 + h_0 <= guesses / m (bisection; 1 when tau = 1 keeps it)."""
    _check(m, guesses, correct)
    if correct == 0 or not rejects(curve, m, guesses, correct, 1.0):
        return 1.0
    low, high = 0.0, 1.0  # rejects(high) holds throughout
    for _ in range(BISECTIONS):
        mid = (low + high) / 2
        low, high = (low, mid) if rejects(curve, m, guesses, correct, mid) else (mid, high)
    return high


def _largest_rejected(make, m: int, guesses: int, correct: int, level: float, cap: float) -> float:
    if not rejects(make(0.0), m, guesses, correct, level):
        return 0.0
    low, high = 0.0, 1.0
    while rejects(make(high), m, guesses, correct, level):
        low, high = high, 2 * high
        if high > cap:
            return cap
    while high - low > TOLERANCE:
        mid = (low + high) / 2
        low, high = (mid, high) if rejects(make(mid), m, guesses, correct, level) else (low, mid)
    return low


@lru_cache(maxsize=4096)
def mu_lower_bound(m: int, guesses: int, correct: int, level: float) -> float:
    """The largest mu whose mu-GDP curve is rejected at ``level`` (0 when mu = 0 is not)."""
    return _largest_rejected(GaussianCurve, m, guesses, correct, level, MU_MAX)


@lru_cache(maxsize=4096)
def epsilon_lower_bound(m: int, guesses: int, correct: int, delta: float, level: float) -> float:
    """The largest epsilon whose (epsilon, ``delta``) curve is rejected at ``level``."""
    return _largest_rejected(lambda e: ApproxDPCurve(e, delta), m, guesses, correct, level, EPS_MAX)


def guess_counts(pool: int) -> list[int]:
    """The guesses per side k of the grid (``GUESS_FRACTIONS`` of the pool, 2k <= pool)."""
    counts = {max(1, int(f * pool / 2)) for f in GUESS_FRACTIONS}
    return sorted(k for k in counts if 2 * k <= pool)


@dataclass(frozen=True)
class FdpBound:
    """The f-DP one-run bounds over ``pool`` canaries: ``mu_lb`` (mu-GDP curve) with the guesses
    that gave it (``guesses`` made, ``correct`` right), ``epsilon_lb`` (the (eps, delta) curve),
    and ``mu_limit``: what perfect guesses would give (the canary-count limit in mu)."""

    mu_lb: float
    epsilon_lb: float
    guesses: int
    correct: int
    pool: int
    mu_limit: float

    @property
    def limited_by_canaries(self) -> bool:
        """The bound is the canary-count limit: set by the pool's size, not the mechanism."""
        return self.guesses > 0 and self.mu_lb >= self.mu_limit - 1e-9


def _guess_results(scores: np.ndarray, present: np.ndarray, counts: list[int]) -> list[tuple[int, int]]:
    order = untied_order(scores)  # rounded, ties broken at random (attacks.whole_run_bounds)
    n = len(scores)
    return [(2 * k, int(present[order[n - k:]].sum() + (~present[order[:k]]).sum())) for k in counts]


def fdp_one_run_bound(scores: np.ndarray, present: np.ndarray, delta: float, confidence: float = CONFIDENCE,
                      pool: np.ndarray | None = None) -> FdpBound:
    """The f-DP one-run bounds (module docstring) over the canaries of ``pool`` (boolean mask chosen
    from the schedule; default all): the largest mu and epsilon over the guess grid."""
    scores, present = np.asarray(scores, dtype=np.float64), np.asarray(present, dtype=bool)
    if pool is not None:
        scores, present = scores[pool], present[pool]
    m = len(scores)
    counts = guess_counts(m)
    if not counts:
        return FdpBound(0.0, 0.0, 0, 0, m, 0.0)
    level = (1.0 - confidence) / len(counts)
    results = _guess_results(scores, present, counts)
    mus = [mu_lower_bound(m, g, c, level) for g, c in results]
    best = int(np.argmax(mus))
    eps = max(epsilon_lower_bound(m, g, c, float(delta), level) for g, c in results)
    limit = max(mu_lower_bound(m, 2 * k, 2 * k, level) for k in counts)
    return FdpBound(mus[best], eps, results[best][0], results[best][1], m, limit)
