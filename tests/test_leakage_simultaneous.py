"""Simultaneous leakage bounds, the deciding headline and the planned sample size
(``reports.leakage``)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reports.leakage import leakage_table, leakage_verdicts, planned_lists, simultaneous_bounds


def _tables(rng, shifts, n):
    """Per-list rows of one run, one click model, attacks with the given true leakage."""
    rows, attack_rows = [], []
    for a, shift in enumerate(shifts):
        cf = rng.uniform(0.3, 0.7, n)
        rows.append(pd.DataFrame({"run_key": "r", "click_model": "perfect", "defense": "d", "attack": f"a{a}",
                                  "auc": cf + shift + rng.normal(0, 0.2, n), "auc_counterfactual": cf}))
        attack_rows.append({"run_key": "r", "click_model": "perfect", "defense": "d", "attack": f"a{a}",
                            "reference": False, "leakage": shift})
    return {"attacks": pd.DataFrame(attack_rows), "per_query": pd.concat(rows, ignore_index=True)}


def test_leaks_iff_the_deciding_interval_excludes_zero():
    """Over 300 random families (2-6 attacks, leaks from 0 to 0.06, 40-400 lists): ``leaks`` exactly
    when the headline's simultaneous lower bound is above 0, and the headline is the attack with
    the smallest p. Picking the headline by the smallest Holm-adjusted p (ties) or by the largest
    point estimate, or an unadjusted interval, fails this (a demo card read 'leaks' beside
    [-0.002, +0.026] that way)."""
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(300):
        m = int(rng.integers(2, 7))
        shifts = rng.choice([0.0, 0.0, 0.02, 0.04, 0.06], size=m)
        table = leakage_table(_tables(rng, shifts, int(rng.integers(40, 400))), ["defense", "click_model"])
        v = leakage_verdicts(table, ["defense", "click_model"], min_effect=0.05).iloc[0]
        seen.add(v["leakage_verdict"])
        assert (v["leakage_verdict"] == "leaks") == (v["leakage_ci_low"] > 0)
        if v["leakage_verdict"] == "leaks":
            assert v["headline_attack"] == table.loc[table["p_leakage"].idxmin(), "attack"]
        else:
            assert v["leakage_ci_high"] == pytest.approx(v["missable"])
    assert seen == {"leaks", "no measurable leakage", "inconclusive"}


def test_simultaneous_bounds_are_bonferroni_t_bounds():
    """Against scipy: the one-sided (1 - alpha/m) Student-t bound of each attack."""
    low, high = simultaneous_bounds([0.1, 0.2], [0.01, 0.02], [99, 49], m=4)
    assert low[0] == pytest.approx(0.1 - stats.t.ppf(1 - 0.0125, 99) * 0.01)
    assert high[1] == pytest.approx(0.2 + stats.t.ppf(1 - 0.0125, 49) * 0.02)


def test_planned_lists_gives_the_power_it_promises():
    """The closed form n = ((z_{1-a/m} + z_{power^(1/m)}) sd / d)^2 against simulation: with
    per-list sd 0.3 and the planned n, four independent null attacks all show an upper bound below
    d = 0.05 in about `power` of 400 simulated families. P(pass) > 0.999 at the correct rate 0.9
    (tolerance 0.06, 4 sd of a binomial mean over 400); a plan with z_power per attack (joint
    rate about 0.66, as first written here) fails."""
    n = planned_lists(0.05, 0.9, 4, sd=0.3)
    assert n == math.ceil(((stats.norm.ppf(1 - 0.05 / 4) + stats.norm.ppf(0.9 ** 0.25)) * 0.3 / 0.05) ** 2)
    rng = np.random.default_rng(1)
    x = rng.normal(0, 0.3, size=(400, 4, n))
    se = x.std(axis=2, ddof=1) / math.sqrt(n)
    _, high = simultaneous_bounds(x.mean(axis=2), se, n - 1, m=4)
    assert abs((high < 0.05).all(axis=1).mean() - 0.9) < 0.06
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="^power: "):
            planned_lists(0.05, bad, 4)
        with pytest.raises(ValueError, match="^min_effect: "):
            planned_lists(bad, 0.9, 4)


def _verdicts(rng, shifts, n, sd):
    rows, attack_rows = [], []
    for a, shift in enumerate(shifts):
        cf = rng.uniform(0.3, 0.7, n)
        rows.append(pd.DataFrame({"run_key": "r", "click_model": "perfect", "defense": "d", "attack": f"a{a}",
                                  "auc": cf + shift + rng.normal(0, sd, n), "auc_counterfactual": cf}))
        attack_rows.append({"run_key": "r", "click_model": "perfect", "defense": "d", "attack": f"a{a}",
                            "reference": False, "leakage": shift})
    tables = {"attacks": pd.DataFrame(attack_rows), "per_query": pd.concat(rows, ignore_index=True)}
    table = leakage_table(tables, ["defense", "click_model"])
    return leakage_verdicts(table, ["defense", "click_model"], min_effect=0.05).iloc[0]["leakage_verdict"]


@pytest.mark.slow
def test_verdict_controls_at_the_planned_sample_size():
    """Controls of known truth for the verdict rule (``leakage_table`` + ``leakage_verdicts``),
    four informed attacks, per-list sd 0.25 (the demo measured 0.13-0.29), the planned n for
    min effect 0.05 and power 0.9 (631 lists), 200 seeds each:

    * zero leakage: ``leaks`` at most 20 times (the 0.999 quantile of Bin(200, 0.05)); the rule's
      rate is <= 0.05 (Bonferroni), so P(pass) > 0.999; an unadjusted rule (rate about 0.19) passes
      with probability < 1e-9;
    * zero leakage: ``no measurable leakage`` in >= 90 % of seeds; the planned n gives about
      0.99 at sd 0.25, P(pass) > 0.999; half the planned n (about 0.7) fails;
    * one attack leaking 0.05: ``leaks`` in >= 80 %; its power is about 0.99, P(pass) > 0.999.

    Not through the engine: 3 x 200 probe runs do not fit the test budget; the engine's own
    null and leak controls are in ``tests/test_leakage_controls.py``."""
    from reports.leakage import planned_lists

    n = planned_lists(0.05, 0.9, 4)
    rng = np.random.default_rng(11)
    null = [_verdicts(rng, [0.0] * 4, n, 0.25) for _ in range(200)]
    assert null.count("leaks") <= stats.binom.ppf(0.999, 200, 0.05)
    assert null.count("no measurable leakage") >= 0.9 * 200
    leak = [_verdicts(rng, [0.05, 0.0, 0.0, 0.0], n, 0.25) for _ in range(200)]
    assert leak.count("leaks") >= 0.8 * 200
