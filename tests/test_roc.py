"""The stored ROC curves (``attacks.roc``) against scikit-learn's ``roc_curve`` on scores with ties."""

import numpy as np
import pytest
from sklearn.metrics import roc_curve

from attacks.roc import ROC_POINTS, roc_on_grid


def _sklearn_on_grid(score, click, grid):
    fpr, tpr, _ = roc_curve(click, score)
    return np.array([tpr[fpr <= x].max() for x in grid])


@pytest.mark.parametrize("seed", range(5))
def test_roc_on_grid_is_sklearn_roc_curve_read_at_each_fpr(seed):
    rng = np.random.default_rng(seed)
    score = rng.integers(0, 7, size=300).astype(float)          # many ties: one threshold per value
    clicks = rng.random((4, 300)) < rng.uniform(0.1, 0.6, size=(4, 1))
    got = roc_on_grid(score, clicks)
    assert got.shape == (4, len(ROC_POINTS))
    for row, click in zip(got, clicks):
        np.testing.assert_allclose(row, _sklearn_on_grid(score, click, ROC_POINTS), atol=1e-12)


def test_a_vector_without_both_classes_is_nan_and_others_are_kept():
    score = np.array([0.3, 0.1, 0.9, 0.5])
    clicks = np.array([[1, 1, 1, 1], [0, 1, 1, 0]], dtype=bool)
    got = roc_on_grid(score, clicks, grid=np.array([0.0, 0.5, 1.0]))
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], _sklearn_on_grid(score, clicks[1], [0.0, 0.5, 1.0]))
