"""The MSE and RankingSVM baselines against independent computations."""

import numpy as np
import pytest
from scipy.optimize import minimize

from fltr_audit.engine.algorithms.supervised import fit_mse, fit_ranksvm, preference_pairs
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError


def toy(n_queries=25, n_features=4, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 15, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(ptr[-1], n_features)).astype(np.float32)
    w = np.array([1.0, -2.0, 0.5, 0.0])[:n_features]
    s = X @ w + noise * rng.normal(size=ptr[-1])
    labels = np.digitize(s, [0.5, 2.0]).astype(np.int8)
    return Dataset(features=X, labels=labels, query_ptr=ptr, qids=np.arange(n_queries), n_levels=3)


def brute_pairs(data):
    out = set()
    for q in range(data.n_queries):
        rows = range(data.query_ptr[q], data.query_ptr[q + 1])
        for i in rows:
            for j in rows:
                if data.labels[i] > data.labels[j]:
                    out.add((i, j))
    return out


def test_preference_pairs_match_brute_force():
    data = toy()
    better, worse = preference_pairs(data)
    assert set(zip(better.tolist(), worse.tolist())) == brute_pairs(data)
    assert len(better) == len(brute_pairs(data))


def test_mse_equals_least_squares_with_intercept():
    data = toy()
    A = np.column_stack([data.features.astype(np.float64), np.ones(data.n_docs)])
    coef = np.linalg.lstsq(A, data.labels.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(fit_mse(data), coef[:-1], rtol=1e-8, atol=1e-10)


def test_ranksvm_minimizes_the_l2_svm_pair_objective():
    """The returned w minimizes 0.5 |w|^2 + C sum_pairs max(0, 1 - w.(x_better - x_worse))^2
    (label flips do not change it); an independent L-BFGS solve of that objective reaches
    the same value within 1e-4 relative."""
    data = toy(n_queries=15, seed=1)
    C = 10.0
    better, worse = preference_pairs(data)
    D = data.features[better].astype(np.float64) - data.features[worse].astype(np.float64)

    def objective(w):
        m = np.maximum(0.0, 1.0 - D @ w)
        return 0.5 * w @ w + C * (m ** 2).sum(), w - 2 * C * (m @ D)

    ref = minimize(objective, np.zeros(4), jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 10_000})
    w = fit_ranksvm(data, C=C)
    assert objective(w)[0] == pytest.approx(ref.fun, rel=1e-4)


def test_ranksvm_orders_separable_data_perfectly():
    data = toy(noise=0.0, seed=2)
    better, worse = preference_pairs(data)
    w = fit_ranksvm(data)
    X = data.features.astype(np.float64)
    assert np.all(X[better] @ w > X[worse] @ w)


def test_ranksvm_subsamples_pairs_and_rejects_bad_input():
    data = toy(seed=3)
    w = fit_ranksvm(data, max_pairs=50, rng=np.random.default_rng(0))
    assert w.shape == (4,) and np.isfinite(w).all()
    with pytest.raises(FltrError, match="^C: "):
        fit_ranksvm(data, C=0)
    flat = Dataset(features=data.features, labels=np.zeros_like(data.labels), query_ptr=data.query_ptr,
                   qids=data.qids, n_levels=3)
    with pytest.raises(FltrError, match="different labels"):
        fit_ranksvm(flat)
