"""FPDGD / PDGD: rho (Eq. 6), the gradient (Eq. 5) and the local updates against brute force."""

import numpy as np
import pytest
from scipy.special import expit

from fltr_audit.engine import plackett_luce
from fltr_audit.engine.algorithms.fpdgd import FPDGD, pair_weights, pdgd_cohort
from fltr_audit.engine.algorithms.pdgd import PDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.kernels.pdgd import swap_log_ratios
from fltr_audit.engine.rankers import LinearRanker, MLPRanker


# ---------------------------------------------------------------- brute force, one list at a time

def pl_log_prob(scores, ranking):
    """log P(ranking | scores) of Eq. 2 over the full candidate set, one factor at a time."""
    remaining = list(range(len(scores)))
    total = 0.0
    for d in ranking:
        top = max(scores[j] for j in remaining)
        total += scores[d] - (top + np.log(sum(np.exp(scores[j] - top) for j in remaining)))
        remaining.remove(d)
    return total


def brute_log_ratio(scores, ranking, i, j):
    """log P(R*) - log P(R) with R* built explicitly (positions i and j swapped)."""
    swapped = list(ranking)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    return pl_log_prob(scores, swapped) - pl_log_prob(scores, ranking)


def brute_rho(scores, ranking, i, j):
    """Eq. 6: P(R*) / (P(R) + P(R*)) = 1 / (1 + P(R) / P(R*))."""
    return expit(brute_log_ratio(scores, ranking, i, j))


def brute_pairs(clicks):
    """PDGD preferences in a plain loop: (clicked, unclicked at or above last click + 1)."""
    clicked = [i for i, c in enumerate(clicks) if c]
    if not clicked:
        return []
    last = clicked[-1]
    return [(i, j) for i in clicked for j in range(len(clicks)) if not clicks[j] and j <= last + 1]


def brute_gradient(scores, ranking, clicks, dgrad):
    """Eq. 5 pair by pair: sum rho * e^a e^b / (e^a + e^b)^2 * (f'(d_k) - f'(d_l)).

    ``scores`` are the full candidate set's scores, ``ranking`` the shown candidate
    positions, ``dgrad(c)`` the gradient of the score of candidate c.
    """
    grad = 0.0
    for i, j in brute_pairs(clicks):
        a, b = scores[ranking[i]], scores[ranking[j]]
        w = brute_rho(scores, ranking, i, j) * np.exp(a) * np.exp(b) / (np.exp(a) + np.exp(b)) ** 2
        grad = grad + w * (dgrad(ranking[i]) - dgrad(ranking[j]))
    return grad


def fast_log_dens(scores, ranking):
    ext = np.concatenate([ranking, [-1]])
    return plackett_luce.log_denominators(scores[None], None, ext[None])


def all_pair_log_ratios(shown_scores, log_dens):
    """swap_log_ratios of one list for every pair a < b, in triu_indices order."""
    k = shown_scores.shape[1]
    table = np.full((k, k), np.nan)
    swap_log_ratios(shown_scores[0], log_dens[0], table)
    return table[np.triu_indices(k, 1)]


# ---------------------------------------------------------------- rho

@pytest.mark.parametrize("scale", [1.0, 30.0, 800.0])
def test_rho_matches_brute_force_with_ties_and_extreme_scores(scale):
    rng = np.random.default_rng(int(scale))
    for trial in range(60):
        m = int(rng.integers(2, 14))
        k = int(min(m, rng.integers(2, 8)))
        scores = rng.normal(size=m) * scale
        if trial % 3 == 0:                      # ties
            scores = np.round(scores / scale) * scale
        if trial % 5 == 0:                      # all equal
            scores = np.full(m, 2.0)
        ranking = rng.permutation(m)[:k]
        log_ratio = all_pair_log_ratios(scores[ranking][None], fast_log_dens(scores, ranking))
        for p, (i, j) in enumerate(zip(*np.triu_indices(k, 1))):
            brute = brute_log_ratio(scores, ranking, i, j)
            # both sides are exact up to float64 rounding of sums of <= 14 terms of size ~scale
            assert log_ratio[p] == pytest.approx(brute, rel=1e-9, abs=1e-12 * scale)
            assert expit(log_ratio[p]) == pytest.approx(expit(brute), rel=1e-9, abs=1e-12)


def test_rho_with_empty_slots_only_uses_shown_documents():
    scores = np.array([0.3, -1.0, 2.0])
    ranking = np.array([2, 0, 1])
    shown = np.concatenate([scores[ranking], [-np.inf, -np.inf]])
    ext = np.array([2, 0, 1, -1, -1, -1])
    log_dens = plackett_luce.log_denominators(scores[None], None, ext[None])
    a, b = np.triu_indices(3, 1)                  # the pairs among the three shown slots
    table = np.full((5, 5), np.nan)
    swap_log_ratios(shown, log_dens[0], table)
    log_ratio = table[a, b]
    for i, j, value in zip(a, b, log_ratio):
        assert expit(value) == pytest.approx(brute_rho(scores, ranking, i, j), rel=1e-12)


# ---------------------------------------------------------------- Eq. 5 for a linear ranker

def test_linear_gradient_matches_eq5_pair_by_pair():
    rng = np.random.default_rng(7)
    F, k = 5, 6
    for trial in range(80):
        m = int(rng.integers(k, 15))
        X = rng.normal(size=(m, F))
        w = rng.normal(size=F)
        scores = X @ w
        ranking = rng.permutation(m)[:k]
        clicks = rng.random(k) < 0.35
        coef = pair_weights(scores[ranking][None], fast_log_dens(scores, ranking), clicks[None],
                            np.ones((1, k), dtype=bool))[0]
        fast = coef @ X[ranking]
        brute = brute_gradient(scores, ranking, clicks, lambda c: X[c])
        np.testing.assert_allclose(fast, brute if np.ndim(brute) else np.zeros(F), rtol=1e-9, atol=1e-12)


def test_preference_pairs_follow_pdgd():
    # clicks at positions 1 and 3 of 6: negatives are 0, 2 and 4 (right after the last click)
    clicks = np.array([[False, True, False, True, False, False]])
    scores = np.zeros((1, 6))
    with np.errstate(divide="ignore"):
        log_dens = np.log(np.arange(6, -1, -1.0))[None]   # equal scores, 6 documents in total
    coef = pair_weights(scores, log_dens, clicks, np.ones((1, 6), dtype=bool))[0]
    assert coef[1] > 0 and coef[3] > 0
    assert coef[0] < 0 and coef[2] < 0 and coef[4] < 0
    assert coef[5] == 0
    assert coef.sum() == pytest.approx(0.0, abs=1e-15)


# ---------------------------------------------------------------- local updates end to end

def toy_dataset(seed=0, n_queries=12, F=4):
    rng = np.random.default_rng(seed)
    counts = rng.integers(3, 16, n_queries)          # some queries shorter than k = 10
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(ptr[-1], F)).astype(np.float32)
    labels = rng.integers(0, 3, ptr[-1]).astype(np.int8)
    return Dataset(X, labels, ptr, np.arange(n_queries, dtype=np.int64), 3, "toy")


def replay(ranker, params, data, queries, shown, clicks, lr, local, score_grad, score=None):
    """Recompute each client's weights from its recorded shown lists and clicks, in loops;
    ``score(w, rows)`` scores a query's rows (default: ``ranker.score``, float64)."""
    score = score or (lambda w, rows: ranker.score(w, data.features[rows]))
    out = []
    for c in range(queries.shape[0]):
        w = params.copy()
        total = np.zeros_like(params)
        for b in range(queries.shape[1]):
            rows = np.arange(data.query_ptr[queries[c, b]], data.query_ptr[queries[c, b] + 1])
            at = w if local else params
            scores = score(at, rows)
            pos = {r: i for i, r in enumerate(rows)}
            ok = shown[c, b] >= 0
            ranking = [pos[r] for r in shown[c, b][ok]]
            g = brute_gradient(scores, ranking, clicks[c, b][ok], lambda i: score_grad(at, data.features[rows[i]]))
            if np.ndim(g):
                total = total + g
                if local:
                    w = w + lr * g
        out.append(w if local else params + lr * total)
    return np.array(out)


@pytest.mark.parametrize("local", [True, False])
def test_linear_local_updates_match_replay(local):
    data = toy_dataset()
    ranker = LinearRanker(data.n_features)
    params = np.array([0.5, -0.2, 0.1, 0.3])
    queries = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]])
    weights, shown, clicks = pdgd_cohort(ranker, cascade_model("informational", 3), params, data, queries,
                                         np.random.default_rng(3), lr=0.1, k=10, deterministic=False,
                                         local_updates=local)
    assert clicks.any()
    # with the client's own scores (float32 block scoring): the algorithm, to float64 rounding
    client_scores = lambda w, rows: ranker.score_blocks(w[None], data.features, rows[:1], [len(rows)])  # noqa: E731
    expect = replay(ranker, params, data, queries, shown, clicks, 0.1, local, lambda w, x: x.astype(np.float64),
                    client_scores)
    np.testing.assert_allclose(weights, expect, rtol=1e-9, atol=1e-12)
    # with float64 scores: the float32 scores (relative error <= 136 * 2^-24 of sum |x w|) move
    # rho and the pair derivatives by about that much, the weights by ~1e-8 relative here
    reference = replay(ranker, params, data, queries, shown, clicks, 0.1, local, lambda w, x: x.astype(np.float64))
    np.testing.assert_allclose(weights, reference, rtol=1e-6, atol=1e-9)
    assert not np.array_equal(weights, reference)  # the float32 path is the one taken


def test_mlp_local_updates_match_finite_difference_replay():
    data = toy_dataset(1, n_queries=6, F=3)
    ranker = MLPRanker(data.n_features, hidden=4)
    params = ranker.init_params(np.random.default_rng(0))
    queries = np.array([[0, 1], [2, 3], [4, 5]])
    weights, shown, clicks = pdgd_cohort(ranker, cascade_model("informational", 3), params, data, queries,
                                         np.random.default_rng(5), lr=0.1, k=10, deterministic=False,
                                         local_updates=True)

    def fd_grad(w, x, h=1e-6):
        e = np.eye(len(w)) * h
        return np.array([(ranker.score(w + d, x[None])[0] - ranker.score(w - d, x[None])[0]) / (2 * h) for d in e])

    expect = replay(ranker, params, data, queries, shown, clicks, 0.1, True, fd_grad)
    # central differences of a piecewise-linear-in-W network: error ~1e-9 away from ReLU kinks
    np.testing.assert_allclose(weights, expect, rtol=1e-6, atol=1e-7)


def test_deterministic_ranking_shows_top_k_by_score():
    data = toy_dataset(2)
    ranker = LinearRanker(data.n_features)
    params = np.array([1.0, 0.5, -0.5, 0.2])
    queries = np.arange(12).reshape(12, 1)
    _, shown, _ = pdgd_cohort(ranker, cascade_model("perfect", 3), params, data, queries, np.random.default_rng(0),
                              lr=0.1, k=10, deterministic=True, local_updates=True)
    for q in range(12):
        rows = np.arange(data.query_ptr[q], data.query_ptr[q + 1])
        order = rows[np.argsort(-ranker.score(params, data.features[rows]), kind="stable")][:10]
        expect = np.full(10, -1)
        expect[:len(order)] = order
        np.testing.assert_array_equal(shown[q, 0], expect)


def test_client_step_message_and_server_step():
    data = toy_dataset(3)
    alg = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", 3))
    out = alg.client_step(np.zeros(4), data, np.arange(12).reshape(4, 3), np.arange(4),
                          np.random.default_rng(0), np.random.default_rng(1))
    assert out.messages.vector.shape == (4, 4) and out.messages.vector_kind == "weights"
    np.testing.assert_array_equal(out.messages.n_interactions, [3, 3, 3, 3])
    assert out.shown_ndcg.shape == (4, 3) and out.clicks.shape == (4, 3, 10)
    assert not out.clicks[out.interactions.shown < 0].any()
    assert PDGD(LinearRanker(4), cascade_model("perfect", 3)).name == "pdgd"


def test_bad_parameters():
    with pytest.raises(FltrError, match="^lr: "):
        FPDGD(LinearRanker(3), cascade_model("perfect", 3), lr=0.0)
    with pytest.raises(FltrError, match="^k: "):
        FPDGD(LinearRanker(3), cascade_model("perfect", 3), k=0)


# ---------------------------------------------------------------- reproducibility of the float32 path

def _varied_dataset(seed=4, n_queries=40, F=136):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 300, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.normal(size=(ptr[-1], F)).astype(np.float32)
    labels = rng.integers(0, 3, ptr[-1]).astype(np.int8)
    return Dataset(X, labels, ptr, np.arange(n_queries, dtype=np.int64), 3, "varied")


def test_a_query_ranks_the_same_alone_as_in_a_cohort():
    """A query's scores, top-k and log-denominators do not depend on the cohort around it (the
    group it lands in sets the padded width). Catches: a reduction whose order follows the padding,
    scores of several queries in one BLAS call (sgemv rounds a row by its place)."""
    from fltr_audit.engine.algorithms.fpdgd import cohort_rankings

    data = _varied_dataset()
    ranker = LinearRanker(data.n_features)
    rng = np.random.default_rng(1)
    queries = rng.permutation(data.n_queries)
    params = rng.normal(size=(len(queries), data.n_features))
    together = cohort_rankings(ranker, params, data, queries, rng, 10, deterministic=True)
    for i in range(len(queries)):
        alone = cohort_rankings(ranker, params[i:i + 1], data, queries[i:i + 1], rng, 10, deterministic=True)
        for a, b in zip(together, alone):
            assert np.array_equal(a[i], b[0])


def test_cohort_step_is_the_same_at_any_thread_count():
    """The same seed gives the same weights, shown lists and clicks with 1 or 3 engine threads and
    1 or 3 BLAS threads (a cohort large enough for threads to be used)."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.engine import threads

    data = _varied_dataset(5, n_queries=600, F=8)
    ranker = LinearRanker(data.n_features)
    queries = np.random.default_rng(2).integers(0, data.n_queries, (500, 2))
    runs = []
    for engine, blas in ((1, 1), (3, 3)):
        old, threads.THREADS = threads.THREADS, engine
        try:
            with threadpool_limits(blas, "blas"):
                runs.append(pdgd_cohort(ranker, cascade_model("informational", 3), np.zeros(data.n_features), data,
                                        queries, np.random.default_rng(9), lr=0.1, k=10, deterministic=False,
                                        local_updates=True))
        finally:
            threads.THREADS = old
    assert data.n_docs * 2 >= threads.PARALLEL_ROWS
    for a, b in zip(*runs):
        assert np.array_equal(a, b)


def test_linear_steps_kernel_is_pair_weights_then_the_linear_vjp_bit_for_bit():
    """``kernels.pdgd.linear_steps`` against the two steps it fuses (``pair_weights``, then
    ``LinearRanker.vjp_rows`` added as ``weights[lists] += lr * grad``): the same bits on lists with
    empty slots (-1), without clicks, with every slot clicked, one list of one slot, and ties in
    the scores; lists without a pair keep their weights. Catches: another summation order, a step
    applied to a list without a pair, an empty slot's row read, the wrong list's row."""
    from fltr_audit.engine.kernels.pdgd import linear_steps

    from fltr_audit.engine.kernels.ranking import rank_lists

    rng = np.random.default_rng(4)
    n, k, P = 60, 10, 7
    counts = rng.integers(1, 25, n)
    counts[5] = 1
    candidates = np.where(np.arange(24) < counts[:, None], np.round(rng.normal(size=(n, 24)), 1), -np.inf)
    noise = plackett_luce.gumbel_noise(rng, (int(counts.sum()),))
    starts = np.cumsum(counts) - counts
    positions, scores, log_dens = np.empty((n, k), dtype=np.int64), np.empty((n, k)), np.empty((n, k + 1))
    rank_lists(candidates, counts, noise, starts, True, positions, scores, log_dens)
    shown = np.where(positions >= 0, starts[:, None] + positions, -1)
    X = rng.normal(size=(int(counts.sum()), P)).astype(np.float32)
    clicks = (rng.random((n, k)) < 0.3) & (shown >= 0)
    clicks[3] = False
    clicks[4] = shown[4] >= 0
    start = rng.normal(size=(n, P))
    expected = start.copy()
    ok = shown >= 0
    coef = pair_weights(scores, log_dens, clicks, ok)
    used = np.flatnonzero(coef.any(axis=1))
    ranker = LinearRanker(P)
    expected[used] += 0.1 * ranker.vjp_rows(start[used], X, np.where(ok[used], shown[used], 0), coef[used])
    fused = start.copy()
    linear_steps(X, shown, scores, log_dens, clicks, 0.1, fused)
    assert np.array_equal(fused, expected)
    assert np.array_equal(fused[3], start[3]) and len(used) < n
