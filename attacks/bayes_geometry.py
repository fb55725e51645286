"""PDGD's geometry as the Bayes attack replays it: the update of one shown list under click
vector c is ``lr * coef(c) @ J`` (Eq. 5-6), ``J`` the shown documents' score gradients and
``coef(c)`` the per-position sums of the pair weights ``W[a, b] = rho_ab sigma(d) sigma(-d)``
signed by c (``pairwise_weights``, ``pair_sign_tensor``, ``candidate_coefficients``), the
scores of many models by the client's own block scoring (``score_many``) and their batched
vector-Jacobian products (``vjp_many``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.engine import plackett_luce
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.pdgd import pair_weight_tables

def examined_unclicked(vectors: np.ndarray) -> np.ndarray:
    """PDGD's losing positions of each click vector: unclicked, at or above the one right
    after the last click (``fpdgd.pair_weights``), bool (C, k)."""
    k = vectors.shape[-1]
    any_click = vectors.any(-1)
    last = np.where(any_click, k - 1 - np.argmax(vectors[..., ::-1], axis=-1), -1)
    return ~vectors & (np.arange(k) <= last[..., None] + 1)


def ranking_geometry(scores: np.ndarray, valid: np.ndarray, positions: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Shown scores (n, k) (-inf on empty slots) and the log-denominators (n, k + 1) of the
    shown ranking over each query's candidates (as ``fpdgd.cohort_rankings``).

    ``scores`` (n, D) and ``valid`` (n, D) cover each query's candidates; ``positions`` (n, k)
    are the shown candidates' columns, -1 on empty slots.
    """
    ok = positions >= 0
    shown_scores = np.where(ok, np.take_along_axis(scores, np.where(ok, positions, 0), axis=1), -np.inf)
    extended = np.concatenate([positions, np.full((len(positions), 1), -1, dtype=np.int64)], axis=1)
    return shown_scores, plackett_luce.log_denominators(scores, valid, extended)


def pairwise_weights(shown_scores: np.ndarray, log_dens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``W[a, b] = rho_ab sigma(s_a - s_b) sigma(s_b - s_a)`` for every pair of shown positions,
    symmetric (n, k, k), zero diagonal and on empty slots (Eq. 5-6; the weight a pair adds
    to its preferred position and subtracts from the other, whichever is preferred)."""
    W = np.empty(mask.shape + mask.shape[-1:])
    pair_weight_tables(kernel_array(shown_scores, np.float64), kernel_array(log_dens, np.float64),
                       kernel_array(mask, bool), W)
    return W


def pair_sign_tensor(vectors: np.ndarray) -> np.ndarray:
    """``T[a, b, c] = clicks_c[a] neg_c[b] - neg_c[a] clicks_c[b]`` (k, k, C): with it the PDGD
    coefficients of candidate c are ``coef[a] = sum_b W[a, b] T[a, b, c]`` (Eq. 5)."""
    clicks = vectors.T.astype(np.float64)                                  # (k, C)
    neg = examined_unclicked(vectors).T.astype(np.float64)
    return clicks[:, None, :] * neg[None, :, :] - neg[:, None, :] * clicks[None, :, :]


def candidate_coefficients(W: np.ndarray, T: np.ndarray, left: np.ndarray | None = None) -> np.ndarray:
    """The PDGD gradient coefficients (Eq. 5) of every candidate on every list, (n, k, C), from
    the pair weights W (n, k, k) -- zero on empty slots, so no mask is needed -- and
    ``pair_sign_tensor`` T (k, k, C); with ``left`` (n, r, k), the products ``left @ coef``
    (n, r, C) instead. Either way one GEMM: ``Q[n, j, (a, b)] = left[n, j, a] W[n, a, b]`` times
    T as a (k^2, C) matrix (``left`` = identity gives the coefficients themselves)."""
    n, k, _ = W.shape
    if left is None:
        Q = np.zeros((n, k, k, k))
        Q[:, np.arange(k), np.arange(k), :] = W
    else:
        Q = left[:, :, :, None] * W[:, None, :, :]
    r = Q.shape[1]
    return (Q.reshape(n * r, k * k) @ T.reshape(k * k, -1)).reshape(n, r, -1)


def score_many(ranker: Any, params: np.ndarray, docs: Any, queries: np.ndarray, width: int) -> np.ndarray:
    """Scores (m, C, width) of each message's query candidates (the rows of ``docs`` of query
    ``queries[i]``, -inf past them) under C models each (m, C, P), by the engine's own
    ``ranker.score_blocks`` -- the client's numerics bit for bit (float32 for the linear
    ranker), so a replayed step equals the message without noise."""
    m, C, P = params.shape
    out = np.full((m * C, width), -np.inf)
    starts = np.repeat(docs.query_ptr[queries], C)
    counts = np.repeat(docs.docs_per_query[queries], C)
    return ranker.score_blocks(params.reshape(m * C, P), docs.features, starts, counts, out=out).reshape(m, C, width)


def vjp_many(ranker: Any, params: np.ndarray, X: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``sum_docs coef * df/dparams`` (m, C, P) for models (m, C, P), rows X (m, k, F), coef (m, C, k)."""
    X = X.astype(np.float64)
    if ranker.linear:  # df/dw = x: the model does not enter
        return coef @ X
    W, b, v = ranker.unpack(params)
    z = np.einsum("mchf,mkf->mckh", W, X) + b[:, :, None, :]
    gz = coef[..., None] * (z > 0) * v[:, :, None, :]                       # (m, C, k, H)
    dW = np.einsum("mckh,mkf->mchf", gz, X)
    m, C = coef.shape[:2]
    return np.concatenate([dW.reshape(m, C, -1), gz.sum(2), np.einsum("mck,mckh->mch", coef, np.maximum(z, 0.0))],
                          axis=-1)
