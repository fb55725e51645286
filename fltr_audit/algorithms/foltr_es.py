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

Seeds. The seed in the message drives only the perturbation; the clients' query choices
and click draws come from the private ``rng`` of ``client_step``. ``flawed_seeding=True``
reproduces the published implementation's mistake: the client reseeds its own generator
with the seed it sends and draws its queries and click uniforms from it, so that anyone who
holds the seed can replay them (``attacks/foltr_decode.py``, attack ``seed-replay``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from fltr_audit import metrics, plackett_luce
from fltr_audit.constraints import POSITIVE, POSITIVE_INT, check
from fltr_audit.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.interfaces import ClientOutput
from fltr_audit.clicks import redraw_cascade, shown_labels
from fltr_audit.messages import GroundTruth, Interactions, Messages, ServerView
from fltr_audit.threads import row_parts, thread_map

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer (a bijective 64-bit mixer), elementwise on uint64."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def perturbations(seeds: np.ndarray, n_params: int) -> np.ndarray:
    """The standard normal perturbation ``v_s`` of each seed, shape (n, n_params) float64.

    A counter-based generator keyed by the seed alone: coordinate ``j`` of ``v_s`` is the
    inverse normal CDF of the top 53 bits of ``splitmix64(splitmix64(s) + (j + 1) * golden)``
    (the SplitMix64 sequence started at the mixed seed). Client and server call this same
    function, so the server regenerates exactly the client's ``v_s`` from the seed, and the
    whole cohort's matrix comes out of one vectorized pass -- about ten times faster than
    building 2,000 seeded ``numpy`` Generators per round on this machine.
    """
    seeds = np.asarray(seeds, dtype=np.uint64)
    with np.errstate(over="ignore"):
        base = _splitmix64(seeds)
        counters = np.arange(1, n_params + 1, dtype=np.uint64) * _GOLDEN
        z = _splitmix64(base[:, None] + counters[None, :])
    u = ((z >> np.uint64(11)).view(np.int64).astype(np.float64) + 0.5) * (1.0 / 2.0**53)
    return ndtri(u)


def flawed_client_draws(seeds: np.ndarray, n_queries: int, B: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """What a flawed-seeding client draws from ``Generator(PCG64(seed))``.

    The published client reseeds its generator with the seed it sends; ours mimics that by
    drawing, per client, its ``B`` queries (uniform over the split) and then the click
    uniforms ``(B, k, 2)`` (examination-click and stop draws of the cascade) from a
    generator seeded with that seed. One generator per client: a loop over the cohort,
    inherent to per-seed generators (this mode exists to show the leak, not for speed).

    Returns
    -------
    queries : ndarray of int64, shape (n, B)
    uniforms : ndarray of float64, shape (n, B, k, 2)
    """
    seeds = np.asarray(seeds, dtype=np.uint64)
    queries = np.empty((len(seeds), B), dtype=np.int64)
    uniforms = np.empty((len(seeds), B, k, 2))
    for c, s in enumerate(seeds):
        gen = np.random.Generator(np.random.PCG64(int(s)))
        queries[c] = gen.integers(0, n_queries, size=B)
        uniforms[c] = gen.random((B, k, 2))
    return queries, uniforms


def cascade_clicks(labels_shown: np.ndarray, click_model, uniforms: np.ndarray) -> np.ndarray:
    """Cascade (CCM) clicks from given uniforms: the flawed client's and its replay's clicks.

    Examine top-down; position ``i`` is clicked when examined and ``u[i, 0] < P(c | r_i)``;
    after a click the user stops when ``u[i, 1] < P(s | r_i)`` (FOLtR-ES §5, Table 1).
    ``labels_shown`` is int (..., k) with -1 on empty slots; ``uniforms`` is (..., k, 2).
    """
    labels_shown = np.asarray(labels_shown)
    empty = labels_shown < 0
    lab = np.where(empty, 0, labels_shown)
    p_click = np.where(empty, 0.0, np.asarray(click_model.click_prob)[lab])
    p_stop = np.asarray(click_model.stop_prob)[lab]
    clicks = np.zeros(labels_shown.shape, dtype=bool)
    examined = np.ones(labels_shown.shape[:-1], dtype=bool)
    for i in range(labels_shown.shape[-1]):
        click = examined & (uniforms[..., i, 0] < p_click[..., i])
        clicks[..., i] = click
        examined &= ~(click & (uniforms[..., i, 1] < p_stop[..., i]))
    return clicks


def es_gradient(V: np.ndarray, metric: np.ndarray, sigma: float, antithetic: bool) -> np.ndarray:
    """The ES gradient estimate of FOLtR-ES Eq. 4-6 from the cohort's perturbations and metrics.

    Without antithetic variates ``g = mean_c f_c v_c / sigma`` with ``f_c`` the mean metric of
    client c's B interactions; with them ``g = mean_c (f+_c - f-_c) / 2 * v_c / sigma`` with
    ``f+`` / ``f-`` the means over the first / last B/2 interactions (for odd B the first
    ``ceil(B/2)``: each side's mean stays unbiased). A message of a single interaction (B = 1,
    the setting of the paper's privacy analysis and of the probe protocol) has no second side
    and uses the plain estimate.

    Parameters
    ----------
    V : ndarray, shape (n, P)
        The clients' perturbations ``v_s``.
    metric : ndarray, shape (n, B)
        Per-interaction metric values (possibly privatized).
    """
    metric = np.asarray(metric, dtype=np.float64)
    if antithetic and metric.shape[1] > 1:
        half = (metric.shape[1] + 1) // 2
        w = (metric[:, :half].mean(axis=1) - metric[:, half:].mean(axis=1)) / 2.0
    else:
        w = metric.mean(axis=1)
    return (w @ V) / (len(w) * sigma)


@dataclass(frozen=True)
class AdamState:
    """Adam's first and second moments and step count (Kingma & Ba; PyTorch defaults)."""

    m: np.ndarray
    v: np.ndarray
    t: int = 0


class FOLtRES:
    """FOLtR-ES (§3.1-3.2) as an ``fltr_audit.interfaces.Algorithm``.

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
        by ``theta = params + signs[b] * sigma * v_c``. Scoring loops over the distinct queries
        of the cohort, scoring each query's contiguous rows under all the models that issued
        it at once (one GEMM for the linear ranker); the data never gets gathered per
        interaction.
        """
        queries = np.asarray(queries, dtype=np.int64)
        n, B = queries.shape
        V = perturbations(seeds, self.ranker.n_params)
        theta = params[None, None, :] + (self.signs(B)[None, :, None] * self.sigma) * V[:, None, :]
        q = queries.ravel()
        order = np.argsort(q, kind="stable")
        theta = theta.reshape(n * B, -1)[order]                    # interactions grouped by query
        q_sorted = q[order]
        uniq, starts = np.unique(q_sorted, return_index=True)
        ends = np.append(starts[1:], len(q)).tolist()
        ptr = data.query_ptr
        counts = data.docs_per_query[q_sorted]
        width = int(counts.max(initial=0))
        # ranked in the sorted order, in parts of the distinct queries on the thread pool (each
        # query's rows scored and ranked as in one pass); only the (I, k) result is put back
        scores = np.full((len(q), width), -np.inf)
        valid = np.arange(width)[None, :] < counts[:, None]
        pos = np.empty((len(q), self.k), dtype=np.int64)
        uniq_l, starts_l = uniq.tolist(), starts.tolist()

        def rank_part(part: slice) -> None:
            if part.start == part.stop:
                return
            for qi, s, e in zip(uniq_l[part], starts_l[part], ends[part]):
                X = data.features[ptr[qi]:ptr[qi + 1]]
                scores[s:e, : X.shape[0]] = self._score_block(theta[s:e], X)
            lo, hi = starts_l[part.start], ends[part.stop - 1]
            pos[lo:hi] = plackett_luce.topk(scores[lo:hi], valid[lo:hi], self.k)

        thread_map(rank_part, row_parts(len(uniq_l)), rows=int(counts.sum()))
        rows = np.empty_like(pos)
        rows[order] = np.where(pos >= 0, ptr[q_sorted][:, None] + pos, -1)
        return rows.reshape(n, B, self.k)

    def _score_block(self, thetas: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Scores (m, D) of one query's rows X (D, F) under m models."""
        if self.ranker.name == "linear":
            return thetas @ X.T.astype(np.float64)
        # MLP: all m hidden layers in one GEMM, (D, F) @ (F, m H)
        W, b, v = self.ranker.unpack(thetas)
        m, H, F = W.shape
        Z = (X.astype(np.float64) @ W.reshape(m * H, F).T).reshape(X.shape[0], m, H) + b
        return np.einsum("dmh,mh->md", np.maximum(Z, 0.0), v)

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
        V = perturbations(msgs.seed, len(params))
        g = es_gradient(V, msgs.metric, self.sigma, self.antithetic)
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
