"""Rankers: scores against a direct formula, grad and vjp against central finite differences."""

import numpy as np
import pytest

from fltr_audit.errors import FltrError
from fltr_audit.engine.rankers import LinearRanker, MLPRanker, make_ranker

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


def test_mlp_score_blocks_equals_score_per_block_bit_for_bit():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 12)).astype(np.float32)
    ranker = make_ranker("mlp", 12)
    counts = np.array([5, 40, 1, 17, 60])
    starts = np.array([0, 10, 90, 100, 200])
    params = rng.normal(size=(len(counts), ranker.n_params))
    flat = ranker.score_blocks(params, X, starts, counts)
    expected = np.concatenate([ranker.score(p, X[s:s + c]) for p, s, c in zip(params, starts, counts)])
    assert np.array_equal(flat, expected)
    padded = ranker.score_blocks(params, X, starts, counts, out=np.full((len(counts), 60), np.nan))
    for i, c in enumerate(counts):
        assert np.array_equal(padded[i, :c], ranker.score(params[i], X[starts[i]:starts[i] + c]))


def _blocks_case(seed=7, F=136):
    rng = np.random.default_rng(seed)
    counts = np.array([5, 40, 1, 17, 60, 130, 3, 700])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) + np.arange(len(counts))  # a gap row between blocks
    X = rng.normal(size=(int(starts[-1] + counts[-1] + 3), F)).astype(np.float32)
    return X, starts, counts, rng.normal(size=(len(counts), F))


def test_linear_score_blocks_agree_with_float64_within_float32_rounding():
    """float32 products summed in float32 (docs/commands/bench.md, "Numerics"): each score
    within 136 * 2^-24 * sum |x_f w_f| of the float64 one -- the bound of a float32 dot product
    of 136 terms (Higham, Accuracy and Stability, Eq. 3.5) -- and the padded form equal to the
    flat one. Catches: the float64 weights used unrounded in a float32 path that mixes types,
    scores of the wrong block, padding overwritten."""
    X, starts, counts, params = _blocks_case()
    ranker = make_ranker("linear", X.shape[1])
    flat = ranker.score_blocks(params, X, starts, counts)
    assert flat.dtype == np.float64
    o = 0
    for p, s, c in zip(params, starts, counts):
        R = X[s:s + c].astype(np.float64)
        bound = X.shape[1] * 2.0 ** -24 * (np.abs(R) @ np.abs(p)) + 1e-30
        err = np.abs(flat[o:o + c] - R @ p)
        assert (err <= bound).all() and err.max() > 0  # float32 indeed (a float64 path has err ~ 1e-16 * bound)
        o += c
    padded = ranker.score_blocks(params, X, starts, counts, out=np.full((len(counts), 800), np.nan))
    for i, (s, c) in enumerate(zip(np.cumsum(counts) - counts, counts)):
        assert np.array_equal(padded[i, :c], flat[s:s + c]) and np.isnan(padded[i, c:]).all()


def test_linear_score_blocks_do_not_depend_on_neighbours_address_or_blas_threads():
    """Reproducibility of FPDGD's ranking: a block scored alone, among other blocks, from an
    unaligned or non-float32 copy of the features, or with 3 BLAS threads gives the same bits.
    Catches: one BLAS call over several blocks (sgemv rounds a row by its place), numpy's
    non-BLAS loop on unaligned rows, a thread-count dependent split."""
    from threadpoolctl import threadpool_limits

    X, starts, counts, params = _blocks_case(8)
    ranker = make_ranker("linear", X.shape[1])
    with threadpool_limits(1, "blas"):
        together = ranker.score_blocks(params, X, starts, counts)
        alone = np.concatenate([ranker.score_blocks(params[i:i + 1], X, starts[i:i + 1], counts[i:i + 1])
                                for i in range(len(counts))])
        raw = np.empty(X.nbytes + 2, np.uint8)
        unaligned = np.frombuffer(raw[2:].data, dtype=np.float32).reshape(X.shape)
        unaligned[...] = X
        assert not unaligned.flags.aligned
        moved = ranker.score_blocks(params, unaligned, starts, counts)
        wide = ranker.score_blocks(params, X.astype(np.float64), starts, counts)
    with threadpool_limits(3, "blas"):
        threaded = ranker.score_blocks(params, X, starts, counts)
    for other in (alone, moved, wide, threaded):
        assert np.array_equal(together, other)


def test_score_float32_models_do_not_depend_on_the_other_models_column_address_or_blas_threads():
    """Offline evaluation scores several rounds' models in one pass (one sgemm of EVAL_MODELS
    columns per EVAL_BLOCK rows): each model's scores have the same bits alone (``score_float32``), among
    2, 7 or 12 other models in any column, from an unaligned or float64 copy of the rows, with 3
    BLAS threads; each within the float32 dot-product bound of float64 (Higham Eq. 3.5).
    Catches: a product as wide as the number of models (sgemm rounds by width), numpy's non-BLAS
    loop on unaligned rows, a product large enough for OpenBLAS to split across threads, a model's
    scores in another model's row, a lost last block of rows."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(9)
    X = (rng.random((9000, 136)) * rng.integers(1, 100, 136)).astype(np.float32)
    models = rng.normal(size=(13, 136))
    ranker = make_ranker("linear", 136)
    with threadpool_limits(1, "blas"):
        alone = np.stack([ranker.score_float32(w, X) for w in models])
        raw = np.empty(X.nbytes + 2, np.uint8)
        unaligned = np.frombuffer(raw[2:].data, dtype=np.float32).reshape(X.shape)
        unaligned[...] = X
        assert not unaligned.flags.aligned
        batches = [ranker.score_float32_models(models, X), ranker.score_float32_models(models, unaligned),
                   ranker.score_float32_models(models, X.astype(np.float64))]
        for order in (np.arange(3), rng.permutation(13)[:8], rng.permutation(13)):
            batches.append(ranker.score_float32_models(models[order], X)[np.argsort(order)])
            alone_part = alone[np.sort(order)]
            assert np.array_equal(batches[-1], alone_part)
        batches.pop()
    with threadpool_limits(3, "blas"):
        batches.append(ranker.score_float32_models(models, X))
    for batch in batches[:3] + batches[-1:]:
        assert np.array_equal(batch, alone)
    R = X.astype(np.float64)
    assert (np.abs(alone - models @ R.T) <= 136 * 2.0 ** -24 * (np.abs(models) @ np.abs(R).T)).all()
    mlp = make_ranker("mlp", X.shape[1])
    p = mlp.init_params(np.random.default_rng(0))
    assert np.array_equal(mlp.score_float32(p, X[:50]), mlp.score(p, X[:50]))
    assert np.array_equal(mlp.score_float32_models(np.stack([p, 2 * p]), X[:50])[1], mlp.score(2 * p, X[:50]))


def test_float32_scores_fall_back_to_float64_for_huge_models():
    """A model beyond float32's range (e.g. after a noisy defense) is scored in float64 rather
    than giving inf or NaN scores. Catches: the fallback missing or applied to the wrong rows."""
    X, starts, counts, params = _blocks_case(10, F=6)
    ranker = make_ranker("linear", 6)
    huge = params * 1e36
    blocks = ranker.score_blocks(huge, X, starts, counts)
    expected = np.concatenate([np.einsum("ij,j->i", X[s:s + c].astype(np.float64), p)
                               for p, s, c in zip(huge, starts, counts)])
    assert np.isfinite(blocks).all()
    np.testing.assert_allclose(blocks, expected, rtol=1e-12)
    np.testing.assert_allclose(ranker.score_float32(huge[0], X), X.astype(np.float64) @ huge[0], rtol=1e-12)
    both = ranker.score_float32_models(np.stack([params[1], huge[0]]), X)  # only the huge model's rows
    assert np.array_equal(both[0], ranker.score_float32(params[1], X))
    np.testing.assert_allclose(both[1], X.astype(np.float64) @ huge[0], rtol=1e-12)




def test_vjp_rows_equals_vjp_of_the_gathered_rows():
    """Linear (compiled, nonzero coefficients only) and MLP rankers: ``vjp_rows`` over row indices
    equals ``vjp`` over the gathered rows, zero coefficients on repeated row 0 (empty slots).
    Catches: another list's rows or coefficients, a skipped nonzero coefficient, a stale sum."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(40, 6)).astype(np.float32)
    rows = rng.integers(0, 40, (5, 4))
    coef = rng.normal(size=(5, 4))
    coef[1] = 0.0
    coef[2, 1:] = 0.0
    rows[2, 1:] = 0
    for ranker in (LinearRanker(6), MLPRanker(6, hidden=3)):
        params = ranker.init_params(np.random.default_rng(1)) + rng.normal(size=ranker.n_params)
        params = np.broadcast_to(params, (5, ranker.n_params))
        expected = ranker.vjp(params, X[rows], coef)
        np.testing.assert_allclose(ranker.vjp_rows(params, X, rows, coef), expected, rtol=1e-12, atol=1e-14)
        assert (ranker.vjp_rows(params, X, rows, coef)[1] == 0).all()


def test_scaled_output_scales_every_score_and_keeps_the_linear_capability_declared():
    """Both rankers: ``scaled_output(params, c)`` scores exactly c times ``params``'s (the malicious
    server's saturated model); ``linear`` is declared on the type. Catches: the MLP's hidden layer
    scaled too (scores times c^2), the input params modified in place, a ranker without the flag."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 5)).astype(np.float32)
    for ranker, linear in ((LinearRanker(5), True), (MLPRanker(5, hidden=4), False)):
        params = ranker.init_params(rng) + rng.normal(size=ranker.n_params)
        before = params.copy()
        np.testing.assert_allclose(ranker.score(ranker.scaled_output(params, 7.0), X), 7.0 * ranker.score(params, X),
                                   rtol=1e-12, atol=1e-12)
        assert np.array_equal(params, before)
        assert type(ranker).linear is linear
