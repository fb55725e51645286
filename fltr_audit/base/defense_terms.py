"""The words a defense is described in -- what its claim protects (``Scope``), where it acts
(``Role``), what it transforms (``Privatizes``), what an aggregator must see (``Sees``) and the
claim itself (``PrivacyClaim``) -- without numpy, so that the defense catalog lists defenses
without importing them. ``fltr_audit.engine.interfaces`` gives them to the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Scope = Literal["message", "aggregate", "none"]
"""What a privacy claim protects: each message, only the cohort's aggregate, or nothing."""
SCOPES: tuple[str, ...] = get_args(Scope)
Role = Literal["client", "aggregator"]
"""Where a defense acts: on each client's message, or when combining the cohort's."""
ROLES: tuple[str, ...] = get_args(Role)
Privatizes = Literal["vector", "metric"]
"""Which part of a message a client defense transforms: the parameter vector or the metric values."""
Sees = Literal["updates", "distances", "sum"]
"""What an aggregator must see of a cohort's messages (its class declares ``sees``): each client's
update (plain, order statistics, a trusted DP server), their pairwise distances and the updates they
select (Krum), or only their sum (secure aggregation; a norm bound each client proves)."""
SEES: tuple[str, ...] = get_args(Sees)


@dataclass(frozen=True)
class PrivacyClaim:
    """The guarantee a defense claims: (epsilon, delta)-DP per round, and for what.

    ``scope`` is ``message`` when each client message is protected on its own,
    ``aggregate`` when only the cohort's sum is, ``none`` when nothing is claimed.
    ``epsilon`` is ``inf`` when no DP guarantee is claimed.
    """

    epsilon: float = float("inf")
    delta: float = 0.0
    scope: Scope = "none"
