"""fltr_audit.privacy.limit_tables against the limit it tabulates: the Clopper-Pearson upper limits an
audit reads from the table equal, bit for bit, the ones ``scipy.stats.beta.ppf`` computes directly,
for every shape of counts, and anything the table cannot hold is computed directly. The planted bugs
it catches: a table off by one count, a table kept across levels or trial counts, a count beyond n
or a fraction read from the table, a table built for a few counts out of many trials."""

import numpy as np
import pytest

from attacks.epsilon_bounds import clopper_pearson_upper
from fltr_audit.privacy import limit_tables
from fltr_audit.privacy.error_bounds import clopper_pearson_upper as _clopper_pearson_upper


@pytest.mark.parametrize("n", [1, 7, 500, 5000, limit_tables.MAX_TRIALS])
@pytest.mark.parametrize("level", [0.95, 0.975, 0.9995])
def test_every_count_reads_the_limit_beta_ppf_computes(n, level):
    rng = np.random.default_rng(n)
    size = 2 * max(150, (n + 1) // limit_tables.SHARE)  # enough counts to be read from the table, even
    counts = np.concatenate([[0, n, n, 0], rng.integers(0, n + 1, size=size)]).astype(np.float64)
    direct = _clopper_pearson_upper(counts, n, level)
    assert np.array_equal(clopper_pearson_upper(counts, n, level), direct)
    assert np.array_equal(clopper_pearson_upper(counts.reshape(2, -1), n, level), direct.reshape(2, -1))
    one = clopper_pearson_upper(np.float64(counts[-1]), n, level)  # computed directly unless n < SHARE
    assert one.shape == () and one == direct[-1]
    assert clopper_pearson_upper(n, n, level) == 1.0


@pytest.mark.parametrize("errors, n", [([0.5, 3.0], 10), ([-1.0, 2.0], 10), ([3.0, 11.0], 10),
                                       ([3.0, 4.0], limit_tables.MAX_TRIALS + 1)])
def test_what_no_table_holds_is_computed_directly(errors, n):
    before = limit_tables._table.cache_info().currsize
    errors = np.asarray(errors, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        got, direct = clopper_pearson_upper(errors, n, 0.975), _clopper_pearson_upper(errors, n, 0.975)
    assert np.array_equal(got, direct, equal_nan=True)
    assert limit_tables._table.cache_info().currsize == before


def test_no_counts_give_no_limits():
    assert clopper_pearson_upper(np.array([]), 10, 0.975).shape == (0,)


def test_a_few_counts_out_of_many_trials_build_no_table():
    """A call for fewer than (n + 1) / SHARE counts is computed directly (a table of n + 1 limits for
    one count would cost n + 1 evaluations), with the same values."""
    before = limit_tables._table.cache_info().currsize
    n = 60_001
    few = np.array([3.0, 40.0])
    assert np.array_equal(clopper_pearson_upper(few, n, 0.975), _clopper_pearson_upper(few, n, 0.975))
    assert limit_tables._table.cache_info().currsize == before
