"""``fltrust(queries=R)``: trust bootstrapping from a small root set the server owns (Cao et al.,
NDSS 2021, "FLTrust"), for ranking: the server holds R labelled training queries (its editorial
judgments, a threat model where the server has clean data) and each round runs the algorithm's own
local step on B of them, clicks simulated from their labels by the users' click model, for the root
update g0. A client's trust score is ``TS_i = ReLU(cos(u_i, g0))``; its update is rescaled to
``||g0||`` and the released update is ``sum_i TS_i ||g0|| u_i / ||u_i|| / sum_i TS_i`` (Eq. 4-5);
a round where every score is 0 releases no update (counted in ``fallbacks``).

The root step is bound to a run by the composition root (``binding.bind_run``: the algorithm, its
training split, the run seed); an unbound ``fltrust`` refuses to aggregate.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, ClassVar

import numpy as np

from defenses.robust.aggregators import RobustAggregator
from fltr_audit.engine.randomness import stream
from fltr_audit.errors import FltrError

RootStep = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""``root(global_params, rng) -> g0``: the server's update on its root queries this round."""
ROOT_CLIENT = 2**40
"""The user id the server's root step runs as (no client has it)."""


def trust_mean(U: np.ndarray, g0: np.ndarray) -> tuple[np.ndarray, bool]:
    """FLTrust's combination (module docstring) and whether any client had a positive trust score."""
    U = np.asarray(U, dtype=np.float64)
    g0 = np.asarray(g0, dtype=np.float64)
    norms, root = np.linalg.norm(U, axis=1), float(np.linalg.norm(g0))
    if root == 0.0:
        return np.zeros_like(g0), False
    cos = np.where(norms > 0, (U @ g0) / (np.where(norms > 0, norms, 1.0) * root), 0.0)
    trust = np.maximum(cos, 0.0)
    if trust.sum() <= 0.0:
        return np.zeros_like(g0), False
    scaled = U * (root / np.where(norms > 0, norms, 1.0))[:, None]
    return (trust @ scaled) / trust.sum(), True


class FLTrust(RobustAggregator):
    """See the module docstring; ``queries`` is the size R of the root set."""

    needs_server_data: ClassVar[bool] = True

    def __init__(self, queries: int = 10, name: str = "fltrust", view: str = "updates") -> None:
        super().__init__(name, view)
        self.queries = int(queries)
        self.root: RootStep | None = None
        self._g0 = np.zeros(0)

    def with_root(self, root: RootStep) -> "FLTrust":
        """A copy bound to the run's root step."""
        out = copy.copy(self)
        out.root = root
        return out

    def prepare(self, global_params: np.ndarray, rng: np.random.Generator) -> None:
        """This round's root update g0 (before ``combine``)."""
        if self.root is None:
            raise FltrError(f"{self.name}: the server's root set is not bound to the run "
                            "(defenses.robust.binding.bind_run)")
        self._g0 = self.root(np.asarray(global_params, dtype=np.float64), rng)

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        out, trusted = trust_mean(U, self._g0)
        self.fallbacks += not trusted
        return out


def root_step(algorithm: Any, data: Any, queries: int, queries_per_client: int, seed: int) -> RootStep:
    """The server's root step: R = ``queries`` training queries drawn once (``stream(seed,
    "fltrust-root")``); each call runs ``algorithm.client_step`` as one client on B of them drawn
    from ``rng`` (with replacement when B > R) and returns its update."""
    pool = stream(seed, "fltrust-root").choice(data.n_queries, size=min(int(queries), data.n_queries), replace=False)
    B = int(queries_per_client)

    def root(global_params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        picked = rng.choice(pool, size=B, replace=B > len(pool)).astype(np.int64)[None, :]
        out = algorithm.client_step(global_params, data, picked, np.array([ROOT_CLIENT]), rng, rng)
        if out.messages.vector is None:  # FOLtR-ES: its share of the gradient, read off seed and metric
            return algorithm.message_updates(out.messages)[0]
        return out.messages.updates(global_params)[0]

    return root
