"""The shared CLI helpers: atomic output folders, run files, tables, timing."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from fltr_audit.base.timing import best_seconds
from fltr_audit.cli.common import format_cell, print_figures, print_table, round_reporter
from fltr_audit.store.run_folder import atomic_out_dir, write_run
from fltr_audit.errors import FltrError


def test_atomic_out_dir_renames_on_success_with_umask_permissions(tmp_path):
    out = tmp_path / "a" / "run"
    with atomic_out_dir(out) as tmp:
        assert tmp.parent == out.parent and not out.exists()
        (tmp / "x.txt").write_text("x")
    assert (out / "x.txt").read_text() == "x"
    assert [p.name for p in out.parent.iterdir()] == ["run"]  # no temporary folder left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask


def test_atomic_out_dir_accepts_an_empty_folder(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    with atomic_out_dir(out) as tmp:
        (tmp / "x.txt").write_text("x")
    assert (out / "x.txt").exists()


def test_atomic_out_dir_leaves_nothing_when_the_block_fails(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        with atomic_out_dir(out) as tmp:
            (tmp / "half.txt").write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make", [lambda p: p.write_text("file"), lambda p: (p.mkdir(), (p / "f").write_text(""))])
def test_atomic_out_dir_refuses_a_file_or_a_folder_with_files(tmp_path, make):
    out = tmp_path / "run"
    make(out)
    with pytest.raises(FltrError, match="^--out: .* exists and is not an empty folder$"):
        with atomic_out_dir(out):
            pass  # pragma: no cover
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_write_run_round_trips(tmp_path):
    curves = pd.DataFrame({"round": [1, 2], "ndcg": [0.25, np.nan]})
    params = np.array([1.5, -2.0])
    write_run(tmp_path, curves, params, {"n": np.int64(3), "gap": float("nan"), "w": np.array([1.0])})
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "curves.csv"), curves)
    np.testing.assert_array_equal(np.load(tmp_path / "model.npy"), params)
    assert json.loads((tmp_path / "config.json").read_text()) == {"n": 3, "gap": None, "w": [1.0]}


def test_best_seconds_calls_fn_repeats_times_and_returns_a_duration():
    calls = []
    seconds = best_seconds(lambda: calls.append(1), 4)
    assert len(calls) == 4 and 0 <= seconds < float("inf")


def test_round_reporter_shows_the_value_only_when_evaluated():
    class Bar:
        descriptions: list = []

        def advance(self, n=1, description=None):
            self.descriptions.append(description)

    bar = Bar()
    report = round_reporter(bar, "fpdgd round", 3, "ndcg", "nDCG@10")
    for r, value in ((1, 0.123456), (2, float("nan"))):
        report(r, {"ndcg": value, "other": 1.0})
    assert bar.descriptions == ["fpdgd round 1/3 nDCG@10 0.1235", "fpdgd round 2/3"]


def test_bench_bandwidth_names_the_first_offending_option(capsys):
    """The command's counts are checked by its Python call (``api.bench_core.bench_bandwidth``)
    before any data loads; the door names the first offending option, one line, exit 2."""
    from fltr_audit.cli import main

    assert main(["bench", "bandwidth", "--clients", "1", "--queries-per-client", "0", "--repeats", "-1"]) == 2
    assert capsys.readouterr().err == "fltr-audit: error: --queries-per-client: must be an integer >= 1, got 0\n"
    assert main(["bench", "bandwidth", "--repeats", "0"]) == 2
    assert capsys.readouterr().err == "fltr-audit: error: --repeats: must be an integer >= 1, got 0\n"


def test_format_cell():
    assert [format_cell(v) for v in (1234.5, np.float32(0.5), 12345, np.int64(7), True, "x")] == [
        "1,234.5000", "0.5000", "12,345", "7", "True", "x"]


def test_print_table_and_figures(capsys):
    print_table("t", [{"name": "a", "value": 1.0}, {"name": "bb", "value": 22}])
    lines = capsys.readouterr().out.splitlines()
    assert any("a" in line and "1.0000" in line for line in lines)
    # numbers are right-aligned: both values end in the same column
    body = [line for line in lines if line.count("│") == 3]
    ends = [line.index(v) + len(v) for line in body for v in ("1.0000", "22") if v in line.split("│")[2]]
    assert len(ends) == 2 and ends[0] == ends[1]
    from fltr_audit.cli.app import RUNNING_COMMAND

    token = RUNNING_COMMAND.set("bench")
    try:
        print_figures("f", {"seconds": 2.0}, json_out=True)
    finally:
        RUNNING_COMMAND.reset(token)
    body = json.loads(capsys.readouterr().out)  # the envelope of the running command
    assert (body["command"], body["result"]) == ("bench", {"seconds": 2.0})
