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
    rows = cli_result(capsys.readouterr().out)["rounds"]
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
    assert cli_result(capsys.readouterr().out) == direct and len(direct["rounds"]) == 2
    assert main(["attack", str(out), "--attack", "olsr", "--quiet"]) == 0
    assert "olsr" in capsys.readouterr().out


def test_attack_scores_the_lists_audit_scores_by_default(tmp_path, capsys):
    """By default `attack` keeps what `audit` keeps: full lists (k shown documents) with a click."""
    out = _recorded_run(tmp_path, capsys, 2, "2")
    assert main(["attack", str(out), "--attack", "olsr", "--json", "--quiet"]) == 0
    default = cli_result(capsys.readouterr().out)["rounds"]
    assert main(["attack", str(out), "--attack", "olsr", "--min-shown", "10", "--require-click", "--json",
                 "--quiet"]) == 0
    assert cli_result(capsys.readouterr().out)["rounds"] == default
    assert main(["attack", str(out), "--attack", "olsr", "--min-shown", "0", "--all-lists", "--json", "--quiet"]) == 0
    every = cli_result(capsys.readouterr().out)["rounds"]
    assert every[0]["n_queries"] > default[0]["n_queries"]


def test_attack_reads_leakage_against_the_runs_click_model_and_gives_the_verdict(tmp_path, capsys):
    """Framed like `audit`: per attack the counterfactual AUC (the run's click model, from its
    config.json), the leakage and the verdict; the reference attack never decides."""
    out = _recorded_run(tmp_path, capsys, 2, "1,2")
    assert main(["attack", str(out), "--attack", "olsr,random3", "--json", "--quiet"]) == 0
    result = cli_result(capsys.readouterr().out)
    assert result["click_model"] == "perfect" and result["unscored"] is None and result["no_baseline"] is None
    rows = {r["attack"]: r for r in result["attacks"]}
    assert rows["olsr"]["leakage_verdict"] == "leaks" and rows["olsr"]["leakage_ci_low"] > 0
    assert rows["random3"]["reference"] and abs(rows["random3"]["leakage"]) < 0.1
    assert [v["headline_attack"] for v in result["verdicts"]] == ["olsr"]
    assert main(["attack", str(out), "--attack", "olsr", "--by-client", "--json", "--quiet"]) == 0
    by_client = cli_result(capsys.readouterr().out)["attacks"]
    assert len({r["client"] for r in by_client}) > 1 and sum(r["n_lists"] for r in by_client) == rows["olsr"]["n_lists"]


def test_a_server_blind_recording_says_in_one_line_what_cannot_be_scored(tmp_path, capsys):
    out = tmp_path / "blind"
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=200", "--clients", "20", "--rounds", "1",
                 "--record-rounds", "1", "--threat-model", "server-blind", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["attack", str(out), "--attack", "olsr", "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1 of 1 recorded rounds cannot be scored: server-blind, no shown lists (docs/flower-app.md)"
    assert not any("nan" in line for line in printed)


def test_without_a_click_model_the_leakage_is_named_as_missing(tmp_path, capsys):
    out = _recorded_run(tmp_path, capsys, 1, "1")
    (out / "config.json").unlink()
    assert main(["attack", str(out), "--attack", "olsr", "--json", "--quiet"]) == 0
    result = cli_result(capsys.readouterr().out)
    assert result["click_model"] is None and "give --click-model" in result["no_baseline"]
    assert result["verdicts"] == [] and result["attacks"][0]["auc"] > 0.9
