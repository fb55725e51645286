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
  had the power (``fltr_audit.privacy.audit_power``: a mechanism at twice the claimed epsilon
  reads ``violated`` with probability >= 0.9 at these trials), else ``untestable`` with the trials
  per input that would give it that power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fltr_audit.constraints import ParameterError
from fltr_audit.privacy.audit_power import POWER, epsilon_power, mu_power, trials_for_power
from fltr_audit.privacy.claim_trials import trials_to_test

GOF_LEVEL = 0.05
"""The normality test's level: below it the noise is not taken to be Gaussian."""
GOF_MIN = 20
"""Fewer held-out scores per input than this: no normality test (the mu test is not used)."""
AUTO_TRIALS_CAP = 1_000_000
"""``--trials auto`` never sizes an audit beyond this many trials per input (and says so)."""
AUTO_MARGIN = 4
"""``--trials auto`` runs this many times the trials whose ceiling just reaches the claim
(the ceiling then lies about ln 4 above it)."""


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


def auto_trials(claimed_epsilon: float, delta: float = 0.0, confidence: float = 0.95,
                floor: int = 10_000) -> tuple[int, bool]:
    """``--trials auto``: ``AUTO_MARGIN`` times the trials that can test the claim (at least
    ``floor``), at most ``AUTO_TRIALS_CAP``; and whether the cap cut it (ParameterError for a
    defense that claims no epsilon: there is nothing to size the trials by)."""
    if not math.isfinite(claimed_epsilon):
        raise ParameterError("trials", "auto: the defense claims no epsilon, so there is nothing to size the trials "
                                       "by; give a number of trials")
    wanted = max(floor, AUTO_MARGIN * trials_to_test(claimed_epsilon, delta, confidence))
    return min(wanted, AUTO_TRIALS_CAP), wanted > AUTO_TRIALS_CAP


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
    ruled = claim_verdict(claimed_epsilon, claimed_scope, audited_scope, 0.0)
    if ruled not in ("violated", "consistent"):
        return Decision(ruled, by, math.nan, math.nan)
    if by == "mu-GDP":
        violated = mu_lb > mu

        def power(a: int, b: int) -> float:
            return mu_power(a, b, claimed_epsilon, delta, confidence)
    else:
        violated = epsilon_lb > claimed_epsilon

        def power(a: int, b: int) -> float:
            return epsilon_power(a, b, claimed_epsilon, delta, confidence)
    if violated:
        return Decision("violated", by, math.nan, math.nan)
    had = power(n0, n1)
    if had >= POWER:
        return Decision("consistent", by, had, math.nan)
    return Decision("untestable", by, had, float(trials_for_power(power)))
