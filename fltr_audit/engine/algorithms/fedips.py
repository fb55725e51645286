"""FedIPS: federated counterfactual LTR from position-biased clicks (Li & Ouyang, Algorithm 1).

Setting (FedIPS §3-4). Every query is answered by the fixed logging policy f_0, which shows
its top K documents (``LoggingPolicy``). User u examines rank i with probability
(1 / i)^gamma_u and clicks by FedIPS Eq. 11 (``clicks.PositionBasedModel``); gamma_u is
drawn once per client id from N(gamma, 0.1) left-truncated at 0 and kept for the whole run
(``fedips_users.UserPopulation``: deterministic in the client id and the population seed). "Relevant"
in Eq. 11 means labels 3-4 of the 5-level sets (Yahoo, Istella); on 3-level data (MQ2007/8)
we map it to label 2, the top level, with labels 0-1 clicked at 0.1 x examination
(``clicks.PBM_RELEVANT_FROM``).

Clicks per round, our reading of the paper's m and its 5 queries per client: each round a
client holds ``B`` queries (``--queries-per-client``) and searches them in turn -- session s
shows the f_0 list of query s mod B -- until it has clicked m documents (``clicks_per_client``,
default 10) or has run ``max_sessions`` sessions; its local log is the first m clicks. So m
fixes the amount of local training data (the paper's footnote finds the click count matters
more than the query count) and B only how many distinct lists those clicks come from. A
client that reaches the session cap sends what it has.

Local step (Algorithm 1, lines 5-8; Eq. 4 and 7): one SGD pass over the client's clicks in
order. For a click on the document d at rank i of query q's list, the step is

    w <- w - eta_l / p_u(i) * grad h_{q,d}(w),   h_{q,d}(w) = sum_{d' in D_q} max(0, 1 - (f_w(d) - f_w(d'))),

where D_q is the shown list (the client's log holds only what it was shown; this also makes
the update a linear combination of the shown documents' features, which the attacks rely
on). Reading Eq. 3 over the query's whole candidate set instead would need every candidate's
features on the device and 5-20x the work per step (in one trial on synthetic yahoo it did
not change the FedIPS-over-FedAvg ordering). Linear scores and gradients are computed in
float32 (the features' precision: a BLAS ``sgemv`` for the scores, a sum over the list for the
gradient); the local and global weights accumulate in float64. A client's whole pass is one
compiled loop (``kernels.fedips``) that reads its lists from the policy's table in place; the
attacks replay the same step.

The message is Delta = w_local - w_t (``vector_kind="update"``); the server takes
w_{t+1} = w_t + eta_g * mean(Delta) (line 11). With ``propensity="none"`` every p_u(i) = 1:
the FedAvg baseline. With ``propensity="estimated"`` each client estimates its own
examination curve by the EM of ``propensity_em`` from its log and a relevance model F
trained beforehand (``propensity_em.FedRelevanceEM``).
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.fedips_users import ClickLog, UserPopulation, clicked_slots, simulate_log
from fltr_audit.engine.algorithms.logging_policy import LoggingPolicy, train_logging_policy
from fltr_audit.engine.algorithms.propensity_em import FedRelevanceEM, estimate_examination, relevance_of_rows, to_propensities
from fltr_audit.constraints import Interval, Options, POSITIVE, POSITIVE_INT, ParameterError, check
from fltr_audit.engine.clicks import PositionBasedModel
from fltr_audit.engine.data.dataset import Dataset, Splits
from fltr_audit.engine.federation import train
from fltr_audit.engine.footprint import check_counterfactual_memory
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.fedips import linear_click_steps, linear_passes
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, ServerView
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.threads import row_parts, thread_map
from fltr_audit.engine.training import TrainSettings

PROPENSITIES = ("true", "estimated", "none")
PASS_CLIENTS = 256  # non-linear rankers: clients whose SGD passes run together (fewer numpy calls per click step)


def hinge_coefficients(scores: np.ndarray, valid: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The surrogate h of Eq. 4 for the document at ``pos`` and its gradient in the scores.

    Parameters
    ----------
    scores : float (n, K)
        f_w of the shown documents.
    valid : bool (n, K)
        Non-empty slots.
    pos : int (n,)
        Position of the clicked document d.

    Returns
    -------
    h : (n,) the value sum_{d'} max(0, 1 - (s_d - s_d')), over valid d' (d itself included,
        contributing the constant 1 as in Eq. 3).
    coef : (n, K) dh / d s: 1 on each d' with a positive hinge, minus their count on d.
    """
    rows = np.arange(len(pos))
    s_d = scores[rows, pos]
    margin = np.where(valid, 1.0 - (s_d[:, None] - scores), 0.0)
    active = valid & (margin > 0)
    h = np.where(active, margin, 0.0).sum(axis=1)
    coef = active.astype(np.float64)
    coef[rows, pos] -= coef.sum(axis=1)
    return h, coef


class FedIPS:
    """FedIPS (and the FedAvg baseline) as a ``fltr_audit.engine.interfaces.Algorithm``.

    Parameters
    ----------
    ranker : object
        The model (``rankers.LinearRanker`` in the paper, Eq. 12).
    click_model : clicks.PositionBasedModel
        Eq. 11 clicks and the gamma_u distribution.
    policy : LoggingPolicy
        f_0 and K.
    lr_local, lr_global : float
        eta_l and eta_g of Algorithm 1.
    clicks_per_client : int
        m, the clicks in each client's local log per round.
    max_sessions : int
        Session cap per client and round.
    propensity : {"true", "estimated", "none"}
        IPS weights from the true examination curve of the user, from the EM estimate, or
        all 1 (FedAvg).
    relevance_params : ndarray (F + 1,), optional
        The relevance model F (required for ``"estimated"``).
    user_seed : int
        Seed of the user population (the run seed).
    min_propensity : float
        Lower clip of estimated propensities.
    """

    def __init__(
        self,
        ranker: Any,
        click_model: Any,
        policy: LoggingPolicy,
        *,
        lr_local: float = 0.001,
        lr_global: float = 1.0,
        clicks_per_client: int = 10,
        max_sessions: int = 100,
        propensity: str = "true",
        relevance_params: np.ndarray | None = None,
        user_seed: int = 0,
        min_propensity: float = 0.01,
    ) -> None:
        check("propensity", propensity, (Options(PROPENSITIES),))
        if propensity == "estimated" and relevance_params is None:
            raise ParameterError("propensity", "estimated needs a trained relevance model")
        check("lr_local", lr_local, POSITIVE)
        check("lr_global", lr_global, POSITIVE)
        check("clicks_per_client", clicks_per_client, POSITIVE_INT)
        check("max_sessions", max_sessions, POSITIVE_INT)
        check("min_propensity", min_propensity, (Interval(float, 0, 1, "right"),))
        self.ranker = ranker
        self.click_model = click_model
        self.policy = policy
        self.k = policy.k
        self.lr_local = float(lr_local)
        self.lr_global = float(lr_global)
        self.m = int(clicks_per_client)
        self.max_sessions = int(max_sessions)
        self.propensity = propensity
        self.relevance_params = None if relevance_params is None else np.asarray(relevance_params, dtype=np.float64)
        self.min_propensity = float(min_propensity)
        self.users = UserPopulation(click_model, user_seed)
        self.name = "fedavg" if propensity == "none" else "fedips"
        self._relevance: dict[int, tuple[Dataset, np.ndarray]] = {}
        self.setup: dict = {}  # how f_0 and F were obtained (filled by ``build_fedips``)

    @property
    def config(self) -> dict:
        """The resolved configuration (recorded by ``federation.train``)."""
        return {
            "algorithm": self.name,
            "ranker": self.ranker.name,
            "k": self.k,
            "lr_local": self.lr_local,
            "lr_global": self.lr_global,
            "clicks_per_client": self.m,
            "max_sessions": self.max_sessions,
            "propensity": self.propensity,
            "gamma": float(self.click_model.gamma),
            "gamma_sd": float(self.click_model.gamma_sd),
            "user_seed": self.users.seed,
            "min_propensity": self.min_propensity,
            **self.setup,
        }

    # -- Algorithm protocol -------------------------------------------------------------
    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.ranker.init_params(rng), dtype=np.float64)

    def ascending(self) -> "FedIPS":
        """A copy whose clients step up their IPS-weighted hinge loss (Eq. 4, 7) instead of down,
        ``w <- w + eta_l / p grad h``: the local gradient ascent of PGA unlearning (Halimi et al. 2022)."""
        out = copy.copy(self)
        out.lr_local = -self.lr_local
        return out

    def init_server_state(self, params: np.ndarray) -> Any:
        return None

    def simulate(
        self, data: Dataset, queries: np.ndarray, client_ids: np.ndarray, rng: np.random.Generator
    ) -> ClickLog:
        """The cohort's click logs for this round (f_0 lists, Eq. 11 clicks, m-click budget)."""
        queries = np.asarray(queries, dtype=np.int64)
        shown = self.policy.shown(data, queries)  # (n, B, K)
        valid = shown >= 0
        labels = np.where(valid, data.labels[np.where(valid, shown, 0)], -1)
        gammas = self.users.gammas(client_ids)
        prob = np.where(valid, self.click_model.click_prob(labels, gammas), 0.0)
        slot, pos, n_clicks, sessions, session_clicks = simulate_log(prob, self.m, self.max_sessions, rng)
        clicked = clicked_slots(slot, pos, shown.shape)
        return ClickLog(shown, gammas, slot, pos, n_clicks, clicked, sessions, session_clicks)

    def redraw_clicks(self, truth: GroundTruth, interactions: Interactions, data: Dataset, draws: int,
                      rng: np.random.Generator) -> np.ndarray:
        """Counterfactual clicks of the same users (gamma_u of their ids) on the same f_0 lists:
        Eq. 11 sessions until m clicks again, the slots clicked among them, (draws, n, B, K)."""
        shown = np.asarray(interactions.shown)
        check_counterfactual_memory(draws, shown.size)
        valid = shown >= 0
        labels = np.where(valid, data.labels[np.where(valid, shown, 0)], -1)
        prob = np.where(valid, self.click_model.click_prob(labels, self.users.gammas(truth.client_ids)), 0.0)
        tiled = np.broadcast_to(prob, (int(draws),) + prob.shape).reshape((-1,) + prob.shape[1:])
        slot, pos, _, _, _ = simulate_log(tiled, self.m, self.max_sessions, rng)
        return clicked_slots(slot, pos, tiled.shape).reshape((int(draws),) + shown.shape)

    def propensities(self, data: Dataset, log: ClickLog) -> np.ndarray:
        """p_u(i) of every client and position, shape (n, K)."""
        n = len(log.gammas)
        if self.propensity == "none":
            return np.ones((n, self.k))
        if self.propensity == "true":
            return np.asarray(self.click_model.examination(log.gammas, self.k), dtype=np.float64)
        valid = log.shown >= 0
        relevance = np.where(valid, self._relevance_table(data)[np.where(valid, log.shown, 0)], 0.0)
        theta = estimate_examination(log.sessions, log.session_clicks, relevance, valid)
        return to_propensities(theta, self.min_propensity)

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
        """Simulate each client's log and run its IPS-weighted SGD pass (vectorized over clients).

        ``deterministic`` changes nothing: the shown lists are always f_0's top K; clicks stay random.
        """
        queries = np.asarray(queries, dtype=np.int64)
        log = self.simulate(data, queries, client_ids, rng)
        prop = self.propensities(data, log)
        lists = self.policy.table_features(data)  # (n_queries, K, F)
        n = len(log.gammas)
        params = np.asarray(params, dtype=np.float64)
        w = np.empty((n, len(params)))  # each client's model after its pass, then its update

        has = log.click_slot >= 0                                            # (n, m): a prefix per row
        slot = np.where(has, log.click_slot, 0)
        pos = np.where(has, log.click_pos, 0)
        rows = np.arange(n)[:, None]
        lists_of = queries[rows, slot]
        valid = log.shown[rows, slot] >= 0                                   # (n, m, K)
        step = np.where(has, self.lr_local / prop[rows, pos], 0.0)
        if isinstance(self.ranker, LinearRanker):
            n_steps = has.sum(axis=1)

            def linear_pass(part: slice) -> None:
                """The compiled passes of the clients in ``part`` (each reads only its own log)."""
                linear_passes(params, lists, lists_of[part], valid[part], pos[part], step[part], n_steps[part],
                              w[part])

            thread_map(linear_pass, row_parts(n), rows=n * self.m * lists.shape[1])
        else:
            thread_map(lambda part: self._sgd_pass(params, lists, lists_of[part], valid[part], pos[part],
                                                   step[part], has[part], w[part]),
                       [slice(a, min(a + PASS_CLIENTS, n)) for a in range(0, n, PASS_CLIENTS)],
                       rows=n * self.m * lists.shape[1])
        batch = log.shown.shape[1]
        messages = Messages(
            n_interactions=np.full(n, batch, dtype=np.int64),
            vector=w,
            vector_kind="update",
        )
        shown_ndcg = np.asarray(metrics.ndcg_of_shown(log.shown, data, k=10), dtype=np.float64)  # the curves' nDCG@10
        return ClientOutput(
            messages=messages,
            interactions=Interactions(queries=queries, shown=log.shown),
            clicks=log.clicked,
            shown_ndcg=shown_ndcg,
            private={"gamma_u": log.gammas, "n_clicks": log.n_clicks, "propensity": prop},
            round_metrics={
                "clicks_per_client": float(log.n_clicks.mean()),
                "sessions_per_client": float(log.sessions.sum(axis=1).mean()),
            },
        )

    def server_step(self, params: np.ndarray, state: Any, view: ServerView) -> tuple[np.ndarray, Any]:
        """w_{t+1} = w_t + eta_g * (mean of the cohort's updates), Algorithm 1 line 11."""
        if view.aggregate is None:
            raise ValueError("FedIPS needs the aggregate of the cohort's update vectors")
        return params + self.lr_global * view.aggregate, state

    def _sgd_pass(self, params: np.ndarray, lists: np.ndarray, lists_of: np.ndarray, valid: np.ndarray,
                  pos: np.ndarray, step: np.ndarray, has: np.ndarray, w: np.ndarray) -> None:
        """The m click steps of some clients (a non-linear ranker), all clients' step j at once;
        writes each client's update (model after the pass minus ``params``) into ``w``."""
        wp = np.broadcast_to(params, w.shape)
        out, spare = w, np.empty_like(w)  # the steps write into these in turn
        x = np.empty((len(w),) + lists.shape[1:], dtype=lists.dtype)
        for j in range(int(has.any(axis=0).sum())):  # the steps someone still takes (has: a prefix per row)
            np.take(lists, lists_of[:, j], axis=0, out=x, mode="clip")  # (n_part, K, F), unbuffered
            wp = self.click_step(wp, x, valid[:, j], pos[:, j], step[:, j], out=out)
            out, spare = spare, out
        if not np.may_share_memory(wp, w):  # the last step wrote into the spare (or no step: params)
            w[...] = wp
        w -= params

    def click_step(self, w: np.ndarray, x: np.ndarray, valid: np.ndarray, pos: np.ndarray,
                   step: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """One click's SGD step of the pass (Eq. 4 and 7), ``w - step * grad h_{q,d}(w)`` for models
        w (n, P) on lists x (n, K, F) with the click at ``pos`` (n,) and ``step`` = eta_l / p_u(i)
        (n,); ``client_step`` and the attacks that replay it (``attacks.bayes_fedips``) share it.
        ``out`` (float64 (n, P), not ``w``) receives the new models instead of a fresh array.
        Linear: the compiled ``kernels.fedips.linear_click_steps`` (the same step as the pass's)."""
        if isinstance(self.ranker, LinearRanker):
            out = np.empty(np.shape(w)) if out is None else out
            linear_click_steps(kernel_array(w, np.float64), kernel_array(x, np.float32), kernel_array(valid, bool),
                               kernel_array(pos, np.int64), kernel_array(step, np.float64), out)
            return out
        _, coef = hinge_coefficients(self.ranker.score(w, x), valid, pos)
        delta = np.multiply(self.ranker.vjp(w, x, coef), step[:, None], out=out)
        return np.subtract(w, delta, out=delta)

    # -- helpers --------------------------------------------------------------------------
    def _relevance_table(self, data: Dataset) -> np.ndarray:
        hit = self._relevance.get(id(data))
        if hit is None or hit[0] is not data:
            hit = (data, relevance_of_rows(self.relevance_params, data.features))
            self._relevance[id(data)] = hit
        return hit[1]


def build_fedips(
    data: Dataset | Splits,
    *,
    propensity: str = "true",
    seed: int = 0,
    gamma: float = 1.0,
    k: int = 5,
    clicks_per_client: int = 10,
    lr_local: float = 0.001,
    lr_global: float = 1.0,
    logging_fraction: float = 0.01,
    em_rounds: int = 20,
    clients: int = 2000,
    queries_per_client: int = 5,
) -> FedIPS:
    """FedIPS ready to train on ``data`` (a training split, or Splits whose train split is used).

    Trains f_0 on ``logging_fraction`` of the training queries; the users are
    ``PositionBasedModel(gamma)`` with gamma_u seeded by ``seed``. ``propensity="none"`` gives
    FedAvg. With ``"estimated"`` the relevance model F is first trained by ``em_rounds``
    rounds of ``FedRelevanceEM`` with the same cohort size (seeded from ``seed``, kept apart
    from the training run's streams).
    """

    train_data = data.train if isinstance(data, Splits) else data
    check("propensity", propensity, (Options(PROPENSITIES),))
    check("gamma", gamma, (Interval(float, 0, None),))
    start = time.perf_counter()
    policy = train_logging_policy(train_data, k=k, fraction=logging_fraction, seed=seed)
    clicks = PositionBasedModel(gamma=gamma, n_levels=train_data.n_levels)
    common = dict(lr_local=lr_local, lr_global=lr_global, clicks_per_client=clicks_per_client, user_seed=seed)
    setup: dict = {"logging_fraction": logging_fraction, "logging_seconds": time.perf_counter() - start}
    relevance = None
    if propensity == "estimated":
        check("em_rounds", em_rounds, POSITIVE_INT)
        source = FedIPS(LinearRanker(train_data.n_features), clicks, policy, **common)
        em = train(FedRelevanceEM(source), train_data,
                   TrainSettings(clients=clients, queries_per_client=queries_per_client, rounds=em_rounds,
                                 seed=seed + 1_000_003, replace=clients * queries_per_client > train_data.n_queries))
        relevance = em.params
        setup.update(em_rounds=em_rounds, em_seconds=em.seconds)
    alg = FedIPS(LinearRanker(train_data.n_features), clicks, policy, propensity=propensity,
                 relevance_params=relevance, **common)
    alg.setup = setup
    return alg
