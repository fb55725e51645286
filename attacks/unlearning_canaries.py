"""Canary clients for auditing forgetting in one run (issue 41; ``attacks.unlearning_bounds`` turns
their scores into the forgetting bounds and verdicts).

``C`` canaries are members of the population, drawn uniformly apart from the other users to forget,
each *included* with probability 1/2 (its secret). An included canary takes part whenever the
run's schedule draws it into a cohort, and its message is crafted (``CanaryClients``): the global
model moved along its own unit direction u_i by ``scale`` times the round's median real update norm
-- Andrew et al.'s canary clients (ICLR 2024), here really training the model, since unlearning
must act on them. An excluded canary never takes part (``TrainSettings.absent``). Every included
canary is forgotten, so a perfect unlearning leaves a model that does not depend on any secret.

The directions are orthonormal when C <= P (the QR factor of a Gaussian matrix: no canary's
contribution projects on another's direction, so C canaries can all be told apart in a P-parameter
model), random unit vectors otherwise (then the other canaries add cross-talk, and the audit's power
shows it). In an ascent round (PGA) a canary climbs its own loss: it moves against its direction.

Score (``canary_scores``): the cosine of u_i with the model's offset from a reference model that
depends on no secret -- the model retrained without every canary, which the auditor (who knows every
input but the canaries' secrets, the DP adversary) can compute; higher means "included".
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fltr_audit.engine.randomness import stream

DEFAULT_SCALE = 10.0
"""A canary's step, in units of the round's median real update norm."""


@dataclass(frozen=True)
class UnlearningCanaries:
    """The canaries of one audit: their user ids (sorted), secrets, directions (C, P) and step scale."""

    ids: np.ndarray
    present: np.ndarray
    directions: np.ndarray
    scale: float = DEFAULT_SCALE

    @property
    def included(self) -> np.ndarray:
        return self.ids[self.present]

    @property
    def excluded(self) -> np.ndarray:
        return self.ids[~self.present]

    def rows(self, client_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``client_ids`` held by canaries, which canary each is)."""
        client_ids = np.asarray(client_ids, dtype=np.int64)
        if not len(self.ids):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, client_ids), len(self.ids) - 1)
        hit = np.flatnonzero(self.ids[at] == client_ids)
        return hit, at[hit]


def unit_directions(m: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` unit vectors in R^dim: orthonormal (QR of a Gaussian matrix) when m <= dim, else
    independent uniform directions."""
    if m == 0:
        return np.zeros((0, dim))
    if m <= dim:
        q, r = np.linalg.qr(rng.normal(size=(dim, m)))
        return (q * np.sign(np.diag(r))).T  # signs fixed: the factor is then uniform (Haar)
    directions = rng.normal(size=(m, dim))
    return directions / np.linalg.norm(directions, axis=1, keepdims=True)


def design(population: int, canaries: int, forget: int, dim: int, seed: int, scale: float = DEFAULT_SCALE
           ) -> tuple[UnlearningCanaries, np.ndarray]:
    """The canaries of audit ``seed`` (``RunSpec.audit_seed("unlearning")``) and the ``forget`` other
    users to forget (sorted), all distinct members of ``population``; secrets, directions and ids from
    ``stream(seed, "unlearning-canaries")``."""
    rng = stream(seed, "unlearning-canaries")
    chosen = rng.choice(population, canaries + forget, replace=False).astype(np.int64)
    order = np.argsort(chosen[:canaries], kind="stable")
    present = rng.random(canaries) < 0.5
    directions = unit_directions(canaries, dim, rng)
    plan = UnlearningCanaries(chosen[:canaries][order], present[order], directions[order], float(scale))
    return plan, np.sort(chosen[canaries:])


def median_norm(updates: np.ndarray) -> float:
    """The median norm of the non-zero rows of ``updates`` (1 when every row is zero)."""
    norms = np.linalg.norm(updates, axis=1)
    norms = norms[norms > 0]
    return float(np.median(norms)) if len(norms) else 1.0


class CanaryClients:
    """The algorithm ``inner`` whose canary members send crafted messages (module docstring): after
    the cohort's real step, a canary's update is ``sign * scale * median norm * u_i``. Everything
    else is the inner algorithm's (a new click model is passed on to it: per-user populations)."""

    user_clicks: ClassVar[bool] = False

    def __init__(self, inner: Any, plan: UnlearningCanaries, sign: float = 1.0) -> None:
        self.inner, self.plan, self.sign = inner, plan, float(sign)

    def __getattr__(self, name: str) -> Any:
        if name == "inner" or name.startswith("__"):  # during copying, before __dict__ is set
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def click_model(self) -> Any:
        return self.inner.click_model

    @click_model.setter
    def click_model(self, model: Any) -> None:
        self.inner = copy.copy(self.inner)
        self.inner.click_model = model

    def ascending(self) -> "CanaryClients":
        """The inner algorithm's ascent copy, its canaries moving against their directions."""
        return canary_clients(self.inner.ascending(), self.plan, -self.sign)

    def client_step(self, params: np.ndarray, data: Any, queries: np.ndarray, client_ids: np.ndarray,
                    rng: np.random.Generator, public_rng: np.random.Generator, deterministic: bool = False) -> Any:
        out = self.inner.client_step(params, data, queries, client_ids, rng, public_rng, deterministic)
        rows, which = self.plan.rows(client_ids)
        if not len(rows):
            return out
        messages = out.messages
        step = self.sign * self.plan.scale * median_norm(messages.updates(params))
        vector = messages.vector.copy()  # the real rows keep their exact bits
        vector[rows] = step * self.plan.directions[which] + (params if messages.vector_kind == "weights" else 0.0)
        return dataclasses.replace(out, messages=messages.replace(vector=vector))


_CLASSES: dict[type, type] = {}


def canary_clients(inner: Any, plan: UnlearningCanaries, sign: float = 1.0) -> CanaryClients:
    """``inner`` with canary clients; the wrapper's type declares the inner type's ``user_clicks``
    (``engine.population`` reads it from the type)."""
    kind = type(inner)
    if kind not in _CLASSES:
        _CLASSES[kind] = type(f"CanaryClients[{kind.__name__}]", (CanaryClients,),
                              {"user_clicks": getattr(kind, "user_clicks", False)})
    return _CLASSES[kind](inner, plan, sign)


def canary_scores(plan: UnlearningCanaries, params: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """cos(u_i, params - reference) for every canary (all 0 when the two models are equal)."""
    offset = np.asarray(params, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    norm = float(np.linalg.norm(offset))
    return plan.directions @ offset / norm if norm > 0 else np.zeros(len(plan.ids))
