"""Mechanism-aware tests: the log-likelihood ratio of the noise a stack *declares*
(``fltr_audit.privacy.mechanisms``) around the noise-free outputs ``a`` (input 0) and ``b`` (input 1).

* Laplace(s): ``sum_j (|x_j - a_j| - |x_j - b_j|) / s``;
* Gaussian: the projection ``(x - (a + b)/2) . (b - a)``;
* one client's share of Gamma differences, ``x - a`` a sum of per-coordinate differences of two
  Gamma(1/n, lambda): the density of such a difference is
  ``f(y) ∝ |y|^(k - 1/2) K_(k - 1/2)(|y| / lambda)`` with k = 1/n (the symmetric variance-gamma
  law; K the modified Bessel function of the second kind);
* randomized response: ``log T(x | b) - log T(x | a)`` from the transition table;
* a noisy aggregator's Gaussian sum: the projection on the clipped inputs' difference;
* a shuffled cohort: ``log sum_i p1(y_i) / p0(y_i)`` of the per-message ratios;
* ``learned``: DP-Sniper (Bichsel et al. 2021) -- a logistic regression trained on trials of its
  own (never reused for the threshold or the rates) scores the outputs; for stacks that declare
  no single known noise (a plug-in that declares nothing gets this test, never "nothing to audit").
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import kve, logsumexp

from attacks.epsilon_bounds import Mechanism, Statistic, projection_statistic
from attacks.stack_outputs import centre, clipped, noise_declarations, undeclared_client
from fltr_audit.privacy import mechanisms as mech

LEARN_TRIALS = 20_000
"""Trials per input the learned test is trained on (separate from the audit's own)."""


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
    """Log-likelihood ratio of one client's Gamma-share message: per-coordinate Gamma(1/n,
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


def noisy_aggregate_statistic(declared: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int) -> Statistic:
    """The Neyman-Pearson test of a Gaussian sum (``declared``: an aggregator's Gaussian noise):
    the projection of the released sum ``m * mean`` (the others' known sum, zero, removed) on the
    inputs' difference after the declared clip, in units of the noise std z C: N(0, 1) against
    N(1/z, 1) at the worst case (||u|| = C against zero)."""
    clip = declared.clip
    c0 = clipped(np.asarray(inputs[0], dtype=np.float64), clip)
    c1 = clipped(np.asarray(inputs[1], dtype=np.float64), clip)
    diff = c1 - c0
    direction = diff / max(float(np.linalg.norm(diff)), 1e-300)
    std = declared.noise_multiplier * clip

    def statistic(x: np.ndarray) -> np.ndarray:
        return ((cohort * np.asarray(x, dtype=np.float64) - c0) @ direction) / std

    return statistic


def shuffle_statistic(llrs: np.ndarray) -> np.ndarray:
    """The exact log-likelihood ratio of the shuffled multiset when the others hold input 0:
    ``log sum_i p1(y_i) / p0(y_i)`` (up to the constant log n), from the per-message ratios."""
    return logsumexp(np.asarray(llrs, dtype=np.float64), axis=1)


def learned_statistic(mechanism: Mechanism, rng: np.random.Generator, n_train: int = LEARN_TRIALS,
                      rounds: int = 1) -> Statistic:
    """DP-Sniper's learned test (Bichsel et al. 2021): a logistic regression on the outputs (and
    their absolute values), trained on ``n_train`` fresh trials per input -- never the audit's own --
    and scoring outputs by its decision function (the log-odds of input 1). With ``rounds`` K the
    model scores one round and the audit sums the K scores."""
    # start-up: sklearn.linear_model costs 0.8 s CPU; only the learned statistic needs it
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
    """The likelihood-ratio test of the client noise the stack declares on the two inputs, and its
    name (the projection for a stack without noise); None when no single known noise is declared
    (several noise mechanisms, or a client defense that declares nothing: use the learned test)."""
    if undeclared_client(stack):
        return None
    comps = noise_declarations(stack)
    if len(comps) > 1:
        return None
    declared = comps[0] if comps else None
    if isinstance(declared, mech.RandomizedResponse):
        return rr_statistic(declared.p, np.asarray(declared.values), float(inputs[0][0]), float(inputs[1][0])), \
            "rr-llr"
    a, b = centre(stack, inputs[0], g, kind), centre(stack, inputs[1], g, kind)
    if scope == "aggregate":
        # the cohort mean: the other members' centres cancel in the ratio, the noise of the mean
        # is the members' noise summed over the cohort size
        a, b = a / cohort, b / cohort
        if isinstance(declared, mech.GammaShares):  # n shares of Gamma(1/n) differences sum to Laplace(lambda)
            return laplace_statistic(a, b, declared.scale / cohort), "laplace-llr"
        return projection_statistic(a, b), "projection"  # Gaussian; a sum of Laplace noises is near-Gaussian
    if isinstance(declared, mech.Laplace):
        return laplace_statistic(a, b, declared.scale), "laplace-llr"
    if isinstance(declared, mech.GammaShares):
        return gamma_share_statistic(a, b, cohort, declared.scale), "gamma-share-llr"
    return projection_statistic(a, b), "projection"
