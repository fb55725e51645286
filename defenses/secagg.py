"""Ideal secure aggregation: the server learns the cohort's weighted mean and nothing else."""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.aggregation import weighted_mean
from fltr_audit.errors import CohortLost, FltrError
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.engine.messages import Messages

SECAGG_CLAIM = PrivacyClaim(epsilon=float("inf"), delta=0.0, scope="aggregate")
"""Secure aggregation adds no noise (no DP); it reveals only the aggregate."""


def require_vectors(messages: Messages, name: str) -> None:
    if messages.vector is None:
        raise FltrError(f"{name}: secure aggregation needs vector messages (FPDGD weights or FedIPS "
                        "updates); FOLtR-ES messages carry a seed and metric values")


def draw_dropouts(n: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Which clients drop out after the key exchange, each independently with ``rate``."""
    return rng.random(n) < rate


class IdealSecAgg(AggregatorBase):
    """``secagg(drop)``: computes the n_c-weighted mean of the surviving clients directly -- the
    server view secure aggregation promises (sum, participants, dropouts; no messages) at
    FedAvg's cost. ``drop`` is the rate of clients lost after the key exchange."""

    claim = SECAGG_CLAIM
    min_cohort = 2
    """An aggregate of one client is that client's message."""
    sees = "sum"
    """The server sees only the sum (a robust rule that needs more cannot join it)."""

    def __init__(self, drop: float = 0.0, name: str = "secagg"):
        self.drop, self.name = float(drop), name

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        require_vectors(messages, self.name)
        participants = np.asarray(participants)
        dropped = draw_dropouts(messages.n_clients, self.drop, rng)
        if (~dropped).sum() < 2:
            raise CohortLost(f"{self.name}: {int((~dropped).sum())} of {messages.n_clients} clients survived; "
                            "an aggregate of fewer than 2 is one client's message, round aborted")
        keep = ~dropped
        mean = weighted_mean(messages.vector[keep], messages.n_interactions[keep])
        return Aggregate(mean=mean, participants=participants[keep], dropouts=participants[dropped],
                         messages=None, stats={"bytes_up": float(keep.sum() * (messages.vector.shape[1] + 1) * 8)})
