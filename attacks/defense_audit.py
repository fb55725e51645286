"""Audits of a defense stack as a mechanism: neighbouring inputs and mechanism-aware tests.

Neighbouring inputs (``worst_case_inputs``), crafted at the clip boundary to use all the
sensitivity the claim allows (Nasr et al. 2021, 2023: white-box audits with crafted inputs are
tight), or natural ones handed in by the caller (two real probe messages):

* L1-clipped Laplace (``dp-local-laplace``): +-Delta/2 on one coordinate (L1 distance Delta);
* L2 clip + Gaussian (``dp-gaussian``): +-C along one axis (L2 distance 2C);
* the L2-published variants (``dp-local-laplace(norm=l2)``, ``dp-distributed``): the vector
  spread evenly over all D coordinates, +-(Delta/2)/sqrt(D) each (L1 distance Delta sqrt(D),
  their worst case);
* randomized response (``rr``): two values of the domain (every pair has the largest
  transition ratio p (n-1) / (1-p)).

Tests (``mechanism_statistic``), each the log-likelihood ratio of the noise family around
the noise-free outputs ``a`` (input 0) and ``b`` (input 1):

* Laplace(s): ``sum_j (|x_j - a_j| - |x_j - b_j|) / s``;
* Gaussian: the projection ``(x - (a + b)/2) . (b - a)``;
* one client's share of dp-distributed, ``x - a`` a sum of per-coordinate differences of two
  Gamma(1/n, lambda): the density of such a difference is
  ``f(y) ∝ |y|^(k - 1/2) K_(k - 1/2)(|y| / lambda)`` with k = 1/n (the symmetric
  variance-gamma law; K the modified Bessel function of the second kind);
* randomized response: ``log T(x | b) - log T(x | a)`` from the transition table;
* ``learned``: DP-Sniper (Bichsel et al. 2021) -- a logistic regression trained on trials of
  its own (never reused for the threshold or the rates) scores the outputs, for stacks without
  one known noise family.

This module reads defenses by their public attributes only (it does not import ``defenses``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import kve

from attacks.audit import AuditResult, Mechanism, Statistic, audit, projection_statistic
from fltr_audit.errors import FltrError
from fltr_audit.interfaces import PrivacyClaim
from fltr_audit.messages import Messages

TESTS = ("auto", "llr", "learned")
LEARN_TRIALS = 20_000
"""Trials per input the learned test is trained on (separate from the audit's own)."""


def noise_kind(defense: Any) -> str | None:
    """The noise family a client defense adds: ``laplace``, ``gaussian``, ``gamma-share``, ``rr``
    or None (deterministic, e.g. clip)."""
    if hasattr(defense, "p") and hasattr(defense, "values"):
        return "rr"
    if hasattr(defense, "std") and hasattr(defense, "clip"):
        return "gaussian"
    if hasattr(defense, "scale") and hasattr(defense, "norm"):
        return "laplace"
    if hasattr(defense, "scale") and hasattr(defense, "eps"):
        return "gamma-share"
    return None


def aggregator_kind(stack: Any) -> str | None:
    """How the stack's aggregator protects users: ``central-gaussian`` (dp-fedavg: Gaussian noise
    on the clipped sum), ``discrete-gaussian`` (ddgauss: distributed discrete Gaussian shares in a
    modular sum), ``shuffle`` (an anonymous shuffler behind a local randomizer), or None (the
    noise, if any, is in the client transforms)."""
    agg = stack.aggregator
    if hasattr(agg, "noise_multiplier") and hasattr(agg, "clip"):
        return "discrete-gaussian" if hasattr(agg, "gamma") else "central-gaussian"
    if getattr(agg, "covers_client_defenses", False) and hasattr(agg, "eps0"):
        return "shuffle"
    return None


def noise_components(stack: Any) -> list[Any]:
    """The stack's client defenses that add noise, in order."""
    return [d for d in stack.client if noise_kind(d) is not None]


def audited_component(stack: Any) -> Any:
    """The noise component an audit of ``stack`` is built around: a noisy aggregator (dp-fedavg,
    ddgauss), else the last client noise (behind a shuffler: its local randomizer); FltrError when
    the stack adds no noise at all."""
    if aggregator_kind(stack) in ("central-gaussian", "discrete-gaussian"):
        return stack.aggregator
    found = noise_components(stack)
    if not found:
        raise FltrError(f"STACK: {stack.name!r} has nothing to audit (no noise mechanism; audit a stack with "
                        "dp-local-laplace, dp-gaussian, dp-distributed or rr)")
    return found[-1]


def claimed_mu(stack: Any, rounds: int = 1) -> float:
    """Gaussian-DP mu of the stack's Gaussian mechanism over ``rounds`` rounds (sensitivity 2C over
    std sigma C, times sqrt(rounds): Dong, Roth & Su 2022, Cor. 3.3); NaN for other mechanisms."""
    kind = aggregator_kind(stack)
    if kind == "central-gaussian":  # sensitivity C (add/remove), std z C: mu = 1/z
        return math.sqrt(rounds) / stack.aggregator.noise_multiplier
    if kind == "discrete-gaussian":  # rho-zCDP is the Gaussian mechanism's curve at mu = sqrt(2 rho)
        rho, xi = stack.aggregator.zcdp
        return math.sqrt(2.0 * rho * rounds) if xi == 0 else float("nan")
    comps = noise_components(stack)
    if kind == "shuffle" or len(comps) != 1 or noise_kind(comps[0]) != "gaussian":
        return float("nan")
    comp = comps[0]
    return 2.0 * comp.clip / comp.std * math.sqrt(rounds)


def worst_case_inputs(stack: Any, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The two crafted inputs (updates, or metric values for rr) that maximise what the audited
    component's claim allows (module docstring)."""
    comp = audited_component(stack)
    if comp is stack.aggregator:  # the target's update at the clip boundary against no update (add/remove)
        e = np.zeros(dim)
        e[0] = getattr(comp, "initial_clip", comp.clip)
        return np.zeros(dim), e
    kind = noise_kind(comp)
    if kind == "rr":
        return np.array([comp.values[0]]), np.array([comp.values[-1]])
    e = np.zeros(dim)
    if kind == "gaussian":
        e[0] = comp.clip
    elif kind == "laplace" and comp.norm == "l1":
        e[0] = comp.sensitivity / 2
    else:  # L2-clipped: dp-local-laplace(norm=l2), dp-distributed
        e[:] = comp.sensitivity / 2 / math.sqrt(dim)
    return -e, e


class _NoNoise:
    """A stand-in generator whose noise draws are all zero: running the stack with it gives the
    noise-free output (the clipped input), the centre of the noise distribution."""

    @staticmethod
    def _zeros(*args: Any, size: Any = None, **kwargs: Any) -> np.ndarray:
        return np.zeros(size)

    laplace = normal = gamma = _zeros


def _run_client(stack: Any, updates: np.ndarray, rng: Any, g: np.ndarray | None = None,
                kind: str = "update") -> np.ndarray:
    """The stack's client transforms on a cohort of ``updates`` relative to the global model ``g``
    (zero by default), sent as ``kind`` (weights or update) as the algorithm sends them; returns
    the defended updates."""
    g = np.zeros(updates.shape[1]) if g is None else np.asarray(g, dtype=np.float64)
    updates = np.asarray(updates, dtype=np.float64)
    msgs = Messages(n_interactions=np.ones(len(updates), dtype=np.int64), vector_kind=kind,
                    vector=updates + g if kind == "weights" else updates.copy())
    for defense in stack.client:
        msgs = defense.apply(msgs, g, rng)
    return msgs.updates(g)


def centre(stack: Any, update: np.ndarray, g: np.ndarray | None = None, kind: str = "update") -> np.ndarray:
    """The noise-free output of the stack's client transforms on one update."""
    return _run_client(stack, np.asarray(update, dtype=np.float64)[None, :], _NoNoise(), g, kind)[0]


def message_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int,
                      g: np.ndarray | None = None, kind: str = "update") -> Mechanism:
    """One client's defended message on input ``which``; the client defenses see cohorts of
    ``cohort`` clients (dp-distributed calibrates its share to the cohort size), every row of a
    cohort an independent trial (client transforms treat rows independently)."""
    if any(noise_kind(d) == "rr" for d in stack.client):
        def rr_mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
            metric = np.full((n, 1), float(inputs[which][0]))
            msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), seed=np.zeros(n, dtype=np.uint64),
                            metric=metric)
            for defense in stack.client:
                msgs = defense.apply(msgs, np.zeros(0), rng)
            return msgs.metric
        return rr_mechanism
    per_cohort = any(noise_kind(d) == "gamma-share" for d in stack.client)

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        u = np.asarray(inputs[which], dtype=np.float64)
        if not per_cohort:
            return _run_client(stack, np.repeat(u[None, :], n, axis=0), rng, g, kind)
        out = np.empty((n, len(u)))
        for start in range(0, n, cohort):
            rows = min(cohort, n - start)
            out[start:start + rows] = _run_client(stack, np.repeat(u[None, :], cohort, axis=0), rng, g, kind)[:rows]
        return out

    return mechanism


def aggregate_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int,
                        others: np.ndarray | None = None, g: np.ndarray | None = None,
                        kind: str = "update") -> Mechanism:
    """The cohort mean the server sees: the audited client on input ``which`` plus ``cohort - 1``
    others (rows of ``others``, drawn at random, or zero updates -- fixed inputs the attacker
    knows, the worst case), all through the client defenses; one trial per cohort."""
    if cohort < 2:
        raise FltrError(f"--cohort: an aggregate needs a cohort of at least 2, got {cohort}")

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        u = np.asarray(inputs[which], dtype=np.float64)
        out = np.empty((n, len(u)))
        rows = np.zeros((cohort, len(u)))
        rows[0] = u
        for t in range(n):
            if others is not None:
                rows[1:] = others[rng.integers(0, len(others), size=cohort - 1)]
            out[t] = _run_client(stack, rows, rng, g, kind).mean(axis=0)
        return out

    return mechanism


def _clipped(update: np.ndarray, clip: float) -> np.ndarray:
    norm = float(np.linalg.norm(update))
    return update * min(1.0, clip / norm) if norm > 0 else update


def noisy_aggregate_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int) -> Mechanism:
    """The mean a noisy aggregator (dp-fedavg, ddgauss) releases for a fixed cohort of ``cohort``:
    the target holding update ``inputs[which]``, the ``cohort - 1`` others zero updates (fixed
    and known: the worst case), every member still adding its noise share; one aggregation per
    trial, each by a fresh copy of the aggregator (adaptive clipping's clip starts where the
    stack's does)."""
    import copy

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        rows = np.zeros((cohort, len(inputs[which])))
        rows[0] = inputs[which]
        msgs = Messages(vector=rows, vector_kind="update", n_interactions=np.ones(cohort, dtype=np.int64))
        ids = np.arange(cohort)
        return np.stack([copy.copy(stack.aggregator).aggregate(msgs, ids, rng).mean for _ in range(n)])

    return mechanism


def noisy_aggregate_statistic(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int) -> Statistic:
    """The Neyman-Pearson test of a Gaussian sum: the projection of the released sum ``m * mean``
    (the others' known sum, zero, removed) on the clipped inputs' difference, in units of the
    noise std z C: N(0, 1) against N(1/z, 1) at the worst case (||u|| = C against zero)."""
    agg = stack.aggregator
    clip = getattr(agg, "initial_clip", agg.clip)
    c0, c1 = _clipped(np.asarray(inputs[0], dtype=np.float64), clip), _clipped(np.asarray(inputs[1], dtype=np.float64), clip)
    diff = c1 - c0
    direction = diff / max(float(np.linalg.norm(diff)), 1e-300)
    std = agg.noise_multiplier * clip

    def statistic(x: np.ndarray) -> np.ndarray:
        return ((cohort * np.asarray(x, dtype=np.float64) - c0) @ direction) / std

    return statistic


def shuffle_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int, message_llr: Statistic,
                      g: np.ndarray | None = None, kind: str = "update") -> Mechanism:
    """The shuffled cohort the server receives (replace-one worst case): the target's local input
    ``inputs[which]``, the ``cohort - 1`` others all holding ``inputs[0]``, each through the local
    randomizer, then the stack's shuffler. Returned as the shuffled messages' log-likelihood
    ratios ``log p1(y_i) / p0(y_i)`` (``message_llr``), in the shuffled order: every message
    coordinate where the inputs agree has the same law under both, so the ratios are a
    sufficient statistic of the multiset (the server's view) and keep the audit's memory small."""
    single = message_mechanism(stack, inputs, cohort, g, kind)
    rr = any(noise_kind(d) == "rr" for d in stack.client)

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        ids = np.arange(cohort)
        target, others = single(rng, n, which), single(rng, n * (cohort - 1), 0)
        others = others.reshape(n, cohort - 1, *others.shape[1:])
        shuffled = np.empty((n, cohort, *others.shape[2:]))
        for t in range(n):
            rows = np.concatenate([target[t:t + 1], others[t]])
            fields = ({"metric": rows, "seed": np.zeros(cohort, dtype=np.uint64)} if rr
                      else {"vector": rows, "vector_kind": "update"})
            view = stack.aggregator.aggregate(Messages(n_interactions=np.ones(cohort, dtype=np.int64), **fields),
                                              ids, rng).messages
            shuffled[t] = view.metric if rr else view.vector
        return np.asarray(message_llr(shuffled.reshape(n * cohort, -1))).reshape(n, cohort)

    return mechanism


def shuffle_statistic(llrs: np.ndarray) -> np.ndarray:
    """The exact log-likelihood ratio of the shuffled multiset when the others hold input 0:
    ``log sum_i p1(y_i) / p0(y_i)`` (up to the constant log n), from the per-message ratios."""
    from scipy.special import logsumexp

    return logsumexp(np.asarray(llrs, dtype=np.float64), axis=1)


def laplace_statistic(a: np.ndarray, b: np.ndarray, scale: float) -> Statistic:
    """Log-likelihood ratio of input 1 (centre ``b``) against input 0 (centre ``a``) under
    i.i.d. Laplace(``scale``) noise: ``sum_j (|x_j - a_j| - |x_j - b_j|) / scale`` over the
    coordinates where the centres differ (the others contribute exactly 0)."""
    idx = np.flatnonzero(np.asarray(a) != np.asarray(b))
    a, b = np.asarray(a, dtype=np.float64)[idx], np.asarray(b, dtype=np.float64)[idx]

    def statistic(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)[:, idx]
        return (np.abs(x - a) - np.abs(x - b)).sum(axis=1) / scale

    return statistic


@lru_cache(maxsize=8)
def _log_kve_table(v: float) -> tuple[np.ndarray, np.ndarray]:
    """``log kve(v, e^t)`` on a grid of t in [-700, 7] (steps of 0.005): ``kve`` costs about a
    microsecond per value, linear interpolation in t some nanoseconds (relative error < 1e-5;
    below z = e^-7 the function is linear in t, beyond e^7 its tail is sqrt(pi / 2z))."""
    t = np.arange(-700.0, 7.0 + 1e-9, 0.005)
    return t, np.log(kve(v, np.exp(t)))


def gamma_difference_logpdf(y: np.ndarray, shape: float, scale: float) -> np.ndarray:
    """Log density, up to a constant, of the difference of two independent Gamma(``shape``,
    ``scale``) variables: ``(k - 1/2) log z + log K_(k - 1/2)(z)``, z = |y| / scale, k = shape
    (through ``kve``, interpolated: ``_log_kve_table``; ``|y|`` floored at 1e-300, where the
    density of shapes below 1/2 diverges)."""
    v = shape - 0.5
    z = np.maximum(np.abs(np.asarray(y, dtype=np.float64)), 1e-300) / scale
    log_z = np.log(z)
    grid, values = _log_kve_table(round(v, 12))
    pos = np.clip((log_z - grid[0]) / (grid[1] - grid[0]), 0.0, len(grid) - 1.000001)
    i = pos.astype(np.int64)
    log_k = values[i] + (pos - i) * (values[i + 1] - values[i])  # uniform grid: linear interpolation by index
    tail = log_z > grid[-1]
    if tail.any():
        log_k[tail] = 0.5 * np.log(np.pi / 2) - 0.5 * log_z[tail]
    return v * log_z + log_k - z


def gamma_share_statistic(a: np.ndarray, b: np.ndarray, n: int, scale: float) -> Statistic:
    """Log-likelihood ratio of one client's dp-distributed message: per-coordinate Gamma(1/n,
    ``scale``) differences around ``b`` against ``a``, summed over the coordinates where they differ."""
    idx = np.flatnonzero(np.asarray(a) != np.asarray(b))
    a, b = np.asarray(a, dtype=np.float64)[idx], np.asarray(b, dtype=np.float64)[idx]

    def statistic(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)[:, idx]
        return (gamma_difference_logpdf(x - b, 1.0 / n, scale) - gamma_difference_logpdf(x - a, 1.0 / n, scale)).sum(1)

    return statistic


def rr_statistic(p: float, values: np.ndarray, a: float, b: float) -> Statistic:
    """Log-likelihood ratio of a randomized-response output: ``log T(x | b) - log T(x | a)`` with
    ``T(x | v) = p`` if x = v else ``(1 - p) / (n - 1)``."""
    other = math.log((1.0 - p) / (len(values) - 1)) if p < 1 else -np.inf

    def statistic(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)[:, 0]
        log_t = lambda v: np.where(np.isclose(x, v), math.log(p), other)  # noqa: E731
        return np.nan_to_num(log_t(b) - log_t(a), posinf=1e6, neginf=-1e6)

    return statistic


def learned_statistic(mechanism: Mechanism, rng: np.random.Generator, n_train: int = LEARN_TRIALS,
                      rounds: int = 1) -> Statistic:
    """DP-Sniper's learned test (Bichsel et al. 2021): a logistic regression on the outputs (and
    their absolute values), trained on ``n_train`` fresh trials per input -- never the audit's own --
    and scoring outputs by its decision function (the log-odds of input 1). With ``rounds`` K the
    model scores one round and the audit sums the K scores."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def features(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        return np.hstack([x, np.abs(x)])

    x0, x1 = mechanism(rng, n_train, 0), mechanism(rng, n_train, 1)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(np.vstack([features(x0), features(x1)]), np.r_[np.zeros(n_train), np.ones(n_train)])
    return lambda x: model.decision_function(features(x))


def mechanism_statistic(stack: Any, inputs: tuple[np.ndarray, np.ndarray], scope: str, cohort: int,
                        g: np.ndarray | None = None, kind: str = "update") -> tuple[Statistic, str] | None:
    """The likelihood-ratio test of the stack's noise family on the two inputs, and its name
    (the projection for a stack without noise); None when the stack has several noise components
    (no single known family: use the learned test)."""
    comps = noise_components(stack)
    if len(comps) > 1:
        return None
    kind_of = noise_kind(comps[0]) if comps else None
    if kind_of == "rr":
        comp = comps[0]
        return rr_statistic(comp.p, comp.values, float(inputs[0][0]), float(inputs[1][0])), "rr-llr"
    a, b = centre(stack, inputs[0], g, kind), centre(stack, inputs[1], g, kind)
    if scope == "aggregate":
        # the cohort mean: the other members' centres cancel in the ratio, the noise of the mean
        # is the members' noise summed over the cohort size
        a, b = a / cohort, b / cohort
        if kind_of == "gamma-share":  # n shares of Gamma(1/n) differences sum to Laplace(lambda)
            return laplace_statistic(a, b, comps[0].scale / cohort), "laplace-llr"
        return projection_statistic(a, b), "projection"  # Gaussian; a sum of Laplace noises is near-Gaussian
    if kind_of == "laplace":
        return laplace_statistic(a, b, comps[0].scale), "laplace-llr"
    if kind_of == "gamma-share":
        return gamma_share_statistic(a, b, cohort, comps[0].scale), "gamma-share-llr"
    return projection_statistic(a, b), "projection"


def audit_stack(stack: Any, *, claim: PrivacyClaim, inputs: tuple[np.ndarray, np.ndarray], neighbours: str,
                scope: str = "message", trials: int = 100_000, rounds: int = 1, cohort: int = 1, seed: int = 0,
                test: str = "auto", confidence: float = 0.95, others: np.ndarray | None = None,
                g: np.ndarray | None = None, kind: str = "update", threat_model: str | None = None,
                min_trials: int = 100) -> AuditResult:
    """Audit ``stack`` on the neighbouring ``inputs`` (updates relative to the global model ``g``,
    sent as ``kind``) at ``scope`` (``message``: one client's defended message; ``aggregate``: the
    cohort mean, the other members drawn from ``others`` or zero) with the mechanism-aware test,
    or the learned one (``test='learned'``, or when no single noise family is known). ``claim`` is
    what the result is judged against (the per-round claim composed over ``rounds``)."""
    if test not in TESTS:
        raise FltrError(f"--test: unknown test {test!r} (choose from {', '.join(TESTS)})")
    if trials < min_trials:
        raise FltrError(f"--trials: need at least {min_trials} trials per input, got {trials}")
    agg_kind = aggregator_kind(stack)
    if agg_kind is not None:
        return _audit_aggregator(stack, agg_kind, claim=claim, inputs=inputs, neighbours=neighbours, trials=trials,
                                 rounds=rounds, cohort=cohort, seed=seed, test=test, confidence=confidence, g=g,
                                 kind=kind, threat_model=threat_model)
    if scope == "aggregate":
        mech = aggregate_mechanism(stack, inputs, cohort, others, g, kind)
    else:
        mech = message_mechanism(stack, inputs, cohort, g, kind)
    found = None if test == "learned" else mechanism_statistic(stack, inputs, scope, cohort, g, kind)
    if found is None:
        rng = np.random.default_rng([seed, 1])
        statistic, name = learned_statistic(mech, rng, min(LEARN_TRIALS, trials), rounds), "learned-logistic"
    else:
        statistic, name = found
    return audit(mech, statistic, claim=claim, n_trials=trials, seed=seed, confidence=confidence,
                 threat_model=threat_model or ("server (aggregate only)" if scope == "aggregate" else "server"),
                 mechanism_name=stack.name, attack_name=name, neighbours=neighbours, audited_scope=scope,
                 rounds=rounds, mu=claimed_mu(stack, rounds))


def _audit_aggregator(stack: Any, agg_kind: str, *, claim: PrivacyClaim, inputs: tuple[np.ndarray, np.ndarray],
                      neighbours: str, trials: int, rounds: int, cohort: int, seed: int, test: str,
                      confidence: float, g: np.ndarray | None, kind: str, threat_model: str | None) -> AuditResult:
    """``audit_stack`` for a stack whose aggregator holds the protection: the released mean of a
    noisy aggregator (``noisy_aggregate_*``, test ``projection``) or a shuffled cohort
    (``shuffle_*``, test ``shuffle-llr``: the exact likelihood ratio of the multiset, at a cohort
    of at least the shuffler's n when its claim is the amplified one); always the server's view
    of the aggregate. The neighbouring relation is the claim's: add/remove one user for the noisy
    aggregators (natural neighbours: the larger of the two real updates against no update; two
    real updates would be a replace-one pair, twice the sensitivity the claim covers), replace-one
    for the shuffler (the target's input 0 or 1, the others all holding input 0)."""
    if agg_kind == "shuffle":
        if getattr(stack.aggregator, "amplified", False):  # the amplified claim is for cohorts of at least n
            cohort = max(cohort, int(stack.aggregator.n))
        if cohort < 2:
            raise FltrError(f"--cohort: a shuffled cohort needs at least 2 messages, got {cohort}")
        found = mechanism_statistic(stack, inputs, "message", cohort, g, kind)
        if found is None:
            raise FltrError(f"STACK: {stack.name!r}: the shuffle audit needs a single local randomizer")
        mech = shuffle_mechanism(stack, inputs, cohort, found[0], g, kind)
        statistic, name, model = shuffle_statistic, "shuffle-llr", "server (shuffled)"
    else:
        if neighbours == "natural":  # add/remove neighbours: the larger real update against its absence
            u = max(inputs, key=lambda v: float(np.linalg.norm(v)))
            inputs = (np.zeros(len(u)), np.asarray(u, dtype=np.float64))
        mech = noisy_aggregate_mechanism(stack, inputs, cohort)
        statistic, name, model = noisy_aggregate_statistic(stack, inputs, cohort), "projection", \
            "server (aggregate only)"
    if test == "learned":
        statistic, name = learned_statistic(mech, np.random.default_rng([seed, 1]), min(LEARN_TRIALS, trials),
                                            rounds), "learned-logistic"
    return audit(mech, statistic, claim=claim, n_trials=trials, seed=seed, confidence=confidence,
                 threat_model=threat_model or model, mechanism_name=stack.name, attack_name=name,
                 neighbours=neighbours, audited_scope="aggregate", rounds=rounds, mu=claimed_mu(stack, rounds))
