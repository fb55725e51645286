"""The supervised baselines of FOLtR-ES §5: MSE (linear regression) and RankingSVM.

Both are trained on the relevance labels of the whole training split, without
regularization worth the name (the paper: "effectively allowing them to overfit"), and both
return a weight vector for ``LinearRanker`` (no bias: a constant shift changes no ranking).
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.svm import LinearSVC

from fltr_audit.constraints import POSITIVE, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError


def fit_mse(data: Dataset) -> np.ndarray:
    """Least squares on the labels (scikit-learn ``LinearRegression``); the intercept is dropped."""
    model = LinearRegression().fit(data.features.astype(np.float64), data.labels.astype(np.float64))
    return np.asarray(model.coef_, dtype=np.float64)


def preference_pairs(data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Every within-query pair of documents with different labels, the more relevant first.

    Built over the padded (n_queries, D, D) layout at once.

    Returns
    -------
    better, worse : ndarray of int64, shape (n_pairs,)
        Row indices with ``labels[better] > labels[worse]`` and the same query.
    """
    rows = data.padded_rows
    lab = np.where(rows >= 0, data.labels[np.maximum(rows, 0)].astype(np.int16), -1)
    ok = rows >= 0
    pref = (lab[:, :, None] > lab[:, None, :]) & ok[:, :, None] & ok[:, None, :]
    q, i, j = np.nonzero(pref)
    return rows[q, i], rows[q, j]


def fit_ranksvm(data: Dataset, *, C: float = 1000.0, max_pairs: int = 200_000,
                rng: np.random.Generator | None = None, max_iter: int = 20_000) -> np.ndarray:
    """RankingSVM: a linear SVM on within-query pairwise differences (Joachims 2002), C = 1000.

    The paper used svm_rank (L1 hinge, slack sum scaled by its own convention); this is
    scikit-learn's ``LinearSVC`` with the squared hinge solved in the primal (``dual=False``;
    the L1-hinge dual does not converge in reasonable time at C = 1000), no intercept, on the
    differences ``x_better - x_worse`` with half of them flipped to balance the classes.
    Splits with more than ``max_pairs`` preference pairs are subsampled uniformly to that many
    (with ``rng``); MQ2007/MQ2008 folds stay below it.
    """
    check("C", C, POSITIVE)
    better, worse = preference_pairs(data)
    if len(better) == 0:
        raise FltrError(f"{data.name or 'data'}: no query has two documents with different labels")
    rng = rng if rng is not None else np.random.default_rng(0)
    if len(better) > max_pairs:
        keep = rng.choice(len(better), size=max_pairs, replace=False)
        better, worse = better[keep], worse[keep]
    diff = data.features[better].astype(np.float64) - data.features[worse].astype(np.float64)
    y = np.where(rng.random(len(diff)) < 0.5, 1, -1)
    diff *= y[:, None]
    svm = LinearSVC(C=C, loss="squared_hinge", dual=False, fit_intercept=False, max_iter=max_iter, tol=1e-4)
    svm.fit(diff, y)
    return np.asarray(svm.coef_[0], dtype=np.float64)
