"""Kernels of a cohort's ranking step (FPDGD, Alg. 1 steps 1-2): block scoring of each
client's contiguous candidate rows, and the Plackett-Luce top-k with its log-denominators.

Numpy references: ``LinearRanker.score`` (float64) for ``block_scores`` and
``plackett_luce.perturbed_topk`` / ``topk`` / ``log_denominators`` for ``rank_lists``
(``tests/test_kernels_ranking.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from fltr_audit.engine.kernels.prefetch import prefetch_row

_LOWEST = np.finfo(np.float64).min
EXP_ZERO_BELOW = -750.0  # math.exp(x) is exactly 0.0 below this (e^-745.13 is half the smallest subnormal), and
# libm's underflow path is 3-8 times slower than a normal exp: a trained model's candidates are mostly far below
# the best, so the kernels add 0.0 without calling it -- the same bits
PREFETCH_ROWS = 64  # how far ahead ``block_scores`` prefetches, in feature rows (35 KB of MSLR's 136 features)
_LOG2 = math.log(2.0)


@numba.njit(nogil=True, cache=True, fastmath={"reassoc"})
def _dot_float32(x: np.ndarray, w: np.ndarray) -> np.float32:
    """``x . w`` of float32 vectors summed in float32, reassociated into SIMD lanes: the order depends
    on the length of x only, so every row of a data set is summed alike."""
    total = np.float32(0.0)
    for f in range(x.shape[0]):
        total += np.float32(x[f]) * w[f]
    return total


@numba.njit(nogil=True, cache=True)
def _dot_float64(x: np.ndarray, w: np.ndarray) -> float:
    """``x . w`` in float64, left to right."""
    total = 0.0
    for f in range(x.shape[0]):
        total += float(x[f]) * w[f]
    return total


@numba.njit(nogil=True, cache=True)
def block_scores(X: np.ndarray, starts: np.ndarray, counts: np.ndarray, models32: np.ndarray,
                 models64: np.ndarray, limit: float, out: np.ndarray) -> None:
    """``out[i, j] = X[starts[i] + j] . models32[i]`` for ``j < counts[i]``: float32 products summed
    in float32; a row whose float32 score is not finite or beyond ``limit`` is scored again in
    float64 with ``models64[i]``. A row's score depends on the row and its model only.

    While a row is scored, the row ``PREFETCH_ROWS`` ahead in reading order (row ``ahead_row`` of
    block ``ahead``) is prefetched, so a block's first rows are in cache when it starts: the
    hardware prefetcher cannot know where the next block lies (1.6-2x on ``bench fpdgd``'s lists, one core)."""
    n = starts.shape[0]
    ahead, ahead_row = 0, 0
    for _ in range(PREFETCH_ROWS):
        ahead, ahead_row = _next_row(counts, ahead, ahead_row)
        if ahead < n:
            prefetch_row(X, starts[ahead] + ahead_row)
            ahead_row += 1
    for i in range(n):
        w, s = models32[i], starts[i]
        for j in range(counts[i]):
            ahead, ahead_row = _next_row(counts, ahead, ahead_row)
            if ahead < n:
                prefetch_row(X, starts[ahead] + ahead_row)
                ahead_row += 1
            score = _dot_float32(X[s + j], w)
            if abs(score) <= limit:
                out[i, j] = score
            else:
                out[i, j] = _dot_float64(X[s + j], models64[i])


@numba.njit(nogil=True, cache=True)
def _next_row(counts: np.ndarray, block: int, row: int) -> tuple[int, int]:
    """The first (block, row) at or after ``row`` of ``block`` that exists, in reading order;
    ``block == len(counts)`` past the last one."""
    while block < counts.shape[0] and row >= counts[block]:
        block, row = block + 1, 0
    return block, row


@numba.njit(nogil=True, cache=True)
def _logaddexp(x: float, y: float) -> float:
    """numpy's ``logaddexp``, the same branches (so -inf + -inf is -inf without a warning); the
    ``log1p`` term is 0.0 without calling ``exp`` where it would underflow (``EXP_ZERO_BELOW``)."""
    if x == y:
        return x + _LOG2
    d = x - y
    if d > 0:
        return x + (math.log1p(math.exp(-d)) if -d > EXP_ZERO_BELOW else 0.0)
    if d <= 0:
        return y + (math.log1p(math.exp(d)) if d > EXP_ZERO_BELOW else 0.0)
    return d


@numba.njit(nogil=True, cache=True)
def _ahead(x: float, y: float) -> bool:
    """Whether key x ranks before key y: larger first, NaN before any number (as ``argmax``)."""
    return x > y or (x != x and y == y)


@numba.njit(nogil=True, cache=True)
def _insert_top(key: np.ndarray, m: int, top: np.ndarray) -> int:
    """The positions of the ``len(top)`` first of ``key[:m]`` in ``top``, in order (``_ahead``, ties
    to the lower position: a later equal key goes behind); returns how many were filled."""
    k = top.shape[0]
    filled = 0
    for j in range(m):
        if filled == k and not _ahead(key[j], key[top[k - 1]]):
            continue
        at = min(filled, k - 1)
        while at > 0 and _ahead(key[j], key[top[at - 1]]):
            top[at] = top[at - 1]
            at -= 1
        top[at] = j
        filled = min(filled + 1, k)
    return filled


@numba.njit(nogil=True, cache=True)
def top_positions(scores: np.ndarray, ptr: np.ndarray, out: np.ndarray) -> None:
    """``out[q]``: the positions within query q (rows ``ptr[q]:ptr[q + 1]`` of ``scores``) of its top
    k = ``out.shape[1]`` by score, ties to the lower position, NaN first (``plackett_luce.topk``);
    -1 past the query's end."""
    k = out.shape[1]
    for q in range(out.shape[0]):
        lo = ptr[q]
        filled = _insert_top(scores[lo:ptr[q + 1]], ptr[q + 1] - lo, out[q])
        for p in range(filled, k):
            out[q, p] = -1


@numba.njit(nogil=True, cache=True)
def rank_lists(scores: np.ndarray, counts: np.ndarray, noise: np.ndarray, noise_starts: np.ndarray,
               perturbed: bool, positions: np.ndarray, shown_scores: np.ndarray, log_dens: np.ndarray) -> None:
    """Each list's top-k and the Plackett-Luce log-denominators of that ranking (DESIGN.md).

    List i has the scores ``scores[i, :counts[i]]``. Its keys are the scores, -inf lifted to the
    lowest float, plus -- when ``perturbed`` -- the Gumbel noise ``noise[noise_starts[i] + j]``
    (Gumbel top-k: a PL sample, ``plackett_luce.perturbed_topk``); unperturbed, the top-k by score
    with ties to the lower position (``plackett_luce.topk``); a NaN key goes first. With
    k = ``positions.shape[1]``:

    - ``positions[i, p]``: the list position shown at p, -1 past the list's end;
    - ``shown_scores[i, p]``: its score, -inf on empty slots;
    - ``log_dens[i, p]`` for p <= k: ``log sum exp`` of the scores not placed before p
      (``plackett_luce.log_denominators`` of the ranking with one extra empty slot): the rest's
      max-shifted sum left to right, then a reverse running ``logaddexp`` of the placed scores.
    """
    k = positions.shape[1]
    key = np.empty(scores.shape[1])
    placed = np.zeros(scores.shape[1], dtype=np.bool_)
    for i in range(scores.shape[0]):
        m = counts[i]
        for j in range(m):
            key[j] = max(scores[i, j], _LOWEST)
            if perturbed:
                key[j] += noise[noise_starts[i] + j]
            placed[j] = False
        filled = _insert_top(key, m, positions[i])
        for p in range(k):
            if p < filled:
                placed[positions[i, p]] = True
                shown_scores[i, p] = scores[i, positions[i, p]]
            else:
                positions[i, p] = -1
                shown_scores[i, p] = -np.inf
        top = -np.inf
        for j in range(m):
            if not placed[j] and scores[i, j] > top:
                top = scores[i, j]
        shift = top if math.isfinite(top) else 0.0
        total = 0.0
        for j in range(m):
            if not placed[j]:
                x = scores[i, j] - shift
                if not x <= EXP_ZERO_BELOW:  # a NaN score still makes the sum NaN
                    total += math.exp(x)
        rest = -np.inf if total == 0.0 else math.log(total) + shift
        log_dens[i, k] = rest
        for p in range(k - 1, -1, -1):
            rest = _logaddexp(rest, shown_scores[i, p])
            log_dens[i, p] = rest
