"""`fltr-audit audit` end to end on a small synthetic set: the table, the threat models, the claims."""


from fltr_audit.cli import main
from tests.cli_json import cli_result


def test_audit_json_records(capsys):
    code = main(["audit", "--data", "synthetic:mq2008?queries=150", "--rounds", "3", "--clients", "40",
                 "--queries-per-client", "2", "--attack", "olsr,random3", "--click-model", "perfect",
                 "--defense", "none", "--defense", "dp-local-laplace(eps=1)", "--defense", "secagg",
                 "--probe-cohort", "20", "--min-shown", "5", "--trials", "400", "--probe-lists", "12", "--json",
                 "--quiet"])  # few lists pinned: fast and inconclusive, where the planned default decides (test_plan.py)
    assert code == 0
    text = capsys.readouterr().out
    out = cli_result(text)
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
    # both verdicts, one row per defense and click model; "holds" is gone from every output
    verdicts = {v["defense"]: v for v in out["verdicts"]}
    assert set(verdicts) == {"none", "dp-local-laplace(eps=1)", "secagg"}
    # known truth: without a defense OLSR reads the clicks (leakage ~0.16, CI far above 0) -> leaks;
    # dp-local-laplace's claim is true -> consistent, and its audited bound stays below eps = 1;
    # with 20 lists its upper bound (~0.08) lies above the minimum effect 0.05 -> inconclusive, never
    # "no measurable leakage"; no claim without a finite epsilon
    assert verdicts["none"]["leakage_verdict"] == "leaks" and verdicts["none"]["strongest_attack"] == "olsr"
    assert verdicts["none"]["leakage_ci_low"] > 0
    assert verdicts["none"]["claim_verdict"] == "no claim" and verdicts["secagg"]["claim_verdict"] == "no claim"
    assert verdicts["dp-local-laplace(eps=1)"]["claim_verdict"] == "consistent"
    assert verdicts["dp-local-laplace(eps=1)"]["leakage_verdict"] == "inconclusive"
    assert audits["dp-local-laplace(eps=1)"]["epsilon_lb"] <= 1.0
    assert audits["dp-local-laplace(eps=1)"]["claim_verdict"] == "consistent"
    assert "holds" not in text.lower()


def test_audit_console_tables_fit_100_columns(capsys):
    code = main(["audit", "--data", "synthetic:mq2008?queries=80", "--rounds", "2", "--clients", "20",
                 "--queries-per-client", "2", "--attack", "olsr,random3", "--click-model", "perfect",
                 "--defense", "none", "--defense", "clip(sensitivity=5)+dp-distributed(eps=4.5)", "--probe-cohort", "10",
                 "--min-shown", "5", "--trials", "200", "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "leakage verdict" in text and "claim verdict" in text and "holds" not in text.lower()
    assert max(len(line) for line in text.splitlines()) <= 100


def test_audit_min_effect_outside_0_1_is_one_line(capsys):
    assert main(["audit", "--min-effect", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-effect" in err[0]


def test_audit_bad_defense_is_one_line(capsys):
    assert main(["audit", "--defense", "tinfoil", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tinfoil" in err[0]


def test_audit_counterfactual_must_be_positive(capsys):
    assert main(["audit", "--counterfactual", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--counterfactual" in err[0]
