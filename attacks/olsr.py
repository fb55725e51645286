"""OLSR click guessing (Pham §4.1, "Linear Regression").

For a linear ranker one PDGD step moves the weights by a weighted sum of the shown documents'
feature vectors, positive weights on clicked documents and negative ones on examined unclicked
documents (Pham Alg. 2, Eq. 6). So the server regresses the client's update (P coordinates as
observations) on the shown documents' feature vectors (one regressor per document, no
intercept) and guesses "clicked" where a coefficient is positive.

Readings and choices:

* Target: the update ``message - global`` (default). ``target="weights"`` regresses the raw
  weights, as Pham's text describes (his published code regresses the update).
* Regressors: the gradient of the score w.r.t. the parameters at the global model,
  ``ranker.grad(global, x)``, which *is* the feature vector for the linear ranker (Pham's
  setting); for the MLP this is the first-order linearization of the update.
* Several queries (B > 1): all B k shown documents of the client are regressors at once.
* Clipping: FPDGD clips the *weights* (Alg. 3, ``theta <- theta min(1, Delta / ||theta||)``),
  so a clipped message is ``c (global + u)`` and its update ``c u + (c - 1) global`` has a
  component along the global model that no document explains, which wrecks Pham's plain
  regression. By default the global model is one more regressor (its coefficient absorbs
  ``c - 1``; the documents' coefficients become ``c a_d``, same signs). ``global_regressor=False``
  is Pham's regression exactly. With an all-zero global model the extra column is inert.
* Rank deficiency (duplicate documents, empty slots, more documents than parameters) is
  handled by the pseudo-inverse: the minimum-norm least-squares solution, as statsmodels'
  ``OLS.fit(method="pinv")``; identical documents share their coefficient equally.
  Under secure aggregation the cohort shows far more documents than there are features, so
  the system is underdetermined and the minimum-norm solution is what is reported.
* ``olsr-l1``: the same regression with least absolute deviations instead of least squares
  (``lad_batched``), for messages carrying DP noise. Our addition, not Pham's.
* t-statistics: ``coef / sqrt(s^2 diag((A^T A)^+))`` with ``s^2 = RSS / (P - rank)`` (as
  statsmodels). Undefined (NaN) when there are no residual degrees of freedom.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from attacks.view import client_updates, require_shown, shown_features
from fltr_audit.constraints import Interval, Options, ParameterError, check
from fltr_audit.engine.messages import Guess, ServerView

RCOND = 1e-6
"""Singular values below RCOND times the largest count as zero (rank decision)."""
ZERO_COEF = 1e-8
"""Coefficients within ZERO_COEF times the largest |coefficient| of a fit count as zero."""


@dataclass(frozen=True)
class OLSFit:
    """Batched OLS results, one fit per row.

    Attributes
    ----------
    coef : ndarray (n, m)
    tvalues : ndarray (n, m)
        NaN where undefined (no residual degrees of freedom, or a zero column).
    df_resid : ndarray of int (n,)
        P - rank.
    rank : ndarray of int (n,)
    """

    coef: np.ndarray
    tvalues: np.ndarray
    df_resid: np.ndarray
    rank: np.ndarray


def ols_batched(y: np.ndarray, A: np.ndarray, rcond: float = RCOND) -> OLSFit:
    """Least squares ``y[i] ~ sum_j coef[i, j] A[i, j]`` for every row i at once, no intercept.

    Parameters
    ----------
    y : ndarray (n, P)
        Targets; the P coordinates are the observations.
    A : ndarray (n, m, P)
        Regressor j of fit i is the row ``A[i, j]`` (a zero row gives coefficient 0).
    rcond : float
        Relative cutoff on singular values.

    The pseudo-inverse is built from the eigen-decomposition of the smaller Gram matrix
    (``A A^T``, m x m, when m <= P, else ``A^T A``, P x P): ``A^T = V S U^T``, ``coef = V S^-2
    V^T A y`` restricted to kept singular values, i.e. ``pinv(A^T) y``, the minimum-norm solution.
    """
    y = np.asarray(y, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    n, m, P = A.shape
    if m <= P:
        lam, V = np.linalg.eigh(A @ np.swapaxes(A, 1, 2))             # V: (n, m, r), r = m
    else:
        lam, U = np.linalg.eigh(np.swapaxes(A, 1, 2) @ A)             # U: (n, P, r), r = P
    keep = (lam > (rcond ** 2) * lam.max(axis=1, keepdims=True)) & (lam > 0)
    safe = np.where(keep, lam, 1.0)
    inv = np.where(keep, 1.0 / safe, 0.0)                              # S^-2 on kept values
    if m > P:
        V = (A @ U) * np.where(keep, 1.0 / np.sqrt(safe), 0.0)[:, None, :]   # A U = V S
    Ay = np.einsum("nmp,np->nm", A, y)
    coef = np.einsum("nmr,nr,nr->nm", V, inv, np.einsum("nmr,nm->nr", V, Ay))
    rank = keep.sum(axis=1)
    df = P - rank
    resid = y - np.einsum("nm,nmp->np", coef, A)
    rss = np.einsum("np,np->n", resid, resid)
    var_diag = np.einsum("nmr,nr->nm", V ** 2, inv)                    # diag((A A^T)^+)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.where(df > 0, rss / np.maximum(df, 1), np.nan)
        tvalues = coef / np.sqrt(s2[:, None] * var_diag)
    tvalues = np.where(var_diag > 0, tvalues, np.nan)
    return OLSFit(coef=coef, tvalues=tvalues, df_resid=df, rank=rank)


def ols_statsmodels(y: np.ndarray, A: np.ndarray) -> OLSFit:
    """Reference: one ``statsmodels.OLS(y_i, A_i^T).fit()`` per row (slow; for tests and checks)."""
    # start-up: statsmodels costs 0.9 s CPU; only this reference fit uses it
    import statsmodels.api as sm

    y = np.asarray(y, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    fits = [sm.OLS(y[i], A[i].T).fit() for i in range(len(y))]
    return OLSFit(
        coef=np.array([f.params for f in fits]),
        tvalues=np.array([f.tvalues for f in fits]),
        df_resid=np.array([int(round(f.df_resid)) for f in fits]),
        rank=np.array([int(f.model.rank) for f in fits]),
    )


IRLS_STEPS = 5
"""Reweighting steps before the simplex refinement of the least-absolute-deviations fit."""
IRLS_SHRINK = 0.25
"""Factor by which the residual floor shrinks per reweighting step (continuation)."""
MAX_PIVOTS = 200
"""Simplex pivots at most (a fit still moving then keeps its last vertex)."""
RIDGE = 1e-16
"""Ridge of the weighted normal equations, relative to their largest diagonal entry."""
LAD_CHUNK_BYTES = 8 << 20
"""Rows are fitted in blocks whose regressors take about this much memory: the temporaries then
stay small enough for the allocator to reuse them, where fresh large arrays cost page faults
that (on the measuring machine) outweigh the arithmetic."""


def lad_batched(y: np.ndarray, A: np.ndarray, steps: int = IRLS_STEPS) -> np.ndarray:
    """Least absolute deviations ``min sum_p |y[i, p] - sum_j coef[i, j] A[i, j, p]|`` per row;
    returns coef (n, m).

    This is the maximum-likelihood fit under Laplace noise and robust to sparse heavy-tailed
    noise such as one client's share of dp-distributed's Gamma differences (Pham's Eq. 15-16
    split over n clients: about zero in most coordinates, large in a few). Two stages, in row
    blocks of ``LAD_CHUNK_BYTES``, vectorized over the rows of a block:

    1. ``steps`` of iteratively reweighted least squares (``_irls``) to get near the optimum;
    2. the exact optimum by simplex pivots (``_lad_vertex``): an LAD optimum interpolates m
       points (a vertex of the linear program), so start from the m points with the smallest
       residuals and pivot while a basis point's release lowers the objective.

    The result is the linear-programming optimum to rounding (``tests/test_attacks_olsr.py``
    checks against scipy's HiGHS). Rows whose basis is singular (all-zero or duplicate
    regressors: empty slots, an all-zero global model) keep the reweighted fit, which gives
    all-zero regressors coefficient 0 and lets duplicates share, as the pseudo-inverse would.
    With more regressors than observations (m > P: the cohort aggregate under secure
    aggregation) no basis of m points exists and the reweighted fit is returned.
    """
    return _lad(y, A, steps)[0]


def _lad(y: np.ndarray, A: np.ndarray, steps: int = IRLS_STEPS) -> tuple[np.ndarray, np.ndarray]:
    """``lad_batched`` and the rank of each row's regressors (from the starting OLS fit)."""
    y = np.asarray(y, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    n, m, P = A.shape
    rows = max(1, LAD_CHUNK_BYTES // (8 * m * P))
    out = np.empty((n, m))
    rank = np.empty(n, dtype=np.int64)
    for s in range(0, n, rows):
        part = slice(s, s + rows)
        fit, rank[part] = _irls(y[part], A[part], steps)
        out[part] = _lad_vertex(y[part], A[part], fit) if m <= P else fit
    return out, rank


def degenerate_fits(A: np.ndarray, rank: np.ndarray) -> int:
    """How many fits are rank deficient: fewer independent regressors than non-zero ones
    (duplicate documents, constant features, more documents than parameters). Their
    coefficients are the minimum-norm (pseudo-inverse) solution, shared among collinear
    regressors, so they are reported but not an error."""
    nonzero = (np.abs(np.asarray(A)).sum(axis=-1) > 0).sum(axis=1)
    return int((np.asarray(rank) < nonzero).sum())


def _irls(y: np.ndarray, A: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Iteratively reweighted least squares for LAD (weights ``1 / max(|r_p|, floor)``), the
    floor starting at 0.1 of the row's largest |y| and shrinking by ``IRLS_SHRINK`` per step;
    each step solves the weighted normal equations of all rows at once with a ridge of
    ``RIDGE`` times the largest diagonal (``_weighted_ridge``). Returns the fit and the OLS rank
    of each row."""
    scale = np.abs(y).max(axis=1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    At = np.swapaxes(A, 1, 2)
    start = ols_batched(y, A)
    coef = start.coef
    floor = 0.1
    resid, Aw = np.empty_like(y), np.empty_like(A)        # reused buffers
    for _ in range(steps):
        np.matmul(coef[:, None, :], A, out=resid[:, None, :])
        np.subtract(y, resid, out=resid)
        np.abs(resid, out=resid)
        np.maximum(resid, floor * scale, out=resid)
        w = np.reciprocal(resid, out=resid)
        w /= w.max(axis=1, keepdims=True)
        np.multiply(A, w[:, None, :], out=Aw)
        coef = _weighted_ridge(A, At, Aw, y)
        floor = max(floor * IRLS_SHRINK, 1e-12)
    return coef, start.rank


def _weighted_ridge(A: np.ndarray, At: np.ndarray, Aw: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The ridge solution of the weighted normal equations, ``(A W A^T + r I_m) coef = A W y`` with
    ``r = RIDGE`` times the largest diagonal entry of ``A W A^T`` (``Aw = A W``). With more
    regressors than observations (m > P) it is computed through the P x P system, by the
    push-through identity ``(A W A^T + r I_m)^-1 A W = A W (A^T A W + r I_P)^-1``: the same
    solution at O(P^3) instead of the ill-conditioned m x m system of rank <= P (``A^T A W`` has no
    negative eigenvalue, but on degenerate data -- constant or duplicate features -- the ridge can
    round away: then ``_solve``'s pseudo-inverse)."""
    n, m, P = A.shape
    if m <= P:
        G = Aw @ At
        ridge = RIDGE * np.einsum("nii->ni", G).max(axis=1) + 1e-300
        return _solve(G + ridge[:, None, None] * np.eye(m), Aw @ y[:, :, None])[..., 0]
    ridge = RIDGE * np.einsum("nmp,nmp->nm", Aw, A).max(axis=1) + 1e-300  # the diagonal of A W A^T
    dual = At @ Aw + ridge[:, None, None] * np.eye(P)
    return (Aw @ _solve(dual, y[:, :, None]))[..., 0]


def _solve(G: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``G^-1 b`` for a batch of systems; when one of them is exactly singular in floating point
    (duplicate regressors whose ridge rounds away, more regressors than observations), the
    batch falls back to the pseudo-inverse: the minimum-norm least-squares solution."""
    try:
        return np.linalg.solve(G, b)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(G, hermitian=True) @ b


def _lad_vertex(y: np.ndarray, A: np.ndarray, coef: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Simplex refinement of LAD fits from near-optimal ``coef`` (all rows at once).

    A basis S of m points fixes ``coef = B^-1 y_S`` (B: the basis points' regressor rows).
    Releasing basis point j along ``d = B^-1 e_j`` changes the objective at rate
    ``1 +- lambda_j`` with ``lambda = B^-T g``, ``g = -sum_{p not in S} sign(r_p) a_p``; the
    basis is optimal when every ``|lambda_j| <= 1``. Otherwise the point with the largest
    ``|lambda_j|`` leaves and the objective's minimum along ``-sign(lambda_j) d`` -- the first
    breakpoint ``r_p / (a_p . d)`` where the slope ``1 - |lambda_j| + 2 sum |a_p . d|`` turns
    non-negative (a weighted median) -- names the point that enters. Rows stop once optimal or
    when a pivot does not lower the objective (a degenerate vertex, e.g. an exact fit where more
    than m residuals vanish); a row keeps the best fit seen, and one whose basis is singular the
    fit it came with.
    """
    n, m, P = A.shape
    r = y - np.einsum("nm,nmp->np", coef, A)
    S = np.argsort(np.abs(r), axis=1)[:, :m]                     # (n, m) basis points
    out = coef.copy()
    best = np.abs(r).sum(axis=1) * (1 + 1e-9)             # the first vertex may tie the reweighted fit
    B = np.take_along_axis(A, S[:, None, :], axis=2).transpose(0, 2, 1)
    cond = np.linalg.cond(B)
    active = np.isfinite(cond) & (cond < 1e12)            # a pivot keeps B invertible (a_p . d != 0)
    for _ in range(MAX_PIVOTS):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        Ai, yi, Si = A[idx], y[idx], S[idx]
        Binv = np.linalg.inv(np.take_along_axis(Ai, Si[:, None, :], axis=2).transpose(0, 2, 1))
        c = (Binv @ np.take_along_axis(yi, Si, axis=1)[..., None])[..., 0]
        r = yi - (c[:, None, :] @ Ai)[:, 0]
        basic = np.zeros(r.shape, dtype=bool)
        np.put_along_axis(basic, Si, True, axis=1)
        s = np.where(basic, 0.0, np.sign(r))
        g = -(Ai @ s[..., None])[..., 0]
        lam = (np.swapaxes(Binv, 1, 2) @ g[..., None])[..., 0]             # B^-T g
        j = np.argmax(np.abs(lam), axis=1)
        lj = lam[np.arange(len(idx)), j]
        objective = np.abs(r).sum(axis=1)
        improved = objective < best[idx] * (1 - 1e-12)
        out[idx[improved]] = c[improved]
        best[idx[improved]] = objective[improved]
        done = (np.abs(lj) <= 1 + tol) | ~improved      # optimal, or a degenerate (non-improving) pivot
        active[idx[done]] = False
        k = np.flatnonzero(~done)
        if not len(k):
            break
        d = -np.sign(lj[k])[:, None] * Binv[k, :, j[k]]
        q = (d[:, None, :] @ Ai[k])[:, 0]
        rk = r[k]
        valid = ~basic[k] & (rk * q > 0)
        t = np.where(valid, rk / np.where(valid, q, 1.0), np.inf)
        order = np.argsort(t, axis=1)
        qs = np.take_along_axis(np.where(valid, np.abs(q), 0.0), order, axis=1)
        slope = (1 - np.abs(lj[k]))[:, None] + 2 * np.cumsum(qs, axis=1)
        first = np.argmax(slope >= 0, axis=1)
        S[idx[k], j[k]] = order[np.arange(len(k)), first]
    return out


class OLSR:
    """The OLSR attack; ``alpha`` makes it the thresholded ``olsr-t``, ``loss="l1"`` the robust
    ``olsr-l1`` (least absolute deviations, ``lad_batched``).

    Parameters
    ----------
    target : {"update", "weights"}
        Regress the update (default) or the raw weights (Pham's text).
    global_regressor : bool
        Add the global model as a regressor, so that weight clipping does not bias the fit
        (see the module docstring).
    loss : {"l2", "l1"}
        Least squares (Pham) or least absolute deviations (robust to DP noise; no t-statistics,
        the score is the coefficient).
    alpha : float or None
        None: guess clicked where the coefficient is positive (Pham). A level in (0, 1):
        guess clicked where the coefficient is positive *and* the one-sided t-test rejects
        ``coef <= 0`` at that level (a numerically zero coefficient of a near-exact fit can have
        a huge t); where the t-statistic is undefined (no residual degrees of freedom) the sign
        rule alone is used.

    The score of every document is its t-statistic, or its coefficient where the
    t-statistic is undefined (for ROC/AUC within a fit both are monotone in evidence).
    """

    def __init__(self, target: str = "update", alpha: float | None = None, global_regressor: bool = True,
                 loss: str = "l2"):
        check("loss", loss, (Options(("l2", "l1")),))
        check("target", target, (Options(("update", "weights")),))
        check("alpha", alpha, (None, Interval(float, 0.0, 1.0, closed="neither")))
        if loss == "l1" and alpha is not None:
            raise ParameterError("alpha", f"must be None with loss 'l1' (no t-test), got {alpha!r}")
        self.target = target
        self.global_regressor = bool(global_regressor)
        self.alpha = None if alpha is None else float(alpha)
        self.loss = loss
        self.name = "olsr-l1" if loss == "l1" else ("olsr" if alpha is None else "olsr-t")

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        updates, aggregate_update = client_updates(view, self.name)
        X, mask = shown_features(view)
        n, B, k = mask.shape
        A = view.ranker.grad(view.global_params, X)                    # (n, B, k, P)
        A[~mask] = 0.0
        g = view.global_params if self.target == "weights" else 0.0
        if updates is not None:
            y, A = updates + g, A.reshape(n, B * k, -1)
            shape = (n, B, k)
        else:
            y, A = (aggregate_update + g)[None, :], A.reshape(1, n * B * k, -1)
            shape = (1, n, B, k)
        if self.global_regressor:
            extra = np.broadcast_to(np.asarray(view.global_params, dtype=np.float64), (len(A), 1, A.shape[-1]))
            A = np.concatenate([A, extra], axis=1)
        m = int(np.prod(shape[1:]))
        if self.loss == "l1":
            coef, rank = _lad(y, A)
            coef, tvalues = coef[:, :m].reshape(shape), np.full(shape, np.nan)
        else:
            fit = ols_batched(y, A)
            coef, tvalues, rank = fit.coef[:, :m].reshape(shape), fit.tvalues[:, :m].reshape(shape), fit.rank
        scale = np.abs(coef).reshape(coef.shape[0], -1).max(axis=1)
        positive = coef > ZERO_COEF * scale.reshape((-1,) + (1,) * (coef.ndim - 1))
        if self.alpha is None:
            decision = positive
        else:
            crit = stats.t.ppf(1.0 - self.alpha, np.maximum(fit.df_resid, 1))
            crit = crit.reshape((-1,) + (1,) * (coef.ndim - 1))
            decision = positive & (np.isnan(tvalues) | (tvalues > crit))
        score = np.where(np.isnan(tvalues), coef, tvalues).reshape(n, B, k)
        decision = decision.reshape(n, B, k) & mask
        return Guess(attack=self.name, score=np.where(mask, score, np.nan), decision=decision,
                     degenerate=degenerate_fits(A, rank))
