"""FOLtR-ES: federated online learning to rank with evolution strategies (Kharitonov 2019, §3).

Each client draws a public seed ``s``, perturbs the global model ``phi`` into
``theta_s = phi + sigma v_s`` with ``v_s ~ N(0, I)`` generated from ``s`` alone, ranks its
``B`` queries deterministically by the perturbed model (top ``k``), simulates cascade clicks
and reports the seed and the reciprocal rank of the topmost click (MaxRR, 0 without a
click) of every interaction. With antithetic variates the first ``B/2`` interactions use
``+sigma v_s`` and the last ``B/2`` use ``-sigma v_s``. The server regenerates ``v_s`` from
the seeds, forms the ES gradient estimate (Eq. 4-6) and takes an Adam ascent step.

Privatization (§3.3) is a client defense (randomized response on ``Messages.metric``). The
message carries one value per interaction and the server averages them per antithetic
direction, so privatizing each interaction's value before that average is exactly what the
authors' code does (it privatizes each MaxRR, then averages over the B/2 interactions of a
side) -- the paper's text speaks of one averaged value per direction, its code and ours
randomize the per-interaction values.

Ranking numerics (issue 27). A linear model scores in float32 -- the features times
``float32(theta)``, summed in float32 in the order of the features -- within
``(F + 2) 2^-24 sum_f |x_f theta_f|`` of float64; an interaction with a float32 score beyond
1e30 is scored in float64. One compiled pass per interaction scores its query's rows and keeps
its top k (``kernels.foltr_es``), so a client's scores, hence its shown lists, have the same bits
alone as in any cohort and on any number of threads. (Until this version: one BLAS ``sgemv``
per model and query, and the float64 fallback for a whole chunk of interactions.)

Seeds. The seed in the message drives only the perturbation; the clients' query choices
and click draws come from the private ``rng`` of ``client_step``. ``flawed_seeding=True``
reproduces the published implementation's mistake: the client reseeds its own generator
with the seed it sends and draws its queries and click uniforms from it, so that anyone who
holds the seed can replay them (``attacks/foltr_decode.py``, attack ``seed-replay``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fltr_audit.engine import metrics, plackett_luce
from fltr_audit.constraints import POSITIVE, POSITIVE_INT, check
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.kernels import kernel_array
from fltr_audit.engine.algorithms.evolution_strategies import (cascade_clicks, es_gradient, es_weights,
                                                           flawed_client_draws, perturbations)
from fltr_audit.engine.kernels.foltr_es import linear_scores, linear_shown
from fltr_audit.engine.clicks import redraw_cascade, shown_labels
from fltr_audit.engine.messages import GroundTruth, Interactions, Messages, ServerView
from fltr_audit.engine.rankers import float32_rows
from fltr_audit.engine.threads import row_parts, thread_map

CHUNK_ROWS = 1024  # MLP: interactions ranked together (their scores, 1024 x the longest list, stay in cache)


@dataclass(frozen=True)
class _RankPlan:
    """A cohort's interactions grouped for ranking (``FOLtRES.shown_lists``).

    Sorted by list length, then query (stable); a segment is the run of one query's
    interactions, a chunk the segments starting in one block of ``CHUNK_ROWS`` sorted places.
    The plan fixes only where an interaction is ranked, never how it is scored.
    """

    order: np.ndarray          # (I,) the interaction (c * B + b) at each sorted place
    queries: np.ndarray        # (I,) its query
    seg_row_lo: list[int]      # per segment: its query's rows [row_lo, row_hi), its places [start, end)
    seg_row_hi: list[int]
    seg_start: list[int]
    seg_end: list[int]
    chunk_seg: list[int]       # chunk c holds segments chunk_seg[c] .. chunk_seg[c + 1] - 1
    n_rows: int                # feature rows scored (the sum of the list lengths)

    @classmethod
    def of(cls, queries: np.ndarray, data: Dataset) -> "_RankPlan":
        docs = data.docs_per_query[queries]
        order = np.argsort(docs * max(data.n_queries, 1) + queries, kind="stable")
        q = queries[order]
        starts = np.flatnonzero(np.diff(q, prepend=-1)) if len(q) else np.zeros(0, dtype=np.int64)
        ends = np.append(starts[1:], len(q))
        seg_q = q[starts]
        chunks = np.unique(np.searchsorted(starts, np.arange(0, len(q), CHUNK_ROWS)))
        return cls(order=order, queries=q, seg_row_lo=data.query_ptr[seg_q].tolist(),
                   seg_row_hi=data.query_ptr[seg_q + 1].tolist(), seg_start=starts.tolist(), seg_end=ends.tolist(),
                   chunk_seg=np.append(chunks, len(starts)).tolist() if len(starts) else [0],
                   n_rows=int(docs.sum()))

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_seg) - 1

    def chunk_rows(self, c: int) -> tuple[int, int]:
        """The sorted places [lo, hi) of chunk c."""
        return self.seg_start[self.chunk_seg[c]], self.seg_end[self.chunk_seg[c + 1] - 1]


def _rows_of(data: Dataset) -> np.ndarray:
    """The feature matrix for the kernels: float32, C-contiguous, a plain ndarray (a memory map
    as a view; features of another dtype or layout as a float32 copy, ``rankers.float32_rows``)."""
    return np.asarray(float32_rows(data.features))


@dataclass(frozen=True)
class AdamState:
    """Adam's first and second moments and step count (Kingma & Ba; PyTorch defaults)."""

    m: np.ndarray
    v: np.ndarray
    t: int = 0


class FOLtRES:
    """FOLtR-ES (§3.1-3.2) as an ``fltr_audit.engine.interfaces.Algorithm``.

    Parameters
    ----------
    ranker : LinearRanker or MLPRanker
        Initialized with zeros, as in the paper (§5, "Models").
    click_model : CascadeClickModel
    sigma : float
        Perturbation scale (1e-2, never tuned in the paper).
    lr : float
        Adam learning rate (1e-3); betas and eps are PyTorch's defaults.
    antithetic : bool
        First B/2 interactions with ``+sigma v_s``, last B/2 with ``-sigma v_s`` (see ``signs``).
    k : int
        Results shown per query (top 10; the metric then takes n = k + 1 values).
    flawed_seeding : bool
        Reproduce the published client's reseeding with its public seed (module docstring);
        the engine's query draw is then replaced by the client's own.
    """

    name = "foltr-es"
    decodes_messages = True  # ``message_updates``: the server reads each client's gradient share off its message

    def __init__(self, ranker, click_model, *, sigma: float = 0.01, lr: float = 0.001, antithetic: bool = True,
                 k: int = 10, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 flawed_seeding: bool = False):
        check("sigma", sigma, POSITIVE)
        check("lr", lr, POSITIVE)
        check("k", k, POSITIVE_INT)
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or not eps > 0:
            raise FltrError(f"foltr-es: Adam needs betas in [0, 1) and eps > 0, got {betas}, {eps}")
        self.ranker = ranker
        self.click_model = click_model
        self.sigma = float(sigma)
        self.lr = float(lr)
        self.antithetic = bool(antithetic)
        self.k = int(k)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.flawed_seeding = bool(flawed_seeding)
        self._last_perturbations: tuple[tuple[bytes, int], np.ndarray] | None = None

    @property
    def config(self) -> dict:
        """The resolved hyperparameters (JSON-able), recorded by ``federation.train``."""
        return {"algorithm": self.name, "ranker": self.ranker.name, "click_model": self.click_model.name,
                "sigma": self.sigma, "lr": self.lr, "antithetic": self.antithetic, "k": self.k,
                "adam_betas": list(self.betas), "adam_eps": self.eps, "flawed_seeding": self.flawed_seeding}

    def init_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Zeros (§5: all parameters initialized with zeros; the perturbations break symmetry)."""
        return np.zeros(self.ranker.n_params)

    def init_server_state(self, params: np.ndarray) -> AdamState:
        return AdamState(m=np.zeros_like(params, dtype=np.float64), v=np.zeros_like(params, dtype=np.float64))

    def signs(self, B: int) -> np.ndarray:
        """The direction of each of the B interactions: +1, or when antithetic +1 for the first
        ``ceil(B/2)`` and -1 for the rest (B = 1: a single +1 interaction, see ``es_gradient``)."""
        s = np.ones(B)
        if self.antithetic:
            s[(B + 1) // 2:] = -1.0
        return s

    def shown_lists(self, params: np.ndarray, data: Dataset, queries: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Row indices of the top-k shown by each client's perturbed model, (n, B, k), -1 padded.

        Interaction (c, b) ranks query ``queries[c, b]`` deterministically (ties by position)
        by ``theta = params + signs[b] * sigma * v_c``, scored as ``scores`` says. Linear: the
        kernel ``kernels.foltr_es.linear_shown`` over the interactions sorted by query (a
        query's rows stay in cache), in parts on the thread pool. MLP: in chunks of about
        ``CHUNK_ROWS`` interactions (sorted by list length, then query, so that a chunk's
        scores, padded to its longest list, stay small), the chunks in parts on the pool.
        """
        queries = np.asarray(queries, dtype=np.int64)
        n, B = queries.shape
        V = self.cohort_perturbations(seeds)
        if self.ranker.linear:
            return self._linear_shown(params, V, data, queries)
        plan = _RankPlan.of(queries.ravel(), data)
        pos = np.empty((len(plan.order), self.k), dtype=np.int64)

        def rank_part(chunks: slice) -> None:
            for c in range(chunks.start, chunks.stop):
                lo, hi = plan.chunk_rows(c)
                scores, docs = self._chunk_scores(params, V, B, data, plan, c)
                pos[lo:hi] = plackett_luce.topk(scores, np.arange(scores.shape[1])[None, :] < docs[:, None], self.k)

        thread_map(rank_part, row_parts(plan.n_chunks), rows=plan.n_rows)
        rows = np.empty_like(pos)
        rows[plan.order] = np.where(pos >= 0, data.query_ptr[plan.queries][:, None] + pos, -1)
        return rows.reshape(n, B, self.k)

    def scores(self, params: np.ndarray, data: Dataset, queries: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """The scores each interaction's perturbed model gives its query's rows, (n, B, width)
        float64 padded with -inf (width: the longest list of the cohort).

        Linear: ``kernels.foltr_es.linear_scores`` -- the float32 features times
        ``float32(theta)`` summed in float32 in the order of the features (float64 for an
        interaction with a float32 score beyond ``FLOAT32_MAX_SCORE`` or not finite); MLP:
        float64, one product per model. An interaction's scores thus depend on its model and its
        query's rows only -- never on the rest of the cohort, the chunking or the threads.
        """
        queries = np.asarray(queries, dtype=np.int64)
        n, B = queries.shape
        V = self.cohort_perturbations(seeds)
        if self.ranker.linear:
            flat = kernel_array(queries.ravel(), np.int64)
            out = np.full((len(flat), int(data.docs_per_query[flat].max(initial=0))), -np.inf)
            linear_scores(_rows_of(data), data.query_ptr, flat, B, self.signs(B) * self.sigma,
                          kernel_array(params, np.float64), V, np.arange(len(flat)), out)
            return out.reshape(n, B, -1)
        plan = _RankPlan.of(queries.ravel(), data)
        width = int(data.docs_per_query[plan.queries].max(initial=0))
        out = np.full((len(plan.order), width), -np.inf)
        for c in range(plan.n_chunks):
            lo, hi = plan.chunk_rows(c)
            scores, docs = self._chunk_scores(params, V, B, data, plan, c)
            valid = np.arange(scores.shape[1])[None, :] < docs[:, None]
            out[lo:hi, :scores.shape[1]] = np.where(valid, scores, -np.inf)
        result = np.empty_like(out)
        result[plan.order] = out
        return result.reshape(n, B, width)

    def _linear_shown(self, params: np.ndarray, V: np.ndarray, data: Dataset, queries: np.ndarray) -> np.ndarray:
        """``shown_lists`` of the linear ranker: ``linear_shown`` on the interactions in the order
        of their queries (a query's rows stay in cache), in parts on the thread pool; an
        interaction with a NaN score (a degenerate model) is ranked again by
        ``plackett_luce.topk`` on its ``linear_scores`` (NaN first, as argmax)."""
        n, B = queries.shape
        flat = kernel_array(queries.ravel(), np.int64)
        order = np.argsort(flat, kind="stable")
        X, theta0, side = _rows_of(data), kernel_array(params, np.float64), self.signs(B) * self.sigma
        shown = np.empty((len(flat), self.k), dtype=np.int64)
        has_nan = np.zeros(len(flat), dtype=bool)

        def rank_part(p: slice) -> None:
            linear_shown(X, data.query_ptr, flat, B, side, theta0, V, order[p], shown, has_nan)

        thread_map(rank_part, row_parts(len(flat)), rows=int(data.docs_per_query[flat].sum()))
        if has_nan.any():
            bad = np.flatnonzero(has_nan)
            docs = data.docs_per_query[flat[bad]]
            scores = np.full((len(bad), int(docs.max())), -np.inf)
            linear_scores(X, data.query_ptr, flat, B, side, theta0, V, bad, scores)
            pos = plackett_luce.topk(scores, np.arange(scores.shape[1])[None, :] < docs[:, None], self.k)
            shown[bad] = np.where(pos >= 0, data.query_ptr[flat[bad]][:, None] + pos, -1)
        return shown.reshape(n, B, self.k)

    def message_updates(self, messages: Messages) -> np.ndarray:
        """Each client's share ``w_c v_c / sigma`` of the ES gradient (Eq. 4-6), (n, P): their mean is
        ``es_gradient``; a robust aggregator combines them instead."""
        V = self.cohort_perturbations(messages.seed)
        return es_weights(messages.metric, self.antithetic)[:, None] * V / self.sigma

    def cohort_perturbations(self, seeds: np.ndarray) -> np.ndarray:
        """``perturbations(seeds, P)``, kept for the next call with the same seeds (read-only):
        the server regenerates exactly what its cohort's clients just drew."""
        seeds = np.asarray(seeds, dtype=np.uint64)
        key = (seeds.tobytes(), self.ranker.n_params)
        last = self._last_perturbations
        if last is not None and last[0] == key:
            return last[1]
        V = perturbations(seeds, self.ranker.n_params)
        V.flags.writeable = False
        self._last_perturbations = (key, V)
        return V

    def _chunk_scores(self, params: np.ndarray, V: np.ndarray, B: int, data: Dataset, plan: "_RankPlan",
                      chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """float64 scores (rows, width) of one chunk's interactions (the MLP; see ``scores``) and
        their list lengths. Interaction (c, b) is scored by ``theta = params + signs[b] * sigma * v_c``,
        each model on its own, so that its scores never depend on which other models share its query.
        """
        lo, hi = plan.chunk_rows(chunk)
        who = plan.order[lo:hi]
        theta = (self.signs(B) * self.sigma)[who % B][:, None] * V[who // B]
        theta += params
        docs = data.docs_per_query[plan.queries[lo:hi]]
        scores = np.zeros((hi - lo, int(docs.max(initial=0))))
        X = data.features
        first, last = plan.chunk_seg[chunk], plan.chunk_seg[chunk + 1]
        for r0, r1, s, e in zip(plan.seg_row_lo[first:last], plan.seg_row_hi[first:last],
                                plan.seg_start[first:last], plan.seg_end[first:last]):
            scores[s - lo:e - lo, :r1 - r0] = self._model_scores(theta[s - lo:e - lo], X[r0:r1].astype(np.float64))
        return scores, docs

    def _model_scores(self, thetas: np.ndarray, X: np.ndarray) -> np.ndarray:
        """float64 scores (m, D) of one query's rows X (D, F) under m MLP models, one product per model."""
        W, b, v = self.ranker.unpack(thetas)                       # (m, H, F), (m, H), (m, H)
        Z = np.matmul(X, np.swapaxes(W, 1, 2))                     # (m, D, H): one GEMM per model
        Z += b[:, None, :]
        np.maximum(Z, 0.0, out=Z)
        return np.matmul(Z, v[:, :, None])[..., 0]

    def client_step(self, params: np.ndarray, data: Dataset, queries: np.ndarray, client_ids: np.ndarray,
                    rng: np.random.Generator, public_rng: np.random.Generator,
                    deterministic: bool = False) -> ClientOutput:
        """Every client of the cohort: perturb, rank, click, report (seed, per-interaction MaxRR).

        Seeds come from ``public_rng`` (full 64-bit range); queries and clicks from ``rng``
        (or, with ``flawed_seeding``, from the seed). FOLtR-ES always ranks deterministically
        by its perturbed model, so ``deterministic`` changes nothing.
        """
        queries = np.asarray(queries, dtype=np.int64)
        if queries.ndim != 2:
            raise FltrError(f"foltr-es: queries must be (clients, queries per client), got shape {queries.shape}")
        n, B = queries.shape
        seeds = public_rng.integers(0, 2**64, size=n, dtype=np.uint64)
        if self.flawed_seeding:
            queries, uniforms = flawed_client_draws(seeds, data.n_queries, B, self.k)
        shown = self.shown_lists(params, data, queries, seeds)
        labels_shown = np.where(shown >= 0, data.labels[np.maximum(shown, 0)], -1)
        if self.flawed_seeding:
            clicks = cascade_clicks(labels_shown, self.click_model, uniforms)
        else:
            clicks = np.asarray(self.click_model.simulate(labels_shown, rng), dtype=bool)
        metric = np.asarray(metrics.max_rr(clicks), dtype=np.float64)   # (n, B)
        return ClientOutput(
            messages=Messages(n_interactions=np.full(n, B, dtype=np.int64), seed=seeds, metric=metric),
            interactions=Interactions(queries=queries, shown=shown),
            clicks=clicks,
            shown_ndcg=np.asarray(metrics.ndcg_of_shown(shown, data, self.k), dtype=np.float64),
            private={"maxrr": metric.copy()},
            round_metrics={"batch_maxrr": float(metric.mean())},
        )

    def server_step(self, params: np.ndarray, state: AdamState, view: ServerView) -> tuple[np.ndarray, AdamState]:
        """Regenerate ``v_s`` from the seeds, estimate the gradient (Eq. 4-6), Adam ascent step."""
        msgs = view.messages
        if msgs is None or msgs.seed is None or msgs.metric is None:
            raise FltrError("foltr-es: the server needs every client's seed and metric values "
                            "(secure aggregation or a vector defense hides them)")
        if view.aggregate is None:
            g = es_gradient(self.cohort_perturbations(msgs.seed), msgs.metric, self.sigma, self.antithetic)
        else:  # a robust aggregator's combination of the clients' shares (``message_updates``)
            g = np.asarray(view.aggregate, dtype=np.float64)
        b1, b2 = self.betas
        t = state.t + 1
        m = b1 * state.m + (1 - b1) * g
        v = b2 * state.v + (1 - b2) * g * g
        step = self.lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + self.eps)
        return params + step, AdamState(m=m, v=v, t=t)

    def redraw_clicks(self, truth: GroundTruth, interactions: Interactions, data: Dataset, draws: int,
                      rng: np.random.Generator) -> np.ndarray:
        """Counterfactual clicks: the cascade model again on the same shown lists, (draws, n, B, k)."""
        return redraw_cascade(self.click_model, shown_labels(data.labels, interactions.shown), draws, rng)
