"""Robust combination rules on a cohort's updates U (n, P), vectorized over the cohort, unweighted.

* coordinate-wise median (Yin et al., ICML 2018): ``np.median`` per coordinate (the mean of the two
  middle values for even n);
* coordinate-wise beta-trimmed mean (Yin et al. 2018): per coordinate the ``k = floor(beta n)``
  largest and smallest values removed, the rest averaged (as ``scipy.stats.trim_mean``);
* Krum (Blanchard et al., NeurIPS 2017): ``score(i) = sum of the n - f - 2 smallest ||U_i - U_j||^2``,
  j != i; Krum selects the smallest score; Multi-Krum averages the m smallest (Flower's
  ``aggregate_krum``; m = n - f by default);
* norm bounding (Sun et al. 2019, "Can you really backdoor FL?"): each update scaled to L2 norm
  at most ``clip``.
"""

from __future__ import annotations

import numpy as np


def coordinate_median(U: np.ndarray) -> np.ndarray:
    """The coordinate-wise median of the rows, shape (P,)."""
    return np.median(np.asarray(U, dtype=np.float64), axis=0)


def trim_count(n: int, beta: float) -> int:
    """k = floor(beta n) values trimmed at each end (``scipy.stats.trim_mean``'s count)."""
    return int(float(beta) * int(n))


def trimmed_mean(U: np.ndarray, beta: float) -> np.ndarray:
    """The coordinate-wise beta-trimmed mean of the rows, shape (P,)."""
    U = np.asarray(U, dtype=np.float64)
    k = trim_count(len(U), beta)
    return np.sort(U, axis=0)[k:len(U) - k].mean(axis=0)


def squared_distances(U: np.ndarray) -> np.ndarray:
    """``||U_i - U_j||^2`` for every pair, (n, n), from the Gram matrix (clipped at 0, diagonal 0)."""
    U = np.asarray(U, dtype=np.float64)
    sq = np.einsum("ij,ij->i", U, U)
    D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (U @ U.T), 0.0)
    np.fill_diagonal(D, 0.0)
    return D


def krum_scores(D: np.ndarray, f: int) -> np.ndarray:
    """Krum's score of every row from its squared distances D (n, n): the sum of its
    ``n - f - 2`` smallest distances to the others (needs n >= f + 3)."""
    n = len(D)
    neighbours = n - int(f) - 2
    others = D + np.diag(np.full(n, np.inf))
    return np.partition(others, neighbours - 1, axis=1)[:, :neighbours].sum(axis=1)


def krum_select(U: np.ndarray, f: int, m: int) -> np.ndarray:
    """Indices of the ``m`` rows of smallest Krum score (ties by index), shape (m,)."""
    return np.argsort(krum_scores(squared_distances(U), f), kind="stable")[:int(m)]


def norm_bound(U: np.ndarray, clip: float) -> np.ndarray:
    """Each row scaled by ``min(1, clip / ||row||_2)``."""
    U = np.asarray(U, dtype=np.float64)
    norms = np.linalg.norm(U, axis=1)
    return U * np.where(norms > clip, clip / np.where(norms > 0, norms, 1.0), 1.0)[:, None]
