"""Whole-run audits free of floating-point ties (issue 37, items 5 and 6): scores ranked rounded with
ties broken at random, the floating-point side channel reported on its own (textbook Laplace
flagged, Mironov's snapping cleared), the Andrew et al. estimate only for aggregate-scope cosines,
and the canaries an untestable claim needs. Each test says which planted bug it catches."""

import math

import numpy as np
import pytest
from scipy import stats

import fltr_audit
from attacks.canary_count import canaries_to_test
from attacks.fdp_one_run import fdp_one_run_bound
from attacks.float_channel import float_side_channel
from attacks.whole_run_bounds import canary_limit, one_run_lower_bound, untied_order

DATA = "synthetic:mq2008?queries=200"
SMALL = dict(canaries=100, rounds=5, clients=10, population=100, queries_per_client=2, data=DATA)


def tied_by_bits(m=2000, seed=0):
    """Half the canaries at exactly +1 (present ones one rounding unit above), the rest spread: the
    issue's picture of textbook Laplace's likelihood-ratio scores."""
    rng = np.random.default_rng(seed)
    present = rng.random(m) < 0.5
    scores = rng.uniform(-1, 1, m)
    tied = rng.random(m) < 0.5
    scores[tied] = np.where(present[tied], np.nextafter(1.0, 2.0), 1.0)
    return scores, present


def test_ties_are_broken_at_random_not_by_their_last_bits():
    """The bounds see no signal in bits below the rounding: at most at the level over the tied
    canaries alone (catches the stable sort on raw scores: every top guess right, bound ~ the limit)."""
    scores, present = tied_by_bits()
    tied = np.round(scores, 9) == 1.0
    steinke = one_run_lower_bound(scores[tied], present[tied], 0.0)
    fdp = fdp_one_run_bound(scores[tied], present[tied], 0.0)
    assert steinke.epsilon_lb == 0.0 and fdp.mu_lb == 0.0
    raw = one_run_lower_bound(np.where(present[tied], 1.0, 0.0), present[tied], 0.0)  # what the bits gave
    assert raw.epsilon_lb > 3.0
    order = untied_order(scores)
    assert np.all(np.diff(np.round(scores, 9)[order]) >= 0)
    ties = order[np.round(scores, 9)[order] == 1.0]
    assert 0.3 < present[ties[: len(ties) // 2]].mean() < 0.7  # present ones not all at the top


def test_the_floating_point_check_flags_bits_that_tell_the_secret():
    """Off canaries all present in the +1 group and all absent in the -1 group (the textbook
    Laplace picture): ``flagged`` -- catches a common-odds test, under which the two cancel; bits
    alike in every group: ``cleared`` with p = 1; off canaries independent of the secrets: cleared
    in at least 90 % of 200 draws (the level)."""
    rng = np.random.default_rng(1)
    m = 600
    present = rng.random(m) < 0.5
    sign = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    off = rng.random(m) < 0.1
    leak = sign * np.where(off & (present == (sign > 0)), np.nextafter(1.0, 2.0), 1.0)
    everyone = np.ones(m, dtype=bool)
    found = float_side_channel(leak, present, everyone)
    assert found.finding == "flagged" and found.pvalue < 1e-4
    assert (found.off_present, found.off_absent) == (int((off & present & (sign > 0)).sum()),
                                                     int((off & ~present & (sign < 0)).sum()))
    alike = float_side_channel(sign, present, everyone)
    assert alike.finding == "cleared" and alike.pvalue == 1.0 and alike.tied == 0 and found.tied == m
    # only the eligible canaries count: the leaking ones left out, nothing is flagged
    assert float_side_channel(leak, present, ~(off & (present == (sign > 0)))).finding == "cleared"
    cleared = 0
    for s in range(200):
        r = np.random.default_rng(100 + s)
        p = r.random(m) < 0.5
        noise = sign * np.where(r.random(m) < 0.1, np.nextafter(1.0, 2.0), 1.0)
        cleared += float_side_channel(noise, p, np.ones(m, dtype=bool)).finding == "cleared"
    assert cleared >= 200 - stats.binom.ppf(0.999, 200, 0.05)


def test_the_check_is_fishers_method_over_every_tie_group_with_an_off_canary():
    """Scipy as the oracle: a group of two (its Fisher p-value is 1), a group of five and one of
    four, each with an off canary; the p-value is ``combine_pvalues`` of the three tables' Fisher
    exact p-values (catches groups of two left out, or the groups summed into one table)."""
    up = np.nextafter(1.0, 2.0)
    scores = np.array([2.0, np.nextafter(2.0, 3.0),                       # group of two, off one present
                       1.0, 1.0, 1.0, up, up,                             # group of five, two off
                       -1.0, -1.0, -1.0, np.nextafter(-1.0, 0.0), 0.3])   # group of four, one off; a loner
    present = np.array([0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    tables = [[[1, 0], [0, 1]], [[2, 1], [0, 2]], [[0, 2], [1, 1]]]
    want = stats.combine_pvalues([stats.fisher_exact(t).pvalue for t in tables], method="fisher").pvalue
    got = float_side_channel(scores, present, np.ones(len(scores), dtype=bool))
    assert got.pvalue == pytest.approx(want, rel=1e-12) and got.tied == 11
    assert (got.off_present, got.off_absent) == (3, 1)


def test_the_check_flags_at_the_five_percent_level():
    """One tie group of twelve canaries, six on the group's common value and six off it below the
    rounding: off among the present 5 of 6 (Fisher's exact p = 0.080, scipy's) reads cleared, 6 of
    6 (p = 0.002) flagged; the finding is p < 0.05 (catches another level: 0.1 flags the first)."""
    for off_present, flagged in ((5, False), (6, True)):
        present = np.array([True] * off_present + [False] * (6 - off_present)
                           + [True] * (6 - off_present) + [False] * off_present)
        scores = np.r_[1.0 + np.arange(1, 7) * 1e-13, np.ones(6)]  # six distinct off values, six on
        found = float_side_channel(scores, present, np.ones(12, dtype=bool))
        table = [[off_present, 6 - off_present], [6 - off_present, off_present]]
        assert found.pvalue == pytest.approx(stats.fisher_exact(table).pvalue, rel=1e-12)
        assert (found.finding == "flagged") == flagged == (found.pvalue < 0.05)
    assert 0.05 < stats.fisher_exact([[5, 1], [1, 5]]).pvalue < 0.1


def test_the_estimate_is_fitted_only_to_aggregate_scope_cosines():
    """Message scope: ``epsilon_estimate`` NaN with its reason; aggregate scope (dp-fedavg): fitted
    (catches the estimate left on bounded likelihood ratios)."""
    message = fltr_audit.audit_whole_run("fpdgd", defense="dp-local-laplace(eps=1)", **SMALL)
    assert math.isnan(message.epsilon_estimate) and math.isnan(message.estimate_low)
    assert "aggregate-scope cosines" in message.epsilon_estimate_reason
    aggregate = fltr_audit.audit_whole_run("fpdgd", defense="dp-fedavg(noise_multiplier=1,clip=1)", **SMALL)
    assert aggregate.scope == "aggregate" and math.isfinite(aggregate.epsilon_estimate)
    assert aggregate.epsilon_estimate_reason == "" and aggregate.float_channel in ("flagged", "cleared")


def test_canaries_to_test_is_the_fewest_whose_limit_exceeds_the_claim():
    """Brute force: the first count from 7 up whose ``canary_limit`` exceeds the claim (catches a
    search that stops at a doubling, or starts below the canaries it was given)."""
    for claim, first in ((1.0, 14), (2.5, 60), (4.0, 264)):
        assert canaries_to_test(claim, 7, 0.0) == first
        assert canary_limit(first, 0.0, 0.95, first) > claim >= canary_limit(first - 1, 0.0, 0.95, first - 1)
    assert canaries_to_test(1.0, 300, 0.0) == 300  # never fewer than it has
    none = fltr_audit.audit_whole_run("fpdgd", defense="dp-local-laplace(eps=20)", **SMALL)
    assert none.claim_verdict == "untestable" and none.canaries_needed > SMALL["canaries"]


def test_textbook_laplace_is_flagged_and_snapping_cleared_through_the_engine():
    """The issue's command (1,000 canaries, one round of 500 of 1,000 users): the correct textbook
    Laplace's claim verdict is not ``violated`` (its ties no longer decide it) and its floating-point
    channel is flagged; the snapped Laplace is cleared (catches the check dropped or blind)."""
    demo = dict(canaries=1000, population=1000, clients=500, rounds=1, data=DATA, seed=76)
    textbook = fltr_audit.audit_whole_run("fpdgd", defense="dp-local-laplace(eps=1)", **demo)
    snapped = fltr_audit.audit_whole_run("fpdgd", defense="dp-local-laplace(eps=1,snapping=true)", **demo)
    assert textbook.claim_verdict == "consistent" and textbook.float_channel == "flagged"
    assert snapped.float_channel == "cleared" and snapped.claim_verdict != "violated"
