"""Projected gradient ascent (Halimi, Kadhe, Rawat, Baracaldo, "Federated Unlearning: How to
Efficiently Erase a Client in FL?", 2022, Sec. 3), for a federation that forgets several clients.

* Reference model: the average of the *other* clients' models of the last round, w_ref =
  (N w_T - w_T^i) / (N - 1) in the paper; here the n_c-weighted mean of the last round's remaining
  clients' local models, ``w_{T-1} + U_k`` (kept by the server, ``history``).
* Radius: delta, one third of the mean distance from w_ref to random models (the ranker's own
  random initialization; zeros for the linear ranker, whose distance is then ||w_ref||).
* Ascent: starting from w_ref, ``rounds`` rounds in which a cohort of the forgotten clients steps
  *against* its gradient (the algorithm's ``ascending()`` copy: PDGD's implicit objective, FedIPS's
  hinge loss, climbed instead of descended), each aggregate projected back onto the ball
  B(w_ref, delta): ``w <- w_ref + (w - w_ref) min(1, delta / ||w - w_ref||)``.
* Recovery: ``rounds`` rounds of the remaining clients (as ``finetune``).

Halimi et al.'s early stop (a validation accuracy threshold) is left out: the rounds are fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.training import TrainSettings
from fltr_audit.engine.unlearning.history import StoredRound
from fltr_audit.engine.unlearning.rounds import continue_rounds, fresh_queries

RANDOM_MODELS = 10
"""Random models whose mean distance to w_ref sets the radius."""


def reference_model(last: StoredRound | None, forgotten: np.ndarray, trained: np.ndarray) -> np.ndarray:
    """w_ref: the n_c-weighted mean of the local models ``w + U_k`` of the kept round's clients that
    are not ``forgotten``; that round's global model when all of them are, the ``trained`` model
    when no round was kept (a last cohort of absent users only)."""
    if last is None:
        return np.array(trained, dtype=np.float64)
    rows = np.flatnonzero(~np.isin(last.participants, forgotten))
    if not len(rows):
        return last.global_params.copy()
    n = last.n_interactions[rows].astype(np.float64)
    return last.global_params + (n @ last.updates[rows].astype(np.float64)) / n.sum()


def ball_radius(algorithm: Any, reference: np.ndarray, seed: int, draws: int = RANDOM_MODELS) -> float:
    """delta = one third of the mean distance from ``reference`` to ``draws`` random models of the
    algorithm's initialization (``stream(seed, "pga-random", i)``)."""
    distances = [np.linalg.norm(reference - algorithm.init_params(stream(seed, "pga-random", i)))
                 for i in range(draws)]
    return float(np.mean(distances)) / 3.0


def project_to_ball(w: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """The Euclidean projection of ``w`` onto the ball of ``radius`` around ``center``."""
    offset = w - center
    norm = float(np.linalg.norm(offset))
    return w.copy() if norm <= radius else center + offset * (radius / norm)


def ascent_rounds(algorithm: Any, start: np.ndarray, data: Dataset, settings: TrainSettings, forgotten: np.ndarray,
                  *, rounds: int, radius: float, defenses: RoundDefenses, first_round: int, poisoning: Any = None
                  ) -> tuple[np.ndarray, int]:
    """``rounds`` ascent rounds from ``start`` (module docstring): each a cohort of at most
    ``settings.clients`` forgotten users (``stream(seed, "pga-cohort", r)``) on fresh queries, the
    aggregate projected onto B(start, radius). Returns the model and the client steps taken."""
    ascending = algorithm.ascending()
    w, state, steps = start.copy(), ascending.init_server_state(start), 0
    size = min(settings.clients, len(forgotten))
    for j in range(rounds if size else 0):
        r = first_round + j
        ids = np.sort(stream(settings.seed, "pga-cohort", r).choice(forgotten, size, replace=False))
        queries = fresh_queries(settings, data, ids, settings.rounds + j, settings.queries_per_client)
        w, state, _, _ = run_round(ascending, w, state, data, queries, ids, r, settings.seed, defenses=defenses,
                                   threat_model=settings.threat_model, poisoning=poisoning)
        w = project_to_ball(w, start, radius)
        steps += size
    return w, steps


def pga(algorithm: Any, data: Dataset, settings: TrainSettings, trained: np.ndarray, last: StoredRound | None,
        forgotten: np.ndarray, *, rounds: int, defenses: RoundDefenses, first_round: int, absent: np.ndarray,
        poisoning: Any = None) -> tuple[np.ndarray, int]:
    """PGA unlearning of the ``forgotten`` users from the ``trained`` model, the server having kept
    the ``last`` round (module docstring): ascent rounds ``first_round`` .., then ``rounds`` recovery
    rounds of the users who are not ``absent`` (the forgotten and those who never took part).
    Returns the model and the client steps taken; the training's ``poisoning`` stays at work."""
    reference = reference_model(last, forgotten, trained)
    radius = ball_radius(algorithm, reference, settings.seed)
    w, ascent = ascent_rounds(algorithm, reference, data, settings, forgotten, rounds=rounds, radius=radius,
                              defenses=defenses, first_round=first_round, poisoning=poisoning)
    w, recovery = continue_rounds(algorithm, w, data, settings, first=first_round + rounds, count=rounds,
                                  defenses=defenses, absent=absent, poisoning=poisoning)
    return w, ascent + recovery
