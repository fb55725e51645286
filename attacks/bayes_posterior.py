"""Posterior click log-odds from the unnormalized log posteriors of candidate click
configurations: per candidate click vector (``posterior_log_odds``) and over the distinct
joint configurations of several lists (``configuration_log_odds``)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from attacks.bayes_likelihoods import CHUNK_ELEMENTS

LOG_ODDS_BOUND = 1e300
"""|log-odds| of a click the posterior rules out (or in) entirely: finite, so scores stay finite."""
UNDERFLOW = 1e-300
"""A side's probability mass below this (relative to the best candidate) is recomputed from its best term."""


def posterior_log_odds(logpost: np.ndarray, events: np.ndarray) -> np.ndarray:
    """Posterior log-odds ``log P(e_j | message) - log P(not e_j | message)`` (n, k) of events
    ``events`` (C, k) (bool: candidate c makes e_j true, e.g. clicks position j) from the
    unnormalized log posteriors ``logpost`` (n, C) of the C candidates.

    Both sides' masses come from one product of ``exp(logpost - max)`` with ``[events | ~events]``.
    Where a side's mass underflows -- its best candidate is more than ~690 nats behind the
    overall best, as in the noise-free exact-match posterior -- its log-mass is its best term
    (off by at most log C), so a near point mass keeps its order (how far the best alternative
    falls behind) instead of rounding to a marginal of exactly 0 or 1, which would tie every
    confident slot at the low false-positive rates TPR at 1 % FPR is read at. ``expit`` of the
    result is the posterior marginal; it is > 0 exactly where the marginal is > 0.5."""
    events = np.asarray(events, dtype=bool)
    top = logpost.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    k = events.shape[1]
    mass = np.exp(logpost - top) @ np.concatenate([events, ~events], axis=1).astype(np.float64)   # (n, 2k)
    with np.errstate(divide="ignore"):
        log_mass = np.log(mass)
    lost = mass < UNDERFLOW
    rows = np.flatnonzero(lost.any(axis=1))
    both = np.concatenate([events, ~events], axis=1)
    step = max(1, CHUNK_ELEMENTS // (logpost.shape[1] * 2 * k))
    for s in range(0, len(rows), step):
        r = rows[s:s + step]
        best = np.where(both[None], logpost[r][:, :, None], -np.inf).max(axis=1) - top[r]     # (m, 2k)
        log_mass[r] = np.where(lost[r], best, log_mass[r])
    with np.errstate(invalid="ignore"):
        odds = log_mass[:, :k] - log_mass[:, k:]
    odds = np.nan_to_num(odds, nan=0.0, posinf=LOG_ODDS_BOUND, neginf=-LOG_ODDS_BOUND)
    return np.clip(odds, -LOG_ODDS_BOUND, LOG_ODDS_BOUND)


def configuration_log_odds(config: np.ndarray, logpost: np.ndarray, k: int) -> np.ndarray:
    """Posterior click log-odds (m, B, k) normalized over the distinct evaluated configurations
    ``config`` (m, E, B) (per-list click-vector indices; repeats counted once) with log
    posteriors ``logpost`` (m, E) (``posterior_log_odds`` per list position)."""
    m, E, B = config.shape
    order = np.lexsort(tuple(config[:, :, b] for b in range(B)), axis=-1)
    config = np.take_along_axis(config, order[:, :, None], axis=1)
    logpost = np.take_along_axis(logpost, order, axis=1)
    repeat = np.zeros((m, E), dtype=bool)
    repeat[:, 1:] = (config[:, 1:] == config[:, :-1]).all(-1)
    logpost = np.where(repeat, -np.inf, logpost)
    clicks = (config[..., None] >> np.arange(k)) & 1 == 1                                # (m, E, B, k)
    with np.errstate(invalid="ignore"):
        on = logsumexp(np.where(clicks, logpost[:, :, None, None], -np.inf), axis=1)
        off = logsumexp(np.where(clicks, -np.inf, logpost[:, :, None, None]), axis=1)
    odds = np.nan_to_num(on - off, nan=0.0, posinf=LOG_ODDS_BOUND, neginf=-LOG_ODDS_BOUND)
    return np.clip(odds, -LOG_ODDS_BOUND, LOG_ODDS_BOUND)

