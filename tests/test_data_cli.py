"""The data CLI as a user runs it: results, JSON, and bad input (exit 2, one line)."""

import re

import numpy as np
import pytest

from fltr_audit.cli import main
from fltr_audit.engine.data.load import load_splits
from tests.cli_json import cli_result


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_synth_writes_folds_that_load_as_the_in_memory_data(tmp_path, capsys):
    out_dir = tmp_path / "syn"
    code, out, err = run(capsys, "data", "synth", "--profile", "mq2008", "--queries", "40", "--seed", "1",
                         "--out", str(out_dir), "--quiet", "--json")
    assert code == 0, err
    assert cli_result(out)["queries"] == 40
    for k in (1, 5):
        disk = load_splits(str(out_dir), fold=k)
        mem = load_splits("synthetic:mq2008", fold=k, queries=40, seed=1)
        for split in ("train", "vali", "test"):
            np.testing.assert_array_equal(disk.get(split).features, mem.get(split).features)
            np.testing.assert_array_equal(disk.get(split).labels, mem.get(split).labels)
            np.testing.assert_array_equal(disk.get(split).qids, mem.get(split).qids)
    code, out, err = run(capsys, "data", "info", str(out_dir), "--json")
    info = cli_result(out)
    assert code == 0 and info["queries"] == 40 and info["queries_once_per_fold"]
    code, out, err = run(capsys, "data", "info", str(out_dir))
    assert code == 0 and "40 queries" in out and "46 features" in out


def test_info_of_synthetic_spec(capsys):
    code, out, _ = run(capsys, "data", "info", "synthetic:mslr10k?queries=20", "--json")
    info = cli_result(out)
    assert code == 0 and info["queries"] == 20 and info["features"] == 136 and info["levels"] == 5


def _one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    return lines[0]


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    code, out, err = run(capsys, "data", "info", "no/such/path")
    assert code == 2 and out == "" and "no/such/path" in _one_error_line(err)

    rows = [f"0 qid:{1 + i // 8} " + " ".join(f"{j}:0.5" for j in range(1, 47 if i != 56 else 46))
            for i in range(80)]
    (tmp_path / "ragged.txt").write_text("\n".join(rows) + "\n")
    code, out, err = run(capsys, "data", "info", str(tmp_path / "ragged.txt"))
    line = _one_error_line(err)
    assert code == 2 and "ragged.txt" in line and re.search(r"line 57\b", line) and "45 features" in line

    code, _, err = run(capsys, "data", "synth", "--profile", "mq2009", "--out", str(tmp_path / "x"))
    assert code == 2 and "--profile" in _one_error_line(err)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    code, _, err = run(capsys, "data", "synth", "--out", str(tmp_path / "full"), "--quiet")
    assert code == 2 and "--out" in _one_error_line(err)
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    code, _, err = run(capsys, "bench", "data", "--queries", "0", "--json")
    assert code == 2 and "--queries" in _one_error_line(err)


def test_bench_data_json(capsys):
    code, out, err = run(capsys, "bench", "data", "--queries", "10", "--repeats", "1", "--json", "--quiet")
    assert code == 0, err
    result = cli_result(out)
    assert result["identical"] and result["features"] == 136
    assert [r["task"] for r in result["results"]] == ["text_load", "first_cached_load", "cached_load"]
