"""FedIPS's local SGD kernels for the linear ranker (``algorithms.fedips.FedIPS``).

One click's step (FedIPS Eq. 4 and 7) on a model ``w`` (float64) and the shown list ``x``
(K, F) float32 with the click at ``pos`` and ``step = eta_l / p_u(i)``:

    s = x float32(w)                        (float32, one BLAS sgemv)
    c_k = 1 on each valid k with 1 - (s_pos - s_k) > 0, c_pos -= sum_k c_k   (``hinge_coefficients``)
    g = sum_k c_k x_k                       (float32, in the order of k, zero c_k skipped)
    w <- w - float64(g) * step

The same step runs in ``linear_passes`` (a client's whole pass, reading its lists from the
policy's table in place) and ``linear_click_steps`` (one step of many models, the attacks'
replay), so a replay has the bits of the client's own pass. Each row depends on its own inputs
only. (Until this version g was a BLAS ``sgemv`` too: within K 2^-24 sum_k |c_k x_k| of this.)
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _step(w, w32, x, valid, pos, step, scores, coef32, grad, out):
    """out = w after one click step (module docstring), w32 = float32(out) for the next one;
    ``w32`` holds float32(w) on entry; ``scores``, ``coef32`` and ``grad`` are scratch."""
    np.dot(x, w32, scores)
    s_d = np.float64(scores[pos])
    active = 0.0
    for k in range(x.shape[0]):
        on = valid[k] and 1.0 - (s_d - np.float64(scores[k])) > 0.0
        coef32[k] = 1.0 if on else 0.0
        active += 1.0 if on else 0.0
    coef32[pos] = np.float32(np.float64(coef32[pos]) - active)
    for f in range(w.shape[0]):
        grad[f] = np.float32(0.0)
    for k in range(x.shape[0]):          # sum_k c_k x_k in the order of k, zero coefficients skipped
        c = coef32[k]
        if c != 0.0:
            xk = x[k]
            for f in range(w.shape[0]):
                grad[f] += c * xk[f]
    for f in range(w.shape[0]):
        out[f] = w[f] - np.float64(grad[f]) * step
        w32[f] = np.float32(out[f])


@numba.njit(nogil=True, cache=True)
def linear_click_steps(w, x, valid, pos, step, out):
    """out[n] = w[n] after its click step on x[n] (n, K, F), valid[n], pos[n], step[n]."""
    P, K = w.shape[1], x.shape[1]
    w32 = np.empty(P, dtype=np.float32)
    scores = np.empty(K, dtype=np.float32)
    coef32 = np.empty(K, dtype=np.float32)
    grad = np.empty(P, dtype=np.float32)
    for n in range(w.shape[0]):
        for f in range(P):
            w32[f] = np.float32(w[n, f])
        _step(w[n], w32, x[n], valid[n], pos[n], step[n], scores, coef32, grad, out[n])


@numba.njit(nogil=True, cache=True)
def linear_passes(params, lists, list_of, valid, pos, step, n_steps, out):
    """out[c] = client c's model after its pass minus ``params``: its steps j < n_steps[c] in
    order, step j on the list ``lists[list_of[c, j]]`` (K, F) with valid[c, j], pos[c, j],
    step[c, j]."""
    P, K = params.shape[0], lists.shape[1]
    w32 = np.empty(P, dtype=np.float32)
    scores = np.empty(K, dtype=np.float32)
    coef32 = np.empty(K, dtype=np.float32)
    grad = np.empty(P, dtype=np.float32)
    w = np.empty(P)
    spare = np.empty(P)
    for c in range(out.shape[0]):
        for f in range(P):
            w[f] = params[f]
            w32[f] = np.float32(params[f])
        for j in range(n_steps[c]):
            _step(w, w32, lists[list_of[c, j]], valid[c, j], pos[c, j], step[c, j], scores, coef32, grad, spare)
            w, spare = spare, w
        for f in range(P):
            out[c, f] = w[f] - params[f]


@numba.njit(nogil=True, cache=True)
def session_logs(uniforms, click_prob, m, click_slot, click_pos, n_clicks, sessions, session_clicks):
    """Each client's sessions over its B lists in turn until m clicks (``fedips_users.simulate_log``).

    Session s shows list ``s mod B`` and draws its clicks from ``uniforms[c, s // B, s mod B]``
    (position i clicked when ``u < click_prob[c, s mod B, i]``), until the session holding the
    m-th click ends or the sessions run out. Writes the first m clicks' slot and position in
    order (-1 past the last), their number, the sessions of each slot up to the last one, and
    the clicks of each slot and position over those sessions (outputs zeroed by the caller
    except ``click_slot`` / ``click_pos``, filled here)."""
    n, rounds, B, K = uniforms.shape
    for c in range(n):
        got = 0
        last = rounds * B - 1
        for s in range(rounds * B):
            r, b = s // B, s % B
            for i in range(K):
                if uniforms[c, r, b, i] < click_prob[c, b, i]:
                    session_clicks[c, b, i] += 1
                    if got < m:
                        click_slot[c, got] = b
                        click_pos[c, got] = i
                        got += 1
            if got >= m:
                last = s
                break
        n_clicks[c] = got
        for j in range(got, m):
            click_slot[c, j] = -1
            click_pos[c, j] = -1
        for b in range(B):
            sessions[c, b] = max((last - b) // B + 1, 0)
