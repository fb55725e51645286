"""reports.compare against hand computations, and the `fltr-audit compare` command."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fltr_audit.cli import main
from fltr_audit.store.results import ResultsStore
from reports.compare import compare, format_table, verdicts

from synthetic_results import CLICK_MODELS, DEFENSES, DP, FOLDS, LISTS, SEEDS, synthetic_runs, synthetic_tables
from tests.cli_json import cli_result


@pytest.fixture(scope="module")
def tables():
    return synthetic_tables()


def _welch_by_hand(a, b):
    """Welch's t and Welch-Satterthwaite degrees of freedom, two-sided p."""
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return 2 * stats.t.sf(abs(t), df)


def test_confidence_intervals_match_a_hand_computation(tables):
    out = compare(tables)
    assert len(out) == len(DEFENSES) * len(CLICK_MODELS) * 2  # two attacks
    attacks = tables["attacks"][tables["attacks"]["averaging"] == "macro"]
    for _, row in out.iterrows():
        sel = attacks[(attacks["defense"] == row["defense"]) & (attacks["click_model"] == row["click_model"])
                      & (attacks["attack"] == row["attack"])]
        assert row["n"] == len(SEEDS) * len(FOLDS) == len(sel)
        for m in ("precision", "recall", "f1"):
            x = sel[m].to_numpy()
            half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
            assert row[m] == pytest.approx(x.mean(), rel=1e-12)
            assert row[f"{m}_ci_low"] == pytest.approx(x.mean() - half, rel=1e-12)
            assert row[f"{m}_ci_high"] == pytest.approx(x.mean() + half, rel=1e-12)


def test_bonferroni_p_values_match_multipletests(tables):
    out = compare(tables)
    attacks = tables["attacks"][tables["attacks"]["averaging"] == "macro"]
    expected_p, index = [], []
    for i, row in out.iterrows():
        if row["defense"] == "none":
            assert np.isnan(row["p_value"]) and np.isnan(row["p_adjusted"])
            continue
        def f1(defense):
            return attacks[(attacks["defense"] == defense) & (attacks["click_model"] == row["click_model"])
                           & (attacks["attack"] == row["attack"])]["f1"].to_numpy()
        p = stats.ttest_ind(f1(row["defense"]), f1("none"), equal_var=False).pvalue
        assert p == pytest.approx(_welch_by_hand(f1(row["defense"]), f1("none")), rel=1e-9)
        expected_p.append(p)
        index.append(i)
    adjusted = multipletests(expected_p, method="bonferroni")[1]
    np.testing.assert_allclose(out.loc[index, "p_value"], expected_p, rtol=1e-12)
    np.testing.assert_allclose(out.loc[index, "p_adjusted"], adjusted, rtol=1e-12)
    np.testing.assert_allclose(adjusted, np.minimum(1, np.array(expected_p) * len(expected_p)), rtol=1e-12)
    # OLSR loses ~0.35-0.5 F1 under DP / secagg with noise sd 0.03: clearly significant
    olsr = out[(out["attack"] == "olsr") & (out["defense"] != "none")]
    assert olsr["significant"].all()


def test_audits_are_pooled_and_utility_joined(tables):
    out = compare(tables)
    dp = out[out["defense"] == DP].iloc[0]
    audits = tables["audits"][tables["audits"]["defense"] == DP]
    assert dp["claimed_epsilon"] == 4.5
    assert dp["claimed_scope"] == "per round, per client message"
    # the bound from the summed error counts (one-sided Clopper-Pearson at 0.975 each), by hand
    fp, fn, n0, n1 = (int(audits[c].sum()) for c in ("fp", "fn", "n0", "n1"))
    u0, u1 = stats.beta.ppf(0.975, fp + 1, n0 - fp), stats.beta.ppf(0.975, fn + 1, n1 - fn)
    pooled = max(math.log((1 - u0) / u1), math.log((1 - u1) / u0), 0.0)
    assert dp["epsilon_lb"] == pytest.approx(pooled, rel=1e-9)
    assert dp["epsilon_lb"] != pytest.approx(audits["epsilon_lb"].max())  # never the maximum
    assert dp["claim_verdict"] == "consistent" and dp["tightness"] == pytest.approx(pooled / 4.5)
    assert dp["n_trials"] == audits["n_trials"].sum()
    none = out[out["defense"] == "none"].iloc[0]
    assert none["claim_verdict"] == "no claim" and bool(none["trial_limited"])
    util = tables["utility"][tables["utility"]["poison"].isna()]  # rankers trained under poisoning stay out
    for _, row in out.iterrows():
        sel = util[(util["defense"] == row["defense"]) & (util["click_model"] == row["click_model"])]
        assert row["ndcg10_delta"] == pytest.approx(sel["ndcg10_delta"].mean())
        assert row["ndcg10"] == pytest.approx(sel["ndcg10"].mean())
    assert (out.loc[out["defense"] == "none", "ndcg10_delta"] == 0).all()


def test_by_click_model_only_has_no_baseline_test(tables):
    out = compare(tables, by=("click_model",))
    # defense is not a key: everything pooled per click model, no baseline to test against
    assert "defense" not in out.columns and out["p_value"].isna().all()
    # threat models stay apart: none and DP under "server", secagg under the aggregate-only one
    n = out.set_index(["click_model", "threat_model", "attack"])["n"]
    assert set(n.xs("server", level="threat_model")) == {len(SEEDS) * len(FOLDS) * 2}
    assert set(n.xs("server (aggregate only)", level="threat_model")) == {len(SEEDS) * len(FOLDS)}
    assert "leakage_verdict" not in out.columns  # a verdict is a defense's


def test_leakage_is_the_paired_per_list_difference(tables):
    out = compare(tables)
    pq = tables["per_query"]
    for _, row in out.iterrows():
        sel = pq[(pq["defense"] == row["defense"]) & (pq["click_model"] == row["click_model"])
                 & (pq["attack"] == row["attack"])].dropna(subset=["auc", "auc_counterfactual"])
        d = sel["auc"].to_numpy() - sel["auc_counterfactual"].to_numpy()
        low, high = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
        assert row["basis"] == "per list" and row["n_lists"] == d.size == (LISTS - 1) * len(SEEDS) * len(FOLDS)
        assert row["leakage"] == pytest.approx(d.mean(), abs=1e-12)
        assert (row["leakage_ci_low"], row["leakage_ci_high"]) == pytest.approx((low, high), abs=1e-12)
        assert row["leakage"] == pytest.approx(row["auc"] - row["auc_counterfactual"], abs=1e-12)
        assert row["leakage_normalized"] == pytest.approx(d.mean() / (1 - sel["auc_counterfactual"].mean()))
        paired = stats.ttest_rel(sel["auc"], sel["auc_counterfactual"], alternative="greater").pvalue
        assert row["p_leakage"] == pytest.approx(paired, rel=1e-9)
        a = sel["advantage"].to_numpy() - sel["advantage_counterfactual"].to_numpy()
        assert row["advantage_leakage"] == pytest.approx(a.mean(), abs=1e-12)
        assert bool(row["reference"]) == (row["attack"] == "random-3")


def test_verdicts_have_the_known_answers(tables):
    v = verdicts(tables).set_index(["defense", "click_model"])
    pq = tables["per_query"]
    for click in CLICK_MODELS:
        assert v.loc[("none", click), "leakage_verdict"] == "leaks"  # true leakage 0.30
        assert v.loc[(DP, click), "leakage_verdict"] == "leaks"  # true leakage 0.10
        assert v.loc[("secagg", click), "leakage_verdict"] == "no measurable leakage"  # true 0, sd 0.04
        assert v.loc[("none", click), "strongest_attack"] == "olsr"
        # the family is the informed attacks only (olsr): Holm over one test is the raw p
        sel = pq[(pq["defense"] == DP) & (pq["click_model"] == click) & (pq["attack"] == "olsr")].dropna()
        p = stats.ttest_rel(sel["auc"], sel["auc_counterfactual"], alternative="greater").pvalue
        assert v.loc[(DP, click), "p_adjusted"] == pytest.approx(p, rel=1e-9)
        secagg = v.loc[("secagg", click)]
        assert secagg["missable"] == pytest.approx(secagg["leakage_ci_high"])  # one informed attack
        assert f"leaks above {secagg['missable']:.3f} AUC are ruled out" in secagg["leakage_text"]
    assert set(v["claim_verdict"]) == {"no claim", "consistent"}
    assert "(limit of 120,000 trials)" in v.loc[("none", "perfect"), "claim_text"]
    assert not any("holds" in str(x) for x in v.to_numpy().ravel())


def test_verdicts_fall_back_to_run_leakage_with_a_t_interval():
    t = synthetic_tables()
    del t["per_query"]
    out = compare(t)
    macro = t["attacks"][t["attacks"]["averaging"] == "macro"]
    for _, row in out.iterrows():
        x = macro[(macro["defense"] == row["defense"]) & (macro["click_model"] == row["click_model"])
                  & (macro["attack"] == row["attack"])]["leakage"].to_numpy()
        low, high = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=stats.sem(x))
        assert row["basis"] == "per run" and row["n_lists"] == len(SEEDS) * len(FOLDS)
        assert (row["leakage"], row["leakage_ci_low"], row["leakage_ci_high"]) == pytest.approx((x.mean(), low, high))
    v = verdicts(t).set_index("defense")
    assert (v.loc["none", "leakage_verdict"] == "leaks").all()
    # a single run: no interval, no test -> inconclusive, never "no measurable leakage"
    t["attacks"] = t["attacks"][(t["attacks"]["seed"] == 1) & (t["attacks"]["fold"] == 1)]
    v = verdicts(t)
    assert (v["leakage_verdict"] == "inconclusive").all() and (v["basis"] == "single run (no interval)").all()


def test_without_counterfactual_scores_the_verdict_is_inconclusive():
    t = synthetic_tables()
    del t["per_query"]
    t["attacks"] = t["attacks"].drop(columns=["auc_counterfactual", "leakage", "leakage_normalized", "reference"])
    v = verdicts(t)
    assert (v["leakage_verdict"] == "inconclusive").all()
    assert all("no counterfactual scores" in s for s in v["leakage_text"])


def test_adding_a_reference_attack_cannot_flip_a_verdict(tables):
    """random4 reads no message: however lucky it is, it neither joins the Holm family nor the
    upper-bound rule."""
    t = dict(tables)
    extra = t["attacks"][t["attacks"]["attack"] == "random-3"].assign(attack="random4")
    extra["leakage"] = 0.5  # a wildly lucky baseline
    pq = t["per_query"][t["per_query"]["attack"] == "random-3"].assign(attack="random4")
    pq["auc"] = pq["auc_counterfactual"] + 0.3 + np.linspace(0, 0.01, len(pq))
    t["attacks"] = pd.concat([t["attacks"], extra], ignore_index=True)
    t["per_query"] = pd.concat([t["per_query"], pq], ignore_index=True)
    before, after = verdicts(tables), verdicts(t)
    assert after["leakage_verdict"].tolist() == before["leakage_verdict"].tolist()
    np.testing.assert_allclose(after["p_adjusted"], before["p_adjusted"], rtol=1e-12)
    assert (after["strongest_attack"] == "olsr").all()


def test_every_informed_attack_counts_in_the_holm_family(tables):
    t = dict(tables)
    extra_attacks = t["attacks"][t["attacks"]["attack"] == "olsr"].assign(attack="score")
    extra_pq = t["per_query"][t["per_query"]["attack"] == "olsr"].assign(attack="score")
    extra_pq["auc"] = extra_pq["auc_counterfactual"] + 0.5 * (extra_pq["auc"] - extra_pq["auc_counterfactual"])
    t["attacks"] = pd.concat([t["attacks"], extra_attacks], ignore_index=True)
    t["per_query"] = pd.concat([t["per_query"], extra_pq], ignore_index=True)
    v = verdicts(t)
    table = compare(t)
    for _, row in v.iterrows():
        sel = table[(table["defense"] == row["defense"]) & (table["click_model"] == row["click_model"])
                    & ~table["reference"].astype(bool)]
        expected = multipletests(sel["p_leakage"], method="holm")[1].min()
        assert row["p_adjusted"] == pytest.approx(expected, rel=1e-12)
        if row["defense"] != "secagg":  # score leaks half of what olsr leaks
            assert row["strongest_attack"] == "olsr" and row["leakage_verdict"] == "leaks"


def test_formats(tables):
    out = compare(tables)
    records = json.loads(format_table(out, "json"))
    assert len(records) == len(out) and records[0]["f1"] == pytest.approx(out["f1"].iloc[0])
    assert records[0]["p_value"] is None  # defense none comes first: NaN -> null
    csv = pd.read_csv(__import__("io").StringIO(format_table(out, "csv")))
    assert list(csv.columns) == list(out.columns)
    md = format_table(out, "markdown").splitlines()
    assert md[0].startswith("| defense |") and len(md) == len(out) + 2
    table = format_table(out, "table")
    assert "secagg" in table and "[" in table
    assert "≥ 9.70 (limit of 120,000 trials)" in table  # defense none: no errors in 12 pooled runs
    assert "p_value" not in table and "p_value" in format_table(out, "csv")
    with pytest.raises(ValueError):
        format_table(out, "xml")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cmp") / "r.sqlite"
    store = ResultsStore(path)
    for r in synthetic_runs():
        store.record_run(r["run_key"], "synthetic", r["config"], {}, r["seed"], 1.0, r["tables"])
    return path


def test_cli_compare_json_parses(store_path, capsys):
    assert main(["compare", "--store", str(store_path), "--format", "json"]) == 0
    records = cli_result(capsys.readouterr().out)
    assert {r["defense"] for r in records} == set(DEFENSES)
    assert main(["compare", "--store", str(store_path), "--json", "--by", "defense,click_model"]) == 0
    assert len(cli_result(capsys.readouterr().out)) == len(DEFENSES) * len(CLICK_MODELS) * 2
    assert main(["compare", "--store", str(store_path), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| defense |")


def test_cli_bad_input_is_one_line_exit_2(tmp_path, store_path, capsys):
    for argv in (["compare", "--store", str(tmp_path / "nope.sqlite")],
                 ["compare", "--store", str(store_path), "--format", "xml"],
                 ["compare", "--store", str(store_path), "--by", "colour"],
                 ["report", "--store", str(tmp_path / "nope.sqlite"), "--out", str(tmp_path / "o")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    empty = tmp_path / "empty.sqlite"
    ResultsStore(empty)
    assert main(["compare", "--store", str(empty)]) == 2
    assert "no attack results" in capsys.readouterr().err


REQUIRED_JSON = ("auc", "auc_counterfactual", "leakage", "leakage_ci_low", "leakage_ci_high", "advantage",
                 "tpr_at_fpr_0_01", "leakage_verdict", "claim_verdict")


def test_cli_compare_json_carries_both_verdicts(store_path, capsys):
    assert main(["compare", "--store", str(store_path), "--json"]) == 0
    text = capsys.readouterr().out
    records = cli_result(text)
    assert isinstance(records, list) and all(set(REQUIRED_JSON) <= set(r) for r in records)
    by = {(r["defense"], r["click_model"], r["attack"]): r for r in records}
    assert by[("none", "perfect", "olsr")]["leakage_verdict"] == "leaks"
    assert by[("secagg", "perfect", "olsr")]["leakage_verdict"] == "no measurable leakage"
    assert by[(DP, "perfect", "olsr")]["claim_verdict"] == "consistent"
    assert "holds" not in text.lower()
    # a larger minimum effect cannot make a leak disappear, only widen "no measurable leakage"
    assert main(["compare", "--store", str(store_path), "--json", "--min-effect", "0.5"]) == 0
    wide = {(r["defense"], r["click_model"], r["attack"]): r for r in cli_result(capsys.readouterr().out)}
    assert wide[("none", "perfect", "olsr")]["leakage_verdict"] == "leaks"


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("value", ["0", "1", "-0.1", "1.5"])
def test_min_effect_outside_0_1_is_one_line_exit_2(store_path, tmp_path, capsys, command, value):
    argv = [command, "--store", str(store_path), "--min-effect", value]
    if command == "report":
        argv += ["--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-effect" in err[0]


def test_holm_matches_statsmodels():
    from reports.stats import holm
    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 17):
        p = rng.random(m) ** 3
        p[rng.random(m) < 0.2] = p[0]  # ties
        reject, expected, _, _ = multipletests(p, alpha=0.05, method="holm")
        np.testing.assert_allclose(holm(p), expected, rtol=1e-12)
        assert ((holm(p) < 0.05) == reject).all()


def test_cli_compare_reference_rows_read_reference_and_the_default_is_a_narrow_table(store_path, capsys):
    assert main(["compare", "--store", str(store_path), "--json"]) == 0
    records = cli_result(capsys.readouterr().out)
    references = [r for r in records if r["reference"]]
    assert references and all(r["leakage_verdict"] == r["claim_verdict"] == "reference" for r in references)
    assert {r["leakage_verdict"] for r in records if not r["reference"]} & {"leaks", "no measurable leakage"}
    assert main(["compare", "--store", str(store_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100 and any("reference" in line for line in lines)


def test_cli_compare_json_writes_infinity_as_every_command_does(store_path, capsys):
    assert main(["compare", "--store", str(store_path), "--json"]) == 0
    records = cli_result(capsys.readouterr().out)
    claimed = {r["defense"]: r["claimed_epsilon"] for r in records}
    assert claimed["none"] == claimed["secagg"] == "inf" and claimed[DP] == 4.5   # no DP claim: inf, not null
