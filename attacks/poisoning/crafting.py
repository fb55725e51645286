"""The model-poisoning base: malicious rows of a cohort's messages replaced after the honest
clients' defenses, vectorized over the cohort.

A subclass crafts the malicious updates ``vectors(U, bad, rng, oracle)`` from the cohort's updates U
(n, P) relative to the global model (the benign rows ``U[~bad]``, the malicious clients' own honest
rows ``U[bad]``) and, where it applies to FOLtR-ES, the malicious metric values ``metrics(M, bad, rng)``
from the cohort's metric values M (n, B). ``carries`` declares the message kinds it can be written
in; anything else is refused at the door (``catalog.check_applies``).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, ClassVar

import numpy as np

from attacks.poisoning.domains import VECTOR_KINDS
from attacks.poisoning.selection import Malicious
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.messages import Messages

Oracle = Callable[[np.ndarray], np.ndarray]
"""The aggregator the attack faces, as a function of a cohort's updates (n, P) -> its update (P,)."""


def benign_moments(U: np.ndarray, bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate-wise mean and (population) standard deviation of the benign updates."""
    benign = U[~bad]
    return benign.mean(axis=0), benign.std(axis=0)


def aggregator_oracle(aggregator: Any, messages: Messages, global_params: np.ndarray,
                      rng: np.random.Generator) -> Oracle:
    """``aggregator`` on the cohort's messages with candidate updates: a fresh copy per call (an
    aggregator keeps state, e.g. adaptive clipping), noise from ``rng``; the update it releases."""
    g = np.asarray(global_params, dtype=np.float64)
    ids = np.arange(messages.n_clients, dtype=np.int64)

    def oracle(updates: np.ndarray) -> np.ndarray:
        agg = copy.copy(aggregator)
        extra = {"global_params": g} if agg.reads_global_model else {}
        out = agg.aggregate(messages.with_updates(updates, g), ids, rng, **extra).mean
        return out - g if messages.vector_kind == "weights" else out

    return oracle


class Crafting(Malicious):
    """Model poisoning: ``craft`` writes ``vectors`` (or ``metrics``) into the malicious rows."""

    carries: ClassVar[tuple[str, ...]] = VECTOR_KINDS

    def craft(self, messages: Messages, malicious: np.ndarray, global_params: np.ndarray, aggregator: Any,
              rng: np.random.Generator) -> Messages:
        bad = np.asarray(malicious, dtype=bool)
        if messages.vector is not None and messages.vector_kind in self.carries:
            g = np.asarray(global_params, dtype=np.float64)
            U = messages.updates(g)
            out = U.copy()
            out[bad] = self.vectors(U, bad, rng, aggregator_oracle(aggregator, messages, g, rng))
            return messages.with_updates(out, g)
        if messages.metric is not None and "seed+metric" in self.carries:
            metric = np.array(messages.metric, dtype=np.float64)
            metric[bad] = self.metrics(metric, bad, rng)
            return messages.replace(metric=metric)
        raise ParameterError("poison", f"{self.name}: these messages carry no part it can write "
                                       f"(it writes {', '.join(self.carries)} messages)")

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        """The malicious updates, shape (bad.sum(), P)."""
        raise NotImplementedError

    def metrics(self, M: np.ndarray, bad: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The malicious metric values, shape (bad.sum(), B)."""
        raise NotImplementedError
