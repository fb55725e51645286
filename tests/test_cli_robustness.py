"""Poisoning and robust aggregation at the command line: the option on train and audit, the lists,
and bad input -- one line naming the option or the stack, exit 2, nothing written."""

import pytest

from fltr_audit.cli import main
from tests.cli_json import cli_result

TRAIN = ["train", "fpdgd", "--data", "synthetic:mq2008?queries=120", "--rounds", "3", "--clients", "20", "--quiet"]


@pytest.mark.parametrize("extra,names", [
    (["--poison", "lie(fraction=0.5)"], "--poison: lie: fraction: must be a number in [0, 0.5)"),
    (["--poison", "lie(fraction=-0.1)"], "--poison: lie: fraction"),
    (["--defense", "krum(f=9)"], "defense 'krum(f=9)': a cohort of 20 clients is below 2f + 3 = 21"),
    (["--defense", "multi-krum(f=2,m=19)"], "defense 'multi-krum(f=2,m=19)': m = 19 exceeds n - f = 18"),
    (["--defense", "trimmed-mean(beta=0.5)"], "defense 'trimmed-mean(beta=0.5)': parameter beta=0.5"),
    (["--defense", "median+secagg"], "median must see each client's update, which secagg hides"),
    (["--defense", "secagg+krum(f=1)"], "krum(f=1) must see the pairwise distances"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, names):
    out = tmp_path / "run"
    assert main(TRAIN + ["--out", str(out)] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("fltr-audit: error: ") and err.count("\n") == 1 and names in err
    assert not out.exists()


@pytest.mark.parametrize("command,poison,pattern", [
    (["train", "foltr-es"], "lie(fraction=0.2)", "--poison: lie: foltr-es's messages carry seed+metric"),
    (["train", "foltr-es"], "data-poison(fraction=0.2)", "--poison: data-poison: foltr-es does not simulate per-user"),
    (["train", "fedips"], "data-poison(fraction=0.2)", "--poison: data-poison: fedips does not simulate per-user"),
])
def test_an_attack_the_messages_cannot_carry_is_refused(tmp_path, capsys, command, poison, pattern):
    out = tmp_path / "run"
    assert main(command + ["--data", "synthetic:mq2008?queries=120", "--rounds", "2", "--clients", "10", "--quiet",
                           "--out", str(out), "--poison", poison]) == 2
    err = capsys.readouterr().err
    assert pattern in err and err.count("\n") == 1 and not out.exists()


def test_train_under_poisoning_says_so(tmp_path, capsys):
    assert main(TRAIN + ["--out", str(tmp_path / "a"), "--poison", "adaptive(fraction=0.2)", "--defense", "median",
                         "--json"]) == 0
    result = cli_result(capsys.readouterr().out)
    assert result["poison"] == "adaptive(fraction=0.2)" and result["defense"] == "median"
    assert main(TRAIN + ["--out", str(tmp_path / "b"), "--json"]) == 0
    assert "poison" not in cli_result(capsys.readouterr().out)


def test_audit_trains_each_defense_clean_and_under_each_poisoning(capsys):
    assert main(["audit", "--data", "synthetic:mq2008?queries=150", "--train-rounds", "2", "--clients", "20",
                 "--defense", "none", "--defense", "median", "--poison", "lie(fraction=0.2)", "--attack", "olsr",
                 "--click-model", "perfect", "--probe-cohort", "20", "--no-epsilon-audit", "--quiet", "--json"]) == 0
    result = cli_result(capsys.readouterr().out)
    rows = {(u["defense"], u.get("poison")) for u in result["utility"]}
    assert rows == {("none", None), ("none", "lie(fraction=0.2)"), ("median", None), ("median", "lie(fraction=0.2)")}
    assert {v["defense"] for v in result["verdicts"]} == {"none", "median"}  # privacy only from the clean runs


def test_lists_show_poisoning_attacks_and_what_aggregators_see(capsys):
    assert main(["attacks", "list", "--json"]) == 0
    rows = {r["name"]: r for r in cli_result(capsys.readouterr().out)}
    assert {n for n, r in rows.items() if r["kind"] == "poisoning"} == {
        "data-poison", "sign-flip", "scale", "noise", "lie", "ipm", "adaptive"}
    assert rows["olsr"]["kind"] == "privacy" and rows["lie"]["carries"] == ["weights", "update"]
    assert main(["defenses", "list", "--json"]) == 0
    sees = {r["name"]: r["sees"] for r in cli_result(capsys.readouterr().out)}
    assert sees["krum"] == "distances" and sees["median"] == "updates" and sees["norm-bound"] == "sum"


def test_audit_run_takes_the_poisoning_and_refuses_what_the_messages_cannot_carry(capsys):
    from fltr_audit.api.whole_run import WHOLE_RUN_DEFAULTS

    assert main(["audit-run", "fpdgd", "--canaries", "10", "--rounds", "2", "--clients", "20", "--data",
                 "synthetic:mq2008?queries=120", "--poison", "sign-flip(fraction=0.2)", "--json"]) == 0
    capsys.readouterr()
    assert main(["audit-run", "foltr-es", "--canaries", "10", "--rounds", "2", "--clients", "20",
                 "--poison", "ipm(fraction=0.2)"]) == 2
    assert "--poison: ipm: foltr-es's messages carry seed+metric" in capsys.readouterr().err
    assert WHOLE_RUN_DEFAULTS["poison"] == "none"
