"""Robust aggregators of a defense stack: the cohort's updates combined by a robust rule (``rules``)
instead of the n_c-weighted mean. Each is given the global model (``reads_global_model``), combines
the updates ``vector - global`` (FOLtR-ES: each client's share of the ES gradient, read off its
seed and metric by the algorithm's ``message_updates``, bound by the run: ``binding``) and releases
the result in the messages' vector kind (FOLtR-ES: the combined gradient). The server sees the
messages (it needs them), or with ``view="output"`` -- the rule run inside a secure robust-aggregation
protocol -- only the released output (what the rule reveals beyond the mean is then measured on it:
Krum's output is one client's update). Each declares what it must see (``sees``: whether it
composes with secure aggregation, ``compose``) and claims no privacy.

Odd cohorts never stop a run: Krum and Multi-Krum in a cohort of n < 2f + 3 (a probe remainder, a
tiny population) use the largest f that n allows, ``(n - 3) // 2``, and the mean below 3 clients;
Multi-Krum keeps at most n - f. Every such round is counted in ``fallbacks`` (and ``stats``).
"""

from __future__ import annotations

import copy
from typing import Callable, ClassVar

import numpy as np

from defenses.robust import rules
from fltr_audit.engine.aggregation import weighted_mean
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim, Sees
from fltr_audit.engine.messages import Messages
from fltr_audit.errors import FltrError


class RobustAggregator(AggregatorBase):
    """The shared part: updates in, ``combine(U, weights)`` out, in the messages' vector kind."""

    reads_global_model = True
    robust_rule: ClassVar[bool] = True
    """Declares a robust combination rule (``compose`` lets dp-fedavg or a secure sum wrap it)."""
    claim = PrivacyClaim()
    sees: ClassVar[Sees] = "updates"

    def __init__(self, name: str, view: str = "updates") -> None:
        self.name, self.view, self.fallbacks = name, view, 0
        self.decoder: Callable[[Messages], np.ndarray] | None = None

    def with_decoder(self, decoder: Callable[[Messages], np.ndarray]) -> "RobustAggregator":
        """A copy that reads each client's update off messages without a vector (FOLtR-ES's seed and
        metric values: ``message_updates`` of an algorithm declaring ``decodes_messages``)."""
        out = copy.copy(self)
        out.decoder = decoder
        return out

    def updates(self, messages: Messages, g: np.ndarray) -> np.ndarray:
        """The cohort's updates: the vectors relative to ``g``, or what the bound decoder reads."""
        if messages.vector is not None:
            return messages.updates(g)
        if self.decoder is None:
            raise FltrError(f"{self.name}: the messages carry no parameter vector and no decoder of them is bound "
                            "(FOLtR-ES: the run binds its message_updates)")
        return self.decoder(messages)

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The rule on the cohort's updates (n, P) and n_c weights (n,): the released update (P,)."""
        raise NotImplementedError

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator,
                  global_params: np.ndarray | None = None) -> Aggregate:
        if global_params is None and messages.vector is not None:
            global_params = np.zeros(messages.vector.shape[1])
        U = self.updates(messages, global_params)
        g = np.zeros(U.shape[1]) if global_params is None else np.asarray(global_params, dtype=np.float64)
        self.prepare(g, rng)
        update = self.release(self.combine(U, np.asarray(messages.n_interactions)), rng)
        weights = messages.vector is not None and messages.vector_kind == "weights"
        return Aggregate(mean=update + g if weights else update,
                         participants=np.asarray(participants), dropouts=np.empty(0, dtype=np.int64),
                         messages=None if self.view == "output" else messages,
                         stats={"fallbacks": float(self.fallbacks)})

    def prepare(self, global_params: np.ndarray, rng: np.random.Generator) -> None:
        """What the rule needs of the round before ``combine`` (fltrust: the root update)."""

    def release(self, update: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """What the server releases of the combined update (norm-bound may add noise)."""
        return update


class Median(RobustAggregator):
    """``median``: the coordinate-wise median (Yin et al. 2018): order statistics of the updates."""

    def __init__(self, name: str = "median", view: str = "updates") -> None:
        super().__init__(name, view)

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return rules.coordinate_median(U)


class TrimmedMean(RobustAggregator):
    """``trimmed-mean(beta)``: per coordinate floor(beta n) values trimmed at each end (Yin et al. 2018)."""

    def __init__(self, beta: float = 0.1, name: str = "trimmed-mean", view: str = "updates") -> None:
        super().__init__(name, view)
        self.beta = float(beta)

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return rules.trimmed_mean(U, self.beta)


class Krum(RobustAggregator):
    """``krum(f)``: the update of smallest Krum score (Blanchard et al. 2017); needs n >= 2f + 3."""

    sees: ClassVar[Sees] = "distances"

    def __init__(self, f: int = 1, name: str = "krum", view: str = "updates") -> None:
        super().__init__(name, view)
        self.f = int(f)

    @property
    def min_cohort(self) -> int:
        return 2 * self.f + 3

    def check_cohort(self, n: int) -> None:
        if n < self.min_cohort:
            raise FltrError(f"a cohort of {n} clients is below 2f + 3 = {self.min_cohort} (Blanchard et al. 2017)")

    def tolerated(self, n: int) -> int | None:
        """The f used in a cohort of n (None: too few clients for Krum, the mean is used)."""
        if n >= self.min_cohort:
            return self.f
        self.fallbacks += 1
        return (n - 3) // 2 if n >= 3 else None

    def kept(self, n: int, f: int) -> int:
        return 1

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        f = self.tolerated(len(U))
        if f is None:
            return weighted_mean(U, weights)
        return U[rules.krum_select(U, f, self.kept(len(U), f))].mean(axis=0)


class MultiKrum(Krum):
    """``multi-krum(f, m)``: the mean of the m updates of smallest Krum score (m = 0: n - f)."""

    def __init__(self, f: int = 1, m: int = 0, name: str = "multi-krum", view: str = "updates") -> None:
        super().__init__(f, name, view)
        self.m = int(m)

    def check_cohort(self, n: int) -> None:
        super().check_cohort(n)
        if self.m > n - self.f:
            raise FltrError(f"m = {self.m} exceeds n - f = {n - self.f} for a cohort of {n} clients")

    def kept(self, n: int, f: int) -> int:
        if self.m == 0:
            return n - f
        if self.m > n - f:
            self.fallbacks += 1
        return min(self.m, n - f)


class NormBound(RobustAggregator):
    """``norm-bound(clip, sigma)``: every update scaled to L2 norm at most ``clip``, the n_c-weighted
    mean, plus N(0, sigma^2) per coordinate when sigma > 0 (Sun et al. 2019, norm bounding and
    "weak DP"; no DP claim is made). A client can prove its norm bound under secure aggregation, so
    the server needs only the sum: it composes with ``secagg``."""

    sees: ClassVar[Sees] = "sum"

    def __init__(self, clip: float = 1.0, sigma: float = 0.0, name: str = "norm-bound", view: str = "updates") -> None:
        super().__init__(name, view)
        self.clip, self.sigma = float(clip), float(sigma)

    def bound(self, messages: Messages, global_params: np.ndarray) -> Messages:
        """The client-side part: each message's update clipped (what a secure sum then adds up)."""
        return messages.with_updates(rules.norm_bound(messages.updates(global_params), self.clip), global_params)

    def combine(self, U: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return weighted_mean(rules.norm_bound(U, self.clip), weights)

    def release(self, update: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return update + rng.normal(0.0, self.sigma, size=update.shape) if self.sigma > 0 else update
