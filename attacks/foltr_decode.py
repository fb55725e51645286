"""Attacks on FOLtR-ES messages (seed + per-interaction MaxRR values).

* ``foltr-decode``: MaxRR is ``1 / (i + 1)`` for a first click at position ``i`` and 0
  without a click, so one received value names the first click. The attack guesses the shown
  document at that position as clicked and every other slot as not clicked (nothing when the
  value is 0). Without privatization it recovers the first click exactly; under randomized
  response the value is the true one with probability ``p``.
* query distinguishing (FOLtR-ES §4): given two candidate queries whose ranked lists the
  server can rebuild from the seed, the likelihood-ratio test on the received value under
  the click model and the randomized-response channel; its empirical error rates give an
  empirical epsilon (``attacks.epsilon_bounds``) to set beside the enumerated and theoretical ones.
* ``seed-replay``: against a client that reseeds its private generator with the seed it
  sends (``FOLtRES(flawed_seeding=True)``), replays that generator to predict the client's
  queries and click draws. It assumes the strongest server: it knows the click model and the
  relevance labels of its documents (``ServerView.documents``). Against a flawed client it
  reproduces every click; against a correct one its draws are independent of the truth.
"""

from __future__ import annotations

import numpy as np

from attacks.epsilon import maxrr_epsilon
from attacks.epsilon_bounds import audit
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.evolution_strategies import cascade_clicks, flawed_client_draws
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Guess, Messages, ServerView
from fltr_audit.privacy.mechanisms import RandomizedResponse, declared


def first_click_positions(values: np.ndarray) -> np.ndarray:
    """The first-click position a MaxRR value implies: ``round(1 / value) - 1``, -1 for 0."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore"):
        pos = np.rint(1.0 / values) - 1
    return np.where(values > 0, pos, -1).astype(np.int64)


def _metric(view: ServerView) -> np.ndarray:
    if view.messages is None or view.messages.metric is None:
        raise FltrError("foltr attacks: need the individual FOLtR-ES messages (not hidden by aggregation)")
    return np.asarray(view.messages.metric, dtype=np.float64)


class FoltrDecode:
    """``foltr-decode``: guess the document at the implied first-click position as clicked.

    Decisions in the (n, B, k) layout of the shown lists; under ``server-blind`` (no shown
    lists) every one of the ``k`` slots is taken as present.
    """

    name = "foltr-decode"

    def __init__(self, k: int = 10):
        self.k = int(k)

    def guess(self, view: ServerView) -> Guess:
        metric = _metric(view)
        mask = (view.interactions.mask if view.interactions is not None
                else np.ones(metric.shape + (self.k,), dtype=bool))
        pos = first_click_positions(metric)
        decision = (np.arange(mask.shape[-1]) == pos[..., None]) & mask
        return Guess(attack=self.name, score=np.where(mask, decision.astype(np.float64), np.nan), decision=decision)


def transmitted_distribution(first_click: np.ndarray, p: float) -> np.ndarray:
    """P(received value | query) through randomized response (§3.3) over the n = k + 1 outcomes.

    ``first_click`` is the click model's first-click distribution (..., k + 1) (last column:
    no click); the true outcome is kept with probability ``p`` and otherwise replaced by one of
    the ``n - 1`` others uniformly: ``P_T(f) = p P(f) + (1 - p) / (n - 1) * (1 - P(f))``.
    """
    first_click = np.asarray(first_click, dtype=np.float64)
    n = first_click.shape[-1]
    return p * first_click + (1.0 - p) / (n - 1) * (1.0 - first_click)


def outcome_index(values: np.ndarray, k: int = 10) -> np.ndarray:
    """Index of a MaxRR value among the k + 1 outcomes: first-click position, k for no click."""
    pos = first_click_positions(values)
    return np.where(pos >= 0, pos, k)


def log_likelihood_ratio(values: np.ndarray, labels_q1: np.ndarray, labels_q2: np.ndarray, click_model,
                         p: float) -> np.ndarray:
    """``log P_T(value | q1) - log P_T(value | q2)`` of received MaxRR values (§4, Eq. 9).

    Parameters
    ----------
    values : ndarray (T,)
        Received (privatized) MaxRR values.
    labels_q1, labels_q2 : ndarray of int (k,)
        Relevance labels of the two candidate queries' shown lists (-1 on empty slots), which
        the server rebuilds from the seed and the global model.
    p : float
        Randomized-response keep probability (1 without privatization).
    """
    dists = click_model.first_click_distribution(np.stack([np.asarray(labels_q1), np.asarray(labels_q2)]))
    pt = transmitted_distribution(dists, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = np.log(pt[0]) - np.log(pt[1])
    return llr[outcome_index(values, pt.shape[-1] - 1)]


def distinguish_queries(values: np.ndarray, labels_q1: np.ndarray, labels_q2: np.ndarray, click_model,
                        p: float, threshold: float = 0.0) -> np.ndarray:
    """The likelihood-ratio test: True ("q1") where the log-likelihood ratio exceeds ``threshold``."""
    return log_likelihood_ratio(values, labels_q1, labels_q2, click_model, p) > threshold


def audit_query_distinguishing(defense, click_model, *, n_trials: int = 4000, seed: int = 0,
                               confidence: float = 0.95, k: int = 10, threat_model: str = "server") -> dict:
    """Empirical epsilon of the privatized MaxRR from the query-distinguishing test.

    The two queries are the worst-case placements of the exact enumeration
    (``attacks.epsilon.maxrr_epsilon`` over lists of length ``k``); each trial simulates one
    interaction on one of them, sends its MaxRR through ``defense`` (e.g. ``rr(p=0.9)``, or
    none) and scores the received value by the log-likelihood ratio. ``attacks.epsilon_bounds.audit``
    turns the two score samples into the empirical epsilon and its lower bound.

    Returns
    -------
    dict
        The ``AuditResult`` fields plus ``epsilon_enumerated`` (exact Eq. 9),
        ``epsilon_theoretical`` (Eq. 10) and the two placements.
    """
    declared_rr = declared(defense) if defense is not None else None
    p = float(declared_rr.p) if isinstance(declared_rr, RandomizedResponse) else 1.0
    exact = maxrr_epsilon(click_model, p, length=k)
    lists = (np.array(exact.placement_low), np.array(exact.placement_high))   # input 0, input 1

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        clicks = click_model.simulate(np.broadcast_to(lists[which], (n, k)), rng)
        values = metrics.max_rr(clicks)[:, None]
        if defense is not None:
            msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), seed=np.zeros(n, dtype=np.uint64), metric=values)
            values = defense.apply(msgs, np.zeros(0), rng).metric
        return values[:, 0]

    def statistic(values: np.ndarray) -> np.ndarray:
        return log_likelihood_ratio(values, lists[1], lists[0], click_model, p)

    claim = defense.claim if defense is not None else PrivacyClaim()
    result = audit(mechanism, statistic, claim=claim, n_trials=n_trials, seed=seed, confidence=confidence,
                   threat_model=threat_model, mechanism_name=getattr(defense, "name", "none"),
                   attack_name="foltr-distinguish")
    return {**result.as_dict(), "epsilon_enumerated": exact.epsilon, "epsilon_theoretical": exact.theoretical,
            "placement_q1": list(exact.placement_high), "placement_q2": list(exact.placement_low)}


class SeedReplay:
    """``seed-replay``: replay a flawed-seeding client's generator from its public seed.

    Rebuilds each client's queries and click uniforms (``flawed_client_draws``), its shown
    lists under the global model and its perturbation, and its cascade clicks from the labels.
    Decisions are aligned per document onto the lists actually shown: a shown document is
    guessed clicked when the replayed interaction clicked that same document.
    """

    name = "seed-replay"

    def __init__(self, algorithm: FOLtRES):
        self.algorithm = algorithm

    def replay(self, view: ServerView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Replayed (queries (n, B), shown rows (n, B, k), clicks (n, B, k))."""
        if view.documents is None:
            raise FltrError("seed-replay: needs the server's documents (threat model 'server')")
        metric = _metric(view)
        seeds = view.messages.seed
        algo, docs = self.algorithm, view.documents
        queries, uniforms = flawed_client_draws(seeds, docs.n_queries, metric.shape[1], algo.k)
        shown = algo.shown_lists(view.global_params, docs, queries, seeds)
        labels = np.where(shown >= 0, docs.labels[np.maximum(shown, 0)], -1)
        return queries, shown, cascade_clicks(labels, algo.click_model, uniforms)

    def guess(self, view: ServerView) -> Guess:
        if view.interactions is None:
            raise FltrError("seed-replay: needs the shown lists (threat model 'server')")
        _, shown_hat, clicks_hat = self.replay(view)
        clicked_rows = np.where(clicks_hat, shown_hat, -2)                    # (n, B, k)
        actual = view.interactions.shown
        decision = (actual[..., :, None] == clicked_rows[..., None, :]).any(axis=-1) & (actual >= 0)
        score = np.where(actual >= 0, decision.astype(np.float64), np.nan)
        return Guess(attack=self.name, score=score, decision=decision)
