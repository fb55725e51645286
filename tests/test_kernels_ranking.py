"""FPDGD's ranking kernels against numpy references (``fltr_audit.engine.kernels.ranking``)."""

import math

import numba
import numpy as np

from fltr_audit.engine import plackett_luce
from fltr_audit.engine.kernels.ranking import block_scores, rank_lists, top_positions


def _lists(seed, n=40, width=23):
    """n lists of 0..width scores (one empty, one of 1, one full) padded with -inf, and their noise."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, width + 1, n)
    counts[:3] = (0, 1, width)
    scores = np.full((n, width), -np.inf)
    valid = np.arange(width)[None, :] < counts[:, None]
    scores[valid] = rng.normal(scale=3.0, size=int(counts.sum()))
    noise = plackett_luce.gumbel_noise(rng, (int(counts.sum()),))
    return scores, valid, counts, noise, np.cumsum(counts) - counts


def _rank(scores, counts, noise, noise_starts, perturbed, k):
    n = len(counts)
    out = (np.full((n, k), 99, dtype=np.int64), np.full((n, k), 7.0), np.full((n, k + 1), 7.0))
    rank_lists(scores, counts, noise, noise_starts, perturbed, *out)
    return out


def _padded_noise(noise, counts, noise_starts, width):
    G = np.zeros((len(counts), width), dtype=np.float32)
    for i, (s, m) in enumerate(zip(noise_starts, counts)):
        G[i, :m] = noise[s:s + m]
    return G


def test_rank_lists_perturbed_is_the_gumbel_topk_of_each_lists_own_noise():
    """Positions equal ``plackett_luce.perturbed_topk`` given the same noise, laid out per list
    at ``noise_starts``; shown scores are the scores at those positions; empty slots -1 / -inf.
    Catches: another list's noise (an offset error), the noise ignored, a worse key kept at the
    k-th place, scores of the wrong position, stale output past a short list."""
    scores, valid, counts, noise, starts = _lists(1)
    G = _padded_noise(noise, counts, starts, scores.shape[1])
    for k in (1, 5, 10, 30):
        positions, shown_scores, _ = _rank(scores, counts, noise, starts, True, k)
        expected = plackett_luce.perturbed_topk(scores, valid, k, G)
        assert np.array_equal(positions, expected)
        ok = expected >= 0
        assert np.array_equal(shown_scores[ok], np.take_along_axis(scores, np.where(ok, expected, 0), axis=1)[ok])
        assert (shown_scores[~ok] == -np.inf).all()
    unperturbed, _, _ = _rank(scores, counts, noise, starts, False, 5)
    assert not np.array_equal(unperturbed, _rank(scores, counts, noise, starts, True, 5)[0])


def test_rank_lists_unperturbed_is_the_topk_by_score_ties_to_the_lower_position():
    """Rounded scores with many ties, -inf scores on valid documents (below every finite one,
    above the padding): the same positions as ``plackett_luce.topk``.
    Catches: ties broken against the position, -inf documents not shown after the finite ones
    (or shown as padding), the noise added when unperturbed."""
    scores, valid, counts, noise, starts = _lists(2)
    scores = np.where(valid, np.round(scores), -np.inf)
    scores[2, ::4] = -np.inf                       # the full list: some valid documents at -inf
    for k in (1, 3, 10, 23):
        positions, _, _ = _rank(scores, counts, noise, starts, False, k)
        assert np.array_equal(positions, plackett_luce.topk(scores, valid, k))
    assert (positions[2, -6:] % 4 == 0).all() and (positions[2, :-6] % 4 != 0).all()


def test_rank_lists_log_denominators_match_the_numpy_reference():
    """``log_dens`` (k + 1 columns) against ``plackett_luce.log_denominators`` of the ranking with
    one extra empty slot, to 1e-13 relative (libm's and numpy's ``exp`` may differ in the last
    bit); -inf where nothing remains; dominated scores (a spread of 800) do not cancel.
    Catches: a placed document counted in the rest, the rest's sum not max-shifted (overflow at
    +700), the reverse running sum in the wrong direction, the k-th column missing."""
    scores, valid, counts, noise, starts = _lists(3)
    scores[5, :counts[5]] += np.linspace(-400, 400, counts[5])
    for perturbed in (True, False):
        for k in (1, 10, 30):
            positions, _, log_dens = _rank(scores, counts, noise, starts, perturbed, k)
            extended = np.concatenate([positions, np.full((len(counts), 1), -1)], axis=1)
            expected = plackett_luce.log_denominators(scores, valid, extended)
            assert np.array_equal(np.isneginf(log_dens), np.isneginf(expected))
            finite = np.isfinite(expected)
            assert np.isfinite(log_dens[finite]).all()
            np.testing.assert_allclose(log_dens[finite], expected[finite], rtol=1e-13, atol=0)
    assert (log_dens[0] == -np.inf).all() and log_dens[1, 0] == scores[1, 0] and log_dens[1, 1] == -np.inf


def test_block_scores_are_float32_dot_products_with_a_float64_fallback():
    """Each row's score within ``(F + 2) 2^-24 sum_f |x_f w_f|`` of the float64 product, whatever
    the block's length or place; a block whose model overflows float32 (1e36) is scored in float64
    (to float64 rounding), the others in float32 unchanged; nothing written past ``counts[i]``.
    Catches: a row of another block or model, an off-by-one start, a missing fallback (inf), the
    fallback's float64 model taken for every block, writes into the padding."""
    rng = np.random.default_rng(4)
    F = 45
    X = rng.normal(size=(300, F)).astype(np.float32)
    starts = np.array([0, 7, 7, 100, 250, 299])
    counts = np.array([7, 0, 93, 150, 50, 1])
    models = rng.normal(size=(len(starts), F))
    huge = models.copy()
    huge[3] *= 1e36
    for params in (models, huge):
        out = np.full((len(starts), 160), 5.0)
        block_scores(X, starts, counts, params.astype(np.float32), params, 1e30, out)
        for i, (s, m) in enumerate(zip(starts, counts)):
            exact = X[s:s + m].astype(np.float64) @ params[i]
            bound = (F + 2) * 2.0 ** -24 * (np.abs(X[s:s + m].astype(np.float64)) @ np.abs(params[i]))
            assert (np.abs(out[i, :m] - exact) <= bound).all()
            assert (out[i, m:] == 5.0).all()
        if params is huge:  # float64 rounding only
            big = np.abs(X[100:250].astype(np.float64)) @ np.abs(huge[3])
            assert (np.abs(out[3, :150] - X[100:250].astype(np.float64) @ huge[3]) <= (F + 2) * 2.0 ** -52 * big).all()
    plain = np.full((len(starts), 160), 5.0)
    block_scores(X, starts, counts, models.astype(np.float32), models, 1e30, plain)
    assert np.array_equal(np.delete(out, 3, axis=0), np.delete(plain, 3, axis=0))


def test_top_positions_is_the_topk_per_query_with_nan_first_and_ties_to_the_lower_position():
    """Queries of 0..23 documents laid end to end; rounded scores (ties), -inf and NaN scores: the
    same positions as ``plackett_luce.topk`` (argmax passes: NaN first, ties to the lower position)
    on the padded lists, -1 past a query's end.
    Catches: a query's rows offset by one, ties broken against the position, a NaN dropped or
    ranked last (as a sort would), -inf documents dropped, padding inside a short query's top k."""
    scores, valid, counts, _, _ = _lists(5)
    scores = np.where(valid, np.round(scores), -np.inf)
    scores[2, 3] = scores[2, 9] = np.nan
    scores[2, ::5] = -np.inf
    flat = scores[valid]
    ptr = np.concatenate([[0], np.cumsum(counts)])
    for k in (1, 4, 10, 16):
        out = np.full((len(counts), k), 99, dtype=np.int64)
        top_positions(flat, ptr, out)
        assert np.array_equal(out, plackett_luce.topk(np.where(valid, scores, -np.inf), valid, k))
    assert out[2, 0] == 3 and out[2, 1] == 9


@numba.njit
def _plain_logaddexp(x, y):
    if x == y:
        return x + math.log(2.0)
    d = x - y
    if d > 0:
        return x + math.log1p(math.exp(-d))
    if d <= 0:
        return y + math.log1p(math.exp(d))
    return d


@numba.njit
def _plain_expit(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_the_exp_underflow_shortcut_changes_no_bit():
    """``_logaddexp`` and ``pdgd._expit`` skip ``exp`` below ``EXP_ZERO_BELOW``, where it is exactly
    0.0: against the formulas that always call it (compiled alike, the same libm), bit for bit,
    on differences across the underflow edge (-800 .. 800 in steps of 1/8, so +-745.13, where exp
    leaves the subnormals, is crossed), at 0, -0.0, tiny and large magnitudes, infinities and NaN.
    Catches: a threshold above the underflow edge (a subnormal term dropped, visible on 0.0), the
    comparison reversed, the shortcut returning ``x`` instead of ``x + 0.0`` (-0.0 kept)."""
    from fltr_audit.engine.kernels.pdgd import _expit
    from fltr_audit.engine.kernels.ranking import EXP_ZERO_BELOW, _logaddexp

    assert math.exp(EXP_ZERO_BELOW) == 0.0
    diffs = np.concatenate([np.arange(-800, 800.001, 0.125), [np.inf, -np.inf, np.nan]])
    for base in (0.0, -0.0, 5e-324, 1e-310, 1.5, -3e4, 1e4, np.inf, -np.inf):
        for d in diffs.tolist():
            for x, y in ((base, base - d), (base - d, base)):
                got, want = _logaddexp(x, y), _plain_logaddexp(x, y)
                assert np.array_equal(np.float64(got).view(np.int64), np.float64(want).view(np.int64)) or (
                    math.isnan(got) and math.isnan(want)), (x, y, got, want)
    for x in np.concatenate([diffs, -diffs]):
        got, want = _expit(x), _plain_expit(x)
        assert got == want or (math.isnan(got) and math.isnan(want)), (x, got, want)


def test_a_nan_left_among_the_unshown_makes_the_rest_nan_as_the_reference():
    """More NaN scores than shown slots (NaN keys go first, so one stays unshown) beside a score
    2,000 below the best: the log-denominators are NaN, as ``plackett_luce.log_denominators``
    gives them, not a finite sum that skipped the NaN with the underflowing score (catches the
    underflow shortcut applied to NaN)."""
    scores = np.array([[1.0, np.nan, 0.5, np.nan, -2000.0, np.nan]])
    counts, starts = np.array([6]), np.array([0])
    positions, _, log_dens = _rank(scores, counts, np.zeros(6, dtype=np.float32), starts, False, 2)
    extended = np.concatenate([positions, [[-1]]], axis=1)
    with np.errstate(invalid="ignore"):
        expected = plackett_luce.log_denominators(scores, np.ones((1, 6), dtype=bool), extended)
    assert np.isnan(expected).all() and np.isnan(log_dens).all()
