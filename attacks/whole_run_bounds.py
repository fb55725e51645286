"""Privacy over a whole run from canaries: the one-run lower bound, the one-run estimate, the
multi-run lower bound, and the claim verdict over the run.

Each of ``m`` canaries has a secret bit (``present``) drawn independently with probability 1/2;
the auditor turns what the server saw into one score per canary (``attacks.canaries``), higher
meaning "present".

* **One-run lower bound** (Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training
  Run", NeurIPS 2023, arXiv:2305.08846, Thm. 3.1 and its (eps, delta) form): the auditor guesses
  "present" for the k highest scores, "absent" for the k lowest and abstains on the rest; if the
  run is (eps, delta)-DP towards each canary, the number W of correct guesses among the r = 2k made
  satisfies P[W >= v] <= beta + 2 m delta alpha with beta = P[Binomial(r, q) >= v],
  q = e^eps / (1 + e^eps), and alpha = max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i
  (``steinke_p_value``). The bound is the largest eps rejected at level 1 - confidence; the guess
  count k is chosen from ``GUESS_FRACTIONS`` of m, each tested at (1 - confidence) / len(grid)
  (Bonferroni), so the choice after seeing the scores keeps the 95 %.
  With every guess right the bound is set by the canary count, not the mechanism; no mechanism can
  show more than the *canary-count limit* with m canaries (``canary_limit``).
* **One-run estimate** (Andrew, Kairouz, Oh, Oprea, McMahan, Suriyakumar, "One-shot Empirical
  Privacy Estimation for Federated Learning", ICLR 2024, Sec. 3, Alg. 1-2): Gaussians fitted to
  the present and absent canaries' scores, and the epsilon at delta of that pair of Gaussians
  (``gaussian_pair_epsilon``: delta(eps) = int (p - e^eps q)_+ dx, both orders). An estimate, not a
  bound; its interval is the 2.5-97.5 % range over a bootstrap of the canaries.
* **Ties**: every bound ranks the scores after rounding them to ``SCORE_DECIMALS`` decimals and
  breaks the ties that remain at random, from a stream of its own that never sees the secrets
  (``untied_order``). A textbook Laplace sample's last bits reveal the value it was added to
  (Mironov, CCS 2012); a stable sort that broke ties by those bits would audit that floating-point
  side channel instead of the mechanism the claim is about (issue 37: 18 of 130 seeds ``violated``
  for a correct Laplace, 3 of 130 with rounding). The side channel is reported on its own
  (``attacks.float_channel``).
* **Multi-run lower bound**: one canary per independent run; the first half of the runs chooses
  the score threshold, the second half counts false positives and negatives, and
  ``fltr_audit.privacy.error_bounds.epsilon_lower_bound`` (one-sided Clopper-Pearson at each error rate, the
  two DP constraints) turns them into a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fltr_audit.privacy.error_bounds import epsilon_lower_bound
from scipy import stats

CONFIDENCE = 0.95
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""The guess counts r = 2k tried by the one-run bound, as fractions of the canaries (Bonferroni)."""
BOOTSTRAP = 100
EPS_MAX = 60.0
SCORE_DECIMALS = 9
"""Scores are rounded to this many decimals before they are ranked (module docstring)."""
TIE_SEED = 37
"""The seed of the tie-breaking stream: fixed, so independent of every run's secrets."""


def untied_order(scores: np.ndarray) -> np.ndarray:
    """The indices that sort ``scores`` rounded to ``SCORE_DECIMALS`` decimals, ties in random order
    (a permutation from ``TIE_SEED``, independent of the secrets; module docstring)."""
    rounded = np.round(np.asarray(scores, dtype=np.float64), SCORE_DECIMALS)
    keys = np.random.default_rng([TIE_SEED, len(rounded)]).random(len(rounded))
    return np.lexsort((keys, rounded))


def steinke_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[W >= v] under (epsilon, delta)-DP towards each of ``m`` canaries, ``r`` guesses (Steinke et
    al. 2023, Thm. 3.1): beta + 2 m delta alpha, capped at 1."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(stats.binom.sf(v - 1, r, q))
    alpha = 0.0
    if delta > 0 and v > 0:
        below = np.cumsum(stats.binom.pmf(v - np.arange(1, v + 1), r, q))  # P[v - i <= B < v], i = 1..v
        alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(1.0, beta + 2 * m * delta * alpha)


def steinke_lower_bound(m: int, r: int, v: int, delta: float, level: float) -> float:
    """The largest epsilon whose p-value (``steinke_p_value``) is below ``level`` (0 when none is):
    bisection, as the p-value grows with epsilon."""
    if r == 0 or steinke_p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    low, high = 0.0, 1.0
    while steinke_p_value(m, r, v, high, delta) < level:
        low, high = high, 2 * high
        if high > EPS_MAX:
            return EPS_MAX
    for _ in range(25):
        mid = (low + high) / 2
        low, high = (mid, high) if steinke_p_value(m, r, v, mid, delta) < level else (low, mid)
    return low


def _guess_counts(m: int) -> list[int]:
    return sorted({max(1, int(f * m / 2)) for f in GUESS_FRACTIONS})


@lru_cache(maxsize=64)
def canary_limit(m: int, delta: float, confidence: float = CONFIDENCE, eligible: int | None = None) -> float:
    """The largest one-run bound ``m`` canaries can give (``eligible`` of them can be guessed): every
    guess right, at the best guess count."""
    counts = _guess_counts(m if eligible is None else eligible)
    level = (1.0 - confidence) / len(counts)
    return max(steinke_lower_bound(m, 2 * k, 2 * k, delta, level) if 2 * k <= m else 0.0 for k in counts)


@dataclass(frozen=True)
class OneRunBound:
    """The one-run lower bound and how it was reached: ``guesses`` made (the others abstained),
    ``correct`` among them, ``limit`` (the canary-count limit: the bound perfect scores would give)
    and ``limited_by_canaries``: the bound is that limit, set by the number of canaries and not by
    the mechanism."""

    epsilon_lb: float
    guesses: int
    correct: int
    canaries: int
    limit: float
    limited_by_canaries: bool


def _best_bound(scores: np.ndarray, present: np.ndarray, pool: np.ndarray, m: int, delta: float,
                level: float, counts: list[int]) -> tuple[float, int, int]:
    order = pool[untied_order(scores[pool])]
    best = (0.0, 0, 0)
    for k in counts:
        if 2 * k > len(pool):
            continue
        correct = int(present[order[len(pool) - k:]].sum() + (~present[order[:k]]).sum())
        lb = steinke_lower_bound(m, 2 * k, correct, delta, level)
        if lb > best[0] or best[1] == 0:
            best = (lb, 2 * k, correct)
    return best


def one_run_lower_bound(scores: np.ndarray, present: np.ndarray, delta: float,
                        confidence: float = CONFIDENCE, eligible: np.ndarray | None = None) -> OneRunBound:
    """Steinke et al.'s bound with abstention (module docstring): for each guess count k of the grid,
    "present" for the k top scores and "absent" for the k bottom ones, the bound at level
    (1 - confidence) / len(grid); the largest over the grid. Only ``eligible`` canaries are guessed
    (those that took part: a choice made from the schedule, never from the secrets); the theorem's
    m counts them all. The canary-count limit is the same rule run on perfect scores (the secrets
    themselves): what these canaries could show against a mechanism that hides nothing."""
    scores, present = np.asarray(scores, dtype=np.float64), np.asarray(present, dtype=bool)
    m = len(scores)
    pool = np.arange(m) if eligible is None else np.flatnonzero(eligible)
    counts = _guess_counts(len(pool)) if len(pool) else []
    level = (1.0 - confidence) / max(len(counts), 1)
    lb, guesses, correct = _best_bound(scores, present, pool, m, delta, level, counts)
    limit = _best_bound(present.astype(np.float64), present, pool, m, delta, level, counts)[0]
    return OneRunBound(lb, guesses, correct, m, limit, guesses > 0 and lb >= limit - 1e-9)


def gaussian_pair_epsilon(mu0: float, sd0: float, mu1: float, sd1: float, delta: float) -> float:
    """Epsilon at ``delta`` between N(mu0, sd0^2) and N(mu1, sd1^2): the smallest eps with
    max over both orders of int (p - e^eps q)_+ dx <= delta (numerical integration on a grid)."""
    lo = min(mu0 - 14 * sd0, mu1 - 14 * sd1)
    hi = max(mu0 + 14 * sd0, mu1 + 14 * sd1)
    x = np.linspace(lo, hi, 4_001)
    p, q = stats.norm.pdf(x, mu0, sd0), stats.norm.pdf(x, mu1, sd1)
    step = x[1] - x[0]

    def profile(eps: float) -> float:
        e = math.exp(eps)
        return max(np.clip(p - e * q, 0.0, None).sum(), np.clip(q - e * p, 0.0, None).sum()) * step

    if profile(0.0) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while profile(high) > delta:
        low, high = high, 2 * high
        if high > EPS_MAX:
            return math.inf
    for _ in range(25):
        mid = (low + high) / 2
        low, high = (mid, high) if profile(mid) > delta else (low, mid)
    return high


@dataclass(frozen=True)
class OneRunEstimate:
    """Andrew et al.'s epsilon estimate (``epsilon``) with its bootstrap interval; an estimate."""

    epsilon: float
    low: float
    high: float


NOT_GAUSSIAN = ("message-scope likelihood-ratio scores are bounded, not Gaussian: Andrew et al.'s Gaussian fit "
                "holds only for aggregate-scope cosines")
"""Why the one-run estimate is left out of a message-scope audit."""


def one_run_estimate(scores: np.ndarray, present: np.ndarray, delta: float, seed: int = 0,
                     boot: int = BOOTSTRAP, scope: str = "aggregate") -> tuple[OneRunEstimate, str]:
    """Gaussians fitted to the present and absent canaries' scores, and their epsilon at ``delta``
    (``gaussian_pair_epsilon``); the interval from ``boot`` resamples of the canaries; and the reason
    it is NaN instead. Only where the statistic is Gaussian-shaped (``scope`` aggregate: cosines
    with the model delta, Andrew et al. Sec. 3): a message scope's bounded likelihood ratios give
    NaN with ``NOT_GAUSSIAN`` (issue 37: 12.7 for an accounted epsilon of 1)."""
    if scope != "aggregate":
        return OneRunEstimate(math.nan, math.nan, math.nan), NOT_GAUSSIAN
    return _fitted(scores, present, delta, seed, boot), ""


def _fitted(scores: np.ndarray, present: np.ndarray, delta: float, seed: int, boot: int) -> OneRunEstimate:
    """Andrew et al.'s fit and its bootstrap interval (``one_run_estimate``)."""
    scores, present = np.asarray(scores, dtype=np.float64), np.asarray(present, dtype=bool)

    def fit(s: np.ndarray, p: np.ndarray) -> float:
        a, b = s[p], s[~p]
        if len(a) < 2 or len(b) < 2:
            return math.nan
        sa, sb = max(a.std(ddof=1), 1e-12), max(b.std(ddof=1), 1e-12)
        return gaussian_pair_epsilon(b.mean(), sb, a.mean(), sa, delta)

    point = fit(scores, present)
    if math.isnan(point):  # fewer than two present or absent canaries
        return OneRunEstimate(point, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    draws = [fit(scores[i], present[i]) for i in (rng.integers(0, len(scores), len(scores)) for _ in range(boot))]
    draws = np.array([d for d in draws if np.isfinite(d)])
    if not len(draws):
        return OneRunEstimate(point, math.nan, math.nan)
    return OneRunEstimate(point, float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))


@dataclass(frozen=True)
class MultiRunBound:
    """The multi-run lower bound from one canary per run: the threshold chosen on the first half of
    the runs, the errors counted on the second (``fp`` of ``n0`` absent, ``fn`` of ``n1`` present)."""

    epsilon_lb: float
    runs: int
    threshold: float
    fp: int
    fn: int
    n0: int
    n1: int


def multi_run_lower_bound(scores: np.ndarray, present: np.ndarray, delta: float,
                          confidence: float = CONFIDENCE) -> MultiRunBound:
    """One score and secret per independent run (module docstring)."""
    scores, present = np.round(np.asarray(scores, dtype=np.float64), SCORE_DECIMALS), np.asarray(present, dtype=bool)
    half = len(scores) // 2
    fit_s, fit_p, s, p = scores[:half], present[:half], scores[half:], present[half:]
    candidates = np.unique(fit_s) if half else np.array([0.0])
    best, threshold = -1.0, 0.0
    for t in candidates:  # the threshold maximizing the point estimate on the held-out half
        fpr = ((fit_s >= t) & ~fit_p).sum() / max((~fit_p).sum(), 1)
        fnr = ((fit_s < t) & fit_p).sum() / max(fit_p.sum(), 1)
        gain = 1.0 - fpr - fnr
        if gain > best:
            best, threshold = gain, float(t)
    fp, fn = int(((s >= threshold) & ~p).sum()), int(((s < threshold) & p).sum())
    n0, n1 = int((~p).sum()), int(p.sum())
    if n0 == 0 or n1 == 0:
        return MultiRunBound(0.0, len(scores), threshold, fp, fn, n0, n1)
    lb, _ = epsilon_lower_bound(fp, fn, n0, n1, delta, confidence)
    return MultiRunBound(float(lb), len(scores), threshold, fp, fn, n0, n1)


def run_claim_verdict(epsilon_lb: float, accounted: float, limit: float) -> str:
    """``violated`` when the one-run bound exceeds the epsilon accounted over the run, ``untestable``
    when the accounted epsilon is at or above what the canaries can show (the canary-count limit),
    ``consistent`` otherwise (tightness = bound / accounted)."""
    if epsilon_lb > accounted:
        return "violated"
    if accounted >= limit:
        return "untestable"
    return "consistent"
