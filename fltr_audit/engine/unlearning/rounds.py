"""Rounds after training, for the unlearning methods that need the clients again: the remaining
clients' further rounds (``finetune``, PGA's recovery), the forgotten clients' ascent rounds (PGA)
and the calibration rounds of FedEraser.

Round indices continue after training (``rounds + 1``, ...), so every stream of an unlearning round
(``stream(seed, "client", r)``, ...) is one no training round used. Cohorts continue the training's
schedule (``engine.schedule``: the users' visit counts replayed), and users issue fresh queries of
their own streams: online learning to rank cannot replay past interactions (Tao et al., SIGIR 2025).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.federation import present_members, run_round
from fltr_audit.engine.population import query_sets, skewed_queries
from fltr_audit.engine.schedule import RoundSchedule, user_queries
from fltr_audit.engine.training import TrainSettings


def fresh_queries(settings: TrainSettings, data: Dataset, users: np.ndarray, visit: int, per_client: int
                  ) -> np.ndarray:
    """The queries (n, ``per_client``) ``users`` issue in an unlearning round: their own query streams
    (``schedule.user_queries``; label-skew users from their home sets) at visit number ``visit``,
    which the caller keeps at or above ``settings.rounds`` (no user visited that often in training)."""
    users = np.asarray(users, dtype=np.int64)
    visits = np.full(len(users), visit, dtype=np.int64)
    non_iid = settings.non_iid
    if non_iid.setting == "label-skew":
        order, bounds = query_sets(data.labels, data.query_ptr, non_iid.sets)
        return skewed_queries(settings.seed, non_iid, users, visits, per_client, order, bounds)
    return user_queries(settings.seed, users, visits, per_client, data.n_queries)


def replayed_schedule(settings: TrainSettings, data: Dataset, first: int) -> RoundSchedule:
    """The training's schedule advanced to just before round ``first`` (cohorts redrawn, visits counted)."""
    schedule = RoundSchedule(settings, data)
    for r in range(1, first):
        schedule.next_round(r)
    return schedule


def continue_rounds(algorithm: Any, params: np.ndarray, data: Dataset, settings: TrainSettings, *, first: int,
                    count: int, defenses: RoundDefenses, absent: np.ndarray, poisoning: Any = None
                    ) -> tuple[np.ndarray, int]:
    """``count`` more rounds of the federation from ``params``, rounds ``first`` .. ``first + count - 1``
    of the training's schedule, the ``absent`` users (sorted) dropped from every cohort, the training's
    ``poisoning`` (if any) still at work; a fresh server state. Returns the model and the client steps."""
    schedule = replayed_schedule(settings, data, first)
    state = algorithm.init_server_state(params)
    steps = 0
    for r in range(first, first + count):
        ids, queries = present_members(*schedule.next_round(r), absent)
        if len(ids):
            params, state, _, _ = run_round(algorithm, params, state, data, queries, ids, r, settings.seed,
                                            defenses=defenses, threat_model=settings.threat_model,
                                            poisoning=poisoning)
            steps += len(ids)
    return params, steps
