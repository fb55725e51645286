"""Expected MaxRR (FOLtR-ES §6.3): analytic values against hand computation and Monte Carlo."""

import numpy as np
import pytest

from fltr_audit.engine import metrics
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.maxrr import expected_maxrr, mean_expected_maxrr, ranked_labels
from fltr_audit.engine.rankers import LinearRanker


def small_data():
    # query 0: labels [1, 0, 2] ; query 1: labels [0, 0] ; query 2: 12 docs
    labels = np.array([1, 0, 2, 0, 0] + [2, 0, 1, 0, 0, 1, 0, 2, 0, 0, 0, 1], dtype=np.int8)
    X = np.arange(len(labels), dtype=np.float32)[::-1, None].copy()   # score = x: earlier rows higher
    return Dataset(features=X, labels=labels, query_ptr=np.array([0, 3, 5, 17]), qids=np.arange(3), n_levels=3)


def test_hand_computed_perfect_model():
    data = small_data()
    scores = data.features[:, 0].astype(np.float64)
    np.testing.assert_array_equal(ranked_labels(scores, data, 10)[0], [1, 0, 2] + [-1] * 7)
    e = expected_maxrr(scores, data, cascade_model("perfect", 3))
    # perfect: click prob 0 / 0.5 / 1. Query 0 [1, 0, 2]: 0.5 * 1 + 0.5 * 1/3
    assert e[0] == pytest.approx(0.5 + 0.5 / 3)
    assert e[1] == 0.0
    # query 2 [2, ...]: first click at rank 1 for sure
    assert e[2] == 1.0
    # reversed ranking of query 0 is [2, 0, 1]: 1.0
    assert expected_maxrr(-scores, data, cascade_model("perfect", 3))[0] == 1.0


@pytest.mark.parametrize("name", ["perfect", "navigational", "informational"])
def test_analytic_equals_monte_carlo(name):
    """Simulate the click model on each query's ranked list and average MaxRR.

    200,000 simulations per query: MaxRR lies in [0, 1], so the standard error is below
    0.5/sqrt(2e5) = 0.0011; we allow 4.5 empirical standard errors per query."""
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 30, 12)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    data = Dataset(features=rng.random((ptr[-1], 4)).astype(np.float32),
                   labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr,
                   qids=np.arange(12), n_levels=3)
    model = cascade_model(name, 3)
    w = rng.normal(size=4)
    analytic = expected_maxrr(data.features @ w, data, model)
    # the shown lists, built independently: sort each query's rows by score
    lists = np.full((12, 10), -1)
    for q in range(12):
        rows = np.arange(ptr[q], ptr[q + 1])
        top = rows[np.argsort(-(data.features[rows] @ w), kind="stable")][:10]
        lists[q, :len(top)] = data.labels[top]
    sims = metrics.max_rr(model.simulate(np.broadcast_to(lists, (200_000, 12, 10)), rng))
    mc, se = sims.mean(0), sims.std(0) / np.sqrt(len(sims))
    assert np.all(np.abs(analytic - mc) <= 4.5 * se + 1e-12), (analytic, mc)


def test_mean_over_all_queries_with_a_ranker():
    data = small_data()
    model = cascade_model("perfect", 3)
    ranker = LinearRanker(1)
    got = mean_expected_maxrr(ranker, np.array([1.0]), data, model)
    assert got == pytest.approx(((0.5 + 0.5 / 3) + 0.0 + 1.0) / 3)
