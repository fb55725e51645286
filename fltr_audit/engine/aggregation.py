"""The engine's default aggregation: the n_c-weighted FedAvg mean (FPDGD Algorithm 2)."""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.interfaces import Aggregate, PrivacyClaim
from fltr_audit.engine.messages import Messages


def weighted_mean(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_c n_c v_c / sum_c n_c over the rows of ``vectors``."""
    w = np.asarray(weights, dtype=np.float64)
    return (w @ vectors) / w.sum()


class FedAvg:
    """Plain aggregation: the server sees every message and their weighted mean."""

    name = "plain"
    claim = PrivacyClaim()

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        mean = None if messages.vector is None else weighted_mean(messages.vector, messages.n_interactions)
        return Aggregate(
            mean=mean,
            participants=np.asarray(participants),
            dropouts=np.empty(0, dtype=np.int64),
            messages=messages,
        )
