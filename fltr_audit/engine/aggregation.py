"""The engine's default aggregation, the n_c-weighted FedAvg mean (FPDGD Algorithm 2), and the
defenses of a round as the engine applies them (``RoundDefenses``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fltr_audit.engine.interfaces import Aggregate, Aggregator, AggregatorBase, ClientDefense, PrivacyClaim
from fltr_audit.engine.messages import Messages


def weighted_mean(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_c n_c v_c / sum_c n_c over the rows of ``vectors``."""
    w = np.asarray(weights, dtype=np.float64)
    return (w @ vectors) / w.sum()


class FedAvg(AggregatorBase):
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


@dataclass(frozen=True)
class RoundDefenses:
    """A round's defenses as the engine applies them: the client-side transforms in order, then
    the aggregator (None: FedAvg); ``name`` is the stack's canonical name (None: its parts' names
    joined by ``+``). ``defenses.stack``'s ``DefenseStack`` is one, built fresh for each run."""

    client: tuple[ClientDefense, ...] = ()
    aggregator: Aggregator | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "client", tuple(self.client))
        if self.aggregator is None:
            object.__setattr__(self, "aggregator", FedAvg())
        if self.name is None:
            object.__setattr__(self, "name", "+".join([d.name for d in self.client] + [self.aggregator.name]))
