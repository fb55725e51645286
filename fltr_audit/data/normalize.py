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

from fltr_audit.data.dataset import Dataset
from fltr_audit.errors import FltrError

NORMALIZATIONS = ("none", "query-minmax", "zscore")


def check_normalization(method: str) -> None:
    """Raise naming ``--normalization`` unless ``method`` is one of :data:`NORMALIZATIONS`."""
    if method not in NORMALIZATIONS:
        raise FltrError(f"--normalization: unknown {method!r} (choose {', '.join(NORMALIZATIONS)})")


def query_minmax(ds: Dataset) -> Dataset:
    """Scale every feature to [0, 1] within each query."""
    if ds.n_docs == 0:
        return ds
    starts = ds.query_ptr[:-1]
    counts = ds.docs_per_query
    lo = np.repeat(np.minimum.reduceat(ds.features, starts, axis=0), counts, axis=0)
    span = np.repeat(np.maximum.reduceat(ds.features, starts, axis=0), counts, axis=0) - lo
    out = ds.features - lo
    np.divide(out, span, out=out, where=span > 0)
    out[span <= 0] = 0.0
    return replace(ds, features=out.astype(np.float32, copy=False))


def zscore_stats(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and standard deviation (float64) over all documents of ``ds``."""
    x = ds.features
    mean = x.mean(axis=0, dtype=np.float64)
    var = np.einsum("ij,ij->j", x, x, dtype=np.float64) / max(len(x), 1) - mean**2
    return mean, np.sqrt(np.maximum(var, 0.0))


def zscore(ds: Dataset, mean: np.ndarray, std: np.ndarray) -> Dataset:
    """``(x - mean) / std`` per feature (features with ``std == 0`` only centred)."""
    scale = np.where(std > 0, std, 1.0)
    out = (ds.features - mean.astype(np.float32)) / scale.astype(np.float32)
    return replace(ds, features=out.astype(np.float32, copy=False))


def drop_single_label(ds: Dataset) -> Dataset:
    """Keep only the queries whose documents carry at least two different labels."""
    if ds.n_queries == 0:
        return ds
    starts = ds.query_ptr[:-1]
    lo = np.minimum.reduceat(ds.labels, starts)
    hi = np.maximum.reduceat(ds.labels, starts)
    keep = np.flatnonzero(hi > lo)
    return ds if len(keep) == ds.n_queries else ds.subset(keep)
