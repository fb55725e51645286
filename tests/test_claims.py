"""reports.claims: claim verdicts from audits pooled over runs, against hand computations."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reports.claims import claim_summary, claim_text, finish_bounds, pooled_audits


def _bound(fp, fn, n0, n1, level=0.975, delta=0.0):
    u0, u1 = stats.beta.ppf(level, fp + 1, n0 - fp), stats.beta.ppf(level, fn + 1, n1 - fn)
    return max(math.log((1 - delta - u0) / u1), math.log((1 - delta - u1) / u0), 0.0)


def _audit(**kw):
    row = dict(defense="d", mechanism="d", attack="projection", test="projection", neighbours="natural",
               threat_model="server", claimed_epsilon=1.0, claimed_delta=0.0, claimed_scope="message",
               audited_scope="message", confidence=0.95, n_trials=2000, fp=100, fn=100, n0=1000, n1=1000,
               fpr=0.1, fnr=0.1, epsilon_lb=0.0)
    row.update(kw)
    return row


def test_the_plan_rule():
    """The pooled rows' verdicts: no claim (inf, or the store's "unbounded": 1e300 and above), outside scope,
    violated, consistent (a bound below a claim the trials had the power to test)."""
    rows = pd.DataFrame([_audit(claimed_epsilon=math.inf), _audit(claimed_epsilon=1e300),
                         _audit(claimed_epsilon=1.0, claimed_scope="aggregate"),
                         _audit(claimed_epsilon=1.0, fp=10, fn=10), _audit(claimed_epsilon=4.5)])
    got = finish_bounds(rows.assign(runs=1))["claim_verdict"].tolist()
    assert got == ["no claim", "no claim", "outside scope", "violated", "consistent"]


def test_runs_are_pooled_by_summing_counts():
    audits = pd.DataFrame([_audit(fp=10, fn=300), _audit(fp=14, fn=280), _audit(fp=7, fn=320)])
    (row,) = pooled_audits(audits, ["defense"]).to_dict("records")
    assert (row["fp"], row["fn"], row["n0"], row["runs"], row["n_trials"]) == (31, 900, 3000, 3, 6000)
    assert row["epsilon_lb"] == pytest.approx(_bound(31, 900, 3000, 3000))
    assert row["claim_verdict"] == ("violated" if row["epsilon_lb"] > 1.0 else "consistent")
    assert row["epsilon_point"] == pytest.approx(math.log((1 - 900 / 3000) / (31 / 3000)))


def test_several_audits_of_a_defense_are_bonferroni_corrected():
    audits = pd.DataFrame([_audit(fp=5, fn=400, test="projection"), _audit(fp=40, fn=40, test="vote")])
    (row,) = claim_summary(pooled_audits(audits, ["defense"]), ["defense"]).to_dict("records")
    level = 1 - 0.05 / 2 / 2  # two audits, two rates each
    best = max(_bound(5, 400, 1000, 1000, level), _bound(40, 40, 1000, 1000, level))
    assert row["epsilon_lb"] == pytest.approx(best)
    assert row["epsilon_lb"] < max(_bound(5, 400, 1000, 1000), _bound(40, 40, 1000, 1000))
    assert "Bonferroni over 2 audits" in row["claim_basis"]


def test_outside_scope_says_what_single_messages_reveal():
    audits = pd.DataFrame([_audit(claimed_epsilon=4.5, claimed_scope="aggregate", fp=2, fn=50)])
    (row,) = claim_summary(pooled_audits(audits, ["defense"]), ["defense"]).to_dict("records")
    assert row["claim_verdict"] == "outside scope"
    lb = _bound(2, 50, 1000, 1000)
    assert f"single messages, which reveal ε ≥ {lb:.2f}" in claim_text(row)
    # an audit of the aggregate is in scope and decides
    both = pd.DataFrame([_audit(claimed_epsilon=4.5, claimed_scope="aggregate", fp=2, fn=50),
                         _audit(claimed_epsilon=4.5, claimed_scope="aggregate", audited_scope="aggregate",
                                fp=300, fn=300)])
    (row,) = claim_summary(pooled_audits(both, ["defense"]), ["defense"]).to_dict("records")
    assert row["claim_verdict"] == "consistent" and row["audited_scope"] == "aggregate"


def test_zero_errors_are_the_trial_limit_never_a_measurement():
    audits = pd.DataFrame([_audit(claimed_epsilon=np.inf, fp=0, fn=0, n0=5000, n1=5000, n_trials=10000)])
    (row,) = claim_summary(pooled_audits(audits, ["defense"]), ["defense"]).to_dict("records")
    assert row["trial_limited"] and row["claim_verdict"] == "no claim"
    assert row["epsilon_lb"] == pytest.approx(row["ceiling"]) and round(row["epsilon_lb"], 2) == 7.21
    assert "ε ≥ 7.21 (limit of 10,000 trials)" in claim_text(row)


def test_older_rows_without_counts_are_rebuilt_from_rates():
    old = pd.DataFrame([_audit(fp=np.nan, fn=np.nan, n0=np.nan, n1=np.nan, fpr=0.02, fnr=0.3, n_trials=2000)])
    old = old.drop(columns=["audited_scope"]).assign(threat_model="server (aggregate only)")
    (row,) = pooled_audits(old, ["defense"]).to_dict("records")
    assert (row["fp"], row["fn"], row["n0"]) == (20, 300, 1000) and row["audited_scope"] == "aggregate"
    assert "rebuilt" in row["claim_basis"]


def test_rows_with_counts_need_no_rates():
    audits = pd.DataFrame([_audit(fp=31, fn=900, n0=3000, n1=3000)]).drop(columns=["fpr", "fnr"])
    (row,) = pooled_audits(audits, ["defense"]).to_dict("records")
    assert (row["fp"], row["fn"]) == (31, 900) and "rebuilt" not in row["claim_basis"]
    assert row["epsilon_lb"] == pytest.approx(_bound(31, 900, 3000, 3000))
