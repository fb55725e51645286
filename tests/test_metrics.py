"""Metrics against a brute-force per-query loop and scikit-learn's ndcg_score."""

import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.metrics import dcg, ideal_dcg, max_rr, mean_ndcg, ndcg_at_k, ndcg_of_shown, online_performance


def make_dataset(rng, n_queries=60, n_levels=5, max_docs=25, p_empty=0.15):
    counts = rng.integers(1, max_docs + 1, n_queries)
    labels = []
    for c in counts:
        if rng.random() < p_empty:
            labels.append(np.zeros(c, np.int8))                    # no relevant document
        else:
            labels.append(rng.choice(n_levels, c, p=np.r_[0.5, np.full(n_levels - 1, 0.5 / (n_levels - 1))]))
    labels = np.concatenate(labels).astype(np.int8)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Dataset(
        features=np.zeros((len(labels), 1), np.float32), labels=labels, query_ptr=ptr,
        qids=np.arange(n_queries, dtype=np.int64), n_levels=n_levels,
    )


def brute_ndcg(scores, ds, k, empty):
    out = []
    for q in range(ds.n_queries):
        s, lab = scores[ds.query_rows(q)], ds.labels[ds.query_rows(q)].astype(int)
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))     # ties: first row first
        d = sum((2 ** lab[i] - 1) / math.log2(r + 2) for r, i in enumerate(order[:k]))
        ideal = sum((2 ** l - 1) / math.log2(r + 2) for r, l in enumerate(sorted(lab, reverse=True)[:k]))
        out.append(d / ideal if ideal > 0 else (math.nan if empty == "skip" else 0.0))
    return np.array(out)


@pytest.mark.parametrize("k", [1, 3, 10, 30])
@pytest.mark.parametrize("empty", ["skip", "zero"])
def test_ndcg_matches_brute_force(k, empty):
    rng = np.random.default_rng(k)
    ds = make_dataset(rng)
    # rounded scores create many ties, which both sides must break by position
    scores = np.round(rng.normal(size=ds.n_docs), 1)
    got = ndcg_at_k(scores, ds, k, empty)
    np.testing.assert_allclose(got, brute_ndcg(scores, ds, k, empty), rtol=1e-12, equal_nan=True)
    assert np.isnan(got).any() == (empty == "skip")
    expected_mean = np.nanmean(brute_ndcg(scores, ds, k, empty))
    assert mean_ndcg(scores, ds, k, empty) == pytest.approx(expected_mean, rel=1e-12)


@pytest.mark.parametrize("k", [1, 5, 10])
def test_ndcg_matches_sklearn_with_exponential_gains(k):
    # scikit-learn's ndcg_score uses linear gains y_true, discount 1/log2(rank + 1), an ideal
    # DCG over the same documents and cut-off k, and gives 0 to a query whose ideal DCG is 0:
    # feeding y_true = 2^rel - 1 reproduces our convention with empty="zero". Its conventions
    # differ only on ties (it averages tied documents' gains), so scores here are continuous.
    # Queries have different lengths; each is scored separately (per-query values), and also
    # all at once after padding with gain-0 documents scored below every real one, which
    # changes neither DCG nor ideal DCG.
    rng = np.random.default_rng(100 + k)
    ds = make_dataset(rng, n_queries=40, max_docs=20)
    scores = rng.normal(size=ds.n_docs)
    ours = ndcg_at_k(scores, ds, k, empty="zero")
    per_query = [
        ndcg_score([2.0 ** ds.labels[ds.query_rows(q)] - 1], [scores[ds.query_rows(q)]], k=k)
        if ds.docs_per_query[q] > 1 else None                       # sklearn needs >= 2 docs
        for q in range(ds.n_queries)
    ]
    checked = [q for q, v in enumerate(per_query) if v is not None]
    assert len(checked) > 30
    np.testing.assert_allclose(ours[checked], [per_query[q] for q in checked], rtol=1e-12)
    rows = ds.padded_rows
    gains = np.where(rows >= 0, 2.0 ** ds.labels[rows] - 1, 0.0)
    padded_scores = np.where(rows >= 0, scores[rows], -1e6)
    assert ndcg_score(gains, padded_scores, k=k) == pytest.approx(ours.mean(), rel=1e-12)


def test_ideal_dcg_and_dcg_small_example():
    ds = Dataset(
        features=np.zeros((5, 1), np.float32), labels=np.array([0, 2, 1, 0, 0], np.int8),
        query_ptr=np.array([0, 3, 5]), qids=np.array([1, 2]), n_levels=3,
    )
    np.testing.assert_allclose(ideal_dcg(ds, 10), [3 + 1 / math.log2(3), 0.0])
    np.testing.assert_allclose(ideal_dcg(ds, 1), [3.0, 0.0])
    assert dcg(np.array([-1, 2, -1]), 10) == pytest.approx(3 / math.log2(3))
    assert dcg(np.array([1, 2, 2]), 2) == pytest.approx(1 + 3 / math.log2(3))
    # a constant model ranks in file order
    np.testing.assert_allclose(ndcg_at_k(np.zeros(5), ds, 10, "zero"),
                               [(3 / math.log2(3) + 1 / 2) / (3 + 1 / math.log2(3)), 0.0])


def test_ndcg_of_shown_matches_brute_force():
    rng = np.random.default_rng(7)
    ds = make_dataset(rng, n_queries=30)
    n, B, k = 6, 3, 10
    queries = rng.integers(0, ds.n_queries, (n, B))
    shown = np.full((n, B, k), -1)
    for i in range(n):
        for b in range(B):
            rows = np.arange(ds.query_ptr[queries[i, b]], ds.query_ptr[queries[i, b] + 1])
            pick = rng.permutation(rows)[:k]
            shown[i, b, : len(pick)] = pick
    got = ndcg_of_shown(shown, ds, k)
    assert got.shape == (n, B)
    for i in range(n):
        for b in range(B):
            q = queries[i, b]
            lab = ds.labels[ds.query_rows(q)].astype(int)
            ideal = sum((2 ** l - 1) / math.log2(r + 2) for r, l in enumerate(sorted(lab, reverse=True)[:k]))
            d = sum((2 ** int(ds.labels[j]) - 1) / math.log2(r + 2) for r, j in enumerate(shown[i, b]) if j >= 0)
            if ideal == 0:
                assert math.isnan(got[i, b])
            else:
                assert got[i, b] == pytest.approx(d / ideal, rel=1e-12)
    assert np.isnan(ndcg_of_shown(np.full((2, k), -1), ds, k)).all()


def test_max_rr_and_online_performance():
    clicks = np.array([[0, 0, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0]], bool)
    np.testing.assert_allclose(max_rr(clicks), [1 / 3, 0, 1])
    assert max_rr(clicks.reshape(3, 1, 4)).shape == (3, 1)
    seq = np.array([0.5, np.nan, 0.2, 1.0])
    assert online_performance(seq, 0.9) == pytest.approx(0.5 + 0.2 * 0.9 + 1.0 * 0.81)
    assert online_performance(np.ones(1000)) == pytest.approx((1 - 0.9995 ** 1000) / (1 - 0.9995))


def test_bad_options():
    ds = make_dataset(np.random.default_rng(0), n_queries=3)
    with pytest.raises(FltrError, match="^empty: must be one of skip, zero, got 'nan'$"):
        ndcg_at_k(np.zeros(ds.n_docs), ds, 10, empty="nan")
    with pytest.raises(FltrError, match="^k: must be an integer >= 1, got 0$"):
        ndcg_at_k(np.zeros(ds.n_docs), ds, 0)
    for gamma in (0, 1.5):
        with pytest.raises(FltrError, match=rf"^gamma: must be a number in \(0, 1\], got {gamma}$"):
            online_performance([0.5], gamma)
    assert online_performance([0.5, 0.5], 1) == 1.0                  # the closed end is accepted
