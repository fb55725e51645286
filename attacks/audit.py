"""Empirical lower bounds on epsilon: a distinguishing attack turned into a DP audit.

A mechanism M satisfies (epsilon, delta)-DP only if every test deciding "input 1" vs
"input 0" from one output has ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``,
hence

    epsilon >= max( ln((1 - delta - FPR) / FNR), ln((1 - delta - FNR) / FPR) ).

The audit runs M ``n_trials`` times on each of two neighbouring inputs (e.g. one client's
message with and without one click), lets an attack statistic score every output, and:

* picks the decision threshold (and direction) on a held-out half of the trials, the one
  with the best lower bound there, so that the reported bound is not tuned on its own data;
* on the other half, counts FPR = P(decide 1 | input 0) and FNR = P(decide 0 | input 1);
* reports the point estimate from those rates and a lower bound that holds with probability
  ``confidence``: one-sided Clopper-Pearson upper limits for FPR and FNR, each at level
  ``1 - (1 - confidence) / 2`` (Bonferroni over the two rates), put into the formula.

Statistics for vector messages: ``projection_statistic`` (likelihood ratio under isotropic
Gaussian noise) and ``vote_statistic`` (per-coordinate majority, robust to the sparse
heavy-tailed share of dp-distributed); ``defense_mechanism`` wraps a client defense.

The verdict compares the lower bound with the defense's ``PrivacyClaim``: ``holds`` when it
does not exceed the claimed epsilon, else ``violated for threat model X``. A claim with scope
``aggregate`` audited on single messages is reported as violated when the messages leak:
the report shows the scope next to the verdict, which is exactly the gap the audit exposes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy import stats

from fltr_audit.errors import FltrError
from fltr_audit.interfaces import ClientDefense, PrivacyClaim
from fltr_audit.messages import Messages

Mechanism = Callable[[np.random.Generator, int, int], np.ndarray]
"""``mechanism(rng, n_trials, which)``: ``n_trials`` outputs on input ``which`` (0 or 1),
stacked along the first axis."""
Statistic = Callable[[np.ndarray], np.ndarray]
"""Maps a stack of outputs to one score per output (higher: more like input 1), or to
boolean decisions."""


@dataclass(frozen=True)
class AuditResult:
    """One empirical epsilon audit (columns of the ``audits`` table, contracts.md)."""

    mechanism: str
    attack: str
    threat_model: str
    claimed_epsilon: float
    claimed_delta: float
    claimed_scope: str
    epsilon_point: float
    epsilon_lb: float
    confidence: float
    n_trials: int
    fpr: float
    fnr: float
    threshold: float
    direction: int
    verdict: str

    def as_dict(self) -> dict:
        return asdict(self)


def epsilon_from_rates(fpr: np.ndarray, fnr: np.ndarray, delta: float = 0.0) -> np.ndarray:
    """``max(ln((1 - delta - FPR)/FNR), ln((1 - delta - FNR)/FPR))``, floored at 0 (inf when a
    rate is 0 and the other below 1 - delta)."""
    fpr, fnr = np.asarray(fpr, dtype=np.float64), np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fpr, 0.0) / fnr)
        b = np.log(np.maximum(1.0 - delta - fnr, 0.0) / fpr)
    out = np.fmax(np.where(np.isnan(a), -np.inf, a), np.where(np.isnan(b), -np.inf, b))
    return np.maximum(out, 0.0)


def clopper_pearson_upper(errors: np.ndarray, n: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper limit of a binomial rate at ``level`` (e.g. 0.975)."""
    errors = np.asarray(errors, dtype=np.float64)
    upper = stats.beta.ppf(level, errors + 1, n - errors)
    return np.where(errors >= n, 1.0, upper)


def _rates(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """Error counts (false positives, false negatives) of ``direction * s > direction * t``."""
    a0 = np.sort(direction * s0)
    a1 = np.sort(direction * s1)
    t = direction * thresholds
    fp = len(a0) - np.searchsorted(a0, t, side="right")    # input 0 scored above t
    fn = np.searchsorted(a1, t, side="right")               # input 1 scored at or below t
    return fp, fn


def _lower_bound(fp: np.ndarray, fn: np.ndarray, n0: int, n1: int, delta: float, confidence: float) -> np.ndarray:
    level = 1.0 - (1.0 - confidence) / 2.0
    return epsilon_from_rates(clopper_pearson_upper(fp, n0, level), clopper_pearson_upper(fn, n1, level), delta)


def audit(
    mechanism: Mechanism,
    statistic: Statistic,
    *,
    claim: PrivacyClaim,
    n_trials: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    delta: float | None = None,
    threat_model: str = "server",
    mechanism_name: str = "",
    attack_name: str = "",
) -> AuditResult:
    """Empirical epsilon audit of ``mechanism`` with the attack ``statistic``.

    Parameters
    ----------
    mechanism : callable ``(rng, n_trials, which) -> outputs``
    statistic : callable ``outputs -> scores (n,)`` (or bool decisions)
    claim : PrivacyClaim
        The defense's claimed guarantee; ``delta`` defaults to ``claim.delta``.
    n_trials : int
        Outputs per input; half choose the threshold, half measure the rates.
    seed : int
        Seeds the mechanism's generator (``numpy.random.default_rng``).
    confidence : float
        Probability with which ``epsilon_lb`` is a valid lower bound.
    """
    if n_trials < 4:
        raise FltrError(f"--trials: need at least 4 trials per input, got {n_trials}")
    if not 0.0 < confidence < 1.0:
        raise FltrError(f"--confidence: must lie in (0, 1), got {confidence}")
    delta = claim.delta if delta is None else float(delta)
    rng = np.random.default_rng(seed)
    s0 = np.asarray(statistic(mechanism(rng, n_trials, 0)), dtype=np.float64).reshape(-1)
    s1 = np.asarray(statistic(mechanism(rng, n_trials, 1)), dtype=np.float64).reshape(-1)
    if len(s0) != n_trials or len(s1) != n_trials:
        raise FltrError(f"audit: the statistic must give one score per trial ({n_trials}), got {len(s0)} and {len(s1)}")
    h = n_trials // 2
    held0, eval0, held1, eval1 = s0[:h], s0[h:], s1[:h], s1[h:]
    candidates = np.unique(np.concatenate([held0, held1]))
    if len(candidates) > 512:
        candidates = np.unique(np.quantile(candidates, np.linspace(0.0, 1.0, 512)))
    candidates = np.concatenate([[-np.inf], candidates])
    best = (-1.0, 0.0, 1)
    for direction in (1, -1):
        fp, fn = _rates(held0, held1, candidates, direction)
        lb = _lower_bound(fp, fn, h, h, delta, confidence)
        j = int(np.argmax(lb))
        if lb[j] > best[0]:
            best = (float(lb[j]), float(candidates[j]), direction)
    _, threshold, direction = best
    fp, fn = _rates(eval0, eval1, np.array([threshold]), direction)
    n0, n1 = len(eval0), len(eval1)
    fpr, fnr = fp[0] / n0, fn[0] / n1
    point = float(epsilon_from_rates(fpr, fnr, delta))
    lb = float(_lower_bound(fp, fn, n0, n1, delta, confidence)[0])
    verdict = "holds" if lb <= claim.epsilon else f"violated for threat model {threat_model}"
    return AuditResult(
        mechanism=mechanism_name,
        attack=attack_name,
        threat_model=threat_model,
        claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta),
        claimed_scope=claim.scope,
        epsilon_point=point,
        epsilon_lb=lb,
        confidence=float(confidence),
        n_trials=int(n_trials),
        fpr=float(fpr),
        fnr=float(fnr),
        threshold=threshold,
        direction=direction,
        verdict=verdict,
    )


def defense_mechanism(
    defense: ClientDefense,
    updates: tuple[np.ndarray, np.ndarray],
    global_params: np.ndarray,
    *,
    cohort_size: int = 1,
    vector_kind: str = "weights",
) -> Mechanism:
    """A client defense applied to one client's message, as an audit mechanism.

    ``updates[which]`` is the client's update on the two neighbouring inputs (e.g. with and
    without one click). Each output is the defended message's update. The defense sees cohorts
    of ``cohort_size`` clients (what its noise is calibrated to, e.g. dp-distributed's 1/n
    Gamma shape), filled with copies of the audited message: a client-side defense treats
    rows independently, so every row of every cohort is one independent trial.
    """
    if cohort_size < 1:
        raise FltrError(f"--probe-cohort: cohort size must be positive, got {cohort_size}")
    g = np.asarray(global_params, dtype=np.float64)

    def mechanism(rng: np.random.Generator, n_trials: int, which: int) -> np.ndarray:
        u = np.asarray(updates[which], dtype=np.float64)
        out = []
        done = 0
        while done < n_trials:
            rows = np.broadcast_to(u, (cohort_size, len(u)))
            vector = rows + g if vector_kind == "weights" else rows.copy()
            msgs = Messages(n_interactions=np.ones(cohort_size, dtype=np.int64), vector=vector, vector_kind=vector_kind)
            out.append(defense.apply(msgs, g, rng).updates(g))
            done += cohort_size
        return np.concatenate(out)[:n_trials]

    return mechanism


def projection_statistic(update0: np.ndarray, update1: np.ndarray) -> Statistic:
    """Score each observed update by its projection on ``update1 - update0`` (centred at the
    midpoint): the likelihood-ratio test for isotropic Gaussian noise, a strong generic test."""
    u0, u1 = np.asarray(update0, dtype=np.float64), np.asarray(update1, dtype=np.float64)
    direction = u1 - u0
    mid = (u0 + u1) / 2.0

    def statistic(outputs: np.ndarray) -> np.ndarray:
        return (np.asarray(outputs, dtype=np.float64) - mid) @ direction

    return statistic


def vote_statistic(update0: np.ndarray, update1: np.ndarray) -> Statistic:
    """Score each observed update by how many coordinates lie closer to ``update1`` than to
    ``update0`` (minus the reverse): robust to sparse, heavy-tailed noise such as one client's
    share of dp-distributed's Gamma differences, which is ~0 in most coordinates and large in few."""
    u0, u1 = np.asarray(update0, dtype=np.float64), np.asarray(update1, dtype=np.float64)

    def statistic(outputs: np.ndarray) -> np.ndarray:
        o = np.asarray(outputs, dtype=np.float64)
        return np.sign(np.abs(o - u0) - np.abs(o - u1)).sum(axis=-1)

    return statistic
