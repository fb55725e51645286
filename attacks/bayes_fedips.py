"""``bayes`` for FedIPS / FedAvg update messages: the posterior of each shown slot's click count.

Hidden variable. A FedIPS client's message (``fltr_audit.engine.algorithms.fedips``) is one SGD pass
over the first m clicks of its log; the ground truth the attacks guess (``clicked_slots``) is
whether a shown slot (query b, position i) got at least one of them. The attack enumerates
every count matrix N (B x K non-negative integers summing to m: C(m + BK - 1, BK - 1)
candidates, 1001 for the probe's B = 1, K = 5, m = 10; more than ``MAX_CANDIDATES`` are
refused) jointly with the client's position bias gamma_u on a quadrature grid, weighs each
pair by ``prior(N | gamma) p(message | N, gamma)``, and scores each slot by the posterior
``P(N_slot >= 1 | message)`` as log-odds (``attacks.bayes_posterior.posterior_log_odds``);
decisions are those marginals above 0.5. The client is assumed
to have collected its m clicks (n_c = m): the session cap (``max_sessions``, 100 by default)
is not modelled -- a client that reaches it sends fewer clicks, which no candidate explains.

Prior (``prior="click-model"``): the server knows the public click model (PBM, FedIPS Eq. 11,
with gamma and gamma_sd), the f_0 lists and the documents' labels (the same assumption as the
FPDGD click-model prior). ``session_count_log_prior`` gives the exact law of N under the
session process of ``fedips_users.simulate_log`` (sessions over the B lists in turn, a
session's clicks top to bottom, the log is the first m clicks) for a user of bias gamma, by
dynamic programming over partial counts -- not the multinomial of m independent clicks,
which ignores that the m-th click truncates its session. ``"uniform"``: every count matrix on
shown slots equally likely.

gamma_u is unknown to the server; its law N(gamma, gamma_sd) left-truncated at 0 is public.
``gamma_grid``: G nodes at the quantiles (j + 1/2) / G of that law, weight 1 / G each (the
midpoint rule in probability). The prior and, with propensity ``"true"``, the replayed steps
eta_l / p_u(i) = eta_l i^gamma_u depend on gamma_u; FedAvg (propensity ``"none"``, p = 1)
replays once per N and gamma enters through the prior only. Propensity ``"estimated"``
(each client's EM estimate from its own sessions, which its message does not reveal) is
refused.

Likelihood. Each candidate's pass is replayed with the client's own arithmetic
(``FedIPS.click_step``: float32 scores and gradients for the linear ranker) in a canonical
order (``canonical_order``): session r clicks, on list b = 0 .. B-1 in turn, every slot of
b with N > r, top to bottom -- a log the process can produce for N, but not necessarily the
client's. The hinge of Eq. 4 is piecewise linear, so another order gives another update only
when a hinge changes activity within the pass (rare at eta_l = 1e-3; on MQ2008 Fold 1's 157
probe messages of the audit's pre-trained FedIPS, 152 replay to 1e-10 from their true counts
and gamma_u, 5 differ by 3-32 %) or, else, by float rounding; the replay is not exact in
general and the guess is named ``bayes-approx``. Candidates sharing their first clicks share
that part of the replay (``prefix_tree``). The replayed updates go through the defense's
clipping and noise density as in ``attacks.bayes`` (``attacks.bayes_likelihoods.loglik_full``:
exact-match test, Laplace, Gaussian, Gamma-difference); without noise the posterior is a point mass on the
nearest candidate: its marginals are 0 or 1, its log-odds still ordered by how far the
next candidate falls behind.
"""

from __future__ import annotations

import itertools
from math import comb
from typing import Any

import numpy as np
from scipy import stats

from attacks.bayes_likelihoods import loglik_full
from attacks.bayes_noise import NoiseModel
from attacks.bayes_posterior import posterior_log_odds
from attacks.bayes_prior import PRIORS, click_vectors
from attacks.view import client_updates, require_shown, shown_features
from fltr_audit.constraints import Interval, Options, ParameterError, check
from fltr_audit.engine.messages import Guess, ServerView

MAX_CANDIDATES = 20_000
"""Largest number of count matrices enumerated per message."""
GAMMA_NODES = 9
"""Quadrature nodes of gamma_u."""
CHUNK_ELEMENTS = 1 << 23
"""Replayed (message x gamma x candidate) rows times K x F materialized at once."""
_NEEDS = ("click_model", "policy", "lr_local", "m", "propensity", "click_step")


def count_matrices(m: int, slots: int) -> np.ndarray:
    """Every vector of ``slots`` non-negative integers summing to m, int64 (C(m + slots - 1, slots - 1), slots)."""
    bars = np.array(list(itertools.combinations(range(m + slots - 1), slots - 1)), dtype=np.int64)
    bars = bars.reshape(-1, slots - 1)
    edges = np.concatenate([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), m + slots - 1)], axis=1)
    return np.diff(edges, axis=1) - 1


def gamma_grid(click_model: Any, nodes: int) -> np.ndarray:
    """The G quadrature nodes of gamma_u ~ N(gamma, gamma_sd) left-truncated at 0: its
    quantiles (j + 1/2) / G (each node weighs 1 / G)."""
    gamma, sd = float(click_model.gamma), float(click_model.gamma_sd)
    q = (np.arange(nodes) + 0.5) / nodes
    return stats.truncnorm.ppf(q, (0.0 - gamma) / sd, np.inf, loc=gamma, scale=sd)


def canonical_order(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The round-robin log of count matrices ``counts`` (C, B, K) with m clicks each: session r
    clicks, on list b in turn, every slot of b with count > r, top to bottom. Returns the
    list b and position i of each click, int64 (C, m) each."""
    C, B, K = counts.shape
    m = int(counts[0].sum())
    take = (counts[:, None] > np.arange(m)[None, :, None, None]).reshape(C, m * B * K)  # r * BK + b * K + i
    first = np.argsort(~take, axis=1, kind="stable")[:, :m]
    return (first // K) % B, first % K


def session_count_log_prior(click_prob: np.ndarray, m: int, counts: np.ndarray) -> np.ndarray:
    """``log P(N)`` (R, C) of count matrices ``counts`` (C, B, K) under the session process.

    Sessions s = 0, 1, ... show list s mod B; each clicks slot i of its list independently with
    ``click_prob`` (R, B, K) (Eq. 11 for one user); the log is the first m clicks, a session's
    clicks taken top to bottom. Forward recursion over (partial counts v, next list p) in order
    of |v|: from (v, p) the next session with a click is on list b after (b - p) mod B empty
    sessions plus whole empty cycles, ``prod_{l < (b - p) mod B} z_{p+l} / (1 - prod_b z_b)``
    with z_b the probability of an empty session on b, and its click vector c (non-empty) adds
    c -- truncated to its first m - |v| clicks -- and moves on to list b + 1. The session cap is
    not modelled (unbounded sessions).
    """
    R, B, K = click_prob.shape
    S = B * K
    p = np.asarray(click_prob, dtype=np.float64)
    states = np.concatenate([count_matrices(t, S) for t in range(m + 1)])      # ordered by total
    radix = (m + 1) ** np.arange(S, dtype=np.int64)
    keys = states @ radix
    order = np.argsort(keys)
    sorted_keys = keys[order]

    def index(v: np.ndarray) -> np.ndarray:
        return order[np.searchsorted(sorted_keys, v @ radix)]

    level = states.sum(1)
    vectors = click_vectors(K)[1:]                                                # non-empty (V, K)
    session = np.prod(np.where(vectors, p[:, :, None, :], 1.0 - p[:, :, None, :]), axis=-1)  # (R, B, V)
    z = np.prod(1.0 - p, axis=-1)                                                 # (R, B)
    cycle = 1.0 - z.prod(axis=-1)                                                 # (R,)
    skip = np.empty((R, B, B))                                                    # [r, from p, to b]
    for p0 in range(B):
        for b in range(B):
            skip[:, p0, b] = np.prod([z[:, (p0 + j) % B] for j in range((b - p0) % B)], axis=0) / cycle
    f = np.zeros((R, len(states), B))
    f[:, index(np.zeros((1, S), dtype=np.int64)), 0] = 1.0
    for t in range(m):
        src = np.flatnonzero(level == t)
        kept = vectors & (np.cumsum(vectors, axis=1) <= m - t)                     # truncated to m - t clicks
        for b in range(B):
            added = np.zeros((len(vectors), S), dtype=np.int64)
            added[:, b * K:(b + 1) * K] = kept
            tgt = index((states[src][:, None, :] + added[None]).reshape(-1, S)).reshape(len(src), len(vectors))
            for p0 in range(B):
                val = f[:, src, p0]
                w = skip[:, p0, b, None] * session[:, b]                          # (R, V)
                for v in range(len(vectors)):                                     # targets distinct per v
                    f[:, tgt[:, v], (b + 1) % B] += val * w[:, v, None]
    final = f[:, index(counts.reshape(len(counts), S)), :].sum(-1)
    with np.errstate(divide="ignore"):
        return np.log(final)


def prefix_tree(slot: np.ndarray, pos: np.ndarray) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:
    """The distinct prefixes of candidate logs (C, m): per depth j = 1 .. m, each distinct
    prefix of length j as (index of its parent prefix of length j - 1, list b and position i of
    its last click), and each candidate's index among the prefixes of length m. Candidates that
    share their first j clicks share the replay up to there (3,002 steps instead of 10,010 for
    K = 5, m = 10)."""
    code = slot * (int(pos.max()) + 1) + pos
    levels = []
    parent_of = np.zeros(len(code), dtype=np.int64)
    for j in range(1, code.shape[1] + 1):
        first, inverse = np.unique(code[:, :j], axis=0, return_index=True, return_inverse=True)[1:]
        inverse = np.asarray(inverse).reshape(-1)
        levels.append((parent_of[first], slot[first, j - 1], pos[first, j - 1]))
        parent_of = inverse
    return levels, parent_of


def replay(algorithm: Any, g: np.ndarray, X: np.ndarray, valid: np.ndarray, tree: tuple, steps: np.ndarray
           ) -> np.ndarray:
    """Raw updates (n, E * C, P) of the client's SGD pass (``FedIPS.click_step``) for every
    candidate log and step table, shared prefixes replayed once (``prefix_tree``).

    Parameters
    ----------
    g : (P,) the global model the clients started from.
    X, valid : (n, B, K, F) float32 shown features (zeros on empty slots), (n, B, K) bool.
    tree : ``prefix_tree`` of the candidates' logs (C, m) in replay order.
    steps : (E, K) eta_l / p(i) of each position under E propensity curves.
    """
    n, B, K, F = X.shape
    E = len(steps)
    levels, leaf = tree
    w = np.broadcast_to(np.asarray(g, dtype=np.float64), (n, E, 1, len(g)))
    for parent, b, i in levels:
        U = len(parent)
        rows = n * E * U
        x = np.broadcast_to(X[:, None, b], (n, E, U, K, F)).reshape(rows, K, F)
        ok = np.broadcast_to(valid[:, None, b], (n, E, U, K)).reshape(rows, K)
        at = np.broadcast_to(i, (n, E, U)).reshape(rows)
        step = np.broadcast_to(steps[:, i][None], (n, E, U)).reshape(rows)
        w = algorithm.click_step(w[:, :, parent].reshape(rows, -1), x, ok, at, step).reshape(n, E, U, -1)
    return (w[:, :, leaf] - g).reshape(n, E * len(leaf), -1)


class BayesFedIPS:
    """The Bayes posterior of FedIPS / FedAvg clicks (module docstring); ``attacks.bayes.Bayes``
    hands FedIPS messages to it.

    Parameters
    ----------
    algorithm : FedIPS
        Its ``click_model`` (PBM), ``policy``, ``lr_local``, ``m``, ``propensity``, ``click_step``.
    noise : NoiseModel
    prior : {"click-model", "uniform"}
    gamma_nodes : int
        Quadrature nodes of gamma_u.
    """

    def __init__(self, algorithm: Any, noise: NoiseModel | None = None, prior: str = "click-model",
                 gamma_nodes: int = GAMMA_NODES) -> None:
        missing = [a for a in _NEEDS if not hasattr(algorithm, a)]
        if missing:
            raise ParameterError("attacks", f"bayes: cannot replay {getattr(algorithm, 'name', 'these')} messages without "
                                            f"the FedIPS algorithm's {', '.join(missing)} (supported: fedips, fedavg)")
        if algorithm.propensity == "estimated":
            raise ParameterError("attacks", "bayes: cannot replay FedIPS with estimated propensities (each client's EM "
                                            "estimate is private; supported: propensity true or none)")
        check("prior", prior, (Options(PRIORS),))
        check("gamma_nodes", gamma_nodes, (Interval(int, 1, None),))
        self.algorithm = algorithm
        self.noise = noise if noise is not None else NoiseModel()
        self.prior = prior
        self.name = "bayes" if prior == "click-model" else "bayes-uniform"
        self.gammas = gamma_grid(algorithm.click_model, int(gamma_nodes))

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        if self.noise.kind == "rr":
            raise ParameterError("attacks", f"bayes: defense {self.noise.defense!r} randomizes metric values; "
                                            "FedIPS messages carry update vectors")
        updates, aggregate_update = client_updates(view, self.name)
        if updates is None:
            if len(view.participants) != 1:
                raise ParameterError("attacks", f"bayes: under secure aggregation the aggregate of {len(view.participants)} "
                                                "clients is intractable to enumerate (supported: individual messages, a cohort of one)")
            updates = aggregate_update[None, :]
        shown = view.interactions.shown
        n, B, K = shown.shape
        m = int(self.algorithm.m)
        size = comb(m + B * K - 1, B * K - 1)
        if size > MAX_CANDIDATES:
            raise ParameterError("attacks", f"bayes: {m} clicks on {B} x {K} shown slots give {size} count matrices, more "
                                            f"than the {MAX_CANDIDATES} it enumerates (probe one query per client)")
        counts = count_matrices(m, B * K).reshape(-1, B, K)
        tree = prefix_tree(*canonical_order(counts))
        model = self.algorithm.click_model
        G = len(self.gammas)
        curves = np.asarray(model.examination(self.gammas, K), dtype=np.float64)   # p_u(i) (G, K)
        if self.algorithm.propensity == "none":
            curves = np.ones((1, K))
        steps = self.algorithm.lr_local / curves                                    # (E, K), as client_step
        E = len(steps)
        log_prior = self._log_prior(view, shown, counts)                           # (n, G, C)
        X, valid = shown_features(view)
        g = np.asarray(view.global_params, dtype=np.float64)
        cohort = self.noise.cohort or int(len(view.participants) + len(view.dropouts))
        clicked = np.tile((counts > 0).reshape(len(counts), B * K), (G, 1))          # (G * C, S)
        C = len(counts)
        out = np.empty((n, B * K))
        chunk = max(1, CHUNK_ELEMENTS // (E * C * K * X.shape[-1]))
        for s in range(0, n, chunk):
            part = slice(s, s + chunk)
            u = replay(self.algorithm, g, X[part], valid[part], tree, steps)
            loglik = loglik_full(self.noise, g, u, updates[part], cohort).reshape(-1, E, C)
            loglik = np.broadcast_to(loglik, (len(loglik), G, C))
            out[part] = posterior_log_odds(log_prior[part].reshape(-1, G * C) + loglik.reshape(-1, G * C), clicked)
        score = out.reshape(n, B, K)
        mask = shown >= 0
        return Guess(attack=self.name + "-approx", score=np.where(mask, score, np.nan), decision=(score > 0) & mask)

    def _log_prior(self, view: ServerView, shown: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """log P(N | gamma node) (n, G, C): ``session_count_log_prior`` once per distinct row of
        click probabilities, or uniform over the count matrices on shown slots."""
        n, B, K = shown.shape
        G = len(self.gammas)
        mask = shown >= 0
        if self.prior == "uniform":
            on_empty = (counts[None] * ~mask[:, None]).reshape(n, len(counts), -1).any(-1)
            return np.broadcast_to(np.where(on_empty, -np.inf, 0.0)[:, None, :], (n, G, len(counts)))
        labels = np.where(mask, view.documents.labels[np.maximum(shown, 0)], -1)
        model = self.algorithm.click_model
        prob = np.stack([model.click_prob(labels, np.full(n, gamma)) for gamma in self.gammas], axis=1)
        rows, inverse = np.unique(prob.reshape(n, -1), axis=0, return_inverse=True)   # (U, G * B * K)
        prior = session_count_log_prior(rows.reshape(-1, B, K), int(self.algorithm.m), counts)
        return prior.reshape(len(rows), G, len(counts))[np.asarray(inverse).reshape(-1)]
