"""FedIPS's linear SGD kernels against the numpy expression of a click step
(``fltr_audit.engine.kernels.fedips``)."""

import numpy as np

from fltr_audit.engine.algorithms.fedips import hinge_coefficients
from fltr_audit.engine.kernels.fedips import linear_click_steps, linear_passes, session_logs


def _reference_step(w, x, valid, pos, step):
    """One click step in numpy: float32 scores, the hinge of Eq. 4, float32 gradient, float64
    update; and the bound of the gradient's float32 rounding times the step, per coordinate
    (K 2^-24 sum_k |c_k x_k|: the kernel may sum the K terms in another order than BLAS)."""
    scores = np.matmul(x, w.astype(np.float32)[:, :, None])[..., 0].astype(np.float64)
    _, coef = hinge_coefficients(scores, valid, pos)
    grad = np.matmul(coef.astype(np.float32)[:, None, :], x)[:, 0, :]
    slack = x.shape[1] * 2.0**-24 * np.einsum("nk,nkf->nf", np.abs(coef), np.abs(x).astype(np.float64))
    return w - grad.astype(np.float64) * step[:, None], slack * step[:, None]


def _case(seed, n=30, K=5, F=37):
    rng = np.random.default_rng(seed)
    x = rng.random((n, K, F)).astype(np.float32)
    valid = rng.random((n, K)) < 0.8
    valid[:, 0] = True
    x[~valid] = 0.0
    pos = np.array([rng.choice(np.flatnonzero(v)) for v in valid])
    return rng, x, valid, pos, rng.uniform(0.1, 2.0, n)


def test_a_click_step_is_the_numpy_step():
    """Against the numpy step (within the float32 rounding of the gradient's K terms, which the
    kernel sums in the order of k and BLAS in its own), on models whose scores put some hinges inside and some outside the margin.
    Catches: a hinge counted on an empty slot or with the wrong sign of the margin, the click's
    own coefficient not reduced by the count, the update added instead of subtracted."""
    rng, x, valid, pos, step = _case(1)
    w = rng.normal(size=(len(x), x.shape[2])) * 0.3
    scores = np.einsum("nkf,nf->nk", x.astype(np.float64), w)
    margin = 1.0 - (scores[np.arange(len(x)), pos][:, None] - scores)
    assert ((margin > 0.05) & valid).any() and ((margin < -0.05) & valid).any()
    out = np.empty_like(w)
    linear_click_steps(w, x, valid, pos, step, out)
    expect, slack = _reference_step(w, x, valid, pos, step)
    assert (np.abs(out - expect) <= slack + 1e-15).all()
    assert not np.array_equal(out, w)


def test_a_pass_is_its_click_steps_in_order_with_the_same_bits():
    """``linear_passes`` (lists read from a table) equals ``linear_click_steps`` applied step by
    step (the attacks' replay), bit for bit, and a client's update alone equals its update in
    the cohort. Catches: steps out of order, a step past n_steps taken, the update not
    relative to params, a client reading another's list."""
    rng = np.random.default_rng(2)
    n, m, K, F = 12, 6, 5, 37
    table = rng.random((9, K, F)).astype(np.float32)
    lists_of = rng.integers(0, 9, (n, m))
    valid = rng.random((n, m, K)) < 0.9
    valid[..., 0] = True
    pos = np.zeros((n, m), dtype=np.int64)
    step = rng.uniform(0.1, 2.0, (n, m))
    n_steps = rng.integers(0, m + 1, n)
    params = rng.normal(size=F) * 0.05
    out = np.empty((n, F))
    linear_passes(params, table, lists_of, valid, pos, step, n_steps, out)
    w = np.tile(params, (n, 1))
    for j in range(m):
        new = np.empty_like(w)
        linear_click_steps(w, table[lists_of[:, j]], *(np.ascontiguousarray(a[:, j]) for a in (valid, pos, step)), new)
        w = np.where((j < n_steps)[:, None], new, w)
    assert np.array_equal(out, w - params)
    assert (out[n_steps == 0] == 0).all() and (out[n_steps > 0] != 0).any(axis=1).all()
    alone = np.empty((1, F))
    c = int(np.argmax(n_steps))
    linear_passes(params, table, lists_of[c:c + 1], valid[c:c + 1], pos[c:c + 1], step[c:c + 1], n_steps[c:c + 1],
                  alone)
    assert np.array_equal(alone[0], out[c])


def _reference_logs(u, prob, m):
    """The sessions' logs in numpy: every click in session order (cumulative counts), the first m
    of them, the session of the m-th closing the log."""
    n, R, B, K = u.shape
    draws = (u < prob[:, None]).reshape(n, R * B * K)
    rank = np.cumsum(draws, axis=1)
    n_clicks = np.minimum(rank[:, -1], m)
    slot, pos = np.full((n, m), -1), np.full((n, m), -1)
    row, place = np.nonzero(draws & (rank <= m))
    slot[row, rank[row, place] - 1] = (place // K) % B
    pos[row, rank[row, place] - 1] = place % K
    last = np.where(n_clicks >= m, np.argmax(rank >= m, axis=1) // K, R * B - 1)
    sessions = np.maximum((last[:, None] - np.arange(B)) // B + 1, 0)
    used = (np.arange(R * B)[None, :] <= last[:, None]).reshape(n, R, B)
    session_clicks = (draws.reshape(n, R, B, K) & used[..., None]).sum(axis=1)
    return slot, pos, n_clicks, sessions, session_clicks


def test_session_logs_are_the_numpy_logs():
    """The compiled sessions against the numpy ones on 300 clients (some never click, some reach
    m in their first session, some run out of sessions). Catches: a log cut at the m-th click
    instead of the end of its session, slots and positions swapped, the session count off by
    one, stale entries past the last click."""
    rng = np.random.default_rng(3)
    n, R, B, K, m = 300, 8, 3, 4, 6
    prob = rng.random((n, B, K)) * rng.choice([0.0, 0.05, 0.5, 1.0], (n, 1, 1))
    u = rng.random((n, R, B, K))
    slot, pos = np.full((n, m), 9), np.full((n, m), 9)
    n_clicks, sessions, session_clicks = np.empty(n, np.int64), np.empty((n, B), np.int64), np.zeros((n, B, K), np.int64)
    session_logs(u, prob, m, slot, pos, n_clicks, sessions, session_clicks)
    expect = _reference_logs(u, prob, m)
    for got, want in zip((slot, pos, n_clicks, sessions, session_clicks), expect):
        assert np.array_equal(got, want)
    assert (n_clicks == 0).any() and (n_clicks == m).any() and ((n_clicks > 0) & (n_clicks < m)).any()
    assert (session_clicks.sum(axis=(1, 2)) > n_clicks).any()  # clicks after the m-th in its session
