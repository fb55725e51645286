"""Counterfactual click redraws (``Algorithm.redraw_clicks``): the same click model, the same
users, the same shown lists, an independent stream."""

import numpy as np
from scipy import stats

from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.clicks import cascade_model, redraw_cascade
from fltr_audit.engine.messages import GroundTruth, Interactions
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.algorithms.fedips import FedIPS
from fltr_audit.engine.algorithms.logging_policy import LoggingPolicy
from fltr_audit.engine.clicks import PositionBasedModel
from tests.test_fedips import toy_data


def _agree(rate_a, n_a, rate_b, n_b, z=5.0):
    """Two-proportion z-test per slot with the pooled rate (|z| < 5 everywhere)."""
    pooled = (rate_a * n_a + rate_b * n_b) / (n_a + n_b)
    sd = np.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    return bool((np.abs(rate_a - rate_b) <= z * sd).all())


def _first_click_counts(clicks):
    k = clicks.shape[-1]
    first = np.where(clicks.any(-1), clicks.argmax(-1), k)
    return np.bincount(first.reshape(-1), minlength=k + 1)


def test_cascade_redraw_follows_the_analytic_first_click_distribution():
    model = cascade_model("navigational", 3)
    labels = np.array([2, 0, 1, 2, 0, 0, 1, -1, -1, -1])   # a short list: empty slots never clicked
    draws = redraw_cascade(model, np.tile(labels, (400, 1)), 25, np.random.default_rng(0))
    assert draws.shape == (25, 400, 10) and not draws[..., 7:].any()
    expected = model.first_click_distribution(labels) * draws[..., 0].size
    keep = expected > 0
    counts = _first_click_counts(draws)
    assert counts[~keep].sum() == 0
    assert stats.chisquare(counts[keep], expected[keep]).pvalue > 1e-3


def test_algorithm_redraws_match_the_real_click_path():
    """FPDGD and FOLtR-ES redraw on the shown lists of a probe; per-slot click rates of the
    redraws agree with those of the clicks the algorithm itself simulated (binomial sd)."""
    data = toy_data(n_queries=6, n_features=4)
    model = cascade_model("informational", 5)
    for algorithm in (FPDGD(LinearRanker(4), model, k=5), FOLtRES(LinearRanker(4), model, k=5)):
        params = np.linspace(1.0, -1.0, algorithm.ranker.n_params)
        queries = np.tile(np.arange(6), 500)[:, None]
        out = algorithm.client_step(params, data, queries, np.arange(len(queries)), np.random.default_rng(1),
                                    np.random.default_rng(2), deterministic=True)
        cf = algorithm.redraw_clicks(out.truth(np.arange(len(queries))), out.interactions, data, 4,
                                     np.random.default_rng(3))
        assert cf.shape == (4,) + out.clicks.shape
        assert not (cf & ~(out.interactions.shown >= 0)).any()
        real, redraw = out.clicks.mean(0), cf.mean((0, 1))
        assert _agree(real, len(queries), redraw, 4 * len(queries))


def test_fedips_redraw_keeps_each_users_position_bias():
    """FedIPS redraws run the m-click sessions again with each user's own gamma_u: the redraws
    of one user agree with many real logs of that same user (same client id)."""
    data = toy_data(n_queries=6)
    policy = LoggingPolicy(np.linspace(1.0, -0.5, data.n_features), k=5)
    algorithm = FedIPS(LinearRanker(data.n_features), PositionBasedModel(gamma=1.0, gamma_sd=0.6), policy,
                       clicks_per_client=3, max_sessions=4)
    pool = algorithm.users.gammas(np.arange(200))
    users = np.array([np.argmin(pool), np.argmax(pool)])  # the flattest and the steepest position bias
    ids = np.repeat(users, 2000)                           # two users, many independent sessions each
    queries = np.tile(np.array([[0, 2]]), (len(ids), 1))
    log = algorithm.simulate(data, queries, ids, np.random.default_rng(7))
    truth = GroundTruth(clicks=log.clicked, client_ids=ids)
    cf = algorithm.redraw_clicks(truth, Interactions(queries=queries, shown=log.shown), data, 3,
                                 np.random.default_rng(8))
    assert cf.shape == (3,) + log.clicked.shape
    assert pool.max() - pool.min() > 1.0                    # the users differ, so the test can tell
    for user in users:
        sel = ids == user
        real, redraw = log.clicked[sel].mean(0), cf[:, sel].mean((0, 1))
        n = sel.sum()
        assert _agree(real, n, redraw, 3 * n)
