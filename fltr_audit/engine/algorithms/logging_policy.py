"""The production ranker f_0 whose top-K lists the FedIPS users see (FedIPS §4, Logging policy).

f_0 is a linear ranker trained with full information (linear LambdaRank,
``lambda_linear``) on 1 % of the training queries, as the paper's setup (after Joachims
et al. 2017 and Jagerman & de Rijke 2020). Every shown list is the deterministic top K of
f_0 (ties broken by document position); f_0 never changes during training.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.algorithms.lambda_linear import train_lambda_linear
from fltr_audit.constraints import Interval, POSITIVE_INT, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.randomness import stream


def top_k_rows(scores: np.ndarray, data: Dataset, k: int) -> np.ndarray:
    """Rows of the top ``k`` documents of every query of ``data`` by ``scores`` (n_docs,).

    Returns
    -------
    ndarray of int64, shape (n_queries, k); -1 where a query has fewer than k documents.
    """
    rows = data.padded_rows
    valid = rows >= 0
    padded = np.where(valid, scores[np.where(valid, rows, 0)], -np.inf)
    pos = np.argsort(-padded, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(rows, pos, axis=1)
    if top.shape[1] < k:  # every query has fewer than k documents
        top = np.pad(top, ((0, 0), (0, k - top.shape[1])), constant_values=-1)
    return top.astype(np.int64)


class LoggingPolicy:
    """A fixed linear ranker and the top-K lists it shows.

    Parameters
    ----------
    params : ndarray (F,)
        The weights of f_0.
    k : int
        Number of displayed documents per query (the paper's K, default 5).
    """

    def __init__(self, params: np.ndarray, k: int = 5) -> None:
        check("k", k, POSITIVE_INT)
        self.params = np.asarray(params, dtype=np.float64)
        self.k = int(k)
        self._tables: dict[int, tuple[Dataset, np.ndarray, np.ndarray]] = {}

    def _entry(self, data: Dataset) -> tuple[Dataset, np.ndarray, np.ndarray]:
        hit = self._tables.get(id(data))
        if hit is None or hit[0] is not data:
            if data.n_features != len(self.params):
                raise FltrError(
                    f"logging policy: {len(self.params)} weights but the data has {data.n_features} features"
                )
            top = top_k_rows(data.features @ self.params.astype(np.float32), data, self.k)
            x = data.features[np.maximum(top, 0)]
            x[top < 0] = 0.0
            hit = (data, top, x)
            self._tables[id(data)] = hit
        return hit

    def table(self, data: Dataset) -> np.ndarray:
        """The shown list of every query of ``data``, shape (n_queries, k) (cached per data set)."""
        return self._entry(data)[1]

    def table_features(self, data: Dataset) -> np.ndarray:
        """Features of every shown list, shape (n_queries, k, F) float32, zeros on empty slots.

        Cached per data set: gathering one list is then one contiguous copy (the FedIPS hot path).
        """
        return self._entry(data)[2]

    def shown(self, data: Dataset, queries: np.ndarray) -> np.ndarray:
        """Shown lists for the query indices ``queries`` (any shape) -> queries.shape + (k,)."""
        return self.table(data)[np.asarray(queries, dtype=np.int64)]


def train_logging_policy(
    train: Dataset,
    *,
    k: int = 5,
    fraction: float = 0.01,
    seed: int = 0,
    epochs: int = 20,
    lr: float = 0.1,
) -> LoggingPolicy:
    """Train f_0 with full information on a random ``fraction`` of the training queries.

    At least one query is used; the sample is drawn from ``stream(seed, "logging-policy")``.
    """
    check("logging_fraction", fraction, (Interval(float, 0, 1, "right"),))
    n = max(1, int(round(fraction * train.n_queries)))
    picked = np.sort(stream(seed, "logging-policy").choice(train.n_queries, size=n, replace=False))
    result = train_lambda_linear(train.subset(picked), epochs=epochs, lr=lr, seed=seed)
    return LoggingPolicy(result.params, k=k)
