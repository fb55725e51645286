"""Empirical lower bounds on epsilon (and on Gaussian-DP mu): a distinguishing test turned into a DP audit.

A mechanism M satisfies (epsilon, delta)-DP only if every test deciding "input 1" vs
"input 0" from one output has ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``,
hence

    epsilon >= max( ln((1 - delta - FPR) / FNR), ln((1 - delta - FNR) / FPR) ).

It is mu-GDP (Dong, Roth & Su 2022, Def. 2.6) only if ``FNR >= Phi(Phi^-1(1 - FPR) - mu)`` for
every test, hence ``mu >= Phi^-1(1 - FPR) - Phi^-1(FNR)``.

The audit runs M ``n_trials`` times on each of two neighbouring inputs (in chunks, so a
million trials of a 136-dimensional message never sit in memory at once), scores every output
with a statistic (with ``rounds`` K > 1: K outputs per trial on the same input, scores summed --
the sum of per-round log-likelihood ratios is the optimal test of the K-fold composition), and:

* picks the decision threshold (and direction) on a held-out half of the trials, the one with
  the best lower bound there, so the reported bound is not tuned on its own data (the mu bound
  gets its own held-out threshold: the best tests for epsilon and mu sit at different rates);
* on the other half counts the errors ``fp`` of ``n0`` and ``fn`` of ``n1``: FPR = P(decide 1 |
  input 0), FNR = P(decide 0 | input 1);
* reports the point estimate from those rates and a lower bound holding with probability
  ``confidence``: one-sided Clopper-Pearson upper limits for FPR and FNR, each at level
  ``1 - (1 - confidence) / 2`` (Bonferroni over the two rates), put into the formula;
* ``ceiling``: the bound with zero errors -- the largest these evaluation sizes can show;
  ``trial_limited``: an error count is zero, so the bound is set by the trial count, not measured.

The verdict (``fltr_audit.privacy.claim_decision.decide``): ``no claim`` for an infinite claimed
epsilon, ``outside scope`` when an aggregate-scope claim is audited on single messages, else
``violated`` when the deciding bound exceeds the claim (the mu-GDP bound for a declared Gaussian
law whose held-out scores pass a normality test, else the epsilon bound), ``consistent`` when the
audit had the power to catch twice the claim, ``untestable`` otherwise (``trials_needed``);
``tightness`` = epsilon_lb / claimed_epsilon. ``small_error`` records which error rate the
held-out half chose to keep small (``fp``: the bound ``ln((1 - delta - FNR) / FPR)``), so that
runs can be oriented alike before their counts are pooled (``reports.claims``).

Statistics for vector messages: ``projection_statistic`` (likelihood ratio under isotropic
Gaussian noise) and ``vote_statistic`` (per-coordinate majority); mechanism-aware ones and the
worst-case neighbours live in ``attacks.mechanism_tests`` and ``attacks.worst_case``; ``defense_mechanism`` wraps a client defense.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy.special import ndtri

from fltr_audit.privacy.claim_decision import GOF_LEVEL, decide, gaussian_shape_pvalue
from fltr_audit.privacy import error_bounds
from fltr_audit.privacy.limit_tables import tabulated
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import ClientDefense, PrivacyClaim
from fltr_audit.engine.messages import Messages
from fltr_audit.store.records import AuditMeasurement

Mechanism = Callable[[np.random.Generator, int, int], np.ndarray]
"""``mechanism(rng, n_trials, which)``: ``n_trials`` outputs on input ``which`` (0 or 1),
stacked along the first axis."""
Statistic = Callable[[np.ndarray], np.ndarray]
"""Maps a stack of outputs to one score per output (higher: more like input 1), or to
boolean decisions."""

NEIGHBOURS = ("worst-case", "natural")
SCOPES = ("message", "aggregate")
CLAIM_VERDICTS = ("violated", "consistent", "untestable", "outside scope", "no claim")
CHUNK_VALUES = 1 << 22
"""Output values (trials x coordinates) generated per call of the mechanism (32 MB of float64)."""
CANDIDATES = 1024
"""Thresholds tried on the held-out half (quantiles of its scores)."""


@dataclass(frozen=True)
class AuditResult(AuditMeasurement):
    """One empirical audit: the measured columns of the ``audits`` table
    (``fltr_audit.store.records.AuditMeasurement``) and the distinguishing test's decision
    ``threshold`` and ``direction`` (+1: flag the statistic above the threshold, -1: below)."""

    threshold: float
    direction: int

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


def mu_from_rates(fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
    """The smallest Gaussian-DP mu whose trade-off curve ``FNR = Phi(Phi^-1(1 - FPR) - mu)``
    allows (FPR, FNR), in either direction of the test: ``Phi^-1(1 - FPR) - Phi^-1(FNR)``, floored at 0."""
    fpr, fnr = np.asarray(fpr, dtype=np.float64), np.asarray(fnr, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        mu = ndtri(1.0 - fpr) - ndtri(fnr)
    return np.maximum(np.nan_to_num(mu, nan=0.0), 0.0)


def _errors(a0: np.ndarray, a1: np.ndarray, thresholds: np.ndarray, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """Error counts (false positives, false negatives) of ``direction * s > direction * t``;
    ``a0``, ``a1`` are the sorted values of ``direction * s`` on inputs 0 and 1."""
    t = direction * thresholds
    fp = len(a0) - np.searchsorted(a0, t, side="right")    # input 0 scored above t
    fn = np.searchsorted(a1, t, side="right")               # input 1 scored at or below t
    return fp, fn


def clopper_pearson_upper(errors: np.ndarray, n: int, level: float) -> np.ndarray:
    """``error_bounds.clopper_pearson_upper``, read from a table per (n, level) where the threshold
    search asks for many counts out of the same n (``limit_tables``: the same values)."""
    return tabulated(error_bounds.clopper_pearson_upper, errors, n, level)


def _upper_rates(fp, fn, n0: int, n1: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    level = 1.0 - (1.0 - confidence) / 2.0
    return clopper_pearson_upper(fp, n0, level), clopper_pearson_upper(fn, n1, level)


def epsilon_lower_bound(fp, fn, n0: int, n1: int, delta: float = 0.0, confidence: float = 0.95) -> np.ndarray:
    """The audited epsilon lower bound from error counts (Clopper-Pearson, Bonferroni over the two rates)."""
    return epsilon_from_rates(*_upper_rates(fp, fn, n0, n1, confidence), delta)


def mu_lower_bound(fp, fn, n0: int, n1: int, confidence: float = 0.95) -> np.ndarray:
    """The audited Gaussian-DP mu lower bound from error counts (same limits as the epsilon bound)."""
    return mu_from_rates(*_upper_rates(fp, fn, n0, n1, confidence))


def _best_threshold(held0: np.ndarray, held1: np.ndarray, objective: Callable) -> tuple[float, float, int]:
    """(value on the held-out half, threshold, direction) maximizing ``objective(fp, fn)``."""
    both = np.concatenate([held0, held1])
    finite = both[np.isfinite(both)]  # quantiles interpolate: an infinite score would give inf - inf
    candidates = np.unique(np.quantile(finite, np.linspace(0.0, 1.0, CANDIDATES))) if finite.size else finite
    # the midpoints between adjacent distinct scores separate ties that quantiles may skip; halved
    # before adding so huge scores cannot overflow, and a gap to an infinite score keeps its finite end
    distinct = np.unique(both)
    if len(distinct) <= CANDIDATES:
        lower, upper = distinct[:-1], distinct[1:]
        with np.errstate(invalid="ignore"):
            middle = lower / 2 + upper / 2
        candidates = np.concatenate([distinct, np.where(np.isfinite(middle), middle, lower)])
    candidates = np.concatenate([[-np.inf], np.unique(candidates)])
    best = (-1.0, 0.0, 1)
    for direction in (1, -1):
        fp, fn = _errors(np.sort(direction * held0), np.sort(direction * held1), candidates, direction)
        value = objective(fp, fn)
        ties = np.flatnonzero(value == value.max())
        j = int(ties[len(ties) // 2])  # the middle of a run of equally good thresholds: margin on both sides
        if value[j] > best[0]:
            best = (float(value[j]), float(candidates[j]), direction)
    return best


def scores_of(mechanism: Mechanism, statistic: Statistic, rng: np.random.Generator, n_trials: int, which: int,
              rounds: int = 1, chunk: int | None = None) -> np.ndarray:
    """The statistic's scores of ``n_trials`` outputs of input ``which``, generated ``chunk`` trials
    at a time (default: ``CHUNK_VALUES`` output values per chunk); with ``rounds`` K, the scores of
    K independent outputs on the same input are summed per trial."""
    if chunk is None:
        width = int(np.prod(np.shape(mechanism(np.random.default_rng(0), 1, which))[1:]))
        chunk = max(1, CHUNK_VALUES // max(width, 1))
    out = np.empty(n_trials)
    for start in range(0, n_trials, chunk):
        size = min(chunk, n_trials - start)
        total = np.zeros(size)
        for _ in range(rounds):
            s = np.asarray(statistic(mechanism(rng, size, which)), dtype=np.float64).reshape(-1)
            if len(s) != size:
                raise FltrError(f"audit: the statistic must give one score per trial ({size}), got {len(s)}")
            total += s
        out[start:start + size] = total
    # rounded to 9 decimals (ties up to floating-point error: no threshold separates the inputs by
    # their rounding error); infinite scores held at +-1e290, which rounding (x 1e9) keeps finite
    return np.round(np.clip(np.nan_to_num(out, nan=0.0), -1e290, 1e290), 9)


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
    neighbours: str = "natural",
    audited_scope: str | None = None,
    rounds: int = 1,
    mu: float = float("nan"),
    chunk: int | None = None,
) -> AuditResult:
    """Empirical epsilon (and mu) audit of ``mechanism`` with the test ``statistic``.

    Parameters
    ----------
    mechanism : callable ``(rng, n_trials, which) -> outputs``
    statistic : callable ``outputs -> scores (n,)`` (or bool decisions)
    claim : PrivacyClaim
        The claimed guarantee for what is audited (for ``rounds`` K, the claim composed over K
        rounds); ``delta`` defaults to ``claim.delta``.
    n_trials : int
        Trials per input; half choose the threshold, half measure the rates.
    seed : int
        Seeds the mechanism's generator (``numpy.random.default_rng``).
    confidence : float
        Probability with which ``epsilon_lb`` (and ``mu_lb``) is a valid lower bound.
    neighbours, audited_scope : str
        How the two inputs were made (``worst-case`` | ``natural``) and what the output is
        (``message`` | ``aggregate``; default: ``aggregate`` when the threat model says so).
    rounds : int
        Outputs per trial on the same input (the attacker sums their scores).
    mu : float
        The claimed Gaussian-DP mu (NaN: not a Gaussian mechanism, no ``mu_lb``).
    """
    check("n_trials", n_trials, (Interval(int, 4, None),))
    check("rounds", rounds, (Interval(int, 1, None),))
    rng = np.random.default_rng(seed)
    s0 = scores_of(mechanism, statistic, rng, n_trials, 0, rounds, chunk)
    s1 = scores_of(mechanism, statistic, rng, n_trials, 1, rounds, chunk)
    h = n_trials // 2
    return measure((s0[:h], s1[:h]), (s0[h:], s1[h:]), claim=claim, confidence=confidence, delta=delta,
                   threat_model=threat_model, mechanism_name=mechanism_name, attack_name=attack_name,
                   neighbours=neighbours, audited_scope=audited_scope, rounds=rounds, mu=mu)


def audit_chosen(candidates: dict[str, tuple[Mechanism, Statistic]], *, claim: PrivacyClaim, n_trials: int = 2000,
                 seed: int = 0, rounds: int = 1, mu: float = float("nan"), confidence: float = 0.95,
                 chunk: int | None = None, **labels) -> AuditResult:
    """The audit of the candidate (input pair) whose held-out half gives the strongest evidence
    against the claim: every candidate draws a held-out half from a stream of its own
    (``[seed, 37, i]``), the best is kept by its held-out bound relative to the claim (the mu bound
    when its scores pass the normality test and ``mu`` is finite, else the epsilon bound), and only
    it draws an evaluation half. The choice never sees the evaluation data, so the kept audit holds
    at ``confidence`` with no correction for the candidates tried (``labels``: ``measure``'s)."""
    check("n_trials", n_trials, (Interval(int, 4, None),))
    check("rounds", rounds, (Interval(int, 1, None),))
    delta, claimed, h = claim.delta, float(claim.epsilon), n_trials // 2
    best, kept = -math.inf, None
    for i, (name, (mechanism, statistic)) in enumerate(candidates.items()):
        rng = np.random.default_rng([int(seed), 37, i])
        held = tuple(scores_of(mechanism, statistic, rng, h, which, rounds, chunk) for which in (0, 1))
        if math.isfinite(mu) and gaussian_shape_pvalue(*held) >= GOF_LEVEL:
            value = _best_threshold(*held, lambda a, b: mu_lower_bound(a, b, h, h, confidence))[0] / mu
        else:
            value = _best_threshold(*held, lambda a, b: epsilon_lower_bound(a, b, h, h, delta, confidence))[0]
            value = value / claimed if 0 < claimed < math.inf else value
        if kept is None or value > best:
            best, kept = value, (name, mechanism, statistic, rng, held)
    name, mechanism, statistic, rng, held = kept
    evaluation = tuple(scores_of(mechanism, statistic, rng, n_trials - h, which, rounds, chunk) for which in (0, 1))
    return measure(held, evaluation, claim=claim, confidence=confidence, rounds=rounds, mu=mu, pair=name,
                   pairs=len(candidates), **labels)


def measure(held: tuple[np.ndarray, np.ndarray], evaluation: tuple[np.ndarray, np.ndarray], *, claim: PrivacyClaim,
            confidence: float = 0.95, delta: float | None = None, threat_model: str = "server",
            mechanism_name: str = "", attack_name: str = "", neighbours: str = "natural",
            audited_scope: str | None = None, rounds: int = 1, mu: float = float("nan"), pair: str = "",
            pairs: int = 1) -> AuditResult:
    """The audit's figures from the scores of its held-out half (threshold, direction, the mu
    test's threshold, the normality test) and of its evaluation half (error counts, bounds), and
    its verdict (``fltr_audit.privacy.claim_decision.decide``); ``audit``'s parameters."""
    check("confidence", confidence, (Interval(float, 0.0, 1.0, closed="neither"),))
    if neighbours not in NEIGHBOURS:
        raise ParameterError("neighbours", f"unknown neighbour kind {neighbours!r} (choose {' or '.join(NEIGHBOURS)})")
    check("rounds", rounds, (Interval(int, 1, None),))
    audited_scope = audited_scope or ("aggregate" if "aggregate" in threat_model else "message")
    delta = claim.delta if delta is None else float(delta)
    (held0, held1), (eval0, eval1) = held, evaluation
    h, n0, n1 = len(held0), len(eval0), len(eval1)
    _, threshold, direction = _best_threshold(
        held0, held1, lambda fp, fn: epsilon_lower_bound(fp, fn, h, h, delta, confidence))
    sorted0, sorted1 = np.sort(direction * eval0), np.sort(direction * eval1)
    fp, fn = (int(v[0]) for v in _errors(sorted0, sorted1, np.array([threshold]), direction))
    fpr, fnr = fp / n0, fn / n1
    lb = float(epsilon_lower_bound(fp, fn, n0, n1, delta, confidence))
    mu_lb, mu_errors, gof = float("nan"), (0, 0), float("nan")
    if math.isfinite(mu):
        _, t_mu, d_mu = _best_threshold(held0, held1, lambda a, b: mu_lower_bound(a, b, h, h, confidence))
        e = _errors(np.sort(d_mu * eval0), np.sort(d_mu * eval1), np.array([t_mu]), d_mu)
        mu_errors = (int(e[0][0]), int(e[1][0]))
        mu_lb = float(mu_lower_bound(*mu_errors, n0, n1, confidence))
        gof = gaussian_shape_pvalue(held0, held1)
    claimed = float(claim.epsilon)
    decision = decide(claimed, delta, claim.scope, audited_scope, lb, mu, mu_lb, gof, n0, n1, confidence)
    return AuditResult(
        mechanism=mechanism_name, attack=attack_name, threat_model=threat_model, claimed_epsilon=claimed,
        claimed_delta=float(claim.delta), claimed_scope=claim.scope,
        epsilon_point=float(epsilon_from_rates(fpr, fnr, delta)), epsilon_lb=lb, confidence=float(confidence),
        n_trials=int(h + n0), fpr=float(fpr), fnr=float(fnr), neighbours=neighbours, audited_scope=audited_scope,
        test=attack_name, fp=fp, fn=fn, n0=n0, n1=n1,
        ceiling=float(epsilon_lower_bound(0, 0, n0, n1, delta, confidence)),
        trial_limited=bool(lb > 0 and (fp == 0 or fn == 0)), mu=float(mu), mu_lb=mu_lb, rounds=int(rounds),
        claim_verdict=decision.verdict,
        tightness=lb / claimed if math.isfinite(claimed) and claimed > 0 else float("nan"),
        small_error=_small_error(held0, held1, threshold, direction, h, delta, confidence),
        verdict_by=decision.verdict_by, gof_pvalue=gof, power=decision.power, trials_needed=decision.trials_needed,
        mu_fp=mu_errors[0], mu_fn=mu_errors[1], pair=pair, pairs=int(pairs), verdict_note="",
        threshold=threshold, direction=direction)


def _small_error(held0: np.ndarray, held1: np.ndarray, threshold: float, direction: int, h: int, delta: float,
                 confidence: float) -> str:
    """Which error the held-out half's test keeps small: ``fp`` when its bound there comes from
    ``ln((1 - delta - FNR) / FPR)``, ``fn`` when from ``ln((1 - delta - FPR) / FNR)``."""
    e = _errors(np.sort(direction * held0), np.sort(direction * held1), np.array([threshold]), direction)
    fpr_u, fnr_u = _upper_rates(e[0][0], e[1][0], h, h, confidence)
    small_fp = float(np.log(max(1 - delta - fnr_u, 1e-300) / fpr_u))
    small_fn = float(np.log(max(1 - delta - fpr_u, 1e-300) / fnr_u))
    return "fp" if small_fp >= small_fn else "fn"


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
    check("cohort_size", cohort_size, (Interval(int, 1, None),))
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
