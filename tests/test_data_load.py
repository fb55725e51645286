"""load_splits and data_info: real MQ2008 folds, layouts, specs and their errors."""

import numpy as np
import pytest

from fltr_audit.engine.data.letor_write import write_letor
from fltr_audit.engine.data.load import data_info, load_splits
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("fold", [1, 2, 3, 4, 5])
def test_mq2008_folds_have_the_published_counts(mq2008_dir, fold):
    s = load_splits(str(mq2008_dir), fold=fold)
    qids = np.concatenate([s.train.qids, s.vali.qids, s.test.qids])
    assert len(qids) == len(np.unique(qids)) == 784
    assert s.train.n_docs + s.vali.n_docs + s.test.n_docs == 15211
    assert s.train.n_features == s.vali.n_features == s.test.n_features == 46
    assert s.train.n_levels == s.test.n_levels == 3 and s.fold == fold


def test_mq2008_data_info(mq2008_dir):
    info = data_info(str(mq2008_dir))
    assert (info["queries"], info["documents"], info["features"], info["levels"]) == (784, 15211, 46, 3)
    assert info["queries_once_per_fold"] and [f["fold"] for f in info["folds"]] == [1, 2, 3, 4, 5]
    assert sum(info["labels"].values()) == 15211
    for f in info["folds"]:
        assert sum(f[s]["queries"] for s in ("train", "vali", "test")) == 784
        assert sum(f[s]["documents"] for s in ("train", "vali", "test")) == 15211


def _five_folds(root, ds):
    for k in range(1, 6):
        s = fold_split(ds, k)
        (root / f"Fold{k}").mkdir(parents=True)
        for split in ("train", "vali", "test"):
            write_letor(s.get(split), root / f"Fold{k}" / f"{split}.txt.gz")


def test_written_folds_load_as_the_in_memory_synthetic_splits(tmp_path):
    ds = generate("mslr10k", 12, seed=5)
    _five_folds(tmp_path / "d", ds)
    for k in (1, 4):
        disk = load_splits(str(tmp_path / "d"), fold=k)
        mem = load_splits("synthetic:mslr10k", fold=k, queries=12, seed=5)
        for split in ("train", "vali", "test"):
            a, b = disk.get(split), mem.get(split)
            np.testing.assert_array_equal(a.features, b.features)
            np.testing.assert_array_equal(a.labels, b.labels)
            np.testing.assert_array_equal(a.query_ptr, b.query_ptr)
            np.testing.assert_array_equal(a.qids, b.qids)


def test_single_file_and_split_folder_layouts(tmp_path):
    ds = generate("mq2008", 30, seed=1)
    write_letor(ds, tmp_path / "all.txt")
    s = load_splits(str(tmp_path / "all.txt"), fold=3)
    np.testing.assert_array_equal(s.test.qids, fold_split(ds, 3).test.qids)
    folder = tmp_path / "tvt"
    folder.mkdir()
    for split in ("train", "vali", "test"):
        write_letor(fold_split(ds, 1).get(split), folder / f"{split}.txt")
    assert load_splits(str(folder)).vali.n_queries == 6
    assert load_splits(str(folder), queries=4).train.n_queries == 4
    with pytest.raises(FltrError, match="^fold"):
        load_splits(str(folder), fold=2)
    assert data_info(str(folder))["queries"] == 30


def test_spec_queries_option():
    a = load_splits("synthetic:mq2008?queries=40", seed=2)
    b = load_splits("synthetic:mq2008", queries=40, seed=2)
    np.testing.assert_array_equal(a.train.features, b.train.features)
    assert a.train.n_queries + a.vali.n_queries + a.test.n_queries == 40
    with pytest.raises(FltrError, match="conflicts"):
        load_splits("synthetic:mq2008?queries=40", queries=50)
    with pytest.raises(FltrError, match="queries"):
        load_splits("synthetic:mq2008?queries=many")
    with pytest.raises(FltrError, match="unknown option"):
        load_splits("synthetic:mq2008?size=4")


def test_errors_name_the_path_or_option(tmp_path):
    with pytest.raises(FltrError, match="no/such/path"):
        load_splits("no/such/path")
    with pytest.raises(FltrError, match="^fold"):
        load_splits("synthetic:mq2008", fold=6)
    with pytest.raises(FltrError, match="^fold"):
        load_splits("synthetic:mq2008", fold=0)
    _five_folds(tmp_path / "d", generate("mq2008", 10, seed=1))
    (tmp_path / "d" / "Fold5" / "test.txt.gz").unlink()
    with pytest.raises(FltrError, match="test"):
        load_splits(str(tmp_path / "d"), fold=5)
    import shutil

    shutil.rmtree(tmp_path / "d" / "Fold5")
    with pytest.raises(FltrError, match="^fold.*Fold5"):
        load_splits(str(tmp_path / "d"), fold=5)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FltrError, match="empty"):
        load_splits(str(tmp_path / "empty"))


def test_splits_of_different_widths_are_refused(tmp_path):
    ds = generate("mq2008", 15, seed=1)
    narrow = type(ds)(ds.features[:, :45], ds.labels, ds.query_ptr, ds.qids, ds.n_levels)
    write_letor(ds.subset(np.arange(9)), tmp_path / "train.txt")
    write_letor(ds.subset(np.arange(9, 12)), tmp_path / "vali.txt")
    write_letor(narrow.subset(np.arange(12, 15)), tmp_path / "test.txt")
    with pytest.raises(FltrError, match="test.txt: 45 features"):
        load_splits(str(tmp_path))
