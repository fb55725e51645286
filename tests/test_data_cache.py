"""The binary cache of parsed LETOR files: hits, invalidation, atomicity, fallbacks."""

import os

import numpy as np
import pytest

from fltr_audit.engine.data.cache import cache_dir, cached_read
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.engine.data.letor_write import write_letor
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.data.synthetic import generate


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))


class CountingReader:
    def __init__(self):
        self.calls = 0

    def __call__(self, path):
        self.calls += 1
        return read_letor(path)


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("FLTR_AUDIT_CACHE")
    assert cache_dir() == __import__("pathlib").Path.home() / ".cache" / "fltr-audit"


def test_hit_returns_identical_arrays_without_parsing(tmp_path):
    ds = generate("mq2008", 30, seed=1)
    ds = type(ds)(ds.features, ds.labels, ds.query_ptr, ds.qids, ds.n_levels,
                  doc_ids=np.array([f"doc{i}" for i in range(ds.n_docs)]))
    path = tmp_path / "train.txt"
    write_letor(ds, path)
    reader = CountingReader()
    first = cached_read(path, reader)
    second = cached_read(path, reader)
    assert reader.calls == 1
    for name in ("features", "labels", "query_ptr", "qids", "doc_ids"):
        a, b = getattr(first, name), getattr(second, name)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert second.n_levels == first.n_levels and second.name == str(path)
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_changed_file_is_parsed_again_and_stale_entry_removed(tmp_path):
    path = tmp_path / "train.txt"
    write_letor(generate("mq2008", 30, seed=1), path)
    reader = CountingReader()
    cached_read(path, reader)
    changed = generate("mq2008", 30, seed=2)
    write_letor(changed, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a distinct mtime
    got = cached_read(path, reader)
    assert reader.calls == 2
    np.testing.assert_array_equal(got.features, changed.features)
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1


def test_corrupt_entry_is_rebuilt_and_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    path = tmp_path / "train.txt"
    ds = generate("mq2008", 20, seed=1)
    write_letor(ds, path)
    cached_read(path, read_letor)
    (entry,) = (tmp_path / "cache").glob("*.npz")
    entry.write_bytes(b"garbage")
    np.testing.assert_array_equal(cached_read(path, read_letor).features, ds.features)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(blocker / "sub"))
    np.testing.assert_array_equal(cached_read(path, read_letor).features, ds.features)


def test_load_splits_uses_the_cache_unless_told_not_to(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    ds = generate("mq2008", 25, seed=4)
    for split, part in (("train", range(0, 15)), ("vali", range(15, 20)), ("test", range(20, 25))):
        write_letor(ds.subset(np.array(part)), folder / f"{split}.txt")
    load_splits(str(folder), cache=False)
    assert not (tmp_path / "cache").exists()
    a = load_splits(str(folder))
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 3
    b = load_splits(str(folder))
    np.testing.assert_array_equal(a.test.features, b.test.features)


def test_mapped_features_are_aligned_and_an_unaligned_entry_is_rebuilt(tmp_path):
    """Catches: the padding field miscounted (features mapped at an odd address, numpy's slow
    unaligned paths), and an old writer's unaligned entry used instead of rebuilt."""
    ds = generate("mq2008", 30, seed=1)
    path = tmp_path / "train.txt"
    write_letor(ds, path)
    reader = CountingReader()
    first = cached_read(path, reader)
    entry, = (tmp_path / "cache").glob("*.npz")
    hit = cached_read(path, reader)
    assert reader.calls == 1 and hit.features.ctypes.data % 64 == 0 and hit.features.flags.aligned
    np.testing.assert_array_equal(hit.features, first.features)
    np.savez(entry, features=ds.features, labels=ds.labels, query_ptr=ds.query_ptr, qids=ds.qids,
             n_levels=np.int64(ds.n_levels))  # numpy's own writer: data 62 bytes past a 64-byte boundary
    cached_read(path, reader)  # parsed again, entry rewritten
    assert reader.calls == 2
    assert cached_read(path, reader).features.ctypes.data % 64 == 0 and reader.calls == 2
