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
from fltr_audit.errors import FltrError
from fltr_audit.messages import Guess, ServerView

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


IRLS_STEPS = 60
"""Reweighting steps of the least-absolute-deviations fit."""


def lad_batched(y: np.ndarray, A: np.ndarray, steps: int = IRLS_STEPS) -> np.ndarray:
    """Least absolute deviations ``min sum_p |y[i, p] - sum_j coef[i, j] A[i, j, p]|`` per row,
    by iteratively reweighted least squares (weights ``1 / max(|r_p|, floor)``); returns coef (n, m).

    This is the maximum-likelihood fit under Laplace noise and robust to sparse heavy-tailed
    noise such as one client's share of dp-distributed's Gamma differences (Pham's Eq. 15-16
    split over n clients: about zero in most coordinates, large in a few). The floor starts at
    0.1 and shrinks by 0.6 per step to 1e-12, relative to the row's largest |y| (continuation:
    each step starts near the previous optimum, so the ill-conditioned late steps stay stable).
    """
    y = np.asarray(y, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    scale = np.abs(y).max(axis=1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    coef = ols_batched(y, A).coef
    floor = 0.1
    for _ in range(steps):
        resid = np.abs(y - np.einsum("nm,nmp->np", coef, A))
        w = 1.0 / np.maximum(resid, floor * scale)
        sw = np.sqrt(w / w.max(axis=1, keepdims=True))
        coef = ols_batched(sw * y, A * sw[:, None, :], rcond=1e-9).coef
        floor = max(floor * 0.6, 1e-12)
    return coef


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
        if loss not in ("l2", "l1") or (loss == "l1" and alpha is not None):
            raise FltrError(f"--attack olsr: loss must be 'l2' or 'l1' (l1 without alpha), got {loss!r}")
        if target not in ("update", "weights"):
            raise FltrError(f"--attack olsr: target must be 'update' or 'weights', got {target!r}")
        if alpha is not None and not 0.0 < float(alpha) < 1.0:
            raise FltrError(f"--attack olsr-t: alpha must lie in (0, 1), got {alpha}")
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
            coef = lad_batched(y, A)[:, :m].reshape(shape)
            tvalues = np.full(shape, np.nan)
        else:
            fit = ols_batched(y, A)
            coef, tvalues = fit.coef[:, :m].reshape(shape), fit.tvalues[:, :m].reshape(shape)
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
        return Guess(attack=self.name, score=np.where(mask, score, np.nan), decision=decision)
