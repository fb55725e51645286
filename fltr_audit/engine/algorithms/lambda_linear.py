"""Linear LambdaRank trained with full information on the relevance labels (FedIPS §4, lambda-Linear).

The FedIPS paper's upper baseline (Burges 2010, LambdaRank) with the linear ranker of its
Eq. 12, f_w(x) = w . x. For every pair (i, j) of a query with rel_i > rel_j the pair weight is

    lambda_ij = |Delta NDCG_ij| / (1 + exp(s_i - s_j)),

where |Delta NDCG_ij| is the change of the query's (untruncated) NDCG when i and j swap
places in the ranking by the current scores (gain 2^rel - 1, discount 1 / log2(rank + 1),
as DESIGN.md). The descent direction on s_i is sum_j lambda_ij - sum_j lambda_ji; the
gradient in w is the query mean of its feature-weighted sum. Minibatch SGD over queries.
Everything is vectorized over the queries of a batch (dense (Q, D, D) pair tensors,
processed in chunks that bound their memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fltr_audit.constraints import POSITIVE, POSITIVE_INT, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError

PAIR_BUDGET = 2_000_000  # pair entries per chunk (Q * D * D): about 16 MB per float64 tensor


@dataclass(frozen=True)
class LambdaResult:
    """Trained weights and the per-epoch history of the evaluators (epoch 1-based)."""

    params: np.ndarray
    history: list[dict]


def _chunk_ascent(params: np.ndarray, data: Dataset, queries: np.ndarray) -> tuple[np.ndarray, int]:
    """Sum over ``queries`` of the LambdaRank ascent direction in w, and how many queries had pairs."""
    counts = data.docs_per_query[queries]
    width = int(counts.max())
    rows = data.padded_rows[queries, :width]
    valid = rows >= 0
    safe = np.where(valid, rows, 0)
    x = data.features[safe]  # (Q, D, F) float32
    labels = np.where(valid, data.labels[safe], 0).astype(np.float64)
    scores = np.where(valid, x @ params.astype(np.float32), -np.inf).astype(np.float64)

    order = np.argsort(-scores, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(width)[None, :], axis=1)
    discount = np.where(valid, 1.0 / np.log2(rank + 2.0), 0.0)
    gain = np.where(valid, 2.0**labels - 1.0, 0.0)
    ideal = np.sort(gain, axis=1)[:, ::-1] / np.log2(np.arange(width) + 2.0)[None, :]
    idcg = ideal.sum(axis=1)

    pair = (labels[:, :, None] > labels[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    has_pairs = pair.any(axis=(1, 2)) & (idcg > 0)
    delta = np.abs(gain[:, :, None] - gain[:, None, :]) * np.abs(discount[:, :, None] - discount[:, None, :])
    delta /= np.where(idcg > 0, idcg, 1.0)[:, None, None]
    finite = np.where(valid, scores, 0.0)
    rho = 0.5 * (1.0 - np.tanh(0.5 * (finite[:, :, None] - finite[:, None, :])))  # 1 / (1 + e^(s_i - s_j))
    lam = np.where(pair, rho * delta, 0.0)
    coef = lam.sum(axis=2) - lam.sum(axis=1)  # ascent on s_i
    ascent = np.einsum("qd,qdf->f", coef.astype(np.float32), x, dtype=np.float64)
    return ascent, int(has_pairs.sum())


def lambda_ascent(params: np.ndarray, data: Dataset, queries: np.ndarray) -> np.ndarray:
    """Mean over the queries (with at least one ordered pair) of the LambdaRank ascent direction.

    Parameters
    ----------
    params : ndarray (F,)
    data : Dataset
    queries : ndarray of int
        Query indices of ``data``.

    Returns
    -------
    ndarray (F,) float64; zeros when no query has a pair.
    """
    queries = np.asarray(queries, dtype=np.int64)
    total = np.zeros(data.n_features, dtype=np.float64)
    n = 0
    counts = data.docs_per_query[queries]
    start = 0
    while start < len(queries):
        # grow the chunk while Q * D^2 stays within the budget
        stop = start + 1
        width = counts[start]
        while stop < len(queries):
            w = max(width, counts[stop])
            if (stop - start + 1) * w * w > PAIR_BUDGET:
                break
            width = w
            stop += 1
        part, m = _chunk_ascent(params, data, queries[start:stop])
        total += part
        n += m
        start = stop
    return total / n if n else total


def train_lambda_linear(
    data: Dataset,
    *,
    epochs: int = 20,
    lr: float = 0.1,
    batch_queries: int = 64,
    seed: int = 0,
    init: np.ndarray | None = None,
    evaluators: dict[str, Callable[[np.ndarray], float]] | None = None,
    on_epoch: Callable[[int, dict], None] | None = None,
) -> LambdaResult:
    """Train a linear LambdaRank ranker by minibatch SGD over shuffled queries.

    Parameters
    ----------
    data : Dataset
        Training queries with their graded labels (full information).
    epochs, lr, batch_queries : int, float, int
        Passes over the data, step size, queries per minibatch.
    seed : int
        Drives the query shuffling.
    init : ndarray (F,), optional
        Starting weights (zeros by default).
    evaluators : mapping of name to callable(params) -> float, optional
        Evaluated after every epoch into ``history``.
    on_epoch : callable(epoch, row), optional
    """
    check("epochs", epochs, POSITIVE_INT)
    check("lr", lr, POSITIVE)
    check("batch_queries", batch_queries, POSITIVE_INT)
    if data.n_queries == 0:
        raise FltrError("lambda-linear: the training split has no queries")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x1A4B,)))
    params = np.zeros(data.n_features) if init is None else np.array(init, dtype=np.float64)
    history: list[dict] = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(data.n_queries)
        for start in range(0, len(order), batch_queries):
            params += lr * lambda_ascent(params, data, order[start : start + batch_queries])
        row = {"epoch": epoch, **{name: float(fn(params)) for name, fn in (evaluators or {}).items()}}
        history.append(row)
        if on_epoch is not None:
            on_epoch(epoch, row)
    return LambdaResult(params=params, history=history)
