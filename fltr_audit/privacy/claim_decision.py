"""The claim verdict of one per-round audit: which test decides, and whether it could decide.

One test per claim, so the verdict keeps its level (issue 37, items 3 and 7):

* a claim whose declared law is Gaussian (``mu`` finite: ``attacks.worst_case.claimed_mu``, the mu
  its (eps, delta) asserts) is judged by the mu-GDP bound against that mu -- the test with the
  power to see a Gaussian with too little noise (Dong, Roth & Su 2022) -- *when the noise the
  defense actually adds looks Gaussian*: a D'Agostino-Pearson normality test
  (``scipy.stats.normaltest``) of the held-out half's scores on each input does not reject at
  ``GOF_LEVEL`` (Bonferroni over the two). The held-out half is independent of the evaluation
  half, so choosing the test by it keeps the level: the verdict is a mixture of two level-alpha
  tests. Otherwise, and for every other claim, the model-free (eps, delta) bound decides; it is
  reported beside the mu test in any case.
* ``violated`` when the deciding bound exceeds the claim; else ``consistent`` only when the audit
  had the power (below: a mechanism at twice the claimed epsilon reads ``violated`` with
  probability >= 0.9 at these trials), else ``untestable`` with the trials per input that would
  give it that power.

Numbers in, numbers out: no project module is imported, so ``reports`` pools by the same rule.

The power (issue 37, item 7). A ``consistent`` verdict means something only when the audit could
have caught a clearly broken claim. The reference broken mechanism is the one at ``FACTOR`` times the claimed epsilon (same
delta) whose best test errs equally often on both inputs:

* for the epsilon test, the (2 eps, delta) randomized response: FPR = FNR =
  ``(1 - delta) / (1 + e^(2 eps))`` (the vertex of the (2 eps, delta)-DP trade-off curve, Kairouz,
  Oh & Viswanath 2015);
* for the mu-GDP test of a claim whose declared law is Gaussian, the Gaussian shift mu' whose
  (eps, delta) curve reaches 2 eps at delta, tested at the midpoint: FPR = FNR = Phi(-mu' / 2).

With m0, m1 evaluation outputs per input the error counts are Binomial(m, rate); the power is the
probability, summed exactly over both counts, that the audit's Clopper-Pearson bound (each rate
at ``1 - (1 - confidence) / 2``, as ``attacks.epsilon_bounds`` computes it) exceeds the claim.
``trials_for_power`` finds the trials per input (evaluation halves ``n - n // 2``) at which it
reaches ``POWER``. mu-GDP and (eps, delta): ``gdp_delta`` is Dong, Roth & Su 2022, Cor. 2.13.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr, ndtr, ndtri

from fltr_audit.privacy.claim_trials import fewest_trials
from fltr_audit.privacy.error_bounds import clopper_pearson_upper

POWER = 0.9
"""A verdict reads ``consistent`` only when the audit catches the mechanism at ``FACTOR`` times the
claim with at least this probability (else ``untestable``)."""
FACTOR = 2.0
TRIALS_LIMIT = 1 << 40
TAIL = 1e-12
"""Binomial mass left out at each end of the summed counts."""


def gdp_delta(epsilon: float, mu: float) -> float:
    """The delta at ``epsilon`` of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu <= 0:
        return 0.0
    return float(ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2)))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest mu whose mu-GDP curve is (``epsilon``, ``delta``)-DP (``gdp_delta`` grows with
    mu): the mu a Gaussian mechanism's (eps, delta) claim asserts; 0 for delta = 0, inf where no mu
    up to 2**64 reaches delta (delta > 1)."""
    if delta <= 0.0 or not math.isfinite(epsilon):
        return 0.0 if delta <= 0.0 else math.inf
    hi = 1.0
    for _ in range(64):
        if gdp_delta(epsilon, hi) >= delta:
            return float(optimize.brentq(lambda mu: gdp_delta(epsilon, mu) - delta, 0.0, hi, xtol=1e-12))
        hi *= 2.0
    return math.inf  # delta > 1, or a mu beyond 2**64: a claim that bounds nothing


def _counts(m: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """The error counts of Binomial(m, rate) holding all but ``TAIL`` of the mass at each end, and
    their probabilities."""
    lo, hi = stats.binom.ppf([TAIL, 1.0 - TAIL], m, rate).astype(np.int64)  # below lo, above hi: < TAIL each
    k = np.arange(lo, hi + 1)
    return k, stats.binom.pmf(k, m, rate)


def _power(m0: int, m1: int, rate: float, confidence: float, limit: Callable[[np.ndarray], np.ndarray]) -> float:
    """P(bound > claim) when both counts are Binomial(m, ``rate``): for each false-positive count the
    bound exceeds the claim exactly when the false-negative rate's upper limit lies below
    ``limit(fpr upper limit)`` (both bounds fall as either count grows)."""
    level = 1.0 - (1.0 - confidence) / 2.0
    fp, p_fp = _counts(m0, rate)
    fn, p_fn = _counts(m1, rate)
    below = np.searchsorted(clopper_pearson_upper(fn, m1, level), limit(clopper_pearson_upper(fp, m0, level)),
                            side="left")
    cdf = np.concatenate([[0.0], np.cumsum(p_fn)])
    return float(np.clip((p_fp * cdf[below]).sum(), 0.0, 1.0))


def epsilon_power(m0: int, m1: int, epsilon: float, delta: float = 0.0, confidence: float = 0.95,
                  factor: float = FACTOR) -> float:
    """P(the epsilon bound exceeds ``epsilon``) for the (factor eps, delta) randomized response (module
    docstring): the bound ``max(ln((1 - d - U_fp) / U_fn), ln((1 - d - U_fn) / U_fp))`` exceeds eps
    exactly when ``U_fn < max((1 - d - U_fp) e^-eps, 1 - d - U_fp e^eps)``."""
    rate = (1.0 - delta) / (1.0 + math.exp(min(factor * epsilon, 700.0)))
    e = math.exp(min(epsilon, 700.0))
    return _power(m0, m1, rate, confidence, lambda u: np.maximum((1 - delta - u) / e, 1 - delta - u * e))


def mu_power(m0: int, m1: int, epsilon: float, delta: float, confidence: float = 0.95,
             factor: float = FACTOR) -> float:
    """P(the mu bound exceeds the claim's mu ``gdp_mu(epsilon, delta)``) for the Gaussian at
    ``factor`` eps (module docstring): ``Phi^-1(1 - U_fp) - Phi^-1(U_fn) > mu`` exactly when
    ``U_fn < Phi(Phi^-1(1 - U_fp) - mu)``."""
    mu, broken = gdp_mu(epsilon, delta), gdp_mu(factor * epsilon, delta)
    return _power(m0, m1, float(ndtr(-broken / 2)), confidence, lambda u: ndtr(ndtri(1.0 - u) - mu))


def trials_for_power(power: Callable[[int, int], float], target: float = POWER) -> int:
    """The fewest trials per input n whose evaluation halves (``n - n // 2`` each) give
    ``power(m, m) >= target``: doubling, then bisection (``TRIALS_LIMIT`` when none does)."""
    return fewest_trials(lambda n: power(n - n // 2, n - n // 2) >= target, 16, TRIALS_LIMIT)


GOF_LEVEL = 0.05
"""The normality test's level: below it the noise is not taken to be Gaussian."""
GOF_MIN = 20
"""Fewer held-out scores per input than this: no normality test (the mu test is not used)."""
def claim_verdict(claimed_epsilon: float, claimed_scope: str, audited_scope: str, epsilon_lb: float,
                  ceiling: float = math.inf) -> str:
    """The ceiling rule (issue #11): ``no claim`` when nothing finite is claimed; ``outside scope``
    when an ``aggregate`` claim was audited on single messages; ``untestable`` when the claim is at
    or above ``ceiling``; else ``violated`` when the lower bound exceeds the claim, ``consistent``
    otherwise. ``decide`` adds the power rule and the mu-GDP test."""
    if not math.isfinite(float(claimed_epsilon)):
        return "no claim"
    if claimed_scope == "aggregate" and audited_scope == "message":
        return "outside scope"
    if float(claimed_epsilon) >= float(ceiling):
        return "untestable"
    return "violated" if float(epsilon_lb) > float(claimed_epsilon) else "consistent"


def gaussian_shape_pvalue(held0: np.ndarray, held1: np.ndarray) -> float:
    """The p-value of "the scores on each input are Gaussian": ``scipy.stats.normaltest`` of each
    held-out half, Bonferroni over the two (NaN with fewer than ``GOF_MIN`` finite scores, or when a
    half is constant)."""
    pvalues = []
    for held in (held0, held1):
        x = np.asarray(held, dtype=np.float64)
        x = x[np.isfinite(x)]
        if len(x) < GOF_MIN or np.ptp(x) == 0:
            return math.nan
        pvalues.append(float(stats.normaltest(x).pvalue))
    return min(1.0, 2.0 * min(pvalues))


@dataclass(frozen=True)
class Decision:
    """A claim verdict, the test that decided it (``epsilon`` or ``mu-GDP``), the power that test had
    against a mechanism at twice the claim, and the trials per input that would give it ``POWER``
    (NaN unless the verdict is ``untestable``)."""

    verdict: str
    verdict_by: str
    power: float
    trials_needed: float


def decide(claimed_epsilon: float, delta: float, claimed_scope: str, audited_scope: str, epsilon_lb: float,
           mu: float, mu_lb: float, gof_pvalue: float, n0: int, n1: int, confidence: float) -> Decision:
    """The verdict of one audit (module docstring)."""
    by = "mu-GDP" if math.isfinite(mu) and math.isfinite(gof_pvalue) and gof_pvalue >= GOF_LEVEL else "epsilon"
    ruled = claim_verdict(claimed_epsilon, claimed_scope, audited_scope, epsilon_lb)
    if ruled not in ("violated", "consistent"):
        return Decision(ruled, by, math.nan, math.nan)
    if by == "mu-GDP":
        violated = mu_lb > mu

        def power(a: int, b: int) -> float:
            return mu_power(a, b, claimed_epsilon, delta, confidence)
    else:
        violated = ruled == "violated"

        def power(a: int, b: int) -> float:
            return epsilon_power(a, b, claimed_epsilon, delta, confidence)
    if violated:
        return Decision("violated", by, math.nan, math.nan)
    had = power(n0, n1)
    if had >= POWER:
        return Decision("consistent", by, had, math.nan)
    return Decision("untestable", by, had, float(_trials_needed(by, claimed_epsilon, delta, confidence)))


@functools.lru_cache(maxsize=4096)
def _trials_needed(by: str, claimed_epsilon: float, delta: float, confidence: float) -> int:
    """``trials_for_power`` of the claim's test (``by``: mu-GDP or epsilon), kept per claim: a report
    asks it of every pooled row of one defense, and each search costs hundreds of beta quantiles."""
    power = mu_power if by == "mu-GDP" else epsilon_power
    return trials_for_power(lambda a, b: power(a, b, claimed_epsilon, delta, confidence))
