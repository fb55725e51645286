"""The robust combination rules against independent computations: scipy's trimmed mean, a brute-force
Krum over every pair, per-coordinate sorting, the definition of the L2 clip."""

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import trim_mean

from defenses.robust import rules


@pytest.fixture
def U():
    return np.random.default_rng(3).normal(size=(11, 5)) * np.array([1.0, 10.0, 0.1, 3.0, 1.0])


def test_median_is_the_middle_order_statistic_per_coordinate(U):
    # odd n: the 6th of 11 sorted values; a planted "mean" or "off-by-one order statistic" fails
    assert np.array_equal(rules.coordinate_median(U), np.sort(U, axis=0)[5])
    even = U[:10]
    assert np.allclose(rules.coordinate_median(even), (np.sort(even, axis=0)[4] + np.sort(even, axis=0)[5]) / 2)


@pytest.mark.parametrize("beta", [0.0, 0.09, 0.1, 0.2, 0.3, 0.49])
@pytest.mark.parametrize("n", [1, 2, 7, 11, 20])
def test_trimmed_mean_equals_scipy(beta, n):
    U = np.random.default_rng(n).normal(size=(n, 4))
    assert np.allclose(rules.trimmed_mean(U, beta), trim_mean(U, beta, axis=0))


def test_trim_count_is_floor_of_beta_n():
    assert [rules.trim_count(n, 0.2) for n in (4, 5, 9, 10, 100)] == [0, 1, 1, 2, 20]


def test_squared_distances_equal_cdist(U):
    assert np.allclose(rules.squared_distances(U), cdist(U, U, "sqeuclidean"), atol=1e-9)
    assert np.all(np.diag(rules.squared_distances(U)) == 0)


def brute_krum_scores(U, f):
    """Blanchard et al.: for each i, the n - f - 2 closest others by squared distance, summed."""
    n = len(U)
    scores = []
    for i in range(n):
        d = sorted(float(((U[i] - U[j]) ** 2).sum()) for j in range(n) if j != i)
        scores.append(sum(d[: n - f - 2]))
    return np.array(scores)


@pytest.mark.parametrize("f", [0, 1, 2, 4])
def test_krum_scores_equal_brute_force(U, f):
    assert np.allclose(rules.krum_scores(rules.squared_distances(U), f), brute_krum_scores(U, f))


@pytest.mark.parametrize("f,m", [(1, 1), (2, 3), (4, 7)])
def test_krum_select_is_the_m_smallest_brute_scores(U, f, m):
    expected = np.argsort(brute_krum_scores(U, f), kind="stable")[:m]
    assert np.array_equal(rules.krum_select(U, f, m), expected)


def test_krum_selects_from_the_honest_cluster_against_outliers():
    rng = np.random.default_rng(0)
    honest = rng.normal(0, 0.1, size=(8, 3))
    byzantine = rng.normal(50, 1, size=(2, 3))
    U = np.vstack([byzantine, honest])
    assert rules.krum_select(U, 2, 1)[0] >= 2
    # the mean is dragged away, Krum's pick is not
    assert np.linalg.norm(U.mean(0)) > 5 and np.linalg.norm(U[rules.krum_select(U, 2, 1)[0]]) < 1


def test_multikrum_set_equals_exhaustive_best_subset_by_score():
    U = np.random.default_rng(5).normal(size=(7, 2))
    scores = brute_krum_scores(U, 1)
    best = min(itertools.combinations(range(7), 3), key=lambda s: scores[list(s)].sum())
    assert set(rules.krum_select(U, 1, 3)) == set(best)


def test_norm_bound_scales_only_rows_above_the_clip(U):
    out = rules.norm_bound(U, 3.0)
    norms = np.linalg.norm(U, axis=1)
    for row, o, nrm in zip(U, out, norms):
        if nrm > 3.0:
            assert np.isclose(np.linalg.norm(o), 3.0) and np.allclose(o / np.linalg.norm(o), row / nrm)
        else:
            assert np.array_equal(o, row)
    assert np.array_equal(rules.norm_bound(np.zeros((2, 3)), 1.0), np.zeros((2, 3)))
