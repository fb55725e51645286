"""What the server keeps during training so that it can forget clients later (FedEraser's
storage-for-time trade: Liu et al., IWQoS 2021, Sec. IV-A): each kept round's global model, its
participants, their n_c and their updates, read from the messages the server received (an
interceptor of ``federation.train``).

Kept compactly: the updates in float32 (FedEraser calibrates to their norms, which are kept in
float64 from the exact updates; the first kept round is replayed from the float32 updates), the ids
in int64; only the rounds a method needs (``kept_rounds``), so a run that stores nothing costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import RoundBatch


@dataclass(frozen=True)
class StoredRound:
    """One kept round: the global model the cohort started from, the participants (sorted as the
    round had them), their n_c, their updates (float32, ``w_local - w_global``), the float64 norms
    of the exact updates and the kind of vector the clients sent (``weights`` or ``update``)."""

    round: int
    global_params: np.ndarray
    participants: np.ndarray
    n_interactions: np.ndarray
    updates: np.ndarray
    norms: np.ndarray
    kind: str = "weights"

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.global_params, self.participants, self.n_interactions,
                                          self.updates, self.norms)))


def kept_rounds(rounds: int, interval: int) -> tuple[int, ...]:
    """Rounds 1, 1 + interval, 1 + 2 interval, ... (FedEraser's retained rounds t_j), up to ``rounds``."""
    if interval < 1:
        raise ValueError(f"interval must be at least 1, got {interval}")
    return tuple(range(1, rounds + 1, interval))


class ServerHistory:
    """The interceptor that keeps the rounds in ``rounds`` (``kept_rounds``, the last round, ...);
    ``stored`` maps a round to its ``StoredRound``. A kept round whose messages the server does not
    see (secure aggregation) is an error: a method that needs them cannot run there."""

    def __init__(self, rounds: tuple[int, ...] | set[int]) -> None:
        self.rounds = frozenset(int(r) for r in rounds)
        self.stored: dict[int, StoredRound] = {}

    def __call__(self, batch: RoundBatch) -> None:
        view = batch.view
        if view.round not in self.rounds:
            return
        if view.messages is None or view.messages.vector is None:
            raise FltrError(f"round {view.round}: the server sees no client updates to keep for unlearning "
                            "(secure aggregation, or messages without a parameter vector)")
        updates = view.messages.updates(view.global_params)
        self.stored[view.round] = StoredRound(
            round=int(view.round), global_params=np.array(view.global_params, dtype=np.float64),
            participants=np.asarray(view.participants, dtype=np.int64).copy(),
            n_interactions=np.asarray(view.messages.n_interactions, dtype=np.int64).copy(),
            updates=updates.astype(np.float32), norms=np.linalg.norm(updates, axis=1),
            kind=view.messages.vector_kind)

    @property
    def nbytes(self) -> int:
        """Bytes the server keeps."""
        return sum(r.nbytes for r in self.stored.values())

    def ordered(self) -> list[StoredRound]:
        """The kept rounds in order."""
        return [self.stored[r] for r in sorted(self.stored)]
