"""reports.compare against hand computations, and the `fltr-audit compare` command."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fltr_audit.cli import main
from fltr_audit.store import ResultsStore
from reports.compare import compare, format_table, verdicts

from synthetic_results import CLICK_MODELS, DEFENSES, DP, FOLDS, SEEDS, synthetic_runs, synthetic_tables


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


def test_audits_and_utility_are_joined(tables):
    out = compare(tables)
    dp = out[out["defense"] == DP].iloc[0]
    audits = tables["audits"]
    assert dp["claimed_epsilon"] == 4.5
    assert dp["claimed_scope"] == "per round, per client message"
    assert dp["epsilon_lb"] == pytest.approx(audits["epsilon_lb"].max())
    assert np.isnan(out[out["defense"] == "none"].iloc[0]["epsilon_lb"])
    util = tables["utility"]
    for _, row in out.iterrows():
        sel = util[(util["defense"] == row["defense"]) & (util["click_model"] == row["click_model"])]
        assert row["ndcg10_delta"] == pytest.approx(sel["ndcg10_delta"].mean())
        assert row["ndcg10"] == pytest.approx(sel["ndcg10"].mean())
    assert (out.loc[out["defense"] == "none", "ndcg10_delta"] == 0).all()


def test_by_click_model_only_has_no_baseline_test(tables):
    out = compare(tables, by=("click_model",))
    # defense is not a key: everything pooled per click model, no baseline to test against
    assert "defense" not in out.columns and out["p_value"].isna().all()
    assert set(out["n"]) == {len(SEEDS) * len(FOLDS) * len(DEFENSES)}


def test_verdicts_say_which_defenses_hold(tables):
    v = verdicts(tables)
    assert (v["basis"] == "per-query t-test").all()
    # the one-sided Welch p-values on per-query F1 (= tp / 3 here), Bonferroni over all rows
    pq = tables["per_query"]
    expected = []
    for _, row in v.iterrows():
        def f1(attack):
            sel = pq[(pq["defense"] == row["defense"]) & (pq["click_model"] == row["click_model"])
                     & (pq["attack"] == attack)]
            return 2 * sel["tp"].to_numpy() / (2 * sel["tp"] + sel["fp"] + sel["fn"]).to_numpy()
        expected.append(stats.ttest_ind(f1(row["best_attack"]), f1(row["random_attack"]),
                                        equal_var=False, alternative="greater").pvalue)
        assert row["n"] == 20 * len(SEEDS) * len(FOLDS)
    np.testing.assert_allclose(v["p_value"], expected, rtol=1e-12)
    np.testing.assert_allclose(v["p_adjusted"], multipletests(expected, method="bonferroni")[1], rtol=1e-12)
    v = v.set_index(["defense", "click_model"])
    for click in CLICK_MODELS:
        assert v.loc[("none", click), "holds"] is False  # OLSR 0.80 vs random 0.30
        assert v.loc[(DP, click), "holds"] is False  # 0.45 vs 0.30 over 120 queries each
        assert v.loc[("secagg", click), "holds"] is True  # 0.31 vs 0.30: within the margin
        assert v.loc[("secagg", click), "best_attack"] == "olsr"
        assert v.loc[("secagg", click), "random_attack"] == "random-3"


def test_verdicts_fall_back_to_runs_then_to_the_margin():
    t = synthetic_tables()
    del t["per_query"]
    v = verdicts(t)
    assert (v["basis"] == "run-level t-test").all() and (v["n"] == len(SEEDS) * len(FOLDS)).all()
    assert v.set_index("defense").loc[DP, "holds"].tolist() == [False, False]
    t["attacks"] = t["attacks"][(t["attacks"]["seed"] == 1) & (t["attacks"]["fold"] == 1)]
    v = verdicts(t)
    assert set(v["basis"]) == {"no test (single run)"} and v["p_value"].isna().all()
    for _, row in v.iterrows():
        assert row["holds"] == (row["best_f1"] - row["random_f1"] < 0.05)


def test_inconclusive_when_the_effect_is_large_but_not_significant():
    t = synthetic_tables()
    del t["per_query"]
    # two runs per side, with wide spread: an effect above the margin that a t-test cannot confirm
    a = t["attacks"]
    a = a[(a["seed"].isin([1, 2])) & (a["fold"] == 1) & (a["defense"] == "secagg")].copy()
    olsr = a["attack"] == "olsr"
    a.loc[olsr, "f1"] = np.where(a.loc[olsr, "seed"] == 1, 0.9, 0.1)
    t["attacks"] = a
    v = verdicts(t)
    assert (v["effect"] >= 0.05).all() and (v["p_adjusted"] >= 0.05).all()
    assert v["holds"].isna().all() and (v["basis"] == "run-level t-test").all()


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
    records = json.loads(capsys.readouterr().out)
    assert {r["defense"] for r in records} == set(DEFENSES)
    assert main(["compare", "--store", str(store_path), "--json", "--by", "defense,click_model"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(DEFENSES) * len(CLICK_MODELS) * 2
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


def test_every_informed_attack_counts_in_the_family():
    """A second informed attack doubles the Bonferroni family; a weaker attack above the
    margin can decide the verdict when its test is the more significant one."""
    t = synthetic_tables()
    extra_attacks = t["attacks"][t["attacks"]["attack"] == "olsr"].assign(attack="score")
    extra_attacks["f1"] = extra_attacks["f1"] - 0.01
    extra_pq = t["per_query"][t["per_query"]["attack"] == "olsr"].assign(attack="score")
    t["attacks"] = pd.concat([t["attacks"], extra_attacks], ignore_index=True)
    t["per_query"] = pd.concat([t["per_query"], extra_pq], ignore_index=True)
    v = verdicts(t)
    assert (v["best_attack"] == "olsr").all()
    # olsr and score have identical per-query samples: same raw p, family of 12 tests
    one = verdicts(synthetic_tables())
    np.testing.assert_allclose(v["p_value"], one["p_value"], rtol=1e-12)
    np.testing.assert_allclose(v["p_adjusted"], np.minimum(1, one["p_value"] * 12), rtol=1e-12)
    assert v["holds"].tolist() == one["holds"].tolist()
