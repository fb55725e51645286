"""Position-bias estimation by regression-based EM (Wang et al. 2018), federated (FedIPS §5).

The position-based model says P(click at rank k on d) = theta_k * gamma_d, with theta_k the
examination probability and gamma_d = P(click | examined) the relevance. Wang et al.'s
EM alternates
  E-step  P(E=1, R=0 | no click) = theta_k (1 - gamma) / (1 - theta_k gamma),
          P(E=0, R=1 | no click) = (1 - theta_k) gamma / (1 - theta_k gamma)
          (a click means E = R = 1);
  M-step  theta_k <- mean over the observations at rank k of P(E = 1 | c),
          gamma  <- a regression F(x) fitted to P(R = 1 | c).
FedIPS §5 federates it: F is linear (logistic, F(x) = sigmoid(v . (x - 1/2) + b)) and trained by
FedOpt (``FedRelevanceEM``: every round the clients run the E-step and their own theta
M-step on their local logs, then a few gradient steps of the cross-entropy of F against the
soft posterior P(R = 1 | c) -- the exact expected log-likelihood, where Wang et al. sample
binary labels for their GBDT -- and send the change of F); the server averages. With F
trained, FedIPS's clients estimate personalized propensities theta_u (EM on theta with F
fixed) each round from their own logs. Two stages, F first, so FedIPS's messages remain
ranker-sized updates. The scale of theta against gamma is not identified; we fix
theta_1 = 1 (IPS needs only the ratios theta_k / theta_1), and clip propensities to
[min_propensity, 1].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.constraints import POSITIVE, POSITIVE_INT, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, ServerView

EPS = 1e-6
CENTER = 0.5  # mid-range of the [0, 1] features


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def relevance_of_rows(params: np.ndarray, features: np.ndarray) -> np.ndarray:
    """F(x) = sigmoid(v . (x - 1/2) + b) for feature rows (..., F); ``params`` = [v, b] (F + 1).

    Features are in [0, 1] after FedIPS's per-query min-max; centring them at 1/2 keeps the
    weights from fighting the bias (a far better conditioned logistic regression).
    """
    params = np.asarray(params, dtype=np.float64)
    shift = params[-1] - CENTER * params[:-1].sum()
    return _sigmoid(features @ params[:-1].astype(np.float32) + shift).astype(np.float64)


def estimate_examination(
    sessions: np.ndarray,
    session_clicks: np.ndarray,
    relevance: np.ndarray,
    valid: np.ndarray,
    iterations: int = 30,
) -> np.ndarray:
    """Each client's examination curve theta_u by EM with the relevance held fixed.

    Parameters
    ----------
    sessions : int (n, B)
        Sessions of each query slot in the client's log.
    session_clicks : int (n, B, K)
        Clicks per slot over those sessions.
    relevance : float (n, B, K)
        gamma = F(x) of the shown documents.
    valid : bool (n, B, K)
        Non-empty slots.
    iterations : int

    Returns
    -------
    theta : float64 (n, K), in [EPS, 1], with theta_1 = 1: the PBM leaves the scale of theta
        against gamma unidentified (theta c, gamma / c fit alike) and, left free, the EM
        drifts towards gamma = 1 everywhere; the top position is taken as always examined.
    """
    n_obs = np.where(valid, sessions[:, :, None], 0).astype(np.float64)
    clicks = np.where(valid, session_clicks, 0).astype(np.float64)
    gamma = np.clip(relevance, EPS, 1.0 - EPS)
    total = n_obs.sum(axis=1)  # (n, K)
    theta = np.full(total.shape, 0.5)
    theta[:, 0] = 1.0
    for _ in range(iterations):
        t = theta[:, None, :]
        exam_no_click = t * (1.0 - gamma) / (1.0 - t * gamma)
        expected = (clicks + (n_obs - clicks) * exam_no_click).sum(axis=1)
        theta = np.where(total > 0, np.clip(expected / np.maximum(total, 1.0), EPS, 1.0), theta)
        theta = np.clip(theta / theta[:, :1], EPS, 1.0)  # theta_1 = 1 fixes the scale
    return theta


def relevance_posterior(
    sessions: np.ndarray, session_clicks: np.ndarray, relevance: np.ndarray, theta: np.ndarray
) -> np.ndarray:
    """Mean over a slot's sessions of P(R = 1 | c): the soft regression target, shape (n, B, K)."""
    n_obs = sessions[:, :, None].astype(np.float64)
    gamma = np.clip(relevance, EPS, 1.0 - EPS)
    t = theta[:, None, :]
    rel_no_click = (1.0 - t) * gamma / (1.0 - t * gamma)
    return (session_clicks + (n_obs - session_clicks) * rel_no_click) / np.maximum(n_obs, 1.0)


def to_propensities(theta: np.ndarray, min_propensity: float) -> np.ndarray:
    """IPS propensities theta_k / theta_1, clipped to [min_propensity, 1], shape (n, K)."""
    return np.clip(theta / theta[:, :1], min_propensity, 1.0)


class FedRelevanceEM:
    """FedOpt training of the relevance model F on the clients' EM posteriors (an Algorithm).

    Parameters
    ----------
    source : FedIPS
        Supplies the clients' click logs (``source.simulate``) and the feature count.
    lr_local, lr_global : float
        Step of the clients' gradient descent on the cross-entropy (divided by the number of
        features for the weights: with features in [0, 1], ||x||^2 <= F), and the server step.
    local_steps : int
        Gradient steps per client and round.
    em_iterations : int
        EM iterations of each client's theta estimate.
    """

    name = "relevance-em"
    ranker = None

    def __init__(
        self, source: Any, *, lr_local: float = 1.0, lr_global: float = 1.0, local_steps: int = 5, em_iterations: int = 30
    ) -> None:
        check("lr_local", lr_local, POSITIVE)
        check("lr_global", lr_global, POSITIVE)
        check("local_steps", local_steps, POSITIVE_INT)
        self.source = source
        self.lr_local = float(lr_local)
        self.lr_global = float(lr_global)
        self.local_steps = int(local_steps)
        self.em_iterations = int(em_iterations)

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(self.source.ranker.n_features + 1)

    def init_server_state(self, params: np.ndarray) -> Any:
        return None

    def client_step(
        self,
        params: np.ndarray,
        data: Dataset,
        queries: np.ndarray,
        client_ids: np.ndarray,
        rng: np.random.Generator,
        public_rng: np.random.Generator,
        deterministic: bool = False,
    ) -> ClientOutput:
        log = self.source.simulate(data, queries, client_ids, rng)
        valid = log.shown >= 0
        x = data.features[np.where(valid, log.shown, 0)]  # (n, B, K, F)
        weight = np.where(valid, log.sessions[:, :, None], 0).astype(np.float64)
        norm = np.maximum(weight.sum(axis=(1, 2)), 1.0)
        n = len(log.gammas)
        local = np.repeat(np.asarray(params, dtype=np.float64)[None, :], n, axis=0)

        def relevance(p: np.ndarray) -> np.ndarray:
            shift = p[:, -1] - CENTER * p[:, :-1].sum(axis=1)
            return _sigmoid(np.einsum("nbkf,nf->nbk", x, p[:, :-1].astype(np.float32)) + shift[:, None, None])

        step_w = self.lr_local / data.n_features  # features in [0, 1]: ||x||^2 <= F keeps the step stable
        gamma = relevance(local)
        theta = estimate_examination(log.sessions, log.session_clicks, gamma, valid, self.em_iterations)
        target = relevance_posterior(log.sessions, log.session_clicks, gamma, theta)
        for step in range(self.local_steps):
            if step:
                gamma = relevance(local)
            resid = weight * (gamma - target) / norm[:, None, None]  # d cross-entropy / d z
            grad_w = np.einsum("nbk,nbkf->nf", resid.astype(np.float32), x, dtype=np.float64)
            local[:, :-1] -= step_w * (grad_w - CENTER * resid.sum(axis=(1, 2))[:, None])
            local[:, -1] -= self.lr_local * resid.sum(axis=(1, 2))
        batch = log.shown.shape[1]
        return ClientOutput(
            messages=Messages(n_interactions=np.full(n, batch, dtype=np.int64), vector=local - params, vector_kind="update"),
            interactions=Interactions(queries=np.asarray(queries, dtype=np.int64), shown=log.shown),
            clicks=log.clicked,
            shown_ndcg=np.full(log.shown.shape[:2], np.nan),
            private={"gamma_u": log.gammas},
            round_metrics={"theta_last": float(to_propensities(theta, EPS)[:, -1].mean())},
        )

    def redraw_clicks(self, truth: GroundTruth, interactions: Interactions, data: Dataset, draws: int,
                      rng: np.random.Generator) -> np.ndarray:
        """The source's counterfactual clicks (its users, its click logs)."""
        return self.source.redraw_clicks(truth, interactions, data, draws, rng)

    def server_step(self, params: np.ndarray, state: Any, view: ServerView) -> tuple[np.ndarray, Any]:
        if view.aggregate is None:
            raise ValueError("relevance EM needs the aggregate of the cohort's update vectors")
        return params + self.lr_global * view.aggregate, state
