"""Click models against analytic values: exact enumeration of every click pattern for the
cascade model, numerical integration over the truncated normal for the PBM."""

import math

import numpy as np
import pytest
from scipy import integrate

from fltr_audit.engine.clicks import CCM_TABLES, PositionBasedModel, cascade_model, check_levels
from fltr_audit.errors import FltrError

LISTS = {3: [2, 0, 1, 0, 2, 1, -1], 5: [4, 1, 3, 0, 2, 4, -1]}


def pattern_probs(click, stop, labels):
    """Exact P(pattern) under the CCM: branch on click, then on stop after a click."""
    k = len(labels)
    out = {}

    def walk(i, pattern, p, stopped):
        if i == k:
            out[tuple(pattern)] = out.get(tuple(pattern), 0.0) + p
            return
        lab = labels[i]
        if stopped or lab < 0:
            walk(i + 1, pattern + [0], p, stopped)
            return
        walk(i + 1, pattern + [0], p * (1 - click[lab]), False)
        walk(i + 1, pattern + [1], p * click[lab] * stop[lab], True)
        walk(i + 1, pattern + [1], p * click[lab] * (1 - stop[lab]), False)

    walk(0, [], 1.0, False)
    return out


@pytest.mark.parametrize("name,levels", sorted(CCM_TABLES))
def test_cascade_rates_and_first_click_against_enumeration(name, levels):
    click, stop = CCM_TABLES[(name, levels)]
    labels = LISTS[levels]
    k = len(labels)
    probs = pattern_probs(click, stop, labels)
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
    rate = np.zeros(k)
    first = np.zeros(k + 1)
    for pattern, p in probs.items():
        rate += p * np.array(pattern)
        first[pattern.index(1) if 1 in pattern else k] += p

    model = cascade_model(name, levels)
    np.testing.assert_allclose(model.first_click_distribution(np.array(labels)), first, atol=1e-12)
    assert model.expected_max_rr(np.array(labels)) == pytest.approx(first[:k] @ (1 / np.arange(1, k + 1)))

    n = 100_000
    rng = np.random.default_rng([levels, len(name)])  # fixed seed per table
    clicks = model.simulate(np.broadcast_to(np.array(labels, np.int8), (n, k)), rng)
    # Each position's click indicator is Bernoulli(rate): the sample mean has SD
    # sqrt(rate (1 - rate) / n) <= 0.0016 for n = 1e5; 5 SD bounds give a false alarm
    # probability below 1e-6 per cell (13 cells per table), with a fixed seed on top.
    sd = np.sqrt(rate * (1 - rate) / n)
    assert np.all(np.abs(clicks.mean(0) - rate) <= 5 * sd + 1e-12)
    any_click = clicks.any(1)
    obs_first = np.bincount(np.where(any_click, clicks.argmax(1), k), minlength=k + 1) / n
    assert np.all(np.abs(obs_first - first) <= 5 * np.sqrt(first * (1 - first) / n) + 1e-12)
    assert not clicks[:, -1].any()  # the empty slot


def test_cascade_stop_behaviour_and_shapes():
    # navigational, 3 levels: after a click on label 2 the user stops with probability 0.9,
    # so P(click on the second of two label-2 documents) = 0.95 * (1 - 0.95 * 0.9).
    model = cascade_model("navigational", 3)
    n = 100_000
    clicks = model.simulate(np.full((n, 2), 2, np.int8), np.random.default_rng(5))
    expected = 0.95 * (1 - 0.95 * 0.9)
    assert abs(clicks[:, 1].mean() - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
    lab = np.random.default_rng(0).integers(-1, 3, (2, 3, 4, 10))
    assert model.simulate(lab, np.random.default_rng(1)).shape == (2, 3, 4, 10)
    assert model.first_click_distribution(lab).shape == (2, 3, 4, 11)
    np.testing.assert_allclose(model.first_click_distribution(lab).sum(-1), 1.0)


def test_same_seed_same_clicks():
    model = cascade_model("informational", 5)
    lab = np.random.default_rng(0).integers(0, 5, (50, 10))
    a = model.simulate(lab, np.random.default_rng(9))
    b = model.simulate(lab, np.random.default_rng(9))
    assert np.array_equal(a, b)


def test_model_lookup_errors_and_custom_tables():
    with pytest.raises(FltrError, match="^click_model.*unknown click model 'nav'"):
        cascade_model("nav", 3)
    with pytest.raises(FltrError, match="4 relevance levels"):
        cascade_model("perfect", 4)
    custom = cascade_model("custom", 2, click_prob=[0.1, 0.9], stop_prob=[0.0, 0.5])
    assert custom.n_levels == 2
    np.testing.assert_allclose(custom.first_click_distribution(np.array([1, 0])), [0.9, 0.01, 0.09])
    with pytest.raises(FltrError, match="3 entries for 2"):
        cascade_model("custom", 2, click_prob=[0.1, 0.5, 0.9], stop_prob=[0, 0, 0])
    with pytest.raises(FltrError, match="in \\[0, 1\\]"):
        cascade_model("custom", 2, click_prob=[0.1, 1.5], stop_prob=[0, 0])
    with pytest.raises(FltrError, match=r"labels up to 4 \(5 levels\).*covers 3 levels \(0-2\)"):
        check_levels(cascade_model("perfect", 3), np.array([0, 4, 1]))
    with pytest.raises(FltrError, match="covers 3 levels"):
        cascade_model("perfect", 3).simulate(np.array([[0, 3]]), np.random.default_rng(0))
    check_levels(cascade_model("perfect", 5), np.array([0, 4, -1]))


def _truncnorm_expect(f, mu, sd):
    """E[f(g)] for g ~ N(mu, sd) left-truncated at 0, by quadrature of the normal density."""
    pdf = lambda g: math.exp(-0.5 * ((g - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    mass = integrate.quad(pdf, 0, mu + 12 * sd)[0]
    return integrate.quad(lambda g: f(g) * pdf(g), 0, mu + 12 * sd, points=[mu])[0] / mass


def test_pbm_gamma_draws_match_the_truncated_normal():
    model = PositionBasedModel(gamma=0.05, gamma_sd=0.1)  # truncation at 0 matters here
    g = model.draw_gammas(100_000, np.random.default_rng(3))
    assert g.min() >= 0
    mean = _truncnorm_expect(lambda x: x, 0.05, 0.1)
    var = _truncnorm_expect(lambda x: (x - mean) ** 2, 0.05, 0.1)
    assert abs(g.mean() - mean) < 5 * math.sqrt(var / len(g))  # 5 SD of the sample mean


@pytest.mark.parametrize("levels,labels,relevant", [
    (5, [4, 0, 3, 1, 2, -1], [1, 0, 1, 0, 0, 0]),
    (3, [2, 0, 1, 2, 1, -1], [1, 0, 0, 1, 0, 0]),
])
def test_pbm_click_rates_against_analytic(levels, labels, relevant):
    # Marginal P(click at rank r) = E[r^-gamma_u] * (1 if relevant else 0.1), with the
    # expectation over the truncated normal of gamma_u integrated numerically.
    model = PositionBasedModel(gamma=1.0, gamma_sd=0.1, n_levels=levels)
    n = 200_000
    rng = np.random.default_rng(11)
    gammas = model.draw_gammas(n, rng)
    lab = np.broadcast_to(np.array(labels), (n, len(labels)))
    clicks = model.simulate(lab, gammas, rng)
    expected = np.array([
        (0.0 if l < 0 else (1.0 if rel else 0.1)) * _truncnorm_expect(lambda g, r=r: r ** -g, 1.0, 0.1)
        for r, (l, rel) in enumerate(zip(labels, relevant), start=1)
    ])
    # Bernoulli sample means over n = 2e5 users: 5 SD tolerance per position (the clip only
    # removes quadrature rounding above 1 at rank 1, where the rate is exactly 1).
    sd = np.sqrt(np.clip(expected * (1 - expected), 0, None) / n)
    assert np.all(np.abs(clicks.mean(0) - expected) <= 5 * sd + 1e-12)
    # conditional on the users' gammas the probabilities are exactly Eq. 11
    p = model.click_prob(lab[:3], gammas[:3])
    np.testing.assert_allclose(p[:, 0], (1.0 if relevant[0] else 0.1) * np.ones(3))
    np.testing.assert_allclose(p[:, 1], (1.0 if relevant[1] else 0.1) * 0.5 ** gammas[:3])
    assert model.click_prob(np.zeros((4, 2, 3), int), gammas[:4]).shape == (4, 2, 3)


def test_pbm_validation():
    with pytest.raises(FltrError, match="^click_model"):
        PositionBasedModel(rule="cascade")
    with pytest.raises(FltrError, match="^click_model"):
        PositionBasedModel(n_levels=4)
    with pytest.raises(FltrError, match="covers 3 levels"):
        PositionBasedModel(n_levels=3).click_prob(np.array([[3, 0]]), np.array([1.0]))
