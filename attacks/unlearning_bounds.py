"""Forgetting measured as membership in one run (issue 41): bounds and verdicts from the scores of
the canaries of ``attacks.unlearning_canaries``.

* ``membership``: how well scores tell the included canaries from the excluded ones, over the
  *eligible* canaries (those the schedule drew at least once: a choice from the schedule, never from
  the secrets) -- the one-run lower bound on epsilon (Steinke, Nasr, Jagielski, NeurIPS 2023), the
  f-DP one-run bounds mu and epsilon (Mahloujifar, Melis, Chaudhuri, ICML 2025) over the canaries of
  the most frequent participation count, TPR at 1 % and 0.1 % FPR (NaN when the excluded canaries
  are too few to resolve that FPR) and the AUC.
* ``forgetting_verdict`` (the observer of the unlearned model): ``not forgotten`` when the one-run
  bound is positive (the unlearned model tells included canaries from excluded ones: sound at 95 %,
  so a model that does not depend on the secrets reads so in at most 5 % of runs); ``untestable``
  when the model that never forgot (``before``) shows nothing either -- the audit has no power;
  ``forgotten`` otherwise.
* ``detectable_residue`` (the audit's power, printed with ``forgotten``): the smallest share rho of
  the trained model's offset that the audit would have caught, the model theta_after +
  rho (theta_before - theta_after) reading ``not forgotten``. Scores are projections here: the
  bound reads only their order, which the norm of the offset does not change.
* ``server_verdict`` (the server that unlearned and saw the model before): does the before/after
  pair tell more than the before model alone? A one-sided exact McNemar test on the eligible
  canaries, each test guessing "included" above its median score: ``reveals more`` when the pair's
  test is right where the before model's is wrong significantly more often than the reverse (5 %);
  ``untestable`` when the before model alone is already at its canary-count limit (nothing can show
  more); ``adds nothing measurable`` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

from attacks.fdp_one_run import fdp_one_run_bound, fdp_pool
from attacks.scoring import tpr_at_fpr
from attacks.whole_run_bounds import CONFIDENCE, one_run_lower_bound

DELTA = 1e-5
"""The delta of the one-run bounds."""
RESIDUE_STEPS = 14
"""Bisection steps of ``detectable_residue`` (rho to within 2^-14)."""
SERVER_LEVEL = 0.05


@dataclass(frozen=True)
class Membership:
    """What the scores show: the Steinke bound (``epsilon_lb``, its ``guesses`` and ``correct``, the
    canary-count ``limit`` and whether the bound is that limit), the f-DP bounds over ``fdp_pool``
    canaries of ``fdp_participations`` participations, TPR at low FPR, AUC, and the ``eligible``
    canaries guessed among."""

    epsilon_lb: float
    guesses: int
    correct: int
    limit: float
    limited_by_canaries: bool
    mu_lb: float
    epsilon_lb_fdp: float
    mu_limit: float
    fdp_pool: int
    fdp_participations: int
    tpr_at_fpr_0_01: float
    tpr_at_fpr_0_001: float
    auc: float
    eligible: int


def membership(scores: np.ndarray, present: np.ndarray, participations: np.ndarray, delta: float = DELTA,
               confidence: float = CONFIDENCE) -> Membership:
    """The figures of ``scores`` (higher: included) against the secrets ``present`` (module docstring)."""
    scores, present = np.asarray(scores, dtype=np.float64), np.asarray(present, dtype=bool)
    eligible = np.asarray(participations) > 0
    bound = one_run_lower_bound(scores, present, delta, confidence, eligible=eligible)
    pool, pool_participations = fdp_pool(participations)
    fdp = fdp_one_run_bound(scores, present, delta, confidence, pool=pool)
    s, p = scores[eligible], present[eligible]
    both = 0 < p.sum() < len(p)
    return Membership(
        epsilon_lb=bound.epsilon_lb, guesses=bound.guesses, correct=bound.correct, limit=bound.limit,
        limited_by_canaries=bound.limited_by_canaries, mu_lb=fdp.mu_lb, epsilon_lb_fdp=fdp.epsilon_lb,
        mu_limit=fdp.mu_limit, fdp_pool=fdp.pool, fdp_participations=pool_participations,
        tpr_at_fpr_0_01=tpr_at_fpr(p, s, 0.01) if both else math.nan,
        tpr_at_fpr_0_001=tpr_at_fpr(p, s, 0.001) if both else math.nan,
        auc=float(roc_auc_score(p, s)) if both else math.nan, eligible=int(eligible.sum()))


def testable(m: Membership) -> bool:
    """Whether the canaries can show anything: at least one guess pair among the eligible ones."""
    return m.eligible >= 2 and m.limit > 0


def forgetting_verdict(after: Membership, before: Membership) -> str:
    """``not forgotten`` / ``untestable`` / ``forgotten`` (module docstring)."""
    if not testable(after):
        return "untestable"
    if after.epsilon_lb > 0:
        return "not forgotten"
    return "forgotten" if before.epsilon_lb > 0 else "untestable"


def detectable_residue(after: np.ndarray, before: np.ndarray, present: np.ndarray, participations: np.ndarray,
                       delta: float = DELTA, confidence: float = CONFIDENCE) -> float:
    """The smallest rho in [0, 1] whose projections ``after + rho (before - after)`` give a positive
    one-run bound (bisection); NaN when even rho = 1 gives none (the audit has no power)."""
    after, before = np.asarray(after, dtype=np.float64), np.asarray(before, dtype=np.float64)
    eligible = np.asarray(participations) > 0

    def shows(rho: float) -> bool:
        return one_run_lower_bound(after + rho * (before - after), present, delta, confidence,
                                   eligible=eligible).epsilon_lb > 0

    if not shows(1.0):
        return math.nan
    if shows(0.0):
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(RESIDUE_STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if shows(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class ServerTest:
    """The server's McNemar test: canaries the pair gets right and the before model wrong
    (``pair_only``), the reverse (``before_only``), the one-sided p-value and the verdict."""

    pair_only: int
    before_only: int
    p_value: float
    verdict: str


def median_guesses(scores: np.ndarray) -> np.ndarray:
    """"Included" for the scores above their median (ties at the median: excluded)."""
    return scores > np.median(scores)


def server_test(pair: np.ndarray, before: np.ndarray, present: np.ndarray, participations: np.ndarray,
                before_alone: Membership, level: float = SERVER_LEVEL) -> ServerTest:
    """What the pair's scores tell beyond the before model's (module docstring)."""
    eligible = np.asarray(participations) > 0
    truth = np.asarray(present, dtype=bool)[eligible]
    if eligible.sum() < 2 or not testable(before_alone):
        return ServerTest(0, 0, math.nan, "untestable")
    right_pair = median_guesses(np.asarray(pair, dtype=np.float64)[eligible]) == truth
    right_before = median_guesses(np.asarray(before, dtype=np.float64)[eligible]) == truth
    b, c = int((right_pair & ~right_before).sum()), int((right_before & ~right_pair).sum())
    p = float(stats.binom.sf(b - 1, b + c, 0.5)) if b + c else 1.0
    if before_alone.limited_by_canaries:
        verdict = "untestable"
    else:
        verdict = "reveals more" if p < level else "adds nothing measurable"
    return ServerTest(b, c, p, verdict)
