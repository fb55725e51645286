"""Normalization and query filtering against brute-force per-query loops."""

import numpy as np
import pytest

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.data.normalize import drop_single_label, query_minmax, zscore, zscore_stats
from fltr_audit.errors import FltrError


def _random(seed: int, n_queries: int = 40, d: int = 7) -> Dataset:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 12, n_queries)
    n = int(counts.sum())
    x = (rng.standard_normal((n, d)) * rng.uniform(0.1, 100, d) + rng.uniform(-50, 50, d)).astype(np.float32)
    x[:, 3] = 2.5  # constant everywhere
    labels = rng.integers(0, 3, n).astype(np.int8)
    labels[: counts[0]] = 1  # the first query has one label only
    return Dataset(x, labels, np.r_[0, np.cumsum(counts)], np.arange(n_queries) + 100, 3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_query_minmax_matches_per_query_loop(seed):
    ds = _random(seed)
    got = query_minmax(ds).features
    assert got.dtype == np.float32
    for i in range(ds.n_queries):
        x = ds.features[ds.query_rows(i)].astype(np.float64)
        lo, hi = x.min(axis=0), x.max(axis=0)
        want = np.where(hi > lo, (x - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0)
        # same float32 inputs; float32 subtraction and division each round by <= eps32/2
        # (6e-8) relative, so results in [0, 1] are within ~2e-7 of the float64 loop
        np.testing.assert_allclose(got[ds.query_rows(i)], want, rtol=0, atol=1e-6)
    assert got.min() >= 0.0 and got.max() <= 1.0


def test_zscore_uses_train_statistics_feature_by_feature():
    train, test = _random(3, 60), _random(4, 20)
    mean, std = zscore_stats(train)
    x = train.features.astype(np.float64)
    for j in range(x.shape[1]):
        assert mean[j] == pytest.approx(np.mean(x[:, j]), rel=1e-12, abs=1e-9)
        assert std[j] == pytest.approx(np.std(x[:, j]), rel=1e-7, abs=1e-6)
    got = zscore(test, mean, std).features
    for j in range(x.shape[1]):
        scale = np.std(x[:, j]) if np.std(x[:, j]) > 1e-9 else 1.0
        want = (test.features[:, j].astype(np.float64) - np.mean(x[:, j])) / scale
        # float32 result: relative 1e-6 plus absolute slack for values near 0
        np.testing.assert_allclose(got[:, j], want, rtol=1e-5, atol=1e-5)
    z = zscore(train, mean, std).features
    np.testing.assert_allclose(z.mean(axis=0, dtype=np.float64)[[0, 1, 2, 4]], 0, atol=1e-5)
    np.testing.assert_allclose(z.std(axis=0, dtype=np.float64)[[0, 1, 2, 4]], 1, atol=1e-5)
    np.testing.assert_array_equal(z[:, 3], 0)  # a constant feature is only centred


def test_drop_single_label_matches_loop():
    ds = _random(5)
    kept = drop_single_label(ds)
    want = [i for i in range(ds.n_queries) if len(np.unique(ds.labels[ds.query_rows(i)])) > 1]
    np.testing.assert_array_equal(kept.qids, ds.qids[want])
    assert ds.qids[0] not in kept.qids
    for j, i in enumerate(want):
        np.testing.assert_array_equal(kept.features[kept.query_rows(j)], ds.features[ds.query_rows(i)])


def test_load_splits_applies_options():
    plain = load_splits("synthetic:mq2008?queries=100", fold=2)
    mm = load_splits("synthetic:mq2008?queries=100", fold=2, normalization="query-minmax", drop_single_label=True)
    for a, b in zip((plain.train, plain.vali, plain.test), (mm.train, mm.vali, mm.test)):
        np.testing.assert_array_equal(b.features, query_minmax(drop_single_label(a)).features)
    zs = load_splits("synthetic:mq2008?queries=100", normalization="zscore")
    mean, std = zscore_stats(load_splits("synthetic:mq2008?queries=100").train)
    base = load_splits("synthetic:mq2008?queries=100").test
    np.testing.assert_array_equal(zs.test.features, zscore(base, mean, std).features)
    with pytest.raises(FltrError, match="^normalization: "):
        load_splits("synthetic:mq2008", normalization="minmax")
