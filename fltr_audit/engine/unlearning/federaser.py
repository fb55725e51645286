"""FedEraser (Liu, Ma, Yang, Wang, Liu, "FedEraser: Enabling Efficient Client-Level Data Removal from
Federated Learning Models", IWQoS 2021, Sec. IV) as Wang, Liu & Zuccon adapt it to federated online
learning to rank (ECIR 2024): the server rebuilds the model from the updates it kept every
``interval`` rounds (``history``), without the forgotten clients.

Starting from the initial model, for each kept round t_j in order:

* the first one (the model is still the one the round started from): the remaining clients' kept
  updates are aggregated as they are -- nothing the forgotten clients sent has reached them yet;
* later ones: each remaining client of the round runs a *calibration* step from the unlearned model
  M~ on ``ceil(ratio B)`` fresh queries (FedEraser's E_cali = r E_local, r = 0.5 by default), giving
  U^_k, and its update is calibrated to the length of the kept one (Eq. 3)::

      U~_k = ||U_k|| U^_k / ||U^_k||

  then aggregated with the kept n_c and applied by the algorithm's own server step (Eq. 4:
  M~_{t_{j+1}} = M~_{t_j} + the aggregate of the U~_k).

The rounds between kept ones are not replayed: the unlearned model takes one step per kept round
(the source of FedEraser's speed-up, T / interval calibration rounds of ``ratio`` the queries).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.messages import Messages, ServerView, VectorKind
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.training import TrainSettings
from fltr_audit.engine.unlearning.history import ServerHistory
from fltr_audit.engine.unlearning.rounds import fresh_queries


def calibrated_updates(kept_norms: np.ndarray, calibration: np.ndarray) -> np.ndarray:
    """FedEraser's update calibration (Eq. 3): each row of ``calibration`` (the U^_k) rescaled to
    the length ``kept_norms[k]`` of the kept update; a zero calibration update stays zero."""
    calibration = np.asarray(calibration, dtype=np.float64)
    norms = np.linalg.norm(calibration, axis=1)
    scale = np.divide(np.asarray(kept_norms, dtype=np.float64), norms, out=np.zeros_like(norms), where=norms > 0)
    return calibration * scale[:, None]


def server_update(algorithm: Any, params: np.ndarray, state: Any, updates: np.ndarray, n_interactions: np.ndarray,
                  participants: np.ndarray, kind: VectorKind, defenses: RoundDefenses, round_index: int,
                  seed: int) -> tuple[np.ndarray, Any]:
    """The server's step on the cohort's ``updates`` (relative to ``params``, sent as ``kind``): its
    aggregator, then the algorithm's server step (what ``federation.run_round`` does after the clients)."""
    vector = updates + params if kind == "weights" else updates
    messages = Messages(n_interactions=np.asarray(n_interactions, dtype=np.int64), vector=vector, vector_kind=kind)
    aggregator = defenses.aggregator
    extra = {"global_params": params} if aggregator.reads_global_model else {}
    agg = aggregator.aggregate(messages, participants, stream(seed, "aggregate", round_index), **extra)
    view = ServerView(round=round_index, threat_model="server", global_params=np.asarray(params, dtype=np.float64),
                      ranker=algorithm.ranker, participants=np.asarray(agg.participants, dtype=np.int64),
                      dropouts=np.asarray(agg.dropouts, dtype=np.int64), messages=agg.messages, aggregate=agg.mean,
                      interactions=None, documents=None, aggregate_kind=kind)
    return algorithm.server_step(params, state, view)


def calibration_updates(algorithm: Any, params: np.ndarray, data: Dataset, settings: TrainSettings,
                        users: np.ndarray, visit: int, per_client: int, defenses: RoundDefenses,
                        round_index: int) -> tuple[np.ndarray, VectorKind]:
    """The U^_k: the ``users``' messages after a calibration step from ``params`` on ``per_client``
    fresh queries, through their client defenses, as updates; and the kind of vector they send."""
    seed = settings.seed
    queries = fresh_queries(settings, data, users, visit, per_client)
    out = algorithm.client_step(params, data, queries, users, stream(seed, "client", round_index),
                                stream(seed, "public", round_index))
    messages = out.messages
    for defense in defenses.client:
        messages = defense.apply(messages, params, stream(seed, "defense", round_index))
    return messages.updates(params), messages.vector_kind


def federaser(algorithm: Any, data: Dataset, settings: TrainSettings, history: ServerHistory,
              forgotten: np.ndarray, *, ratio: float, defenses: RoundDefenses, first_round: int
              ) -> tuple[np.ndarray, int]:
    """The model FedEraser rebuilds without the ``forgotten`` users (sorted) from the kept rounds
    (module docstring); calibration round j is round ``first_round + j``. Returns the model and the
    calibration steps the clients took."""
    seed = settings.seed
    per_client = max(1, math.ceil(ratio * settings.queries_per_client))
    params = np.asarray(algorithm.init_params(stream(seed, "init")), dtype=np.float64)
    state = algorithm.init_server_state(params)
    steps = 0
    for j, kept in enumerate(history.ordered()):
        rows = np.flatnonzero(~np.isin(kept.participants, forgotten))
        if not len(rows):
            continue
        users, kind = kept.participants[rows], kept.kind
        if np.array_equal(params, kept.global_params):  # nothing forgotten has reached this model yet
            updates = kept.updates[rows].astype(np.float64)
        else:
            new, kind = calibration_updates(algorithm, params, data, settings, users, settings.rounds + j,
                                            per_client, defenses, first_round + j)
            updates = calibrated_updates(kept.norms[rows], new)
            steps += len(rows)
        params, state = server_update(algorithm, params, state, updates, kept.n_interactions[rows], users, kind,
                                      defenses, first_round + j, seed)
    return params, steps
