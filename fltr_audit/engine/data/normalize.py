"""Feature normalization and query filtering, vectorized over queries.

* ``none`` — features as in the file (FOLtR-ES uses MQ2007/MQ2008 as distributed).
* ``query-minmax`` — each feature scaled to [0, 1] within each query (FedIPS §4: "query-level
  normalization ... scale features to the range of [0, 1]"); a feature constant within a
  query becomes 0.
* ``zscore`` — each feature shifted to mean 0 and scaled to standard deviation 1 (Pham §3.1).
  Pham does not say which documents the statistics come from; we take them from the training
  split and apply them to all three splits, so that no test statistic leaks into training.
  A feature constant over the training split is only centred.

Dropping queries whose documents all share one label follows FedIPS §4 ("we filter out
queries where all documents have the same score").
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.data.blocks import BLOCK_ROWS, query_blocks
from fltr_audit.engine.data.dataset import Dataset

NORMALIZATIONS = ("none", "query-minmax", "zscore")


def check_normalization(method: str) -> None:
    """Raise naming ``--normalization`` unless ``method`` is one of :data:`NORMALIZATIONS`."""
    if method not in NORMALIZATIONS:
        raise ParameterError("normalization", f"unknown {method!r} (choose {', '.join(NORMALIZATIONS)})")


def query_minmax(ds: Dataset, *, inplace: bool = False) -> Dataset:
    """Scale every feature to [0, 1] within each query, a block of queries at a time (into the
    data set's own feature array with ``inplace``, for data nothing else holds)."""
    if ds.n_docs == 0:
        return ds

    x = ds.features
    if x.dtype != np.float32:
        return query_minmax(replace(ds, features=x.astype(np.float32)), inplace=True)
    out = x if inplace else np.empty(x.shape, dtype=np.float32)
    for q0, q1 in query_blocks(ds.query_ptr, BLOCK_ROWS):
        rows = slice(int(ds.query_ptr[q0]), int(ds.query_ptr[q1]))
        minmax_rows(x[rows], ds.query_ptr[q0:q1 + 1] - ds.query_ptr[q0], out=out[rows])
    return replace(ds, features=out)


def minmax_rows(x: np.ndarray, ptr: np.ndarray, out: np.ndarray) -> None:
    """``out = (x - min_q) / (max_q - min_q)`` per feature within each query ``ptr[i]:ptr[i+1]``
    of the rows ``x`` (0 where a feature is constant within a query); ``out`` may be ``x``."""
    starts = ptr[:-1]
    counts = np.diff(ptr)
    lo = np.repeat(np.minimum.reduceat(x, starts, axis=0), counts, axis=0)
    span = np.repeat(np.maximum.reduceat(x, starts, axis=0), counts, axis=0) - lo
    np.subtract(x, lo, out=out, casting="same_kind")
    np.divide(out, span, out=out, where=span > 0)
    out[span <= 0] = 0.0


def zscore_stats(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and standard deviation (float64) over all documents of ``ds``."""
    x = ds.features
    mean = x.mean(axis=0, dtype=np.float64)
    var = np.einsum("ij,ij->j", x, x, dtype=np.float64) / max(len(x), 1) - mean**2
    return mean, np.sqrt(np.maximum(var, 0.0))


def zscore(ds: Dataset, mean: np.ndarray, std: np.ndarray, *, inplace: bool = False) -> Dataset:
    """``(x - mean) / std`` per feature (features with ``std == 0`` only centred), in float32,
    a block of rows at a time (into the data set's own feature array with ``inplace``)."""

    shift = mean.astype(np.float32)
    scale = np.where(std > 0, std, 1.0).astype(np.float32)
    x = ds.features
    if x.dtype != np.float32:  # float64 input: the arithmetic in float64, as before
        return replace(ds, features=((x - shift) / scale).astype(np.float32))
    out = x if inplace else np.empty(x.shape, dtype=np.float32)
    for lo in range(0, len(x), BLOCK_ROWS):
        block = out[lo:lo + BLOCK_ROWS]
        np.subtract(x[lo:lo + BLOCK_ROWS], shift, out=block, casting="same_kind")
        np.divide(block, scale, out=block)
    return replace(ds, features=out)


def drop_single_label(ds: Dataset) -> Dataset:
    """Keep only the queries whose documents carry at least two different labels."""
    if ds.n_queries == 0:
        return ds
    starts = ds.query_ptr[:-1]
    lo = np.minimum.reduceat(ds.labels, starts)
    hi = np.maximum.reduceat(ds.labels, starts)
    keep = np.flatnonzero(hi > lo)
    return ds if len(keep) == ds.n_queries else ds.subset(keep)
