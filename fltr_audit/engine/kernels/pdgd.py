"""The PDGD step's pair coefficients (Oosterhuis & de Rijke 2018, Eq. 5-6; FPDGD Alg. 1), one
list at a time: the debiasing weight rho of each preference pair from the sampled ranking's
Plackett-Luce log-denominators, and the pair's weight on the two positions.

Oracles: brute-force enumeration of the swapped ranking's probability and of Eq. 5 pair by pair
(``tests/test_fpdgd.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from fltr_audit.engine.kernels.ranking import EXP_ZERO_BELOW, _logaddexp


@numba.njit(nogil=True, cache=True)
def _expit(x: float) -> float:
    """``1 / (1 + e^-x)``, as ``scipy.special.expit``; exactly 1.0 where ``e^-x`` is 0.0 (without
    libm's slow underflow path, ``ranking.EXP_ZERO_BELOW``)."""
    if -x < EXP_ZERO_BELOW:
        return 1.0
    return 1.0 / (1.0 + math.exp(-x))


@numba.njit(nogil=True, cache=True)
def _rest_sums(shown_scores: np.ndarray, log_dens: np.ndarray, columns: int, C: np.ndarray) -> None:
    """``C[m, c] = log sum exp`` over ``{R_m .. R_{c-1}} + U_{c+1}`` for m <= c < ``columns``:
    ``C[c, c] = L_{c+1}``, then a running ``logaddexp`` of the shown scores upwards (no subtraction:
    ties and extreme scores stay exact). Each column is computed on its own, so fewer columns
    leave the others' bits as they are."""
    for c in range(columns):
        C[c, c] = log_dens[c + 1]
        for m in range(c - 1, -1, -1):
            C[m, c] = _logaddexp(shown_scores[m], C[m + 1, c])


@numba.njit(nogil=True, cache=True)
def _swap_log_ratio(shown_scores: np.ndarray, log_dens: np.ndarray, C: np.ndarray, a: int, b: int) -> float:
    """``log P(R*(a, b)) - log P(R)`` for positions a < b (Eq. 6 before the sigmoid).

    Swapping keeps the numerators of Eq. 2 and the denominators outside ``a < m <= b``; inside,
    R*'s remaining set at m is ``{R_m .. R_{b-1}} + U_{b+1} + {R_a}``, log-sum
    ``logaddexp(C[m, b], s_a)``, where R's is ``L_m``. Summed over m in increasing order."""
    total = 0.0
    for m in range(a + 1, b + 1):
        total += log_dens[m] - _logaddexp(C[m, b], shown_scores[a])
    return total


@numba.njit(nogil=True, cache=True)
def swap_log_ratios(shown_scores: np.ndarray, log_dens: np.ndarray, out: np.ndarray) -> None:
    """``out[a, b] = log P(R*(a, b)) - log P(R)`` of one list for every a < b (k x k, the rest
    untouched). ``shown_scores`` (k,): scores top first, -inf on empty slots; ``log_dens`` (k + 1,):
    ``L_m``, the log-sum of exp-scores not placed before m (``L_k``: of the documents never shown)."""
    k = shown_scores.shape[0]
    C = np.empty((k, k))
    _rest_sums(shown_scores, log_dens, k, C)
    for a in range(k):
        for b in range(a + 1, k):
            out[a, b] = _swap_log_ratio(shown_scores, log_dens, C, a, b)


@numba.njit(nogil=True, cache=True)
def pair_coefficients(shown_scores: np.ndarray, log_dens: np.ndarray, clicks: np.ndarray, shown: np.ndarray,
                      out: np.ndarray) -> None:
    """``out[i, p]``, the coefficient of position p in list i's PDGD gradient (Eq. 5):
    ``grad_i = sum_p out[i, p] f'(d_p)``.

    Pairs: every clicked position over every shown, unclicked position at or above the one right
    after the last click. A pair's weight ``rho e^{s_w} e^{s_l} / (e^{s_w} + e^{s_l})^2``, with
    ``rho = sigmoid(log P(R*) - log P(R))`` (Eq. 6), is added to the preferred position w and
    subtracted from l: per position, the added weights summed in (w, l) order minus the
    subtracted ones summed in the same order. A list without a pair gets zeros. A pair's positions
    are at most one past the last click, so only those columns of ``_rest_sums`` are computed.
    """
    n, k = clicks.shape
    C = np.empty((k, k))
    plus = np.empty(k)
    minus = np.empty(k)
    for i in range(n):
        last = -1
        for p in range(k):
            plus[p] = 0.0
            minus[p] = 0.0
            if clicks[i, p]:
                last = p
        computed = False
        for w in range(k):
            if not clicks[i, w]:
                continue
            for lose in range(min(last + 2, k)):
                if clicks[i, lose] or not shown[i, lose]:
                    continue
                if not computed:
                    _rest_sums(shown_scores[i], log_dens[i], min(last + 2, k), C)
                    computed = True
                a, b = min(w, lose), max(w, lose)
                rho = _expit(_swap_log_ratio(shown_scores[i], log_dens[i], C, a, b))
                d = shown_scores[i, w] - shown_scores[i, lose]
                weight = rho * _expit(d) * _expit(-d)
                plus[w] += weight
                minus[lose] += weight
        for p in range(k):
            out[i, p] = plus[p] - minus[p]


@numba.njit(nogil=True, cache=True)
def pair_weight_tables(shown_scores: np.ndarray, log_dens: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """``out[i, a, b] = out[i, b, a] = rho_ab sigma(s_a - s_b) sigma(s_b - s_a)`` for every pair of
    positions a < b that ``mask[i]`` marks shown (Eq. 5-6: the weight a pair adds to its preferred
    position and subtracts from the other, whichever is preferred); zero elsewhere."""
    n, k = mask.shape
    table = np.empty((k, k))
    for i in range(n):
        swap_log_ratios(shown_scores[i], log_dens[i], table)
        for a in range(k):
            out[i, a, a] = 0.0
            for b in range(a + 1, k):
                weight = 0.0
                if mask[i, a] and mask[i, b]:
                    d = shown_scores[i, a] - shown_scores[i, b]
                    weight = _expit(table[a, b]) * _expit(d) * _expit(-d)
                out[i, a, b] = weight
                out[i, b, a] = weight


@numba.njit(nogil=True, cache=True)
def linear_gradients(X: np.ndarray, rows: np.ndarray, coef: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = sum_p coef[i, p] X[rows[i, p]]`` (Eq. 5 for a linear ranker, ``f'(d) = x_d``), in
    float64, positions in order; only the rows of nonzero coefficients are read."""
    for i in range(rows.shape[0]):
        for f in range(out.shape[1]):
            out[i, f] = 0.0
        for p in range(rows.shape[1]):
            c = coef[i, p]
            if c != 0.0:
                x = X[rows[i, p]]
                for f in range(out.shape[1]):
                    out[i, f] += c * float(x[f])


@numba.njit(nogil=True, cache=True)
def linear_steps(X: np.ndarray, shown: np.ndarray, shown_scores: np.ndarray, log_dens: np.ndarray,
                 clicks: np.ndarray, lr: float, weights: np.ndarray) -> None:
    """Every list's PDGD step for a linear ranker, ``weights[i] += lr * grad_i`` (Eq. 5-6):
    ``pair_coefficients`` of list i, then ``grad_i = sum_p coef[i, p] X[shown[i, p]]`` as
    ``linear_gradients`` sums it, then ``lr * grad_i`` added -- the bits of those steps one after
    the other; a list without a preference pair is left as it is. ``shown`` (n, k): dataset rows,
    -1 on empty slots (never read)."""
    n, k = clicks.shape
    coef = np.empty((1, k))
    ok = np.empty((1, k), dtype=np.bool_)
    grad = np.empty(weights.shape[1])
    for i in range(n):
        for p in range(k):
            ok[0, p] = shown[i, p] >= 0
        pair_coefficients(shown_scores[i:i + 1], log_dens[i:i + 1], clicks[i:i + 1], ok, coef)
        used = False
        for f in range(grad.shape[0]):
            grad[f] = 0.0
        for p in range(k):
            c = coef[0, p]
            if c != 0.0:
                used = True
                x = X[shown[i, p]]
                for f in range(grad.shape[0]):
                    grad[f] += c * float(x[f])
        if used:
            for f in range(grad.shape[0]):
                weights[i, f] += lr * grad[f]
