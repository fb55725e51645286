"""Randomized response (FOLtR-ES Section 3.3): frequencies, epsilon, domains, refusals."""

import numpy as np
import pytest
from scipy import stats

from defenses.randomized_response import (MAXRR_VALUES, RandomizedResponse, pack_bits, randomize, rr_epsilon,
                                          unpack_bits)
from defenses.stack import parse_defense
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages


def _metric_messages(value, n=20_000, B=4):
    return Messages(n_interactions=np.full(n, B), seed=np.arange(n, dtype=np.uint64),
                    metric=np.full((n, B), value, dtype=np.float64))


@pytest.mark.parametrize("p", [0.25, 0.6, 0.9])
def test_transmission_frequencies_are_p_and_the_rest_uniform(p):
    rr = RandomizedResponse(p=p)
    assert rr.n == 11
    out = rr.apply(_metric_messages(1 / 3), np.zeros(1), np.random.default_rng(10)).metric
    codes = rr.encode(out).ravel()
    counts = np.bincount(codes, minlength=11)
    true_code = int(np.argmin(np.abs(rr.values - 1 / 3)))
    expected = np.full(11, (1 - p) / 10 * codes.size)
    expected[true_code] = p * codes.size
    assert stats.chisquare(counts, expected).pvalue > 0.001
    assert counts[true_code] / codes.size == pytest.approx(p, abs=5 * np.sqrt(p * (1 - p) / codes.size))


def test_claimed_epsilon_is_the_formula_and_bounds_the_empirical_ratio():
    p, n = 0.7, 11
    rr = RandomizedResponse(p=p)
    assert rr.claim.epsilon == pytest.approx(np.log(p * (n - 1) / (1 - p)))
    assert rr.claim.scope == "message"
    # the largest ratio P(f | q1) / P(f | q2): f sent when true vs when another value was true
    a = rr.encode(rr.apply(_metric_messages(0.0), np.zeros(1), np.random.default_rng(11)).metric)
    b = rr.encode(rr.apply(_metric_messages(0.5), np.zeros(1), np.random.default_rng(12)).metric)
    ratio = np.mean(a == 0) / np.mean(b == 0)
    assert np.log(ratio) == pytest.approx(rr.claim.epsilon, abs=0.05)  # SE of log ratio ~ 0.01
    assert rr_epsilon(1.0, 11) == float("inf")


@pytest.mark.parametrize("p, n", [(1 / 11, 11), (0.05, 11), (0.5, 2), (0.0, 3)])
def test_refuses_p_at_most_one_over_n(p, n):
    values = MAXRR_VALUES if n == 11 else tuple(range(n))
    with pytest.raises(FltrError, match=rf"p = {p:g} with n = {n}"):
        RandomizedResponse(p=p, values=values)


def test_parser_error_names_the_defense_string():
    with pytest.raises(FltrError, match=r"defense 'rr\(p=0.05\)'.*n = 11"):
        parse_defense("rr(p=0.05)")


def test_values_outside_the_domain_and_non_metric_messages_are_refused():
    rr = RandomizedResponse(p=0.9)
    with pytest.raises(FltrError, match="not in the domain"):
        rr.apply(_metric_messages(0.3, n=2), np.zeros(1), np.random.default_rng(0))
    with pytest.raises(FltrError, match="metric"):
        rr.apply(Messages(n_interactions=np.ones(2), vector=np.zeros((2, 3))), np.zeros(3), np.random.default_rng(0))


def test_every_maxrr_value_maps_to_itself_with_p_one():
    rr = RandomizedResponse(p=1.0)
    metric = np.array([MAXRR_VALUES] * 3)
    out = rr.apply(Messages(n_interactions=np.ones(3), metric=metric), np.zeros(1), np.random.default_rng(0))
    np.testing.assert_array_equal(out.metric, metric)


def test_click_bit_vectors_as_k_ary_values():
    k, p = 3, 0.5
    rng = np.random.default_rng(13)
    bits = rng.random((50_000, k)) < 0.3
    codes = pack_bits(bits)
    np.testing.assert_array_equal(unpack_bits(codes, k), bits)
    assert codes.max() < 2**k
    sent = randomize(codes, 2**k, p, np.random.default_rng(14))
    changed = sent != codes
    assert np.mean(~changed) == pytest.approx(p, abs=0.01)
    # a changed value is uniform over the 2^k - 1 others: the offset is uniform on 1..7
    offsets = ((sent - codes) % 2**k)[changed]
    assert stats.chisquare(np.bincount(offsets, minlength=2**k)[1:]).pvalue > 0.001
