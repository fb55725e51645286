"""FPDGD: federated averaging of PDGD local updates (FPDGD paper, Algorithms 1-2, Eq. 5-6).

Every client of a round starts from the global model, issues its B queries one after
the other and after each one takes a PDGD step ``theta <- theta + eta * grad`` (Alg. 1):

1. score the query's full candidate set and sample a Plackett-Luce ranking by Gumbel
   top-k (Eq. 1-2); the top ``k`` are shown;
2. the user clicks by the cascade click model;
3. preferences: every clicked document over every unclicked document ranked above the
   last click, plus the unclicked one right after it (PDGD's reading of "examined");
4. each pair is weighted by rho (Eq. 6) times the derivative of the pairwise
   probability (Eq. 5) and the gradient is ``sum w (f'(d_k) - f'(d_l))``, through the
   ranker's vector-Jacobian product (so linear and MLP rankers share the code).

The message is the client's full local weight vector and n_c = B; the server replaces
the global model by the n_c-weighted mean (Alg. 2), which the aggregator computes.

The cohort's B steps run query by query for all clients at once; the work per list --
scoring its contiguous candidate rows, the Gumbel top-k with its log-denominators, the pair
coefficients -- runs in compiled loops (``fltr_audit.engine.kernels``), one part of the clients per
thread, the departure from numpy vectorization that ``fltr-audit bench fpdgd`` measured as
DESIGN.md asks (padded numpy blocks moved far more memory than the arithmetic costs).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from fltr_audit.engine import metrics, plackett_luce
from fltr_audit.constraints import POSITIVE, POSITIVE_INT, ParameterError, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.population import simulate_clicks
from fltr_audit.engine.threads import row_parts, thread_map
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.kernels.pdgd import linear_steps, pair_coefficients
from fltr_audit.engine.kernels.ranking import rank_lists
from fltr_audit.engine.clicks import redraw_cascade, shown_labels
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, ServerView

RANKING_PARTS_PER_THREAD = 4
"""The clients' rankings run in this many parts per thread: each part's Gumbel noise is drawn on the
calling thread while the threads rank the parts before it, so only the first part's draw waits
(a quarter of it with four parts; ``bench fpdgd`` +6 %). The parts draw the same stream in order."""


def pair_weights(shown_scores: np.ndarray, log_dens: np.ndarray, clicks: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """The per-position coefficients of Eq. 5, ``grad_i = sum_p coef[i, p] f'(d_p)``, of every list
    (``kernels.pdgd.pair_coefficients``: PDGD's preference pairs, each weighted by rho of Eq. 6).

    Parameters
    ----------
    shown_scores : ndarray (n, k)
        Scores of the shown documents, top first; -inf on empty slots.
    log_dens : ndarray (n, k + 1)
        ``L_m``, the log-sum of exp-scores of the documents not placed before m
        (``plackett_luce.log_denominators`` with one extra -1 slot, so ``L_k`` is the
        log-sum of the documents never shown).
    clicks, shown : ndarray of bool (n, k)

    Returns
    -------
    ndarray (n, k)
    """
    coef = np.empty(clicks.shape)
    pair_coefficients(kernel_array(shown_scores, np.float64), kernel_array(log_dens, np.float64),
                      kernel_array(clicks, bool), kernel_array(shown, bool), coef)
    return coef


def cohort_pdgd_steps(ranker: Any, current: np.ndarray, weights: np.ndarray, X: np.ndarray, shown: np.ndarray,
                      shown_scores: np.ndarray, log_dens: np.ndarray, clicks: np.ndarray,
                      lr: float, rows: int | None = None) -> None:
    """Every list's PDGD step ``weights[i] += lr * grad_i`` (Eq. 5-6), one contiguous part of the
    lists per thread: ``pair_weights`` and the ranker's vector-Jacobian product at ``current[i]``
    over the shown documents' rows of ``X`` (``shown`` (n, k), -1 on empty slots); lists without
    a preference pair are skipped.

    Every list's step depends on that list alone, so the parts give the same result.
    ``rows`` (the candidates ranked) runs the parts serially on small data (``thread_map``).
    A linear ranker's steps run in one compiled loop (``kernels.pdgd.linear_steps``, the same bits).
    """
    def linear_step(part: slice) -> None:
        linear_steps(X, kernel_array(shown[part], np.int64), kernel_array(shown_scores[part], np.float64),
                     kernel_array(log_dens[part], np.float64), kernel_array(clicks[part], bool), lr, weights[part])

    def step(part: slice) -> None:
        ok = shown[part] >= 0
        coef = pair_weights(shown_scores[part], log_dens[part], clicks[part], ok)
        used = np.flatnonzero(coef.any(axis=1))
        if len(used):
            lists = used + part.start
            weights[lists] += lr * ranker.vjp_rows(current[lists], X, np.where(ok[used], shown[lists], 0), coef[used])

    linear = getattr(ranker, "linear", False) and weights.flags.c_contiguous
    thread_map(linear_step if linear else step, row_parts(len(clicks)), rows=rows)


def cohort_rankings(ranker: Any, params: np.ndarray, data: Dataset, queries: np.ndarray, rng: np.random.Generator,
                    k: int, deterministic: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each client ranks its query's full candidate set: PL top-k sample (or top-k by score).

    Each client's query occupies contiguous rows of ``data.features``; ``ranker.score_blocks``
    scores them in place (gathering the cohort's rows into one padded block moves far more
    memory than the arithmetic costs; DESIGN.md, ``fltr-audit bench fpdgd``) and
    ``kernels.ranking.rank_lists`` takes the Gumbel top-k and the log-denominators, one part of
    the clients per thread. The Gumbel noise is one standard Gumbel per candidate, drawn client
    after client (part after part, in order: the same stream for any number of threads).

    Returns
    -------
    shown : ndarray of int64 (n, k), dataset rows, -1 on empty slots
    shown_scores : ndarray (n, k), -inf on empty slots
    log_dens : ndarray (n, k + 1), the ranking's log-denominators; the last column is the
        log-sum of the exp-scores of the candidates never shown (see ``kernels.pdgd.swap_log_ratios``)
    """
    n = len(queries)
    positions = np.empty((n, k), dtype=np.int64)
    shown_scores = np.empty((n, k))
    log_dens = np.empty((n, k + 1))
    counts = data.docs_per_query[queries].astype(np.int64)
    starts = data.query_ptr[queries].astype(np.int64)
    parts = row_parts(n, per_thread=RANKING_PARTS_PER_THREAD)
    # each part's noise, drawn in part order as ``thread_map`` hands the parts out (lazily: a part
    # ranks on a thread while the next part's noise is drawn)
    noise = (np.empty(0, dtype=np.float32) if deterministic
             else plackett_luce.gumbel_noise(rng, (int(counts[p].sum()),)) for p in parts)

    def rank_part(part: slice, gumbel: np.ndarray) -> None:
        width = int(counts[part].max(initial=1))  # list i's scores are written and read to counts[i] only
        scores = ranker.score_blocks(params[part], data.features, starts[part], counts[part],
                                     out=np.empty((part.stop - part.start, width)))
        rank_lists(scores, counts[part], gumbel, np.cumsum(counts[part]) - counts[part], not deterministic,
                   positions[part], shown_scores[part], log_dens[part])

    thread_map(rank_part, parts, noise, rows=int(counts.sum()))
    shown = np.where(positions >= 0, starts[:, None] + positions, -1)
    return shown, shown_scores, log_dens


def pdgd_cohort(ranker: Any, click_model: Any, params: np.ndarray, data: Dataset, queries: np.ndarray,
                rng: np.random.Generator, *, lr: float, k: int, deterministic: bool,
                local_updates: bool, users: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """B PDGD interactions of every client of a cohort (Alg. 1, vectorized over clients).

    With ``local_updates`` each client applies ``theta += lr * grad`` after every query
    (FPDGD, Alg. 2 ClientUpdate); without, every query is ranked by ``params`` and the
    gradients are summed (the batch-accumulated PDGD baseline). Either way the returned
    weights are ``params + lr * (sum of the client's gradients)``.

    Returns
    -------
    weights : ndarray (n, P)
    shown : ndarray of int64 (n, B, k), dataset rows, -1 on empty slots
    clicks : ndarray of bool (n, B, k)
    """
    n, B = queries.shape
    base = np.broadcast_to(np.asarray(params, dtype=np.float64), (n, ranker.n_params))
    weights = base.copy()
    shown = np.full((n, B, k), -1, dtype=np.int64)
    clicks = np.zeros((n, B, k), dtype=bool)
    for b in range(B):
        current = weights if local_updates else base
        shown_b, shown_scores, log_dens = cohort_rankings(ranker, current, data, queries[:, b], rng, k, deterministic)
        ok = shown_b >= 0
        labels = np.where(ok, data.labels[np.where(ok, shown_b, 0)], -1)
        clicks_b = np.asarray(simulate_clicks(click_model, labels, data, shown_b, users, rng), dtype=bool) & ok
        cohort_pdgd_steps(ranker, current, weights, data.features, shown_b, shown_scores, log_dens, clicks_b, lr,
                          int(data.docs_per_query[queries[:, b]].sum()))
        shown[:, b] = shown_b
        clicks[:, b] = clicks_b
    return weights, shown, clicks


class FPDGD:
    """Federated PDGD (FPDGD Algorithm 2) with PDGD local updates (Algorithm 1).

    Parameters
    ----------
    ranker : LinearRanker or MLPRanker
    click_model : CascadeClickModel
    lr : float
        eta, 0.1 in the paper.
    k : int
        Number of documents shown (10).
    """

    name = "fpdgd"
    local_updates = True
    user_clicks = True  # simulates each user's own clicks (population.UserClicks)

    def __init__(self, ranker: Any, click_model: Any, lr: float = 0.1, k: int = 10):
        check("lr", lr, POSITIVE)
        check("k", k, POSITIVE_INT, "the documents shown")
        self.ranker = ranker
        self.click_model = click_model
        self.lr = float(lr)
        self.k = int(k)

    @property
    def config(self) -> dict:
        return {"algorithm": self.name, "ranker": self.ranker.name, "click_model": self.click_model.name,
                "lr": self.lr, "k": self.k}

    def ascending(self) -> "FPDGD":
        """A copy whose clients step against the PDGD gradient, ``theta <- theta - eta grad`` after
        each query: the local gradient ascent of PGA unlearning (Halimi et al. 2022, Sec. 3)."""
        out = copy.copy(self)
        out.lr = -self.lr
        return out

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """Zeros for the linear ranker; the ranker's random initialization for the MLP."""
        return np.asarray(self.ranker.init_params(rng), dtype=np.float64)

    def init_server_state(self, params: np.ndarray) -> None:
        return None

    def client_step(self, params: np.ndarray, data: Dataset, queries: np.ndarray, client_ids: np.ndarray,
                    rng: np.random.Generator, public_rng: np.random.Generator,
                    deterministic: bool = False) -> ClientOutput:
        """B PDGD steps per client; the message is the local weights and n_c = B."""
        queries = np.asarray(queries, dtype=np.int64)
        if queries.ndim != 2 or queries.shape[1] < 1:
            raise ParameterError("queries_per_client", f"need (clients, B >= 1) queries, got shape {queries.shape}")
        weights, shown, clicks = pdgd_cohort(self.ranker, self.click_model, params, data, queries, rng,
                                             lr=self.lr, k=self.k, deterministic=deterministic,
                                             local_updates=self.local_updates, users=client_ids)
        n, B = queries.shape
        return ClientOutput(
            messages=Messages(n_interactions=np.full(n, B, dtype=np.int64), vector=weights, vector_kind="weights"),
            interactions=Interactions(queries=queries, shown=shown),
            clicks=clicks,
            shown_ndcg=metrics.ndcg_of_shown(shown, data, self.k),
            round_metrics={"clicks_per_query": float(clicks.sum(axis=2).mean())},
        )

    def server_step(self, params: np.ndarray, state: Any, view: ServerView) -> tuple[np.ndarray, Any]:
        """The next global model is the n_c-weighted mean of the local weights (Alg. 2)."""
        if view.aggregate is None:
            raise ValueError(f"{self.name}: the server received no aggregate of the cohort's weights")
        return np.array(view.aggregate, dtype=np.float64), state

    def redraw_clicks(self, truth: GroundTruth, interactions: Interactions, data: Dataset, draws: int,
                      rng: np.random.Generator) -> np.ndarray:
        """Counterfactual clicks: the cascade model again on the same shown lists, (draws, n, B, k)."""
        return redraw_cascade(self.click_model, shown_labels(data.labels, interactions.shown), draws, rng)
