"""``fltr_audit.accountant``: the privacy a defense's claim spends over a run's participation schedule."""

from __future__ import annotations

from typing import Any

from defenses.accounting import ParticipationSchedule, RunAccountant
from fltr_audit.spec.defense import DefenseSpec


def accountant(defense: str, *, rounds: int, clients: int, population: int | None = None, seed: int = 0,
               queries_per_client: int = 4) -> Any:
    """The accountant of ``defense`` over the participation schedule of a run (``defenses.accounting.
    RunAccountant``): ``get_epsilon(delta, scope="server" | "observer", quantile=None)``, ``spent()``;
    a per-value claim (FOLtR-ES's ``rr``) is charged ``queries_per_client`` values per participation."""
    return RunAccountant(DefenseSpec.parse(defense).build(), ParticipationSchedule.of_run(seed, rounds, clients, population),
                         queries_per_client)
