"""Tests that kill the surviving mutants of attacks/epsilon_bounds.py (issue 22, tools/mutation.toml): the
automatic trial count against the closed-form Clopper-Pearson ceiling, and the rates, tightness
and threshold an audit reports against counts made here on its own scores."""

import math

import numpy as np
import pytest

import attacks.epsilon_bounds as epsilon_bounds
from attacks.epsilon_bounds import _best_threshold, audit, epsilon_lower_bound, scores_of
from attacks.trial_sizing import AUTO_MARGIN, AUTO_TRIALS_CAP, auto_trials
from fltr_audit.privacy.claim_decision import claim_verdict
from fltr_audit.engine.interfaces import PrivacyClaim


def ceiling(n: int, confidence: float = 0.95) -> float:
    """The bound with no error on evaluation halves of m = n - n // 2: each rate's one-sided
    Clopper-Pearson limit at 1 - (1 - confidence) / 2 for 0 errors is 1 - (alpha/2)^(1/m)
    (closed form), and epsilon = log((1 - u) / u)."""
    m = n - n // 2
    u = 1.0 - ((1.0 - confidence) / 2) ** (1.0 / m)
    return math.log((1.0 - u) / u)


@pytest.mark.parametrize("eps", [7.0, 8.0])
def test_auto_trials_is_the_margin_times_the_fewest_trials_that_can_test_the_claim(eps):
    """Where the margin, not the 10,000 floor, decides: n = AUTO_MARGIN x t with t the fewest trials
    whose ceiling exceeds eps (closed form), below the cap."""
    n, capped = auto_trials(eps)
    assert n % AUTO_MARGIN == 0 and not capped
    t = n // AUTO_MARGIN
    assert ceiling(t) > eps >= ceiling(t - 1)
    assert n > 10_000
    n, capped = auto_trials(12.0)
    assert (n, capped) == (AUTO_TRIALS_CAP, True)


def test_an_audit_reports_its_rates_as_counts_over_the_evaluation_half():
    """Scores N(0, 1) against N(2, 1): fpr = fp / n0 and fnr = fn / n1 of the evaluation halves,
    counted here at the reported threshold and direction."""
    def mechanism(rng, n, which):
        return rng.normal(2.0 * which, 1.0, size=(n, 1))

    r = audit(mechanism, lambda x: x[:, 0], claim=PrivacyClaim(1.0, 0.0, "message"), n_trials=2000, seed=3)
    assert (r.n0, r.n1) == (1000, 1000)
    assert r.fpr == pytest.approx(r.fp / r.n0) and r.fnr == pytest.approx(r.fn / r.n1)
    assert 0 < r.fp < r.n0 and 0 < r.fn < r.n1
    rng = np.random.default_rng(3)
    s0, s1 = rng.normal(0, 1, 2000), rng.normal(2, 1, 2000)
    e0, e1 = r.direction * s0[1000:], r.direction * s1[1000:]
    assert (int((e0 > r.direction * r.threshold).sum()), int((e1 <= r.direction * r.threshold).sum())) == (r.fp, r.fn)
    assert r.tightness == pytest.approx(r.epsilon_lb / 1.0)
    assert r.epsilon_lb == pytest.approx(float(epsilon_lower_bound(r.fp, r.fn, 1000, 1000)))


def test_an_audit_of_no_claim_has_no_tightness():
    def mechanism(rng, n, which):
        return rng.normal(3.0 * which, 1.0, size=(n, 1))

    r = audit(mechanism, lambda x: x[:, 0], claim=PrivacyClaim(), n_trials=400, seed=0)
    assert math.isinf(r.claimed_epsilon) and math.isnan(r.tightness) and r.epsilon_lb > 0


def test_the_best_threshold_takes_the_better_direction():
    """Input 1 scores lower: only direction -1 separates; the value is the objective's maximum."""
    held0, held1 = np.arange(10.0, 20.0), np.arange(0.0, 10.0)
    value, threshold, direction = _best_threshold(held0, held1, lambda fp, fn: -(fp + fn).astype(float))
    assert direction == -1 and value == 0.0
    assert not (-held0 > -threshold).any() and (-held1 > -threshold).all()  # the rule direction * s > direction * t


def test_scores_equal_up_to_floating_point_error_are_ties_and_bound_nothing():
    """Both inputs output the same three numbers, input 1 in another order: the statistic (their
    sum) differs only by floating-point error (600000 + 0.1 + 0.2 vs 0.1 + 0.2 + 600000: one ulp,
    1.2e-10 at this magnitude), so the inputs are indistinguishable and the audit must bound
    nothing (catches rounding the scores to 10 decimals instead of 9, which separates them). The
    bound 0 comes from fp = 0, fn = n1: a zero error count, but not a trial-limited bound (catches
    lb >= 0 for lb > 0 in ``trial_limited``)."""
    first, second = np.array([[6e5, 0.1, 0.2]]).sum(axis=1)[0], np.array([[0.1, 0.2, 6e5]]).sum(axis=1)[0]
    assert first != second and abs(first - second) < 2e-10  # the premise: the sums differ by rounding error

    def mechanism(rng, n, which):
        return np.tile([0.1, 0.2, 6e5] if which else [6e5, 0.1, 0.2], (n, 1))

    r = audit(mechanism, lambda x: x.sum(axis=1), claim=PrivacyClaim(1.0, 0.0, "message"), n_trials=400, seed=0)
    assert r.epsilon_lb == 0.0 and r.epsilon_point == 0.0
    assert min(r.fp, r.fn) == 0 and not r.trial_limited


@pytest.mark.parametrize("claimed_scope, audited_scope, lb, verdict", [
    ("aggregate", "message", 5.0, "outside scope"),  # a bound on one message says nothing of the aggregate
    ("aggregate", "message", 0.1, "outside scope"),
    ("aggregate", "aggregate", 5.0, "violated"),
    ("aggregate", "aggregate", 0.1, "consistent"),
    ("message", "message", 5.0, "violated"),
    ("message", "aggregate", 5.0, "violated"),  # the aggregate is a function of the messages
    ("message", "message", 1.0, "consistent"),  # a bound equal to the claim does not exceed it
])
def test_claim_verdict_is_its_rule_on_every_scope_pair(claimed_scope, audited_scope, lb, verdict):
    """The rule of issue #11 on a claim of 1 with ceiling 10: ``outside scope`` exactly when an
    aggregate claim is audited on single messages, else violated iff the bound exceeds the claim
    (catches the scope test dropped or its == flipped)."""
    assert claim_verdict(1.0, claimed_scope, audited_scope, lb, 10.0) == verdict


def test_scores_are_drawn_at_most_chunk_values_output_values_per_call(monkeypatch):
    """The memory bound: with CHUNK_VALUES = 100 and outputs of 10 coordinates, no call of the
    mechanism draws more than 100 values (10 trials); 25 trials take calls of 10, 10 and 5 after
    the one-trial probe of the output width (catches the width read from shape[2:], which sizes
    chunks as if each output were one value)."""
    monkeypatch.setattr(epsilon_bounds, "CHUNK_VALUES", 100)
    sizes = []

    def mechanism(rng, n, which):
        sizes.append(n)
        return rng.normal(size=(n, 10))

    scores = scores_of(mechanism, lambda x: x.sum(axis=1), np.random.default_rng(0), 25, 1)
    assert len(scores) == 25 and sizes == [1, 10, 10, 5]


@pytest.mark.parametrize("width,calls", [(1, [1, 100, 100, 50]), (250, [1] * 251)])
def test_chunks_hold_chunk_values_scalars_and_at_least_one_wide_output(monkeypatch, width, calls):
    """Scalar outputs (width 1) are drawn CHUNK_VALUES trials per call; an output wider than
    CHUNK_VALUES one trial per call (catches a width floor above 1, which halves scalar chunks,
    and a chunk floor above 1, which exceeds the bound for wide outputs)."""
    monkeypatch.setattr(epsilon_bounds, "CHUNK_VALUES", 100)
    sizes = []

    def mechanism(rng, n, which):
        sizes.append(n)
        return rng.normal(size=(n, width)) if width > 1 else rng.normal(size=n)

    scores_of(mechanism, lambda x: x.reshape(len(x), -1).sum(axis=1), np.random.default_rng(0), 250, 0)
    assert sizes == calls


def test_the_vote_statistic_counts_the_coordinates_closer_to_each_input():
    """sign(|o - u0| - |o - u1|) summed: an output equal to u0 scores -d, one equal to u1 scores +d
    (catches o + u1 for o - u1, and either difference flipped)."""
    u0, u1 = np.array([0.0, 0.0, 0.0]), np.array([2.0, 2.0, 2.0])
    assert epsilon_bounds.vote_statistic(u0, u1)(np.stack([u0, u1, (u0 + u1) / 2])).tolist() == [-3.0, 3.0, 0.0]
