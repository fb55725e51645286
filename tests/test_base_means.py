"""``fltr_audit.base.means.nanmean``: numpy's ``nanmean`` bit for bit, and NaN without numpy's warning
when nothing was measured (a query split without relevant documents, a round without others)."""

from __future__ import annotations

import warnings

import numpy as np

from fltr_audit.base.means import nanmean


def test_it_is_numpys_nanmean_bit_for_bit():
    rng = np.random.default_rng(0)
    for size in (1, 2, 7, 128, 1001):
        x = rng.normal(size=size) * 10.0 ** rng.integers(-5, 6, size=size)
        x[rng.random(size) < 0.3] = np.nan
        if np.isnan(x).all():
            continue
        assert nanmean(x) == float(np.nanmean(x))
        assert nanmean(list(x)) == float(np.nanmean(x))


def test_nothing_measured_is_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(nanmean([]))
        assert np.isnan(nanmean([np.nan, np.nan]))
        assert np.isnan(nanmean(np.full((2, 3), np.nan)))
