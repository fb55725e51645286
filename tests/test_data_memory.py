"""Memory proportional to the data: features stored once, splits as views, normalization and
generation a block at a time, cached features memory-mapped copy-on-write."""

import tracemalloc

import numpy as np
import pytest

import fltr_audit.engine.data.cache as cache
import fltr_audit.engine.data.synthetic as synthetic
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.data.normalize import query_minmax, zscore, zscore_stats


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))


def _rows(ds, queries):
    return np.concatenate([np.arange(ds.query_ptr[q], ds.query_ptr[q + 1]) for q in queries])


def test_consecutive_subset_is_a_view_and_equals_the_rows_it_names():
    ds = synthetic.generate("mq2008", 40, seed=1)
    view = ds.subset(np.arange(10, 25))
    scattered = ds.subset(np.array([10, 12, 11]))
    assert np.shares_memory(view.features, ds.features) and not np.shares_memory(scattered.features, ds.features)
    for got, queries in ((view, range(10, 25)), (scattered, (10, 12, 11))):
        rows = _rows(ds, queries)
        np.testing.assert_array_equal(got.features, ds.features[rows])
        np.testing.assert_array_equal(got.labels, ds.labels[rows])
        np.testing.assert_array_equal(got.qids, ds.qids[list(queries)])
        np.testing.assert_array_equal(got.query_ptr, np.r_[0, np.cumsum(ds.docs_per_query[list(queries)])])


def test_fold_one_splits_share_the_generated_array():
    splits = load_splits("synthetic:mq2008?queries=50", 1)
    base = splits.train.features.base
    assert base is not None and splits.vali.features.base is base and splits.test.features.base is base


@pytest.mark.parametrize("name", ["mq2008", "mslr10k"])
def test_generation_does_not_depend_on_the_block_size(name, monkeypatch):
    whole = synthetic.generate(name, 60, seed=4)
    monkeypatch.setattr(synthetic, "BLOCK_ROWS", 7)
    assert len(synthetic.query_blocks(whole.query_ptr, 7)) > 10
    blocked = synthetic.generate(name, 60, seed=4)
    # the same draws in the same order; only BLAS's blocking of the latent mixture may move the
    # last bit of a product (and so a value by one unit of the 6-decimal rounding)
    np.testing.assert_allclose(blocked.features, whole.features, rtol=1e-5, atol=2.1e-6)
    np.testing.assert_array_equal(whole.labels, blocked.labels)


def test_query_blocks_cover_every_query_once_without_cutting_one():
    ptr = np.r_[0, np.cumsum([3, 9, 1, 1, 20, 2, 5])]
    blocks = synthetic.query_blocks(ptr, 4)
    assert blocks[0][0] == 0 and blocks[-1][1] == 7
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(blocks, blocks[1:]))


def test_normalizations_in_blocks_and_in_place_match_the_formulas(monkeypatch):
    monkeypatch.setattr(synthetic, "BLOCK_ROWS", 16)
    ds = synthetic.generate("mslr10k", 30, seed=2)
    x = ds.features.astype(np.float64)
    mean, std = zscore_stats(ds)
    expected = (x - mean) / np.where(std > 0, std, 1)
    for inplace in (False, True):
        own = Dataset(ds.features.copy(), ds.labels, ds.query_ptr, ds.qids, ds.n_levels)
        got = zscore(own, mean, std, inplace=inplace)
        assert np.shares_memory(got.features, own.features) == inplace
        np.testing.assert_allclose(got.features, expected, rtol=1e-5, atol=1e-5)
        got = query_minmax(Dataset(ds.features.copy(), ds.labels, ds.query_ptr, ds.qids, ds.n_levels),
                           inplace=inplace)
        for q in range(ds.n_queries):
            block = x[ds.query_rows(q)]
            span = block.max(0) - block.min(0)
            want = np.where(span > 0, (block - block.min(0)) / np.where(span > 0, span, 1), 0)
            np.testing.assert_allclose(got.features[ds.query_rows(q)], want, rtol=1e-5, atol=1e-6)


def test_generation_and_zscore_hold_no_whole_array_temporaries(monkeypatch):
    """Peak traced allocation at most the features plus a third (the float64 rounding of the whole
    array took 2-3 copies at 8 bytes a cell, zscore a float32 copy per split)."""
    monkeypatch.setattr(synthetic, "BLOCK_ROWS", 2048)
    tracemalloc.start()
    try:
        splits = load_splits("synthetic:mslr10k?queries=400", 1, normalization="zscore", cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    feature_bytes = sum(s.features.nbytes for s in (splits.train, splits.vali, splits.test))
    assert feature_bytes > 20 * synthetic.BLOCK_ROWS * 136 * 4  # large against the blocks
    assert peak < 1.35 * feature_bytes


def test_synthetic_cache_hit_is_mapped_copy_on_write(monkeypatch):
    monkeypatch.setattr(cache, "SYNTHETIC_MIN_BYTES", 0)
    calls = []

    def generate():
        calls.append(1)
        return synthetic.generate("mq2008", 40, seed=3)

    first = cache.cached_synthetic("mq2008", 40, 3, generate, 1, synthetic.GENERATOR_VERSION)
    second = cache.cached_synthetic("mq2008", 40, 3, generate, 1, synthetic.GENERATOR_VERSION)
    assert len(calls) == 1
    base = second.features
    while base.base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)
    np.testing.assert_array_equal(first.features, second.features)
    second.features[:] = -1.0  # a private page: the entry is untouched
    third = cache.cached_synthetic("mq2008", 40, 3, generate, 1, synthetic.GENERATOR_VERSION)
    np.testing.assert_array_equal(third.features, first.features)
    # another seed is another entry
    cache.cached_synthetic("mq2008", 40, 4, lambda: synthetic.generate("mq2008", 40, seed=4), 1,
                           synthetic.GENERATOR_VERSION)
    assert len(list(cache.cache_dir().glob("synthetic-*.npz"))) == 2


def test_cached_synthetic_splits_normalize_to_the_generated_numbers(monkeypatch):
    monkeypatch.setattr(cache, "SYNTHETIC_MIN_BYTES", 0)
    fresh = load_splits("synthetic:mslr10k?queries=60", 2, normalization="zscore", cache=False)
    for _ in range(2):  # the second load reads the entry
        got = load_splits("synthetic:mslr10k?queries=60", 2, normalization="zscore")
        for a, b in ((got.train, fresh.train), (got.test, fresh.test)):
            np.testing.assert_array_equal(a.features, b.features)


def test_cached_letor_features_are_mapped_and_normalize_without_touching_the_entry(tmp_path):
    from fltr_audit.engine.data.letor import read_letor
    from fltr_audit.engine.data.letor_write import write_letor

    ds = synthetic.generate("mslr10k", 20, seed=5)
    path = tmp_path / "train.txt"
    write_letor(ds, path)
    first = cache.cached_read(path, read_letor)
    hit = cache.cached_read(path, read_letor)
    base = hit.features
    while base.base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)
    np.testing.assert_array_equal(hit.features, first.features)
    mean, std = zscore_stats(hit)
    zscore(hit, mean, std, inplace=True)  # private pages
    np.testing.assert_array_equal(cache.cached_read(path, read_letor).features, first.features)
