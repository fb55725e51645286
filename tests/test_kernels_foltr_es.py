"""FOLtR-ES's ranking kernels against numpy references (``fltr_audit.kernels.foltr_es``)."""

import numpy as np

from fltr_audit.kernels.foltr_es import linear_scores, linear_top_k, perturbation_uniforms


def _reference_scores(X, lo, hi, theta):
    """float32 products summed left to right in float32 (``cumsum`` is sequential), float64 in
    the same order when a float32 score is beyond 1e30 or not finite."""
    R = X[lo:hi]
    s = np.cumsum(R * theta.astype(np.float32), axis=1, dtype=np.float32)[:, -1]
    if not (np.abs(s) <= 1e30).all():
        s = np.cumsum(R.astype(np.float64) * theta, axis=1)[:, -1]
    return s.astype(np.float64)


def _case(seed, n=40, F=13):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 30, 12)
    counts[:2] = (0, 2)                           # an empty list and a short one
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(ptr[-1], F)).astype(np.float32)
    q = rng.integers(0, 12, n)
    q[:2] = (0, 1)
    V = rng.normal(size=(9, F))
    client, coef = rng.integers(0, 9, n), rng.choice([-0.3, 0.3], n)
    return X, ptr[q], ptr[q + 1], rng.normal(size=F), V, client, coef


def _thetas(params, V, client, coef):
    return coef[:, None] * V[client] + params


def test_linear_scores_are_the_sequential_float32_sums_of_each_interactions_model():
    """Bit for bit the reference's in-order float32 sums of x_f float32(coef V_c + params);
    an interaction whose model is huge (1e36: float32 overflow) alone in float64.
    Catches: another interaction's model or rows, a pairwise or reordered sum, the float64
    fallback applied to the whole call (the others' bits would change) or not at all (inf)."""
    X, lo, hi, params, V, client, coef = _case(1)
    V[4] *= 1e36
    out = np.full((len(lo), int((hi - lo).max())), 7.0)
    linear_scores(X, lo, hi, params, V, client, coef, out)
    thetas = _thetas(params, V, client, coef)
    assert (client == 4).any() and (client != 4).any()
    for i in range(len(lo)):
        D = hi[i] - lo[i]
        assert np.array_equal(out[i, :D], _reference_scores(X, lo[i], hi[i], thetas[i]))
        assert (out[i, D:] == 7.0).all()
        assert np.isfinite(out[i, :D]).all()


def test_linear_top_k_is_by_score_then_position():
    """The top k of each interaction's scores against a brute force sort by (-score, position):
    repeated rows (ties), negative scores, lists shorter than k and empty lists.
    Catches: ties broken against the position, a worse score kept over a better one at the
    k-th place, padding or stale positions past a short list."""
    X, lo, hi, params, V, client, coef = _case(2)
    X[1::3] = X[0::3][:len(X[1::3])]            # neighbouring rows with the same features
    for k in (1, 4, 10):
        pos = np.full((len(lo), k), 99, dtype=np.int64)
        has_nan = linear_top_k(X, lo, hi, params, V, client, coef, pos)
        assert not has_nan.any()
        thetas = _thetas(params, V, client, coef)
        for i in range(len(lo)):
            s = _reference_scores(X, lo[i], hi[i], thetas[i])
            expect = sorted(range(len(s)), key=lambda d: (-s[d], d))[:k]
            assert pos[i].tolist() == expect + [-1] * (k - len(expect))
    assert any(hi - lo == 0) and any((hi - lo > 0) & (hi - lo < 4))


def test_linear_top_k_flags_an_interaction_with_a_nan_score():
    """A NaN score (inf - inf of a degenerate model) is flagged for that interaction only.
    Catches: NaN silently ranked (compares false), the flag set on the wrong interaction."""
    X, lo, hi, params, V, client, coef = _case(3)
    hit = int(np.flatnonzero(hi - lo > 0)[0])
    V[client[hit], 0], V[client[hit], 1] = np.inf, -np.inf
    X[lo[hit]:hi[hit], :2] = 1.0
    pos = np.empty((len(lo), 3), dtype=np.int64)
    has_nan = linear_top_k(X, lo, hi, params, V, client, coef, pos)
    assert has_nan.tolist() == ((client == client[hit]) & (hi > lo)).tolist()


def _reference_uniforms(seeds, P):
    """The SplitMix64 counter stream in numpy (uint64 arithmetic wraps mod 2^64)."""
    def mix(z):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))
    with np.errstate(over="ignore"):
        counters = np.arange(1, P + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = mix(mix(seeds)[:, None] + counters[None, :])
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53


def test_perturbation_uniforms_are_the_splitmix64_stream():
    """Bit for bit the numpy SplitMix64 stream, for seeds up to 2^64 - 1 (wrapping sums and
    products). Catches: a signed shift or product, the counter starting at 0, another mixer
    constant, the low bits kept instead of the top 53."""
    seeds = np.concatenate([np.random.default_rng(4).integers(0, 2**64, 50, dtype=np.uint64),
                            np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)])
    out = np.empty((len(seeds), 23))
    perturbation_uniforms(seeds, out)
    assert np.array_equal(out, _reference_uniforms(seeds, 23))
    assert (out > 0).all() and (out < 1).all()
