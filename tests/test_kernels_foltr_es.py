"""FOLtR-ES's ranking kernels against numpy references (``fltr_audit.engine.kernels.foltr_es``)."""

import numpy as np

from fltr_audit.engine.kernels.foltr_es import linear_scores, linear_shown, perturbation_uniforms


def _reference_scores(X, lo, hi, theta):
    """float32 products summed left to right in float32 (``cumsum`` is sequential), float64 in
    the same order when a float32 score is beyond 1e30 or not finite."""
    R = X[lo:hi]
    s = np.cumsum(R * theta.astype(np.float32), axis=1, dtype=np.float32)[:, -1]
    if not (np.abs(s) <= 1e30).all():
        s = np.cumsum(R.astype(np.float64) * theta, axis=1)[:, -1]
    return s.astype(np.float64)


def _case(seed, n=10, B=4, F=13):
    """n clients x B queries over 12 queries (one empty, one of 2 rows) of up to 29 rows."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 30, 12)
    counts[:2] = (0, 2)                           # an empty list and a short one
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(ptr[-1], F)).astype(np.float32)
    queries = rng.integers(0, 12, n * B)
    queries[:2] = (0, 1)
    side = np.array([0.3, 0.3, -0.3, -0.3])[:B]
    return X, ptr, queries, B, side, rng.normal(size=F), rng.normal(size=(n, F))


def _read_only(V):
    """V as the algorithm passes it (``cohort_perturbations`` is read-only): the same compiled
    variant of the kernels as training, so the tests compile nothing extra."""
    V.flags.writeable = False
    return V


def _thetas(queries, B, side, params, V):
    i = np.arange(len(queries))
    return side[i % B][:, None] * V[i // B] + params


def test_linear_scores_are_the_sequential_float32_sums_of_each_interactions_model():
    """Bit for bit the reference's in-order float32 sums of x_f float32(coef V_c + params);
    an interaction whose model is huge (1e36: float32 overflow) alone in float64; only the
    interactions asked for, in the order asked.
    Catches: another interaction's model or rows, a pairwise or reordered sum, the float64
    fallback applied to the whole call (the others' bits would change) or not at all (inf)."""
    X, ptr, queries, B, side, params, V = _case(1)
    V[4] *= 1e36
    which = np.random.default_rng(0).permutation(len(queries))[:30]
    D = ptr[queries + 1] - ptr[queries]
    out = np.full((len(which), int(D.max())), 7.0)
    linear_scores(X, ptr, queries, B, side, params, _read_only(V), which, out)
    thetas = _thetas(queries, B, side, params, V)
    assert (which // B == 4).any() and (which // B != 4).any()
    for t, i in enumerate(which):
        lo, hi = ptr[queries[i]], ptr[queries[i] + 1]
        assert np.array_equal(out[t, :hi - lo], _reference_scores(X, lo, hi, thetas[i]))
        assert (out[t, hi - lo:] == 7.0).all()
        assert np.isfinite(out[t, :hi - lo]).all()


def test_linear_shown_is_by_score_then_position():
    """The rows of each interaction's top k against a brute force sort by (-score, position):
    repeated rows (ties), negative scores, lists shorter than k and empty lists; only the
    interactions asked for are written.
    Catches: ties broken against the position, a worse score kept over a better one at the
    k-th place, positions not offset to rows, padding or stale entries past a short list."""
    X, ptr, queries, B, side, params, V = _case(2)
    X[1::3] = X[0::3][:len(X[1::3])]            # neighbouring rows with the same features
    thetas = _thetas(queries, B, side, params, V)
    which = np.flatnonzero(np.arange(len(queries)) % 5 != 3)[::-1].copy()
    for k in (1, 4, 10):
        shown = np.full((len(queries), k), 99, dtype=np.int64)
        has_nan = np.zeros(len(queries), dtype=bool)
        linear_shown(X, ptr, queries, B, side, params, _read_only(V), which, shown, has_nan)
        assert not has_nan.any()
        for i in range(len(queries)):
            if i not in which:
                assert (shown[i] == 99).all()
                continue
            lo, hi = ptr[queries[i]], ptr[queries[i] + 1]
            s = _reference_scores(X, lo, hi, thetas[i])
            expect = [lo + d for d in sorted(range(len(s)), key=lambda d: (-s[d], d))[:k]]
            assert shown[i].tolist() == expect + [-1] * (k - len(expect))
    D = ptr[queries + 1] - ptr[queries]
    assert any(D == 0) and any((D > 0) & (D < 4))


def test_linear_shown_flags_an_interaction_with_a_nan_score():
    """A NaN score (inf - inf of a degenerate model) is flagged for that client's interactions
    only. Catches: NaN silently ranked (compares false), the flag set on the wrong interaction."""
    X, ptr, queries, B, side, params, V = _case(3)
    V[2, 0], V[2, 1] = np.inf, -np.inf
    X[:, :2] = 1.0
    shown = np.empty((len(queries), 3), dtype=np.int64)
    has_nan = np.zeros(len(queries), dtype=bool)
    linear_shown(X, ptr, queries, B, side, params, _read_only(V), np.arange(len(queries)), shown, has_nan)
    D = ptr[queries + 1] - ptr[queries]
    assert has_nan.tolist() == ((np.arange(len(queries)) // B == 2) & (D > 0)).tolist()
    assert has_nan.any()


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
