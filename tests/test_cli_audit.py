"""`fltr-audit audit` end to end on a small synthetic set: the table, the threat models, the claims."""

import json

from fltr_audit.cli import main


def test_audit_json_records(capsys):
    code = main(["audit", "--data", "synthetic:mq2008?queries=150", "--train-rounds", "3", "--clients", "40",
                 "--queries-per-client", "2", "--attack", "olsr,random3", "--click-model", "perfect",
                 "--defense", "none", "--defense", "dp-local-laplace(eps=1)", "--defense", "secagg",
                 "--probe-cohort", "20", "--min-shown", "5", "--trials", "400", "--json", "--quiet"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    rows = {(r["defense"], r["attack"]): r for r in out["attacks"]}
    assert set(rows) == {(d, a) for d in ("none", "dp-local-laplace(eps=1)", "secagg") for a in ("olsr", "random3")}
    assert rows[("secagg", "olsr")]["threat_model"] == "server (aggregate only)"
    assert rows[("none", "olsr")]["threat_model"] == "server"
    # without a defense OLSR is far better than guessing; the random baseline ignores the messages
    assert rows[("none", "olsr")]["f1"] > rows[("none", "random3")]["f1"] + 0.3
    assert rows[("secagg", "random3")]["f1"] == rows[("none", "random3")]["f1"]
    # leakage against the counterfactual baseline: the random baseline is marked a reference
    assert rows[("none", "random3")]["reference"] and not rows[("none", "olsr")]["reference"]
    assert rows[("none", "olsr")]["leakage"] > 0.1 and rows[("none", "olsr")]["n_counterfactual"] == 20
    audits = {a["defense"]: a for a in out["audits"]}
    assert audits["dp-local-laplace(eps=1)"]["claimed_epsilon"] == 1.0
    assert audits["dp-local-laplace(eps=1)"]["claimed_scope"] == "message"
    assert {u["defense"] for u in out["utility"]} == {"none", "dp-local-laplace(eps=1)", "secagg"}


def test_audit_bad_defense_is_one_line(capsys):
    assert main(["audit", "--defense", "tinfoil", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tinfoil" in err[0]


def test_audit_counterfactual_must_be_positive(capsys):
    assert main(["audit", "--counterfactual", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--counterfactual" in err[0]
