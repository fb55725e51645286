"""FOLtR-ES's ranking kernels: each interaction's perturbed linear model scores its query's rows
and keeps its top k (``algorithms.foltr_es.FOLtRES.shown_lists`` and ``.scores``).

Interaction i = c B + b (client c's b-th of B queries) ranks the rows of its query by the
model ``theta_i = side_coef[b] * V[c] + params`` (float64: ``side_coef[b]`` is the side's
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

from fltr_audit.engine.rankers import FLOAT32_MAX_SCORE


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
    (``algorithms.evolution_strategies.perturbations`` maps it through the inverse normal CDF)."""
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
def _longest(query_ptr, queries, which):
    """The longest list among the interactions ``which``."""
    longest = 0
    for t in range(which.shape[0]):
        q = queries[which[t]]
        longest = max(longest, query_ptr[q + 1] - query_ptr[q])
    return longest


@numba.njit(nogil=True, cache=True)
def _scratch(params, query_ptr, queries, which):
    """Buffers of one interaction: its model in float64 and float32, its scores in float32 and
    float64 (as long as the longest list among ``which``)."""
    longest = _longest(query_ptr, queries, which)
    return (np.empty(params.shape[0]), np.empty(params.shape[0], dtype=np.float32),
            np.empty(longest, dtype=np.float32), np.empty(longest))


@numba.njit(nogil=True, cache=True)
def linear_scores(X, query_ptr, queries, B, side_coef, params, V, which, out):
    """out[t, :D] = the scores of interaction i = which[t] (the rest of the row untouched).

    Interaction i = c B + b of a cohort's clients c and their B queries each ranks query
    ``queries[i]`` (rows ``query_ptr[q]`` to ``query_ptr[q + 1]``) by the model
    ``side_coef[b] * V[c] + params`` (``side_coef``: sign times sigma of each of the B sides).
    """
    theta, theta32, out32, out64 = _scratch(params, query_ptr, queries, which)
    for t in range(which.shape[0]):
        i = which[t]
        lo, hi = query_ptr[queries[i]], query_ptr[queries[i] + 1]
        _model(params, V, i // B, side_coef[i % B], theta)
        in_range = _interaction_scores(X, lo, hi, theta, theta32, out32, out64)
        for d in range(hi - lo):
            out[t, d] = out32[d] if in_range else out64[d]


@numba.njit(nogil=True, cache=True)
def linear_shown(X, query_ptr, queries, B, side_coef, params, V, which, shown, has_nan):
    """shown[i] = the rows of the k = shown.shape[1] highest scores (``linear_scores``) of each
    interaction i in ``which``, highest first, ties by position (lower first), -1 past the end
    of a short list; has_nan[i] = whether a score was NaN (``shown[i]`` is then meaningless:
    the caller ranks it again). Writes only the rows ``which`` of the outputs.
    """
    k = shown.shape[1]
    theta, theta32, out32, out64 = _scratch(params, query_ptr, queries, which)
    best32 = np.empty(k, dtype=np.float32)
    best64 = np.empty(k)
    for t in range(which.shape[0]):
        i = which[t]
        lo, hi = query_ptr[queries[i]], query_ptr[queries[i] + 1]
        _model(params, V, i // B, side_coef[i % B], theta)
        pos = shown[i]
        if _interaction_scores(X, lo, hi, theta, theta32, out32, out64):
            has_nan[i] = _top_k_of(out32, hi - lo, best32, pos)
        else:
            has_nan[i] = _top_k_of(out64, hi - lo, best64, pos)
        for j in range(k):
            if pos[j] >= 0:
                pos[j] += lo
