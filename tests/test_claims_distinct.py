"""Pooling counts distinct audits only (issue 37, item 1): rows with the same ``audit_key`` (a
bit-identical copy of one audit's random stream) count once in ``reports.claims.pooled_audits``
and in the words of ``claim_text``; rows without the column (older stores) pool as before. The
simulation of copies: a correct claim's false ``violated`` stays at its level once copies are
counted once, and rises as the issue measured when they are not (the planted bug)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attacks.epsilon_bounds import audit
from fltr_audit.engine.interfaces import PrivacyClaim
from reports.claims import claim_summary, claim_text, pooled_audits

P = 0.75
EPS = math.log(P / (1 - P))


def binary_rr(rng, n, which):
    keep = rng.random((n, 1)) < P
    return np.where(keep, which, 1 - which).astype(float)


def real_audit(seed: int, defense: str = "rr") -> dict:
    row = audit(binary_rr, lambda x: x[:, 0], claim=PrivacyClaim(EPS, 0.0, "message"), n_trials=2000, seed=seed,
                mechanism_name=defense).as_dict()
    return {**row, "defense": defense, "audit_key": f"{defense}/{seed}"}


def simulated(reps: int, distinct: int, copies: int, n: int = 1000, seed: int = 0) -> pd.DataFrame:
    """``reps`` campaigns of ``distinct`` audits of exact binary RR, each row repeated ``copies``
    times: the optimal test's error counts drawn as Binomial(n, 1 - p), the held-out half's choice
    of small error at random (the mechanism is symmetric)."""
    rng = np.random.default_rng(seed)
    m = reps * distinct
    base = pd.DataFrame({
        "rep": np.repeat(np.arange(reps), distinct), "defense": "rr", "mechanism": "rr", "attack": "rr-llr",
        "test": "rr-llr", "neighbours": "worst-case", "threat_model": "server", "claimed_epsilon": EPS,
        "claimed_delta": 0.0, "claimed_scope": "message", "audited_scope": "message", "confidence": 0.95,
        "fp": rng.binomial(n, 1 - P, m), "fn": rng.binomial(n, 1 - P, m), "n0": n, "n1": n, "n_trials": 2 * n,
        "epsilon_lb": 0.0, "small_error": np.where(rng.random(m) < 0.5, "fp", "fn"),
        "audit_key": [f"k{i}" for i in range(m)]})
    return pd.concat([base] * copies, ignore_index=True)


def test_a_planted_copy_counts_once():
    rows = [real_audit(1), real_audit(2), real_audit(1)]
    assert repr(rows[0]) == repr(rows[2])  # the same stream: a bit-identical copy (NaN != NaN in ==)
    frame = pd.DataFrame(rows)
    pooled = pooled_audits(frame, ["defense"]).iloc[0]
    two = pooled_audits(pd.DataFrame(rows[:2]), ["defense"]).iloc[0]
    assert pooled["runs"] == 2 and pooled["copies"] == 1
    assert (pooled["fp"], pooled["fn"], pooled["n_trials"]) == (two["fp"], two["fn"], two["n_trials"])
    assert pooled["epsilon_lb"] == two["epsilon_lb"]
    assert "distinct audits only" in pooled["claim_basis"]
    text = claim_text(claim_summary(pooled_audits(frame, ["defense"]), ["defense"]).iloc[0])
    assert ", 2 distinct audits pooled (1 copy counted once)" in text


def test_older_rows_without_the_key_pool_as_they_come():
    frame = pd.DataFrame([real_audit(1), real_audit(2), real_audit(1)]).drop(columns="audit_key")
    pooled = pooled_audits(frame, ["defense"]).iloc[0]
    assert pooled["runs"] == 3 and math.isnan(pooled["copies"])
    text = claim_text(claim_summary(pooled_audits(frame, ["defense"]), ["defense"]).iloc[0])
    assert ", 3 runs pooled" in text and "distinct" not in text


def test_null_keys_all_count_and_a_key_counts_once_per_group_only():
    rows = [real_audit(1), {**real_audit(1), "audit_key": None}, {**real_audit(1), "audit_key": None},
            real_audit(1, defense="other")]
    rows[3]["audit_key"] = rows[0]["audit_key"]  # the same key under another defense: another group
    pooled = pooled_audits(pd.DataFrame(rows), ["defense"]).set_index("defense")
    assert pooled.loc["rr", "runs"] == 3 and pooled.loc["rr", "copies"] == 0
    assert pooled.loc["other", "runs"] == 1
    text = claim_text(claim_summary(pooled_audits(pd.DataFrame(rows), ["defense"]), ["defense"]).iloc[0])
    assert ", 3 distinct audits pooled" in text and "counted once" not in text


def test_the_rounds_campaign_counts_its_four_distinct_audits():
    """Issue 37: rounds = [2, 3, 4] x 2 seeds x 2 folds is 12 rows of 4 distinct audits."""
    frame = simulated(1, 4, 3)
    pooled = pooled_audits(frame, ["defense"]).iloc[0]
    assert pooled["runs"] == 4 and pooled["copies"] == 8 and pooled["n_trials"] == 4 * 2000


@pytest.mark.parametrize("copies", [4, 16])
def test_copies_counted_once_keep_a_correct_claims_level(copies):
    """500 campaigns of 4 distinct audits of a correct claim, each copied: ``violated`` at most 5 %
    (one-sided 99.9 % binomial tolerance: at most 41 of 500); the planted bug -- copies pooled as
    runs -- reads ``violated`` in about 17 % (4 copies) and 39 % (16 copies), as the issue measured
    (here 90 and 194 of 500, the naive check below). 500 campaigns are enough: a correct rule at 5 %
    passes with probability >= 0.999, and the planted bug at 17 % (mean 85, sd 8.4) stays at or below
    41 with probability below 1e-6 (z = -5.2); 2,000 campaigns (75 % more CPU, ~12 s) bought nothing."""
    reps = 500
    frame = simulated(reps, 4, copies)
    kept = (pooled_audits(frame, ["rep", "defense"])["claim_verdict"] == "violated").sum()
    assert kept <= stats.binom.ppf(0.999, reps, 0.05), kept
    naive = (pooled_audits(frame.drop(columns="audit_key"), ["rep", "defense"])["claim_verdict"] == "violated").sum()
    assert naive >= (0.12 if copies == 4 else 0.3) * reps, naive
