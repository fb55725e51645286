"""Pooling audits over runs keeps its power and its level (issue 20, item 4): real audits
(``attacks.epsilon_bounds.audit``) of mechanisms with a known epsilon, each run choosing its own threshold
and direction on its held-out half, pooled by ``reports.claims.pooled_audits``."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attacks.epsilon_bounds import audit
from defenses.dp_gaussian import gaussian_epsilon
from fltr_audit.engine.interfaces import PrivacyClaim
from reports.claims import oriented, pooled_audits


def laplace(scale: float):
    """Laplace(scale) around 0 (input 0) or 1 (input 1): epsilon = 1 / scale, symmetric, so the
    held-out half chooses a small false-positive or a small false-negative rate at random."""
    return lambda rng, n, which: rng.laplace(float(which), scale, size=(n, 1)), lambda x: x[:, 0], 1.0 / scale, 0.0


def binary_rr(p: float):
    """Binary randomized response: keep the input bit with probability p (epsilon ln(p/(1-p)))."""
    def mech(rng, n, which):
        keep = rng.random((n, 1)) < p
        return np.where(keep, which, 1 - which).astype(float)
    return mech, lambda x: x[:, 0], math.log(p / (1 - p)), 0.0


def gaussian(mu: float, delta: float = 1e-3):
    """N(0, 1) against N(mu, 1): (epsilon, delta)-DP with the analytic Gaussian epsilon."""
    return (lambda rng, n, which: rng.normal(mu * which, 1.0, size=(n, 1)), lambda x: x[:, 0],
            gaussian_epsilon(delta, mu, 1.0), delta)


def runs(mechanism, runs: int, trials: int, seed: int) -> pd.DataFrame:
    mech, stat, eps, delta = mechanism
    claim = PrivacyClaim(eps, delta, "message")
    rows = [audit(mech, stat, claim=claim, n_trials=trials, seed=seed * 1000 + r, mechanism_name="m").as_dict()
            for r in range(runs)]
    return pd.DataFrame(rows).assign(defense="m")


def test_orienting_swaps_the_counts_of_runs_that_kept_the_false_negatives_small():
    frame = pd.DataFrame({"fp": [3, 40], "fn": [50, 2], "n0": [100, 100], "n1": [90, 100],
                          "fpr": [0.03, 0.4], "fnr": [50 / 90, 0.02], "small_error": ["fp", "fn"]})
    out = oriented(frame)
    assert out[["fp", "fn", "n0", "n1"]].values.tolist() == [[3, 50, 100, 90], [2, 40, 100, 100]]
    assert out.loc[1, "fpr"] == 0.02 and out.loc[1, "fnr"] == 0.4


def test_pooled_bound_keeps_the_power_of_runs_that_chose_opposite_directions():
    frame = runs(laplace(0.5), runs=5, trials=4000, seed=3)
    assert set(frame["small_error"]) == {"fp", "fn"}  # the runs did choose opposite sides
    pooled = float(pooled_audits(frame, ["defense"])["epsilon_lb"].iloc[0])
    single = float(frame["epsilon_lb"].median())
    assert pooled >= 0.9 * single, (pooled, single)
    # the planted bug: summing the counts as they come (no orientation) collapses the bound
    naive = float(pooled_audits(frame.drop(columns="small_error"), ["defense"])["epsilon_lb"].iloc[0])
    assert naive < 0.5 * single, (naive, single)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", [binary_rr(0.75), laplace(1.0), gaussian(1.0)], ids=["rr", "laplace", "gauss"])
def test_pooled_bound_exceeds_a_known_epsilon_at_most_at_its_level(mechanism):
    reps, per = 200, 5
    exceed = 0
    for rep in range(reps):
        frame = runs(mechanism, runs=per, trials=1000, seed=rep)
        exceed += float(pooled_audits(frame, ["defense"])["epsilon_lb"].iloc[0]) > mechanism[2]
    # at most 5 % of repetitions, within a binomial tolerance (one-sided 99.9 %)
    assert exceed <= stats.binom.ppf(0.999, reps, 0.05), exceed
