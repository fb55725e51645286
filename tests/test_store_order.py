"""A store reads back in its campaign's grid order, whatever order the workers finished the runs in
(a demo on two workers printed its verdict table in completion order)."""

import pandas as pd

from fltr_audit.store.results import ResultsStore, load


def test_tables_follow_the_registered_order_not_the_finishing_order(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    keys = ["a", "b", "c"]
    store.register_pending([(k, {"defense": k}) for k in keys], campaign="grid")
    for key in ["c", "a", "b"]:                        # finished out of order
        curves = pd.DataFrame({"defense": [key, key], "round": [1, 2], "offline_ndcg10": [0.1, 0.2]})
        store.record_run(key, "grid", {"defense": key}, {}, 0, 1.0, {"curves": curves})
    store.record_run("unregistered", "other", {}, {}, 0, 1.0,
                     {"curves": pd.DataFrame({"defense": ["u"], "round": [1], "offline_ndcg10": [0.3]})})
    tables = load(tmp_path / "s.sqlite")
    assert list(tables["runs"]["run_key"]) == ["a", "b", "c", "unregistered"]
    assert list(tables["curves"]["run_key"]) == ["a", "a", "b", "b", "c", "c", "unregistered"]
    assert list(tables["curves"]["round"]) == [1, 2, 1, 2, 1, 2, 1]
