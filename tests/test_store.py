"""The SQLite results store: round trip, atomic runs, WAL, resume semantics."""

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from fltr_audit.store import results as store_mod
from fltr_audit.errors import FltrError
from fltr_audit.store.results import ResultsStore, load

from synthetic_results import synthetic_runs

ENV = {"numpy": np.__version__, "python": "3.11"}


def _record_all(store, runs):
    for r in runs:
        assert store.record_run(r["run_key"], "synthetic", r["config"], ENV, r["seed"], 1.5, r["tables"])


def test_round_trip_gives_the_same_frames(tmp_path):
    runs = synthetic_runs()
    store = ResultsStore(tmp_path / "r.sqlite")
    _record_all(store, runs)
    loaded = load(tmp_path / "r.sqlite")
    for name in ("curves", "attacks", "per_query", "audits", "utility", "epsilon"):
        expected = pd.concat([r["tables"][name] for r in runs if name in r["tables"]],
                             ignore_index=True)
        # the store keeps schema columns first (in schema order), then extras in order
        schema = ["run_key", *store_mod.TABLES[name]]
        absent = [c for c in schema if c not in expected.columns]  # e.g. a column the fixture no longer has
        assert loaded[name][absent].isna().all().all()
        expected = expected[[c for c in schema if c not in absent] + [c for c in expected.columns if c not in schema]]
        pd.testing.assert_frame_equal(loaded[name].drop(columns=absent), expected, check_dtype=True)
    runs_frame = loaded["runs"]
    assert list(runs_frame["run_key"]) == [r["run_key"] for r in runs]
    assert set(runs_frame["status"]) == {"done"}
    assert json.loads(runs_frame["config"].iloc[0]) == runs[0]["config"]
    assert json.loads(runs_frame["env"].iloc[0]) == ENV
    assert runs_frame["seed"].tolist() == [r["seed"] for r in runs]
    assert runs_frame["seconds"].dtype == np.float64


def test_missing_schema_columns_load_as_null_and_nan_survives(tmp_path):
    frame = pd.DataFrame({"defense": ["none", "secagg"], "round": [1, 2],
                          "offline_ndcg10": [np.nan, 0.5], "custom": [np.inf, np.nan]})
    store = ResultsStore(tmp_path / "r.sqlite")
    store.record_run("k", "c", {}, {}, None, 0.0, {"curves": frame})
    out = load(tmp_path / "r.sqlite")["curves"]
    assert out["online_ndcg"].isna().all() and out["online_ndcg"].dtype == np.float64
    assert np.isnan(out["offline_ndcg10"].iloc[0]) and out["offline_ndcg10"].iloc[1] == 0.5
    assert out["custom"].iloc[0] == np.inf and np.isnan(out["custom"].iloc[1])
    assert out["round"].dtype == np.int64


def test_wal_mode_is_on(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    assert store.journal_mode() == "wal"
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_failure_mid_write_leaves_nothing_of_the_run(tmp_path):
    runs = synthetic_runs()
    store = ResultsStore(tmp_path / "r.sqlite")
    _record_all(store, runs[:1])
    bad = dict(runs[1]["tables"])
    # the last table written holds a value sqlite3 cannot bind: the run row and the
    # earlier tables are already inserted when it fails
    bad_utility = bad["utility"].copy()
    bad_utility["ndcg10"] = bad_utility["ndcg10"].astype(object)
    bad_utility.at[1, "ndcg10"] = [1, 2]  # .at: pandas 2.0 reads a list given to .loc as one value per row
    bad = {**bad, "utility": bad_utility}
    assert list(bad).index("utility") > 0  # "attacks" goes in first
    with pytest.raises(sqlite3.Error):
        store.record_run(runs[1]["run_key"], "synthetic", runs[1]["config"], ENV, 2, 1.0, bad)
    loaded = load(tmp_path / "r.sqlite")
    assert loaded["runs"]["run_key"].tolist() == [runs[0]["run_key"]]
    for name in ("curves", "attacks", "per_query", "audits", "utility"):
        assert set(loaded[name]["run_key"]) == {runs[0]["run_key"]}, name
    assert store.completed_keys() == {runs[0]["run_key"]}


def test_skip_completed_and_replace_failures(tmp_path):
    runs = synthetic_runs()[:3]
    store = ResultsStore(tmp_path / "r.sqlite")
    assert store.register_pending({r["run_key"]: r["config"] for r in runs}, campaign="synthetic") == 3
    assert store.register_pending([(runs[0]["run_key"], runs[0]["config"])]) == 0
    status = store.status()
    assert status["status"].tolist() == ["pending"] * 3

    _record_all(store, runs[:1])
    assert store.record_failure(runs[1]["run_key"], "synthetic", runs[1]["config"], "boom") is True
    assert store.completed_keys() == {runs[0]["run_key"]}
    status = store.status().set_index("run_key")
    assert status.loc[runs[0]["run_key"], "status"] == "done"
    assert status.loc[runs[1]["run_key"], "status"] == "failed"
    assert status.loc[runs[1]["run_key"], "error"] == "boom"
    assert status.loc[runs[2]["run_key"], "status"] == "pending"

    # re-recording a done key writes nothing; a failure never overwrites a done run
    n_rows = len(load(tmp_path / "r.sqlite")["attacks"])
    r0 = runs[0]
    assert store.record_run(r0["run_key"], "synthetic", r0["config"], ENV, 1, 9.0, r0["tables"]) is False
    assert store.record_failure(r0["run_key"], "synthetic", r0["config"], "late") is False
    loaded = load(tmp_path / "r.sqlite")
    assert len(loaded["attacks"]) == n_rows
    assert loaded["runs"].set_index("run_key").loc[r0["run_key"], "seconds"] == 1.5

    # the failed run succeeds on re-run: its failure row is replaced, not duplicated
    r1 = runs[1]
    assert store.record_run(r1["run_key"], "synthetic", r1["config"], ENV, 1, 2.0, r1["tables"]) is True
    loaded = load(tmp_path / "r.sqlite")
    assert loaded["runs"]["run_key"].tolist().count(r1["run_key"]) == 1
    assert loaded["runs"].set_index("run_key").loc[r1["run_key"], "status"] == "done"
    assert pd.isna(loaded["runs"].set_index("run_key").loc[r1["run_key"], "error"])
    assert store.completed_keys() == {r0["run_key"], r1["run_key"]}


def test_two_store_objects_share_one_file(tmp_path):
    runs = synthetic_runs()[:2]
    a, b = ResultsStore(tmp_path / "r.sqlite"), ResultsStore(tmp_path / "r.sqlite")
    _record_all(a, runs[:1])
    _record_all(b, runs[1:])
    assert a.completed_keys() == b.completed_keys() == {r["run_key"] for r in runs}


def test_bad_input_is_one_line_error(tmp_path):
    with pytest.raises(FltrError, match="no such file"):
        load(tmp_path / "missing.sqlite")
    with pytest.raises(FltrError, match="no such file"):
        ResultsStore(tmp_path / "missing.sqlite", create=False)
    (tmp_path / "junk.sqlite").write_text("not a database at all " * 100)
    with pytest.raises(FltrError, match="junk.sqlite"):
        load(tmp_path / "junk.sqlite")
    with pytest.raises(FltrError, match="junk.sqlite"):
        ResultsStore(tmp_path / "junk.sqlite")
    other = sqlite3.connect(tmp_path / "other.sqlite")
    other.execute("CREATE TABLE t (a)")
    other.commit()
    other.close()
    with pytest.raises(FltrError, match="not a fltr-audit results store"):
        ResultsStore(tmp_path / "other.sqlite")
    with pytest.raises(FltrError, match="not a fltr-audit results store"):
        load(tmp_path / "other.sqlite")
    store = ResultsStore(tmp_path / "r.sqlite")
    with pytest.raises(FltrError, match="unknown result table"):
        store.record_run("k", "c", {}, {}, 1, 0.0, {"attack": pd.DataFrame({"a": [1]})})
    with pytest.raises(FltrError, match="another run_key"):
        store.record_run("k", "c", {}, {}, 1, 0.0, {"curves": pd.DataFrame({"run_key": ["x"]})})
    with pytest.raises(FltrError, match="config of run k"):
        store.record_run("k", "c", {"f": object()}, {}, 1, 0.0, {})
    assert store.completed_keys() == set()


def _record_in_process(path, index):
    run = synthetic_runs()[index]
    return ResultsStore(path).record_run(run["run_key"], "synthetic", run["config"], ENV,
                                         run["seed"], 1.0, run["tables"])


def test_processes_record_into_one_store_concurrently(tmp_path):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    path = tmp_path / "r.sqlite"
    ResultsStore(path)
    n = 6
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        assert all(pool.map(_record_in_process, [path] * n, range(n)))
    loaded = load(path)
    keys = [r["run_key"] for r in synthetic_runs()[:n]]
    assert sorted(loaded["runs"]["run_key"]) == sorted(keys)
    assert loaded["attacks"]["run_key"].value_counts().to_dict() == {
        k: len(r["tables"]["attacks"]) for k, r in zip(keys, synthetic_runs()[:n])}


def test_a_store_of_an_older_schema_gains_the_new_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    ResultsStore(path)
    conn = sqlite3.connect(path)
    conn.execute('ALTER TABLE attacks DROP COLUMN "leakage"')   # as written before the column existed
    conn.close()
    store = ResultsStore(path)
    store.record_run("k", "c", {}, {}, None, 0.0,
                     {"attacks": pd.DataFrame({"attack": ["olsr"], "leakage": [0.25], "auc": [0.75]})})
    out = load(path)["attacks"]
    assert out["leakage"].tolist() == [0.25] and out["auc"].tolist() == [0.75]
