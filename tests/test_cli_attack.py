"""`fltr-audit attack`: attacks read a recording back exactly as the channel delivered it."""


from fltr_audit.cli import main
from tests.cli_json import cli_result


def _recorded_run(tmp_path, capsys, rounds: int, record: str):
    """A small FPDGD training run recording the rounds ``record``; its folder."""
    out = tmp_path / "run"
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=200", "--clients", "20",
                 "--queries-per-client", "4", "--rounds", str(rounds), "--record-rounds", record, "--out", str(out),
                 "--quiet"]) == 0
    capsys.readouterr()
    return out


def test_attack_recorded_rounds(tmp_path, capsys):
    out = _recorded_run(tmp_path, capsys, 3, "1,3")
    assert main(["attack", str(out / "recording"), "--attack", "olsr,random3", "--require-click", "--json", "--quiet"]) == 0
    rows = cli_result(capsys.readouterr().out)
    assert sorted({r["round"] for r in rows}) == [1, 3]
    olsr = [r for r in rows if r["attack"] == "olsr"]
    # 4 queries x 10 shown = 40 documents < 46 features: the noiseless update determines every click
    assert all(r["precision"] == 1.0 and r["recall"] == 1.0 for r in olsr if r["n_queries"] > 0)


def test_attack_missing_recording_is_one_line(tmp_path, capsys):
    assert main(["attack", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a recording directory" in err[0]


def test_attack_accepts_the_run_folder(tmp_path, capsys):
    out = _recorded_run(tmp_path, capsys, 2, "2")
    args = ["--attack", "olsr,random3", "--json", "--quiet"]
    assert main(["attack", str(out / "recording"), *args]) == 0
    direct = cli_result(capsys.readouterr().out)
    assert main(["attack", str(out), *args]) == 0
    assert cli_result(capsys.readouterr().out) == direct and len(direct) == 2
    assert main(["attack", str(out), "--attack", "olsr", "--quiet"]) == 0
    assert "olsr" in capsys.readouterr().out


def test_attack_scores_the_lists_audit_scores_by_default(tmp_path, capsys):
    """By default `attack` keeps what `audit` keeps: full lists (k shown documents) with a click."""
    out = _recorded_run(tmp_path, capsys, 2, "2")
    assert main(["attack", str(out), "--attack", "olsr", "--json", "--quiet"]) == 0
    default = cli_result(capsys.readouterr().out)
    assert main(["attack", str(out), "--attack", "olsr", "--min-shown", "10", "--require-click", "--json",
                 "--quiet"]) == 0
    assert cli_result(capsys.readouterr().out) == default
    assert main(["attack", str(out), "--attack", "olsr", "--min-shown", "0", "--all-lists", "--json", "--quiet"]) == 0
    every = cli_result(capsys.readouterr().out)
    assert every[0]["n_queries"] > default[0]["n_queries"]
