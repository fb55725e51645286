"""Canaries for auditing the privacy of a whole run (issue 25; ``attacks.whole_run_bounds`` turns
their scores into bounds).

``m`` canaries, each with a secret bit ``present`` (probability 1/2) and a participation schedule
drawn like a population member's (each round with probability cohort / population, from the run's
seed), ride along the real rounds through an observer of the federation loop
(``fltr_audit.engine.round_parts``): the real cohort's messages, aggregate and model are never changed.

* **Aggregate scope** (the server sees only the cohort's aggregate: ``dp-fedavg``, ``ddgauss``,
  ``secagg``, ``...+secagg``) -- canary *clients* (Andrew et al., ICLR 2024): a random unit
  direction u_i scaled to the clip norm, inserted into its rounds' cohorts when present (add/remove
  neighbours, the aggregators' claim); the observer passes the cohort's defended messages plus the
  present canaries' through a copy of the aggregator (its own noise stream) and scores each
  scheduled canary by the cosine of u_i with that round's model delta, summed over its rounds and
  divided by sqrt(its participations). The delta is taken as a residual: the sum the aggregate
  stands for (mean x its weight: the count for ``dp-fedavg`` / ``ddgauss``, the interactions
  otherwise) minus the cohort's own part of it -- the DP adversary knows every input but the
  canaries', and in a few dozen dimensions the cohort's own updates would otherwise drown the
  canaries (Andrew et al. work in millions of dimensions, where the plain cosine suffices). The
  cohort's part (``reference``): for an aggregator that declares clipping to ``radius`` before its
  noise (``dp-fedavg``, ``ddgauss``), the exact sum of the cohort's updates clipped to it (no second
  aggregate: the residual holds one noise draw, and the round one extra aggregation); otherwise the
  same cohort without canaries through another copy of the aggregator (an independent noise draw).
* **Message scope** (the server reads each message) -- canary *users*: the user's message in every
  participation is +x_i (secret present) or -x_i (absent), x_i at the clip radius of the noise
  mechanism (a coordinate axis for an L1 clip, a random unit direction for L2; replace-one
  neighbours, the local claims'), through the client defenses calibrated for the real cohort; the
  score is the log-likelihood ratio of its messages (Laplace: sum_j (|v_j + x_j| - |v_j - x_j|) / b;
  Gaussian, Gamma-difference shares and no noise: the projection <v, x>, the Gaussian's ratio up to
  scale), summed over its participations.
* **Metric messages** (FOLtR-ES, scope message) -- canary users whose secret is one query's click:
  the first metric value of each of its messages is the domain's largest (present) or smallest
  (absent) value, the others the smallest; after the client defenses (randomized response) the
  score adds +1 when the first value arrives as the largest, -1 as the smallest -- the likelihood
  ratio of randomized response up to its constant log(p (n - 1) / (1 - p)).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from fltr_audit.engine.messages import Messages
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.round_parts import RoundParts

TESTS = ("cosine", "projection", "laplace", "metric")
REFERENCES = ("aggregate", "clipped-sum")
OVERSHOOT = 100.0
"""Canaries are sent at this multiple of the clip radius: a correct implementation clips them to the
radius (nothing changes), one that skips clipping shows them whole."""


@dataclass(frozen=True)
class CanaryDesign:
    """Where the canaries go and how they are scored.

    Attributes
    ----------
    scope : {"aggregate", "message"}
    directions : ndarray (m, P) -- unit vectors u_i
    present : ndarray (m,) bool -- the secrets
    schedule : ndarray (rounds, m) bool -- canary i takes part in round r + 1
    radius : float or None -- the clip radius (None: the round's median real update norm); canaries
        are sent at ``overshoot`` times it
    relative_to : {"update", "weights"} -- the clip acts on the update (canary weights g + x) or on
        the weights (canary weights x)
    test : one of ``TESTS``; ``noise_scale`` the Laplace scale b of the ``laplace`` test
    population : int -- canary ids start here (beyond every real user)
    reference : {"aggregate", "clipped-sum"} -- the cohort's part of an aggregate-scope residual
        (module docstring)
    """

    scope: str
    directions: np.ndarray
    present: np.ndarray
    schedule: np.ndarray
    radius: float | None
    relative_to: str
    test: str
    noise_scale: float = 1.0
    population: int = 0
    weighting: str = "interactions"
    overshoot: float = OVERSHOOT
    values: tuple[float, ...] = ()
    reference: str = "aggregate"

    @property
    def participations(self) -> np.ndarray:
        return self.schedule.sum(axis=0)


def design(scope: str, m: int, dim: int, rounds: int, rate: float, seed: int, *, radius: float | None,
           relative_to: str = "update", test: str = "cosine", noise_scale: float = 1.0, axes: bool = False,
           population: int = 0, weighting: str = "interactions", values: tuple[float, ...] = (),
           reference: str = "aggregate") -> CanaryDesign:
    """A canary design for run ``seed``: secrets, directions (coordinate axes with random signs when
    ``axes``) and schedules drawn from ``stream(seed, "canaries")``, independent of the run's other
    streams."""
    if test not in TESTS:
        raise ValueError(f"unknown canary test {test!r}")
    if reference not in REFERENCES or (reference == "clipped-sum" and radius is None):
        raise ValueError(f"canary reference {reference!r} needs one of {REFERENCES} (clipped-sum: a radius)")
    rng = stream(seed, "canaries")
    present = rng.random(m) < 0.5
    if axes:
        directions = np.zeros((m, dim))
        directions[np.arange(m), rng.integers(0, dim, m)] = rng.choice([-1.0, 1.0], m)
    else:
        directions = rng.normal(size=(m, dim))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    schedule = rng.random((rounds, m)) < rate
    return CanaryDesign(scope, directions, present, schedule, radius, relative_to, test, noise_scale, population,
                        weighting, values=tuple(values), reference=reference)


def _typical_norm(updates: np.ndarray) -> float:
    """The median norm of the round's non-zero updates (1 when every update is zero)."""
    norms = np.linalg.norm(updates, axis=1)
    norms = norms[norms > 0]
    return float(np.median(norms)) if len(norms) else 1.0


class CanaryObserver:
    """The federation observer that runs the canaries of ``design`` and accumulates their scores."""

    def __init__(self, plan: CanaryDesign) -> None:
        self.plan = plan
        self.sums = np.zeros(len(plan.present))

    def scores(self) -> np.ndarray:
        """Each canary's score (higher: "present"); 0 for a canary that never took part."""
        if self.plan.scope == "aggregate":
            return self.sums / np.sqrt(np.maximum(self.plan.participations, 1))
        return self.sums.copy()

    def __call__(self, parts: RoundParts) -> None:
        plan = self.plan
        scheduled = np.flatnonzero(plan.schedule[parts.round_index - 1])
        if not len(scheduled):
            return
        if plan.test == "metric":
            self._metric_round(parts, scheduled)
            return
        g = np.asarray(parts.params, dtype=np.float64)
        real = parts.undefended.updates(g)
        radius = plan.radius if plan.radius is not None else _typical_norm(real)
        if plan.scope == "aggregate":
            rows = scheduled[plan.present[scheduled]]
            x = plan.overshoot * radius * plan.directions[rows]
        else:
            rows = scheduled
            x = plan.overshoot * radius * plan.directions[rows] * np.where(plan.present[rows], 1.0, -1.0)[:, None]
        defended = self._defend(parts, x, g)
        if plan.scope == "aggregate":
            delta = self._aggregate_delta(parts, defended, rows, g)
            norm = np.linalg.norm(delta)
            if norm > 0:
                self.sums[scheduled] += plan.directions[scheduled] @ delta / norm
            return
        v = defended.updates(g) if plan.relative_to == "update" else defended.weights(g)
        xu = radius * plan.directions[rows]  # the test knows the direction, never the secret's sign
        if plan.test == "laplace":
            self.sums[rows] += (np.abs(v + xu) - np.abs(v - xu)).sum(axis=1) / plan.noise_scale
        else:
            self.sums[rows] += np.einsum("ij,ij->i", v, xu)

    def _metric_round(self, parts: RoundParts, rows: np.ndarray) -> None:
        """Canary users of metric messages (module docstring), through the client defenses."""
        und = parts.undefended
        low, high = self.plan.values[0], self.plan.values[-1]
        metric = np.full((len(rows), und.metric.shape[1]), low)
        metric[:, 0] = np.where(self.plan.present[rows], high, low)
        canaries = Messages(n_interactions=np.full(len(rows), und.metric.shape[1], dtype=und.n_interactions.dtype),
                            seed=np.zeros(len(rows), dtype=np.uint64), metric=metric)
        rng = stream(parts.seed, "canary-defense", parts.round_index)
        for defense in parts.client_defenses:
            canaries = defense.apply(canaries, parts.params, rng)
        first = canaries.metric[:, 0]
        self.sums[rows] += np.isclose(first, high).astype(float) - np.isclose(first, low).astype(float)

    def _defend(self, parts: RoundParts, x: np.ndarray, g: np.ndarray) -> Messages:
        """The canaries' messages through the client defenses, calibrated with the real cohort (the
        real rows go along, so that cohort-sized noise shares fit; their output is dropped)."""
        und = parts.undefended
        base = g if self.plan.relative_to == "update" else np.zeros_like(g)
        weights = base + x
        vector = weights - g if und.vector_kind == "update" else weights
        n = np.full(len(x), int(np.median(und.n_interactions)), dtype=und.n_interactions.dtype)
        both = Messages(n_interactions=np.concatenate([und.n_interactions, n]),
                        vector=np.concatenate([und.vector, vector]), vector_kind=und.vector_kind)
        rng = stream(parts.seed, "canary-defense", parts.round_index)
        for defense in parts.client_defenses:
            both = defense.apply(both, g, rng)
        k = und.n_clients
        return Messages(n_interactions=both.n_interactions[k:], vector=both.vector[k:], vector_kind=both.vector_kind)

    def _aggregate_delta(self, parts: RoundParts, canaries: Messages, rows: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The residual of the round's aggregate with the present canaries (module docstring): each
        aggregate through its own copy of the aggregator and noise stream, scaled back to a sum."""
        real = parts.defended
        both = Messages(n_interactions=np.concatenate([real.n_interactions, canaries.n_interactions]),
                        vector=np.concatenate([real.vector, canaries.vector]), vector_kind=real.vector_kind)
        ids = np.concatenate([parts.client_ids, self.plan.population + rows]).astype(np.int64)
        with_canaries = self._sum(parts, both, ids, g, "canary-aggregate")
        if self.plan.reference == "clipped-sum":
            updates = real.updates(g)
            norms = np.linalg.norm(updates, axis=1, keepdims=True)
            scale = np.minimum(1.0, self.plan.radius / np.where(norms > 0, norms, 1.0))
            return with_canaries - (updates * scale).sum(axis=0)
        without = self._sum(parts, real, np.asarray(parts.client_ids, dtype=np.int64), g, "canary-reference")
        return with_canaries - without

    def _sum(self, parts: RoundParts, msgs: Messages, ids: np.ndarray, g: np.ndarray, purpose: str) -> np.ndarray:
        aggregator = copy.deepcopy(parts.aggregator)
        extra = {"global_params": g} if aggregator.reads_global_model else {}
        agg = aggregator.aggregate(msgs, ids, stream(parts.seed, purpose, parts.round_index), **extra)
        delta = agg.mean - g if msgs.vector_kind == "weights" else agg.mean
        weight = msgs.n_clients if self.plan.weighting == "count" else float(np.sum(msgs.n_interactions))
        return delta * weight
