"""The robustness section from hand-built utility rows: means and t intervals over runs, the strongest
attack per defense, the share of the plain mean's loss kept away, the clean cost, the verdicts joined,
and the frontier plot; rankers trained under poisoning never enter the privacy comparison."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reports.plots import PLOTS
from reports.robustness import attack_of, clean_utility, frontier_rows, utility_by_attack, utility_grid

NDCG = {("none", None): 0.70, ("none", "lie(fraction=0.2)"): 0.65, ("none", "adaptive(fraction=0.2)"): 0.30,
        ("median", None): 0.68, ("median", "lie(fraction=0.2)"): 0.50, ("median", "adaptive(fraction=0.2)"): 0.60,
        ("none", "adaptive(fraction=0.1)"): 0.10}


def utility(seeds=(0, 1, 2)):
    rows = []
    for seed in seeds:
        for (defense, poison), mean in NDCG.items():
            rows.append({"algo": "fpdgd", "data": "mq2008", "setting": "", "seed": seed, "defense": defense,
                         "poison": poison, "ndcg10": mean + 0.01 * (seed - 1)})
    return pd.DataFrame(rows)


def test_attack_of_reads_name_and_fraction():
    assert attack_of("lie(fraction=0.2)") == ("lie", 0.2)
    assert attack_of("data-poison(fraction=0.3,click=pbm)") == ("data-poison", 0.3)
    assert attack_of(None) == ("none", 0.0) and attack_of("none") == ("none", 0.0)


def test_means_and_t_intervals_over_runs():
    table = utility_by_attack(utility())
    row = table[(table["defense"] == "median") & (table["poison"] == "lie(fraction=0.2)")].iloc[0]
    x = np.array([0.49, 0.50, 0.51])
    half = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    assert row["ndcg10"] == pytest.approx(0.50) and row["ndcg10_ci_low"] == pytest.approx(0.50 - half)
    assert row["n"] == 3 and row["attack"] == "lie" and row["fraction"] == 0.2
    grid = utility_grid(table)
    assert list(grid.columns) == ["poison", "none", "median"] and grid["poison"].iloc[0] == "none"


def test_frontier_rows_by_hand():
    verdicts = pd.DataFrame([{"algo": "fpdgd", "data": "mq2008", "setting": "", "defense": d, "click_model": c,
                              "leakage": lk, "leakage_verdict": lv, "claim_verdict": cv}
                             for d, c, lk, lv, cv in (("none", "perfect", 0.2, "leaks", "no claim"),
                                                      ("none", "navigational", 0.1, "inconclusive", "no claim"),
                                                      ("median", "perfect", 0.01, "no measurable leakage", "violated"),
                                                      ("median", "navigational", 0.03, "leaks", "consistent"))])
    rows = frontier_rows({"utility": utility()}, verdicts).set_index("defense")
    assert rows.loc["none", "fraction"] == 0.2  # 0.2 is present: the reference fraction
    assert rows.loc["none", "strongest_attack"] == "adaptive(fraction=0.2)"  # not the 0.1 row
    assert rows.loc["median", "strongest_attack"] == "lie(fraction=0.2)"  # its own strongest
    assert rows.loc["median", "attacked_ndcg10"] == pytest.approx(0.50)
    # the mean's strongest attack costs it 0.40; the median keeps (0.60 - 0.30) / 0.40 of that away
    assert rows.loc["median", "loss_kept_away"] == pytest.approx(0.75)
    assert rows.loc["median", "clean_cost"] == pytest.approx(0.02)
    assert rows.loc["none", "loss_kept_away"] == pytest.approx(0.0)
    # the worst verdicts over click models, the largest leakage
    assert rows.loc["median", "leakage_verdict"] == "leaks" and rows.loc["median", "claim_verdict"] == "violated"
    assert rows.loc["none", "leakage"] == pytest.approx(0.2)


def test_clean_utility_leaves_poisoned_rankers_out_and_keeps_old_tables():
    u = utility()
    assert clean_utility(u)["poison"].isna().all() and len(clean_utility(u)) == 6
    old = u.drop(columns="poison")
    assert clean_utility(old) is old
    assert frontier_rows({"utility": old}).empty


def test_the_frontier_plot_draws_with_verdicts_and_skips_without():
    from tests.synthetic_results import synthetic_tables

    draw = PLOTS["robustness_frontier"][2]
    assert draw(synthetic_tables(), None).startswith(b"\x89PNG")
    assert draw({"utility": utility()}, None) is None  # no privacy runs: nothing to place on the x axis
