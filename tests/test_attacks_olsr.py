"""OLSR: exact recovery on noiseless PDGD-shaped updates, agreement with statsmodels,
minimum-norm behaviour, secure aggregation and the view checks."""

import warnings

import numpy as np
import pytest

from attacks.olsr import OLSR, ols_batched, ols_statsmodels
from attacks.registry import make_attack
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Interactions, Messages, ServerView
from fltr_audit.engine.rankers import LinearRanker


def _view(features, shown, vectors, global_params, kind="weights", secagg=False):
    """A hand-built server view over ``features`` (rows), ``shown`` (n, B, k)."""
    n = shown.shape[0]
    F = features.shape[1]
    data = Dataset(
        features=features.astype(np.float32),
        labels=np.zeros(len(features), dtype=np.int8),
        query_ptr=np.array([0, len(features)], dtype=np.int64),
        qids=np.array([1]),
        n_levels=3,
    )
    msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), vector=vectors, vector_kind=kind)
    mean = vectors.mean(axis=0)
    return ServerView(
        round=0, threat_model="server", global_params=global_params, ranker=LinearRanker(F),
        participants=np.arange(n), dropouts=np.empty(0, dtype=np.int64),
        messages=None if secagg else msgs, aggregate=mean,
        interactions=Interactions(queries=np.zeros(shown.shape[:2], dtype=np.int64), shown=shown),
        documents=data, aggregate_kind=kind,
    )


def _pdgd_update(X, clicks, rng):
    """Hand-built linear PDGD-shaped step: + on clicked, - on examined unclicked
    (above the last click and the one just below), 0 below that."""
    k = len(clicks)
    last = np.flatnonzero(clicks).max()
    w = rng.uniform(0.2, 1.0, k)
    coef = np.where(clicks, w, np.where(np.arange(k) <= last + 1, -w, 0.0))
    return coef @ X.astype(np.float64), coef


def test_olsr_recovers_clicks_exactly_from_noiseless_single_query_update():
    rng = np.random.default_rng(1)
    F, k, n = 46, 10, 30
    features = rng.random((n * k, F)).astype(np.float32)
    shown = np.arange(n * k).reshape(n, 1, k)
    g = rng.normal(size=F)
    clicks = np.zeros((n, 1, k), dtype=bool)
    vectors = np.empty((n, F))
    for i in range(n):
        c = rng.random(k) < 0.3
        c[rng.integers(k)] = True        # at least one click
        clicks[i, 0] = c
        u, _ = _pdgd_update(features[shown[i, 0]], c, rng)
        vectors[i] = g + u
    guess = OLSR().guess(_view(features, shown, vectors, g))
    np.testing.assert_array_equal(guess.decision, clicks)
    # several queries per client (B = 3, 30 regressors < 46 features): still exact
    shown3 = np.arange(n * k).reshape(n // 3, 3, k)
    upd = np.zeros((n // 3, F))
    for i in range(n // 3):
        for b in range(3):
            upd[i] += _pdgd_update(features[shown3[i, b]], clicks.reshape(n // 3, 3, k)[i, b], rng)[0]
    guess3 = OLSR().guess(_view(features, shown3, g + upd, g))
    np.testing.assert_array_equal(guess3.decision, clicks.reshape(n // 3, 3, k))


def test_batched_equals_statsmodels_coefficients_and_t_values():
    rng = np.random.default_rng(2)
    n, m, P = 25, 10, 46
    A = rng.random((n, m, P))
    y = np.einsum("nm,nmp->np", rng.normal(size=(n, m)), A) + 0.3 * rng.normal(size=(n, P))
    fast, ref = ols_batched(y, A), ols_statsmodels(y, A)
    np.testing.assert_allclose(fast.coef, ref.coef, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(fast.tvalues, ref.tvalues, rtol=1e-8)
    np.testing.assert_array_equal(fast.df_resid, ref.df_resid)
    np.testing.assert_array_equal(fast.rank, ref.rank)


def test_duplicate_documents_match_statsmodels_pinv():
    """Identical shown documents (common in LETOR): rank-deficient; both use the pseudo-inverse."""
    rng = np.random.default_rng(3)
    A = rng.random((6, 10, 46))
    A[:, 7] = A[:, 2]
    y = rng.normal(size=(6, 46))
    fast = ols_batched(y, A)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ols_statsmodels(y, A)
    np.testing.assert_allclose(fast.coef, ref.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fast.tvalues, ref.tvalues, rtol=1e-6)
    np.testing.assert_array_equal(fast.rank, np.full(6, 9))
    np.testing.assert_allclose(fast.coef[:, 7], fast.coef[:, 2])


def test_more_documents_than_features_gives_minimum_norm_solution():
    rng = np.random.default_rng(4)
    A = rng.random((3, 80, 46))
    y = rng.normal(size=(3, 46))
    fit = ols_batched(y, A)
    for i in range(3):
        ref = np.linalg.lstsq(A[i].T, y[i], rcond=None)[0]
        np.testing.assert_allclose(fit.coef[i], ref, rtol=1e-7, atol=1e-9)
    assert np.all(fit.df_resid == 0) and np.isnan(fit.tvalues).all()


def test_secure_aggregation_small_cohort_recovers_every_clients_clicks():
    """A cohort of 2 with one query each shows 20 documents < 46 features: the aggregate
    still identifies every click, and the guesses land in each client's (n, B, k) slots."""
    rng = np.random.default_rng(5)
    F, k = 46, 10
    features = rng.random((2 * k, F)).astype(np.float32)
    shown = np.arange(2 * k).reshape(2, 1, k)
    g = rng.normal(size=F)
    clicks = np.array([[[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]], [[0, 0, 1, 0, 0, 0, 0, 0, 0, 0]]], dtype=bool)
    vectors = np.stack([g + _pdgd_update(features[shown[i, 0]], clicks[i, 0], rng)[0] for i in range(2)])
    guess = make_attack("olsr").guess(_view(features, shown, vectors, g, secagg=True))
    np.testing.assert_array_equal(guess.decision, clicks)
    # the same with FedIPS-style update vectors
    guess_u = OLSR().guess(_view(features, shown, vectors - g, g, kind="update", secagg=True))
    np.testing.assert_array_equal(guess_u.decision, clicks)


def test_secure_aggregation_large_cohort_is_minimum_norm_over_all_shown_documents():
    rng = np.random.default_rng(6)
    F, k, n = 46, 10, 8
    features = rng.random((n * k, F)).astype(np.float32)
    shown = np.arange(n * k).reshape(n, 1, k)
    shown[3, 0, 7:] = -1                                   # a short list
    g = rng.normal(size=F)
    vectors = g + rng.normal(size=(n, F))
    guess = OLSR(global_regressor=False).guess(_view(features, shown, vectors, g, secagg=True))
    mask = shown >= 0
    X = features[shown[mask]].astype(np.float64)
    ref = np.linalg.lstsq(X.T, vectors.mean(0) - g, rcond=None)[0]
    np.testing.assert_allclose(guess.score[mask], ref, rtol=1e-6, atol=1e-9)   # t undefined: score = coef
    np.testing.assert_array_equal(guess.decision[mask], ref > 1e-8 * np.abs(ref).max())
    assert np.isnan(guess.score[~mask]).all() and not guess.decision[~mask].any()


def test_raw_weights_target_and_t_variant():
    rng = np.random.default_rng(7)
    F, k, n = 46, 10, 40
    features = rng.random((n * k, F)).astype(np.float32)
    shown = np.arange(n * k).reshape(n, 1, k)
    g = rng.normal(size=F)
    clicks = rng.random((n, 1, k)) < 0.3
    clicks[:, 0, 0] = True
    upd = np.stack([_pdgd_update(features[shown[i, 0]], clicks[i, 0], rng)[0] for i in range(n)])
    noisy = g + upd + 0.05 * rng.normal(size=(n, F))
    view = _view(features, shown, noisy, g)
    # raw weights = regress g + update: equals regressing the update on a target shifted by g
    X = features[shown[:, 0]].astype(np.float64)
    ref = ols_batched(noisy, X)
    pham = OLSR(target="weights", global_regressor=False).guess(view)
    np.testing.assert_array_equal(pham.decision[:, 0], ref.coef > 1e-8 * np.abs(ref.coef).max(1, keepdims=True))
    # with the global model as a regressor the target choice no longer matters
    np.testing.assert_array_equal(OLSR(target="weights").guess(view).decision, OLSR().guess(view).decision)
    plain = OLSR(global_regressor=False).guess(view)
    strict = make_attack("olsr-t", alpha=0.01).guess(view)
    fit = ols_batched(noisy - g, X)
    np.testing.assert_allclose(plain.score[:, 0], fit.tvalues)
    assert strict.decision.sum() <= plain.decision.sum()     # a one-sided test at 1% is stricter than sign
    assert not (strict.decision & ~plain.decision).any()


def test_global_regressor_undoes_weight_clipping():
    """FPDGD clips the weights: message = c (global + update). Plain regression of
    message - global then carries (c - 1) global; with the global model as a regressor the
    clicks are recovered exactly again."""
    rng = np.random.default_rng(9)
    F, k, n = 46, 10, 40
    features = rng.random((n * k, F)).astype(np.float32)
    shown = np.arange(n * k).reshape(n, 1, k)
    g = rng.normal(size=F)
    clicks = rng.random((n, 1, k)) < 0.3
    clicks[:, 0, 3] = True
    upd = np.stack([_pdgd_update(features[shown[i, 0]], clicks[i, 0], rng)[0] for i in range(n)]) * 0.1
    w = g + upd
    c = np.minimum(1.0, 0.9 * np.linalg.norm(g) / np.linalg.norm(w, axis=1))   # every message clipped
    view = _view(features, shown, c[:, None] * w, g)
    np.testing.assert_array_equal(OLSR().guess(view).decision, clicks)
    assert (OLSR(global_regressor=False).guess(view).decision != clicks).any()
    # the same under secure aggregation with a small cohort (2 x 10 documents + 1 < 46)
    two = _view(features[:20], shown[:2], (c[:, None] * w)[:2], g, secagg=True)
    np.testing.assert_array_equal(OLSR().guess(two).decision, clicks[:2])


def test_view_checks():
    rng = np.random.default_rng(8)
    features = rng.random((10, 46)).astype(np.float32)
    shown = np.arange(10).reshape(1, 1, 10)
    view = _view(features, shown, rng.normal(size=(1, 46)), np.zeros(46))
    with pytest.raises(FltrError, match="^attacks: olsr: needs the shown documents"):
        OLSR().guess(view.blind())
    foltr = ServerView(**{**view.__dict__, "messages": Messages(n_interactions=np.ones(1), seed=np.ones(1, np.uint64)),
                          "aggregate": None})
    with pytest.raises(FltrError, match="no parameter vector"):
        OLSR().guess(foltr)
    with pytest.raises(FltrError, match="^attacks: unknown attack 'nope'"):
        make_attack("nope")
    with pytest.raises(FltrError, match="^attack olsr: target: must be one of update, weights, got 'raw'$"):
        make_attack("olsr", target="raw")


def test_lad_matches_linear_programming_oracle():
    """IRLS least absolute deviations reaches the optimum of the LP formulation
    min sum t  s.t.  -t <= y - A^T b <= t (scipy.optimize.linprog, HiGHS)."""
    from scipy.optimize import linprog

    from attacks.olsr import lad_batched

    rng = np.random.default_rng(10)
    n, m, P = 4, 6, 30
    A = rng.random((n, m, P))
    y = np.einsum("nm,nmp->np", rng.normal(size=(n, m)), A) + rng.laplace(0, 0.3, (n, P))
    coef = lad_batched(y, A)
    for i in range(n):
        D = A[i].T
        c = np.r_[np.zeros(m), np.ones(P)]
        A_ub = np.block([[D, -np.eye(P)], [-D, -np.eye(P)]])
        res = linprog(c, A_ub=A_ub, b_ub=np.r_[y[i], -y[i]], bounds=[(None, None)] * m + [(0, None)] * P)
        ours = np.abs(y[i] - D @ coef[i]).sum()
        # the simplex refinement ends on the LP optimum (a vertex); near the flat optimum the
        # coefficients themselves are poorly determined, so the objective is what is compared
        assert res.fun * (1 - 1e-9) <= ours <= res.fun * (1 + 1e-9)


def test_lad_with_more_regressors_than_observations_interpolates():
    """Secure aggregation: the aggregate has more regressors (shown documents) than coordinates.
    Any exact interpolation is an LAD optimum (objective 0), which the reweighted fit reaches."""
    from attacks.olsr import lad_batched

    rng = np.random.default_rng(11)
    n, m, P = 2, 40, 12
    A = rng.random((n, m, P))
    y = rng.normal(size=(n, P))
    coef = lad_batched(y, A)
    residual = np.abs(y - np.einsum("nm,nmp->np", coef, A)).sum(axis=1)
    assert np.all(residual <= 1e-3 * np.abs(y).sum(axis=1))


def test_l1_variant_recovers_clicks_under_sparse_heavy_tailed_noise():
    """A few coordinates hit by large noise (one client's dp-distributed share): least squares
    misses clicks, least absolute deviations still recovers them exactly."""
    rng = np.random.default_rng(11)
    F, k, n = 46, 10, 40
    features = rng.random((n * k, F)).astype(np.float32)
    shown = np.arange(n * k).reshape(n, 1, k)
    g = rng.normal(size=F)
    clicks = rng.random((n, 1, k)) < 0.3
    clicks[:, 0, 4] = True
    upd = np.stack([_pdgd_update(features[shown[i, 0]], clicks[i, 0], rng)[0] for i in range(n)])
    noise = np.where(rng.random((n, F)) < 0.1, rng.laplace(0, 20.0, (n, F)), 0.0)
    view = _view(features, shown, g + upd + noise, g)
    np.testing.assert_array_equal(make_attack("olsr-l1").guess(view).decision, clicks)
    assert (make_attack("olsr").guess(view).decision != clicks).any()


def test_lad_singular_reweighted_system_falls_back_to_pseudo_inverse():
    """Duplicate regressors with more regressors than observations made the reweighted normal
    equations exactly singular (numpy LinAlgError aborted the audit on unseen data). The fit now
    is finite, duplicates share, and the objective is no worse than the LP optimum + 1e-6
    (scipy HiGHS). A fallback that returns zeros or NaN fails the objective or finiteness check."""
    from scipy.optimize import linprog

    from attacks.olsr import lad_batched

    A = np.array([[[-1.0], [-1.0], [0.0], [0.0]]])
    y = np.array([[-1.0]])
    coef = lad_batched(y, A)
    assert np.isfinite(coef).all() and coef[0, 0] == pytest.approx(coef[0, 1])
    m, P = 4, 1
    c = np.r_[np.zeros(m), np.ones(P)]
    A_ub = np.block([[-A[0].T, -np.eye(P)], [A[0].T, -np.eye(P)]])
    best = linprog(c, A_ub=A_ub, b_ub=np.r_[-y[0], y[0]], bounds=[(None, None)] * m + [(0, None)] * P).fun
    assert np.abs(y[0] - coef[0] @ A[0]).sum() <= best + 1e-6


def test_olsr_counts_degenerate_lists():
    """Three clients, the second's list shows one document twice: its regression is rank
    deficient and ``Guess.degenerate`` counts exactly that one list for olsr and olsr-l1."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 12)).astype(np.float32)
    X[13] = X[12]
    shown = np.arange(30).reshape(3, 1, 10)
    g = rng.normal(size=12)
    vectors = g + rng.normal(size=(3, 12))
    view = _view(X, shown, vectors, g)
    for name in ("olsr", "olsr-l1"):
        guess = make_attack(name).guess(view)
        assert guess.degenerate == 1 and np.isfinite(guess.score).all()


@pytest.mark.parametrize("zero_column", [False, True])
def test_weighted_ridge_through_the_small_system_equals_the_large_one(monkeypatch, zero_column):
    """``_weighted_ridge`` with more regressors than observations solves the P x P system of the
    push-through identity: against the m x m normal equations where those are well conditioned
    (a ridge of 1e-6: condition number ~1e6, so to 1e-7 relative), with and without an observation
    no regressor touches;
    at the default ridge the fit is the minimum-norm interpolation ``pinv(A^T) y``.
    Catches: the weights on the wrong side, the ridge scaled differently, the transposed system."""
    from attacks import olsr

    rng = np.random.default_rng(5)
    n, m, P = 3, 40, 9
    A = rng.normal(size=(n, m, P))
    if zero_column:
        A[:, :, 4] = 0.0
    y = rng.normal(size=(n, P))
    Aw = A * rng.uniform(0.1, 1.0, size=(n, 1, P))
    At = np.swapaxes(A, 1, 2)
    monkeypatch.setattr(olsr, "RIDGE", 1e-6)
    G = Aw @ At
    ridge = 1e-6 * np.einsum("nii->ni", G).max(axis=1)
    large = np.linalg.solve(G + ridge[:, None, None] * np.eye(m), Aw @ y[:, :, None])[..., 0]
    np.testing.assert_allclose(olsr._weighted_ridge(A, At, Aw, y), large, rtol=1e-7, atol=1e-10)
    monkeypatch.setattr(olsr, "RIDGE", 1e-16)
    if not zero_column:
        exact = np.stack([np.linalg.pinv(A[i].T) @ y[i] for i in range(n)])
        np.testing.assert_allclose(olsr._weighted_ridge(A, At, Aw, y), exact, rtol=1e-8, atol=1e-10)
