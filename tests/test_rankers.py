"""Rankers: scores against a direct formula, grad and vjp against central finite differences."""

import numpy as np
import pytest

from fltr_audit.errors import FltrError
from fltr_audit.rankers import LinearRanker, MLPRanker, make_ranker

F = 5


def _ranker(name):
    return make_ranker(name, F)


def _params(ranker, rng, n=None):
    shape = (ranker.n_params,) if n is None else (n, ranker.n_params)
    return rng.normal(size=shape)


def _fd_grad(ranker, params, X, eps=1e-6):
    """Central differences of every score w.r.t. every parameter: X.shape[:-1] + (P,)."""
    out = np.empty(X.shape[:-1] + (ranker.n_params,))
    for p in range(ranker.n_params):
        e = np.zeros_like(params)
        e[..., p] = eps
        out[..., p] = (ranker.score(params + e, X) - ranker.score(params - e, X)) / (2 * eps)
    return out


def test_scores_match_direct_formula():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, F)).astype(np.float32)
    lin = LinearRanker(F)
    w = rng.normal(size=F)
    np.testing.assert_allclose(lin.score(w, X), X.astype(np.float64) @ w, rtol=1e-12)
    mlp = MLPRanker(F)
    p = _params(mlp, rng)
    W = p[: 10 * F].reshape(10, F)
    b, v = p[10 * F: 10 * F + 10], p[10 * F + 10:]
    expected = np.array([v @ np.maximum(W @ x + b, 0) for x in X.astype(np.float64)])
    np.testing.assert_allclose(mlp.score(p, X), expected, rtol=1e-12)
    assert mlp.n_params == 10 * F + 20


@pytest.mark.parametrize("name", ["linear", "mlp"])
def test_batched_scores_equal_per_client_scores(name):
    rng = np.random.default_rng(1)
    ranker = _ranker(name)
    params = _params(ranker, rng, n=3)
    X = rng.normal(size=(3, 2, 4, F)).astype(np.float32)
    batched = ranker.score(params, X)
    assert batched.shape == (3, 2, 4)
    for i in range(3):
        np.testing.assert_allclose(batched[i], ranker.score(params[i], X[i]), rtol=1e-12)


@pytest.mark.parametrize("name", ["linear", "mlp"])
@pytest.mark.parametrize("batched", [False, True])
def test_grad_and_vjp_match_finite_differences(name, batched):
    # Random normal parameters and features keep every hidden pre-activation away from the
    # ReLU kink (|z| >> eps = 1e-6 with probability ~1), so central differences are exact up
    # to rounding (~1e-10 relative): a tolerance of 1e-6 separates that from any real error.
    rng = np.random.default_rng(2)
    ranker = _ranker(name)
    n = 3 if batched else None
    params = _params(ranker, rng, n)
    X = rng.normal(size=((3,) if batched else ()) + (2, 6, F)).astype(np.float32)
    fd = _fd_grad(ranker, params, X)
    g = ranker.grad(params, X)
    assert g.shape == X.shape[:-1] + (ranker.n_params,)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    coef = rng.normal(size=X.shape[:-1])
    v = ranker.vjp(params, X, coef)
    axes = tuple(range(1 if batched else 0, X.ndim - 1))
    expected = (coef[..., None] * fd).sum(axis=axes)
    assert v.shape == params.shape
    np.testing.assert_allclose(v, expected, rtol=1e-6, atol=1e-6)


def test_init_params():
    assert not LinearRanker(F).init_params().any()
    mlp = MLPRanker(F)
    assert not mlp.init_params().any()  # FOLtR-ES: all zeros
    p = mlp.init_params(np.random.default_rng(0))
    assert p.shape == (mlp.n_params,) and np.all(p != 0)
    # a random init gives the MLP a non-zero gradient (PDGD needs one), zeros do not
    X = np.random.default_rng(1).normal(size=(4, F)).astype(np.float32)
    assert np.abs(mlp.grad(p, X)).sum() > 0
    assert np.abs(mlp.grad(mlp.init_params(), X)).sum() == 0


def test_make_ranker_rejects_unknown_name_and_bad_shapes():
    with pytest.raises(FltrError, match="^ranker: "):
        make_ranker("tree", F)
    r = make_ranker("linear", F)
    with pytest.raises(ValueError):
        r.score(np.zeros(F + 1), np.zeros((2, F), np.float32))
    with pytest.raises(ValueError):
        r.score(np.zeros((3, F)), np.zeros((2, 4, F), np.float32))


@pytest.mark.parametrize("name", ["linear", "mlp"])
def test_score_blocks_equals_score_per_block_bit_for_bit(name):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 12)).astype(np.float32)
    ranker = make_ranker(name, 12)
    counts = np.array([5, 40, 1, 17, 60])
    starts = np.array([0, 10, 90, 100, 200])
    params = rng.normal(size=(len(counts), ranker.n_params))
    flat = ranker.score_blocks(params, X, starts, counts)
    expected = np.concatenate([ranker.score(p, X[s:s + c]) for p, s, c in zip(params, starts, counts)])
    assert np.array_equal(flat, expected)
    padded = ranker.score_blocks(params, X, starts, counts, out=np.full((len(counts), 60), np.nan))
    for i, c in enumerate(counts):
        assert np.array_equal(padded[i, :c], ranker.score(params[i], X[starts[i]:starts[i] + c]))
