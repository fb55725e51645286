"""FOLtR-ES's ranking kernels: each interaction's perturbed linear model scores its query's rows
and keeps its top k (``algorithms.foltr_es.FOLtRES.shown_lists`` and ``.scores``).

Interaction i ranks the rows ``X[row_lo[i]:row_hi[i]]`` by the model
``theta_i = coef[i] * V[client[i]] + params`` (float64: ``coef`` is the interaction's
``sign * sigma``). A row's score is ``sum_f x_f float32(theta_f)``, the float32 products summed
in float32 in the order f = 0, ..., F - 1 -- within ``(F + 2) 2^-24 sum_f |x_f theta_f|`` of
the exact score (Higham, Eq. 3.5, plus the rounding of theta). An interaction with a float32
score beyond ``FLOAT32_MAX_SCORE`` or not finite is scored again in float64 (``x_f theta_f``
summed in float64 in the same order). An interaction's scores thus depend on its model and
its rows only: never on the other interactions, the threads or the order of the calls.
"""

from __future__ import annotations

import numba
import numpy as np

from fltr_audit.rankers import FLOAT32_MAX_SCORE


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(nogil=True, cache=True)
def _splitmix64(z):
    """The SplitMix64 finalizer (a bijective 64-bit mixer) of one uint64 (arithmetic mod 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True)
def perturbation_uniforms(seeds, out):
    """out[i, j] = the uniform in (0, 1) behind coordinate j of seed i's perturbation: the top 53
    bits of ``splitmix64(splitmix64(seed) + (j + 1) * golden)``, plus 1/2, over 2^53
    (``algorithms.foltr_es.perturbations`` maps it through the inverse normal CDF)."""
    for i in range(out.shape[0]):
        base = _splitmix64(seeds[i])
        for j in range(out.shape[1]):
            z = _splitmix64(base + np.uint64(j + 1) * _GOLDEN)
            out[i, j] = (np.float64(z >> np.uint64(11)) + 0.5) * (1.0 / 2.0**53)


@numba.njit(nogil=True, cache=True)
def _model(params, V, client, coef, theta):
    """theta = coef * V[client] + params, elementwise (the numpy expression's own two roundings)."""
    for f in range(theta.shape[0]):
        theta[f] = coef * V[client, f] + params[f]


@numba.njit(nogil=True, cache=True)
def _scores_of(X, lo, hi, theta, zero, out):
    """out[d] = sum_f X[lo + d, f] theta_f for d < hi - lo, summed in the order f = 0, ..., F - 1
    in the type of ``theta`` and ``zero`` (float32 or float64); eight rows at a time (eight
    independent sums in flight)."""
    F = theta.shape[0]
    D = hi - lo
    d = 0
    while d + 8 <= D:
        x0, x1, x2, x3 = X[lo + d], X[lo + d + 1], X[lo + d + 2], X[lo + d + 3]
        x4, x5, x6, x7 = X[lo + d + 4], X[lo + d + 5], X[lo + d + 6], X[lo + d + 7]
        a0 = zero
        a1 = zero
        a2 = zero
        a3 = zero
        a4 = zero
        a5 = zero
        a6 = zero
        a7 = zero
        for f in range(F):
            t = theta[f]
            a0 += x0[f] * t
            a1 += x1[f] * t
            a2 += x2[f] * t
            a3 += x3[f] * t
            a4 += x4[f] * t
            a5 += x5[f] * t
            a6 += x6[f] * t
            a7 += x7[f] * t
        out[d] = a0
        out[d + 1] = a1
        out[d + 2] = a2
        out[d + 3] = a3
        out[d + 4] = a4
        out[d + 5] = a5
        out[d + 6] = a6
        out[d + 7] = a7
        d += 8
    while d < D:
        x0 = X[lo + d]
        a0 = zero
        for f in range(F):
            a0 += x0[f] * theta[f]
        out[d] = a0
        d += 1


@numba.njit(nogil=True, cache=True)
def _in_float32_range(scores, D):
    """Whether every one of the first D float32 scores is finite and within ``FLOAT32_MAX_SCORE``."""
    for d in range(D):
        if not abs(scores[d]) <= FLOAT32_MAX_SCORE:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _interaction_scores(X, lo, hi, theta, theta32, out32, out64):
    """The scores of one interaction (module docstring): in ``out32`` and True when its float32
    scores are in range, else in ``out64`` (float64) and False."""
    for f in range(theta.shape[0]):
        theta32[f] = np.float32(theta[f])
    _scores_of(X, lo, hi, theta32, np.float32(0.0), out32)
    if _in_float32_range(out32, hi - lo):
        return True
    _scores_of(X, lo, hi, theta, 0.0, out64)
    return False


@numba.njit(nogil=True, cache=True)
def _top_k_of(scores, D, best, pos):
    """pos = the positions of the k = len(pos) highest of scores[:D], highest first, ties by
    position, -1 padded; ``best`` (k, the type of ``scores``) is scratch. Insertion: a score
    displaces a kept one only when strictly higher, so an earlier row wins a tie (-inf ranks
    last, by position). Returns whether a score was NaN (then skipped)."""
    k = pos.shape[0]
    kept = 0
    has_nan = False
    for d in range(D):
        s = scores[d]
        if s != s:
            has_nan = True
            continue
        if kept == k:
            if not s > best[k - 1]:
                continue
            j = k - 1
        else:
            j = kept
            kept += 1
        while j > 0 and best[j - 1] < s:
            best[j] = best[j - 1]
            pos[j] = pos[j - 1]
            j -= 1
        best[j] = s
        pos[j] = d
    for j in range(kept, k):
        pos[j] = -1
    return has_nan


@numba.njit(nogil=True, cache=True)
def _longest(row_lo, row_hi):
    longest = 0
    for i in range(row_lo.shape[0]):
        longest = max(longest, row_hi[i] - row_lo[i])
    return longest


@numba.njit(nogil=True, cache=True)
def linear_scores(X, row_lo, row_hi, params, V, client, coef, out):
    """out[i, :D_i] = the scores of interaction i's D_i rows (the rest of the row untouched)."""
    theta = np.empty(params.shape[0])
    theta32 = np.empty(params.shape[0], dtype=np.float32)
    longest = _longest(row_lo, row_hi)
    out32 = np.empty(longest, dtype=np.float32)
    out64 = np.empty(longest)
    for i in range(row_lo.shape[0]):
        _model(params, V, client[i], coef[i], theta)
        in_range = _interaction_scores(X, row_lo[i], row_hi[i], theta, theta32, out32, out64)
        for d in range(row_hi[i] - row_lo[i]):
            out[i, d] = out32[d] if in_range else out64[d]


@numba.njit(nogil=True, cache=True)
def linear_top_k(X, row_lo, row_hi, params, V, client, coef, pos):
    """pos[i] = the positions (from row_lo[i]) of interaction i's k = pos.shape[1] highest
    scores (``linear_scores``), highest first, ties by position (lower first), -1 past the end
    of a short list. Returns whether each interaction had a NaN score (its ``pos`` is then
    meaningless: the caller ranks it again).
    """
    k = pos.shape[1]
    theta = np.empty(params.shape[0])
    theta32 = np.empty(params.shape[0], dtype=np.float32)
    longest = _longest(row_lo, row_hi)
    out32 = np.empty(longest, dtype=np.float32)
    out64 = np.empty(longest)
    best32 = np.empty(k, dtype=np.float32)
    best64 = np.empty(k)
    has_nan = np.zeros(row_lo.shape[0], dtype=np.bool_)
    for i in range(row_lo.shape[0]):
        _model(params, V, client[i], coef[i], theta)
        D = row_hi[i] - row_lo[i]
        if _interaction_scores(X, row_lo[i], row_hi[i], theta, theta32, out32, out64):
            _top_k_of(out32, D, best32, pos[i])
        else:
            has_nan[i] = _top_k_of(out64, D, best64, pos[i])
    return has_nan
