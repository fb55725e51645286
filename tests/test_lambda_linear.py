"""Linear LambdaRank (the lambda-Linear baseline) and the logging policy f_0 built on it."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms import lambda_linear
from fltr_audit.engine.algorithms.lambda_linear import lambda_ascent, train_lambda_linear
from fltr_audit.engine.algorithms.logging_policy import LoggingPolicy, top_k_rows, train_logging_policy
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError


def random_data(seed=0, n_queries=9, n_features=3, levels=5):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 9, n_queries)
    counts[0] = 4
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    labels = rng.integers(0, levels, ptr[-1]).astype(np.int8)
    labels[ptr[1]:ptr[2]] = 2  # a query with one label only: no pairs
    return Dataset(rng.random((ptr[-1], n_features)).astype(np.float32), labels, ptr, np.arange(n_queries), levels)


def brute_ascent(w, data):
    """LambdaRank ascent by a loop over every ordered pair of every query."""
    total, n = np.zeros(data.n_features), 0
    for q in range(data.n_queries):
        sl = data.query_rows(q)
        x = data.features[sl].astype(np.float64)
        rel = data.labels[sl].astype(float)
        s = x @ w
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))
        rank = {d: r for r, d in enumerate(order)}
        gain = 2.0**rel - 1
        idcg = sum(g / np.log2(r + 2) for r, g in enumerate(sorted(gain, reverse=True)))
        g_q, pairs = np.zeros(data.n_features), False
        for i in range(len(s)):
            for j in range(len(s)):
                if rel[i] > rel[j]:
                    pairs = True
                    delta = abs(gain[i] - gain[j]) * abs(1 / np.log2(rank[i] + 2) - 1 / np.log2(rank[j] + 2)) / idcg
                    lam = delta / (1 + np.exp(s[i] - s[j]))
                    g_q += lam * (x[i] - x[j])
        if pairs:
            total += g_q
            n += 1
    return total / n


@pytest.mark.parametrize("budget", [10**6, 40])  # 40 pair entries forces one query per chunk
def test_lambda_ascent_matches_pairwise_loop(monkeypatch, budget):
    monkeypatch.setattr(lambda_linear, "PAIR_BUDGET", budget)
    data = random_data()
    w = np.random.default_rng(1).normal(size=3)
    w_tied = np.zeros(3)  # all scores tied: ranks by position
    for params in (w, w_tied):
        np.testing.assert_allclose(lambda_ascent(params, data, np.arange(data.n_queries)), brute_ascent(params, data),
                                   rtol=1e-5, atol=1e-7)


def test_top_k_rows_matches_sorting_each_query():
    data = random_data(seed=2)
    scores = np.round(np.random.default_rng(3).random(data.n_docs), 1)  # ties on purpose
    top = top_k_rows(scores, data, 5)
    for q in range(data.n_queries):
        rows = list(range(*data.query_ptr[q : q + 2]))
        expect = sorted(rows, key=lambda r: (-scores[r], r))[:5]
        assert list(top[q][top[q] >= 0]) == expect
        assert (top[q][len(expect):] == -1).all()


def test_lambda_linear_learns_to_rank():
    """On synthetic yahoo (300 queries), 5 epochs reach far above the untrained model and at
    least the NDCG@5 of scikit-learn's least-squares regression on the same labels."""
    splits = load_splits("synthetic:yahoo", 1, normalization="query-minmax", drop_single_label=True, queries=300)
    tr, te = splits.train, splits.test

    def ndcg5(w):
        return metrics.mean_ndcg(te.features @ np.asarray(w, dtype=np.float32), te, 5)

    res = train_lambda_linear(tr, epochs=5, lr=0.1, seed=0, evaluators={"ndcg5": ndcg5})
    assert len(res.history) == 5 and res.history[-1]["ndcg5"] == pytest.approx(ndcg5(res.params))
    least_squares = LinearRegression().fit(tr.features, tr.labels).coef_
    assert ndcg5(res.params) >= ndcg5(least_squares)
    assert ndcg5(res.params) > ndcg5(np.zeros(tr.n_features)) + 0.2


def test_logging_policy_uses_one_percent_and_shows_its_top_k():
    data = random_data(seed=4, n_queries=150)
    policy = train_logging_policy(data, k=3, fraction=0.01, seed=0)
    assert isinstance(policy, LoggingPolicy) and policy.params.shape == (3,)
    shown = policy.shown(data, np.array([[0, 5], [7, 7]]))
    assert shown.shape == (2, 2, 3)
    np.testing.assert_array_equal(shown[1, 0], top_k_rows(data.features @ policy.params.astype(np.float32), data, 3)[7])
    x = policy.table_features(data)
    np.testing.assert_array_equal(x[0], data.features[policy.table(data)[0]])
    with pytest.raises(FltrError):
        train_logging_policy(data, fraction=0.0)
    with pytest.raises(FltrError):
        train_lambda_linear(data, epochs=0)
