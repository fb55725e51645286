"""``bayes``: the exact Bayes posterior of a client's clicks given its message.

The ceiling of every passive attack under threat model ``server``: the server knows the
global model, the shown lists and their documents, the public algorithm (PDGD's learning
rate, the click model) and the defense's noise model (``NoiseModel``), so for every shown
list it can enumerate the click vectors the click model allows, replay the client's local
step for each deterministically, and weigh each by ``prior(c) * p(message | c)``. The guess
scores are the posterior click log-odds (``posterior_log_odds``: expit of a score is the
posterior marginal, and unlike the marginal it does not round to exactly 0 or 1 when the
posterior is nearly a point mass); decisions are the marginals above 0.5 (log-odds above 0).

The prior over click vectors is ``attacks.bayes_prior``'s (``prior=``: the click model's or
uniform); the likelihood per noise kind ``attacks.bayes_likelihoods``' (the replayed message
first clipped as the client clips, ``attacks.bayes_noise.NoiseModel``); FOLtR-ES metric values
randomized by ``rr`` are weighed by the randomized-response transition table over the MaxRR of
each candidate click vector.

Algorithms. FPDGD (linear and MLP rankers): one PDGD step per query (Eq. 5-6,
``attacks.bayes_geometry``): the update of a single list is ``lr * coef(c) @ J`` with ``J``
the shown documents' score gradients at the global model and ``coef(c)`` the per-position
pair-weight sums, linear in per-message pair weights ``W[a, b] = rho_ab sigma(d) sigma(-d)`` (``pairwise_weights``), so
every candidate is evaluated in the k-dimensional coefficient space (Gram matrices) when
clipping is L2 and the noise Gaussian or absent, and in parameter space otherwise.
Messages with B > 1 lists: the lists' steps depend on each other (each starts from the
weights the previous one left), so a candidate is a joint configuration of B click vectors,
replayed through the whole sequence (``replay_product``: a tree, list b's step computed once
per distinct model the earlier lists leave). When 2^(Bk) <= ``MAX_JOINT`` every configuration
is enumerated and the posterior is exact (named ``bayes``). Otherwise (named ``bayes-approx``):

1. *prefix search*: per list the k + 1 click sets "the top j shown documents by OLSR's score"
   (j = 0 .. shown), every joint combination ((k+1)^B, 14,641 for B = 4, k = 10) replayed and
   weighed by likelihood times prior; above ``MAX_JOINT`` a beam over the lists instead
   (``_prefix_beam``: ``BEAM`` partial configurations, each extended by the next list's
   prefixes, ranked by the fit of the message off the later lists' span -- exact for the
   linear ranker -- and evaluated completed by OLSR's decisions on the later lists);
2. *coordinate ascent* from the best of them: list by list, all 2^k click vectors with the
   other lists fixed, the list's conditional MAP kept, ``SWEEPS`` sweeps or a fixed point;
3. scores = posterior log-odds normalized over *every* distinct configuration evaluated in
   1 and 2, exact ties broken by OLSR's within-list order (weight ``TIE``).

Within one list the prefix set's posterior never reverses OLSR's order, so the scores differ
from OLSR's ranking only where a configuration off the prefixes explains the message better;
when OLSR ranks every list of a message perfectly the truth is among the prefixes and, without
noise, it is the posterior's point mass. (Not used: the shown lists of later queries are the
deterministic ranking under the weights the earlier clicks left, which a candidate could also
be checked against.)

FOLtR-ES: exact, per interaction. FedIPS and secure aggregation over more than one client are
refused.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from attacks.bayes_geometry import pair_sign_tensor, pairwise_weights, ranking_geometry, score_many, vjp_many
from attacks.bayes_likelihoods import CHUNK_ELEMENTS, loglik_full, partial_fit_loglik, single_list_loglik
from attacks.bayes_noise import NoiseModel
from attacks.bayes_posterior import configuration_log_odds, posterior_log_odds
from attacks.bayes_prior import PRIORS, click_vectors, log_prior
from attacks.olsr import OLSR
from attacks.view import client_updates, require_shown
from fltr_audit.engine.algorithms.fpdgd import FPDGD, pair_weights
from fltr_audit.constraints import Options, ParameterError, check
from fltr_audit.engine.messages import Guess, ServerView

MAX_K = 10
"""Largest shown list enumerated (2^10 click vectors)."""
SWEEPS = 4
"""Coordinate-ascent sweeps over the lists of a B > 1 message (stops early at a fixed point)."""
MAX_JOINT = 20_000
"""Largest joint OLSR-prefix search, (k+1)^B configurations per message (11^4 = 14,641);
beyond it a beam over the lists (``BEAM``)."""
BEAM = 64
"""Partial configurations kept per list by the beam that replaces a joint search over MAX_JOINT."""
TIE = 1e-9
"""Weight of OLSR's within-list order in the bayes-approx scores: it breaks exact ties between
posterior log-odds (e.g. slots no evaluated configuration clicks) and nothing else."""


def exhaustive(B: int, k: int) -> bool:
    """Whether messages of B lists of k slots are enumerated exactly (2^(Bk) <= MAX_JOINT)."""
    return 2 ** (B * k) <= MAX_JOINT



class Bayes:
    """The exact Bayes attack (module docstring).

    Parameters
    ----------
    algorithm : object
        The audited algorithm: FPDGD (its ``lr``, ``click_model``, ``local_updates``) or
        FOLtR-ES (its ``click_model``).
    noise : NoiseModel
        The defense stack's noise model (built by the composition root); default: none.
    prior : {"click-model", "uniform"}
        The prior over click vectors; with ``"uniform"`` the attack is named ``bayes-uniform``.
    """

    def __init__(self, algorithm: Any = None, noise: NoiseModel | None = None, prior: str = "click-model"):
        check("prior", prior, (Options(PRIORS),))
        self.algorithm = algorithm
        self.noise = noise if noise is not None else NoiseModel()
        self.prior = prior
        self.name = "bayes" if prior == "click-model" else "bayes-uniform"

    # -- entry point ------------------------------------------------------------------------
    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        if self.algorithm is None:
            raise ParameterError("attacks", "bayes: needs the audited algorithm (its learning rate and click model)")
        if view.messages is not None and view.messages.metric is not None:
            return self._guess_metric(view)
        if not isinstance(self.algorithm, FPDGD):  # PDGD steps, with or without local updates (PDGD)
            algo = getattr(self.algorithm, "name", type(self.algorithm).__name__)
            raise ParameterError("attacks", f"bayes: cannot replay {algo} messages "
                                            "(supported: fpdgd with a linear or MLP ranker, foltr-es metric values)")
        if self.noise.kind == "rr":
            raise ParameterError("attacks", f"bayes: defense {self.noise.defense!r} randomizes metric values; "
                                            "these messages carry parameter vectors")
        updates, aggregate_update = client_updates(view, self.name)
        if updates is None:
            n_members = len(view.participants)
            if n_members != 1:
                raise ParameterError("attacks", f"bayes: under secure aggregation the aggregate of {n_members} clients "
                                                "is intractable to enumerate (supported: individual messages, a cohort of one, "
                                                "or the server-malicious threat model)")
            updates = aggregate_update[None, :]
        shown = view.interactions.shown
        k = shown.shape[-1]
        if k > MAX_K:
            raise ParameterError("attacks", f"bayes: enumerates at most {MAX_K} shown documents per list, got k = {k}")
        if shown.shape[1] == 1:
            score = self._single_list(view, updates)[:, None, :]
            name = self.name
        else:
            score = self._several_lists(view, updates)
            name = self.name if exhaustive(shown.shape[1], k) else self.name + "-approx"
        mask = shown >= 0
        return Guess(attack=name, score=np.where(mask, score, np.nan), decision=(score > 0) & mask)

    # -- shared pieces ----------------------------------------------------------------------
    def _cohort(self, view: ServerView) -> int:
        return self.noise.cohort or int(len(view.participants) + len(view.dropouts))

    def _labels(self, view: ServerView, shown: np.ndarray) -> np.ndarray:
        docs = view.documents
        return np.where(shown >= 0, docs.labels[np.maximum(shown, 0)], -1)

    def _candidates(self, view: ServerView, shown: np.ndarray, labels: np.ndarray | None = None):
        """Click vectors (C, k) and the log prior (n, C) of every list of ``shown`` (n, k)."""
        vectors = click_vectors(shown.shape[-1])
        labels = self._labels(view, shown) if labels is None else labels
        return vectors, log_prior(self.prior, self.algorithm.click_model, labels, vectors)

    @staticmethod
    def _query_candidates(view: ServerView, queries: np.ndarray, shown: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each query's candidate rows (n, D) (-1 padded), validity, and the shown positions (n, k)."""
        docs = view.documents
        rows = docs.padded_rows[queries]
        starts = docs.query_ptr[queries]
        positions = np.where(shown >= 0, shown - starts[:, None], -1)
        return rows, rows >= 0, positions

    # -- FPDGD, one list per message: exact ------------------------------------------------
    def _single_list(self, view: ServerView, updates: np.ndarray) -> np.ndarray:
        ranker, g = view.ranker, np.asarray(view.global_params, dtype=np.float64)
        shown = view.interactions.shown[:, 0]
        queries = view.interactions.queries[:, 0]
        mask = shown >= 0
        docs = view.documents
        rows, valid, positions = self._query_candidates(view, queries, shown)
        scores = score_many(ranker, np.broadcast_to(g, (len(queries), 1, len(g))), docs, queries, rows.shape[1])[:, 0]
        shown_scores, log_dens = ranking_geometry(scores, valid, positions)
        W = pairwise_weights(shown_scores, log_dens, mask)
        vectors, prior = self._candidates(view, shown)
        T = pair_sign_tensor(vectors)
        X = docs.features[np.maximum(shown, 0)]
        X[~mask] = 0.0
        n, k = shown.shape
        P = len(g)
        out = np.empty((n, k))
        step = max(1, CHUNK_ELEMENTS // (k * P) // 4)
        for s in range(0, n, step):
            part = slice(s, s + step)
            J = ranker.grad(g, X[part])                                       # (m, k, P)
            J[~mask[part]] = 0.0
            loglik = single_list_loglik(self.noise, g, J, W[part], T, updates[part], self.algorithm.lr,
                                        self._cohort(view))
            out[part] = posterior_log_odds(prior[part] + loglik, vectors)
        return out

    # -- FPDGD, several lists per message: prefix search + coordinate ascent ----------------
    def _pdgd_step(self, view: ServerView, messages: np.ndarray, b: int, w: np.ndarray, clicks: np.ndarray,
                   per_model: bool = False) -> np.ndarray:
        """List ``b``'s PDGD step (Eq. 5-6, times the learning rate) from each of S models ``w``
        (m, S, P): for each of the E click vectors ``clicks`` (m, E, k), (m, S, E, P); with
        ``per_model``, for model s's own click vector ``clicks[:, s]`` (m, S, k), (m, S, 1, P).
        One click vector per model: ``fpdgd.pair_weights`` (only the pairs that vector needs).
        Several: every pair's weight once per model (``pairwise_weights``), each vector's
        coefficients their signed sums (``pair_sign_tensor``), one batched GEMM."""
        ranker, docs, inter = view.ranker, view.documents, view.interactions
        m, S = w.shape[:2]
        k = clicks.shape[-1]
        shown = inter.shown[messages, b]
        mask = shown >= 0
        rows, valid, positions = self._query_candidates(view, inter.queries[messages, b], shown)
        scores = score_many(ranker, w, docs, inter.queries[messages, b], rows.shape[1])
        D = rows.shape[1]
        shown_scores, log_dens = ranking_geometry(scores.reshape(m * S, D), np.repeat(valid, S, axis=0),
                                                  np.repeat(positions, S, axis=0))
        if per_model or clicks.shape[1] == 1:
            own = np.broadcast_to(clicks, (m, S, k)).reshape(m * S, k)
            coef = pair_weights(shown_scores, log_dens, own, np.repeat(mask, S, axis=0)).reshape(m, S, 1, k)
        else:
            W = pairwise_weights(shown_scores, log_dens, np.repeat(mask, S, axis=0)).reshape(m, S, k, k)
            T = np.moveaxis(pair_sign_tensor(clicks.reshape(-1, k)).reshape(k, k, m, -1), 2, 0)   # (m, k, k, E)
            coef = np.moveaxis(np.swapaxes(W, 1, 2) @ T, 1, 3)                             # (m, S, E, k)
        E = coef.shape[2]
        X = docs.features[np.maximum(shown, 0)]
        X[~mask] = 0.0
        models = w[:, :1] if ranker.linear else np.repeat(w, E, axis=1)       # linear: J = X
        step = self.algorithm.lr * vjp_many(ranker, models, X, coef.reshape(m, S * E, k))
        return step.reshape(m, S, E, -1)

    def replay(self, view: ServerView, clicks: np.ndarray, messages: np.ndarray) -> np.ndarray:
        """The raw updates (m, C, P) of messages ``messages`` (m,) for candidate click
        configurations ``clicks`` (m, C, B, k): the client's B sequential PDGD steps (Alg. 1)."""
        m, C, B, k = clicks.shape
        g = np.asarray(view.global_params, dtype=np.float64)
        local = self.algorithm.local_updates
        total = np.zeros((m, C, len(g)))
        for b in range(B):
            current = g + total if local else np.broadcast_to(g, total.shape)
            total += self._pdgd_step(view, messages, b, current, clicks[:, :, b], per_model=True)[:, :, 0]
        return total

    def replay_product(self, view: ServerView, choices: list[np.ndarray], messages: np.ndarray) -> np.ndarray:
        """The raw updates (m, C_0 ... C_(B-1), P) of every configuration of the Cartesian product
        of per-list click vectors ``choices[b]`` (m, C_b, k), list 0 varying slowest (C order).
        Replayed as a tree: list b's step is computed once per distinct model its prefix of
        lists leaves, so the cost is about that of the last list, not B times the product."""
        g = np.asarray(view.global_params, dtype=np.float64)
        local = self.algorithm.local_updates
        m = len(messages)
        total = np.zeros((m, 1, len(g)))
        for b, choice in enumerate(choices):
            S, E = total.shape[1], choice.shape[1]
            current = g + total if local else np.broadcast_to(g, total.shape)
            total = (total[:, :, None, :] + self._pdgd_step(view, messages, b, current, choice)).reshape(m, S * E, -1)
        return total

    def _several_lists(self, view: ServerView, updates: np.ndarray) -> np.ndarray:
        """Posterior click log-odds (n, B, k) of messages with B > 1 lists, exact or approximate
        (module docstring: ``bayes`` / ``bayes-approx``), in chunks of messages."""

        inter = view.interactions
        n, B, k = inter.shown.shape
        mask = inter.shown >= 0
        olsr_guess = OLSR().guess(view)
        olsr = np.where(mask, np.nan_to_num(olsr_guess.score, nan=-np.inf, posinf=np.finfo(float).max,
                                            neginf=-np.finfo(float).max), -np.inf)
        olsr_idx = ((olsr_guess.decision & mask) * (1 << np.arange(k))).sum(-1)        # (n, B) vector indices
        rank = np.argsort(np.argsort(-olsr, axis=-1, kind="stable"), axis=-1)            # 0 = OLSR's top slot
        vectors = click_vectors(k)
        labels = self._labels(view, inter.shown)
        prior = np.stack([log_prior(self.prior, self.algorithm.click_model, labels[:, b], vectors)
                          for b in range(B)], axis=1)                                   # (n, B, 2^k)
        widest = 2 ** (B * k) if exhaustive(B, k) else max(min((k + 1) ** B, MAX_JOINT), BEAM * (k + 1), 2**k)
        step = max(1, CHUNK_ELEMENTS // (widest * max(len(view.global_params), 1)))
        odds = np.empty((n, B, k))
        for s in range(0, n, step):
            idx = np.arange(s, min(n, s + step))
            odds[idx] = self._posterior_chunk(view, updates[idx], idx, rank[idx], olsr_idx[idx], mask[idx], prior[idx])
        if exhaustive(B, k):
            return odds
        return odds + TIE * (1.0 - rank / k)                                             # ties: OLSR's order

    def _posterior_chunk(self, view: ServerView, observed: np.ndarray, messages: np.ndarray, rank: np.ndarray,
                          olsr_idx: np.ndarray, mask: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """Posterior click log-odds (m, B, k) over every configuration evaluated for messages
        ``messages``: all 2^(Bk) when ``exhaustive`` (exact), else the OLSR-prefix search, then
        coordinate ascent from its best."""
        m, B, k = mask.shape
        g = np.asarray(view.global_params, dtype=np.float64)
        cohort = self._cohort(view)
        bits = 1 << np.arange(k)
        shown = mask.sum(-1)                                                             # (m, B)
        prefixes = (rank[:, :, None, :] < np.arange(k + 1)[:, None]) & mask[:, :, None, :]   # (m, B, k+1, k)
        prefix_idx = (prefixes * bits).sum(-1)                                           # (m, B, k+1)
        rows = np.arange(m)[:, None]

        def joint_prior(config: np.ndarray) -> np.ndarray:                              # config (m, E, B)
            return sum(prior[rows, b, config[:, :, b]] for b in range(B))

        def loglik(u: np.ndarray) -> np.ndarray:
            return loglik_full(self.noise, g, u, observed, cohort)

        vectors = click_vectors(k)
        if exhaustive(B, k):
            config = np.broadcast_to(np.stack(np.unravel_index(np.arange(2 ** (B * k)), (2**k,) * B), axis=-1),
                                     (m, 2 ** (B * k), B))
            u = self.replay_product(view, [np.broadcast_to(vectors & mask[:, b, None, :], (m, 2**k, k))
                                           for b in range(B)], messages)
            return configuration_log_odds(config, joint_prior(config) + loglik(u), k)
        if (k + 1) ** B <= MAX_JOINT:
            j = np.stack(np.unravel_index(np.arange((k + 1) ** B), (k + 1,) * B), axis=-1)   # (E, B)
            config = np.stack([prefix_idx[:, b, j[:, b]] for b in range(B)], axis=-1)       # (m, E, B)
            u = self.replay_product(view, [prefixes[:, b] for b in range(B)], messages)
            post = np.where((j[None] <= shown[:, None, :]).all(-1), joint_prior(config) + loglik(u), -np.inf)
        else:
            config, post = self._prefix_beam(view, messages, observed, prefix_idx, shown, olsr_idx, prior,
                                             lambda c, u: joint_prior(c) + loglik(u))
        seen_idx, seen_post = [config], [post]
        best = np.argmax(post, axis=1)
        state = config[np.arange(m), best]                                               # (m, B) vector indices
        for _ in range(SWEEPS):
            before = state.copy()
            for b in range(B):
                choices = [np.broadcast_to(vectors & mask[:, b, None, :], (m, len(vectors), k)) if c == b
                           else ((state[:, c, None, None] & bits) > 0) for c in range(B)]
                cand = np.repeat(state[:, None, :], len(vectors), axis=1)
                cand[:, :, b] = np.arange(len(vectors))
                ll = loglik(self.replay_product(view, choices, messages))
                state[:, b] = np.argmax(prior[:, b] + ll, axis=1)                      # the list's conditional MAP
                seen_idx.append(cand)
                seen_post.append(joint_prior(cand) + ll)
            if np.array_equal(before, state):
                break
        return configuration_log_odds(np.concatenate(seen_idx, 1), np.concatenate(seen_post, 1), k)

    def _prefix_beam(self, view: ServerView, messages: np.ndarray, observed: np.ndarray, prefix_idx: np.ndarray,
                     shown: np.ndarray, olsr_idx: np.ndarray, prior: np.ndarray,
                     score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The OLSR-prefix search when (k+1)^B exceeds ``MAX_JOINT``: a beam over the lists in
        order. Each of the ``BEAM`` kept partial configurations (lists before b) is extended by
        the k + 1 prefixes of list b. Every extension, completed by OLSR's decisions on the lists
        after b, is replayed and scored (``score`` of the (m, E, B) vector indices and raw updates)
        and joins the evaluated set; the ``BEAM`` kept are the best by ``partial_fit_loglik`` (the
        message's residual off the later lists' span), which the unknown later lists cannot
        distort. Returns every configuration evaluated (m, E, B) and its log posterior (m, E)."""
        m, B, k1 = prefix_idx.shape
        k = k1 - 1
        partial = np.zeros((m, 1, 0), dtype=np.int64)
        seen_idx, seen_post = [], []
        rows = np.arange(m)[:, None]
        for b in range(B):
            S = partial.shape[1]
            ext = np.concatenate([np.repeat(partial, k1, axis=1),
                                  np.tile(prefix_idx[:, b], (1, S))[:, :, None]], axis=2)   # (m, S (k+1), b+1)
            full = np.concatenate([ext, np.broadcast_to(olsr_idx[:, None, b + 1:], (m, S * k1, B - b - 1))], axis=2)
            u = self.replay(view, (full[..., None] >> np.arange(k)) & 1 == 1, messages)
            valid = np.tile(np.arange(k1), S)[None, :] <= shown[:, b, None]
            post = np.where(valid, score(full, u), -np.inf)
            seen_idx.append(full)
            seen_post.append(post)
            if b == B - 1:
                break
            early = self.replay(view, (ext[..., None] >> np.arange(k)) & 1 == 1, messages)
            fit = sum(prior[rows, c, ext[:, :, c]] for c in range(b + 1)) + partial_fit_loglik(
                self.noise, view, messages, b, early, observed, self._cohort(view))
            keep = np.argsort(-np.where(valid, fit, -np.inf), axis=1, kind="stable")[:, :BEAM]
            partial = np.take_along_axis(ext, keep[:, :, None], axis=1)
        return np.concatenate(seen_idx, 1), np.concatenate(seen_post, 1)

    # -- FOLtR-ES metric messages: exact per interaction ----------------------------------
    def _guess_metric(self, view: ServerView) -> Guess:
        metric = np.asarray(view.messages.metric, dtype=np.float64)          # (n, B)
        shown = view.interactions.shown
        n, B, k = shown.shape
        if k > MAX_K:
            raise ParameterError("attacks", f"bayes: enumerates at most {MAX_K} shown documents per list, got k = {k}")
        flat = shown.reshape(n * B, k)
        vectors, prior = self._candidates(view, flat)
        first = np.where(vectors.any(-1), np.argmax(vectors, axis=-1), -1)
        value = (first >= 0) / (np.maximum(first, 0) + 1.0)             # MaxRR of each candidate (C,)
        received = metric.reshape(-1)[:, None]
        same = np.isclose(received, value[None, :], rtol=1e-9, atol=1e-12)
        if self.noise.kind == "rr":
            p, size = self.noise.scale, len(self.noise.values)
            loglik = np.where(same, np.log(p), np.log((1.0 - p) / (size - 1)))
        elif self.noise.kind == "none":
            loglik = np.where(same, 0.0, -np.inf)
        else:
            raise ParameterError("attacks", f"bayes: defense {self.noise.defense!r} does not apply to metric values")
        logpost = prior + loglik
        if np.isneginf(logpost).all(axis=1).any():      # a value no candidate explains: fall back to the prior
            logpost = np.where(np.isneginf(logpost).all(axis=1, keepdims=True), prior, logpost)
        odds = posterior_log_odds(logpost, vectors).reshape(n, B, k)
        mask = shown >= 0
        return Guess(attack=self.name, score=np.where(mask, odds, np.nan), decision=(odds > 0) & mask)
