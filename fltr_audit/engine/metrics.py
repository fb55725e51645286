"""Ranking metrics, vectorized over queries (DESIGN.md, Conventions: nDCG rule).

nDCG@k: gain ``2^rel - 1``, discount ``log2(rank + 1)`` (rank from 1), ideal DCG over all
judged documents of the query (the convention of the OLTR papers and their code). A query
with no relevant document has ideal DCG 0: its nDCG is NaN with ``empty="skip"`` (left out of
means, as the FPDGD code does) or 0 with ``empty="zero"``. Ties in scores are broken by
document position (the first row of the query first), so a constant model ranks in file order.
"""

from __future__ import annotations

import weakref

import numpy as np

from fltr_audit.constraints import Interval, Options, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.ranking import top_positions

EMPTY = ("skip", "zero")


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2))


def _check(k: int, empty: str = "skip") -> None:
    check("k", k, (Interval(int, 1, None),))
    check("empty", empty, (Options(EMPTY),))


def dcg(ranked_labels: np.ndarray, k: int = 10) -> np.ndarray:
    """DCG@k of ranked label lists (..., L); -1 marks an empty slot (gain 0). Shape (...)."""
    _check(k)
    lab = np.asarray(ranked_labels)[..., :k]
    gains = np.where(lab >= 0, np.exp2(np.maximum(lab, 0).astype(np.float64)) - 1.0, 0.0)
    return gains @ _discounts(lab.shape[-1])


def _label_counts(dataset: Dataset) -> np.ndarray:
    """(n_queries, n_labels) number of documents of each label per query."""
    width = max(int(dataset.labels.max()) + 1 if dataset.n_docs else 1, dataset.n_levels, 1)
    q = np.repeat(np.arange(dataset.n_queries), dataset.docs_per_query)
    flat = np.bincount(q * width + dataset.labels.astype(np.int64), minlength=dataset.n_queries * width)
    return flat.reshape(dataset.n_queries, width)


def ideal_dcg(dataset: Dataset, k: int = 10) -> np.ndarray:
    """DCG@k of each query's documents sorted by label, shape (n_queries,).

    Computed from per-query label counts (the ideal list is the labels in descending order),
    O(n_docs + n_queries * k * levels) with no sort.
    """
    _check(k)
    counts = _label_counts(dataset)[:, ::-1]          # highest label first
    levels = np.arange(counts.shape[1])[::-1]
    ends = np.cumsum(counts, axis=1)                  # (q, L)
    pos = np.arange(k)
    # label at position i: the first level (in descending order) whose cumulative count exceeds i
    which = (ends[:, None, :] <= pos[None, :, None]).sum(axis=2)   # (q, k), == L when past the end
    lab = np.where(which < len(levels), levels[np.minimum(which, len(levels) - 1)], -1)
    return dcg(lab, k)


_CACHE: dict[int, tuple[weakref.ref, dict]] = {}
def _cached(dataset: Dataset, key: tuple, make):
    """``make()`` computed once per (data set object, key) while the data set lives.

    Training evaluates the same split every round; data sets are frozen, so what is derived
    from an object never changes. The entries are dropped when the data set is collected.
    """
    ident = id(dataset)
    entry = _CACHE.get(ident)
    if entry is None or entry[0]() is not dataset:
        entry = (weakref.ref(dataset, lambda _ref, ident=ident: _CACHE.pop(ident, None)), {})
        _CACHE[ident] = entry
    if key not in entry[1]:
        entry[1][key] = make()
    return entry[1][key]


def _ideal_cached(dataset: Dataset, k: int) -> np.ndarray:
    """``ideal_dcg(dataset, k)``, cached per data set object."""
    def make() -> np.ndarray:
        ideal = ideal_dcg(dataset, k)
        ideal.setflags(write=False)
        return ideal

    return _cached(dataset, ("ideal", k), make)


def _finish(dcgs: np.ndarray, ideal: np.ndarray, empty: str) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = dcgs / ideal
    return np.where(ideal > 0, out, np.nan if empty == "skip" else 0.0)


def ndcg_at_k(scores: np.ndarray, dataset: Dataset, k: int = 10, empty: str = "skip") -> np.ndarray:
    """nDCG@k of every query of ``dataset`` ranked by ``scores`` (n_docs,), shape (n_queries,)."""
    _check(k, empty)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (dataset.n_docs,):
        raise ValueError(f"scores must have shape ({dataset.n_docs},), got {scores.shape}")
    top = np.empty((dataset.n_queries, k), dtype=np.int64)
    top_positions(scores, kernel_array(dataset.query_ptr, np.int64), top)
    lab = np.where(top >= 0, dataset.labels[np.where(top >= 0, dataset.query_ptr[:-1, None] + top, 0)], -1)
    return _finish(dcg(lab, k), _ideal_cached(dataset, k), empty)


def mean_ndcg(scores: np.ndarray, dataset: Dataset, k: int = 10, empty: str = "skip") -> float:
    """Mean nDCG@k over queries (NaN when every query is skipped)."""
    values = ndcg_at_k(scores, dataset, k, empty)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")


def ndcg_of_shown(shown: np.ndarray, dataset: Dataset, k: int = 10, empty: str = "skip") -> np.ndarray:
    """nDCG@k of shown lists ``(..., L)`` of row indices (-1 = empty slot), shape (...).

    The ideal DCG is that of the query the list's rows belong to (all its judged documents).
    A list with no shown document counts as an empty query.
    """
    _check(k, empty)
    shown = np.asarray(shown, dtype=np.int64)
    lab = np.where(shown >= 0, dataset.labels[np.maximum(shown, 0)], -1)
    first = np.where(shown >= 0, shown, np.iinfo(np.int64).max).min(axis=-1)
    has = first < np.iinfo(np.int64).max
    query = np.searchsorted(dataset.query_ptr, np.where(has, first, 0), side="right") - 1
    ideal = np.where(has, _ideal_cached(dataset, k)[query], 0.0)
    return _finish(dcg(lab, k), ideal, empty)


def max_rr(clicks: np.ndarray) -> np.ndarray:
    """Reciprocal rank of the topmost click of each list (..., k); 0 without a click (FOLtR-ES)."""
    clicks = np.asarray(clicks, dtype=bool)
    first = clicks.argmax(axis=-1)
    return np.where(clicks.any(axis=-1), 1.0 / (first + 1.0), 0.0)


def online_performance(ndcg_sequence: np.ndarray, gamma: float = 0.9995) -> float:
    """FPDGD Eq. 17: ``sum_t nDCG(R^t) * gamma^(t-1)`` over the displayed rankings in order.

    NaN entries (queries without a relevant document) are dropped before discounting, so t
    counts the evaluated interactions, matching the skip convention of the nDCG means.
    """
    check("gamma", gamma, (Interval(float, 0.0, 1.0, closed="right"),))
    seq = np.asarray(ndcg_sequence, dtype=np.float64).ravel()
    seq = seq[~np.isnan(seq)]
    return float(seq @ np.power(gamma, np.arange(len(seq))))
