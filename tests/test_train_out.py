"""``train`` without ``--out`` (issue 36's first command line): the figures are printed and nothing
is written; a recording still needs a folder."""

import contextlib
import io
import os

import pytest

from fltr_audit.cli import main
from tests.cli_json import cli_result

SMALL = ["--data", "synthetic:mq2008", "--rounds", "2", "--clients", "20"]


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", [["train", "fpdgd"], ["train", "foltr-es"], ["train", "fedips"]])
def test_train_without_out_prints_one_envelope_and_writes_nothing(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run([*command, *SMALL, "--json"])
    assert code == 0, err
    result = cli_result(out)
    assert result["out"] is None and 0.0 <= result["final_offline_ndcg10"] <= 1.0
    assert os.listdir(tmp_path) == []


def test_a_recording_without_out_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["train", "fpdgd", *SMALL, "--record-rounds", "1"])
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        "fltr-audit: error: --record-rounds: the recording is written into --out's folder; give --out"]
    assert os.listdir(tmp_path) == []
