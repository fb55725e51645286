"""MaxRR: its values, the privacy bound of randomizing it, and the expected MaxRR of a model on a
split, analytically from the click model (FOLtR-ES §4 Eq. 10, §6.3 Table 3).

MaxRR is the reciprocal rank of the topmost click in the top ``k`` (0 without a click). For a
ranked list its expectation under a cascade click model is
``sum_i P(first click at i) / (i + 1)`` over the exact first-click distribution
(``CascadeClickModel.expected_max_rr``). As in Table 3, the model ranks every query of the
split deterministically, the expectation is taken per query and averaged over *all*
queries (a query without relevant documents still gets clicks under the noisy models).
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine import plackett_luce
from fltr_audit.engine.data.dataset import Dataset


def maxrr_values(length: int = 10) -> np.ndarray:
    """The n = L + 1 values MaxRR takes on a list of length L, indexed like the first-click
    distribution: 1, 1/2, ..., 1/L, then 0 (no click)."""
    return np.append(1.0 / np.arange(1, length + 1), 0.0)


def rr_epsilon(p: float, n_values: int) -> float:
    """FOLtR-ES Eq. 10: randomized response with keep probability p over n values is
    ``log(p (n - 1) / (1 - p))``-LDP (inf at p = 1)."""
    return float(np.log(p * (n_values - 1) / (1.0 - p))) if p < 1.0 else float("inf")


def ranked_labels(scores: np.ndarray, data: Dataset, k: int = 10) -> np.ndarray:
    """Labels of each query's top k by ``scores`` (n_docs,), ties by position; (n_queries, k), -1 padded."""
    rows = data.padded_rows
    valid = rows >= 0
    padded = np.where(valid, np.asarray(scores, dtype=np.float64)[np.maximum(rows, 0)], -np.inf)
    pos = plackett_luce.topk(padded, valid, k)
    shown = np.where(pos >= 0, np.take_along_axis(rows, np.maximum(pos, 0), axis=1), -1)
    return np.where(shown >= 0, data.labels[np.maximum(shown, 0)], -1).astype(np.int64)


def expected_maxrr(scores: np.ndarray, data: Dataset, click_model, k: int = 10) -> np.ndarray:
    """Expected MaxRR of every query of ``data`` ranked by ``scores`` (n_docs,); shape (n_queries,)."""
    return np.asarray(click_model.expected_max_rr(ranked_labels(scores, data, k)), dtype=np.float64)


def mean_expected_maxrr(ranker, params: np.ndarray, data: Dataset, click_model, k: int = 10) -> float:
    """The Table 3 figure: expected MaxRR of the model ``params`` averaged over all queries."""
    return float(expected_maxrr(ranker.score(params, data.features), data, click_model, k).mean())
