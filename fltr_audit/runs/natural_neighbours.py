"""Natural neighbours for the epsilon audit of a vector message: one probe client's real message
with and without one of its clicks (FPDGD: its local step replayed), else the two probe messages
farthest apart."""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.bayes import Bayes
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.federation import TrainResult
from fltr_audit.engine.messages import RoundBatch
from fltr_audit.engine.probe import probe
from fltr_audit.runs.models import build_algorithm
from fltr_audit.spec.run import RunSpec


AUDIT_POOL = 50


def natural_messages(config: RunSpec, splits: Any, base: TrainResult
                     ) -> tuple[np.ndarray, np.ndarray, str, tuple[np.ndarray, np.ndarray]] | None:
    """Natural neighbours for the epsilon audit (None for seed+metric messages).

    Returns the undefended updates of the first ``AUDIT_POOL`` probe clients under the base
    model (the other cohort members of an aggregate audit), the global model, the vector kind
    and the neighbouring pair: for FPDGD, one probe client's real message *with and without
    one of its clicks* -- its local PDGD step replayed deterministically on the same shown
    list with that click removed (``attacks.bayes.Bayes.replay``), the client and click whose
    removal moves the message most; for messages that cannot be replayed (FedIPS updates), the
    two probe messages farthest apart.
    """
    algorithm = build_algorithm(config, splits, config.algorithm.train_click_model)
    data = splits.get(config.probe.split)
    qpc = config.probe.queries_per_client
    first = data.subset(np.arange(min(AUDIT_POOL * qpc, data.n_queries)))  # one undefended cohort suffices
    batches = probe(algorithm, base.params, first, seed=config.seed, queries_per_client=qpc,
                    cohort_size=AUDIT_POOL)
    messages = batches[0].view.messages
    if messages is None or messages.vector is None:
        return None
    g = np.asarray(base.params, dtype=np.float64)
    pool = messages.updates(g)
    replayable = algorithms.algorithm_spec(config.algorithm.name).message_kind == "weights"  # FPDGD's PDGD step
    pair = _one_click_pair(Bayes(algorithm), batches[0]) if replayable else None
    return pool, g, messages.vector_kind, pair if pair is not None else _farthest_pair(pool)


def _one_click_pair(replayer: Any, batch: RoundBatch) -> tuple[np.ndarray, np.ndarray] | None:
    """(without, with) one click: every probe client's clicks and each of its clicks removed,
    replayed as the client's local step, vectorized over clients; the pair farthest apart in L2
    (None when no client clicked)."""
    clicks = np.asarray(batch.truth.clicks, dtype=bool)                  # (n, B, k)
    n, B, k = clicks.shape
    removed = np.repeat(clicks.reshape(n, 1, B * k), B * k + 1, axis=1)  # candidate 0: the real clicks
    slots = np.arange(B * k)
    removed[:, 1 + slots, slots] = False                                 # candidate 1 + j: click j removed
    updates = replayer.replay(batch.view, removed.reshape(n, B * k + 1, B, k), np.arange(n))  # (n, 1 + B k, P)
    moved = np.linalg.norm(updates[:, 1:] - updates[:, :1], axis=2)
    moved[~clicks.reshape(n, B * k)] = -1.0                              # only removing a real click counts
    i, j = np.unravel_index(np.argmax(moved), moved.shape)
    if moved[i, j] <= 0:
        return None
    return updates[i, 1 + j], updates[i, 0]


def _farthest_pair(updates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two rows of ``updates`` farthest apart in L2 (the strongest neighbouring pair on hand)."""
    sq = (updates**2).sum(1)
    dist = sq[:, None] + sq[None, :] - 2 * updates @ updates.T
    i, j = np.unravel_index(np.argmax(dist), dist.shape)
    return updates[i], updates[j]
